import Foundation

/// A validator for the part of JSON Schema (draft 2020-12) that `docs/schemas/` uses:
/// `type` (a name or a list), `required`, `properties`, `additionalProperties` (a
/// boolean or a schema), `items`, `enum`, `const`, and `$ref` to `#/$defs/<name>` of
/// the same file. Annotations (`$schema`, `$id`, `title`, `description`, `$defs`,
/// `$comment`, `examples`, `format`) are read past. Any other keyword is an error in the
/// schema, so a schema cannot lean on a rule this validator would silently skip.
public struct JSONSchema: @unchecked Sendable {  // read once from JSON, never changed
    /// What is wrong with a value: where (a JSON Pointer-like path) and what.
    public struct Violation: Sendable, Equatable, CustomStringConvertible {
        public var path: String
        public var message: String
        public var description: String { "\(path.isEmpty ? "/" : path): \(message)" }
    }

    /// The schema is not one this validator can apply.
    public struct SchemaError: Error, CustomStringConvertible {
        public var description: String
    }

    static let annotations: Set<String> = ["$schema", "$id", "title", "description", "$defs", "$comment", "examples", "format"]
    static let keywords: Set<String> = ["type", "required", "properties", "additionalProperties", "items", "enum", "const", "$ref"]

    private let root: [String: Any]

