// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthTestKit
import Foundation
import Testing

@testable import AuthStore

/// Records that cannot be read are set aside as `<name>.token.corrupt`, logged without their content, and
/// read as "no token"; other groups are untouched.
@Suite(.offPool) struct TokenStoreQuarantineTests {
    /// A store with a record for `victim` (user id `victim-user`) and one for `bystander`.
    struct Setup {
        let fixture: StoreFixture
        let store: TokenStore
        let victim: TokenRecord
        let bystander: TokenRecord
        var token: String { victim.token!.compact }

        init() throws {
            fixture = try StoreFixture()
            store = try fixture.open()
            victim = try StoreFixture.record("victim", generation: 3, user: "victim-user")
            bystander = try StoreFixture.record("bystander", generation: 5)
            try store.save(victim)
            try store.save(bystander)
        }

        /// Loads the victim through `store` and checks everything a quarantine promises.
        func expectQuarantined(
            by store: TokenStore? = nil, problem: String, sourceLocation: SourceLocation = #_sourceLocation
        ) throws {
            let store = store ?? self.store
            #expect(try store.load(victim.group) == nil, sourceLocation: sourceLocation)

            let files = try fixture.files()
            #expect(files.contains("victim.token.corrupt"), "files: \(files)", sourceLocation: sourceLocation)
            #expect(!files.contains("victim.token"), sourceLocation: sourceLocation)
            #expect(try store.load(bystander.group) == bystander, sourceLocation: sourceLocation)
            #expect(try store.loadAll() == [bystander], sourceLocation: sourceLocation)
            // Loading again finds nothing, and quarantines nothing more.
            #expect(try store.load(victim.group) == nil, sourceLocation: sourceLocation)

            // An operator's event: GROUP= and its MESSAGE_ID in the journal.
            let warnings = fixture.warnings.filter {
                $0.metadata["group"] == "victim"
                    && $0.metadata["message_id"] == OperatorEvent.recordSetAside.messageID
            }
            #expect(warnings.count == 1, "\(fixture.capture.entries)", sourceLocation: sourceLocation)
            #expect(
                warnings.first?.metadata["authd.problem"]?.contains(problem) == true, "\(warnings)",
                sourceLocation: sourceLocation)
            for entry in fixture.capture.entries {
                let text = entry.description
                #expect(!text.contains(token), sourceLocation: sourceLocation)
                #expect(!text.contains(token.split(separator: ".")[1]), sourceLocation: sourceLocation)
                #expect(!text.contains("victim-user"), sourceLocation: sourceLocation)
            }
        }
    }

    @Test func garbageBytes() throws {
        let setup = try Setup()
        defer { setup.fixture.remove() }
        try setup.fixture.write(StoreFixture.randomBytes(300), to: "victim.token")
        try setup.expectQuarantined(problem: "wrong magic")
    }

    @Test func truncatedFile() throws {
        let setup = try Setup()
        defer { setup.fixture.remove() }
        let bytes = try setup.fixture.read("victim.token")
        try setup.fixture.write(Array(bytes.prefix(bytes.count / 2)), to: "victim.token")
        try setup.expectQuarantined(problem: "does not decrypt")
    }

    @Test func truncatedToHeader() throws {
        let setup = try Setup()
        defer { setup.fixture.remove() }
        let bytes = try setup.fixture.read("victim.token")
        try setup.fixture.write(Array(bytes.prefix(7)), to: "victim.token")
        try setup.expectQuarantined(problem: "truncated")
    }

    @Test func emptyFile() throws {
        let setup = try Setup()
        defer { setup.fixture.remove() }
        try setup.fixture.write([], to: "victim.token")
        try setup.expectQuarantined(problem: "truncated")
    }

    @Test func oneFlippedBit() throws {
        let setup = try Setup()
        defer { setup.fixture.remove() }
        var bytes = try setup.fixture.read("victim.token")
        bytes[bytes.count / 2] ^= 0x10
        try setup.fixture.write(bytes, to: "victim.token")
        try setup.expectQuarantined(problem: "does not decrypt")
    }

    @Test func unknownFormatVersion() throws {
        let setup = try Setup()
        defer { setup.fixture.remove() }
        var bytes = try setup.fixture.read("victim.token")
        bytes[4] = 2
        try setup.fixture.write(bytes, to: "victim.token")
        try setup.expectQuarantined(problem: "format version 2")
    }

    @Test func encryptedUnderAnotherKey() throws {
        let setup = try Setup()
        defer { setup.fixture.remove() }
        let otherKey = try StoreKey(material: StoreFixture.randomBytes(32))
        let other = try TokenStore(directory: setup.fixture.storePath, key: otherKey, logger: setup.fixture.logger)
        try other.save(setup.victim)
        try setup.expectQuarantined(problem: "does not decrypt")
    }

    @Test func renamedToAnotherGroup() throws {
        let setup = try Setup()
        defer { setup.fixture.remove() }
        var intruder = setup.victim
        intruder.group = try AppGroup("intruder")
        try setup.store.save(intruder)
        try setup.store.remove(setup.victim.group)
        #expect(rename(setup.fixture.path("intruder.token"), setup.fixture.path("victim.token")) == 0)
        try setup.expectQuarantined(problem: "does not decrypt")
    }

    @Test func tokenThatNoLongerParses() throws {
        let setup = try Setup()
        defer { setup.fixture.remove() }
        let bytes = try RecordCodec.encode(setup.victim, compactToken: "Bearer not-a-jwt", key: setup.fixture.key())
        try setup.fixture.write(bytes, to: "victim.token")
        try setup.expectQuarantined(problem: "stored token no longer parses")
    }

    @Test func unknownSchemaVersion() throws {
        let setup = try Setup()
        defer { setup.fixture.remove() }
        let bytes = try RecordCodec.encode(
            setup.victim, compactToken: setup.token, schema: 99, key: setup.fixture.key())
        try setup.fixture.write(bytes, to: "victim.token")
        try setup.expectQuarantined(problem: "schema version 99")
    }

    @Test func oversizedFile() throws {
        let setup = try Setup()
        defer { setup.fixture.remove() }
        let bytes = try setup.fixture.read("victim.token")
        try setup.fixture.write(bytes + [UInt8](repeating: 0, count: TokenStore.maximumRecordSize), to: "victim.token")
        try setup.expectQuarantined(problem: "larger than 65536 bytes")
    }

    @Test func symbolicLink() throws {
        let setup = try Setup()
        defer { setup.fixture.remove() }
        try setup.store.remove(setup.victim.group)
        #expect(symlink(setup.fixture.path("bystander.token"), setup.fixture.path("victim.token")) == 0)
        try setup.expectQuarantined(problem: "cannot be read")
    }

    @Test func secondQuarantineKeepsTheFirst() throws {
        let setup = try Setup()
        defer { setup.fixture.remove() }
        try setup.fixture.write([1, 2, 3], to: "victim.token")
        #expect(try setup.store.load(setup.victim.group) == nil)
        try setup.fixture.write([4, 5, 6], to: "victim.token")
        #expect(try setup.store.load(setup.victim.group) == nil)

        let files = try setup.fixture.files()
        #expect(try setup.fixture.read("victim.token.corrupt") == [1, 2, 3])
        let second = try #require(files.first { $0.hasPrefix("victim.token.corrupt-") })
        #expect(try setup.fixture.read(second) == [4, 5, 6])
        #expect(files.count == 3)  // bystander and two quarantined; no victim.token
    }

    @Test func loadAllSkipsQuarantinedRecords() throws {
        let setup = try Setup()
        defer { setup.fixture.remove() }
        try setup.fixture.write(StoreFixture.randomBytes(100), to: "victim.token")

        #expect(try setup.store.loadAll() == [setup.bystander])
        #expect(try setup.fixture.files() == ["bystander.token", "victim.token.corrupt"])
    }

    @Test func savingAfterQuarantineWorks() throws {
        let setup = try Setup()
        defer { setup.fixture.remove() }
        try setup.fixture.write([0], to: "victim.token")
        #expect(try setup.store.load(setup.victim.group) == nil)

        try setup.store.save(setup.victim)
        #expect(try setup.store.load(setup.victim.group) == setup.victim)
    }
}
