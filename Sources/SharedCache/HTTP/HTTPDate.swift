#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SharedCachePlatform

/// HTTP dates (RFC 9110 §5.6.7), in milliseconds since the Unix epoch.
///
/// Exactly the three grammars a recipient must accept:
///
/// ```
/// IMF-fixdate  = day-name "," SP 2DIGIT SP month SP 4DIGIT SP time-of-day SP "GMT"
///                ; Sun, 06 Nov 1994 08:49:37 GMT
/// rfc850-date  = day-name-l "," SP 2DIGIT "-" month "-" 2DIGIT SP time-of-day SP "GMT"
///                ; Sunday, 06-Nov-94 08:49:37 GMT
/// asctime-date = day-name SP month SP ( 2DIGIT / ( SP DIGIT ) ) SP time-of-day SP 4DIGIT
///                ; Sun Nov  6 08:49:37 1994
/// time-of-day  = 2DIGIT ":" 2DIGIT ":" 2DIGIT   ; 00:00:00 - 23:59:60 (leap second)
/// ```
///
/// The names (day, month, `GMT`) are matched without regard to case: the grammar is
/// case-sensitive, but a cache recipient SHOULD match them case-insensitively (RFC 9111 §4.2).
/// Anything else — `UTC` for `GMT`, a missing comma, an extra space, a one-digit hour, a day
/// the month does not have — is not a date: in `Expires` it means already expired (RFC 9111
/// §5.3). The weekday is checked for spelling, not against the date (the RFC asks no more).
enum HTTPDate {
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    private static let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let longWeekdays = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]

    /// Parses one HTTP-date (surrounding spaces and tabs, which are not part of a field value,
    /// set aside); `nil` for anything that is not one.
    ///
    /// - Parameter now: the current time, for RFC 850's two-digit years (RFC 9110 §5.6.7: a year
    ///   that appears to be more than 50 years in the future is the most recent past year with
    ///   the same last two digits).
    static func parse(_ text: String, now: Int64 = Clock.nowMilliseconds()) -> Int64? {
        var scanner = Scanner(Array(text.trimmingSpaces().utf8))
        let fields: Fields?
        if scanner.peekWord(in: longWeekdays) != nil, let rfc850 = parseRFC850(&scanner, now: now) {
            fields = rfc850
        } else {
            scanner = Scanner(Array(text.trimmingSpaces().utf8))
            guard scanner.word(in: weekdays) != nil else { return nil }
            if scanner.literal(",") {
                fields = parseIMFFixdate(&scanner)
            } else {
                fields = parseAsctime(&scanner)
            }
        }
        guard let fields, scanner.isAtEnd else { return nil }
        return fields.milliseconds
    }

    private struct Fields {
        var year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int

        var milliseconds: Int64? {
            let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
            let lengths = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
            guard (1...lengths[month]).contains(day), hour < 24, minute < 60, second <= 60 else { return nil }
            var fields = tm()
            fields.tm_year = Int32(year - 1900)
            fields.tm_mon = Int32(month)
            fields.tm_mday = Int32(day)
            fields.tm_hour = Int32(hour)
            fields.tm_min = Int32(minute)
            fields.tm_sec = Int32(second)
            return Int64(timegm(&fields)) * 1000
        }
    }

    /// After `day-name ","`: `SP 2DIGIT SP month SP 4DIGIT SP time-of-day SP "GMT"`.
    private static func parseIMFFixdate(_ scanner: inout Scanner) -> Fields? {
        guard scanner.literal(" "), let day = scanner.digits(2), scanner.literal(" "),
            let month = scanner.word(in: months), scanner.literal(" "), let year = scanner.digits(4),
            scanner.literal(" "), let time = scanner.timeOfDay(), scanner.literal(" GMT")
        else { return nil }
        return Fields(year: year, month: month, day: day, hour: time.0, minute: time.1, second: time.2)
    }

    /// `day-name-l "," SP 2DIGIT "-" month "-" 2DIGIT SP time-of-day SP "GMT"`.
    private static func parseRFC850(_ scanner: inout Scanner, now: Int64) -> Fields? {
        guard scanner.word(in: longWeekdays) != nil, scanner.literal(", "), let day = scanner.digits(2),
            scanner.literal("-"), let month = scanner.word(in: months), scanner.literal("-"),
            let twoDigits = scanner.digits(2), scanner.literal(" "), let time = scanner.timeOfDay(),
            scanner.literal(" GMT")
        else { return nil }
        var seconds = time_t(now / 1000)
        var current = tm()
        gmtime_r(&seconds, &current)
        let thisYear = Int(current.tm_year) + 1900
        var year = thisYear - thisYear % 100 + twoDigits
        if year > thisYear + 50 { year -= 100 }
        return Fields(year: year, month: month, day: day, hour: time.0, minute: time.1, second: time.2)
    }

    /// After `day-name`: `SP month SP ( 2DIGIT / ( SP DIGIT ) ) SP time-of-day SP 4DIGIT`.
    private static func parseAsctime(_ scanner: inout Scanner) -> Fields? {
        guard scanner.literal(" "), let month = scanner.word(in: months), scanner.literal(" ") else { return nil }
        let day: Int
        if scanner.literal(" ") {
            guard let digit = scanner.digits(1) else { return nil }
            day = digit
        } else {
            guard let digits = scanner.digits(2) else { return nil }
            day = digits
        }
        guard scanner.literal(" "), let time = scanner.timeOfDay(), scanner.literal(" "), let year = scanner.digits(4)
        else { return nil }
        return Fields(year: year, month: month, day: day, hour: time.0, minute: time.1, second: time.2)
    }

    /// A cursor over ASCII bytes; every method consumes only what it matched.
    private struct Scanner {
        let bytes: [UInt8]
        var position = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var isAtEnd: Bool { position == bytes.count }

        mutating func literal(_ text: StaticString) -> Bool {
            let expected = UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)
            guard matches(expected) else { return false }
            position += expected.count
            return true
        }

        /// Whether `expected` comes next, ASCII letters in either case.
        private func matches(_ expected: some Collection<UInt8>) -> Bool {
            bytes.count - position >= expected.count
                && zip(bytes[position...], expected).allSatisfy { Self.folded($0) == Self.folded($1) }
        }

        private static func folded(_ byte: UInt8) -> UInt8 {
            (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte
        }

        /// Exactly `count` ASCII digits.
        mutating func digits(_ count: Int) -> Int? {
            guard bytes.count - position >= count else { return nil }
            var value = 0
            for byte in bytes[position..<position + count] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            position += count
            return value
        }

        /// `2DIGIT ":" 2DIGIT ":" 2DIGIT`, ranges checked later.
        mutating func timeOfDay() -> (Int, Int, Int)? {
            guard let hour = digits(2), literal(":"), let minute = digits(2), literal(":"), let second = digits(2)
            else { return nil }
            return (hour, minute, second)
        }

        /// The index of the word of `words` that comes next, in either case.
        mutating func word(in words: [String]) -> Int? {
            guard let index = peekWord(in: words) else { return nil }
            position += words[index].utf8.count
            return index
        }

        func peekWord(in words: [String]) -> Int? {
            words.firstIndex { matches($0.utf8) }
        }
    }

    /// The IMF-fixdate of `milliseconds`.
    static func format(_ milliseconds: Int64) -> String {
        var seconds = time_t(milliseconds / 1000)
        var fields = tm()
        gmtime_r(&seconds, &fields)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        // year = 4DIGIT (RFC 9110 §5.6.7): the year 994 is "0994", as the parser requires.
        let year = String(fields.tm_year + 1900)
        return "\(weekdays[Int(fields.tm_wday)]), \(two(fields.tm_mday)) \(months[Int(fields.tm_mon)]) "
            + "\(String(repeating: "0", count: max(0, 4 - year.count)))\(year) "
            + "\(two(fields.tm_hour)):\(two(fields.tm_min)):\(two(fields.tm_sec)) GMT"
    }
}
