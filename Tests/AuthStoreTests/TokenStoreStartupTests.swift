// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthTestKit
import Foundation
import Testing

@testable import AuthStore

#if canImport(Glibc)
    import Glibc
#endif

/// Opening a store that someone tampered with: nothing in place of a file can hang the start, a wrong key sets
/// nothing aside, and a record that is not the daemon's own is refused with the reason.
@Suite(.offPool)
struct TokenStoreStartupTests {
    /// A store keyed by its key file (`store.key`), with records for `shop` and `news`.
    struct KeyFileStore {
        let fixture: StoreFixture
        let records: [TokenRecord]
        var keyPath: String { fixture.path(StoreKey.keyFileName) }

        init() throws {
            fixture = try StoreFixture(keyMaterial: nil)
            records = [try StoreFixture.record("news", generation: 2), try StoreFixture.record("shop", generation: 7)]
            let store = try open()
            for record in records { try store.save(record) }
        }

        func open() throws -> TokenStore {
            let key = try StoreKey.fromKeyFile(
                inDirectory: fixture.storePath, logger: fixture.logger, warning: OnceFlag())
            return try TokenStore(directory: fixture.storePath, key: key, logger: fixture.logger)
        }
    }

    @Test func aFIFOInPlaceOfTheKeyFileIsRefusedWithoutWaiting() throws {
        let fixture = try StoreFixture(keyMaterial: nil)
        defer { fixture.remove() }
        #expect(mkdir(fixture.storePath, 0o700) == 0)
        #expect(mkfifo(fixture.path(StoreKey.keyFileName), 0o600) == 0)
        #expect {
            try StoreKey.fromKeyFile(inDirectory: fixture.storePath, logger: fixture.logger)
        } throws: { error in
            let error = error as? TokenStoreError
            return error?.code == .keyFileUnsafe && error?.message.contains("not a regular file") == true
        }
    }

    @Test func aFIFOInPlaceOfTheKeyCredentialIsRefusedWithoutWaiting() throws {
        let fixture = try StoreFixture(keyMaterial: nil)
        defer { fixture.remove() }
        #expect(mkfifo(fixture.credentialsPath + "/" + StoreKey.defaultCredentialName, 0o600) == 0)
        #expect {
            try StoreKey.fromCredential(environment: fixture.environment)
        } throws: { error in
            (error as? TokenStoreError)?.code == .keyFileUnsafe
        }
    }

    @Test func aFIFOInPlaceOfARecordIsSetAsideWithoutWaiting() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        let shop = try StoreFixture.record("shop")
        try store.save(shop)
        #expect(mkfifo(fixture.path("news.token"), 0o600) == 0)

        #expect(try store.loadAll() == [shop])
        #expect(try fixture.files() == ["news.token.corrupt", "shop.token"])
        #expect(fixture.warnings.first?.metadata["authd.problem"] == "not a regular file")
    }

    @Test func aKeyFileWithOneFlippedBitSetsNothingAsideAndNamesTheKey() throws {
        let setup = try KeyFileStore()
        defer { setup.fixture.remove() }
        var key = try setup.fixture.read(StoreKey.keyFileName)
        key[5] ^= 0x04
        try setup.fixture.write(key, to: StoreKey.keyFileName)
        let before = try setup.fixture.files()

        #expect {
            try setup.open().loadAll()
        } throws: { error in
            let error = error as? TokenStoreError
            return error?.code == .keyMismatch && error?.message.contains(setup.keyPath) == true
                && error?.message.contains("not one of the 2 token records") == true
        }
        #expect(try setup.fixture.files() == before)
        #expect(setup.fixture.warnings.filter { $0.metadata["authd.problem"] != nil }.isEmpty)

        // With the key restored, everything is there.
        key[5] ^= 0x04
        try setup.fixture.write(key, to: StoreKey.keyFileName)
        #expect(try setup.open().loadAll() == setup.records)
    }

    @Test func aDeletedKeyFileIsNotReplacedWhileRecordsExist() throws {
        let setup = try KeyFileStore()
        defer { setup.fixture.remove() }
        #expect(unlink(setup.keyPath) == 0)

        #expect {
            try setup.open()
        } throws: { error in
            let error = error as? TokenStoreError
            return error?.code == .keyFileMissing && error?.message.contains(setup.keyPath) == true
                && error?.message.contains("2 token records") == true
        }
        #expect(try setup.fixture.files() == ["news.token", "shop.token"])
    }

    @Test func anotherKeyCredentialSetsNothingAside() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let records = [try StoreFixture.record("news"), try StoreFixture.record("shop")]
        for record in records { try fixture.open().save(record) }
        try fixture.setCredential(StoreFixture.randomBytes(32))

        #expect {
            try fixture.open().loadAll()
        } throws: { error in
            let error = error as? TokenStoreError
            return error?.code == .keyMismatch
                && error?.message.contains("credential \(fixture.credentialsPath)/\(StoreKey.defaultCredentialName)")
                    == true
        }
        #expect(try fixture.files() == ["news.token", "shop.token"])
    }

    /// One record that does not decrypt among others that do is the record's fault: it alone is set aside.
    @Test func oneUndecryptableRecordAmongGoodOnesIsSetAside() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let shop = try StoreFixture.record("shop")
        try fixture.open().save(shop)
        let other = try TokenStore(
            directory: fixture.storePath, key: StoreKey(material: StoreFixture.randomBytes(32)),
            logger: fixture.logger)
        try other.save(try StoreFixture.record("news"))

        #expect(try fixture.open().loadAll() == [shop])
        #expect(try fixture.files() == ["news.token.corrupt", "shop.token"])
    }

    @Test func aRecordOthersCanReadIsRefusedAndKept() throws {
        let setup = try KeyFileStore()
        defer { setup.fixture.remove() }
        let path = setup.fixture.path("shop.token")
        #expect(chmod(path, 0o644) == 0)

        #expect {
            try setup.open().loadAll()
        } throws: { error in
            let error = error as? TokenStoreError
            return error?.code == .recordUnsafe && error?.message.contains(path) == true
                && error?.message.contains("mode 0644") == true && error?.message.contains("chmod 0600") == true
        }
        #expect(try setup.fixture.files() == ["news.token", "shop.token", StoreKey.keyFileName].sorted())
    }

    @Test(.enabled(if: getuid() == 0, "needs root to give a file to another user"))
    func aRecordOfAnotherUserIsRefusedAndKept() throws {
        let setup = try KeyFileStore()
        defer { setup.fixture.remove() }
        let path = setup.fixture.path("news.token")
        #expect(chown(path, 4242, 4242) == 0)

        #expect {
            try setup.open().load(try AppGroup("news"))
        } throws: { error in
            let error = error as? TokenStoreError
            return error?.code == .recordUnsafe && error?.message.contains("owned by uid 4242") == true
        }
        #expect(try setup.fixture.files().contains("news.token"))
    }

    /// The daemon's start: one listing for the open and the reading, which is split between threads once there are
    /// enough records (256 for each), and fails as a whole when one record in any part is refused.
    @Test func openingWhileLoadingAllRemovesTheTemporaryFilesAndReadsEveryPart() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        _ = try fixture.open()
        let key = try fixture.key()
        let records = try (0..<600).map {
            try StoreFixture.record(String(format: "group-%03d", $0), generation: UInt64($0 + 1))
        }
        for record in records {
            try fixture.write(RecordCodec.encode(record, key: key), to: "\(record.group.name).token")
        }
        let leftover = ".group-001.token\(TemporaryFile.marker)0123456789abcdef"
        try fixture.write([1, 2, 3], to: leftover)

        let (store, loaded) = try TokenStore.openLoadingAll(
            directory: fixture.storePath, key: key, logger: fixture.logger)
        #expect(loaded == records)
        #expect(try fixture.files() == records.map { "\($0.group.name).token" })
        #expect(try store.loadAll() == records)

        let refused = fixture.path("group-450.token")
        #expect(chmod(refused, 0o644) == 0)
        #expect {
            try TokenStore.openLoadingAll(directory: fixture.storePath, key: key, logger: fixture.logger)
        } throws: { error in
            let error = error as? TokenStoreError
            return error?.code == .recordUnsafe && error?.message.contains(refused) == true
        }
        #expect(try fixture.files().count == 600)
    }
}
