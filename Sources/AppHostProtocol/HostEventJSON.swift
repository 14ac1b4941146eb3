import Foundation

extension HostEvent {
    /// The event as `WireJSON.encoder()` writes it (sorted keys, absent fields left out,
    /// slashes unescaped), written directly: an event is appended on every step of the
    /// host, and the generic encoder took a tenth of the host's CPU (and 5–10 µs before
    /// a step's signal). `HostEventJSONTests` holds it to the encoder's bytes.
    public func jsonBytes() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(160 + cause.utf8.count)
        var first = true
        func key(_ name: StaticString) {
            out.append(first ? UInt8(ascii: "{") : UInt8(ascii: ","))
            first = false
            out.append(UInt8(ascii: "\""))
            name.withUTF8Buffer { out.append(contentsOf: $0) }
            out.append(UInt8(ascii: "\""))
            out.append(UInt8(ascii: ":"))
        }
        func string(_ s: String) { Self.appendJSONString(s, to: &out) }
        func number<T: BinaryInteger>(_ n: T) { out.append(contentsOf: String(n).utf8) }
        func bool(_ b: Bool) { out.append(contentsOf: (b ? "true" : "false").utf8) }

        // In the encoder's sorted order.
        if let apnsID { key("apnsID"); string(apnsID) }
        if let band { key("band"); string(band.rawValue) }
        if let began { key("began"); bool(began) }
        if let bgTask { key("bgTask"); string(bgTask) }
        if let bundleIdentifier { key("bundleIdentifier"); string(bundleIdentifier.rawValue) }
        if let callback { key("callback"); string(callback) }
        key("cause"); string(cause)
        if let confirmed { key("confirmed"); bool(confirmed) }
        if let deviceToken { key("deviceToken"); string(deviceToken) }
        if let fetch { key("fetch"); number(fetch) }
        if let footprint { key("footprint"); number(footprint) }
        if let from { key("from"); string(from.rawValue) }
        key("kind"); string(kind.rawValue)
        if let mode { key("mode"); string(mode.rawValue) }
        if let pid { key("pid"); number(pid) }
        if let pressure { key("pressure"); string(pressure.rawValue) }
        if let push { key("push"); number(push) }
        if let result { key("result"); string(result.rawValue) }
        key("seq"); number(seq)
        if let session { key("session"); string(session.rawValue) }
        if let signal { key("signal"); string(signal.rawValue) }
        if let success { key("success"); bool(success) }
        if let task { key("task"); number(task.rawValue) }
        if let taskName { key("taskName"); string(taskName) }
        key("time"); string(Timestamp.format(time))
        if let to { key("to"); string(to.rawValue) }
        if let transfer { key("transfer"); string(transfer.rawValue) }
        if let transferTask { key("transferTask"); number(transferTask.rawValue) }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// A JSON string as the encoder writes it: `"` and `\` escaped, control characters as
    /// `\b \f \n \r \t` or `\u00XX`, everything else (slashes, non-ASCII) as it is.
    static func appendJSONString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        let hex: [UInt8] = Array("0123456789abcdef".utf8)
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(UInt8(ascii: "\\")); out.append(byte)
            case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\")); out.append(byte)
            case 0x08: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "b"))
            case 0x0C: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "f"))
            case 0x0A: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "n"))
            case 0x0D: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "r"))
            case 0x09: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "t"))
            case 0..<0x20:
                out.append(contentsOf: Array("\\u00".utf8))
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xF)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
