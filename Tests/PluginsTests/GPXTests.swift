import AppHostProtocol
import Foundation
import Testing
@testable import Plugins

/// Writes `text` to a fresh temporary file and returns its path.
func temporaryFile(_ text: String, named name: String) throws -> String {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("apphost-plugins-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    let url = dir.appendingPathComponent(name)
    try Data(text.utf8).write(to: url)
    return url.path
}

/// Removes what ``temporaryFile(_:named:)`` made (the file's own folder).
func removeTemporaryFile(_ path: String) {
    try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent)
}

/// The GPXError `body` throws (fails the test if it throws none).
func gpxError<T>(_ body: @autoclosure () throws(GPXError) -> T) -> GPXError? {
    do throws(GPXError) {
        _ = try body()
        Issue.record("expected a GPXError")
        return nil
    } catch {
        return error
    }
}

@Suite("GPX reader")
struct GPXTests {
    static let track = """
        <?xml version="1.0" encoding="UTF-8"?>
        <gpx version="1.1" creator="test" xmlns="http://www.topografix.com/GPX/1/1">
          <metadata><name>Morning</name><time>2024-05-01T07:00:00Z</time></metadata>
          <wpt lat="1" lon="1"><name>Home</name></wpt>
          <trk>
            <name>Commute</name>
            <trkseg>
              <trkpt lat="37.3349" lon="-122.0090"><ele>18.5</ele><time>2024-05-01T08:00:00Z</time></trkpt>
              <trkpt lat="37.3352" lon="-122.0101"><ele>19</ele><time>2024-05-01T08:00:05.250Z</time></trkpt>
            </trkseg>
            <trkseg>
              <trkpt lat="37.3360" lon="-122.0120"/>
            </trkseg>
          </trk>
        </gpx>
        """

    @Test("a track: every segment's points in order, elevation and times")
    func track() throws {
        let path = try temporaryFile(Self.track, named: "commute.gpx")
        defer { removeTemporaryFile(path) }
        let (name, fixes) = try GPX.read(path: path)
        #expect(name == "commute.gpx")
        #expect(fixes.count == 3)
        #expect(fixes[0].latitude == 37.3349)
        #expect(fixes[0].longitude == -122.0090)
        #expect(fixes[0].altitude == 18.5)
        #expect(fixes[0].timestamp == Date(timeIntervalSince1970: 1_714_550_400))
        #expect(fixes[1].altitude == 19)
        // Fractional seconds are kept.
        #expect(fixes[1].timestamp.map { $0.timeIntervalSince1970 } == 1_714_550_405.25)
        #expect(fixes[2].altitude == nil)
        #expect(fixes[2].timestamp == nil)
    }

