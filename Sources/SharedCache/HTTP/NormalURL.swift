import Foundation
import SharedCacheFormat

/// A URL in the one spelling that equivalent spellings share (RFC 9110 §4.2.3, RFC 3986
/// §6.2.2-6.2.3), so that `http://EXAMPLE.com:80/%7esmith` and `http://example.com/~smith`
/// are one cache entry: scheme and host in lowercase, the port in decimal without leading
/// zeros and dropped when it is the scheme's default (or empty), `/` for an empty http(s) path
/// after a host, a percent-encoded unreserved character decoded and any other percent-encoding
/// in uppercase hex (in the host, userinfo, path and query), no fragment. The path's, query's
/// and userinfo's case, an IP literal (whose zone may be case-sensitive), and their other
/// characters are kept as they are. Text that does not start with a scheme (RFC 3986 §3.1) is a
/// relative reference, kept as it is but for its fragment.
///
/// Written by hand over the bytes, in under a microsecond: URLComponents costs ~13 µs a URL on
/// Linux, a tenth of a revalidation's own work.
struct NormalURL: Equatable {
    /// `scheme://host[:port]`, or the scheme alone for a URL without an authority.
    private(set) var origin: String
    /// The whole URL, fragment removed.
    private(set) var string: String

    init(_ url: URL) {
        let absolute = url.absoluteString
        // Most URLs are written so already: one scan, and the text itself (a fetch's key is
        // computed on every fetch, whose fresh hit is ~5 µs).
        if let originEnd = Self.originEndIfNormal(absolute.utf8) {
            self.init(origin: String(absolute[..<originEnd]), string: absolute)
        } else {
            self.init(parsing: absolute)
        }
    }

    private init(origin: String, string: String) {
        (self.origin, self.string) = (origin, string)
    }

    /// The normal form of any URL's text, parsed in full.
    init(parsing absolute: String) {
        let text = Array(absolute.utf8)
        let bytes = text[..<(text.firstIndex(of: UInt8(ascii: "#")) ?? text.endIndex)]
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), Self.isScheme(bytes[..<colon]) else {
            (origin, string) = ("", String(decoding: bytes, as: UTF8.self))
            return
        }
        let scheme = String(decoding: bytes[..<colon].map(Self.lowercased), as: UTF8.self)
        var rest = bytes[(colon + 1)...]
        let slashes = rest.starts(with: "//".utf8) ? "//" : ""
        var (userinfo, hostAndPort) = ("", "")
        if !slashes.isEmpty {
            let authority = rest.dropFirst(2).prefix { $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") }
            rest = rest[authority.endIndex...]
            let at = authority.lastIndex(of: UInt8(ascii: "@"))
            userinfo = at.map { String(decoding: Self.percentNormalized(authority[...$0]), as: UTF8.self) } ?? ""
            hostAndPort = Self.hostAndPort(at.map { authority[($0 + 1)...] } ?? authority, scheme: scheme)
        }
        var target = Self.percentNormalized(rest)
        if !slashes.isEmpty, Self.defaultPort(scheme) != nil, target.first != UInt8(ascii: "/") {
            target.insert(UInt8(ascii: "/"), at: 0)
        }
        // The userinfo is part of the URL, not of its origin.
        origin = "\(scheme):\(slashes)\(hostAndPort)"
        string = "\(scheme):\(slashes)\(userinfo)\(hostAndPort)\(String(decoding: target, as: UTF8.self))"
    }

