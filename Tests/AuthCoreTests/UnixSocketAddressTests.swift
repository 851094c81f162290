// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthTestKit
import Foundation
import Testing

@Suite("The one sockaddr_un builder")
struct UnixSocketAddressTests {
    @Test func aPathIsBoundAndConnectedToAsItIs() throws {
        let directory = try TemporaryDirectory(prefix: "authd-sun")
        defer { directory.remove() }
        let path = directory.appending("s")
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(listener) }
        #expect(UnixSocketAddress.withAddress(path) { bind(listener, $0, $1) } == 0)
        #expect(listen(listener, 1) == 0)
        let client = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(client) }
        #expect(UnixSocketAddress.withAddress(path) { connect(client, $0, $1) } == 0)
    }

    /// The old builders cut a long path at 107 bytes and so addressed another file.
    @Test func aPathThatDoesNotFitIsRefusedNotTruncated() {
        let long = "/tmp/" + String(repeating: "x", count: UnixSocketAddress.maximumPathLength)
        var called = false
        let result = UnixSocketAddress.withAddress(long) { _, _ in
            called = true
            return 0
        }
        #expect(result == -1 && errno == ENAMETOOLONG && !called)
        #expect(UnixSocketAddress.maximumPathLength == 107)
        #expect(UnixSocketAddress.withAddress("/tmp/a\0b") { _, _ in 0 } == -1)
    }
}
