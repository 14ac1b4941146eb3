import AppHostProtocol
import Foundation
import NIOCore

/// Frames to an app: encoded once, written whole through its ``SocketWriter``, held
/// while a virtual-clock continue awaits the kernel's confirmation.
extension Supervisor {
    /// Callbacks sent to `id`'s current process so far (its last sequence number); nil
    /// when it does not run. The hang watchdog sends none.
    func callbacksSent(_ id: String) -> UInt64? {
        runtimes[id]?.seq
    }

    func send(_ id: String, _ message: HostMessage) {
        // Replies held for the end of a list of transfer effects go first: frames keep
        // the order they were made in.
        if !transfers.replyBuffers.isEmpty, let held = transfers.replyBuffers.removeValue(forKey: id) {
            sendFrames(id, held)
        }
        do {
            sendFrames(id, try Frame.encode(message))
        } catch {
            logger.error("could not encode \(message): \(error)")
        }
    }

    /// Sends the frames held for a continue's confirmation (see `heldForContinue`).
    /// `checkingSettled`: whether a settle waiting for it may end now (not from the
    /// settle timer's own handler, which ends it itself).
    func releaseHeldFrames(_ id: String, checkingSettled: Bool = true) {
        guard let held = runtimes[id]?.heldForContinue else { return }
        runtimes[id]?.heldForContinue = nil
        if !held.isEmpty { sendFrames(id, held) }
        if checkingSettled { checkSettled() }
    }

    /// Writes whole frames to an app's socket (see ``SocketWriter``); held while a
    /// virtual-clock continue awaits the kernel's confirmation.
    func sendFrames(_ id: String, _ bytes: [UInt8]) {
        if runtimes[id]?.heldForContinue != nil {
            runtimes[id]?.heldForContinue?.append(contentsOf: bytes)
            return
        }
        guard let channel = runtimes[id]?.channel else {
            logger.warning("no connection to \(id); dropped \(bytes.count) bytes of frames")
            return
        }
        if let writer = runtimes[id]?.writer {
            writer.send(bytes, else: channel)
        } else {
            channel.writeAndFlush(ByteBuffer(bytes: bytes), promise: nil)
        }
    }
}