    /// Where the origin of `text` ends, if `text` is in normal form with nothing to check
    /// further: a lowercase scheme and `//`, a lowercase host without userinfo or IP literal, a
    /// port (if any) that is not the scheme's default nor starts with 0, a path (for http and
    /// https), and no `%` or `#` anywhere. `nil` for anything else, which the full parse handles.
    static func originEndIfNormal(_ text: String.UTF8View) -> String.Index? {
        guard let colon = text.firstIndex(of: UInt8(ascii: ":")), isScheme(text[..<colon]),
            text[..<colon].allSatisfy({ lowercased($0) == $0 }),
            text[colon...].starts(with: "://".utf8)
        else { return nil }
        let scheme = String(text[..<colon])!
        let authority = text[text.index(colon, offsetBy: 3)...].prefix {
            $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?")
        }
        let portColon = authority.firstIndex(of: UInt8(ascii: ":"))
        let host = authority[..<(portColon ?? authority.endIndex)]
        let hostAllowed: (UInt8) -> Bool = { byte in
            lowercased(byte) == byte && byte != UInt8(ascii: "@") && byte != UInt8(ascii: "[")
                && byte != UInt8(ascii: "%") && byte != UInt8(ascii: "#")
        }
        guard !host.isEmpty, host.allSatisfy(hostAllowed) else { return nil }
        if let portColon {
            let port = authority[text.index(after: portColon)...]
            guard let number = Int(Substring(port)), port.first != UInt8(ascii: "0"),
                port.allSatisfy(isDigit),
                number != defaultPort(scheme)
            else { return nil }
        }
        let rest = text[authority.endIndex...]
        guard defaultPort(scheme) == nil || rest.first == UInt8(ascii: "/"),
            !rest.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "#") })
        else { return nil }
        return authority.endIndex
    }

    /// RFC 3986 §3.1: `scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )`.
    private static func isScheme<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> Bool {
        guard let first = bytes.first, isLetter(first) else { return false }
        return bytes.allSatisfy { byte in
            isLetter(byte) || isDigit(byte) || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-")
                || byte == UInt8(ascii: ".")
        }
    }

    /// The host in normal form, with its port in decimal unless that is empty or the scheme's
    /// default.
    private static func hostAndPort(_ authority: ArraySlice<UInt8>, scheme: String) -> String {
        var host = authority
        var port: ArraySlice<UInt8> = []
        // The port's colon is the last one, after the closing bracket of an IP literal.
        let afterLiteral = host.lastIndex(of: UInt8(ascii: "]")) ?? host.startIndex
        if let colon = host[afterLiteral...].lastIndex(of: UInt8(ascii: ":")) {
            port = host[(colon + 1)...]
            host = host[..<colon]
        }
        let normalHost =
            host.first == UInt8(ascii: "[")
            ? String(decoding: host, as: UTF8.self)
            : String(decoding: lowercasedOutsideEscapes(percentNormalized(host)), as: UTF8.self)
        let text = String(decoding: port, as: UTF8.self)
        let number = port.allSatisfy(isDigit) ? Int(text) : nil
        guard !port.isEmpty, number == nil || number != defaultPort(scheme) else { return normalHost }
        return "\(normalHost):\(number.map(String.init) ?? text)"
    }

    /// `bytes` with ASCII letters in lowercase, but for the hex digits of `%XX` escapes, which
    /// stay in uppercase.
    private static func lowercasedOutsideEscapes(_ bytes: [UInt8]) -> [UInt8] {
        var result = bytes
        var index = 0
        while index < result.count {
            if result[index] == UInt8(ascii: "%") {
                index += 3
            } else {
                result[index] = lowercased(result[index])
                index += 1
            }
        }
        return result
    }

    /// The port of http and https (whose empty path is written `/`); `nil` for other schemes.
    private static func defaultPort(_ scheme: String) -> Int? {
        switch scheme {
        case "http": 80
        case "https": 443
        default: nil
        }
    }

    /// `bytes` with each `%XX` of an unreserved character (RFC 3986 §2.3) decoded, and every
    /// other `%xx` in uppercase hex (§6.2.2.1-6.2.2.2).
    private static func percentNormalized(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        var normal: [UInt8] = []
        normal.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.endIndex,
                let high = KeyHash.nibble(bytes[index + 1]), let low = KeyHash.nibble(bytes[index + 2])
            {
                let byte = high << 4 | low
                normal += isUnreserved(byte) ? [byte] : [UInt8(ascii: "%"), hexDigit(high), hexDigit(low)]
                index += 3
            } else {
                normal.append(bytes[index])
                index += 1
            }
        }
        return normal
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        isLetter(byte) || isDigit(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
            || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "~")
    }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(lowercased(byte))
    }

    private static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "A") + value - 10
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte
    }
}
