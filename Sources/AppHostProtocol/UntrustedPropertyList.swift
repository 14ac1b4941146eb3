import Foundation

/// Foundation's property list reader for bytes from outside (a bundle's Info.plist and
/// entitlements, the resume data an app hands back), behind a check of what Foundation
/// on Linux cannot read without crashing.
///
/// A binary property list holding a non-empty set (object marker `0xC`) kills the
/// process with SIGSEGV inside `PropertyListSerialization` (swift-corelibs-foundation as
/// of Swift 6.3.1 bridges the set's elements wrongly); fuzzing found it (SECURITY.md).
/// XML and OpenStep property lists have no set type and no property list AppHost reads
/// needs one, so a binary property list that holds a set, even an empty one, is refused
/// before Foundation sees it.
public enum UntrustedPropertyList {
    /// Why bytes were refused before Foundation read them.
    public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        /// What is wrong, in one line.
        public var reason: String

        /// Creates a refusal.
        public init(reason: String) {
            self.reason = reason
        }

        public var description: String { reason }
    }

    /// The property list in `data` and the format it was written in. Throws a
    /// ``Refusal``, or Foundation's error for bytes that are not a property list.
    public static func object(from data: Data) throws -> (object: Any, format: PropertyListSerialization.PropertyListFormat) {
        try check(data)
        var format = PropertyListSerialization.PropertyListFormat.xml
        let object = try PropertyListSerialization.propertyList(from: data, options: [], format: &format)
        return (object, format)
    }

    /// Refuses a binary property list (`bplist0…`, the prefix CoreFoundation looks for)
    /// that holds a set. Its trailer and offset table are read as CoreFoundation reads
    /// them and each object's marker byte is looked at; a table that cannot be read is
    /// refused too, so that no set reaches Foundation through a layout this check does
    /// not follow. Other bytes pass unchanged.
    public static func check(_ data: Data) throws(Refusal) {
        let problem: String? = data.withUnsafeBytes { raw in
            let bytes = raw.bindMemory(to: UInt8.self)
            return binaryProblem(bytes)
        }
        if let problem { throw Refusal(reason: problem) }
    }

    private static let headerSize = 8
    private static let trailerSize = 32

    private static func binaryProblem(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        let magic = Array("bplist0".utf8)
        guard bytes.count >= magic.count, zip(bytes, magic).allSatisfy({ $0 == $1 }) else { return nil }
        guard bytes.count >= headerSize + 1 + trailerSize else {
            return "binary property list of \(bytes.count) bytes is too short for a header, an object and a trailer"
        }
        let trailer = bytes.count - trailerSize
        let offsetSize = Int(bytes[trailer + 6])
        let referenceSize = Int(bytes[trailer + 7])
        guard (1...8).contains(offsetSize), (1...8).contains(referenceSize) else {
            return "binary property list trailer gives offsets of \(offsetSize) and references of \(referenceSize) bytes (1 to 8 expected)"
        }
        let count = integer(bytes, at: trailer + 8, size: 8)
        let tableOffset = integer(bytes, at: trailer + 24, size: 8)
        let objectEnd = UInt64(trailer)
        guard count >= 1, tableOffset > UInt64(headerSize), tableOffset < objectEnd,
              count <= (objectEnd - tableOffset) / UInt64(offsetSize)
        else {
            return "binary property list trailer: \(count) objects with an offset table at \(tableOffset) do not fit in \(bytes.count) bytes"
        }
        let table = Int(tableOffset)
        for index in 0..<Int(count) {
            let offset = integer(bytes, at: table + index * offsetSize, size: offsetSize)
            guard offset >= UInt64(headerSize), offset < tableOffset else {
                return "binary property list object \(index) is at offset \(offset), outside the objects (\(headerSize) to \(tableOffset))"
            }
            if bytes[Int(offset)] >> 4 == 0xC {
                return "binary property list holds a set (object \(index) at offset \(offset)); the property lists AppHost reads have no sets (Foundation on Linux crashes reading them)"
            }
        }
        return nil
    }

    /// The big-endian unsigned integer of `size` bytes (at most 8) at `offset`.
    private static func integer(_ bytes: UnsafeBufferPointer<UInt8>, at offset: Int, size: Int) -> UInt64 {
        var value: UInt64 = 0
        for i in 0..<size { value = value << 8 | UInt64(bytes[offset + i]) }
        return value
    }
}
