// SPDX-License-Identifier: Apache-2.0
import CSystemd

#if canImport(Glibc)
    import Glibc
#endif

/// A socket the service manager opened and passed to the service (socket activation, `sd_listen_fds(3)`).
public struct ListenedSocket: Hashable, Sendable {
    /// The file descriptor, from `SD_LISTEN_FDS_START` (3) on.
    public var fileDescriptor: Int32
    /// The name from the socket unit's `FileDescriptorName=` (`unknown` when it set none).
    public var name: String

    /// Whether this is a listening Unix stream socket, the kind the daemon serves on.
    public var isListeningUnixStream: Bool {
        sd_is_socket_unix(fileDescriptor, Int32(SOCK_STREAM.rawValue), 1, nil, 0) > 0
    }

    /// Takes the sockets passed by the service manager, and unsets `$LISTEN_FDS`, `$LISTEN_PID` and
    /// `$LISTEN_FDNAMES` so child processes do not take them too. Each fd gets `FD_CLOEXEC`.
    ///
    /// - Returns: The sockets, empty when the service was not socket-activated.
    /// - Throws: ``SystemdError`` when the environment names fds that are not there.
    public static func takeAll() throws(SystemdError) -> [ListenedSocket] {
        var names: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = nil
        let count = sd_listen_fds_with_names(1, &names)
        guard count >= 0 else {
            throw SystemdError(
                code: .listenFDs,
                function: "sd_listen_fds_with_names",
                returned: count,
                context: "cannot take the sockets passed by systemd"
            )
        }
        defer {
            if let names {
                for index in 0..<Int(count) { free(names[index]) }
                free(names)
            }
        }
        return (0..<count).map { index in
            let name = names?[Int(index)].map { String(cString: $0) } ?? "unknown"
            return ListenedSocket(fileDescriptor: SD_LISTEN_FDS_START + index, name: name)
        }
    }
}
