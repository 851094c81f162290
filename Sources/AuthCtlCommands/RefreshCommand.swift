// SPDX-License-Identifier: Apache-2.0
import AuthCore

#if canImport(Glibc)
    import Glibc
#endif

/// The integrator's command that fetches a group's token: run with a bound, fed a JSON request on standard
/// input, read for the token on standard output (bounded), killed with its whole process group when it runs
/// too long.
struct RefreshCommand: Sendable {
    /// The program and its arguments; the program is looked up in `PATH`.
    var arguments: [String]
    /// How long it may run.
    var timeout: Duration

    /// The most standard output read from it.
    static let maximumOutput = 64 * 1024

    /// How a run ended.
    enum Outcome: Equatable, Sendable {
        /// It exited with status 0 and printed a usable token (raw or as R27's JSON).
        case token(String)
        /// It exited with status 0 but printed nothing usable; the reason says why, without the output.
        case unusableOutput(String)
        /// It exited with another status.
        case failed(status: Int32)
        /// A signal ended it.
        case killed(signal: Int32)
        /// It ran past the timeout and was killed.
        case timedOut
        /// It could not be started.
        case cannotStart(String)
    }

    /// Runs the command once.
    ///
    /// - Parameters:
    ///   - input: What it reads on standard input.
    ///   - environment: Added to the agent's own environment.
    func run(input: [UInt8], environment: [String: String]) -> Outcome {
        var stdinPipe: [Int32] = [-1, -1]
        var stdoutPipe: [Int32] = [-1, -1]
        guard pipe(&stdinPipe) == 0 else { return .cannotStart(Self.errorText()) }
        guard pipe(&stdoutPipe) == 0 else {
            close(stdinPipe[0])
            close(stdinPipe[1])
            return .cannotStart(Self.errorText())
        }
        // The child gets them as its standard input and output only (dup2 clears the flag on those).
        for descriptor in stdinPipe + stdoutPipe { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, stdinPipe[0], 0)
        posix_spawn_file_actions_adddup2(&actions, stdoutPipe[1], 1)
        // Nothing else of the agent's: a descriptor the agent inherited without close-on-exec (its parent's
        // process-tracking socket, say) must not outlive the agent in a command that keeps running.
        for descriptor in Self.inheritableDescriptors() where descriptor > 2 {
            posix_spawn_file_actions_addclose(&actions, descriptor)
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // A process group of its own, so that a timeout kills what it started too; default signal handling
        // and an empty signal mask, whatever the agent has.
        var defaults = sigset_t()
        sigfillset(&defaults)
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        var variables: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            let text = String(cString: pointer)
            if let equals = text.firstIndex(of: "=") {
                variables[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            entry += 1
        }
        variables.merge(environment) { _, new in new }
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawnp(&pid, arguments[0], &actions, &attributes, argv, envp)
        close(stdinPipe[0])
        close(stdoutPipe[1])
        guard spawned == 0 else {
            close(stdinPipe[1])
            close(stdoutPipe[0])
            return .cannotStart("\(arguments[0]): \(String(cString: strerror(spawned)))")
        }

        let deadline = ContinuousClock.now + timeout
        // The request is small (far below a pipe's 64 KiB): one write, then end of file.
        _ = input.withUnsafeBytes { write(stdinPipe[1], $0.baseAddress, $0.count) }
        close(stdinPipe[1])
        let (output, complete) = Self.read(stdoutPipe[0], until: deadline)
        close(stdoutPipe[0])
        if !complete { kill(-pid, SIGKILL) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        // Whatever it left running in its group goes with it.
        kill(-pid, SIGKILL)

        guard complete else { return output == nil ? .unusableOutput("more than 64 KiB of output") : .timedOut }
        if status & 0x7f != 0 { return .killed(signal: status & 0x7f) }
        let exitStatus = (status >> 8) & 0xff
        guard exitStatus == 0 else { return .failed(status: exitStatus) }
        return Self.token(in: output ?? [])
    }

    /// Reads `descriptor` until end of file, the deadline, or more than ``maximumOutput`` bytes.
    ///
    /// - Returns: The bytes (nil when there were too many) and whether end of file came.
    private static func read(_ descriptor: Int32, until deadline: ContinuousClock.Instant) -> ([UInt8]?, Bool) {
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return (output, false) }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(min(left / .milliseconds(1), Double(Int32.max)).rounded(.up))
            let ready = poll(&poller, 1, milliseconds)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            guard count > 0 else { return (output, true) }
            output += buffer[..<count]
            guard output.count <= maximumOutput else { return (nil, false) }
        }
    }

    /// The token in a command's output: the raw token, or R27's `{"token": "...", "expiresIn": N}`.
    static func token(in output: [UInt8]) -> Outcome {
        let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
        let trimmed = output.drop(while: isSpace).reversed().drop(while: isSpace).reversed()
        guard let first = trimmed.first else { return .unusableOutput("it printed nothing") }
        if first == UInt8(ascii: "{") {
            guard let value = try? JSONValue(parsing: Array(trimmed)) else {
                return .unusableOutput("its output starts with '{' but is not JSON")
            }
            guard let token = value["token"]?.string, !token.isEmpty else {
                return .unusableOutput("its JSON has no string member 'token'")
            }
            if let expiresIn = value["expiresIn"], expiresIn.double == nil {
                return .unusableOutput("its JSON member 'expiresIn' is not a number")
            }
            return .token(token)
        }
        guard !trimmed.contains(where: isSpace) else {
            return .unusableOutput("it printed more than one word; print the token alone, or JSON")
        }
        return .token(String(decoding: trimmed, as: UTF8.self))
    }

    /// The `RefreshCommand=` of `group`'s `[AppGroup]` in `directory`'s `authd.conf` and
    /// `authd.conf.d/*.conf` (read in that order, in lexical order; the last one given wins); nil when none.
    ///
    /// - Throws: ``ConfigurationError`` for a file that is there but cannot be read or parsed.
    static func configured(for group: String, in directory: String) throws(ConfigurationError) -> String? {
        var paths = [directory + "/authd.conf"]
        if let listing = opendir(directory + "/authd.conf.d") {
            defer { closedir(listing) }
            var names: [String] = []
            while let entry = readdir(listing) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) {
                    String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
                }
                if name.hasSuffix(".conf") && !name.hasPrefix(".") { names.append(name) }
            }
            paths += names.sorted().map { directory + "/authd.conf.d/" + $0 }
        }
        var command: String?
        for path in paths {
            guard let text = try readText(path) else { continue }
            for section in try ConfigurationFile(parsing: text, name: path).sections
            where section.name == "AppGroup" && section.values("Name").last == group {
                command = section.values("RefreshCommand").last.flatMap { $0.isEmpty ? nil : $0 } ?? command
            }
        }
        return command
    }

    /// A configuration file's text (at most 1 MiB); nil when there is none.
    private static func readText(_ path: String) throws(ConfigurationError) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard descriptor >= 0 else {
            if errno == ENOENT { return nil }
            throw ConfigurationError(file: path, line: 0, message: "cannot open: \(errorText())")
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size <= 1 << 20 else {
            throw ConfigurationError(file: path, line: 0, message: "is not a regular file of at most 1 MiB")
        }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var filled = 0
        while filled < bytes.count {
            let count = bytes.withUnsafeMutableBytes {
                Glibc.read(descriptor, $0.baseAddress! + filled, $0.count - filled)
            }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            filled += count
        }
        return String(decoding: bytes[..<filled], as: UTF8.self)
    }

    /// The agent's open descriptors that a child would inherit (those without close-on-exec).
    private static func inheritableDescriptors() -> [Int32] {
        guard let listing = opendir("/proc/self/fd") else { return [] }
        defer { closedir(listing) }
        let own = dirfd(listing)
        var descriptors: [Int32] = []
        while let entry = readdir(listing) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let descriptor = Int32(name), descriptor != own else { continue }
            let flags = fcntl(descriptor, F_GETFD)
            if flags >= 0 && flags & FD_CLOEXEC == 0 { descriptors.append(descriptor) }
        }
        return descriptors
    }

    private static func errorText() -> String { String(cString: strerror(errno)) }
}
