import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Partial content kept by the cache (RFC 9111 §3.3, §3.4; RFC 9110 §14, §15.3.7): which byte
/// ranges of one representation a stored incomplete response holds, and how a new part is
/// combined with them.
///
/// A URL's parts are one entry under ``key(_:)``: a stored response with status 206 whose body
/// is the bytes of each range it holds, in ascending order, one after another, and whose
/// headers carry one `Content-Range: bytes first-last/length` field per range, in the same
/// order. It is kept apart from the URL's complete response, so it is never served as a 200
/// nor for a range it does not hold.
enum PartialContent {
    /// The longest representation whose parts are stored: combining a part rewrites the URL's
    /// whole partial entry, in memory, so parts of anything longer are passed on, not stored.
    static let storableLength = 32 << 20

    /// The key a URL's parts are stored under. A variant line always has `": "` and a URL
    /// never has a newline, so it is neither a URL's key nor a variant's.
    static func key(_ primaryKey: String) -> String { primaryKey + "\npartial content" }

    /// A `Content-Range` of a single part with a known complete length (RFC 9110 §14.4):
    /// `bytes first-last/complete-length`.
    struct ContentRange: Equatable, CustomStringConvertible {
        /// The bytes of the representation the part holds.
        var bytes: Range<Int>
        /// The complete length of the representation.
        var length: Int

        init(bytes: Range<Int>, length: Int) {
            self.bytes = bytes
            self.length = length
        }

        /// `nil` for another unit, an unknown complete length (`/*`), an unsatisfied-range form
        /// (`*/length`), a range outside the length, or anything malformed.
        init?(_ value: String) {
            let text = value.trimmingSpaces()
            guard let space = text.firstIndex(of: " "), text[..<space].lowercased() == "bytes" else { return nil }
            let spec = text[text.index(after: space)...].trimmingSpaces()
            guard let slash = spec.firstIndex(of: "/"), let dash = spec[..<slash].firstIndex(of: "-"),
                let first = Self.number(spec[..<dash]), let last = Self.number(spec[spec.index(after: dash)..<slash]),
                let length = Self.number(spec[spec.index(after: slash)...]), first <= last, last < length
            else { return nil }
            self.init(bytes: first..<(last + 1), length: length)
        }

        private static func number(_ text: Substring) -> Int? {
            guard !text.isEmpty, text.count <= 18,
                text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
            else { return nil }
            return Int(text)
        }

        var description: String { "bytes \(bytes.lowerBound)-\(bytes.upperBound - 1)/\(length)" }
    }

    /// The ranges of one representation a stored partial response holds: ascending, apart (no
    /// two overlap or touch), its body their bytes one after another.
    struct Ranges: Equatable {
        /// The complete length of the representation.
        var length: Int
        var ranges: [Range<Int>]

        init(length: Int, ranges: [Range<Int>]) {
            self.length = length
            self.ranges = ranges
        }

        /// The ranges a stored partial response's `Content-Range` fields name; `nil` unless they
        /// are well formed, of one length, ascending and apart, and their bytes add up to
        /// `bodySize`.
        init?(_ headers: HTTPHeaders, bodySize: Int) {
            let fields = headers.filter { $0.name.caseInsensitiveEquals("Content-Range") }
            let parsed = fields.map { ContentRange($0.value) }
            guard let first = parsed.first.flatMap({ $0 }) else { return nil }
            var ranges: [Range<Int>] = []
            for range in parsed {
                guard let range, range.length == first.length,
                    ranges.last.map({ $0.upperBound < range.bytes.lowerBound }) ?? true
                else { return nil }
                ranges.append(range.bytes)
            }
            guard ranges.reduce(0, { $0 + $1.count }) == bodySize else { return nil }
            self.init(length: first.length, ranges: ranges)
        }

        /// Whether the ranges hold the whole representation.
        var isComplete: Bool { ranges == [0..<length] }

        /// One `Content-Range` value per range, in order.
        var fields: [ContentRange] { ranges.map { ContentRange(bytes: $0, length: length) } }

