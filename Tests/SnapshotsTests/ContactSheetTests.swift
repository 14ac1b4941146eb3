import AppHostProtocol
import Testing
@testable import Snapshots

@Suite struct ContactSheetTests {
    @Test func thumbnailsSideBySideWithLabels() throws {
        let tall = RGBAImage(width: 1170, height: 2532, fill: RGBA(0, 0, 200))
        let small = RGBAImage(width: 100, height: 50, fill: RGBA(200, 0, 0))
        let sheet = try ContactSheet.make([(label: "com.example.bank", image: tall), (label: "Small", image: small)], thumbnailWidth: 300)
        let margin = 25
        #expect(sheet.width == margin + 2 * (300 + margin))
        let thumbnailHeight = Int((2532.0 * 300 / 1170).rounded())
        #expect(sheet.height > margin + thumbnailHeight + margin)
        #expect(sheet.pixel(x: 0, y: 0) == ContactSheet.background)
        // The shrunk snapshot keeps its colour; the small image is enlarged to the width.
        #expect(sheet.pixel(x: margin + 150, y: margin + 300) == RGBA(0, 0, 200))
        #expect(sheet.pixel(x: 2 * margin + 300 + 150, y: margin + 100) == RGBA(200, 0, 0))
        // Label text under the first thumbnail.
        let labelRows = (margin + thumbnailHeight)..<sheet.height
        #expect(labelRows.contains { y in (margin..<(margin + 300)).contains { x in sheet.pixel(x: x, y: y).r < 150 } })
    }

    @Test func nothingToShowThrows() {
        #expect(throws: SnapshotError.self) { try ContactSheet.make([]) }
        #expect(throws: SnapshotError.self) { try ContactSheet.make([(label: "x", image: RGBAImage(width: 4, height: 4))], thumbnailWidth: 0) }
    }
}
