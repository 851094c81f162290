// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthCore
import Crypto

#if canImport(Glibc)
    import Glibc
#endif

extension AuthCtl {
    struct Mint: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "mint",
            abstract: "Print a signed stream JWT, for development, tests and trusted devices.",
            usage: "authctl mint --secret-file <file> [--kid <kid>] [--id <key=value> ...]\n"
                + "             [--ttl <seconds>] [--alg <alg>]",
            discussion: """
                Signs header.payload with HMAC keyed with the bytes of --secret-file, exactly as they \
                are (a trailing newline is part of the key). The header has alg, typ JWT and kid when \
                given; the payload has exp (now + --ttl), iat (now) and ids (the --id pairs).

                The secret file must belong to this user and be readable by nobody else (mode 0600 or \
                0400), as ssh asks of a private key; any other file is refused.

                Production tokens come from the integrator's backend, which holds the stream's secret: \
                use mint only where that secret may be.

                  authctl mint --secret-file stream.key --id registered=jane | authctl set shop
                """
        )

        /// The HMAC algorithms of R1.
        enum Algorithm: String, ExpressibleByArgument, CaseIterable {
            case hs256 = "HS256"
            case hs384 = "HS384"
            case hs512 = "HS512"
        }

        /// The longest lifetime R3 allows: 90 days.
        static let maximumTTL = 90 * 24 * 3600
        /// The largest secret file read.
        static let maximumSecretSize = 64 * 1024

        @Option(help: ArgumentHelp("The file whose bytes are the HMAC secret.", valueName: "file"))
        var secretFile: String

        @Option(help: ArgumentHelp("The key id put in the header (kid).", valueName: "kid"))
        var kid: String?

        @Option(
            name: .customLong("id"),
            help: ArgumentHelp("A customer id of the ids claim; repeat for several.", valueName: "key=value")
        )
        var ids: [String] = []

        @Option(help: ArgumentHelp("Seconds from now until exp (1 to 7776000).", valueName: "seconds"))
        var ttl: Int = 3600

        @Option(help: ArgumentHelp("The signature algorithm: HS256, HS384 or HS512.", valueName: "alg"))
        var alg: Algorithm = .hs512

        func validate() throws {
            guard (1...Self.maximumTTL).contains(ttl) else {
                throw ValidationError("--ttl needs a number of seconds from 1 to \(Self.maximumTTL), not \(ttl)")
            }
            if let kid, kid.isEmpty || kid.utf8.count > 256 {
                throw ValidationError("--kid needs 1 to 256 bytes")
            }
            _ = try customerIds()
        }

        /// The `--id` pairs as a map; a pair without `=`, with an empty key, or a key given twice is refused.
        func customerIds() throws(ValidationError) -> [(key: String, value: String)] {
            var pairs: [(key: String, value: String)] = []
            for pair in ids {
                guard let equals = pair.firstIndex(of: "="), equals != pair.startIndex else {
                    throw ValidationError("--id needs KEY=VALUE, not '\(pair)'")
                }
                let key = String(pair[..<equals])
                guard !pairs.contains(where: { $0.key == key }) else {
                    throw ValidationError("--id gives the key '\(key)' twice")
                }
                pairs.append((key, String(pair[pair.index(after: equals)...])))
            }
            return pairs.sorted { $0.key < $1.key }
        }

        func run() throws {
            let secret: [UInt8]
            do {
                secret = try Self.readSecret(secretFile)
            } catch {
                printError("authctl: \(error.message)")
                throw AuthCtlExit.failure
            }
            let now = Int(time(nil))
            var header = #"{"alg":"\#(alg.rawValue)","typ":"JWT""#
            if let kid { header += #","kid":\#(jsonString(kid))"# }
            header += "}"
            let idsJSON = try customerIds().map { "\(jsonString($0.key)):\(jsonString($0.value))" }
            let payload = #"{"exp":\#(now + ttl),"iat":\#(now),"ids":{\#(idsJSON.joined(separator: ","))}}"#
            let input = Base64URL.encode(header.utf8) + "." + Base64URL.encode(payload.utf8)
            printLine(input + "." + Base64URL.encode(Self.sign(Array(input.utf8), secret: secret, alg: alg)))
        }

        static func sign(_ input: [UInt8], secret: [UInt8], alg: Algorithm) -> [UInt8] {
            let key = SymmetricKey(data: secret)
            switch alg {
            case .hs256: return Array(HMAC<SHA256>.authenticationCode(for: input, using: key))
            case .hs384: return Array(HMAC<SHA384>.authenticationCode(for: input, using: key))
            case .hs512: return Array(HMAC<SHA512>.authenticationCode(for: input, using: key))
            }
        }

        /// Why the secret file cannot be used.
        struct SecretFileError: Error {
            var message: String
        }

        /// The bytes of the secret file, once it is shown to be this user's regular file that nobody else
        /// may read.
        static func readSecret(_ path: String) throws(SecretFileError) -> [UInt8] {
            let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
            guard descriptor >= 0 else {
                throw SecretFileError(message: "cannot open \(path): \(String(cString: strerror(errno)))")
            }
            defer { close(descriptor) }
            var info = stat()
            guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
                throw SecretFileError(message: "\(path) is not a regular file")
            }
            guard info.st_uid == getuid() else {
                throw SecretFileError(message: "\(path) belongs to uid \(info.st_uid), not to this user")
            }
            guard info.st_mode & 0o077 == 0 else {
                let mode = String(info.st_mode & 0o777, radix: 8)
                throw SecretFileError(
                    message: "\(path) may be read by others (mode 0\(mode)); run 'chmod 600 \(path)' first")
            }
            guard info.st_size > 0, info.st_size <= maximumSecretSize else {
                throw SecretFileError(message: "\(path) must hold 1 to \(maximumSecretSize) bytes")
            }
            var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
            var filled = 0
            while filled < bytes.count {
                let count = bytes.withUnsafeMutableBytes {
                    read(descriptor, $0.baseAddress! + filled, $0.count - filled)
                }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else {
                    throw SecretFileError(message: "cannot read \(path): \(String(cString: strerror(errno)))")
                }
                filled += count
            }
            return bytes
        }
    }
}
