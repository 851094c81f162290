// SPDX-License-Identifier: Apache-2.0
/// The one version of exponea-authd, its client library and authctl: what `--version` prints and GetInfo
/// reports. The newest entry of `debian/changelog` must name the same (a test checks it).
public enum ProductVersion {
    /// The version, `MAJOR.MINOR.PATCH`.
    public static let current = "0.1.0"
}
