import AppHostSystem
import NIOCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Writes the host's frames to an app's socket from the supervisor's thread, on a
/// duplicate of the descriptor its NIO channel reads: a frame goes out with one
/// `send(2)` instead of waking the channel's event loop to write it (a thread wake on
/// every callback, ~40 µs in this VM). While the socket's buffer has room (the app
/// reads), that is every frame. The first frame that does not fit whole (EAGAIN, a
/// short write) goes to the channel, rest and all, and so does every frame after it
/// until the channel has written all it was given: frames stay in order, and an app
/// that does not read meets the channel's bound (``AppBounds/unreadBytes``) as before.
/// Once the channel's writes are all done, frames go directly again (a burst of answers
/// the app had not read yet used to send every later frame through the event loop).
///
/// Owned by the app's runtime; the duplicate is closed when the writer goes (the
/// runtime's end) or by ``close()`` (wherever the channel is closed), so it never
/// keeps the socket open past the channel.
final class SocketWriter: Sendable {
    private struct State {
        var descriptor: Int32
        /// The channel took over (see the type's documentation).
        var handedOver = false
        /// Writes handed to the channel and not yet done; at 0 the writer sends directly again.
        var inChannel = 0
        /// Closed: the channel keeps the socket for good.
        var closed = false
    }

    /// Used from the supervisor only; the lock makes the runtime that holds it Sendable.
    private let state: Mutex<State>

    /// Takes ownership of `descriptor` (a duplicate of the channel's).
    init(descriptor: Int32) {
        state = Mutex(State(descriptor: descriptor))
    }

    deinit { close() }

    /// Whether the channel has taken over.
    var handedOver: Bool { state.withLock { $0.handedOver } }

    /// Sends `bytes` directly, or hands them (or what is left of them) to `channel`.
    func send(_ bytes: [UInt8], else channel: any Channel) {
        let sent = state.withLock { state -> Int in
            guard !state.handedOver, state.descriptor >= 0 else {
                state.inChannel += 1
                return 0
            }
            var sent = 0
            while sent < bytes.count {
                let n = bytes.withUnsafeBytes { raw in
                    Glibc.send(state.descriptor, raw.baseAddress! + sent, raw.count - sent, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
                }
                if n > 0 {
                    sent += n
                    continue
                }
                if n < 0 && errno == EINTR { continue }
                // EAGAIN (full), or an error (the app is gone): the channel carries on and
                // sees the same error its own way.
                break
            }
            if sent < bytes.count {
                state.handedOver = true
                state.inChannel += 1
            }
            return sent
        }
        guard sent < bytes.count else { return }
        let promise = channel.eventLoop.makePromise(of: Void.self)
        promise.futureResult.whenComplete { [self] _ in channelWriteDone() }
        channel.writeAndFlush(ByteBuffer(bytes: bytes[sent...]), promise: promise)
    }

    /// A write handed to the channel is done (written, or failed with the channel): when
    /// it was the last, the socket has everything the channel was given.
    private func channelWriteDone() {
        state.withLock { state in
            state.inChannel -= 1
            if state.inChannel == 0, !state.closed, state.descriptor >= 0 { state.handedOver = false }
        }
    }

    /// Whether the app has written bytes the host has not read yet (a peek at the socket's
    /// receive queue: nothing is consumed). False once closed.
    func unreadInbound() -> Bool {
        state.withLock { state in
            guard state.descriptor >= 0 else { return false }
            var byte: UInt8 = 0
            let n = Glibc.recv(state.descriptor, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
            return n > 0
        }
    }

    /// Closes the duplicate (the channel's descriptor is the channel's).
    func close() {
        state.withLock { state in
            guard state.descriptor >= 0 else { return }
            _ = Glibc.close(state.descriptor)
            state.descriptor = -1
            state.handedOver = true
            state.closed = true
        }
    }
}
