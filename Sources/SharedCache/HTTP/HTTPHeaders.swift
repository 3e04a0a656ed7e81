/// HTTP header fields in order, looked up by case-insensitive name.
public struct HTTPHeaders: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    public typealias Element = (name: String, value: String)

    private var fields: [Field] = []

    private struct Field: Sendable, Hashable {
        var name: String
        var value: String
    }

    /// No fields.
    public init() {}

    /// The fields in `fields`, in order; a name may repeat.
    public init(_ fields: some Sequence<(String, String)>) {
        for (name, value) in fields { append(name, value) }
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    /// The number of fields (a name that repeats counts each time).
    public var count: Int { fields.count }

    public func makeIterator() -> some IteratorProtocol<Element> {
        fields.lazy.map { (name: $0.name, value: $0.value) }.makeIterator()
    }

    /// The value of `name`; several fields of one name are joined with ", " (RFC 9110 §5.3).
    public subscript(name: String) -> String? {
        var joined: String?
        for field in fields where field.name.caseInsensitiveEquals(name) {
            joined = joined.map { "\($0), \(field.value)" } ?? field.value
        }
        return joined
    }

    /// Adds a field after the others, keeping any of the same name.
    public mutating func append(_ name: String, _ value: String) {
        fields.append(Field(name: name, value: value))
    }

    /// Replaces every field of `name` with one of `value` (where the first was, spelled as it
    /// was), or removes them for `nil`.
    public mutating func set(_ name: String, _ value: String?) {
        replace(name, with: value.map { [$0] } ?? [])
    }

    /// Replaces every field of `name` with a field for each of `values` (where the first was,
    /// spelled as it was): fields that cannot be joined into one, as `Set-Cookie` (RFC 9110
    /// §5.3), stay apart.
    mutating func replace(_ name: String, with values: [String]) {
        let position = fields.firstIndex { $0.name.caseInsensitiveEquals(name) }
        let spelling = position.map { fields[$0].name } ?? name
        fields.removeAll { $0.name.caseInsensitiveEquals(name) }
        let replacements = values.map { Field(name: spelling, value: $0) }
        fields.insert(contentsOf: replacements, at: Swift.min(position ?? fields.count, fields.count))
    }

    /// The values of the fields of `name`, in order, each apart.
    func values(_ name: String) -> [String] {
        fields.filter { $0.name.caseInsensitiveEquals(name) }.map(\.value)
    }

    /// The fields whose name `keeps` accepts, in order.
    func filtered(keeping keeps: (String) -> Bool) -> HTTPHeaders {
        var kept = HTTPHeaders()
        kept.fields = fields.filter { keeps($0.name) }
        return kept
    }

    /// Whether the fields are the same, in order and with the same values, but for those named
    /// in `ignoring`; names in any case.
    func equals(_ other: HTTPHeaders, ignoring: [String]) -> Bool {
        func kept(_ field: Field) -> Bool { !ignoring.contains { $0.caseInsensitiveEquals(field.name) } }
        var theirs = other.fields.lazy.filter(kept).makeIterator()
        for field in fields where kept(field) {
            guard let other = theirs.next(), other.name.caseInsensitiveEquals(field.name), other.value == field.value
            else { return false }
        }
        return theirs.next() == nil
    }
}

extension HTTPHeaders {
    /// What a `Content-Length` says (RFC 9110 §8.6).
    enum ContentLength: Equatable {
        case absent
        case length(Int)
        /// Not digits, or a list of different lengths: no length a recipient may guess at
        /// (RFC 9112 §6.3), where libcurl takes the digits it starts with, or the last field.
        case invalid
    }

    /// The `Content-Length`: digits, or a list of the same digits repeated (as several fields,
    /// or as one joined list).
    var contentLength: ContentLength {
        guard let field = self["Content-Length"] else { return .absent }
        let members = Set(field.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingSpaces() })
        guard members.count == 1, let text = members.first, FieldList.isDigits(text), text.utf8.count <= 18,
            let length = Int(text)
        else { return .invalid }
        return .length(length)
    }
}

extension String {
    /// Equal but for the case of ASCII letters, as field names and most protocol tokens are
    /// compared (RFC 9110 §5.1). Byte by byte: a revalidation compares hundreds of names, and
    /// lowercasing copies of them was a tenth of its cost.
    func caseInsensitiveEquals(_ other: String) -> Bool {
        guard utf8.count == other.utf8.count else { return false }
        return zip(utf8, other.utf8).allSatisfy { one, two in one == two || (one.isASCIILetter && one ^ 0x20 == two) }
    }
}

extension UInt8 {
    fileprivate var isASCIILetter: Bool { (self | 0x20) >= UInt8(ascii: "a") && (self | 0x20) <= UInt8(ascii: "z") }
}
