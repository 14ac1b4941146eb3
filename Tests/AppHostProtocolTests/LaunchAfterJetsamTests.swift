import AppHostProtocol
import Foundation
import Testing

/// A launch after jetsam, on the wire.
@Suite("LaunchOptions: after jetsam")
struct LaunchAfterJetsamTests {
    @Test func launchOptionsWriteAfterJetsamOnlyWhenTrue() throws {
        let plain = String(decoding: try WireJSON.encoder().encode(LaunchOptions(reason: .user, arguments: ["a"])), as: UTF8.self)
        #expect(plain == #"{"arguments":["a"],"reason":"user"}"#, "the frame of every other launch is unchanged")
        let cold = LaunchOptions(reason: .user, arguments: [], afterJetsam: true)
        let data = try WireJSON.encoder().encode(cold)
        #expect(String(decoding: data, as: UTF8.self) == #"{"afterJetsam":true,"arguments":[],"reason":"user"}"#)
        #expect(try WireJSON.decoder().decode(LaunchOptions.self, from: data) == cold)
        // A frame from before the field decodes as not after jetsam.
        #expect(try WireJSON.decoder().decode(LaunchOptions.self, from: Data(plain.utf8)).afterJetsam == false)
    }

    @Test func aLaunchAfterJetsamTakesTheGenericCoderBothWays() throws {
        let message = HostMessage.callback(seq: 3, callback: .didFinishLaunching(options: LaunchOptions(reason: .user, afterJetsam: true)), state: .inactive)
        let frame = try Frame.encode(message)
        var decoder = FrameDecoder()
        decoder.append(frame)
        let back = try Frame.decode(HostMessage.self, from: try #require(try decoder.next()))
        #expect(back == message)
        let warning = HostMessage.callback(seq: 4, callback: .didReceiveMemoryWarning, state: .background)
        decoder.append(try Frame.encode(warning))
        #expect(try Frame.decode(HostMessage.self, from: try #require(try decoder.next())) == warning)
        decoder.append(try Frame.encode(AppMessage.memoryFootprintChanged))
        #expect(try Frame.decode(AppMessage.self, from: try #require(try decoder.next())) == .memoryFootprintChanged)
    }
}
