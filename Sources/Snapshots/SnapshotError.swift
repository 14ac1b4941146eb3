/// Why rendering, encoding or decoding a snapshot failed.
public struct SnapshotError: Error, CustomStringConvertible, Sendable, Equatable {
    /// What kind of failure; room to add codes without breaking callers.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// No usable font: install `fonts-dejavu-core` or set `APPHOST_FONT`.
        public static let noFont = Code("noFont")
        /// FreeType refused a call.
        public static let freeType = Code("freeType")
        /// libpng could not encode or decode.
        public static let png = Code("png")
        /// An argument out of range: a screen, image or thumbnail size, a pixel count.
        public static let invalidArgument = Code("invalidArgument")
    }

    public var code: Code
    /// What happened and, where there is one, what to do.
    public var description: String

    public init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }
}
