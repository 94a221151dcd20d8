"""Exceptions mirroring the library's PARLEY_E_* status codes."""
from __future__ import annotations

import enum
from typing import Dict, Type


class Status(enum.IntEnum):
    """The status codes of the C interface (include/parley/common.h): PARLEY_OK and PARLEY_E_*."""

    OK = 0
    INVALID_ARGUMENT = -1
    INVALID_HANDLE = -2
    INVALID_JSON = -3
    NO_MEMORY = -4
    INVALID_STATE = -5
    NETWORK = -6
    TIMEOUT = -7
    CANCELLED = -8
    SERVER = -9
    UNAUTHORIZED = -10
    FORBIDDEN = -11
    NOT_FOUND = -12
    CACHE = -13
    PROTOCOL = -14
    TLS = -15
    IO = -16
    LIMIT_EXCEEDED = -17
    CACHE_KEY = -18
    INTERNAL = -99


OK = Status.OK.value


class ParleyError(Exception):
    """A failure reported by libparley: `code` (negative PARLEY_E_*), `name`, `message`,
    and for server answers `http_status` and `server_code`."""

    code: int = Status.INTERNAL.value
    name: str = "internal"

    def __init__(self, message: str, code: int | None = None, http_status: int = 0, server_code: int = 0) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.http_status = http_status
        self.server_code = server_code

    @property
    def retryable(self) -> bool:
        """Whether the same call, tried again later, may succeed: the library's one rule
        (``parley_error_is_retryable``: network failures, timeouts, the server's 5xx, 408, 429)."""
        import ctypes

        from . import _native  # imported here: _native imports this module first

        error = _native.CError(self.code, None, self.http_status, self.server_code)
        return bool(_native.lib.parley_error_is_retryable(ctypes.byref(error)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, message={self.message!r}, http_status={self.http_status}, server_code={self.server_code})"


class InvalidArgument(ParleyError):
    """A parameter is missing, out of range or malformed."""

    code = Status.INVALID_ARGUMENT.value
    name = "InvalidArgument"


class InvalidHandle(ParleyError):
    """The handle is closed, disposed or of another kind."""

    code = Status.INVALID_HANDLE.value
    name = "InvalidHandle"


class InvalidJSON(InvalidArgument):
    """A JSON argument does not parse."""

    code = Status.INVALID_JSON.value
    name = "InvalidJSON"


class NoMemory(ParleyError):
    """The library ran out of memory."""

    code = Status.NO_MEMORY.value
    name = "NoMemory"


class InvalidState(ParleyError):
    """The call does not fit the current state (closed, not connected, busy)."""

    code = Status.INVALID_STATE.value
    name = "InvalidState"


class NetworkError(ParleyError):
    """The server could not be reached."""

    code = Status.NETWORK.value
    name = "NetworkError"


class Timeout(NetworkError):
    """The server did not answer in time."""

    code = Status.TIMEOUT.value
    name = "Timeout"


class Cancelled(ParleyError):
    """Cancelled, or the client or collection was closed."""

    code = Status.CANCELLED.value
    name = "Cancelled"


class ServerError(ParleyError):
    """The server answered with an error (see http_status, server_code)."""

    code = Status.SERVER.value
    name = "ServerError"


class Unauthorized(ServerError):
    """HTTP 401: missing, wrong or expired credentials."""

    code = Status.UNAUTHORIZED.value
    name = "Unauthorized"


class Forbidden(ServerError):
    """HTTP 403: not allowed for this user."""

    code = Status.FORBIDDEN.value
    name = "Forbidden"


class NotFound(ServerError):
    """HTTP 404."""

    code = Status.NOT_FOUND.value
    name = "NotFound"


class CacheError(ParleyError):
    """The local cache (SQLite) failed."""

    code = Status.CACHE.value
    name = "CacheError"


class ProtocolError(ParleyError):
    """The server's answer broke the protocol."""

    code = Status.PROTOCOL.value
    name = "ProtocolError"


class TLSError(NetworkError):
    """TLS handshake or certificate verification failed."""

    code = Status.TLS.value
    name = "TLSError"


class IOFailure(ParleyError):
    """A local file could not be read or written."""

    code = Status.IO.value
    name = "IOFailure"


class LimitExceeded(ParleyError):
    """A size, depth or count limit was exceeded."""

    code = Status.LIMIT_EXCEEDED.value
    name = "LimitExceeded"


class CacheKeyError(ParleyError):
    """The cache file is encrypted and the key given does not open it, or none was given.
    The file is left as it was."""

    code = Status.CACHE_KEY.value
    name = "CacheKeyError"


class InternalError(ParleyError):
    """A bug in the library: please report it."""

    code = Status.INTERNAL.value
    name = "InternalError"


_BY_CODE: Dict[int, Type[ParleyError]] = {
    kind.code: kind
    for kind in (
        InvalidArgument, InvalidHandle, InvalidJSON, NoMemory, InvalidState, NetworkError, Timeout, Cancelled,
        ServerError, Unauthorized, Forbidden, NotFound, CacheError, ProtocolError, TLSError, IOFailure,
        LimitExceeded, CacheKeyError, InternalError,
    )
}


def error_for(code: int, message: str, http_status: int = 0, server_code: int = 0) -> ParleyError:
    """The exception for a status code (unknown codes become a plain ParleyError)."""
    kind = _BY_CODE.get(code)
    if kind is None:
        return ParleyError(message, code=code, http_status=http_status, server_code=server_code)
    return kind(message, http_status=http_status, server_code=server_code)
