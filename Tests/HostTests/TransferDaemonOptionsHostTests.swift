import AppHostProtocol
import HostConfig
import Plugins
import Testing
import TransferOptions
@testable import Host

/// The command line the host starts the transfer daemon with (`startTransferDaemon`):
/// its folder, the containers, the device now, and the config file's `"transfers"`.
@Suite struct TransferDaemonOptionsHostTests {
    @Test func withoutTransferSettingsTheDaemonKeepsItsDefaults() {
        var device = DeviceState()
        device.pluggedIn = false
        let options = TransferDaemonOptions(stateDirectory: "/st/transfers", containers: "/st/containers",
                                            device: device, settings: TransferSettings())
        #expect(options.arguments == ["--state-dir", "/st/transfers", "--containers", "/st/containers"])
        var expected = TransferDaemonOptions(stateDirectory: "/st/transfers")
        expected.containers = "/st/containers"
        #expect(options == expected)
    }

    @Test func theConfigsSettingsAndTheDeviceAreItsOptions() {
        var device = DeviceState()
        (device.pluggedIn, device.network) = (true, .cellular)
        var settings = TransferSettings()
        (settings.extraCA, settings.perHost, settings.maxConcurrent) = ("/etc/ca.pem", 2, 8)
        (settings.retryBase, settings.maxAttempts) = (0.5, 3)
        let options = TransferDaemonOptions(stateDirectory: "/st/transfers", containers: "/st/containers",
                                            device: device, settings: settings)
        #expect(options.arguments == [
            "--state-dir", "/st/transfers", "--containers", "/st/containers", "--extra-ca", "/etc/ca.pem",
            "--retry-base", "0.5", "--max-attempts", "3", "--per-host", "2", "--max-concurrent", "8",
            "--power", "plugged", "--network", "cellular",
        ])
    }
}
