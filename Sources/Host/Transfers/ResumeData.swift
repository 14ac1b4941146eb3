import AppHostProtocol
import Foundation

/// The resume data of `cancel(byProducingResumeData:)` and `downloadTask(withResumeData:)`:
/// a property list with the keys iOS's own resume data uses (`NSURLSessionDownloadURL`,
/// `NSURLSessionResumeBytesReceived`, `NSURLSessionResumeEntityTag`,
/// `NSURLSessionResumeServerDownloadDate`, `NSURLSessionResumeInfoTempFileName`). It is
/// opaque to apps but comes back from them, so the host trusts none of it: the URL must
/// be http(s) and the partial file a plain name in the app's own transfers directory.
enum ResumeData {
    static let version = 2

    struct Problem: Error {
        let reason: String
    }

    static func encode(url: String, headers: [String: String], _ resume: TransferResume) -> Data? {
        var plist: [String: Any] = [
            "NSURLSessionResumeInfoVersion": version,
            "NSURLSessionDownloadURL": url,
            "NSURLSessionResumeBytesReceived": resume.bytes,
            "NSURLSessionResumeInfoTempFileName": (resume.partialFile as NSString).lastPathComponent,
        ]
        if let etag = resume.etag { plist["NSURLSessionResumeEntityTag"] = etag }
        if let date = resume.lastModified { plist["NSURLSessionResumeServerDownloadDate"] = date }
        if !headers.isEmpty { plist["AppHostResumeRequestHeaders"] = headers }
        return try? PropertyListSerialization.data(fromPropertyList: plist, format: .xml, options: 0)
    }

    static func decode(_ data: Data, transfersDirectory: String) -> Result<(url: String, headers: [String: String], resume: TransferResume), Problem> {
        guard let object = try? UntrustedPropertyList.object(from: data).object,
              let plist = object as? [String: Any] else {
            return .failure(Problem(reason: "the resume data is not a property list (\(data.count) bytes)"))
        }
        guard let url = plist["NSURLSessionDownloadURL"] as? String, let scheme = URL(string: url)?.scheme?.lowercased(),
              scheme == "http" || scheme == "https" else {
            return .failure(Problem(reason: "the resume data has no http(s) NSURLSessionDownloadURL"))
        }
        guard let bytes = (plist["NSURLSessionResumeBytesReceived"] as? Int).map(Int64.init), bytes >= 0 else {
            return .failure(Problem(reason: "the resume data has no NSURLSessionResumeBytesReceived"))
        }
        guard let name = plist["NSURLSessionResumeInfoTempFileName"] as? String, !name.isEmpty, !name.contains("/"),
              name != ".", name != "..", !name.contains("\0") else {
            return .failure(Problem(reason: "the resume data's NSURLSessionResumeInfoTempFileName is not a file name"))
        }
        let etag = plist["NSURLSessionResumeEntityTag"] as? String
        let lastModified = plist["NSURLSessionResumeServerDownloadDate"] as? String
        guard etag != nil || lastModified != nil else {
            return .failure(Problem(reason: "the resume data has no validator (entity tag or date): the download cannot be resumed safely"))
        }
        let headers = plist["AppHostResumeRequestHeaders"] as? [String: String] ?? [:]
        return .success((url: url, headers: headers,
                         resume: TransferResume(partialFile: transfersDirectory + "/" + name, bytes: bytes, etag: etag, lastModified: lastModified)))
    }
}
