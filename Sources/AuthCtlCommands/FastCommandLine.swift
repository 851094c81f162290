// SPDX-License-Identifier: Apache-2.0
import AuthCore

/// The command lines scripts run most, `authctl get GROUP` and `authctl status`, read without ArgumentParser.
///
/// ArgumentParser finds a command's options by reflection (`Mirror`, and `String(describing:)` of each command
/// type) and decodes them with `Decodable`: each of those dynamic casts makes the Swift runtime scan every protocol
/// conformance in the binary, a few milliseconds in all, more than `get` itself takes. This reader takes only
/// what these two commands are run with in scripts: for `get`, one valid group name and `--header`; for both,
/// `--json` and `--socket PATH` (or `--socket=PATH`); each option at most once, in any order. Anything else
/// (`--wait`, `--help`, a second group, an unknown or repeated option, a name that is not a group's) gets nil,
/// and ArgumentParser reads the command line as before, with its messages and exit statuses.
struct FastCommandLine: Equatable {
    /// The commands read here.
    enum Command: String {
        case get, status
    }

    var command: Command
    /// `get`'s group.
    var group: String?
    var header = false
    var json = false
    var socket: String?

    init?(_ arguments: [String]) {
        guard let first = arguments.first, let command = Command(rawValue: first) else { return nil }
        self.command = command
        var seen: [String] = []
        var index = 1
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            let option = argument.hasPrefix("--socket=") ? "--socket" : argument
            if option.hasPrefix("-") {
                guard !seen.contains(option) else { return nil }
                seen.append(option)
            }
            switch option {
            case "--header" where command == .get: header = true
            case "--json": json = true
            case "--socket" where argument == "--socket":
                guard index < arguments.count, !arguments[index].hasPrefix("-") else { return nil }
                socket = arguments[index]
                index += 1
            case "--socket": socket = String(argument.dropFirst("--socket=".count))
            case _ where option.hasPrefix("-"): return nil
            default:
                guard command == .get, group == nil else { return nil }
                group = argument
            }
        }
        guard socket?.isEmpty != true else { return nil }
        if command == .get {
            guard let group, (try? AppGroup(group)) != nil else { return nil }
        }
    }
}
