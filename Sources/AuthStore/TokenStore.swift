// SPDX-License-Identifier: Apache-2.0
import AuthCore
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The protected, persistent store of one ``TokenRecord`` per app group (R4).
///
/// Layout of the store directory (mode 0700, owned by the daemon's user):
///
/// ```
/// <directory>/<group>.token             the record, AES-256-GCM encrypted (mode 0600)
/// <directory>/<group>.token.corrupt     a record that could not be read, set aside (".corrupt-<hex>" if taken)
/// <directory>/.<group>.token.tmp-<hex>  a record being written; removed on open if a crash left it
/// <directory>/store.key                 the key file, only when no key credential is given (mode 0600)
/// ```
///
/// Every write replaces the record atomically (temp file, `fsync`, `renameat`, `fsync` of the directory), so a
/// crash at any instant leaves each record either old or new. Writers on several threads share the directory's
/// fsync (``DirectorySync``). A record that cannot be read, decrypted or
/// decoded is renamed aside, logged at warning level, and reported as no record; other groups are not affected.
/// Two things are refused instead, setting nothing aside: a record that is not the daemon's own (another owner,
/// or open to group or others), and, in ``loadAll()``, records of which not one decrypts (a wrong key).
/// Files are opened with `O_NOFOLLOW | O_NONBLOCK` and read only when they are regular files, so nothing put in
/// a record's place can hang the start.
///
/// The API is synchronous and blocking: call it off the event loop. Calls may come from any thread, but calls
/// for one group must be serialised by the caller (a `load` that quarantines a record must not race a `save`
/// of the same group). One process owns a store directory: opening it removes temporary files left behind.
///
/// ```swift
/// let key = try StoreKey.resolve(directory: path, environment: ProcessInfo.processInfo.environment,
///                                logger: logger)
/// let store = try TokenStore(directory: path, key: key, logger: logger)
/// try store.save(TokenRecord(group: group, token: jwt, generation: 1, changedAt: .now))
/// let record = try store.load(group)
/// ```
public final class TokenStore: Sendable {
    /// The largest record file read; a larger one counts as corrupt.
    public static let maximumRecordSize = 64 * 1024
    /// The file name suffix of records.
    static let recordSuffix = ".token"
    /// The file name suffix of records set aside.
    static let corruptSuffix = ".corrupt"

    /// The store directory, as given.
    public let directory: String
    /// Unreadable records found since the store was opened (set aside, or left when they could not be moved).
    public var recordsSetAside: UInt64 { setAside.load(ordering: .relaxed) }
    private let setAside = Atomic<UInt64>(0)

    private let directoryDescriptor: CInt
    /// The directory's fsyncs, shared by the writers whose changes are done when one starts.
    private let directorySync: DirectorySync
    private let key: StoreKey
    private let logger: Logger

    /// Opens the store in `directory`, creating the directory with mode 0700 if it is missing.
    ///
    /// Removes temporary files a crash left behind.
    ///
    /// - Parameters:
    ///   - directory: The store directory; its parent must exist.
    ///   - key: The key records are encrypted with (see ``StoreKey/resolve(directory:environment:credentialName:logger:)``).
    ///   - logger: Receives warnings about records set aside; never a token, key or customer id.
    /// - Throws: ``TokenStoreError`` when the directory cannot be created or opened, is not owned by the current
    ///   user, or group or others can access it (the message says how to fix it).
    public convenience init(directory: String, key: StoreKey, logger: Logger) throws(TokenStoreError) {
        var listing: [String]?
        try self.init(directory: directory, key: key, logger: logger, listing: &listing)
    }

    /// Opens the store as ``init(directory:key:logger:)`` does and reads every record as ``loadAll()`` does, listing
    /// the directory once for both: the daemon's start, where one listing of 100,000 records is a tenth of it.
    ///
    /// - Throws: ``TokenStoreError``, as the two do.
    public static func openLoadingAll(directory: String, key: StoreKey, logger: Logger)
        throws(TokenStoreError) -> (store: TokenStore, records: [TokenRecord])
    {
        var listing: [String]?
        let store = try TokenStore(directory: directory, key: key, logger: logger, listing: &listing)
        let groups = if let listing { Self.groups(named: listing) } else { try store.storedGroups() }
        return (store, try store.loadAll(groups))
    }

