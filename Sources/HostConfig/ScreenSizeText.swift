import AppHostProtocol

extension ScreenSize {
    /// `WIDTHxHEIGHT[@SCALE]` in pixels (scale 3 when omitted), e.g. `1170x2532@3`: the
    /// config file's `"snapshots": {"screen": ...}`.
    public init?(parsing text: String) {
        // Empty pieces kept: there is always a first one (omitted, "" and "@" split to none).
        let parts = text.split(separator: "@", maxSplits: 1, omittingEmptySubsequences: false)
        let size = parts[0].split(separator: "x", omittingEmptySubsequences: false)
        guard size.count == 2, let w = Int(size[0]), let h = Int(size[1]), (1...8192).contains(w), (1...8192).contains(h) else { return nil }
        var scale = 3.0
        if parts.count == 2 {
            guard let s = Double(parts[1]), s >= 1, s <= 4 else { return nil }
            scale = s
        }
        self.init(width: w, height: h, scale: scale)
    }
}
