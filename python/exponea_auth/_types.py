# SPDX-License-Identifier: Apache-2.0
"""The values the clients return and the error they raise."""
from __future__ import annotations

import enum
import errno as _errno


class Error(OSError):
    """A call of libexponea-auth failed.

    ``errno`` is the library's code as a positive errno value (``errno.EINVAL``, ``errno.EBADMSG``,
    ``errno.EACCES``, ...; the list is in exponea_auth_strerror(3)), ``strerror`` its message, and ``function``
    the C function that returned it. No message contains a token.
    """

    function: str | None

    def __init__(self, code: int, message: str | None = None, function: str | None = None) -> None:
        code = abs(code)
        if message is None:
            from ._lib import strerror

            message = strerror(code)
        super().__init__(code, message)
        self.function = function

    def __str__(self) -> str:
        name = _errno.errorcode.get(self.errno or 0, str(self.errno))
        where = f"{self.function}: " if self.function else ""
        return f"{where}{self.strerror} ({name})"


class State(enum.IntEnum):
    """Where a group's token stands before a request (exponea_auth_preflight(3))."""

    NOT_PROVIDED = 0
    EXPIRED = 1
    EXPIRED_SOON = 2
    VALID = 3


class Token:
    """A token, or an Authorization header's value, with the group's generation it belongs to.

    ``value`` is the string to send. ``str()`` and ``repr()`` never show it, so that a log line or a traceback
    that prints the object does not leak it.
    """

    __slots__ = ("value", "generation")

    def __init__(self, value: str, generation: int) -> None:
        self.value = value
        self.generation = generation

    def __repr__(self) -> str:
        return f"Token(generation={self.generation}, value=<{len(self.value)} characters, hidden>)"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Token) and other.value == self.value and other.generation == self.generation

    def __hash__(self) -> int:
        return hash((self.value, self.generation))


class Preflight:
    """The check before a stream request: the token to send (``None``: send no Authorization), its state and
    the group's generation."""

    __slots__ = ("token", "state", "generation")

    def __init__(self, token: Token | None, state: State, generation: int) -> None:
        self.token = token
        self.state = state
        self.generation = generation

    def __repr__(self) -> str:
        return f"Preflight(state={self.state.name}, generation={self.generation}, token={self.token!r})"


class Refresh:
    """The group's request for a new token, as a refresh handler gets it.

    ``reason`` is why ("notProvided", "invalid", "expired", "expiredSoon", "insufficient", or one a later daemon
    adds), ``generation`` the generation being refreshed, ``lease`` how long this app's claim lasts in seconds
    (0 when the handler runs without a claim), ``customer_ids`` the customer to fetch a token for.
    """

    __slots__ = ("reason", "generation", "lease", "customer_ids")

    def __init__(self, reason: str, generation: int, lease: float, customer_ids: dict[str, str]) -> None:
        self.reason = reason
        self.generation = generation
        self.lease = lease
        self.customer_ids = customer_ids

    def __repr__(self) -> str:
        return f"Refresh(reason={self.reason!r}, generation={self.generation}, lease={self.lease})"


class Unconfirmed(enum.IntEnum):
    """Why an app did not confirm its flush before a clear."""

    TIMED_OUT = 1
    DROPPED = 2


class ClearResult:
    """What an anonymize or stop-integration call reports: how many apps were asked to flush, and the
    ``(pid, reason)`` of those that did not confirm within the daemon's bound. The group is cleared either way."""

    __slots__ = ("asked", "unconfirmed")

    def __init__(self, asked: int, unconfirmed: list[tuple[int, Unconfirmed]]) -> None:
        self.asked = asked
        self.unconfirmed = unconfirmed

    def __repr__(self) -> str:
        return f"ClearResult(asked={self.asked}, unconfirmed={self.unconfirmed})"


class TokenRefreshed:
    """A token was set for the group, by any app: ``generation`` is its generation."""

    __slots__ = ("generation",)

    def __init__(self, generation: int) -> None:
        self.generation = generation

    def __repr__(self) -> str:
        return f"TokenRefreshed(generation={self.generation})"


class _Pending:
    __slots__ = ()

    def __repr__(self) -> str:
        return "exponea_auth.PENDING"


PENDING = _Pending()
"""Returned by a synchronous refresh or flush handler whose work goes on: end it later with ``set_token()`` or
``release_refresh()`` (a refresh), or ``flush_done()`` (a flush)."""
