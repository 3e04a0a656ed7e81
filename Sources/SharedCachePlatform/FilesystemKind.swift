/// Whether a directory is on a local filesystem or one shared over a network, where file
/// events (inotify, kqueue) do not report other machines' writes and locks may not hold.
package enum FilesystemKind: Equatable, Sendable {
    case local
    /// A network or host-shared filesystem, by the name its type goes by.
    case network(String)

    /// Linux `statfs` magic numbers of network and host-shared filesystems (linux/magic.h).
    package static let linuxNetworkMagics: [Int64: String] = [
        0x6969: "nfs", 0x517B: "smb", 0xFF53_4D42: "cifs", 0xFE53_4D42: "smb2", 0x0102_1997: "9p",
        0x00C3_6400: "ceph", 0x5346_414F: "afs", 0x6573_5546: "fuse", 0x0BD0_0BD0: "lustre",
        0x1338_0404: "gfs2", 0x7461_636F: "ocfs2",
    ]

    /// Darwin `statfs` type names of network filesystems.
    package static let darwinNetworkNames: Set<String> = [
        "nfs", "smbfs", "afpfs", "webdav", "cifs", "ftp", "macfuse", "osxfuse", "virtiofs", "vmhgfs",
    ]

    package init(linuxMagic magic: Int64) {
        self = Self.linuxNetworkMagics[magic].map { .network($0) } ?? .local
    }

    /// `isLocal`: whether `statfs` sets `MNT_LOCAL`, which a filesystem of a name not listed
    /// here can leave clear too.
    package init(darwinTypeName name: String, isLocal: Bool = true) {
        self = Self.darwinNetworkNames.contains(name) || !isLocal ? .network(name) : .local
    }
}
