/// A `Range` request answered from a stored complete response (RFC 9110 §14).
///
/// Only a single `bytes` range is sliced out as a `206` with `Content-Range`; a range no byte
/// of the body satisfies is a `416` with `Content-Range: bytes */length` (§15.5.17). Several
/// ranges, another unit or a malformed value are answered with the whole response, as §14.2
/// lets a server ignore `Range`; multipart is not worth its weight in a client cache.
enum ByteRange {
    /// What to do with a request's `Range` for a body of `length` bytes.
    enum Answer: Equatable {
        /// Serve the whole response.
        case whole
        /// Serve bytes `lower..<upper`.
        case slice(Range<Int>)
        case unsatisfiable
    }

    static func answer(_ value: String?, length: Int) -> Answer {
        guard let value else { return .whole }
        let text = value.trimmingSpaces()
        guard text.lowercased().hasPrefix("bytes="), !text.contains(",") else { return .whole }
        let spec = text.dropFirst(6).trimmingSpaces()
        guard let dash = spec.firstIndex(of: "-") else { return .whole }
        let first = spec[..<dash].trimmingSpaces(), last = spec[spec.index(after: dash)...].trimmingSpaces()
        func number(_ text: String) -> Int? {
            guard !text.isEmpty, text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
            else { return nil }
            return Int(text) ?? .max
        }
        if first.isEmpty {
            // A suffix range: the last N bytes (§14.1.2); "-0" is satisfied by nothing. Of an
            // empty representation a non-zero suffix is satisfiable, yet no Content-Range can
            // name its no bytes: the whole (empty) response, as §14.2 lets Range be ignored.
            guard let count = number(last) else { return .whole }
            guard count > 0 else { return .unsatisfiable }
            guard length > 0 else { return .whole }
            return .slice(max(0, length - count)..<length)
        }
        guard let start = number(first) else { return .whole }
        let end: Int
        if last.isEmpty {
            end = length - 1
        } else {
            guard let given = number(last), given >= start else { return .whole }  // invalid: ignored
            end = min(given, length - 1)
        }
        guard start < length else { return .unsatisfiable }
        return .slice(start..<(end + 1))
    }
}
