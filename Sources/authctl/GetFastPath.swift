// SPDX-License-Identifier: Apache-2.0
import AuthCore

/// The command line of `authctl get GROUP`, the command scripts run most, read without ArgumentParser.
///
/// ArgumentParser finds a command's options by reflection (`Mirror`, and `String(describing:)` of each command
/// type) and decodes them with `Decodable`: each of those dynamic casts makes the Swift runtime scan every protocol
/// conformance in the binary, a few milliseconds in all, more than `get` itself takes. This reader takes only
/// what `get` is run with in scripts: one valid group name and `--header`, `--json` and `--socket PATH` (or
/// `--socket=PATH`), each at most once, in any order. Anything else (`--wait`, `--help`, a second group, an
/// unknown option, a name that is not a group's) gets nil, and ArgumentParser reads the command line as before,
/// with its messages and exit statuses.
struct GetFastPath: Equatable {
    var group: String
    var header = false
    var json = false
    var socket: String?

    init?(_ arguments: [String]) {
        guard arguments.first == "get" else { return nil }
        var group: String?
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
            case "--header": header = true
            case "--json": json = true
            case "--socket" where argument == "--socket":
                guard index < arguments.count, !arguments[index].hasPrefix("-") else { return nil }
                socket = arguments[index]
                index += 1
            case "--socket": socket = String(argument.dropFirst("--socket=".count))
            case _ where option.hasPrefix("-"): return nil
            default:
                guard group == nil else { return nil }
                group = argument
            }
        }
        guard let group, socket?.isEmpty != true, (try? AppGroup(group)) != nil else { return nil }
        self.group = group
    }
}