        /// Where in the body the bytes `wanted` start, when one range holds them all.
        func offset(of wanted: Range<Int>) -> Int? {
            var offset = 0
            for range in ranges {
                if range.lowerBound <= wanted.lowerBound && wanted.upperBound <= range.upperBound {
                    return offset + wanted.lowerBound - range.lowerBound
                }
                offset += range.count
            }
            return nil
        }

        /// These ranges, whose bytes are `body`, with `bytes` at `range` added (RFC 9110
        /// §15.3.7.3: the union of the parts; overlapping bytes are the same bytes, as the parts
        /// share a strong validator).
        func adding(_ range: Range<Int>, _ bytes: Data, to body: Data) -> (Ranges, Data) {
            var pieces: [(range: Range<Int>, bytes: Data)] = [(range, bytes)]
            var offset = body.startIndex
            for held in ranges {
                pieces.append((held, body[offset..<offset + held.count]))
                offset += held.count
            }
            pieces.sort { $0.range.lowerBound < $1.range.lowerBound }
            var merged: [Range<Int>] = []
            var data = Data()
            for piece in pieces {
                if let last = merged.last, piece.range.lowerBound <= last.upperBound {
                    guard piece.range.upperBound > last.upperBound else { continue }
                    let skip = last.upperBound - piece.range.lowerBound
                    data.append(piece.bytes.dropFirst(skip))
                    merged[merged.count - 1] = last.lowerBound..<piece.range.upperBound
                } else {
                    data.append(piece.bytes)
                    merged.append(piece.range)
                }
            }
            return (Ranges(length: length, ranges: merged), data)
        }
    }

    /// A 206 this cache may store (RFC 9111 §3.3): the answer to a GET for a single range,
    /// otherwise storable (``Freshness/isStorable(status:headers:for:)`` and
    /// ``Freshness/allowsStoring(answeringAuthorization:headers:for:)``, no `Vary`), with one
    /// `Content-Range` with a known complete length, at most ``storableLength``, whose bytes the
    /// body holds exactly. Anything else — a multipart/byteranges answer to several ranges, a
    /// truncated body — is passed on and not stored. Storing needs no validator; combining
    /// does (§3.4): only a part with a strong entity tag is ever combined with another.
    struct Part {
        var range: ContentRange
        /// The part's entity tag, if it has one (weak or strong).
        var etag: String?

        init?(_ response: TransportResponse, request: URLRequest, for audience: HTTPAudience) {
            guard response.status == 206, (request.httpMethod ?? "GET").uppercased() == "GET",
                let asked = request.value(forHTTPHeaderField: "Range"), !asked.contains(","),
                !(response.headers["Content-Type"] ?? "").lowercased().hasPrefix("multipart/"),
                response.headers.filter({ $0.name.caseInsensitiveEquals("Content-Range") }).count == 1,
                let range = response.headers["Content-Range"].flatMap(ContentRange.init),
                range.length <= storableLength, range.bytes.count == response.body.count,
                CacheEngine.varyNames(response.headers["Vary"]).isEmpty,
                Freshness.isStorable(status: 206, headers: response.headers, for: audience),
                Freshness.allowsStoring(
                    answeringAuthorization: request.isAuthorized, headers: response.headers, for: audience)
            else { return nil }
            self.range = range
            self.etag = response.headers["ETag"]?.trimmingSpaces()
        }
    }

    /// An entity tag fit for strong comparison (RFC 9110 §8.8.3.2): not weak, quoted.
    static func isStrong(_ etag: String) -> Bool {
        etag.count >= 2 && etag.hasPrefix("\"") && etag.hasSuffix("\"")
    }

    /// Strong comparison (RFC 9110 §8.8.3.2): both strong and their opaque tags identical.
    static func strongMatch(_ tag: String?, _ other: String?) -> Bool {
        guard let tag = tag?.trimmingSpaces(), let other = other?.trimmingSpaces() else { return false }
        return isStrong(tag) && tag == other
    }
}
