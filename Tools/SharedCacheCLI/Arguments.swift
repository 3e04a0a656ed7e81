/// The command-line grammar both tools share: `--name=value`, `--name value`, `-x`, `-x value`,
/// and `--` ending the options. Options may come before or after positional arguments.
package struct Arguments: Sendable {
    /// What one option is.
    package struct Option: Sendable {
        package var names: [String]
        package var takesValue: Bool
        package var repeatable: Bool

        package static func flag(_ names: String...) -> Option {
            Option(names: names, takesValue: false, repeatable: false)
        }
        package static func value(_ names: String...) -> Option {
            Option(names: names, takesValue: true, repeatable: false)
        }
        package static func repeated(_ names: String...) -> Option {
            Option(names: names, takesValue: true, repeatable: true)
        }

        /// The primary name, as error messages and lookups use it.
        package var name: String { names[0] }
    }

    package private(set) var positional: [String] = []
    private var values: [String: [String]] = [:]

    /// Parses `arguments` against `options`.
    ///
    /// - Throws: ``UsageError`` for an unknown option, a missing value, a value given to a
    ///   flag, or an option repeated that may appear only once.
    package init(_ arguments: some Sequence<String>, options: [Option]) throws(UsageError) {
        var remaining = Array(arguments)[...]
        var onlyPositional = false
        while let argument = remaining.popFirst() {
            if onlyPositional || argument == "-" || !argument.hasPrefix("-") {
                positional.append(argument)
                continue
            }
            if argument == "--" {
                onlyPositional = true
                continue
            }
            var name = argument
            var inline: String? = nil
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                name = String(argument[..<equals])
                inline = String(argument[argument.index(after: equals)...])
            }
            guard let option = options.first(where: { $0.names.contains(name) }) else {
                throw UsageError("unknown option \(name)")
            }
            if option.takesValue {
                guard let value = inline ?? remaining.popFirst() else { throw UsageError("\(name) needs a value") }
                if values[option.name] != nil && !option.repeatable {
                    throw UsageError("\(name) may be given only once")
                }
                values[option.name, default: []].append(value)
            } else {
                guard inline == nil else { throw UsageError("\(name) takes no value") }
                values[option.name, default: []].append("")
            }
        }
    }

    /// Whether the flag (or option) was given.
    package func has(_ name: String) -> Bool { values[name] != nil }

    /// The option's value, if given.
    package func value(_ name: String) -> String? { values[name]?.last }

    /// Every value of a repeatable option, in order.
    package func values(_ name: String) -> [String] { values[name] ?? [] }
}

/// Wrong command-line usage: exit status 64 and a hint to read the help.
package struct UsageError: Error, Sendable {
    package var message: String
    package init(_ message: String) { self.message = message }
}
