# SPDX-License-Identifier: Apache-2.0
"""authd-bench's Python client: c-lib-client.c's calls made through the exponea_auth package, with the same output
(Sources/authd-bench/Resources/bench-client.h), so that the two differ by the package alone. authd-bench runs it
with the package of this tree and the library it built.

Usage: py-lib-client.py LIBRARY SOCKET METHOD GROUP COUNT
  LIBRARY  the libexponea-auth.so.1 to load; METHOD GetToken (Client.get_token) or Preflight (Client.preflight);
  COUNT    1: one call and exit; more: COUNT calls timed, then "p50_ns cpu_ns_per_call switches_per_call".
"""
import os
import resource
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def main() -> int:
    if len(sys.argv) != 6:
        print(__doc__, file=sys.stderr)
        return 2
    library, socket, method, group, count = sys.argv[1:6]
    os.environ["EXPONEA_AUTH_LIBRARY"] = library
    import exponea_auth

    count = int(count)
    auth = exponea_auth.Client(group, socket=socket)
    call = auth.preflight if method == "Preflight" else auth.get_token
    if call() is None:  # the first call connects, as the C clients' does
        return 1
    if count == 1:
        return 0
    now = time.perf_counter_ns
    samples = [0] * count
    before = resource.getrusage(resource.RUSAGE_SELF)
    for i in range(count):
        start = now()
        call()
        samples[i] = now() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    samples.sort()
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1e9
    switches = after.ru_nvcsw - before.ru_nvcsw + after.ru_nivcsw - before.ru_nivcsw
    print(f"{samples[(count + 1) // 2 - 1]} {cpu / count:.0f} {switches / count:.3f}")
    auth.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
