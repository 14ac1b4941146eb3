import AppHostProtocol
@testable import Host

// The supervisor's control API takes a `BundleID`. The host tests hold ids as strings
// (their helpers return `InstalledApp.bundleIdentifier`), so these overloads check and
// convert in one place; an ill-formed string is the supervisor's "unknown bundle"
// answer, as it was before the type. They go once the test helpers hand out BundleIDs.
extension Supervisor {
    private static func checked(_ id: String) throws(ControlError) -> BundleID {
        do throws(BundleID.Problem) {
            return try BundleID(validating: id)
        } catch {
            throw ControlError(.unknownBundle, "unknown bundle id \"\(id)\": \(error)")
        }
    }

    func launch(_ id: String, background: Bool, arguments: [String], terminateRunning: Bool = false) async throws(ControlError) -> Int32 {
        try await launch(Self.checked(id), background: background, arguments: arguments, terminateRunning: terminateRunning)
    }
    func uninstall(_ id: String) async throws(ControlError) { try await uninstall(Self.checked(id)) }
    func foreground(_ id: String) async throws(ControlError) { try await foreground(Self.checked(id)) }
    func background(_ id: String) async throws(ControlError) { try await background(Self.checked(id)) }
    func terminate(_ id: String) async throws(ControlError) { try await terminate(Self.checked(id)) }
    func terminateMovingClock(_ id: String) async {
        guard let bundle = BundleID(id) else { return }
        await terminateMovingClock(bundle)
    }
    func status(_ id: String) async throws(ControlError) -> [AppStatus] { try await status(Self.checked(id)) }
    func reports(_ id: String) throws(ControlError) -> [TerminationReport] { try reports(Self.checked(id)) }
    func snapshot(_ id: String) async throws(ControlError) -> SnapshotInfo { try await snapshot(Self.checked(id)) }
}
