// SPDX-License-Identifier: Apache-2.0
import Foundation

/// The Python the interoperability tests run.
public enum Python {
    /// The interpreter of the virtual environment that `scripts/install-deps` makes in `.build/venv`, which has
    /// the reference Varlink implementation (`import varlink`, `python3 -m varlink.cli`); the system's Python is
    /// left as it is.
    public static var varlink: String {
        URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()  // Tests/AuthTestKit
            .deletingLastPathComponent()  // Tests
            .deletingLastPathComponent()  // the package
            .appendingPathComponent(".build/venv/bin/python3").path
    }
}
