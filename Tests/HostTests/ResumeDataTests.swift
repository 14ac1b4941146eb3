import AppHostProtocol
import Foundation
import Testing
@testable import Host

/// Resume data comes back from apps, so the host reads it as untrusted input.
@Suite("Resume data")
struct ResumeDataTests {
    let dir = "/state/containers/com.x/Library/Caches/com.apphost.transfers"

    func plist(_ values: [String: Any]) throws -> Data {
        try PropertyListSerialization.data(fromPropertyList: values, format: .xml, options: 0)
    }

    @Test func roundTripUsesIOSKeysAndKeepsOnlyTheFileName() throws {
        let resume = TransferResume(partialFile: dir + "/CFNetworkDownload_7.tmp.part", bytes: 1234, etag: "\"e\"", lastModified: nil)
        let data = try #require(ResumeData.encode(url: "https://example.com/a", headers: ["Authorization": "x"], resume))
        let raw = try #require(try PropertyListSerialization.propertyList(from: data, options: [], format: nil) as? [String: Any])
        #expect(raw["NSURLSessionDownloadURL"] as? String == "https://example.com/a")
        #expect(raw["NSURLSessionResumeBytesReceived"] as? Int == 1234)
        #expect(raw["NSURLSessionResumeEntityTag"] as? String == "\"e\"")
        #expect(raw["NSURLSessionResumeInfoTempFileName"] as? String == "CFNetworkDownload_7.tmp.part")
        let decoded = try ResumeData.decode(data, transfersDirectory: dir).get()
        #expect(decoded.url == "https://example.com/a")
        #expect(decoded.headers == ["Authorization": "x"])
        #expect(decoded.resume == resume)
    }

    @Test(arguments: [
        ("not a plist", "not a property list"),
        ("url", "NSURLSessionDownloadURL"),
        ("bytes", "NSURLSessionResumeBytesReceived"),
        ("../../other/file", "not a file name"),
        ("/etc/shadow", "not a file name"),
        ("..", "not a file name"),
        ("validator", "no validator"),
    ])
    func forgedOrBrokenResumeDataIsRefusedWithAReason(_ broken: String, _ reason: String) throws {
        var values: [String: Any] = [
            "NSURLSessionDownloadURL": "https://example.com/a", "NSURLSessionResumeBytesReceived": 10,
            "NSURLSessionResumeInfoTempFileName": "CFNetworkDownload_1.tmp.part", "NSURLSessionResumeEntityTag": "\"e\"",
        ]
        var data: Data
        switch broken {
        case "not a plist": data = Data("{\"json\": true}".utf8)
        case "url": values["NSURLSessionDownloadURL"] = "file:///etc/passwd"; data = try plist(values)
        case "bytes": values["NSURLSessionResumeBytesReceived"] = -1; data = try plist(values)
        case "validator": values["NSURLSessionResumeEntityTag"] = nil; data = try plist(values)
        default: values["NSURLSessionResumeInfoTempFileName"] = broken; data = try plist(values)
        }
        switch ResumeData.decode(data, transfersDirectory: dir) {
        case .success(let decoded): Issue.record("accepted \(broken): \(decoded)")
        case .failure(let problem): #expect(problem.reason.contains(reason), "\(problem.reason)")
        }
    }

    /// An app can hand back any bytes as resume data. A binary property list holding a
    /// set killed the host (SIGSEGV in Foundation's reader); fuzzing the manifest reader
    /// found it. Now it is refused like any other broken resume data.
    @Test func resumeDataHoldingASetIsRefusedNotACrash() throws {
        let values: [String: Any] = [
            "NSURLSessionDownloadURL": "https://example.com/a", "NSURLSessionResumeBytesReceived": 10,
            "NSURLSessionResumeInfoTempFileName": "CFNetworkDownload_1.tmp", "NSURLSessionResumeEntityTag": "\"e\"",
            "Extra": ["x"],
        ]
        var bytes = [UInt8](try PropertyListSerialization.data(fromPropertyList: values, format: .binary, options: 0))
        // Turn the one-element array ["x"] (marker 0xA1) into a one-element set (0xC1).
        let arrays = bytes.indices.filter { bytes[$0] == 0xA1 }
        try #require(arrays.count == 1)
        bytes[arrays[0]] = 0xC1
        switch ResumeData.decode(Data(bytes), transfersDirectory: dir) {
        case .success(let decoded): Issue.record("accepted resume data holding a set: \(decoded)")
        case .failure(let problem): #expect(problem.reason.contains("not a property list"), "\(problem.reason)")
        }
    }
}
