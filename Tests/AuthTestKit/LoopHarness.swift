// SPDX-License-Identifier: Apache-2.0
// TestLoop, for every test that imports the kit.
@_exported import LoopHarness
