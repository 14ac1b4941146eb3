import AppHostProtocol
import Foundation
import NIOCore

/// Frames to an app: encoded once, written whole through its ``SocketWriter``, held
/// while a virtual-clock continue awaits the kernel's confirmation.
extension Supervisor {
    /// Callbacks sent to `id`'s current process so far (its last sequence number); nil
    /// when it does not run. The hang watchdog sends none.
    func callbacksSent(_ id: BundleID) -> UInt64? {
        processes[id]?.seq
    }

    func send(_ id: BundleID, _ message: HostMessage) {
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
    func releaseHeldFrames(_ id: BundleID, checkingSettled: Bool = true) {
        guard let held = processes[id]?.heldForContinue else { return }
        processes[id]?.heldForContinue = nil
        if !held.isEmpty { sendFrames(id, held) }
        if checkingSettled { checkSettled() }
    }

    /// Writes whole frames to an app's socket (see ``SocketWriter``); held while a
    /// virtual-clock continue awaits the kernel's confirmation. During a step (an input
    /// of the run loop) the frames are kept, with the connection they are for, and
    /// written when the step ends (``flushStepFrames()``), one write an app: an app's
    /// thread woken by a frame in the middle of a step was often queued on the host's
    /// CPU and took it from the rest of the step (a launch's last step, then the
    /// launch() it answers, waited for the app's didBecomeActive).
    func sendFrames(_ id: BundleID, _ bytes: [UInt8]) {
        touch(id)
        if processes[id]?.heldForContinue != nil {
            processes[id]?.heldForContinue?.append(contentsOf: bytes)
            return
        }
        guard let channel = processes[id]?.channel else {
            logger.warning("no connection to \(id); dropped \(bytes.count) bytes of frames")
            return
        }
        if scope.keep(bytes, channel: channel, writer: processes[id]?.writer) { return }
        Self.write(bytes, channel: channel, writer: processes[id]?.writer)
    }

    /// Writes the frames kept during the step, in the order each connection got them.
    func flushStepFrames() {
        for pending in scope.takeFrames() {
            Self.write(pending.bytes, channel: pending.channel, writer: pending.writer)
        }
    }

    private static func write(_ bytes: [UInt8], channel: any Channel, writer: SocketWriter?) {
        if let writer {
            writer.send(bytes, else: channel)
        } else {
            channel.writeAndFlush(ByteBuffer(bytes: bytes), promise: nil)
        }
    }
}
