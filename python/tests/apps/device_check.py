#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The Python package on a device (scripts/device-test): sets GROUP's token, read from standard input, through an
AsyncClient on the daemon the app finds by itself; hears it through its loop (token_refreshes()); gets it back and
the auth header. Prints "generation N", never the token; exits 77 when the user may not use the group (EACCES)."""
import asyncio
import errno
import sys

import exponea_auth


async def main(group: str, token: str) -> int:
    async with exponea_auth.AsyncClient(group) as auth:
        events = auth.token_refreshes()
        generation = await auth.set_token(token)
        heard = await asyncio.wait_for(events.__anext__(), 10)
        got = await auth.get_token()
        header = await auth.auth_header()
        if heard.generation != generation or got is None or got.value != token or got.generation != generation:
            print(f"heard {heard}, got {got}, set generation {generation}")
            return 1
        if header is None or header.value != "Bearer " + token:
            print(f"the auth header is not Bearer and the token: {header}")
            return 1
        print(f"generation {generation}")
        return 0


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1], sys.stdin.readline().strip())))
    except exponea_auth.Error as error:
        print(error)
        sys.exit(77 if error.errno == errno.EACCES else 1)
