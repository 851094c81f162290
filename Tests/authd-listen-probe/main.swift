// SPDX-License-Identifier: Apache-2.0
// A test probe for socket activation: takes the sockets systemd (or systemd-socket-activate) passed, prints one
// line per socket, then what remains of the LISTEN_* environment, and exits.
import Foundation
import Systemd

do {
    for socket in try ListenedSocket.takeAll() {
        print("socket fd=\(socket.fileDescriptor) name=\(socket.name) unixStream=\(socket.isListeningUnixStream)")
    }
    let left = ProcessInfo.processInfo.environment.keys.filter { $0.hasPrefix("LISTEN_") }.sorted()
    print("environment left: \(left)")
} catch {
    print("error: \(error)")
    exit(1)
}
