// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation

/// A Varlink connection to the daemon under test that speaks in JSON objects, for tests that look at
/// replies field by field.
struct VarlinkTestClient {
    let connection: UnixClient

    init(path: String) throws { connection = try UnixClient(path: path) }

    func close() { connection.close() }

    /// Calls `method` of `com.exponea.Auth` and returns the reply's parameters, or throws the Varlink error.
    @discardableResult
    func call(_ method: String, _ parameters: [String: Any] = [:]) throws -> [String: Any] {
        try send(method, parameters)
        return try reply()
    }

    /// Sends a call without waiting for its reply.
    func send(_ method: String, _ parameters: [String: Any] = [:], more: Bool = false) throws {
        var message: [String: Any] = ["method": "com.exponea.Auth." + method, "parameters": parameters]
        if more { message["more"] = true }
        let data = try JSONSerialization.data(withJSONObject: message, options: [.sortedKeys])
        try connection.send(String(decoding: data, as: UTF8.self))
    }

    /// The next reply's parameters, or the Varlink error it carries.
    func reply() throws -> [String: Any] {
        let text = try connection.receiveReply()
        let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] ?? [:]
        if let error = object["error"] as? String {
            let parameters = object["parameters"] as? [String: Any] ?? [:]
            throw Failure(name: error, parameters: parameters.compactMapValues { $0 as? String })
        }
        return object["parameters"] as? [String: Any] ?? [:]
    }

    /// Subscribes to `group`'s events; read them with ``event()``.
    func subscribe(_ group: String) throws { try send("Subscribe", ["group": group], more: true) }

    /// The next streamed event of a subscription.
    func event() throws -> [String: Any] { try reply()["event"] as? [String: Any] ?? [:] }

    /// A Varlink error reply, with its string parameters.
    struct Failure: Error, CustomStringConvertible {
        let name: String
        let parameters: [String: String]
        var description: String { "\(name) \(parameters)" }
    }
}
