"""What the live views share (group channel collections, message collections, sync views):
the base class that owns the library handle, listeners and disposal; the error trampoline;
and the building of option documents from dataclasses."""
from __future__ import annotations

import ctypes
import enum
import json
import sys
import threading
from dataclasses import fields
from typing import Any, Callable, Dict, Generic, List, Mapping, Optional, TypeVar

from . import _callbacks, _native
from .errors import Status, error_for
from .freshness import Freshness, FreshnessHandler, freshness_of

ChangeT = TypeVar("ChangeT")
SelfT = TypeVar("SelfT", bound="NativeCollection[Any]")


def _error(user_data: Optional[int], error: Any) -> None:
    """The `error` callback of every view: calls the view's persistent callable with the ParleyError."""
    _callbacks._run(_callbacks._peek(user_data), _native.error_from(error))


error_trampoline = _native.COLLECTION_ERROR_FN(_error)


def dataclass_document(value: Any) -> Dict[str, Any]:
    """A dataclass of options as its JSON document: enums by value, None fields left out."""
    document: Dict[str, Any] = {}
    for item in fields(value):
        field_value = getattr(value, item.name)
        if field_value is not None:
            document[item.name] = field_value.value if isinstance(field_value, enum.Enum) else field_value
    return document


def options_document(base: Any, kind: type, options: Mapping[str, Any]) -> Dict[str, Any]:
    """An options document from a dataclass of `kind`, a mapping, keyword options or a mix
    (keyword options win)."""
    if isinstance(base, kind):
        document = dataclass_document(base)
    elif base is None:
        document = {}
    elif isinstance(base, Mapping):
        document = dict(base)
    else:
        raise TypeError(f"expected a {kind.__name__}, a dict or None")
    for key, value in options.items():
        document[key] = value.value if isinstance(value, enum.Enum) else value
    return document


class NativeCollection(Generic[ChangeT]):
    """What every collection shares: its library handle, its listeners, its freshness, and
    disposal (safe twice, from a callback, at interpreter exit). Subclasses set
    `_dispose_function` and `_freshness_function`, and pass a :class:`Freshness` their
    `_receive` gets to `_freshness_changed`."""

    _dispose_function: Any = None
    _freshness_function: Any = None

    def __init__(self) -> None:
        self._listeners: List[Callable[[ChangeT], None]] = []
        self._freshness_listeners: List[FreshnessHandler] = []
        self.on_freshness_changed: Optional[FreshnessHandler] = None
        self._lock = threading.Lock()
        self._handle: Optional[int] = None
        self._key = 0

    def _open(self, create: Callable[..., int], *arguments: Any, document: Any) -> None:
        """Creates the library object: `create(&handle, *arguments, document as JSON text, &handler)`
        with the handler made by the subclass; the callback key is released if it fails."""
        handle = ctypes.c_void_p()
        text = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        try:
            _native.check(create(ctypes.byref(handle), *arguments, text))
        except BaseException:
            _callbacks.unregister(self._key)
            raise
        self._handle = handle.value

    def add_listener(self, listener: Callable[[ChangeT], None]) -> None:
        """Also calls `listener` with every change (after the on_* handlers)."""
        with self._lock:
            self._listeners.append(listener)

    def _notify(self, change: ChangeT) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener(change)

    @property
    def freshness(self) -> Freshness:
        """Live, cached, catching up or offline, as of the callbacks delivered so far (inside a
        load's completion: already what the load made it)."""
        return freshness_of(type(self)._freshness_function, self.handle)

    def add_freshness_listener(self, listener: FreshnessHandler) -> None:
        """Also calls `listener` with every freshness change (after ``on_freshness_changed``)."""
        with self._lock:
            self._freshness_listeners.append(listener)

    def _freshness_changed(self, freshness: Freshness) -> None:
        if self.on_freshness_changed is not None:
            self.on_freshness_changed(freshness)
        with self._lock:
            listeners = list(self._freshness_listeners)
        for listener in listeners:
            listener(freshness)

    @property
    def handle(self) -> int:
        if self._handle is None:
            raise error_for(Status.INVALID_HANDLE, "the collection is disposed")
        return self._handle

    @property
    def disposed(self) -> bool:
        return self._handle is None

    def dispose(self) -> None:
        """Stops the collection: no callback runs after this returns. Safe twice and from a callback."""
        with self._lock:
            handle, self._handle = self._handle, None
        if handle is None:
            return
        try:
            _native.check(type(self)._dispose_function(handle))
        finally:
            _callbacks.unregister(self._key)

    def __enter__(self: SelfT) -> SelfT:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.dispose()

    def __del__(self) -> None:
        if sys.is_finalizing():
            return  # the client's atexit close has stopped it; waiting now could hang
        try:
            self.dispose()
        except Exception:
            pass
