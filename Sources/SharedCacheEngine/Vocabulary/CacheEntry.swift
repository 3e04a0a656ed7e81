public import Foundation
public import SharedCacheFormat
import SharedCachePlatform

/// When an entry stops being served.
public enum Expiry: Sendable, Hashable {
    /// Kept until removed or evicted for space.
    case never
    /// Expires this long after it is stored.
    case after(Duration)
    /// Expires at a fixed time.
    case at(Date)

    package func milliseconds(from now: Int64) -> Int64 {
        switch self {
        case .never:
            return .max
        case .after(let duration):
            let (seconds, attoseconds) = duration.components
            let total = Double(now) + Double(seconds) * 1000 + Double(attoseconds) / 1e15
            return total >= Double(Int64.max) ? .max : Int64(total)
        case .at(let date):
            let milliseconds = (date.timeIntervalSince1970 * 1000).rounded(.down)
            return milliseconds >= Double(Int64.max) ? .max : Int64(milliseconds)
        }
    }
}

/// What a put records alongside the body.
public struct EntryMetadata: Sendable, Hashable {
    /// The HTTP entity tag, verbatim (e.g. `"abc"` or `W/"abc"`). At most 65,535 bytes.
    public var etag: String?
    /// The HTTP `Last-Modified` value, verbatim. At most 65,535 bytes.
    public var lastModified: String?
    /// When the entry expires; `nil` uses the directory's default expiry.
    public var expiry: Expiry?
    /// Opaque bytes for layers built on the store (the HTTP client keeps response headers here).
    package var attributes: [UInt8]

    /// Metadata for a put; all of it optional.
    public init(etag: String? = nil, lastModified: String? = nil, expiry: Expiry? = nil) {
        self.etag = etag
        self.lastModified = lastModified
        self.expiry = expiry
        self.attributes = []
    }
}

/// Everything known about a stored entry except its body.
public struct CacheEntry: Sendable, Hashable {
    /// The key the entry was stored under.
    public var key: String
    /// SHA-256 of the key: the entry's identity on disk and in removal notices.
    public var hash: KeyHash
    /// Bytes of the body.
    public var size: UInt64
    /// The HTTP entity tag stored with the body, verbatim.
    public var etag: String?
    /// The HTTP `Last-Modified` value stored with the body, verbatim.
    public var lastModified: String?
    /// When the put that stored this version was made.
    public var storedAt: Date
    /// `nil` when the entry never expires.
    public var expiresAt: Date?
    package var attributes: [UInt8]

    /// The entry `header` describes.
    package init(_ header: BlobHeader) {
        key = String(decoding: header.key, as: UTF8.self)
        hash = header.keyHash
        size = header.bodySize
        etag = header.etag.isEmpty ? nil : String(decoding: header.etag, as: UTF8.self)
        lastModified = header.lastModified.isEmpty ? nil : String(decoding: header.lastModified, as: UTF8.self)
        storedAt = Date(millisecondsSince1970: header.storedAt)
        expiresAt = header.expiresAt == .max ? nil : Date(millisecondsSince1970: header.expiresAt)
        attributes = header.attributes
    }

    /// The entry a header checked in place describes, stored under `key`: the caller's own
    /// string for the key bytes the header holds, which the caller checked are the same.
    package init(_ header: BlobHeader.Layout, in bytes: UnsafeRawBufferPointer, key: String) {
        func text(_ range: Range<Int>) -> String? {
            guard !range.isEmpty else { return nil }
            let utf8 = UnsafeRawBufferPointer(rebasing: bytes[range]).bindMemory(to: UInt8.self)
            return String(decoding: utf8, as: UTF8.self)
        }
        self.key = key
        hash = header.keyHash
        size = header.bodySize
        etag = text(header.etag)
        lastModified = text(header.lastModified)
        storedAt = Date(millisecondsSince1970: header.storedAt)
        expiresAt = header.expiresAt == .max ? nil : Date(millisecondsSince1970: header.expiresAt)
        attributes = header.attributes.isEmpty ? [] : Array(bytes[header.attributes])
    }

    /// The entry a put of `key` with `metadata` stores: what its header will say, from the
    /// put's own values rather than decoded again from the header's bytes.
    package init(key: String, hash: KeyHash, metadata: EntryMetadata, size: UInt64, storedAt: Int64, expiresAt: Int64) {
        self.key = key
        self.hash = hash
        self.size = size
        // The header keeps an absent and an empty value alike, as no bytes.
        etag = metadata.etag?.isEmpty == false ? metadata.etag : nil
        lastModified = metadata.lastModified?.isEmpty == false ? metadata.lastModified : nil
        self.storedAt = Date(millisecondsSince1970: storedAt)
        self.expiresAt = expiresAt == .max ? nil : Date(millisecondsSince1970: expiresAt)
        attributes = metadata.attributes
    }

    package init(
        key: String, hash: KeyHash, size: UInt64, etag: String?, lastModified: String?, storedAt: Date, expiresAt: Date?
    ) {
        self.key = key
        self.hash = hash
        self.size = size
        self.etag = etag
        self.lastModified = lastModified
        self.storedAt = storedAt
        self.expiresAt = expiresAt
        self.attributes = []
    }
}

/// Where a body was found (Kingfisher's `CacheType`).
public enum CacheType: String, Sendable, Hashable, CustomStringConvertible {
    /// Not in the cache: the body came from the network.
    case none
    /// This process's memory tier held a copy (checked against the journal-fed index first).
    case memory
    /// Read from the body's file in the directory.
    case disk

    /// `none`, `memory` or `disk`.
    public var description: String { rawValue }
}

/// A body read from the cache, with its metadata.
public struct CacheHit: Sendable {
    /// The body: exactly the bytes one put stored, checked against their checksum.
    public var data: Data
    /// The body's metadata.
    public var entry: CacheEntry {
        get { metadata.entry }
        set { metadata = Metadata(newValue) }
    }
    /// Where the body was found: ``CacheType/memory`` or ``CacheType/disk``.
    public var cacheType: CacheType

    /// The entry, held by reference: a hit passes through several calls on its way out of a
    /// get, and the entry inline (its key, ETag, dates: 160 bytes) was copied at each.
    private var metadata: Metadata

    private final class Metadata: Sendable {
        let entry: CacheEntry
        init(_ entry: CacheEntry) { self.entry = entry }
    }

    package init(data: Data, entry: CacheEntry, cacheType: CacheType = .disk) {
        self.data = data
        self.metadata = Metadata(entry)
        self.cacheType = cacheType
    }
}

extension Date {
    package init(millisecondsSince1970 milliseconds: Int64) {
        self.init(timeIntervalSince1970: Double(milliseconds) / 1000)
    }
}
