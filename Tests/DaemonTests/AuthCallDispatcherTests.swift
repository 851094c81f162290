// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthDaemon
import AuthDaemonCommand
import AuthProtocol
import AuthStore
import AuthTestKit
import Foundation
import Logging
import Testing

@Suite("Calls of com.exponea.Auth: routing, validation, access")
struct AuthCallDispatcherTests {
    final class Fixture: Sendable {
        let directory: TemporaryDirectory
        let service: AuthService
        let dispatcher: AuthCallDispatcher
        let owner = Caller(pid: 100, uid: 1000, gid: 1000)
        let clock = ManualClock(Date())
        /// The loop the service's actor runs on, as in the daemon.
        let loop: TestLoop

        init(access: AccessControl? = nil) throws {
            loop = try TestLoop()
            directory = try TemporaryDirectory(prefix: "authd-dispatch")
            let store = try TokenStore(
                directory: directory.appending("state"),
                key: StoreKey(material: Array(repeating: 5, count: 32)),
                logger: Logger(label: "test")
            )
            service = AuthService(
                store: store, records: [], clock: clock, storeWriters: StoreWriters.shared, executor: loop.executor,
                logger: Logger(label: "test"))
            dispatcher = AuthCallDispatcher(
                service: service,
                access: access ?? AccessControl(owner: 1000),
                logger: Logger(label: "test")
            )
        }

        deinit {
            loop.stop()
            directory.remove()
        }

        /// The replies to one call, each decoded as a JSON object.
        func call(_ json: String, as caller: Caller? = nil) async throws -> [[String: Any]] {
            let frames = Locked<[[UInt8]]>([])
            try await dispatcher.handle(try VarlinkCall(decoding: Array(json.utf8)), from: caller ?? owner, on: loop) {
                frame in
                frames.withLock { $0.append(frame) }
            }
            return try frames.withLock { $0 }.map { frame in
                #expect(frame.last == 0)
                return try JSONSerialization.jsonObject(with: Data(frame.dropLast())) as! [String: Any]
            }
        }

        func error(_ json: String, as caller: Caller? = nil) async throws -> (String?, [String: String]?) {
            let replies = try await call(json, as: caller)
            #expect(replies.count == 1)
            return (replies.first?["error"] as? String, replies.first?["parameters"] as? [String: String])
        }
    }

    let token = TestJWT().token(expiringIn: 3600, ids: ["registered": "alice"])

