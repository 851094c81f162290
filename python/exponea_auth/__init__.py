# SPDX-License-Identifier: Apache-2.0
"""exponea_auth: an app's view of its app group's Bloomreach stream JWT, held by exponea-authd and shared with
every app of the group; the Exponea SDK's token API for Python, over libexponea-auth.so.1 through ctypes.

- :class:`Client`: the synchronous client (a context manager).
- :class:`AsyncClient`: the asyncio client; the group's events come through the running loop, with no thread.
- :class:`Error`: an ``OSError`` with the library's errno and message.

The library is ``$EXPONEA_AUTH_LIBRARY`` when set, else ``libexponea-auth.so.1`` as the dynamic linker finds it.
Nothing of this package prints or logs a token. See exponea_auth(3) and libexponea-auth(3).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ._client import Client
from ._types import (
    PENDING,
    ClearResult,
    Error,
    Preflight,
    Refresh,
    State,
    Token,
    TokenRefreshed,
    Unconfirmed,
)

if TYPE_CHECKING:
    from ._async import AsyncClient

__version__ = "1.1.0"
__all__ = [
    "AsyncClient",
    "ClearResult",
    "Client",
    "Error",
    "PENDING",
    "Preflight",
    "Refresh",
    "State",
    "Token",
    "TokenRefreshed",
    "Unconfirmed",
]


def __getattr__(name: str) -> object:
    # asyncio is imported with the asyncio client only: a synchronous app does not pay for it.
    if name == "AsyncClient":
        from ._async import AsyncClient

        return AsyncClient
    raise AttributeError(f"module 'exponea_auth' has no attribute {name!r}")
