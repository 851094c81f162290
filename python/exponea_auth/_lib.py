# SPDX-License-Identifier: Apache-2.0
"""The C library's functions, declared for ctypes (libexponea-auth/include/exponea-auth.h), loaded at first use."""
from __future__ import annotations

import ctypes
import errno
import os

TOKEN_MAX = 16384
# "Bearer " + the token + the NUL: room for exponea_auth_get_auth_header() too.
BUFFER_SIZE = TOKEN_MAX + 8
NO_GENERATION = 2**64 - 1
NO_TIMEOUT = 2**64 - 1

REFRESH_NONE, REFRESH_SUPPLIED, REFRESH_PENDING = 0, 1, 2
FLUSH_DONE, FLUSH_PENDING = 0, 1

_handle = ctypes.c_void_p
_u64 = ctypes.c_uint64
_u64_out = ctypes.POINTER(ctypes.c_uint64)
_int_out = ctypes.POINTER(ctypes.c_int)
_size = ctypes.c_size_t
_int = ctypes.c_int
# Buffers are passed as c_void_p: ctypes then copies nothing on the way in.
_buffer = ctypes.c_void_p

FLUSH_HANDLER = ctypes.CFUNCTYPE(_int, _handle, ctypes.c_void_p)
CLEARED_HANDLER = ctypes.CFUNCTYPE(None, _handle, ctypes.c_char_p, ctypes.c_void_p)
REFRESH_HANDLER = ctypes.CFUNCTYPE(_int, _handle, ctypes.c_void_p, ctypes.c_void_p, _size, ctypes.c_void_p)
TOKEN_REFRESHED_HANDLER = ctypes.CFUNCTYPE(None, _handle, _u64, ctypes.c_void_p)

_SIGNATURES = {
    "exponea_auth_open": (_int, [ctypes.POINTER(_handle), ctypes.c_char_p, ctypes.c_char_p]),
    "exponea_auth_close": (_handle, [_handle]),
    "exponea_auth_set_call_timeout": (_int, [_handle, _u64]),
    "exponea_auth_set_unavailable_timeout": (_int, [_handle, _u64]),
    "exponea_auth_set_retry_wait": (_int, [_handle, _u64]),
    "exponea_auth_get_group": (ctypes.c_char_p, [_handle]),
    "exponea_auth_get_socket_path": (ctypes.c_char_p, [_handle]),
    "exponea_auth_get_token": (_int, [_handle, _buffer, _size, _u64_out]),
    "exponea_auth_preflight": (_int, [_handle, _buffer, _size, _int_out, _u64_out]),
    "exponea_auth_get_auth_header": (_int, [_handle, _buffer, _size, _u64_out]),
    "exponea_auth_wait_for_token": (_int, [_handle, _u64, _u64, _buffer, _size, _u64_out]),
    "exponea_auth_report_response": (
        _int,
        [_handle, _int, ctypes.c_char_p, _size, _u64, _buffer, _size, _u64_out],
    ),
    "exponea_auth_set_token": (_int, [_handle, ctypes.c_char_p, _u64_out]),
    "exponea_auth_identify_customer": (
        _int,
        [_handle, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char_p), _size, ctypes.c_char_p, _u64_out],
    ),
    "exponea_auth_anonymize": (
        _int,
        [_handle, ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(ctypes.c_int), _int_out, _size],
    ),
    "exponea_auth_stop_integration": (
        _int,
        [_handle, ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(ctypes.c_int), _int_out, _size],
    ),
    "exponea_auth_clear_local_customer_data": (_int, [_handle]),
    "exponea_auth_set_flush_handler": (_int, [_handle, FLUSH_HANDLER, ctypes.c_void_p]),
    "exponea_auth_flush_done": (_int, [_handle]),
    "exponea_auth_set_cleared_handler": (_int, [_handle, CLEARED_HANDLER, ctypes.c_void_p]),
    "exponea_auth_set_refresh_handler": (_int, [_handle, REFRESH_HANDLER, ctypes.c_void_p]),
    "exponea_auth_set_coalescing": (_int, [_handle, _int]),
    "exponea_auth_release_refresh": (_int, [_handle]),
    "exponea_auth_renew_refresh": (_int, [_handle]),
    "exponea_auth_refresh_get_reason": (ctypes.c_char_p, [ctypes.c_void_p]),
    "exponea_auth_refresh_get_generation": (_u64, [ctypes.c_void_p]),
    "exponea_auth_refresh_get_lease": (_u64, [ctypes.c_void_p]),
    "exponea_auth_refresh_get_customer_ids": (
        _size,
        [
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.POINTER(ctypes.c_char_p)),
            ctypes.POINTER(ctypes.POINTER(ctypes.c_char_p)),
        ],
    ),
    "exponea_auth_set_token_refreshed_handler": (_int, [_handle, TOKEN_REFRESHED_HANDLER, ctypes.c_void_p]),
    "exponea_auth_get_fd": (_int, [_handle]),
    "exponea_auth_get_events": (_int, [_handle]),
    "exponea_auth_get_timeout": (_int, [_handle, _u64_out]),
    "exponea_auth_process": (_int, [_handle]),
    "exponea_auth_wait": (_int, [_handle, _u64]),
    "exponea_auth_strerror": (ctypes.c_char_p, [_int]),
}

_library: ctypes.CDLL | None = None


def library() -> ctypes.CDLL:
    """libexponea-auth.so.1, loaded once: $EXPONEA_AUTH_LIBRARY when set, else as the dynamic linker finds it
    (LD_LIBRARY_PATH, the system's directories). ctypes.util.find_library is not used: it runs ldconfig or a
    compiler, which costs tens of milliseconds."""
    global _library
    if _library is None:
        path = os.environ.get("EXPONEA_AUTH_LIBRARY") or "libexponea-auth.so.1"
        try:
            lib = ctypes.CDLL(path)
        except OSError as error:
            from ._types import Error

            raise Error(errno.ENOENT, f"cannot load {path} (install libexponea-auth1): {error}", "dlopen") from None
        for name, (restype, argtypes) in _SIGNATURES.items():
            function = getattr(lib, name)
            function.restype, function.argtypes = restype, argtypes
        _library = lib
    return _library


def strerror(code: int) -> str:
    """The library's message for a negative code."""
    message = library().exponea_auth_strerror(code if code < 0 else -code)
    return message.decode("utf-8", "replace") if message else os.strerror(abs(code))
