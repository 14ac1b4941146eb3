// The manifest reader under fuzzing: the bytes of an Info.plist go through the strict
// reader (`readRaw` then `resolve`, as `apphost install` reads a bundle) and the lenient
// one (`apphost lint`), which must agree as ManifestLenient.swift promises.
@testable import AppHostManifest
import AppHostProtocol
import Foundation

/// Settings as `apphost --setting` passes them, with references inside values, so that
/// `$(PRODUCT_BUNDLE_IDENTIFIER)` in a corpus file expands through an operator.
let fuzzSettings = [
    "PRODUCT_BUNDLE_IDENTIFIER": "org.example.$(PRODUCT_NAME:rfc1034identifier)",
    "PRODUCT_NAME": "Fuzz App",
    "DEVELOPMENT_LANGUAGE": "en",
    "MARKETING_VERSION": "1.0",
]

func fuzzManifest(_ data: Data) {
    let display = "Fuzz.app/Info.plist"
    let strict: Result<Manifest, ManifestError>
    do {
        let raw = try ManifestReader.readRaw(data: data, displayPath: display)
        // The bytes are kept and re-read for `lint`: they must give the same dictionary.
        let again = raw.propertyList()
        invariant(again.keys.sorted() == raw.keys, "re-read keys \(again.keys.sorted()) != \(raw.keys)")
        strict = .success(try ManifestReader.resolve(raw, settings: fuzzSettings, bundleName: "Fuzz"))
    } catch {
        strict = .failure(error)
    }

    let lenient = ManifestReader.readLenient(data: data, displayPath: display, settings: fuzzSettings, bundleName: "Fuzz")
    switch strict {
    case .success(let manifest):
        invariant(lenient.problems.isEmpty, "strict read passed, lint found \(lenient.problems)")
        invariant(lenient.manifest == manifest, "lint's manifest differs from the strict one")
        invariant(lenient.bundleIdentifierResolved, "strict read passed, lint says the bundle id is unresolved")
        _ = try? JSONEncoder().encode(manifest)
    case .failure(let error):
        invariant(lenient.problems.first == error,
                  "lint's first problem \(lenient.problems.first.map(String.init(describing:)) ?? "none") != strict error \(error)")
        invariant(!error.description.isEmpty, "empty error description")
    }
    for problem in lenient.problems { _ = problem.description }
}
