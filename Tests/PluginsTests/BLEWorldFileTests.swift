import AppHostProtocol
import Foundation
import Testing
@testable import Plugins

/// The BLEWorldFileError parsing `json` throws (fails the test if none).
func worldError(_ json: String) -> BLEWorldFileError? {
    do throws(BLEWorldFileError) {
        _ = try BLEWorldFile.parse(data: Data(json.utf8), name: "world.json")
        Issue.record("expected a BLEWorldFileError for \(json)")
        return nil
    } catch {
        return error
    }
}

@Suite("BLE world file")
struct BLEWorldFileTests {
    @Test("a good file: ids, names, upper-cased services, rssi with its default")
    func good() throws {
        let path = try temporaryFile("""
            {"peripherals": [
              {"id": "hrm-1", "name": "Polar H10", "services": ["180d", "180F"], "rssi": -58},
              {"id": "thermo", "services": ["0000180a-0000-1000-8000-00805f9b34fb"]},
              {"id": "t32", "name": null, "services": ["0000FEED"], "rssi": 0}
            ]}
            """, named: "world.json")
        defer { removeTemporaryFile(path) }
        let list = try BLEWorldFile.read(path: path)
        #expect(list == [
            BLEPeripheral(id: "hrm-1", name: "Polar H10", services: ["180D", "180F"], rssi: -58),
            BLEPeripheral(id: "thermo", services: ["0000180A-0000-1000-8000-00805F9B34FB"], rssi: -60),
            BLEPeripheral(id: "t32", services: ["0000FEED"], rssi: 0),
        ])
    }

    @Test("an empty world is allowed (it removes every peripheral)")
    func emptyWorld() throws {
        #expect(try BLEWorldFile.parse(data: Data(#"{"peripherals": []}"#.utf8), name: "w") == [])
    }

    @Test("the sample world in manifests/ble parses")
    func sample() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let list = try BLEWorldFile.read(path: root.appendingPathComponent("manifests/ble/world.json").path)
        #expect(list.count >= 2)
        #expect(list.contains { $0.services.contains("180D") })
        #expect(list.contains { $0.services.contains("1809") })
    }

    @Test("unknown keys are errors, at the top level and in a peripheral")
    func unknownKeys() {
        #expect(worldError(#"{"peripherals": [], "devices": []}"#)?.description
                == "world.json: devices: unknown key (the top level has only \"peripherals\")")
        let e = worldError(#"{"peripherals": [{"id": "a", "service": ["180D"]}]}"#)
        #expect(e?.path == "peripherals[0]")
        #expect(e?.message.hasPrefix("unknown key \"service\"") == true)
    }

    @Test("duplicate ids name both places")
    func duplicates() {
        let e = worldError(#"{"peripherals": [{"id": "a", "services": ["180D"]}, {"id": "b", "services": ["180D"]}, {"id": "a", "services": ["1809"]}]}"#)
        #expect(e?.description == "world.json: peripherals[2].id: duplicate id \"a\" (also peripherals[0])")
    }

    @Test("missing or bad id, missing or bad services")
    func missingFields() {
        #expect(worldError(#"{"peripherals": [{"services": ["180D"]}]}"#)?.message == "missing \"id\"")
        #expect(worldError(#"{"peripherals": [{"id": "", "services": ["180D"]}]}"#)?.path == "peripherals[0].id")
        #expect(worldError(#"{"peripherals": [{"id": "app:x", "services": ["180D"]}]}"#)?.message.contains("reserved") == true)
        #expect(worldError(#"{"peripherals": [{"id": "a"}]}"#)?.message.hasPrefix("missing \"services\"") == true)
        #expect(worldError(#"{"peripherals": [{"id": "a", "services": []}]}"#)?.path == "peripherals[0].services")
        #expect(worldError(#"{"peripherals": [{"id": "a", "services": "180D"}]}"#)?.message == "expected a list of service UUIDs")
        #expect(worldError(#"{"peripherals": [{"id": "a", "services": ["180D", "heart"]}]}"#)?.path == "peripherals[0].services[1]")
    }

    @Test("rssi must be an integer in dBm, not a boolean or a fraction")
    func rssi() {
        for bad in ["true", "-60.5", "\"-60\"", "5", "-200"] {
            let e = worldError(#"{"peripherals": [{"id": "a", "services": ["180D"], "rssi": \#(bad)}]}"#)
            #expect(e?.path == "peripherals[0].rssi", "rssi \(bad)")
        }
    }

    @Test("not JSON, not an object, no peripherals, empty file, missing file")
    func wholeFile() {
        #expect(worldError("{\"peripherals\": [")?.message.hasPrefix("not valid JSON") == true)
        #expect(worldError("[]")?.message.hasPrefix("expected a JSON object") == true)
        #expect(worldError("{}")?.message.hasPrefix("missing \"peripherals\"") == true)
        #expect(worldError(" \n")?.message.hasPrefix("empty file") == true)
        do throws(BLEWorldFileError) {
            _ = try BLEWorldFile.read(path: "/nonexistent/world.json")
            Issue.record("expected an error")
        } catch {
            #expect(error.description == "/nonexistent/world.json: no such file")
        }
    }

    @Test("a JSON syntax error gives its line and column")
    func syntaxLineAndColumn() {
        let e = worldError("{\n  \"peripherals\": [\n    {\"id\": tru}\n  ]\n}")
        #expect(e?.message.hasPrefix("not valid JSON: line 3, column") == true, "\(String(describing: e))")
    }

    @Test("Bluetooth UUID forms")
    func uuids() {
        #expect(BLEWorldFile.normalizedUUID("180d") == "180D")
        #expect(BLEWorldFile.normalizedUUID("0000180d") == "0000180D")
        #expect(BLEWorldFile.normalizedUUID("0000180D-0000-1000-8000-00805F9B34FB") == "0000180D-0000-1000-8000-00805F9B34FB")
        for bad in ["", "180", "180G", "0000180D-0000-1000-8000-00805F9B34F", "00001-80D0-0000-1000-800000805F9B34FB"] {
            #expect(BLEWorldFile.normalizedUUID(bad) == nil, "\(bad)")
        }
    }
}
