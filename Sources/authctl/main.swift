// SPDX-License-Identifier: Apache-2.0
// The `authctl` of a development build (`swift run authctl`); installed, authctl is the multi-call exponea-authd.
import AuthCtlCommands

AuthCtlProgram.main(Array(CommandLine.arguments.dropFirst()))
