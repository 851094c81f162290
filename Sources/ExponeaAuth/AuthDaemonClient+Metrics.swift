// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol

extension AuthDaemonClient {
    /// Every figure the daemon lets this user see (`io.systemd.Metrics.List`), in the daemon's order: the
    /// per-group ones of the groups this user may use, and the daemon's own.
    nonisolated(nonsending) public func metrics() async throws(AuthClientError) -> [MetricsInterface.Metric] {
        try await streamedOffPool(MetricsInterface.list) { parameters throws(AuthClientError) in
            try Self.metric(parameters)
        }
    }

    /// The families the daemon lists, with their descriptions and types (`io.systemd.Metrics.Describe`).
    nonisolated(nonsending) public func metricFamilies() async throws(AuthClientError) -> [MetricsInterface.Family] {
        try await streamedOffPool(MetricsInterface.describe) { parameters throws(AuthClientError) in
            do {
                return try ParameterDecoder.decode(
                    MetricsInterface.Family.self, from: parameters, rejectingUnknownMembers: false)
            } catch {
                throw AuthClientError(.protocolError, "The daemon's metric family could not be read: \(error)")
            }
        }
    }

    /// Calls `method` with `more` on a connection of its own, read on a thread of its own, and reads each reply
    /// with `read`; `NoSuchMetric` is an empty list. Each reply must come within ``callTimeout``.
    private func streamedOffPool<Element: Sendable>(
        _ method: String, _ read: @escaping @Sendable ([String: JSONValue]) throws(AuthClientError) -> Element
    ) async throws(AuthClientError) -> [Element] {
        let result = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<[Element], AuthClientError>, Never>) in
            BlockingThread.start { [self] in
                continuation.resume(returning: Result { () throws(AuthClientError) in try streamed(method, read) })
            }
        }
        return try result.get()
    }

    private func streamed<Element>(
        _ method: String, _ read: ([String: JSONValue]) throws(AuthClientError) -> Element
    ) throws(AuthClientError) -> [Element] {
        let connection = try VarlinkConnection.connect(to: socketPath, trusting: trusted, timeout: callTimeout)
        defer { connection.close() }
        let replies = try connection.stream(Self.encodeGroupCall(method, group: nil, more: true))
        var elements: [Element] = []
        while true {
            guard let reply = try replies.next(until: Deadline.now.adding(callTimeout)) else {
                throw AuthClientError.timedOut(socket: socketPath, after: callTimeout)
            }
            let parameters: [String: JSONValue]
            do {
                parameters = try Self.replyParameters(reply)
            } catch  where error.varlinkError == MetricsInterface.name + ".NoSuchMetric" {
                return elements
            }
            elements.append(try read(parameters))
            guard Self.continues(reply) else { return elements }
        }
    }

    /// One `List` reply's figure.
    private static func metric(_ parameters: [String: JSONValue]) throws(AuthClientError) -> MetricsInterface.Metric {
        guard case .string(let name)? = parameters["name"] else { throw unreadableMetric("name") }
        let value: MetricsInterface.Value
        switch parameters["value"] {
        case .string(let text)?: value = .string(text)
        case .number(let literal)?:
            if let unsigned = UInt64(literal) {
                value = .unsigned(unsigned)
            } else if let signed = Int64(literal) {
                value = .signed(signed)
            } else if let double = Double(literal) {
                value = .double(double)
            } else {
                throw unreadableMetric("value")
            }
        default: throw unreadableMetric("value")
        }
        var object: String?
        switch parameters["object"] {
        case .string(let text)?: object = text
        case nil, .null?: object = nil
        default: throw unreadableMetric("object")
        }
        var fields: [String: String] = [:]
        switch parameters["fields"] {
        case .object(let members)?:
            for (key, member) in members {
                switch member {
                case .string(let text): fields[key] = text
                case .number(let literal): fields[key] = literal
                case .bool(let flag): fields[key] = "\(flag)"
                default: throw unreadableMetric("fields")
                }
            }
        case nil, .null?: break
        default: throw unreadableMetric("fields")
        }
        return MetricsInterface.Metric(name: name, object: object, fields: fields, value: value)
    }

    private static func unreadableMetric(_ member: String) -> AuthClientError {
        AuthClientError(.protocolError, "The daemon's metric could not be read (member '\(member)')")
    }
}