    /// Opens the store, removing the temporary files a crash left; `listing` gets the directory's entries, or nil
    /// when it could not be listed.
    private init(directory: String, key: StoreKey, logger: Logger, listing: inout [String]?) throws(TokenStoreError) {
        self.directory = directory
        self.key = key
        self.logger = logger
        self.directoryDescriptor = try StoreDirectory.open(directory)
        self.directorySync = DirectorySync(directoryDescriptor)
        listing = removeTemporaryFiles()
    }

    deinit {
        SystemCalls.close(directoryDescriptor)
    }

    // MARK: Reading

    /// The record of `group`, or nil when there is none or it was unreadable (it is then set aside and logged).
    ///
    /// - Throws: ``TokenStoreError`` only when the store itself cannot be used (for example, out of file
    ///   descriptors); a damaged record is not an error.
    public func load(_ group: AppGroup) throws(TokenStoreError) -> TokenRecord? {
        switch try read(group) {
        case .record(let record):
            return record
        case .missing:
            return nil
        case .defect(let defect):
            quarantine(group, name: Self.recordName(group), defect: defect)
            return nil
        }
    }

    /// What reading one record gave.
    private enum Outcome {
        case record(TokenRecord)
        case missing
        case defect(RecordDefect)

        /// Whether the record's content was decrypted (it may still be unusable): proof the key is right.
        var decrypted: Bool {
            switch self {
            case .record: true
            case .missing: false
            case .defect(let defect): defect.isAfterDecryption
            }
        }

        var failedToDecrypt: Bool {
            if case .defect(.authenticationFailed) = self { return true }
            return false
        }
    }

    /// Reads and decodes the record of `group`, setting nothing aside.
    private func read(_ group: AppGroup) throws(TokenStoreError) -> Outcome {
        let bytes: [UInt8]
        switch readRecordFile(Self.recordName(group)) {
        case .missing:
            return .missing
        case .failed(let error):
            throw error
        case .defect(let defect):
            return .defect(defect)
        case .bytes(let read):
            bytes = read
        }
        do {
            return .record(try RecordCodec.decode(bytes, group: group, key: key))
        } catch {
            return .defect(error)
        }
    }

    /// Every readable record, sorted by group name. Unreadable ones are set aside, logged and left out.
    ///
    /// When records exist and not one of them decrypts, the key is wrong rather than every record: nothing is
    /// set aside and ``TokenStoreError/Code/keyMismatch`` is thrown, naming the key. (With a single record, a
    /// damaged record cannot be told from a wrong key: it is taken for a wrong key, and every file is kept.)
    ///
    /// Reads on every core: with 100,000 groups, reading and decrypting the records is most of the start.
    ///
    /// - Throws: ``TokenStoreError`` when the directory cannot be listed, a record is owned by another user or
    ///   open to group or others (``TokenStoreError/Code/recordUnsafe``), no record decrypts with the key
    ///   (``TokenStoreError/Code/keyMismatch``), or a record cannot be read for a reason that is not the
    ///   record's (for example, out of file descriptors).
    public func loadAll() throws(TokenStoreError) -> [TokenRecord] {
        try loadAll(storedGroups())
    }

