import AppHostProtocol
import Testing
@testable import Plugins

@Suite("Mode registry")
struct RegistryTests {
    @Test("every documented mode has exactly one plugin")
    func oneEach() {
        for mode in BackgroundMode.allCases {
            #expect(ModeRegistry.all.filter { $0.mode == mode }.count == 1, "\(mode.rawValue)")
        }
    }
}