    @Test("a route: its <rtept> points")
    func route() throws {
        let gpx = """
            <gpx version="1.1"><rte><name>r</name>
              <rtept lat="48.8584" lon="2.2945"><ele>35</ele></rtept>
              <rtept lat="48.8606" lon="2.3376"/>
            </rte></gpx>
            """
        let fixes = try GPX.parse(data: Data(gpx.utf8), name: "route.gpx")
        #expect(fixes == [LocationFix(latitude: 48.8584, longitude: 2.2945, altitude: 35),
                          LocationFix(latitude: 48.8606, longitude: 2.3376)])
    }

    @Test("waypoints only, as Xcode's Simulate Location files, with times without fractional seconds")
    func waypoints() throws {
        let gpx = """
            <?xml version="1.0"?>
            <gpx version="1.1" creator="Xcode">
              <wpt lat="51.5007" lon="-0.1246"><name>Westminster</name><time>2014-09-24T14:55:37Z</time></wpt>
              <wpt lat="51.5033" lon="-0.1196"><time>2014-09-24T14:55:47Z</time></wpt>
            </gpx>
            """
        let fixes = try GPX.parse(data: Data(gpx.utf8), name: "london.gpx")
        #expect(fixes.count == 2)
        #expect(fixes[1].latitude == 51.5033)
        let first = try #require(fixes[0].timestamp)
        let second = try #require(fixes[1].timestamp)
        #expect(second.timeIntervalSince(first) == 10)
    }

    @Test("a track wins over waypoints in the same file")
    func trackWins() throws {
        let fixes = try GPX.parse(data: Data(Self.track.utf8), name: "t.gpx")
        #expect(!fixes.contains { $0.latitude == 1 })
    }

    @Test("namespace prefixes, a time with an offset, a time without zone")
    func prefixedAndOffset() throws {
        let gpx = """
            <g:gpx xmlns:g="http://www.topografix.com/GPX/1/1">
              <g:wpt lat="0" lon="0"><g:time>2024-05-01T10:00:00+02:00</g:time></g:wpt>
            </g:gpx>
            """
        let fixes = try GPX.parse(data: Data(gpx.utf8), name: "p.gpx")
        #expect(fixes.first?.timestamp == Date(timeIntervalSince1970: 1_714_550_400))

        // No zone: UTC.
        let bare = #"<gpx><wpt lat="0" lon="0"><time>2024-05-01T08:00:00</time></wpt></gpx>"#
        #expect(try GPX.parse(data: Data(bare.utf8), name: "b.gpx").first?.timestamp == Date(timeIntervalSince1970: 1_714_550_400))
    }

    @Test("<time> and <ele> inside <extensions> are not the point's")
    func extensionsIgnored() throws {
        let gpx = """
            <gpx><trk><trkseg><trkpt lat="1" lon="2">
              <extensions><x:data xmlns:x="urn:x"><time>garbage</time><ele>nope</ele></x:data></extensions>
            </trkpt></trkseg></trk></gpx>
            """
        let fixes = try GPX.parse(data: Data(gpx.utf8), name: "e.gpx")
        #expect(fixes == [LocationFix(latitude: 1, longitude: 2)])
    }

    @Test("malformed XML names the file and the line")
    func malformed() {
        let gpx = "<gpx>\n  <trk><trkseg>\n    <trkpt lat=\"1\" lon=\"2\">\n  </trkseg></trk>\n</gpx>\n"
        let error = gpxError(try GPX.parse(data: Data(gpx.utf8), name: "bad.gpx"))
        #expect(error?.file == "bad.gpx")
        #expect(error?.line == 4)
        #expect(error?.description == "bad.gpx:4: malformed XML: an end tag does not match the element it closes")
    }

    @Test("other XML faults say what is wrong and where")
    func otherFaults() {
        let cases: [(String, Int?, String)] = [
            ("<gpx>\n<wpt lat=\"1\" lon=\"2\"><name>Fish & Chips</name></wpt>\n</gpx>", 2, "&amp;"),
            ("<gpx>\n<wpt lat=\"1\" lon=\"2\">\n", nil, "an element left open"),
            ("<gpx>\n<wpt lat=\"1\" lat=\"2\" lon=\"3\"/>\n</gpx>", 2, "attribute appears twice"),
            ("<gpx><wpt lat=\"1\" lon=\"2\"/></gpx>\n<gpx/>", 2, "content after the root element"),
        ]
        for (gpx, line, words) in cases {
            let error = gpxError(try GPX.parse(data: Data(gpx.utf8), name: "f.gpx"))
            #expect(error?.line != nil)
            if let line { #expect(error?.line == line, "\(String(describing: error))") }
            #expect(error?.message.contains(words) == true, "\(String(describing: error)) should say \(words)")
        }
    }

    @Test("a point without lat: file, line and element named")
    func missingLatitude() {
        let gpx = "<gpx>\n<wpt lat=\"1\" lon=\"2\"/>\n<wpt lon=\"2\"/>\n</gpx>"
        let error = gpxError(try GPX.parse(data: Data(gpx.utf8), name: "nolat.gpx"))
        #expect(error?.description == "nolat.gpx:3: <wpt> has no lat attribute")
    }

    @Test("out-of-range or non-numeric coordinates, bad elevation, bad time")
    func invalidValues() {
        let cases: [(String, String)] = [
            (#"<gpx><wpt lat="91" lon="0"/></gpx>"#, #"lat="91" is not a latitude"#),
            (#"<gpx><wpt lat="1" lon="east"/></gpx>"#, #"lon="east" is not a longitude"#),
            (#"<gpx><wpt lat="1" lon="2"><ele>high</ele></wpt></gpx>"#, "<ele>high</ele> is not an elevation"),
            (#"<gpx><wpt lat="1" lon="2"><time>yesterday</time></wpt></gpx>"#, "<time>yesterday</time> is not an ISO 8601 time"),
        ]
        for (gpx, expected) in cases {
            let error = gpxError(try GPX.parse(data: Data(gpx.utf8), name: "v.gpx"))
            #expect(error?.message.contains(expected) == true, "\(String(describing: error)) should say \(expected)")
            #expect(error?.line == 1)
        }
    }

    @Test("an empty file, a file with no points, and a file that is not GPX")
    func nothingToPlay() throws {
        let empty = try temporaryFile("  \n", named: "empty.gpx")
        defer { removeTemporaryFile(empty) }
        let e1 = gpxError(try GPX.read(path: empty))
        #expect(e1?.description == "\(empty): empty file: expected a GPX document (<gpx> with <trkpt>, <rtept> or <wpt> points)")

        let e2 = gpxError(try GPX.parse(data: Data("<gpx><trk><name>x</name></trk></gpx>".utf8), name: "none.gpx"))
        #expect(e2?.message.hasPrefix("no points") == true)

        let e3 = gpxError(try GPX.parse(data: Data("<kml><Placemark/></kml>".utf8), name: "k.kml"))
        #expect(e3?.message.contains("root element is <kml>") == true)
    }

    @Test("a missing file says so")
    func missingFile() {
        let error = gpxError(try GPX.read(path: "/nonexistent/route.gpx"))
        #expect(error?.description == "/nonexistent/route.gpx: no such file")
    }

    @Test("the sample route in manifests/routes parses")
    func sample() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let (name, fixes) = try GPX.read(path: root.appendingPathComponent("manifests/routes/commute.gpx").path)
        #expect(name == "commute.gpx")
        #expect((5...10).contains(fixes.count))
        #expect(fixes.allSatisfy { $0.timestamp != nil && $0.altitude != nil })
        let times = fixes.compactMap(\.timestamp)
        #expect(zip(times, times.dropFirst()).allSatisfy { $0 < $1 })
    }
}
