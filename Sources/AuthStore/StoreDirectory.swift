// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Opening the store directory: created with mode 0700 when missing, refused when it is not private to the
/// current user.
enum StoreDirectory {
    /// Creates `path` (only its last component) with mode 0700 if it is missing, opens it and checks it.
    ///
    /// The path is followed when it is a symbolic link (systemd's `DynamicUser=` makes `/var/lib/<name>` one);
    /// the checks apply to the directory the descriptor refers to.
    ///
    /// - Returns: A descriptor of the directory, for the `*at` calls. The caller closes it.
    static func open(_ path: String) throws(TokenStoreError) -> CInt {
        do {
            // The mode is given to mkdir itself: the directory is never, even for an instant, more open than
            // 0700 (the umask can only narrow it). It is never chmod-ed afterwards.
            try SystemCalls.mkdir(path, mode: 0o700)
        } catch let failure where failure.errno == .fileExists {
            // Already there: checked below.
        } catch let failure where failure.errno == .noSuchFileOrDirectory {
            throw TokenStoreError(
                "cannot create the token store directory \(path): its parent directory does not exist; create the "
                    + "parent, or let systemd create the directory with StateDirectory=", failure)
        } catch {
            throw TokenStoreError("cannot create the token store directory \(path)", error)
        }

        let descriptor: CInt
        do {
            descriptor = try SystemCalls.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        } catch let failure where failure.errno == .notDirectory {
            throw TokenStoreError(
                code: .notADirectory,
                message: "the token store path \(path) exists but is not a directory; move it away or choose "
                    + "another store directory")
        } catch {
            throw TokenStoreError("cannot open the token store directory \(path)", error)
        }

        do {
            try check(descriptor, path: path)
        } catch {
            SystemCalls.close(descriptor)
            throw error
        }
        return descriptor
    }

    private static func check(_ descriptor: CInt, path: String) throws(TokenStoreError) {
        let info: stat
        do {
            info = try SystemCalls.fstat(descriptor)
        } catch {
            throw TokenStoreError("cannot inspect the token store directory \(path)", error)
        }
        let user = geteuid()
        guard info.st_uid == user else {
            throw TokenStoreError(
                code: .directoryUnsafe,
                message: "the token store directory \(path) is owned by uid \(info.st_uid), but the daemon runs as "
                    + "uid \(user); the store must belong to the daemon's user: run 'chown \(user) \(path)' "
                    + "(with StateDirectory= systemd sets the owner itself)")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw TokenStoreError(
                code: .directoryUnsafe,
                message: "the token store directory \(path) has mode \(SystemCalls.modeString(info)), so group or "
                    + "others can access it; it must be private to its owner: run 'chmod 0700 \(path)' "
                    + "(or set StateDirectoryMode=0700 in the unit)")
        }
    }
}
