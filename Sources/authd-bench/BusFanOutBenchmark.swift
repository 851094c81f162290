// SPDX-License-Identifier: Apache-2.0
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// From one SetToken to the `TokenRefreshed` D-Bus signal reaching one subscriber (`dbus-monitor`) on a
/// private `dbus-daemon`.
struct BusFanOutBenchmark {
    let settings: BenchSettings
    init(_ settings: BenchSettings) { self.settings = settings }

    func run(_ report: Report) throws {
        let folder = try settings.scratch.folder("bus")
        let bus = try PrivateBusDaemon(directory: folder)
        defer { bus.stop() }
        let monitor = try SignalMonitor(address: bus.address, member: "TokenRefreshed")
        defer { monitor.stop() }
        let daemon = try settings.newDaemon("bus-daemon")
        try daemon.start(busAddress: bus.address)
        defer { daemon.stop() }

        let client = try UnixStream(connectingTo: daemon.socketPath)
        let rounds = settings.pick(full: 100, brief: 5)
        let exp = Int(Date().timeIntervalSince1970) + 3600
        var samples = Samples()
        for round in 0...rounds {
            let token = BenchToken.make(exp: exp, customer: round)
            let sent = wallClockSeconds()
            try client.send(Requests.setToken("bus", token))
            _ = try client.receive()
            guard let arrived = monitor.next(timeout: 5) else {
                throw BenchError.daemon("no TokenRefreshed signal within 5 s; see \(daemon.logPath)")
            }
            if round > 0 { samples.append(UInt64(max(0, arrived - sent) * 1e9)) }
        }
        report.add(
            .init(
                measure: "D-Bus TokenRefreshed to 1 subscriber, p50 / p99",
                value: "\(milliseconds(samples.percentile(0.5))) / \(milliseconds(samples.percentile(0.99)))"))
    }
}

/// A private session `dbus-daemon` in `directory`.
final class PrivateBusDaemon {
    let address: String
    private let process = Process()

    /// The dbus-daemon's process id.
    var pid: Int32 { process.processIdentifier }

    init(directory: String) throws {
        let config = directory + "/bus.conf"
        try """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>session</type>
          <listen>unix:path=\(directory)/bus.socket</listen>
          <auth>EXTERNAL</auth>
          <policy context="default">
            <allow user="*"/> <allow own="*"/> <allow send_type="method_call"/> <allow send_type="signal"/>
            <allow send_requested_reply="true" send_type="method_return"/>
            <allow send_requested_reply="true" send_type="error"/>
            <allow receive_type="method_call"/> <allow receive_type="method_return"/>
            <allow receive_type="error"/> <allow receive_type="signal"/> <allow eavesdrop="true"/>
          </policy>
        </busconfig>
        """.write(toFile: config, atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        process.arguments = ["--config-file=\(config)", "--nofork", "--nopidfile"]
        process.standardError = FileHandle.nullDevice
        try process.run()
        address = "unix:path=\(directory)/bus.socket"
        for _ in 0..<500 where !FileManager.default.fileExists(atPath: directory + "/bus.socket") { usleep(10_000) }
    }

    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }
}

/// `dbus-monitor --profile` watching one signal of exponea-authd's: each arrival's wall-clock time, as
/// dbus-monitor stamped it on receipt.
final class SignalMonitor: @unchecked Sendable {
    // @unchecked: `arrivals` and `closed` are only touched holding `condition`.
    private let process = Process()
    private let condition = NSCondition()
    private var arrivals: [Double] = []
    private var taken = 0
    private var closed = false

    init(address: String, member: String) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-monitor")
        process.arguments = [
            "--address", address, "--profile",
            "type='signal',interface='com.exponea.AuthD1.Manager',member='\(member)'",
        ]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let handle = output.fileHandleForReading
        let thread = Thread { [self] in
            var pending = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                pending += chunk
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending = Data(pending[(newline + 1)...])
                    let fields = line.split(separator: "\t")
                    guard fields.count >= 8, fields[0] == "sig", fields[7] == member, let time = Double(fields[1])
                    else { continue }
                    condition.withLock {
                        arrivals.append(time)
                        condition.broadcast()
                    }
                }
            }
            condition.withLock {
                closed = true
                condition.broadcast()
            }
        }
        thread.start()
        usleep(200_000)  // dbus-monitor registers its match before the first signal is sent
    }

    /// The next arrival's time, or nil after `timeout` seconds.
    func next(timeout: Double) -> Double? {
        let deadline = Date(timeIntervalSinceNow: timeout)
        return condition.withLock {
            while taken >= arrivals.count && !closed {
                if !condition.wait(until: deadline) { return nil }
            }
            guard taken < arrivals.count else { return nil }
            taken += 1
            return arrivals[taken - 1]
        }
    }

    /// Every arrival so far.
    var all: [Double] { condition.withLock { arrivals } }

    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }
}
