import Foundation

/// A binary property list (`bplist00`) of `objects`, each already encoded with 1-byte
/// object references; object 0 is the top. Offsets are 2 bytes.
public func binaryPlist(_ objects: [[UInt8]]) -> Data {
    var out = Array("bplist00".utf8)
    var offsets: [Int] = []
    for object in objects {
        offsets.append(out.count)
        out += object
    }
    let table = out.count
    for offset in offsets { out += [UInt8(offset >> 8), UInt8(offset & 0xff)] }
    func u64(_ n: Int) -> [UInt8] { (0..<8).reversed().map { UInt8((n >> ($0 * 8)) & 0xff) } }
    out += [0, 0, 0, 0, 0, 0, 2, 1] + u64(objects.count) + u64(0) + u64(table)
    return Data(out)
}

/// An ASCII string object (under 256 bytes).
public func bplistString(_ s: String) -> [UInt8] {
    let n = s.utf8.count
    return (n < 15 ? [0x50 | UInt8(n)] : [0x5F, 0x10, UInt8(n)]) + Array(s.utf8)
}
