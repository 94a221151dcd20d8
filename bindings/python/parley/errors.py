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


def _kind(name: str, code: int, base: Type[ParleyError] = ParleyError) -> Type[ParleyError]:
    return type(name, (base,), {"code": code, "name": name})


InvalidArgument = _kind("InvalidArgument", -1)
InvalidHandle = _kind("InvalidHandle", -2)
InvalidJSON = _kind("InvalidJSON", -3, InvalidArgument)
NoMemory = _kind("NoMemory", -4)
InvalidState = _kind("InvalidState", -5)
NetworkError = _kind("NetworkError", -6)
Timeout = _kind("Timeout", -7, NetworkError)
Cancelled = _kind("Cancelled", -8)
ServerError = _kind("ServerError", -9)
Unauthorized = _kind("Unauthorized", -10, ServerError)
Forbidden = _kind("Forbidden", -11, ServerError)
NotFound = _kind("NotFound", -12, ServerError)
CacheError = _kind("CacheError", -13)
ProtocolError = _kind("ProtocolError", -14)
TLSError = _kind("TLSError", -15, NetworkError)
IOFailure = _kind("IOFailure", -16)
LimitExceeded = _kind("LimitExceeded", -17)
InternalError = _kind("InternalError", -99)

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
