// SPDX-License-Identifier: Apache-2.0
import AuthProtocol

/// The calls of `com.exponea.Auth` answered, by method and result: counted by ``AuthCallDispatcher`` on every
/// route (GetToken answered at once included), read by the metrics through it. Its state is the dispatcher's
/// actor's, so it needs no lock.
final class CallCounters {
    /// A call's result: `ok`, or the error it was answered with.
    enum Result: String, CaseIterable, Sendable {
        case ok
        case methodNotFound = "MethodNotFound"
        case invalidParameter = "InvalidParameter"
        case expectedMore = "ExpectedMore"
        case malformedToken = "MalformedToken"
        case invalidGroupName = "InvalidGroupName"
        case permissionDenied = "PermissionDenied"
        case storeFailure = "StoreFailure"
        case tooManySubscribers = "TooManySubscribers"
        case subscriptionDropped = "SubscriptionDropped"
        case other = "Other"

        init(_ error: VarlinkError) {
            switch error {
            case .methodNotFound: self = .methodNotFound
            case .invalidParameter: self = .invalidParameter
            case .expectedMore: self = .expectedMore
            case .malformedToken: self = .malformedToken
            case .invalidGroupName: self = .invalidGroupName
            case .permissionDenied: self = .permissionDenied
            case .storeFailure: self = .storeFailure
            case .tooManySubscribers: self = .tooManySubscribers
            case .subscriptionDropped: self = .subscriptionDropped
            default: self = .other
            }
        }
    }

    /// A method of the interface, or none of them.
    typealias Method = AuthInterface.Method?

    private static let interfaceMethods = AuthInterface.Method.allCases
    private static let methods: [Method] = interfaceMethods.map { $0 } + [nil]
    private static let results = Result.allCases
    /// One count per method and result, in a flat array: a call costs an increment.
    private var counts = [UInt64](repeating: 0, count: methods.count * results.count)

    /// Counts one call of `method` (nil: a method the interface does not have) answered with `result`.
    func count(_ method: Method, _ result: Result) {
        counts[Self.index(method, result)] += 1
    }

    /// Every method and result counted at least once, with its count.
    func nonZero() -> [(method: Method, result: Result, count: UInt64)] {
        var rows: [(Method, Result, UInt64)] = []
        for (m, method) in Self.methods.enumerated() {
            for (r, result) in Self.results.enumerated() where counts[m * Self.results.count + r] > 0 {
                rows.append((method, result, counts[m * Self.results.count + r]))
            }
        }
        return rows
    }

    private static func index(_ method: Method, _ result: Result) -> Int {
        let m = method.map { interfaceMethods.firstIndex(of: $0)! } ?? interfaceMethods.count
        return m * results.count + results.firstIndex(of: result)!
    }
}
