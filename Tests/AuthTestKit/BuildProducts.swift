// SPDX-License-Identifier: Apache-2.0
import Foundation

/// Where the package's executables are, next to the running test bundle.
public enum BuildProducts {
    /// The build folder the tests run from (`.build/<triple>/debug`).
    public static var directory: String {
        let exe =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return (exe as NSString).deletingLastPathComponent
    }

    /// The path of the built executable `name`; fails the caller if it is missing.
    public static func executable(_ name: String) throws -> String {
        let path = directory + "/" + name
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw MissingProduct(name: name, path: path)
        }
        return path
    }

    public struct MissingProduct: Error, CustomStringConvertible {
        public var name: String
        public var path: String
        public var description: String { "\(name) is not built at \(path); run 'swift build' first" }
    }
}
