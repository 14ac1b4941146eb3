import AppHostProtocol
import Foundation
import Testing

/// Privacy services, decisions and the scope of an `apphost privacy` command, as types.
@Suite struct PrivacyTypesTests {
    /// The names `simctl privacy` uses, in its order: what the `privacy` table holds.
    @Test func serviceRawValuesAreSimctlNames() {
        #expect(PrivacyService.allCases.map(\.rawValue) == [
            "calendar", "contacts-limited", "contacts", "location", "location-always",
            "photos-add", "photos", "media-library", "microphone", "motion", "reminders", "siri", "camera",
        ])
        #expect(PrivacyScope.allCases.map(\.rawValue).first == "all")
        #expect(PrivacyScope.allCases.count == PrivacyService.allCases.count + 1)
    }

    /// The strings stored by earlier hosts.
    @Test func decisionRawValuesAreTheStoredStrings() {
        #expect(PrivacyDecision.allCases.map(\.rawValue) == ["granted", "denied"])
        #expect(PrivacyDecision(rawValue: "granted") == .granted)
        #expect(PrivacyDecision(rawValue: "Granted") == nil)
    }

    @Test(arguments: ["all", "location", "location-always", "contacts-limited", "camera"])
    func scopeRoundTrips(name: String) throws {
        let scope = try #require(PrivacyScope(rawValue: name))
        #expect(scope.rawValue == name)
    }

    @Test func scopeStandsForItsServices() {
        #expect(PrivacyScope.all.services == PrivacyService.allCases)
        #expect(PrivacyScope.service(.siri).services == [.siri])
        #expect(PrivacyScope(rawValue: "telepathy") == nil)
        #expect(PrivacyScope(rawValue: "") == nil)
    }

    /// A control request as an earlier CLI sent it still decodes; an unknown service does not.
    @Test func commandOnTheWireIsUnchanged() throws {
        let command = ModeCommand.privacy(action: .grant, service: .service(.locationAlways), bundleIdentifier: testID("com.example.a"))
        let text = String(decoding: try WireJSON.encoder().encode(command), as: UTF8.self)
        #expect(text.contains(#""service":"location-always""#), "\(text)")
        #expect(try WireJSON.decoder().decode(ModeCommand.self, from: Data(text.utf8)) == command)
        let all = text.replacingOccurrences(of: "location-always", with: "all")
        #expect(try WireJSON.decoder().decode(ModeCommand.self, from: Data(all.utf8))
            == .privacy(action: .grant, service: .all, bundleIdentifier: testID("com.example.a")))
        let unknown = text.replacingOccurrences(of: "location-always", with: "telepathy")
        #expect(throws: DecodingError.self) { try WireJSON.decoder().decode(ModeCommand.self, from: Data(unknown.utf8)) }
    }
}