    /// A schema from a file's bytes; throws if it is not JSON or uses a keyword this
    /// validator does not apply, or a `$ref` it cannot resolve.
    public init(data: Data) throws {
        guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw SchemaError(description: "a schema is a JSON object")
        }
        root = object
        try check(object, at: "#")
    }

    /// A schema from a file.
    public init(path: String) throws {
        guard let data = FileManager.default.contents(atPath: path) else { throw SchemaError(description: "\(path): cannot read") }
        try self.init(data: data)
    }

    /// The schema's `$id`.
    public var id: String? { root["$id"] as? String }

    /// Every violation of `text` (JSON) against the schema; empty when it conforms.
    public func violations(ofJSON text: String) -> [Violation] {
        let value: Any
        do {
            value = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
        } catch {
            return [Violation(path: "", message: "not JSON: \(error)")]
        }
        return violations(of: value)
    }

    /// Every violation of a value from `JSONSerialization` against the schema.
    public func violations(of value: Any) -> [Violation] {
        var out: [Violation] = []
        validate(value, root, path: "", into: &out)
        return out
    }

    // MARK: the schema itself

    private func check(_ schema: [String: Any], at where_: String) throws {
        for key in schema.keys where !Self.annotations.contains(key) && !Self.keywords.contains(key) {
            throw SchemaError(description: "\(where_): keyword \"\(key)\" is not supported by this validator")
        }
        if let ref = schema["$ref"] {
            guard let ref = ref as? String, resolve(ref) != nil else { throw SchemaError(description: "\(where_): cannot resolve $ref \(schema["$ref"]!)") }
        }
        if let defs = schema["$defs"] as? [String: Any] {
            for (name, def) in defs {
                guard let def = def as? [String: Any] else { throw SchemaError(description: "\(where_)/$defs/\(name): not a schema") }
                try check(def, at: "\(where_)/$defs/\(name)")
            }
        }
        if let props = schema["properties"] {
            guard let props = props as? [String: Any] else { throw SchemaError(description: "\(where_)/properties: not an object") }
            for (name, sub) in props {
                guard let sub = sub as? [String: Any] else { throw SchemaError(description: "\(where_)/properties/\(name): not a schema") }
                try check(sub, at: "\(where_)/properties/\(name)")
            }
        }
        if let items = schema["items"] {
            guard let items = items as? [String: Any] else { throw SchemaError(description: "\(where_)/items: not a schema") }
            try check(items, at: "\(where_)/items")
        }
        if let extra = schema["additionalProperties"] {
            if let extra = extra as? [String: Any] {
                try check(extra, at: "\(where_)/additionalProperties")
            } else if Self.types(of: extra) != ["boolean"] {
                throw SchemaError(description: "\(where_)/additionalProperties: a boolean or a schema")
            }
        }
        if let type = schema["type"] {
            let names = (type as? [String]) ?? [(type as? String)].compactMap { $0 }
            guard !names.isEmpty, names.allSatisfy(Self.typeNames.contains) else {
                throw SchemaError(description: "\(where_)/type: \(type) is not a JSON Schema type")
            }
        }
        if let required = schema["required"], !(required is [String]) {
            throw SchemaError(description: "\(where_)/required: a list of names")
        }
    }

    static let typeNames: Set<String> = ["object", "array", "string", "number", "integer", "boolean", "null"]

    private func resolve(_ ref: String) -> [String: Any]? {
        let prefix = "#/$defs/"
        guard ref.hasPrefix(prefix) else { return nil }
        return (root["$defs"] as? [String: Any])?[String(ref.dropFirst(prefix.count))] as? [String: Any]
    }

    // MARK: values

    /// The JSON type names `value` has (an integer is also a number).
    private static func types(of value: Any) -> Set<String> {
        if value is NSNull { return ["null"] }
        if let n = value as? NSNumber {
            if isBoolean(n) { return ["boolean"] }
            let d = n.doubleValue
            return d.rounded() == d && d.isFinite ? ["number", "integer"] : ["number"]
        }
        if value is String { return ["string"] }
        if value is [Any] { return ["array"] }
        if value is [String: Any] { return ["object"] }
        return []
    }

    private static func isBoolean(_ n: NSNumber) -> Bool {
        // JSONSerialization gives `true`/`false` as NSNumber of type "c" (numbers are
        // "i", "q" or "d"); `is Bool` cannot tell, it holds for 0 and 1 too.
        String(cString: n.objCType) == "c"
    }

    private static func equal(_ a: Any, _ b: Any) -> Bool {
        let ta = types(of: a), tb = types(of: b)
        guard ta == tb || (ta.contains("number") && tb.contains("number")) else { return false }
        switch (a, b) {
        case (is NSNull, is NSNull): return true
        case (let x as NSNumber, let y as NSNumber): return x == y
        case (let x as String, let y as String): return x == y
        case (let x as [Any], let y as [Any]): return x.count == y.count && zip(x, y).allSatisfy(equal)
        case (let x as [String: Any], let y as [String: Any]):
            return x.count == y.count && x.allSatisfy { k, v in y[k].map { equal(v, $0) } ?? false }
        default: return false
        }
    }

    private func validate(_ value: Any, _ schema: [String: Any], path: String, into out: inout [Violation]) {
        if let ref = schema["$ref"] as? String, let target = resolve(ref) {
            validate(value, target, path: path, into: &out)
        }
        let have = Self.types(of: value)
        if let type = schema["type"] {
            let allowed = Set((type as? [String]) ?? [(type as? String)].compactMap { $0 })
            if allowed.isDisjoint(with: have) {
                out.append(Violation(path: path, message: "expected \(allowed.sorted().joined(separator: " or ")), got \(have.sorted().last ?? "?") \(Self.show(value))"))
                return
            }
        }
        if let constant = schema["const"], !Self.equal(value, constant) {
            out.append(Violation(path: path, message: "expected \(Self.show(constant)), got \(Self.show(value))"))
        }
        if let choices = schema["enum"] as? [Any], !choices.contains(where: { Self.equal(value, $0) }) {
            out.append(Violation(path: path, message: "\(Self.show(value)) is not one of \(choices.map(Self.show).joined(separator: ", "))"))
        }
        if let object = value as? [String: Any] {
            for name in (schema["required"] as? [String]) ?? [] where object[name] == nil {
                out.append(Violation(path: path, message: "required field \"\(name)\" is missing"))
            }
            let props = (schema["properties"] as? [String: Any]) ?? [:]
            for (name, sub) in object.sorted(by: { $0.key < $1.key }) {
                let subPath = path + "/" + name
                if let p = props[name] as? [String: Any] {
                    validate(sub, p, path: subPath, into: &out)
                } else if let extraSchema = schema["additionalProperties"] as? [String: Any] {
                    validate(sub, extraSchema, path: subPath, into: &out)
                } else if let allowed = schema["additionalProperties"] as? NSNumber, !allowed.boolValue {
                    out.append(Violation(path: subPath, message: "field \"\(name)\" is not in the schema"))
                }
            }
        }
        if let array = value as? [Any], let items = schema["items"] as? [String: Any] {
            for (i, item) in array.enumerated() {
                validate(item, items, path: path + "/\(i)", into: &out)
            }
        }
    }

    private static func show(_ value: Any) -> String {
        if value is NSNull { return "null" }
        if let s = value as? String { return "\"\(s)\"" }
        if let n = value as? NSNumber { return isBoolean(n) ? (n.boolValue ? "true" : "false") : "\(n)" }
        if let data = try? JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed, .sortedKeys]) {
            let text = String(decoding: data, as: UTF8.self)
            return text.count > 80 ? String(text.prefix(80)) + "…" : text
        }
        return "\(value)"
    }
}
