"""Exceptions mirroring the library's PARLEY_E_* status codes."""
from __future__ import annotations

from typing import Dict, Type

OK = 0


class ParleyError(Exception):
    """A failure reported by libparley: `code` (negative PARLEY_E_*), `name`, `message`,
    and for server answers `http_status` and `server_code`."""

    code: int = -99
    name: str = "internal"

    def __init__(self, message: str, code: int | None = None, http_status: int = 0, server_code: int = 0) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.http_status = http_status
        self.server_code = server_code

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, message={self.message!r}, http_status={self.http_status}, server_code={self.server_code})"


class InvalidArgument(ParleyError):
    """A parameter is missing, out of range or malformed."""

    code = -1
    name = "InvalidArgument"


class InvalidHandle(ParleyError):
    """The handle is closed, disposed or of another kind."""

    code = -2
    name = "InvalidHandle"


class InvalidJSON(InvalidArgument):
    """A JSON argument does not parse."""

    code = -3
    name = "InvalidJSON"


class NoMemory(ParleyError):
    """The library ran out of memory."""

    code = -4
    name = "NoMemory"


class InvalidState(ParleyError):
    """The call does not fit the current state (closed, not connected, busy)."""

    code = -5
    name = "InvalidState"


class NetworkError(ParleyError):
    """The server could not be reached."""

    code = -6
    name = "NetworkError"


class Timeout(NetworkError):
    """The server did not answer in time."""

    code = -7
    name = "Timeout"


class Cancelled(ParleyError):
    """Cancelled, or the client or collection was closed."""

    code = -8
    name = "Cancelled"


class ServerError(ParleyError):
    """The server answered with an error (see http_status, server_code)."""

    code = -9
    name = "ServerError"


class Unauthorized(ServerError):
    """HTTP 401: missing, wrong or expired credentials."""

    code = -10
    name = "Unauthorized"


class Forbidden(ServerError):
    """HTTP 403: not allowed for this user."""

    code = -11
    name = "Forbidden"


class NotFound(ServerError):
    """HTTP 404."""

    code = -12
    name = "NotFound"


class CacheError(ParleyError):
    """The local cache (SQLite) failed."""

    code = -13
    name = "CacheError"


class ProtocolError(ParleyError):
    """The server's answer broke the protocol."""

    code = -14
    name = "ProtocolError"


class TLSError(NetworkError):
    """TLS handshake or certificate verification failed."""

    code = -15
    name = "TLSError"


class IOFailure(ParleyError):
    """A local file could not be read or written."""

    code = -16
    name = "IOFailure"


class LimitExceeded(ParleyError):
    """A size, depth or count limit was exceeded."""

    code = -17
    name = "LimitExceeded"


class InternalError(ParleyError):
    """A bug in the library: please report it."""

    code = -99
    name = "InternalError"


_BY_CODE: Dict[int, Type[ParleyError]] = {
    kind.code: kind
    for kind in (
        InvalidArgument, InvalidHandle, InvalidJSON, NoMemory, InvalidState, NetworkError, Timeout, Cancelled,
        ServerError, Unauthorized, Forbidden, NotFound, CacheError, ProtocolError, TLSError, IOFailure,
        LimitExceeded, InternalError,
    )
}


def error_for(code: int, message: str, http_status: int = 0, server_code: int = 0) -> ParleyError:
    """The exception for a status code (unknown codes become a plain ParleyError)."""
    kind = _BY_CODE.get(code)
    if kind is None:
        return ParleyError(message, code=code, http_status=http_status, server_code=server_code)
    return kind(message, http_status=http_status, server_code=server_code)
