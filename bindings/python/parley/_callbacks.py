"""Trampolines between C callbacks and Python callables.

Each C callback type has ONE module-level CFUNCTYPE object that lives as long as the
module, so the library can never call a collected function pointer. The `user_data`
given to C is a key into a table of pending Python callables; a completion removes
its entry when it fires, which also keeps each callable alive exactly as long as needed.
"""
from __future__ import annotations

import ctypes
import itertools
import json
import logging
import threading
import traceback
from typing import Any, Callable, Dict, Optional, Protocol

from . import _native
from ._native import ErrorDetails
from .errors import ParleyError, error_for

logger = logging.getLogger("parley")

_lock = threading.Lock()
_pending: Dict[int, Callable[..., None]] = {}
_persistent: Dict[int, Callable[..., None]] = {}
_keys = itertools.count(1)


def register(callable_: Callable[..., None], persistent: bool = False) -> int:
    """Stores a callable and returns its key (used as the C user_data)."""
    key = next(_keys)
    with _lock:
        (_persistent if persistent else _pending)[key] = callable_
    return key


def unregister(key: int) -> None:
    with _lock:
        _pending.pop(key, None)
        _persistent.pop(key, None)


def calling(key: int, call: Callable[[ctypes.c_void_p], int]) -> int:
    """Runs `call(user_data)` (a C function given the registered `key`; it returns a status)
    and returns `key`. When the call fails its callback never runs: the key is released and
    the failure raised."""
    try:
        _native.check(call(as_key(key)))
    except BaseException:
        unregister(key)
        raise
    return key


def start(callable_: Callable[..., None], call: Callable[[ctypes.c_void_p], int], persistent: bool = False) -> int:
    """Registers `callable_` and runs `call(user_data)` with its key (see :func:`calling`)."""
    return calling(register(callable_, persistent), call)


class Settleable(Protocol):
    """A future of either kind (concurrent.futures or asyncio)."""

    def set_result(self, result: Any, /) -> None: ...

    def set_exception(self, exception: BaseException, /) -> None: ...


def settle(future: Settleable, result: Any, error: Optional[BaseException]) -> None:
    """Completes `future` with a completion's outcome: the error raised, or the result."""
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _take(key: Optional[int]) -> Optional[Callable[..., None]]:
    with _lock:
        return _pending.pop(key or 0, None)


def _peek(key: Optional[int]) -> Optional[Callable[..., None]]:
    with _lock:
        return _persistent.get(key or 0)


def _run(callable_: Optional[Callable[..., None]], *args: Any) -> None:
    if callable_ is None:
        return
    try:
        callable_(*args)
    except BaseException:  # an exception must not unwind into C
        try:
            logger.exception("exception in a parley callback")
        except BaseException:  # logging itself failed (a raising filter, say): stderr, then nothing
            try:
                traceback.print_exc()
            except BaseException:
                pass


def _callback(user_data: Optional[int]) -> None:
    _run(_take(user_data))


callback_trampoline = _native.CALLBACK_FN(_callback)

#: What :func:`deliver_result` calls: ``(result_json, None)`` or ``(None, error details)``.
Completion = Callable[[Optional[str], Optional[ErrorDetails]], None]


def deliver_result(callable_: Optional[Callable[..., None]], error: Any, result_json: Optional[bytes]) -> None:
    """Runs a RESULT_FN's callable with (result_json, None) or (None, error details)."""
    if error:
        _run(callable_, None, _native.error_details(error))
    else:
        _run(callable_, (result_json or b"null").decode("utf-8"), None)


def decoding(callback: Callable[[Optional[Any], Optional[ParleyError]], None], empty: str = "null") -> Completion:
    """A completion for :func:`deliver_result` that calls `callback(result, error)`: the result
    decoded from JSON (`empty` for none) or the error's exception."""

    def complete(result_json: Optional[str], error: Optional[ErrorDetails]) -> None:
        if error is not None:
            callback(None, error_for(*error))
        else:
            callback(json.loads(result_json or empty), None)

    return complete


def finish(user_data: Optional[int], error: Any, result: Callable[[], Any]) -> None:
    """Completes a registered callable of the shape ``(result, error)`` from its C callback:
    with ``(None, the ParleyError)``, or ``(result(), None)`` (read only without an error)."""
    callable_ = _take(user_data)
    if callable_ is None:
        return
    if error:
        _run(callable_, None, _native.error_from(error))
    else:
        _run(callable_, result(), None)


def _result(user_data: Optional[int], error: Any, result_json: Optional[bytes]) -> None:
    deliver_result(_take(user_data), error, result_json)


def _log(user_data: Optional[int], level: int, message: Optional[bytes]) -> None:
    _run(_peek(user_data), level, (message or b"").decode("utf-8", "replace"))


def _connection(user_data: Optional[int], event: int, error: Any) -> None:
    _run(_peek(user_data), event, _native.error_details(error) if error else None)


def _event(user_data: Optional[int], category: Optional[bytes], channel_url: Optional[bytes], payload: Optional[bytes]) -> None:
    _run(_peek(user_data), (category or b"").decode("utf-8"), (channel_url or b"").decode("utf-8"), (payload or b"null").decode("utf-8"))


def _progress(user_data: Optional[int], req_id: Optional[bytes], sent: int, total: int) -> None:
    with _lock:
        complete = _pending.get(user_data or 0)
    progress = getattr(complete, "progress", None)
    _run(progress, (req_id or b"").decode("utf-8"), sent, total)


def _file_sent(user_data: Optional[int], index: int, req_id: Optional[bytes], error: Any, message_json: Optional[bytes]) -> None:
    # One registration serves every file of the call: the batch removes it after the last one.
    with _lock:
        batch = _pending.get(user_data or 0)
    _run(batch, index, (req_id or b"").decode("utf-8"), _native.error_details(error) if error else None,
         (message_json or b"null").decode("utf-8"))


# The C function pointers: one each, alive as long as the module.
result_trampoline = _native.RESULT_FN(_result)
log_trampoline = _native.LOG_FN(_log)
connection_trampoline = _native.CONNECTION_FN(_connection)
event_trampoline = _native.EVENT_FN(_event)
progress_trampoline = _native.PROGRESS_FN(_progress)
file_sent_trampoline = _native.FILE_SENT_FN(_file_sent)


def as_key(value: int) -> ctypes.c_void_p:
    return ctypes.c_void_p(value)
