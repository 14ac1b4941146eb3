import AppHostProtocol
import Foundation
import Testing
@testable import AppKitLess

/// `Data.WritingOptions`' protection options are values in one four-bit field, not flags:
/// each maps to its own class, whatever other options come with it.
@Suite("Data protection options")
struct DataProtectionOptionsTests {
    @Test func eachOptionIsItsOwnClass() {
        let cases: [(Data.WritingOptions, FileProtectionClass)] = [
            (.completeFileProtection, .complete),
            (.completeFileProtectionUnlessOpen, .completeUnlessOpen),
            (.completeFileProtectionUntilFirstUserAuthentication, .completeUntilFirstUserAuthentication),
            (.noFileProtection, FileProtectionClass.none),
            ([.atomic, .completeFileProtectionUnlessOpen], .completeUnlessOpen),
        ]
        for (options, protection) in cases {
            #expect(options.protectionClass == protection, "\(options.rawValue)")
        }
    }

    @Test func noProtectionOptionNamesNoClass() {
        #expect(Data.WritingOptions.atomic.protectionClass == nil)
        #expect(Data.WritingOptions().protectionClass == nil)
    }
}
