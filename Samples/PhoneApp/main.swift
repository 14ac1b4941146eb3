// PhoneApp: registers for VoIP pushes (PushRegistry) and reports every push as an
// incoming call (CallProvider), as iOS 13+ requires, then ends the call after
// `--call-seconds N` (default 10). With `voip` in UIBackgroundModes
// (manifests/Phone.app) a push launches it in the background if it is not
// running, and the reported call keeps it running until it ends:
//
//     echo '{"caller": "Ada"}' | apphost push --type voip com.example.phone -
import AppKitLess
import Foundation

/// Parses `--call-seconds N` from the launch arguments; exits 64 on anything else.
func callSeconds(from arguments: [String]) -> Double {
    var seconds = 10.0
    var rest = arguments[...]
    while let argument = rest.popFirst() {
        if argument == "--call-seconds", let value = rest.popFirst(), let n = Double(value), n >= 0, n.isFinite {
            seconds = n
        } else {
            FileHandle.standardError.write(Data("PhoneApp: usage: PhoneApp [--call-seconds N] (got \(arguments))\n".utf8))
            exit(64)
        }
    }
    return seconds
}

/// Turns VoIP pushes into calls and logs every callback.
final class PhoneDelegate: ApplicationDelegate, PushRegistryDelegate {
    let callSeconds: Double
    private let provider = CallProvider()
    private var registry: PushRegistry?

    init(callSeconds: Double) {
        self.callSeconds = callSeconds
    }

    func didFinishLaunching(_ application: Application, options: LaunchOptions) -> Bool {
        log("didFinishLaunching state=\(application.applicationState) reason=\(options.reason.rawValue)")
        // Created while launching, so a push that launched the app reaches it.
        let registry = PushRegistry(delegate: self)
        self.registry = registry
        do {
            log("VoIP push token \(try registry.register())")
        } catch {
            log("VoIP registration refused: \(error)")
        }
        return true
    }
    func willResignActive(_ application: Application) { log("willResignActive state=\(application.applicationState)") }
    func didEnterBackground(_ application: Application) { log("didEnterBackground state=\(application.applicationState)") }
    func willEnterForeground(_ application: Application) { log("willEnterForeground state=\(application.applicationState)") }
    func didBecomeActive(_ application: Application) { log("didBecomeActive state=\(application.applicationState)") }
    func willTerminate(_ application: Application) { log("willTerminate state=\(application.applicationState)") }

    // MARK: PushRegistryDelegate

    func didReceiveIncomingPush(_ registry: PushRegistry, payload: PushPayload) {
        let caller = payload.dictionary["caller"] as? String ?? "unknown"
        let uuid = UUID()
        log("VoIP push \(payload.json.trimmingCharacters(in: .whitespacesAndNewlines)) state=\(Application.shared.applicationState)")
        do {
            try provider.reportNewIncomingCall(uuid: uuid, handle: caller)
        } catch {
            log("reportNewIncomingCall refused: \(error)")
            return
        }
        log("incoming call \(uuid) from \(caller); ending it in \(String(format: "%g", callSeconds)) s")
        DispatchQueue.main.asyncAfter(deadline: .now() + callSeconds) { [weak self] in
            MainActor.assumeIsolated { self?.endCall(uuid) }
        }
    }

    private func endCall(_ uuid: UUID) {
        do {
            try provider.reportCallEnded(uuid: uuid)
            log("call \(uuid) ended")
        } catch {
            log("reportCallEnded refused: \(error)")
        }
    }

    private func log(_ line: String) {
        print("[PhoneApp] \(line)")
        fflush(nil)  // stdout is a log file: flush so each line is there at once
    }
}

ApplicationMain(delegate: PhoneDelegate(callSeconds: callSeconds(from: Array(CommandLine.arguments.dropFirst()))))
