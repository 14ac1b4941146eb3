import AppHostProtocol

/// A half-open rectangle of pixels, [x0, x1) × [y0, y1).
struct PixelRect: Equatable, Sendable, CustomStringConvertible {
    var x0: Int
    var y0: Int
    var x1: Int
    var y1: Int

    static let empty = PixelRect(x0: 0, y0: 0, x1: 0, y1: 0)

    var width: Int { max(0, x1 - x0) }
    var height: Int { max(0, y1 - y0) }
    var isEmpty: Bool { x1 <= x0 || y1 <= y0 }
    var pixelCount: Int { width * height }

    func intersection(_ other: PixelRect) -> PixelRect {
        let r = PixelRect(x0: max(x0, other.x0), y0: max(y0, other.y0), x1: min(x1, other.x1), y1: min(y1, other.y1))
        return r.isEmpty ? .empty : r
    }

    /// Whether `other` (non-empty) lies entirely inside this rectangle.
    func contains(_ other: PixelRect) -> Bool {
        !other.isEmpty && other.x0 >= x0 && other.y0 >= y0 && other.x1 <= x1 && other.y1 <= y1
    }

    /// The pixels a frame in absolute points covers at `scale`: each edge rounded to the
    /// nearest pixel boundary, so that touching frames share an edge. Non-finite values
    /// give an empty rectangle; huge ones are clamped (never a trap on an app's input).
    init(points r: Rect, scale: Double) {
        func px(_ v: Double) -> Int? {
            let s = v * scale
            guard s.isFinite else { return nil }
            return Int(Swift.min(Swift.max(s, -1e9), 1e9).rounded())
        }
        guard let x0 = px(r.x), let y0 = px(r.y), let x1 = px(r.x + r.width), let y1 = px(r.y + r.height),
              x1 > x0, y1 > y0 else {
            self = .empty
            return
        }
        self.init(x0: x0, y0: y0, x1: x1, y1: y1)
    }

    init(x0: Int, y0: Int, x1: Int, y1: Int) {
        self.x0 = x0
        self.y0 = y0
        self.x1 = x1
        self.y1 = y1
    }

    /// Back to points at `scale`.
    func points(scale: Double) -> Rect {
        Rect(x: Double(x0) / scale, y: Double(y0) / scale, width: Double(width) / scale, height: Double(height) / scale)
    }

    var description: String { "(\(x0), \(y0))–(\(x1), \(y1)) px" }
}
