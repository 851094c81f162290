// SPDX-License-Identifier: Apache-2.0
// One binary for the daemon and authctl, as busybox and systemd do: the Swift runtime and FoundationEssentials are
// most of each program, so two binaries would carry them twice. /usr/bin/authctl is a symlink to
// /usr/bin/exponea-authd; the name the program is run by chooses the role: `authctl` is authctl, any other name
// (exponea-authd, or a renamed copy) is the daemon. Synchronous on purpose: see ExponeaAuthdProgram.main(_:).
import AuthCtlCommands
import AuthDaemonCommand

let arguments = Array(CommandLine.arguments.dropFirst())
// The last part of the name, compared without splitting it: an array of substrings costs a start metadata made
// from its mangled name.
let name = CommandLine.arguments.first ?? ""
if name == "authctl" || name.hasSuffix("/authctl") {
    AuthCtlProgram.main(arguments)
} else {
    ExponeaAuthdProgram.main(arguments)
}
