// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthDaemon
import AuthTestKit
import Foundation
import Testing

@Suite("Access configuration (authd.conf and drop-ins)")
struct AccessPolicyTests {
    struct FakeUsers: UserDatabase {
        var users = ["shop-app": UInt32(1001), "widget": 1002, "news-app": 1003]
        var groups = ["shop-apps": UInt32(2001)]
        func uid(ofUser name: String) -> UInt32? { users[name] }
        func gid(ofGroup name: String) -> UInt32? { groups[name] }
    }

    /// A process of `uid` with primary group `gid` and supplementary `groups`.
    func caller(_ uid: UInt32, _ gid: UInt32, groups: [UInt32] = []) -> Caller {
        Caller(pid: 1, uid: uid, gid: gid, groups: groups)
    }

    let users = FakeUsers()
    let shop = try! AppGroup("shop")
    let news = try! AppGroup("news")

    @Test func usersAndGroupsAreAllowedTheirAppGroupsOnly() throws {
        let policy = try AccessPolicy(
            files: [
                (
                    "authd.conf",
                    """
                    # The shop's apps
                    [AppGroup]
                    Name=shop
                    Users=shop-app widget
                    Groups=shop-apps

                    [AppGroup]
                    Name = news
                    Users = 1003
                    """
                )
            ],
            users: users
        )
        #expect(policy.warnings.isEmpty)
        #expect(policy.allows(caller(1001, 1001), group: shop))
        #expect(policy.allows(caller(1002, 1002), group: shop))
        #expect(!policy.allows(caller(1001, 1001), group: news))
        #expect(policy.allows(caller(1003, 1003), group: news))
        // By the primary or a supplementary group the process holds, not by what its user could hold.
        #expect(policy.allows(caller(4242, 2001), group: shop))
        #expect(policy.allows(caller(1004, 1004, groups: [27, 2001]), group: shop))
        #expect(!policy.allows(caller(4242, 4242, groups: [27, 2002]), group: shop))
        // Root may use every group; nobody may use a group that is not configured.
        #expect(policy.allows(caller(0, 0), group: try AppGroup("other")))
        #expect(!policy.allows(caller(1001, 1001), group: try AppGroup("other")))
    }

    @Test func dropInsAddUpInLexicalOrder() throws {
        let directory = try TemporaryDirectory(prefix: "authd-conf")
        defer { directory.remove() }
        try FileManager.default.createDirectory(
            atPath: directory.appending("authd.conf.d"), withIntermediateDirectories: true)
        try "[AppGroup]\nName=shop\nUsers=shop-app\n".write(
            toFile: directory.appending("authd.conf"), atomically: true, encoding: .utf8)
        try "[AppGroup]\nName=shop\nUsers=widget\n".write(
            toFile: directory.appending("authd.conf.d/10-widget.conf"),
            atomically: true,
            encoding: .utf8
        )
        try "[AppGroup]\nName=news\nUsers=news-app\n".write(
            toFile: directory.appending("authd.conf.d/20-news.conf"),
            atomically: true,
            encoding: .utf8
        )
        try "not even INI".write(toFile: directory.appending("authd.conf.d/README"), atomically: true, encoding: .utf8)

        let policy = try AccessPolicy(directory: directory.path, users: users)
        #expect(policy.rules[shop]?.uids == [1001, 1002])
        #expect(policy.rules[news]?.uids == [1003])
    }

    @Test func noConfigurationAllowsOnlyRoot() throws {
        let directory = try TemporaryDirectory(prefix: "authd-conf")
        defer { directory.remove() }
        let policy = try AccessPolicy(directory: directory.path, users: users)
        #expect(policy.rules.isEmpty)
        #expect(!policy.allows(caller(1001, 1001), group: shop))
        #expect(policy.allows(caller(0, 0), group: shop))
    }

