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
from typing import TYPE_CHECKING, Any, Callable, Dict, Generic, List, Mapping, Optional, TypeVar, Union

from . import _callbacks, _native
from .errors import ParleyError
from .freshness import Freshness, FreshnessHandler, freshness_of, freshness_trampoline

if TYPE_CHECKING:
    from .client import Client

ChangeT = TypeVar("ChangeT")
ValueT = TypeVar("ValueT")
#: ``on_error(error)`` of a view: a failure it reports (a load it made on its own, say).
ErrorHandler = Callable[[ParleyError], None]
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


class NativeCollection(_native.HandleOwner, Generic[ChangeT]):
    """What every collection shares: its library handle, its listeners, its freshness, its
    errors, and disposal (safe twice, from a callback, at interpreter exit). Subclasses set
    `_dispose_function` and `_freshness_function`, register :meth:`_receive` as the
    persistent callable of their handler, and call their on_* handlers in `_deliver`."""

    _dispose_function: Any = None
    _freshness_function: Any = None
    _released = "the collection is disposed"

    def __init__(self) -> None:
        super().__init__()
        self._listeners: List[Callable[[ChangeT], None]] = []
        self._freshness_listeners: List[FreshnessHandler] = []
        self.on_freshness_changed: Optional[FreshnessHandler] = None
        self.on_error: Optional[ErrorHandler] = None
        self._lock = threading.Lock()
        self._key = 0

    def _open(self, client: Client, on_error: Optional[ErrorHandler], on_freshness_changed: Optional[FreshnessHandler],
              create: Callable[..., int], handler: Any, *arguments: Any, document: Any) -> None:
        """Creates the library object: `create(&handle, client's handle, *arguments, document as
        JSON text, &handler)`. `handler` is the view's C handler struct with its own callbacks
        set; the ones every view has (error, freshness) are added here, with `_receive` as the
        callable of its user_data. The callback key is released if creation fails."""
        self._client = client
        self.on_error = on_error
        self.on_freshness_changed = on_freshness_changed
        self._key = _callbacks.register(self._receive, persistent=True)
        handler.error = error_trampoline
        handler.freshness_changed = freshness_trampoline
        handler.user_data = _callbacks.as_key(self._key)
        handle = ctypes.c_void_p()
        text = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        try:
            _native.check(create(ctypes.byref(handle), client.handle, *arguments, text, ctypes.byref(handler)))
        except BaseException:
            _callbacks.unregister(self._key)
            raise
        self._handle = handle.value

    def _receive(self, change: Union[ChangeT, ParleyError, Freshness]) -> None:
        """What the view's callbacks deliver: a freshness change, an error (to ``on_error``) or a
        change (to the subclass's on_* handlers, then the listeners)."""
        if isinstance(change, Freshness):
            self._freshness_changed(change)
        elif isinstance(change, ParleyError):
            if self.on_error is not None:
                self.on_error(change)
        else:
            self._deliver(change)
            self._notify(change)

    def _deliver(self, change: ChangeT) -> None:
        """Calls the on_* handlers a change concerns (the subclass knows which)."""

    def _flag(self, function: Any, *arguments: Any) -> bool:
        """A boolean getter of the view: `function(handle, *arguments, &out)`."""
        return _native.read_flag(function, self.handle, *arguments)

    def _list(self, function: Any, *arguments: Any) -> List[Any]:
        """A list getter of the view: `function(handle, *arguments, &out)` ([] for none)."""
        return _native.read_json(function, self.handle, *arguments) or []

    def add_listener(self, listener: Callable[[ChangeT], None]) -> None:
        """Also calls `listener` with every change (after the on_* handlers)."""
        with self._lock:
            self._listeners.append(listener)

    def _notify(self, change: ChangeT) -> None:
        self._call_each(self._listeners, change)

    def _call_each(self, listeners: List[Callable[[ValueT], None]], value: ValueT) -> None:
        """Calls the listeners of a list with `value` (those added meanwhile wait for the next one)."""
        with self._lock:
            snapshot = list(listeners)
        for listener in snapshot:
            listener(value)

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
        self._call_each(self._freshness_listeners, freshness)

    @property
    def disposed(self) -> bool:
        return self._handle is None

    def dispose(self) -> None:
        """Stops the collection: no callback runs after this returns. Safe twice and from a callback."""
        with self._lock:
            handle = self._release()
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
