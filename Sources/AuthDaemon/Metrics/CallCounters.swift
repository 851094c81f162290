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

    private static let methods: [Method] = AuthInterface.Method.allCases.map { $0 } + [nil]
    private static let results = Result.allCases
    /// One count per method and result, in a flat array (row: the method's ordinal, column: the result's): a
    /// call costs an increment. Only its actor touches it, so the runtime's exclusivity
    /// check, which would cost more than the increment, is left to the compiler's.
    @exclusivity(unchecked) private var counts = [UInt64](repeating: 0, count: methods.count * results.count)

    /// Counts one call of `method` (nil: a method the interface does not have) answered with `result`.
    ///
    /// Never inlined: `authd-bench --only counting` finds its cost by its symbol.
    @inline(never)
    func count(_ method: Method, _ result: Result) {
        counts[Self.ordinal(method) * Self.results.count + Self.ordinal(result)] += 1
    }

    /// Every method and result counted at least once, with its count.
    func nonZero() -> [(method: Method, result: Result, count: UInt64)] {
        var rows: [(Method, Result, UInt64)] = []
        for method in Self.methods {
            for result in Self.results {
                let count = counts[Self.ordinal(method) * Self.results.count + Self.ordinal(result)]
                if count > 0 { rows.append((method, result, count)) }
            }
        }
        return rows
    }

    /// A method's row: a switch the compiler keeps exhaustive, as a search of `allCases` costs more than the
    /// count itself.
    private static func ordinal(_ method: Method) -> Int {
        switch method {
        case .setToken: 0
        case .getToken: 1
        case .preflight: 2
        case .reportAuthFailure: 3
        case .waitForToken: 4
        case .identifyCustomer: 5
        case .anonymize: 6
        case .stopIntegration: 7
        case .clearLocalCustomerData: 8
        case .subscribe: 9
        case .acknowledgeFlush: 10
        case .claimRefresh: 11
        case .releaseRefresh: 12
        case .listGroups: 13
        case .countGroups: 14
        case .whoAmI: 15
        case nil: 16
        }
    }

    /// A result's column.
    private static func ordinal(_ result: Result) -> Int {
        switch result {
        case .ok: 0
        case .methodNotFound: 1
        case .invalidParameter: 2
        case .expectedMore: 3
        case .malformedToken: 4
        case .invalidGroupName: 5
        case .permissionDenied: 6
        case .storeFailure: 7
        case .tooManySubscribers: 8
        case .subscriptionDropped: 9
        case .other: 10
        }
    }
}