    @Test(arguments: [
        ("Users=x\n", 1, "'Users=' comes before any [Section]"),
        ("[AppGroup]\nUsers x\n", 2, "expected 'Key=Value', '[Section]' or a comment"),
        ("[AppGroup\nName=shop\n", 1, "a section header is '[Name]'"),
        ("[AppGroup]\n=shop\n", 2, "the assignment has no key"),
        ("[AppGroup]\nUsers=shop-app\n", 1, "[AppGroup] needs Name="),
        ("[AppGroup]\nName=../etc\n", 1, "Name=../etc: the app group name starts with '.'"),
        (
            "[AppGroup]\nName=shop\nRefreshLeaseSec=0\n", 3,
            "RefreshLeaseSec= needs a number of seconds from 0.1 to 600, not '0'"
        ),
    ])
    func badFilesSayWhereAndWhat(text: String, line: Int, message: String) {
        #expect {
            try AccessPolicy(files: [("bad.conf", text)], users: users)
        } throws: { error in
            guard let error = error as? ConfigurationError else { return false }
            return error.file == "bad.conf" && error.line == line && error.message.hasPrefix(message)
                && error.description.hasPrefix("bad.conf:\(line): ")
        }
    }

    @Test func unknownNamesAreWarnedAboutAndTheRestStaysInForce() throws {
        let policy = try AccessPolicy(
            files: [
                ("a.conf", "[AppGroup]\nName=shop\nUsers=ghost shop-app\nGroups=phantoms\nColour=blue\n[Daemon]\nX=1\n")
            ],
            users: users
        )
        #expect(policy.rules[shop]?.uids == [1001])
        #expect(
            policy.warnings == [
                "a.conf:3: no user 'ghost', ignored",
                "a.conf:4: no group 'phantoms', ignored",
                "a.conf:5: unknown key 'Colour', ignored",
                "a.conf:6: unknown section [Daemon], ignored",
            ]
        )
    }

    /// Found by fuzz-config (Fuzz/regressions/fuzz-config/crlf-line-ends): "\r\n" is one Character, so a CRLF
    /// file was read as one line and refused as a bad section header.
    @Test func crlfLineEndsReadAsLF() throws {
        let policy = try AccessPolicy(
            files: [("a.conf", "[AppGroup]\r\nName=shop\r\nUsers=shop-app\r\n")], users: users)
        #expect(policy.warnings.isEmpty)
        #expect(policy.rules[shop]?.uids == [1001])
        #expect {
            try AccessPolicy(files: [("bad.conf", "[AppGroup]\r\nName=shop\r\nUsers x\r\n")], users: users)
        } throws: { error in
            (error as? ConfigurationError)?.line == 3
        }
    }

    @Test func theSystemUserDatabaseResolvesRealNames() {
        let system = SystemUserDatabase()
        #expect(system.uid(ofUser: "root") == 0)
        #expect(system.gid(ofGroup: "root") == 0)
        #expect(system.uid(ofUser: "no-such-user-\(UInt32.random(in: 0...UInt32.max))") == nil)
    }

    /// `Units=` (issue 40): a process whose system unit matches a name or a glob may use the group, whatever its
    /// uid; the rules add up with `Users=` and `Groups=`, and each allowing rule is named.
    @Test func unitsAllowByTheCallersSystemUnit() throws {
        let policy = try AccessPolicy(
            files: [
                ("authd.conf", "[AppGroup]\nName=shop\nUsers=widget\nUnits=shop-app.service kiosk-*.service\n"),
                ("authd.conf.d/b.conf", "[AppGroup]\nName=shop\nUnits=session-[0-9].scope\n"),
            ],
            users: users)
        #expect(policy.warnings.isEmpty)
        #expect(policy.rules[shop]?.units == ["shop-app.service", "kiosk-*.service", "session-[0-9].scope"])
        func process(uid: UInt32, unit: String?, userUnit: String? = nil) -> Caller {
            Caller(pid: 1, uid: uid, gid: uid, unit: unit, userUnit: userUnit)
        }
        #expect(policy.allows(process(uid: 61234, unit: "shop-app.service"), group: shop))
        #expect(policy.allows(process(uid: 61234, unit: "kiosk-lobby.service"), group: shop))
        #expect(policy.allows(process(uid: 61234, unit: "session-3.scope"), group: shop))
        // The same uid in another unit, in none, or only a user unit of that name: refused.
        #expect(!policy.allows(process(uid: 61234, unit: "other-app.service"), group: shop))
        #expect(!policy.allows(process(uid: 61234, unit: nil), group: shop))
        #expect(
            !policy.allows(process(uid: 61234, unit: "user@61234.service", userUnit: "shop-app.service"), group: shop))
        #expect(!policy.allows(process(uid: 61234, unit: "shop-app.service"), group: news))
        #expect(policy.reasons(process(uid: 61234, unit: "kiosk-a.service"), group: shop) == ["Units=kiosk-*.service"])
        #expect(
            policy.reasons(process(uid: 1002, unit: "shop-app.service"), group: shop)
                == ["Users=1002", "Units=shop-app.service"])
        #expect(policy.reasons(process(uid: 0, unit: nil), group: shop) == ["root"])
        #expect(policy.reasons(process(uid: 61234, unit: "other.service"), group: shop).isEmpty)
    }

    @Test(arguments: [
        ("Units=", "Units= needs unit names or globs"),
        ("Units=shop-app", "did you mean shop-app.service?"),
        ("Units=shop.slice", "needs the suffix .service or .scope"),
        ("Units=.service", "a suffix with no name"),
        ("Units=shop/app.service", "'/' is in no unit name"),
        ("Units=shop[a-.service", "a '[' with no ']'"),
        ("Units=getty@.service", "a template, which no process runs in"),
        ("Units=" + String(repeating: "a", count: 250) + ".service", "longer than 255 bytes"),
    ])
    func badUnitsAreRefusedWithFileAndLine(_ line: String, _ message: String) {
        #expect {
            try AccessPolicy(files: [("drop.conf", "[AppGroup]\nName=shop\n\(line)\n")], users: users)
        } throws: { error in
            guard let error = error as? ConfigurationError else { return false }
            return error.file == "drop.conf" && error.line == 3 && error.message.contains(message)
        }
    }
}
