// libFuzzer target `manifest-xml`: Info.plist bytes in the text formats (XML, and the
// OpenStep form Foundation also reads) through the manifest reader. Seeds: the real
// Info.plists and entitlements of ../shared/corpus and the bundles in manifests/.
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ bytes: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    fuzzManifest(fuzzInput(bytes, size))
    return 0
}