    /// ``loadAll()`` of `groups`, sorted.
    private func loadAll(_ groups: [AppGroup]) throws(TokenStoreError) -> [TokenRecord] {
        let parts = max(1, min(Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))), groups.count / 256))
        // Each part reads its share of the groups into its own range of one buffer, and the records are moved out
        // of it: with 100,000 groups, copying them between arrays was a sixth of the start.
        let outcomes = OutcomeSlots(count: groups.count)
        defer { outcomes.deallocate() }
        let loaded = PartResults<Result<Void, TokenStoreError>>(count: parts)
        // On threads of its own rather than libdispatch's pool: once that pool has a worker, its monitor wakes
        // the process every second for the rest of its life.
        Self.concurrentPerform(parts) { part in
            do throws(TokenStoreError) {
                for index in (groups.count * part / parts)..<(groups.count * (part + 1) / parts) {
                    outcomes.initialize(index, to: try self.read(groups[index]))
                }
                loaded[part] = .success(())
            } catch {
                loaded[part] = .failure(error)
            }
        }
        for part in 0..<parts { try loaded[part]!.get() }

        let undecryptable = outcomes.count { $0.failedToDecrypt }
        if undecryptable > 0 && !outcomes.contains(where: { $0.decrypted }) {
            throw TokenStoreError(
                code: .keyMismatch,
                message: "not one of the \(undecryptable) token record\(undecryptable == 1 ? "" : "s") in \(directory) "
                    + "decrypts with the store key (\(key.source)): the key is not the one they were written with "
                    + "(it was changed, damaged or replaced), so nothing was set aside and every file is kept. "
                    + "Restore the key from a backup; if the key is right and the records are damaged, move the "
                    + "*\(Self.recordSuffix) files out of \(directory) to start with an empty store")
        }
        var records: [TokenRecord] = []
        records.reserveCapacity(groups.count)
        for index in groups.indices {
            switch outcomes.take(index) {
            case .record(let record): records.append(record)
            case .missing: break
            case .defect(let defect): quarantine(groups[index], name: Self.recordName(groups[index]), defect: defect)
            }
        }
        return records
    }

    /// The outcomes of one ``loadAll()``, one slot per group: written by the parts, each in its own range, and read
    /// once they are all done (`concurrentPerform` joins their threads), so it needs no lock.
    private final class OutcomeSlots: @unchecked Sendable {
        private let slots: UnsafeMutablePointer<Outcome>
        private let capacity: Int
        /// Whether each slot holds an outcome: a part that failed leaves the rest of its range empty.
        private let filled: UnsafeMutableBufferPointer<Bool>

        init(count: Int) {
            capacity = count
            slots = .allocate(capacity: max(count, 1))
            filled = .allocate(capacity: max(count, 1))
            filled.initialize(repeating: false)
        }

        func initialize(_ index: Int, to outcome: Outcome) {
            (slots + index).initialize(to: outcome)
            filled[index] = true
        }

        /// Moves the outcome out of its slot: the slot is empty after.
        func take(_ index: Int) -> Outcome {
            filled[index] = false
            return (slots + index).move()
        }

        /// How many filled slots match.
        func count(where matches: (Outcome) -> Bool) -> Int {
            (0..<capacity).count { filled[$0] && matches(slots[$0]) }
        }

        func contains(where matches: (Outcome) -> Bool) -> Bool {
            (0..<capacity).contains { filled[$0] && matches(slots[$0]) }
        }

        /// Empties the slots still filled, and frees them.
        func deallocate() {
            for index in 0..<capacity where filled[index] { (slots + index).deinitialize(count: 1) }
            slots.deallocate()
            filled.deallocate()
        }
    }

    // MARK: Writing

    /// Stores `record`, replacing the group's previous one atomically and durably.
    ///
    /// - Throws: ``TokenStoreError`` naming the system call that failed; the previous record is then intact.
    public func save(_ record: TokenRecord) throws(TokenStoreError) {
        let bytes = try RecordCodec.encode(record, key: key)
        let name = Self.recordName(record.group)
        let path = self.path(name)
        let temporary = try TemporaryFile.create(
            in: directoryDescriptor, prefix: "." + name, what: "token record", path: path)
        var renamed = false
        defer {
            if !renamed { try? SystemCalls.unlinkat(directoryDescriptor, temporary.name) }
        }
        try temporary.writeAndClose(bytes, what: "token record", path: path)
        do {
            try SystemCalls.renameat(directoryDescriptor, temporary.name, name)
            renamed = true
        } catch {
            throw TokenStoreError("cannot replace the token record \(path)", error)
        }
        try syncDirectory(after: "replacing the token record \(path)")
    }

    /// Deletes the record of `group`, durably. A missing record is fine.
    ///
    /// - Throws: ``TokenStoreError`` naming the system call that failed.
    public func remove(_ group: AppGroup) throws(TokenStoreError) {
        let name = Self.recordName(group)
        do {
            try SystemCalls.unlinkat(directoryDescriptor, name)
        } catch let failure where failure.errno == .noSuchFileOrDirectory {
            return
        } catch {
            throw TokenStoreError("cannot delete the token record \(path(name))", error)
        }
        try syncDirectory(after: "deleting the token record \(path(name))")
    }

    // MARK: Files

    static func recordName(_ group: AppGroup) -> String { group.name + recordSuffix }

    private func path(_ name: String) -> String { directory + "/" + name }

    private func syncDirectory(after action: String) throws(TokenStoreError) {
        do {
            try directorySync.changed()
        } catch {
            throw TokenStoreError("cannot flush the token store directory \(directory) to disk after \(action)", error)
        }
    }

    /// The groups that have a record file.
    private func storedGroups() throws(TokenStoreError) -> [AppGroup] {
        let names: [String]
        do {
            names = try SystemCalls.listDirectory(directoryDescriptor)
        } catch {
            throw TokenStoreError("cannot list the token store directory \(directory)", error)
        }
        return Self.groups(named: names)
    }

    /// The groups whose records these directory entries are, sorted.
    private static func groups(named names: [String]) -> [AppGroup] {
        names.compactMap { name -> AppGroup? in
            guard name.hasSuffix(Self.recordSuffix) else { return nil }
            return try? AppGroup(String(name.dropLast(Self.recordSuffix.count)))
        }
        .sorted()
    }

    private enum ReadResult {
        case missing
        case bytes([UInt8])
        case defect(RecordDefect)
        case failed(TokenStoreError)
    }

    private func readRecordFile(_ name: String) -> ReadResult {
        let descriptor: CInt
        do {
            // O_NONBLOCK: a FIFO in a record's place must not hang the start (it is set aside below).
            descriptor = try SystemCalls.openat(
                directoryDescriptor, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        } catch let failure {
            switch failure.errno {
            case .noSuchFileOrDirectory:
                return .missing
            case .tooManySymbolicLinkLevels, .isDirectory, .noSuchAddressOrDevice, .permissionDenied:
                // A symbolic link (O_NOFOLLOW), or something else that is no record of ours.
                return .defect(.unreadable(failure))
            default:
                return .failed(TokenStoreError("cannot open the token record \(path(name))", failure))
            }
        }
        defer { SystemCalls.close(descriptor) }
        do {
            let info = try SystemCalls.fstat(descriptor)
            guard SystemCalls.isRegularFile(info) else { return .defect(.notRegularFile) }
            if let problem = Self.unsafeOwnership(info) {
                // The daemon writes every record itself, as its user and with mode 0600: anything else was made or
                // changed by someone else. As for the store directory, refuse it and say how to fix it, rather
                // than read it or set it aside (a restore from a backup with the wrong owner loses nothing).
                return .failed(
                    TokenStoreError(
                        code: .recordUnsafe,
                        message: "the token record \(path(name)) \(problem); the daemon writes its records as "
                            + "uid \(geteuid()) with mode 0600 and uses no other: run 'chown \(geteuid()) "
                            + "\(path(name))' and 'chmod 0600 \(path(name))' if the file is the daemon's own, or "
                            + "move it away"))
            }
            guard info.st_size <= Self.maximumRecordSize else {
                return .defect(.tooLarge(limit: Self.maximumRecordSize))
            }
            guard
                let bytes = try SystemCalls.readAll(
                    descriptor, limit: Self.maximumRecordSize, expected: Int(info.st_size))
            else {
                return .defect(.tooLarge(limit: Self.maximumRecordSize))
            }
            return .bytes(bytes)
        } catch let failure where failure.errno == .ioError {
            return .defect(.unreadable(failure))
        } catch {
            return .failed(TokenStoreError("cannot read the token record \(path(name))", error))
        }
    }

    /// Why a record with these attributes is not the daemon's own, or nil when it is.
    private static func unsafeOwnership(_ info: stat) -> String? {
        if info.st_uid != geteuid() { return "is owned by uid \(info.st_uid), not by the daemon's uid \(geteuid())" }
        if info.st_mode & 0o077 != 0 {
            return "has mode \(SystemCalls.modeString(info)), so group or others can access it"
        }
        return nil
    }

    /// Renames the record `name` aside (never over an earlier quarantined file) and logs why.
    private func quarantine(_ group: AppGroup, name: String, defect: RecordDefect) {
        var target = name + Self.corruptSuffix
        var moved = false
        var failure: SystemCallError?
        for _ in 0..<8 {
            do {
                // link + unlink rather than rename: link never replaces an existing file.
                try SystemCalls.linkat(directoryDescriptor, name, target)
                try? SystemCalls.unlinkat(directoryDescriptor, name)
                moved = true
                break
            } catch let error where error.errno == .fileExists {
                target = name + Self.corruptSuffix + "-" + TemporaryFile.randomSuffix()
            } catch {
                failure = error
                break
            }
        }
        setAside.add(1, ordering: .relaxed)
        if moved {
            try? SystemCalls.fsync(directoryDescriptor)
            var metadata = OperatorEvent.recordSetAside.metadata(group: group.name) { Logger.MetadataValue.string($0) }
            metadata["authd.problem"] = "\(defect)"
            metadata["authd.moved_to"] = "\(path(target))"
            logger.warning(
                "Set aside an unreadable token record; the app group has no token until one is set again",
                metadata: metadata)
        } else {
            logger.error(
                "Found an unreadable token record and could not set it aside; the app group has no token until one is set again",
                metadata: [
                    "authd.group": "\(group)", "authd.problem": "\(defect)", "authd.file": "\(path(name))",
                    "authd.move_failure": "\(failure.map { "\($0)" } ?? "no free name")",
                ])
        }
    }

    /// Removes the temporary files a crash left: the directory's entries as listed (a temporary file's name is
    /// no record's), or nil when it cannot be listed.
    private func removeTemporaryFiles() -> [String]? {
        let names: [String]
        do {
            names = try SystemCalls.listDirectory(directoryDescriptor)
        } catch {
            logger.warning(
                "Cannot list the token store directory to remove leftover temporary files",
                metadata: ["directory": "\(directory)", "error": "\(error)"])
            return nil
        }
        for name in names where TemporaryFile.isTemporary(name) {
            do {
                try SystemCalls.unlinkat(directoryDescriptor, name)
                logger.debug(
                    "Removed a temporary file left by an interrupted write", metadata: ["authd.file": "\(name)"])
            } catch {
                logger.warning(
                    "Cannot remove a temporary file left by an interrupted write",
                    metadata: ["authd.file": "\(path(name))", "authd.error": "\(error)"])
            }
        }
        return names
    }
}

