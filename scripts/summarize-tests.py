#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Prints one closing line, 'N passed, N failed[, N skipped]', for a `swift test` log of both XCTest and
Swift Testing (each framework prints its own summary; this adds them up), of the real-systemd test
(scripts/device-test: 'device: N passed, N failed'), and of every pytest run (scripts/python-test: pytest's closing
line, 'N failed, N passed, N skipped, N errors in S.SSs'), when the log has them."""
import re
import sys

text = re.sub(r"\x1b\[[0-9;]*m", "", open(sys.argv[1], encoding="utf-8", errors="replace").read())
lines = text.splitlines()

xctest_run = xctest_failed = xctest_skipped = 0
executed = [l for l in lines if re.search(r"Executed \d+ tests?, with ", l)]
if executed:  # the last one is the total for all suites
    m = re.search(r"Executed (\d+) tests?, with (?:(\d+) tests? skipped and )?(\d+) failures?", executed[-1])
    xctest_run, xctest_skipped, xctest_failed = int(m[1]), int(m[2] or 0), int(m[3])

# Swift Testing: count test cases of parameterized tests one by one.
passed = sum(1 for l in lines if re.match(r"^\S+ Test (?!run with )\S.*passed after ", l))
failed = sum(1 for l in lines if re.match(r"^\S+ Test (?!run with )\S.*failed after ", l))
skipped = sum(1 for l in lines if re.match(r"^\S+ Test \S.* skipped", l))
cases = 0
for l in lines:
    m = re.match(r"^\S+ Test \S.* with (\d+) test cases? passed after ", l)
    if m:
        cases += int(m[1]) - 1
passed += cases

# A test process that crashed prints no summary for the tests it did not reach: each crash counts as a failure.
crashed = sum(1 for l in lines if re.search(r"exited with unexpected signal code \d+", l))
failed += crashed

# scripts/device-test: its last summary line counts its checks.
device = [m for l in lines if (m := re.match(r"^device: (\d+) passed, (\d+) failed", l))]
device_passed, device_failed = (int(device[-1][1]), int(device[-1][2])) if device else (0, 0)

# scripts/test's packages of the C library for the devices' architectures: one check each.
packages = [m for l in lines if (m := re.match(r"^packages: (\d+) passed, (\d+) failed", l))]
packages_passed, packages_failed = (int(packages[-1][1]), int(packages[-1][2])) if packages else (0, 0)

# pytest (scripts/python-test): each run's closing line, with -q or between '=' rules; an error (a fixture's, a
# collection's) counts as a failure.
pytest = {"passed": 0, "failed": 0, "skipped": 0}
pytest_runs = 0
for l in lines:
    m = re.fullmatch(r"=*\s*((?:\d+ [a-z]+(?:, )?)+) in [0-9.]+s(?: \([0-9:]+\))?\s*=*", l.strip())
    if not m:
        continue
    pytest_runs += 1
    for count, word in re.findall(r"(\d+) ([a-z]+)", m[1]):
        key = {"error": "failed", "errors": "failed", "xpassed": "failed"}.get(word, word)
        if key in pytest:
            pytest[key] += int(count)

total_passed = (
    xctest_run - xctest_failed - xctest_skipped + passed + device_passed + packages_passed + pytest["passed"]
)
total_failed = xctest_failed + failed + device_failed + packages_failed + pytest["failed"]
total_skipped = xctest_skipped + skipped + pytest["skipped"]
print(
    f"XCTest: {xctest_run} run, {xctest_failed} failed; Swift Testing: {passed} passed, {failed} failed, {skipped} skipped"
    + (f"; device: {device_passed} passed, {device_failed} failed" if device else "")
    + (f"; packages: {packages_passed} passed, {packages_failed} failed" if packages else "")
    + (f"; pytest ({pytest_runs} runs): {pytest['passed']} passed, {pytest['failed']} failed, {pytest['skipped']} skipped"
       if pytest_runs else "")
    + (f"; {crashed} test process{'es' if crashed > 1 else ''} crashed (counted as failed)" if crashed else "")
)
print(f"{total_passed} passed, {total_failed} failed" + (f", {total_skipped} skipped" if total_skipped else ""))
