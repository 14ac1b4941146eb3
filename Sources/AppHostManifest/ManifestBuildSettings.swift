import Foundation

/// Expands Xcode build-setting references in Info.plist strings: `$(VAR)`, `${VAR}`,
/// operators after colons (`$(VAR:rfc1034identifier)`, `:identifier`,
/// `:c99extidentifier`, `:lower`, `:upper`, `:base`, `:file`, `:dir`, `:suffix`,
/// `:default=value`), references nested in names (`$(A_$(B))`) and in setting values
/// (`PRODUCT_BUNDLE_IDENTIFIER=org.example.$(PRODUCT_NAME:rfc1034identifier)`).
/// `$()` is the empty string, as in Xcode.
///
/// A reference that cannot be expanded is kept as written and reported, so a caller
/// decides whether that is an error (keys AppHost needs) or not (display strings).
///
/// The text comes from the manifest, so the work is bounded by its length: brackets are
/// matched in one pass, and references nested more than ``maximumDepth`` deep (in the
/// text and through setting values together) are kept as written and reported. Fuzzing
/// found that `$($($(…)))` a few thousand deep took minutes and gigabytes (SECURITY.md).
struct BuildSettingExpander: Sendable {
    /// How deep references may nest, counting `$(A_$(B))` as 2 and each setting value
    /// expanded on the way as 1 more. Xcode projects use 2 or 3.
    static let maximumDepth = 16

    /// A reference left as written.
    struct Unresolved: Sendable, Equatable {
        /// Why it was left.
        enum Problem: Sendable, Equatable {
            /// No setting of that name (or it refers to itself).
            case undefined
            /// An operator AppHost does not know.
            case unknownOperator(String)
            /// Nested more than ``BuildSettingExpander/maximumDepth`` deep.
            case nestedTooDeep
        }
        /// The reference as written, e.g. `$(PRODUCT_BUNDLE_IDENTIFIER)`.
        var reference: String
        /// The setting's name, e.g. `PRODUCT_BUNDLE_IDENTIFIER`.
        var name: String
        var problem: Problem
    }

    /// The settings references are looked up in.
    var settings: [String: String]

    /// Expands every reference in `text`; unresolved ones stay as written.
    func expand(_ text: String) -> (value: String, unresolved: [Unresolved]) {
        expand(text, expanding: [], depth: 1)
    }

    /// `depth` is that of the references in `text`; `stack` the settings being expanded.
    private func expand(_ text: String, expanding stack: [String], depth: Int) -> (value: String, unresolved: [Unresolved]) {
        let chars = Array(text)
        let closes = Self.matchingCloses(chars)
        var out = ""
        var unresolved: [Unresolved] = []
        var i = 0
        while i < chars.count {
            guard chars[i] == "$", i + 1 < chars.count, let close = closes[i + 1] else {
                out.append(chars[i])
                i += 1
                continue
            }
            let reference = String(chars[i...close])
            guard depth <= Self.maximumDepth else {
                out += reference
                unresolved.append(Unresolved(reference: reference, name: String(chars[(i + 2)..<close]), problem: .nestedTooDeep))
                i = close + 1
                continue
            }
            let inner = expand(String(chars[(i + 2)..<close]), expanding: stack, depth: depth + 1)
            unresolved += inner.unresolved
            let resolved = resolve(inner.value, reference: reference, expanding: stack, depth: depth)
            switch resolved {
            case .success(let expansion):
                out += expansion.value
                unresolved += expansion.unresolved
            case .failure(let problem):
                out += reference
                unresolved.append(problem)
            }
            i = close + 1
        }
        return (out, unresolved)
    }

    /// Resolves the inside of one reference, `NAME:op:op`, its own references already expanded.
    private func resolve(_ body: String, reference: String, expanding stack: [String], depth: Int)
        -> Result<(value: String, unresolved: [Unresolved]), Unresolved>
    {
        var parts = body.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        let name = parts.removeFirst()
        if name.isEmpty && parts.isEmpty { return .success(("", [])) }
        var value: String?
        var nested: [Unresolved] = []
        if !stack.contains(name), let raw = settings[name] {
            let expansion = expand(raw, expanding: stack + [name], depth: depth + 1)
            value = expansion.value
            nested = expansion.unresolved
        }
        for op in parts {
            if op.hasPrefix("default=") {
                if value?.isEmpty ?? true { value = String(op.dropFirst("default=".count)) }
                continue
            }
            guard let apply = Self.operators[op] else {
                return .failure(Unresolved(reference: reference, name: name, problem: .unknownOperator(op)))
            }
            value = value.map(apply)
        }
        guard let value else {
            return .failure(Unresolved(reference: reference, name: name, problem: .undefined))
        }
        return .success((value, nested))
    }

    /// The operators that transform a value, by name.
    static let operators: [String: @Sendable (String) -> String] = [
        "rfc1034identifier": { s in
            String(s.map { c in c.isASCII && (c.isLetter || c.isNumber || c == "-" || c == ".") ? c : "-" })
        },
        "identifier": c99Identifier,
        "c99extidentifier": c99Identifier,
        "lower": { $0.lowercased() },
        "upper": { $0.uppercased() },
        "base": { (($0 as NSString).lastPathComponent as NSString).deletingPathExtension },
        "file": { ($0 as NSString).lastPathComponent },
        "dir": { ($0 as NSString).deletingLastPathComponent },
        "suffix": { s in
            let ext = (s as NSString).pathExtension
            return ext.isEmpty ? "" : "." + ext
        },
    ]

    /// Every character outside `[A-Za-z0-9_]` becomes `_`; a leading digit gets a `_` before it.
    private static func c99Identifier(_ s: String) -> String {
        let mapped = String(s.map { c in c.isASCII && (c.isLetter || c.isNumber || c == "_") ? c : "_" })
        return mapped.first?.isNumber == true ? "_" + mapped : mapped
    }

    /// For each `(` and `{`, the index of the bracket that closes it, counting nested
    /// pairs of the same kind (a `{` inside `(…)` does not need closing); nil where none does.
    private static func matchingCloses(_ chars: [Character]) -> [Int?] {
        var closes = [Int?](repeating: nil, count: chars.count)
        var openParens: [Int] = []
        var openBraces: [Int] = []
        for (j, c) in chars.enumerated() {
            switch c {
            case "(": openParens.append(j)
            case "{": openBraces.append(j)
            case ")": if let open = openParens.popLast() { closes[open] = j }
            case "}": if let open = openBraces.popLast() { closes[open] = j }
            default: break
            }
        }
        return closes
    }
}

extension BuildSettingExpander.Unresolved: Error {}
