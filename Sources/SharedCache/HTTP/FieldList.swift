/// The list syntax of field values (RFC 9110 §5.6.1), with quoted strings (§5.6.4), as
/// `Cache-Control` and the fields `Vary` names are read.
enum FieldList {
    /// Whether `text` is a token (RFC 9110 §5.6.2): a field name, a directive, a coding.
    static func isToken(_ text: some StringProtocol) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy(isTokenCharacter)
    }

    /// `tchar`: a letter, a digit, or one of ``tokenSymbols``.
    static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "A")...UInt8(ascii: "Z"):
            return true
        default:
            return tokenSymbols.contains(byte)
        }
    }

    private static let tokenSymbols = Set("!#$%&'*+-.^_`|~".utf8)

    /// Whether `text` is `1*DIGIT`: a length, a number of seconds.
    static func isDigits(_ text: some StringProtocol) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
    }

    /// The members of `value`: split at commas outside quoted strings (`no-cache="a, b"` is one
    /// member), empty ones left out. Inside a quoted string a backslash escapes the next
    /// character (`quoted-pair`), so `\"` does not end it, and `x="\", max-age=60"` is one member.
    static func members(_ value: String) -> [Substring] {
        var members: [Substring] = []
        var start = value.startIndex
        var quoted = false
        var escaped = false
        for index in value.indices {
            if escaped {
                escaped = false
                continue
            }
            switch value[index] {
            case "\\" where quoted: escaped = true
            case "\"": quoted.toggle()
            case "," where !quoted:
                members.append(value[start..<index])
                start = value.index(after: index)
            default: break
            }
        }
        members.append(value[start...])
        return members.filter { !$0.trimmingSpaces().isEmpty }
    }

    /// The members of `value`, each as ``normalisingWhitespace(_:)`` makes it.
    static func normalisedMembers(_ value: String) -> [String] {
        members(value).map(normalisingWhitespace)
    }

    /// `member` without the whitespace around it, and each run of whitespace in it made one
    /// space, but inside a quoted string, whose spaces are the value's own.
    static func normalisingWhitespace(_ member: Substring) -> String {
        var normal = ""
        var (quoted, escaped, spaced) = (false, false, false)
        for character in member {
            if quoted {
                normal.append(character)
                if escaped {
                    escaped = false
                } else if character == "\\" {
                    escaped = true
                } else if character == "\"" {
                    quoted = false
                }
            } else if character == " " || character == "\t" {
                spaced = !normal.isEmpty
            } else {
                if spaced { normal.append(" ") }
                spaced = false
                quoted = character == "\""
                normal.append(character)
            }
        }
        return normal
    }
}