    @Test func setThenGetAToken() async throws {
        let fixture = try Fixture()
        let set = try await fixture.call(
            #"{"method":"com.exponea.Auth.SetToken","parameters":{"group":"shop","token":"\#(token)"}}"#
        )
        let parameters = try #require(set.first?["parameters"] as? [String: Any])
        #expect(parameters["generation"] as? Int == 1)
        let claims = try #require(parameters["claims"] as? [String: Any])
        #expect(claims["algorithm"] as? String == "HS512")
        #expect(claims["customerIds"] as? [String: String] == ["registered": "alice"])

        let get = try await fixture.call(#"{"method":"com.exponea.Auth.GetToken","parameters":{"group":"shop"}}"#)
        let got = try #require(get.first?["parameters"] as? [String: Any])
        #expect(got["token"] as? String == token)
        #expect(got["generation"] as? Int == 1)
    }

    @Test func namedErrorsForBadInput() async throws {
        let fixture = try Fixture()
        let cases: [(String, String, [String: String]?)] = [
            (
                #"{"method":"com.exponea.Auth.SetToken","parameters":{"group":"shop","token":"a.b"}}"#,
                "com.exponea.Auth.MalformedToken",
                ["code": "notThreeParts", "message": "a JWT has three parts separated by '.', this has 2"]
            ),
            (
                #"{"method":"com.exponea.Auth.GetToken","parameters":{"group":"../etc"}}"#,
                "com.exponea.Auth.InvalidGroupName",
                nil
            ),
            (
                #"{"method":"com.exponea.Auth.Frobnicate","parameters":{}}"#,
                "org.varlink.service.MethodNotFound",
                ["method": "com.exponea.Auth.Frobnicate"]
            ),
            (
                #"{"method":"com.exponea.Auth.SetToken","parameters":{"group":"shop"}}"#,
                "org.varlink.service.InvalidParameter",
                ["parameter": "token"]
            ),
            (
                #"{"method":"com.exponea.Auth.GetToken","parameters":{"group":7}}"#,
                "org.varlink.service.InvalidParameter",
                ["parameter": "group"]
            ),
            (
                #"{"method":"com.exponea.Auth.ReportAuthFailure","parameters":{"group":"shop","status":42}}"#,
                "org.varlink.service.InvalidParameter",
                ["parameter": "status"]
            ),
            (
                #"{"method":"com.exponea.Auth.WaitForToken","parameters":{"group":"shop","after":0,"timeoutMs":60000}}"#,
                "org.varlink.service.InvalidParameter",
                ["parameter": "timeoutMs"]
            ),
            (
                #"{"method":"com.exponea.Auth.Subscribe","parameters":{"group":"shop"}}"#,
                "org.varlink.service.ExpectedMore",
                [:]
            ),
        ]
        for (json, name, parameters) in cases {
            let (error, got) = try await fixture.error(json)
            #expect(error == name, "\(json)")
            if let parameters { #expect(got == parameters, "\(json)") }
        }
        let ids = (0..<33).map { #""k\#($0)":"v""# }.joined(separator: ",")
        let (tooMany, _) = try await fixture.error(
            #"{"method":"com.exponea.Auth.IdentifyCustomer","parameters":{"group":"shop","customerIds":{\#(ids)}}}"#
        )
        #expect(tooMany == "org.varlink.service.InvalidParameter")
        #expect(await fixture.service.token(for: try AppGroup("shop")).generation == 0)  // nothing stored
    }

    @Test func anotherUserIsDeniedEveryMethodOfAGroup() async throws {
        let fixture = try Fixture()
        let stranger = Caller(pid: 200, uid: 2000, gid: 2000)
        let methods = [
            #"SetToken","parameters":{"group":"shop","token":"\#(token)"}"#,
            #"GetToken","parameters":{"group":"shop"}"#,
            #"Preflight","parameters":{"group":"shop"}"#,
            #"ClaimRefresh","parameters":{"group":"shop","generation":0}"#,
            #"Anonymize","parameters":{"group":"shop"}"#,
        ]
        for method in methods {
            let (error, parameters) = try await fixture.error(#"{"method":"com.exponea.Auth.\#(method)}"#, as: stranger)
            #expect(error == "com.exponea.Auth.PermissionDenied")
            #expect(parameters == ["group": "shop"])
        }
        let list = try await fixture.call(#"{"method":"com.exponea.Auth.ListGroups"}"#, as: stranger)
        #expect((list.first?["parameters"] as? [String: Any])?["groups"] as? [Any] != nil)
    }

    @Test func listGroupsShowsOnlyPermittedGroupsInSystemMode() async throws {
        let policy = try AccessPolicy(
            files: [("authd.conf", "[AppGroup]\nName=shop\nUsers=1000\n[AppGroup]\nName=news\nUsers=3000\n")],
            users: SystemUserDatabase()
        )
        let fixture = try Fixture(access: AccessControl(policy: policy))
        let root = Caller(pid: 1, uid: 0, gid: 0)
        for group in ["shop", "news"] {
            _ = try await fixture.call(
                #"{"method":"com.exponea.Auth.SetToken","parameters":{"group":"\#(group)","token":"\#(token)"}}"#,
                as: root
            )
        }
        let list = try await fixture.call(#"{"method":"com.exponea.Auth.ListGroups"}"#)
        let groups = try #require((list.first?["parameters"] as? [String: Any])?["groups"] as? [[String: Any]])
        #expect(groups.map { $0["name"] as? String } == ["shop"])
        #expect(groups.first?["state"] as? String == "valid")
        let (error, _) = try await fixture.error(
            #"{"method":"com.exponea.Auth.GetToken","parameters":{"group":"news"}}"#)
        #expect(error == "com.exponea.Auth.PermissionDenied")
    }

    /// Units= (issue 40): a caller allowed by its unit (found once when it connected) is served, named by it in the
    /// operator's log (CALLER_UNIT=) and in WhoAmI with the rule; a reload that drops the unit refuses the same
    /// caller's next call, as one of a connection that stays open.
    @Test func aCallerAllowedByItsUnitIsServedLoggedAndRefusedAfterAReloadDropsIt() async throws {
        let configuration = "[AppGroup]\nName=shop\nUnits=shop-*.service\n"
        let policy = try AccessPolicy(files: [("authd.conf", configuration)], users: SystemUserDatabase())
        let access = AccessControl(policy: policy)
        let logs = LogCapture()
        let loop = try TestLoop()
        defer { loop.stop() }
        let directory = try TemporaryDirectory(prefix: "authd-units")
        defer { directory.remove() }
        let store = try TokenStore(
            directory: directory.appending("state"), key: StoreKey(material: Array(repeating: 5, count: 32)),
            logger: Logger(label: "test"))
        let service = AuthService(
            store: store, records: [], clock: ManualClock(Date()), storeWriters: StoreWriters.shared,
            executor: loop.executor, logger: Logger(label: "test"))
        let dispatcher = AuthCallDispatcher(service: service, access: access, logger: logs.logger())
        let app = Caller(pid: 4321, uid: 61234, gid: 61234, unit: "shop-app.service")
        let other = Caller(pid: 4322, uid: 61234, gid: 61234, unit: "other-app.service")
        func call(_ json: String, as caller: Caller) async throws -> [String: Any] {
            let frames = Locked<[[UInt8]]>([])
            try await dispatcher.handle(try VarlinkCall(decoding: Array(json.utf8)), from: caller, on: loop) { frame in
                frames.withLock { $0.append(frame) }
            }
            let frame = try #require(frames.withLock { $0 }.first)
            return try JSONSerialization.jsonObject(with: Data(frame.dropLast())) as! [String: Any]
        }
        let set = #"{"method":"com.exponea.Auth.SetToken","parameters":{"group":"shop","token":"\#(token)"}}"#
        let get = #"{"method":"com.exponea.Auth.GetToken","parameters":{"group":"shop"}}"#

        #expect(try await call(set, as: app)["error"] == nil)
        let entry = try #require(logs.entries.first { $0.message == "Token set" })
        #expect(entry.metadata["caller_unit"] == "shop-app.service")
        #expect(entry.metadata["caller_uid"] == "61234")
        #expect((try await call(get, as: app)["parameters"] as? [String: Any])?["token"] as? String == token)
        #expect(try await call(get, as: other)["error"] as? String == "com.exponea.Auth.PermissionDenied")

        let whoAmI = try await call(#"{"method":"com.exponea.Auth.WhoAmI"}"#, as: app)
        let seen = try #require(whoAmI["parameters"] as? [String: Any])
        #expect(seen["unit"] as? String == "shop-app.service")
        let groups = seen["appGroups"] as? [[String: Any]]
        #expect(groups?.first?["name"] as? String == "shop")
        #expect(groups?.first?["rules"] as? [String] == ["Units=shop-*.service"])

        let reloaded = try AccessPolicy(
            files: [("authd.conf", "[AppGroup]\nName=shop\nUnits=kiosk-*.service\n")], users: SystemUserDatabase())
        await dispatcher.replaceAccessPolicy(with: reloaded)
        #expect(try await call(get, as: app)["error"] as? String == "com.exponea.Auth.PermissionDenied")
        // The refusals' line (one per user per interval) named the first refused: the same uid, in other-app.
        let refusal = try #require(logs.entries.first { $0.message.hasPrefix("Permission denied") })
        #expect(refusal.metadata["caller_unit"] == "other-app.service")
    }

    /// CountGroups counts, for each caller, the groups ListGroups would list for it: root every group, a user
    /// those the policy gives it, a stranger none.
    @Test func countGroupsCountsOnlyPermittedGroupsInSystemMode() async throws {
        let policy = try AccessPolicy(
            files: [("authd.conf", "[AppGroup]\nName=shop\nUsers=1000\n[AppGroup]\nName=news\nUsers=3000\n")],
            users: SystemUserDatabase()
        )
        let fixture = try Fixture(access: AccessControl(policy: policy))
        let root = Caller(pid: 1, uid: 0, gid: 0)
        _ = try await fixture.call(
            #"{"method":"com.exponea.Auth.SetToken","parameters":{"group":"shop","token":"\#(token)"}}"#, as: root)
        _ = try await fixture.call(
            #"{"method":"com.exponea.Auth.IdentifyCustomer","parameters":{"group":"news","customerIds":{"a":"b"}}}"#,
            as: root)
        let count = #"{"method":"com.exponea.Auth.CountGroups"}"#
        func counts(_ caller: Caller?) async throws -> [String: Int]? {
            (try await fixture.call(count, as: caller).first?["parameters"] as? [String: Any])?
                .compactMapValues { $0 as? Int }
        }
        #expect(try await counts(root) == ["groups": 2, "withToken": 1])
        #expect(try await counts(nil) == ["groups": 1, "withToken": 1])
        #expect(try await counts(Caller(pid: 200, uid: 3000, gid: 3000)) == ["groups": 1, "withToken": 0])
        #expect(try await counts(Caller(pid: 300, uid: 2000, gid: 2000)) == ["groups": 0, "withToken": 0])
    }

    /// CountGroups of a caller who may use every group is answered on the event loop, from the counts the
    /// service committed before it answered the change; another caller's goes to the service, which counts the
    /// groups it may use.
    @Test func countGroupsOfEveryGroupIsAnsweredAtOnceWithTheCommittedCounts() async throws {
        let policy = try AccessPolicy(
            files: [("authd.conf", "[AppGroup]\nName=shop\nUsers=1000\n")], users: SystemUserDatabase())
        let fixture = try Fixture(access: AccessControl(policy: policy))
        let root = Caller(pid: 1, uid: 0, gid: 0)
        let count = try VarlinkCall(decoding: Array(#"{"method":"com.exponea.Auth.CountGroups"}"#.utf8))
        // On the loop, as the transport calls it.
        let dispatcher = fixture.dispatcher
        func immediate(_ caller: Caller) async throws -> [String: Int]? {
            guard let frame = try await dispatcher.answered(count, from: caller, on: fixture.loop) else { return nil }
            let reply = try JSONSerialization.jsonObject(with: Data(frame.dropLast())) as? [String: Any]
            return (reply?["parameters"] as? [String: Any])?.compactMapValues { $0 as? Int }
        }
        #expect(try await immediate(root) == ["groups": 0, "withToken": 0])
        _ = try await fixture.call(
            #"{"method":"com.exponea.Auth.SetToken","parameters":{"group":"shop","token":"\#(token)"}}"#, as: root)
        #expect(try await immediate(root) == ["groups": 1, "withToken": 1])
        _ = try await fixture.call(
            #"{"method":"com.exponea.Auth.IdentifyCustomer","parameters":{"group":"news","customerIds":{"a":"b"}}}"#,
            as: root)
        #expect(try await immediate(root) == ["groups": 2, "withToken": 1])
        let cleared = try await fixture.call(
            #"{"method":"com.exponea.Auth.ClearLocalCustomerData","parameters":{"group":"shop"}}"#, as: root)
        #expect(cleared.first?["error"] == nil, "\(cleared)")
        #expect(try await immediate(root) == ["groups": 2, "withToken": 0])
        #expect(try await immediate(fixture.owner) == nil)

        let extra = try VarlinkCall(
            decoding: Array(#"{"method":"com.exponea.Auth.CountGroups","parameters":{"x":1}}"#.utf8))
        let refusal = try await dispatcher.answered(extra, from: root, on: fixture.loop).map {
            String(decoding: $0, as: UTF8.self)
        }
        #expect(refusal?.contains("org.varlink.service.InvalidParameter") == true, "\(refusal ?? "nil")")
    }

    /// authd.conf's RefreshLeaseSec= sets a group's own lease; other groups keep the daemon's.
    @Test func aGroupsOwnRefreshLeaseComesFromTheConfiguration() async throws {
        let policy = try AccessPolicy(
            files: [
                (
                    "authd.conf",
                    "[AppGroup]\nName=shop\nUsers=1000\nRefreshLeaseSec=0.5\n[AppGroup]\nName=news\nUsers=1000\n"
                )
            ],
            users: SystemUserDatabase()
        )
        let fixture = try Fixture(access: AccessControl(policy: policy))
        func claim(_ group: String) async throws -> [String: Any] {
            let replies = try await fixture.call(
                #"{"method":"com.exponea.Auth.ClaimRefresh","parameters":{"group":"\#(group)","generation":0}}"#)
            return replies.first?["parameters"] as? [String: Any] ?? [:]
        }
        #expect(try await claim("shop")["leaseMs"] as? Int == 500)
        #expect(try await claim("news")["leaseMs"] as? Int == 5000)
        #expect(try await claim("shop")["granted"] as? Bool == false)  // held
        // The short lease runs out (and only it: the long one is still held): the claim is free again.
        await fixture.clock.advance(by: 0.5, firing: true)
        #expect(try await claim("shop")["granted"] as? Bool == true)
        #expect(try await claim("news")["granted"] as? Bool == false)
    }

    @Test func onewayCallsRunWithoutAReply() async throws {
        let fixture = try Fixture()
        let replies = try await fixture.call(
            #"{"method":"com.exponea.Auth.SetToken","oneway":true,"parameters":{"group":"shop","token":"\#(token)"}}"#
        )
        #expect(replies.isEmpty)
        #expect(await fixture.service.token(for: try AppGroup("shop")).generation == 1)
    }

    @Test func subscribeStreamsEventsUntilTheConnectionIsGone() async throws {
        let fixture = try Fixture()
        let frames = Arrivals<String>()
        struct Gone: Error {}
        let subscription = Task {
            try await fixture.dispatcher.handle(
                try VarlinkCall(
                    decoding: Array(
                        #"{"method":"com.exponea.Auth.Subscribe","more":true,"parameters":{"group":"shop"}}"#.utf8)),
                from: fixture.owner, on: fixture.loop
            ) { frame in
                frames.append(String(decoding: frame.dropLast(), as: UTF8.self))
                if frames.all.count == 3 { throw Gone() }  // the client went away after the state and two events
            }
        }
        // The state every subscription starts with: it is registered, no event is missed.
        #expect(await frames.waitFor(count: 1))
        for _ in 0..<3 {
            _ = try await fixture.call(
                #"{"method":"com.exponea.Auth.SetToken","parameters":{"group":"shop","token":"\#(token)"}}"#
            )
        }
        try await subscription.value
        let received = frames.all
        #expect(received.count == 3)
        #expect(received.first?.hasPrefix(#"{"continues":true,"parameters":{"event":{"#) == true)
        #expect(received.first?.contains(#""kind":"state""#) == true)
        #expect(received.dropFirst().first?.contains(#""kind":"tokenRefreshed""#) == true)
        #expect(!received.joined().contains(token))
    }

    @Test func aSubscribeCallEndedByItsConnectionClosingIsForgottenAndCountsAsDropped() async throws {
        let directory = try TemporaryDirectory(prefix: "authd-dispatch")
        defer { directory.remove() }
        let store = try TokenStore(
            directory: directory.appending("state"),
            key: StoreKey(material: Array(repeating: 5, count: 32)),
            logger: Logger(label: "test")
        )
        // The subscription's end must finish the flush, before its timeout (which logs a warning) does.
        let logs = LogCapture()
        let clock = ManualClock(Date())
        let loop = try TestLoop()
        defer { loop.stop() }
        let service = AuthService(
            store: store, records: [], flushTimeout: .seconds(10), clock: clock,
            storeWriters: StoreWriters.shared, executor: loop.executor, logger: logs.logger())
        let dispatcher = AuthCallDispatcher(
            service: service, access: AccessControl(owner: 0), logger: Logger(label: "t"))
        let frames = Arrivals<String>()
        let subscription = Task {
            try await dispatcher.handle(
                try VarlinkCall(
                    decoding: Array(
                        #"{"method":"com.exponea.Auth.Subscribe","more":true,"parameters":{"group":"shop"}}"#.utf8)),
                from: Caller(pid: 7, uid: 0, gid: 0), on: loop
            ) { frame in frames.append(String(decoding: frame.dropLast(), as: UTF8.self)) }
        }
        #expect(await frames.waitFor(count: 1))  // the state: registered
        let clearing = Task { try await service.clear(try AppGroup("shop"), cause: .anonymize) }
        #expect(await frames.waitFor(count: 2))  // asked to flush

        subscription.cancel()  // what the transport does when the connection closes
        try await subscription.value
        // Finished by the subscription's end: the flush's bound never fires on this clock; not counted as
        // flushed.
        let result = try await clearing.value
        #expect(result == ClearResult(asked: 1, unconfirmed: [UnconfirmedFlush(pid: 7, reason: .dropped)]))
        #expect(logs.entries.contains { $0.message.contains("without every app's flush acknowledgement") })
        #expect(await service.summaries().first?.subscribers == 0)
        let received = frames.all
        #expect(received.count == 2 && received.last?.contains(#""kind":"flushRequested""#) == true)
    }
}