/// One result per part of a parallel loop, each written by its own iteration.
extension TokenStore {
    /// Runs `body(0..<count)`, part 0 on the calling thread and each other part on a thread of its own, and
    /// returns when all are done.
    fileprivate static func concurrentPerform(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
        var threads: [pthread_t] = []
        for part in 1..<max(1, count) {
            let context = Unmanaged.passRetained(PartBody { body(part) }).toOpaque()
            var thread = pthread_t()
            let started = pthread_create(
                &thread, nil,
                { context in
                    Unmanaged<PartBody>.fromOpaque(context!).takeRetainedValue().body()
                    return nil
                }, context)
            if started == 0 {
                threads.append(thread)
            } else {
                Unmanaged<PartBody>.fromOpaque(context).release()
                body(part)  // no thread to be had: this one does it
            }
        }
        if count > 0 { body(0) }
        for thread in threads { pthread_join(thread, nil) }
    }
}

private final class PartBody: Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}

private final class PartResults<Value: Sendable>: Sendable {
    private let values: Mutex<[Value?]>

    init(count: Int) { values = Mutex(Array(repeating: nil, count: count)) }

    subscript(part: Int) -> Value? {
        get { values.withLock { $0[part] } }
        set { values.withLock { $0[part] = newValue } }
    }
}
