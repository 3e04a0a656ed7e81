#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// HTTP dates (RFC 9110 §5.6.7), in milliseconds since the Unix epoch.
///
/// Parses the preferred IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) and the two obsolete
/// forms a recipient must still accept: RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and
/// asctime (`Sun Nov  6 08:49:37 1994`).
enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    private static let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]

    static func parse(_ text: String) -> Int64? {
        let tokens = text.split { $0 == " " || $0 == "," || $0 == "-" }.map(String.init)
        var day: Int?, month: Int?, year: Int?, time: [Int]?
        for token in tokens.dropFirst() {  // the weekday carries nothing
            if token.contains(":") {
                let parts = token.split(separator: ":").compactMap { Int($0) }
                guard parts.count == 3 else { return nil }
                time = parts
            } else if let number = Int(token), token.allSatisfy(\.isASCII) {
                if day == nil && number <= 31 && token.count <= 2 {
                    day = number
                } else if token.count == 4 && (1900...9999).contains(number) || token.count == 2 {
                    year = number
                } else {
                    return nil
                }
            } else if let index = months.firstIndex(of: token.lowercased()) {
                month = index
            } else if token != "GMT" && token != "UTC" {
                return nil
            }
        }
        guard let day, let month, var year, let time, (1...31).contains(day), time[0] < 24, time[1] < 60,
            time[2] <= 60
        else { return nil }
        if year < 100 { year += year < 70 ? 2000 : 1900 }  // RFC 850's two-digit years
        var fields = tm()
        fields.tm_year = Int32(year - 1900)
        fields.tm_mon = Int32(month)
        fields.tm_mday = Int32(day)
        fields.tm_hour = Int32(time[0])
        fields.tm_min = Int32(time[1])
        fields.tm_sec = Int32(time[2])
        return Int64(timegm(&fields)) * 1000
    }

    /// The IMF-fixdate of `milliseconds`.
    static func format(_ milliseconds: Int64) -> String {
        var seconds = time_t(milliseconds / 1000)
        var fields = tm()
        gmtime_r(&seconds, &fields)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let month = months[Int(fields.tm_mon)]
        return "\(weekdays[Int(fields.tm_wday)]), \(two(fields.tm_mday)) \(month.prefix(1).uppercased() + month.dropFirst()) "
            + "\(fields.tm_year + 1900) \(two(fields.tm_hour)):\(two(fields.tm_min)):\(two(fields.tm_sec)) GMT"
    }
}
