// libFuzzer target `manifest-binary`: `bplist00` Info.plists through the manifest reader.
// Inputs not starting with the magic are left out of the corpus, so the fuzzer stays on
// the binary parser. Seeds: the text seeds of `manifest-xml` converted with Foundation
// (`APPHOST_FUZZ_MAKE_SEEDS=DIR harness FILE...`), and the corpus's own binary plists.
import Foundation

#if canImport(Glibc)
import Glibc
#endif

private let magic = Data("bplist0".utf8)

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<Int32>,
                           _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>) -> Int32 {
    guard let request = seedRequest() else { return 0 }
    var written = 0
    for path in request.inputs {
        guard let data = FileManager.default.contents(atPath: path),
              let object = try? PropertyListSerialization.propertyList(from: data, options: [], format: nil),
              let binary = try? PropertyListSerialization.data(fromPropertyList: object, format: .binary, options: 0)
        else { continue }  // not a property list: nothing to convert
        // Numbered: the Info.plists of manifests/*.app share one base name.
        writeSeed(binary, named: "\(written)-" + (path as NSString).lastPathComponent + ".bplist", in: request.directory)
        written += 1
    }
    print("manifest-binary: \(written) of \(request.inputs.count) seeds converted to binary")
    exit(0)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ bytes: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let data = fuzzInput(bytes, size)
    guard data.starts(with: magic) else { return -1 }
    fuzzManifest(data)
    return 0
}
