// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Systemd
import Testing

@Suite("sd-bus on a private dbus-daemon", .offPool)
struct BusConnectionTests {
    static let name = "com.exponea.AuthD1"
    static let path = "/com/exponea/AuthD1"
    static let interface = "com.exponea.AuthD1.Manager"
    static let signals = [
        BusSignal(member: "TokenRefreshed", signature: "st", parameterNames: ["group", "generation"]),
        BusSignal(member: "JwtError", signature: "sst", parameterNames: ["group", "reason", "generation"]),
        BusSignal(member: "Cleared", signature: "ss", parameterNames: ["group", "cause"]),
    ]

    @Test func aSignalReachesARealSubscriber() throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        let connection = try BusConnection(address: bus.address)
        try connection.requestName(Self.name)
        let object = try connection.exportObject(path: Self.path, interface: Self.interface, signals: Self.signals)
        defer { object.cancel() }

        let monitor = try BackgroundProcess(
            "/usr/bin/dbus-monitor",
            ["--address", bus.address, "type='signal',interface='\(Self.interface)'"]
        )
        defer { monitor.stop() }

        // The monitor is in place once the bus took its name away (it became a monitor).
        #expect(monitor.waitForOutput { $0.contains("member=NameLost") })
        try connection.emitSignal(
            path: Self.path,
            interface: Self.interface,
            member: "TokenRefreshed",
            arguments: [.string("shop"), .uint64(7)]
        )
        try connection.flush()
        #expect(monitor.waitForOutput { $0.contains("member=TokenRefreshed") && $0.contains("uint64 7") })
        let output = monitor.output
        let signal = try #require(output.range(of: "member=TokenRefreshed").map { output[$0.lowerBound...] })
        let lines = signal.split(separator: "\n").prefix(3).map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(lines == ["member=TokenRefreshed", #"string "shop""#, "uint64 7"])
        #expect(output.contains("path=\(Self.path); interface=\(Self.interface); member=TokenRefreshed"))
        #expect(output.contains("sender=\(connection.uniqueName)"))
    }

    @Test func theNameIsOwnedAndTheObjectIsIntrospectable() throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        let connection = try BusConnection(address: bus.address)
        try connection.requestName(Self.name)
        let object = try connection.exportObject(path: Self.path, interface: Self.interface, signals: Self.signals)

        // busctl's calls are answered while this thread drives the connection.
        let introspection = try Self.whileProcessing(connection) {
            try ChildProcess.run("/usr/bin/busctl", ["--address=\(bus.address)", "introspect", Self.name, Self.path])
        }
        #expect(introspection.status == 0, "\(introspection.standardError)")
        let rows = introspection.standardOutput.split(separator: "\n").map {
            $0.split(separator: " ", omittingEmptySubsequences: true).prefix(3).joined(separator: " ")
        }
        #expect(rows.contains("\(Self.interface) interface -"))
        #expect(rows.contains(".TokenRefreshed signal st"))
        #expect(rows.contains(".JwtError signal sst"))
        #expect(rows.contains(".Cleared signal ss"))
        #expect(rows.contains("org.freedesktop.DBus.Introspectable interface -"))

        // Parameter names reach the XML.
        let xml = try Self.whileProcessing(connection) {
            try ChildProcess.run(
                "/usr/bin/busctl",
                [
                    "--address=\(bus.address)", "call", Self.name, Self.path, "org.freedesktop.DBus.Introspectable",
                    "Introspect",
                ]
            )
        }
        #expect(xml.standardOutput.contains(#"name=\"generation\""#))

        // Unexported objects disappear.
        object.cancel()
        let after = try Self.whileProcessing(connection) {
            try ChildProcess.run("/usr/bin/busctl", ["--address=\(bus.address)", "introspect", Self.name, Self.path])
        }
        #expect(!after.standardOutput.contains(".TokenRefreshed"))
    }

    @Test func aSecondOwnerIsRefusedWithAnErrorThatSaysWhy() throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        let first = try BusConnection(address: bus.address)
        try first.requestName(Self.name)
        let second = try BusConnection(address: bus.address)
        #expect {
            try second.requestName(Self.name)
        } throws: { error in
            let error = error as? SystemdError
            return error?.code == .busCall && error?.function == "sd_bus_request_name"
                && error?.description.contains("cannot own the bus name \(Self.name)") == true
        }
    }

    @Test func anUnreachableBusIsAConnectionError() {
        #expect {
            try BusConnection(address: "unix:path=/nonexistent/bus")
        } throws: { error in
            (error as? SystemdError)?.code == .busConnection && (error as? SystemdError)?.errno == ENOENT
        }
        #expect(throws: SystemdError.self) { try BusConnection(address: "not an address") }
    }

    /// Runs `body` on another thread while this one processes the connection's messages.
    static func whileProcessing<T: Sendable>(_ connection: BusConnection, _ body: @escaping @Sendable () throws -> T)
        throws -> T
    {
        nonisolated(unsafe) var result: Result<T, any Error>?
        let done = NSCondition()
        Thread {
            let outcome = Result { try body() }
            done.withLock { result = outcome }
        }.start()
        while done.withLock({ result == nil }) {
            while try connection.process() {}
            try connection.wait(timeout: .milliseconds(20))
        }
        return try done.withLock { result! }.get()
    }
}
