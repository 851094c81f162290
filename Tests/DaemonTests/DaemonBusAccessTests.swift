// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// On the system bus a group's name and activity reach only the users the access configuration lets use the
/// group: two real uids listen on a private bus with the shipped policy, one allowed and one not.
@Suite("exponea-authd's signals on a system bus", .offPool)
struct DaemonBusAccessTests {
    /// Connects to the bus, calls Watch for each group, and prints every signal of the interface it receives.
    static let listener = """
        import sys, dbus, dbus.mainloop.glib
        from gi.repository import GLib
        dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
        bus = dbus.bus.BusConnection(sys.argv[1])
        def received(*args, **keywords):
            print("SIGNAL", keywords["member"], *[str(a) for a in args], flush=True)
        bus.add_signal_receiver(received, dbus_interface="com.exponea.AuthD1.Manager", member_keyword="member")
        manager = bus.get_object("com.exponea.AuthD1", "/com/exponea/AuthD1")
        for group in sys.argv[2:]:
            try:
                manager.Watch(group, dbus_interface="com.exponea.AuthD1.Manager")
                print("WATCHING", group, flush=True)
            except dbus.DBusException as error:
                print("REFUSED", group, error.get_dbus_name(), flush=True)
        GLib.MainLoop().run()
        """

    @Test(.enabled(if: getuid() == 0, "needs root to run the system service and listeners as other users"))
    func aUserWhoMayNotUseAGroupLearnsNothingOfItAndOneWhoMayDoes() throws {
        let bus = try PrivateBus(systemPolicy: DaemonBusPolicyTests.policy)
        defer { bus.stop() }
        let fixture = try DaemonStartupTests.Fixture()
        let config = try TemporaryDirectory(prefix: "authd-etc")
        defer { config.remove() }
        // Two real users (the bus refuses a uid the user database does not know): "alice" (daemon, uid 1) may
        // use "vault"; "bob" (nobody, 65534) only "lobby".
        try """
        [AppGroup]
        Name=vault
        Users=1

        [AppGroup]
        Name=lobby
        Users=1 65534

        [AppGroup]
        Name=crew
        Groups=4242
        """.write(toFile: config.appending("authd.conf"), atomically: true, encoding: .utf8)
        let script = config.appending("listen.py")
        try Self.listener.write(toFile: script, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: config.path)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: script)

        let daemon = try fixture.startSystem(configDirectory: config.path, busAddress: bus.address)
        defer { daemon.stop() }

        func listen(as uid: Int, groups: [Int] = [], to watched: [String] = ["vault", "lobby"]) throws
            -> BackgroundProcess
        {
            let supplementary =
                groups.isEmpty ? ["--clear-groups"] : ["--groups=\(groups.map(String.init).joined(separator: ","))"]
            return try BackgroundProcess(
                "/usr/bin/setpriv",
                ["--reuid=\(uid)", "--regid=\(uid)"] + supplementary + ["/usr/bin/python3", script, bus.address]
                    + watched
            )
        }
        let alice = try listen(as: 1)
        defer { alice.stop() }
        let bob = try listen(as: 65534)
        defer { bob.stop() }
        #expect(alice.waitForOutput { $0.contains("WATCHING lobby") }, "\(alice.output)")
        #expect(bob.waitForOutput { $0.contains("WATCHING lobby") }, "\(bob.output)")
        #expect(alice.output.contains("WATCHING vault"))
        #expect(bob.output.contains("REFUSED vault org.freedesktop.DBus.Error.AccessDenied"), "\(bob.output)")
        // "carol" (bin, uid 2) may use "crew" only through her supplementary group 4242; without it, she may not.
        let carol = try listen(as: 2, groups: [4242], to: ["crew"])
        defer { carol.stop() }
        let carolWithout = try listen(as: 2, to: ["crew"])
        defer { carolWithout.stop() }
        #expect(carol.waitForOutput { $0.contains("WATCHING crew") }, "\(carol.output)")
        #expect(
            carolWithout.waitForOutput { $0.contains("REFUSED crew org.freedesktop.DBus.Error.AccessDenied") },
            "\(carolWithout.output)")

        let client = try VarlinkTestClient(path: fixture.socketPath)
        defer { client.close() }
        try client.call("SetToken", ["group": "vault", "token": TestJWT().token(expiringIn: 3600)])
        try client.call("Anonymize", ["group": "vault"])
        try client.call("SetToken", ["group": "crew", "token": TestJWT().token(expiringIn: 3600)])
        // The last signal, in order after vault's from the same sender: once bob has it, he has all he gets.
        try client.call("SetToken", ["group": "lobby", "token": TestJWT().token(expiringIn: 3600)])
        #expect(
            carol.waitForOutput { $0.contains("SIGNAL TokenRefreshed crew 1") }, "\(carol.output)")

        #expect(alice.waitForOutput { $0.contains("SIGNAL TokenRefreshed lobby") }, "\(alice.output)")
        #expect(bob.waitForOutput { $0.contains("SIGNAL TokenRefreshed lobby") }, "\(bob.output)")
        #expect(alice.output.contains("SIGNAL TokenRefreshed vault 1"))
        #expect(alice.output.contains("SIGNAL Cleared vault anonymize"))
        let bobReceived = bob.output.split(separator: "\n").filter { $0.hasPrefix("SIGNAL") }
        #expect(bobReceived == ["SIGNAL TokenRefreshed lobby 1"], "\(bob.output)")
        #expect(daemon.stop(signal: SIGTERM) == 0)
    }
}
