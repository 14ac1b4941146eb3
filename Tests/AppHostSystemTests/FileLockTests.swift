import AppHostSystem
import Foundation
import Testing

@Suite("FileLock")
struct FileLockTests {
    @Test func aSecondAcquireIsRefusedWithTheHoldersPid() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/apphost.lock"
        let lock = try FileLock.acquire(path: path)
        #expect(lock.isHeld)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "\(getpid())\n")

        #expect(throws: FileLockError.held(path: path, holderPID: getpid())) {
            _ = try FileLock.acquire(path: path)
        }
        let message = FileLockError.held(path: path, holderPID: 42).description
        #expect(message.contains("held by pid 42"))

        lock.release()
        #expect(!lock.isHeld)
        let again = try FileLock.acquire(path: path)
        again.release()
    }

    @Test func deinitReleases() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/apphost.lock"
        do {
            let lock = try FileLock.acquire(path: path)
            _ = lock
        }
        let again = try FileLock.acquire(path: path)
        again.release()
    }

    @Test func anUnopenablePathSaysWhy() throws {
        let path = "/nonexistent-aph-dir/apphost.lock"
        #expect(throws: FileLockError.failed(path: path, operation: "open", errno: .noSuchFileOrDirectory)) {
            _ = try FileLock.acquire(path: path)
        }
    }
}
