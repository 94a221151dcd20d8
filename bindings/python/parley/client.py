"""The Client: one connection to a Parley server, over libparley's C ABI."""
from __future__ import annotations

import atexit
import concurrent.futures
import ctypes
import functools
import json
import logging
import sys
import threading
import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple, Union, cast

from . import _callbacks, _native
from ._collection_base import ErrorHandler
from ._operation_support import missing_attribute
from ._operations import Operations
from .channel_collection import (
    ChannelsHandler, DeletedHandler, GroupChannelCollection, GroupChannelListOptions,
    GroupChannelListQuery, make_query,
)
from .events import ConnectionEventKind, EventCategory
from .freshness import FreshnessHandler
from .metrics import Metrics
from .message_collection import (
    NEWEST, ChannelDeletedHandler, ChannelHandler, HugeGapHandler, MessageCollection, MessageListOptions,
    MessageListParams, MessagesHandler, ProgressHandler, make_params,
)
from .objects import CachedMessagePage, Channel, FileMessageParams, Message, User, UserMessageParams
from .query import Query
from .search import MessageSearch, SearchHandler, SearchOrder, search_params
from .sync_view import ActionHandler, NEWEST_VIEWPOINT, SyncView, SyncViewOptions, SyncViewOverrides, make_options
from .errors import ParleyError, Status, error_for

if TYPE_CHECKING:
    from typing_extensions import Unpack

lib = _native.lib

JSONValue = Any
LogHandler = Callable[[int, str], None]

LOG_OFF, LOG_ERROR, LOG_WARNING, LOG_INFO, LOG_DEBUG, LOG_TRACE = range(6)

#: The logging level of the library's LOG_TRACE lines ("TRACE", below logging.DEBUG).
TRACE = 5
if logging.getLevelName(TRACE) == f"Level {TRACE}":
    logging.addLevelName(TRACE, "TRACE")

#: The logger the library's log lines go to unless the application sets its own log handler.
LOGGER_NAME = "parley"

# The library's levels (PARLEY_LOG_*) as logging levels, the most verbose first.
_LOGGING_LEVELS = {LOG_TRACE: TRACE, LOG_DEBUG: logging.DEBUG, LOG_INFO: logging.INFO,
                   LOG_WARNING: logging.WARNING, LOG_ERROR: logging.ERROR}
_LOG_LEVEL_NAMES = {"off": LOG_OFF, "error": LOG_ERROR, "warning": LOG_WARNING, "info": LOG_INFO,
                    "debug": LOG_DEBUG, "trace": LOG_TRACE}


def log_level_for(target: logging.Logger) -> int:
    """The most verbose library level (LOG_*) whose lines `target` would keep now: from its
    effective level (``logging.DEBUG`` -> LOG_DEBUG, ``TRACE`` or below -> LOG_TRACE, above
    ``logging.ERROR`` or disabled -> LOG_OFF)."""
    for level, logging_level in _LOGGING_LEVELS.items():
        if target.isEnabledFor(logging_level):
            return level
    return LOG_OFF


def _forwarding_to(target: logging.Logger) -> LogHandler:
    """A log handler that hands each library line to `target` at the matching logging level."""

    def forward(level: int, message: str) -> None:
        target.log(_LOGGING_LEVELS.get(level, logging.INFO), message)

    return forward


# Connection events (PARLEY_CONNECTION_*), given to the connection handler.
CONNECTING, CONNECTED, RECONNECT_STARTED, RECONNECT_SUCCEEDED, RECONNECT_FAILED, DISCONNECTED, SESSION_TOKEN_REQUIRED = range(1, 8)
CONNECTION_EVENT_KINDS = {
    CONNECTING: ConnectionEventKind.CONNECTING, CONNECTED: ConnectionEventKind.CONNECTED,
    RECONNECT_STARTED: ConnectionEventKind.RECONNECT_STARTED, RECONNECT_SUCCEEDED: ConnectionEventKind.RECONNECT_SUCCEEDED,
    RECONNECT_FAILED: ConnectionEventKind.RECONNECT_FAILED, DISCONNECTED: ConnectionEventKind.DISCONNECTED,
    SESSION_TOKEN_REQUIRED: ConnectionEventKind.SESSION_TOKEN_REQUIRED,
}
CONNECTION_EVENT_NAMES = {number: kind.value for number, kind in CONNECTION_EVENT_KINDS.items()}
STATE_NAMES = ("closed", "connecting", "open", "reconnecting")
#: ``handler(event, error)``: `event` a :class:`ConnectionEventKind`, or the number (as a str) of
#: one this binding does not know.
ConnectionHandler = Callable[[Union[ConnectionEventKind, str], Optional[ParleyError]], None]
ConnectionListener = Callable[[int, Optional[_native.ErrorDetails]], None]
EventListener = Callable[[str, str, str], None]
#: ``handler(category, channel_url, payload)``: `category` an :class:`EventCategory`, or the plain
#: name of a category the library does not know (a newer server's events are passed on); the
#: payload is the event's JSON object, whose keys depend on the category (docs/C-API.md,
#: "Connecting and the event stream").
EventHandler = Callable[[Union[EventCategory, str], str, Any], None]


def version() -> str:
    """The loaded library's version, "MAJOR.MINOR.PATCH"."""
    text: bytes = lib.parley_version()
    return text.decode()


def library_path() -> str:
    """The path of the libparley this process loaded (the bundled one, PARLEY_LIBRARY's, or the
    system loader's)."""
    return _native.library_path


ResultCallback = Callable[[Optional[Any], Optional[ParleyError]], None]


_catalog: Optional[List[Dict[str, Any]]] = None


def operations() -> List[Dict[str, Any]]:
    """The operation catalog: [{"name", "method", "path", "summary", "parameters", "required",
    "defaults", ...}, ...] (include/parley/operations.h). Each operation is also a typed method
    of :class:`Client` and :class:`parley.AsyncClient`."""
    global _catalog
    if _catalog is None:
        out = ctypes.c_void_p()
        _native.check(lib.parley_operations(ctypes.byref(out)))
        _catalog = cast(List[Dict[str, Any]], json.loads(_native.take_string(out)))
    return list(_catalog)


_CATEGORIES = {category.value: category for category in EventCategory}


def configuration_keys() -> List[Dict[str, Any]]:
    """Every key of the client configuration: [{"name", "type", "default", "values", "summary"}, ...]
    (``parley_configuration_keys``; docs/C-REFERENCE.md lists them)."""
    out = ctypes.c_void_p()
    _native.check(lib.parley_configuration_keys(ctypes.byref(out)))
    return cast(List[Dict[str, Any]], json.loads(_native.take_string(out)))


def configure_runtime(network_threads: Optional[int] = None, callback_threads: Optional[int] = None) -> None:
    """Sets the threads all clients of the process share (``parley_runtime_configure``), before
    the first client: a different number once they run raises ``PARLEY_E_INVALID_STATE``."""
    settings = {key: value for key, value in
                (("network_threads", network_threads), ("callback_threads", callback_threads)) if value is not None}
    _native.check(lib.parley_runtime_configure(json.dumps(settings).encode("utf-8")))


def runtime_info() -> Dict[str, int]:
    """The shared runtime's threads (``parley_runtime_info``): "network_threads",
    "callback_threads", "callback_extra_threads", "default_network_threads",
    "default_callback_threads" (0 before the first client)."""
    out = ctypes.c_void_p()
    _native.check(lib.parley_runtime_info(ctypes.byref(out)))
    return cast(Dict[str, int], json.loads(_native.take_string(out)))


def event_categories() -> List[Dict[str, str]]:
    """Every event category the library reports: [{"name", "source"}, ...]."""
    out = ctypes.c_void_p()
    _native.check(lib.parley_event_categories(ctypes.byref(out)))
    return cast(List[Dict[str, str]], json.loads(_native.take_string(out)))


def operation_names() -> FrozenSet[str]:
    """The names of the catalog's operations."""
    return frozenset(entry["name"] for entry in operations())


def user_message_document(message: Optional[str], params: Mapping[str, Any]) -> Dict[str, Any]:
    """The send's document of a user message: `params` and the text (when given)."""
    document: Dict[str, Any] = dict(params)
    if message is not None:
        document["message"] = message
    return document


def _encode_json(value: Union[None, str, Mapping[str, Any], JSONValue]) -> Optional[bytes]:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


# Clients still open when the interpreter exits are closed while it is fully alive: the
# library's callback thread may need the GIL to finish a callback, which a finalizer running
# during interpreter shutdown could never give it (destroy would wait forever).
_open_clients: weakref.WeakSet[Client] = weakref.WeakSet()


@atexit.register
def _close_open_clients() -> None:
    for client in list(_open_clients):
        try:
            client.close()
        except Exception:
            pass


class DispatchGroup(_native.HandleOwner):
    """One file descriptor and one :meth:`dispatch` for many manual-mode clients: :attr:`fd`
    is readable exactly while an attached client has callbacks waiting, and :meth:`dispatch`
    runs them on the calling thread, each client's in order, the clients in turn. Attach a
    client with :meth:`Client.set_dispatch_group`. :class:`parley.AsyncClient` uses one per
    event loop, so the loop watches one fd however many clients it serves.

    :meth:`close` (or the end of a ``with`` block) raises InvalidState while clients are
    attached: close them (or detach them) first."""

    _released = "the dispatch group is closed"

    def __init__(self) -> None:
        super().__init__()
        handle = ctypes.c_void_p()
        _native.check(lib.parley_dispatch_group_create(ctypes.byref(handle)))
        self._handle = handle.value
        fd = ctypes.c_int(-1)
        _native.check(lib.parley_dispatch_group_event_fd(self._handle, ctypes.byref(fd)))
        self._fd = fd.value

    @property
    def closed(self) -> bool:
        return self._handle is None

    @property
    def fd(self) -> int:
        """Readable while an attached client has callbacks waiting (do not close it)."""
        _ = self.handle  # raises once closed
        return self._fd

    def dispatch(self, max_callbacks: int = 0) -> int:
        """Runs up to `max_callbacks` waiting callbacks of the attached clients here (0: those
        waiting now); returns how many ran."""
        ran = ctypes.c_int(0)
        _native.check(lib.parley_dispatch_group_dispatch(self.handle, max_callbacks, ctypes.byref(ran)))
        return ran.value

    def close(self) -> None:
        """Frees the group. Raises InvalidState while clients are attached (it stays open).
        Safe to call twice."""
        if self._handle is None:
            return
        _native.check(lib.parley_dispatch_group_destroy(self._handle))
        self._release()

    def __enter__(self) -> DispatchGroup:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass  # clients still attached: the library keeps the group for them


class Client(_native.HandleOwner, Operations):
    """A Parley client.

    `config` is the configuration document of `parley_client_create` (a mapping or JSON
    text); keyword arguments are merged into it. With ``dispatch_mode="thread"`` (the
    default) callbacks run on the library's callback pool (one client's one at a time, in
    order); with ``"manual"`` they wait until you call :meth:`dispatch` (watch
    :attr:`event_fd` to know when), or those of many clients in a :class:`DispatchGroup`.
    Use :class:`parley.AsyncClient` for asyncio.

    Every operation of the library's catalog is a method with typed keyword parameters
    (``client.get_group_channel(channel_url=url)``) returning a Future of the server's
    answer; :meth:`perform` takes any operation by name.

    Close it with :meth:`close` or a ``with`` block: operations in flight then complete
    with :class:`parley.Cancelled`.

    The library's log lines go to the ``logging`` logger ``"parley"`` (:meth:`use_logging`),
    at the level the logger has when the client is created, unless the configuration names a
    ``log_level``; :meth:`set_log_handler` replaces that.
    """

    def __init__(self, config: Union[None, str, Mapping[str, Any]] = None, **options: Any) -> None:
        document: Dict[str, Any] = {}
        text: Optional[bytes]
        if isinstance(config, str) and not options:
            # Passed through untouched: the library reports malformed text precisely.
            text = config.encode("utf-8")
            try:
                parsed = json.loads(config) if config.strip() else {}
                document = parsed if isinstance(parsed, dict) else {}
            except ValueError:
                pass
        else:
            if isinstance(config, str):
                parsed = json.loads(config) if config.strip() else {}
                if not isinstance(parsed, dict):
                    raise TypeError("config must be a JSON object")
                document = parsed
            elif config is not None:
                document = dict(config)
            document.update(options)
            text = _encode_json(document)
        super().__init__()
        handle = ctypes.c_void_p()
        _native.check(lib.parley_client_create(ctypes.byref(handle), text))
        self._handle = handle.value
        self._close_lock = threading.Lock()
        _open_clients.add(self)
        self._log_key = 0
        self._connection_key = 0
        self._event_key = 0
        # The application's handlers and the binding's own listeners (the async client's
        # iterators): one library callback each, installed while any of them is set.
        self._connection_handler: Optional[ConnectionHandler] = None
        self._event_handler: Optional[EventHandler] = None
        self._connection_listeners: List[ConnectionListener] = []
        self._event_listeners: List[EventListener] = []
        # The keyed handlers' callback keys by id (add_event_handler, add_connection_handler).
        self._keyed_connection: Dict[str, int] = {}
        self._keyed_event: Dict[str, int] = {}
        self.dispatch_mode: str = document.get("dispatch_mode", "thread")
        self._dispatch_group: Optional[DispatchGroup] = None
        configured = document.get("log_level")
        self.use_logging(level=_LOG_LEVEL_NAMES.get(configured) if isinstance(configured, str) else None)

    # -- lifetime --------------------------------------------------------------

    _released = "the client is closed"

    @property
    def closed(self) -> bool:
        return self._handle is None

    def close(self) -> None:
        """Cancels what is in flight, runs every queued callback, and frees the client.
        Safe to call twice, and from one of the client's callbacks."""
        with self._close_lock:
            handle = self._release()
        if handle is None:
            return
        _native.check(lib.parley_client_destroy(handle))
        for attribute in ("_log_key", "_connection_key", "_event_key"):
            key = getattr(self, attribute)
            if key:
                _callbacks.unregister(key)
                setattr(self, attribute, 0)
        for keyed in (self._keyed_connection, self._keyed_event):
            for key in keyed.values():
                _callbacks.unregister(key)
            keyed.clear()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __del__(self) -> None:
        if sys.is_finalizing():
            return  # too late to wait for the callback thread; atexit closed what it could
        try:
            self.close()
        except Exception:
            pass

    # -- callbacks ---------------------------------------------------------------

    @property
    def event_fd(self) -> int:
        """Manual mode: a file descriptor readable while callbacks wait (do not close it)."""
        fd = ctypes.c_int(-1)
        _native.check(lib.parley_client_event_fd(self.handle, ctypes.byref(fd)))
        return fd.value

    def dispatch(self, max_callbacks: int = 0) -> int:
        """Manual mode: runs up to `max_callbacks` waiting callbacks (0: all) here; returns how many ran."""
        ran = ctypes.c_int(0)
        _native.check(lib.parley_client_dispatch(self.handle, max_callbacks, ctypes.byref(ran)))
        return ran.value

    def set_dispatch_group(self, group: Optional[DispatchGroup]) -> None:
        """Manual mode: attaches the client to `group` (None: detaches it), whose fd and
        dispatch then serve its callbacks with those of the group's other clients. Raises
        InvalidState in thread mode, or when the client is in another group. :attr:`event_fd`
        and :meth:`dispatch` still work for this client alone."""
        _native.check(lib.parley_client_set_dispatch_group(self.handle, group.handle if group is not None else None))
        # The group must outlive its clients: closing it is refused while they are attached.
        self._dispatch_group = group

    def set_log_handler(self, handler: Optional[LogHandler], level: int = LOG_INFO) -> None:
        """Receives the library's log records ``handler(level, message)`` (`level` a LOG_*
        constant) up to `level`, instead of the ``logging`` logger. None turns the library's
        logs off; :meth:`use_logging` sends them to ``logging`` again. The handler runs on the
        callback context, like every callback of the client."""
        old = self._log_key
        if handler is None:
            _native.check(lib.parley_client_set_log_callback(self.handle, _native.LOG_FN(), None, LOG_OFF))
            self._log_key = 0
        else:
            handle = self.handle
            self._log_key = _callbacks.start(handler, lambda key: lib.parley_client_set_log_callback(
                handle, _callbacks.log_trampoline, key, level), persistent=True)
        if old:
            _callbacks.unregister(old)

    def use_logging(self, logger: Optional[logging.Logger] = None, level: Optional[int] = None) -> None:
        """Sends the library's log lines to `logger` (by default ``logging.getLogger("parley")``),
        each at the matching logging level: LOG_ERROR, LOG_WARNING, LOG_INFO and LOG_DEBUG as
        ``logging.ERROR`` ... ``logging.DEBUG``, LOG_TRACE as :data:`parley.TRACE` (5). This is
        what a new client does. `level` (a LOG_* constant) is the most verbose line the
        library sends; by default it is read from the logger's effective level now (see
        :func:`parley.log_level_for`) — the library does not see later changes of the
        logger's level until this is called again. Replaces :meth:`set_log_handler`'s handler."""
        target = logger if logger is not None else logging.getLogger(LOGGER_NAME)
        self.set_log_handler(_forwarding_to(target), log_level_for(target) if level is None else level)

    def post(self, function: Callable[[], None]) -> None:
        """Runs `function` on the callback context after every callback queued before it."""
        handle = self.handle
        _callbacks.start(function, lambda key: lib.parley_client_post(handle, _callbacks.callback_trampoline, key))

    # -- operations --------------------------------------------------------------

    def _start(self, function_name: str, args: Tuple[Any, ...], callback: ResultCallback) -> int:
        """Calls a libparley function of the shape (client, out_operation_id, *args, fn, user_data)."""
        operation = ctypes.c_uint64(0)
        handle = self.handle
        _callbacks.start(_callbacks.decoding(callback), lambda key: getattr(lib, function_name)(
            handle, ctypes.byref(operation), *args, _callbacks.result_trampoline, key))
        return operation.value

    @staticmethod
    def _future_and_callback() -> Tuple[concurrent.futures.Future[Any], ResultCallback]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        return future, functools.partial(_callbacks.settle, future)

    def request_with_callback(self, method: str, path: str, body: Any, callback: ResultCallback) -> int:
        """Sends a raw REST request; `callback(result, error)` runs exactly once on the
        callback context. Returns the operation id (for :meth:`cancel`)."""
        return self._start("parley_client_request", (method.encode("utf-8"), path.encode("utf-8"), _encode_json(body)), callback)

    def request(self, method: str, path: str, body: Any = None) -> concurrent.futures.Future[Any]:
        """Sends a raw REST request and returns a Future of the decoded JSON answer
        (or the ParleyError). In manual mode the Future completes during :meth:`dispatch`."""
        future, done = self._future_and_callback()
        setattr(future, "operation_id", self.request_with_callback(method, path, body, done))
        return future

    # -- session -----------------------------------------------------------------

    def connect_with_callback(self, user_id: str, session_token: str, callback: ResultCallback) -> int:
        """Connects as `user_id`; `callback(user, error)` runs exactly once on the callback
        context. Returns the operation id."""
        return self._start("parley_client_connect", (user_id.encode("utf-8"), session_token.encode("utf-8")), callback)

    def connect(self, user_id: str, session_token: str) -> concurrent.futures.Future[User]:
        """Connects as `user_id` with a session token; the Future gives the user object."""
        future, done = self._future_and_callback()
        setattr(future, "operation_id", self.connect_with_callback(user_id, session_token, done))
        return cast("concurrent.futures.Future[User]", future)

    def disconnect(self) -> None:
        """Ends the session (operations then raise InvalidState until connect)."""
        _native.check(lib.parley_client_disconnect(self.handle))

    @property
    def current_user_id(self) -> Optional[str]:
        out = ctypes.c_void_p()
        status = lib.parley_client_current_user_id(self.handle, ctypes.byref(out))
        if status == Status.INVALID_STATE:
            return None
        _native.check(status)
        return _native.take_string(out)

    # -- operations --------------------------------------------------------------

    def perform_with_callback(self, operation: str, params: Optional[Mapping[str, Any]], callback: ResultCallback) -> int:
        """Performs a catalog operation; `callback(answer, error)` runs exactly once on the
        callback context. Returns the operation id (for :meth:`cancel`)."""
        return self._start("parley_client_perform", (operation.encode("utf-8"), _encode_json(params or {})), callback)

    def perform(self, operation: str, params: Optional[Mapping[str, Any]] = None, **kwargs: Any) -> concurrent.futures.Future[Any]:
        """Performs a catalog operation (see :func:`parley.operations`) by name as the connected
        user; parameters are the wire names (`channel_url`, `message_id`, ...). Returns a
        Future of the server's answer. Every operation is also a typed method:
        ``client.create_group_channel(user_ids=["a", "b"])``."""
        merged = dict(params or {})
        merged.update(kwargs)
        future, done = self._future_and_callback()
        setattr(future, "operation_id", self.perform_with_callback(operation, merged, done))
        return future

    if not TYPE_CHECKING:  # type checkers report unknown names themselves
        def __getattr__(self, name: str) -> Any:
            """Only for names the client lacks: an AttributeError saying what was probably meant."""
            if name.startswith("_"):
                raise AttributeError(name)
            raise missing_attribute(self, name, operation_names())

    def cancel(self, operation_id: int) -> None:
        """Cancels an operation in flight (its completion gets Cancelled)."""
        _native.check(lib.parley_client_cancel(self.handle, operation_id))

    # -- connection and events ---------------------------------------------------

    def _set_persistent(self, attribute: str, setter: str, trampoline: Any, null: Any, wrapped: Optional[Callable[..., None]]) -> None:
        old = getattr(self, attribute)
        if wrapped is None:
            _native.check(getattr(lib, setter)(self.handle, null, None))
            setattr(self, attribute, 0)
        else:
            handle = self.handle
            setattr(self, attribute, _callbacks.start(
                wrapped, lambda key: getattr(lib, setter)(handle, trampoline, key), persistent=True))
        if old:
            _callbacks.unregister(old)

    # The library calls one callback per kind; it hands each event to the application's
    # handler, then to the listeners. It stays installed while either is set, so replacing a
    # handler never drops an event already queued for the old one. It holds the client
    # weakly: a client nobody holds is still collected (and closed).

    def _update_connection_callback(self) -> None:
        wanted = self._connection_handler is not None or bool(self._connection_listeners)
        if wanted and not self._connection_key:
            this = weakref.ref(self)

            def deliver(event: int, details: Optional[_native.ErrorDetails]) -> None:
                client = this()
                if client is not None:
                    client._deliver_connection(event, details)

            self._set_persistent("_connection_key", "parley_client_set_connection_handler",
                                 _callbacks.connection_trampoline, _native.CONNECTION_FN(), deliver)
        elif not wanted and self._connection_key:
            self._set_persistent("_connection_key", "parley_client_set_connection_handler",
                                 _callbacks.connection_trampoline, _native.CONNECTION_FN(), None)

    def _deliver_connection(self, event: int, details: Optional[_native.ErrorDetails]) -> None:
        handler = self._connection_handler
        if handler is not None:
            kind = CONNECTION_EVENT_KINDS.get(event)
            _callbacks._run(handler, kind if kind is not None else str(event), error_for(*details) if details else None)
        for listener in list(self._connection_listeners):
            _callbacks._run(listener, event, details)

    def _update_event_callback(self) -> None:
        wanted = self._event_handler is not None or bool(self._event_listeners)
        if wanted and not self._event_key:
            this = weakref.ref(self)

            def deliver(category: str, channel_url: str, payload: str) -> None:
                client = this()
                if client is not None:
                    client._deliver_event(category, channel_url, payload)

            self._set_persistent("_event_key", "parley_client_set_event_handler",
                                 _callbacks.event_trampoline, _native.EVENT_FN(), deliver)
        elif not wanted and self._event_key:
            self._set_persistent("_event_key", "parley_client_set_event_handler",
                                 _callbacks.event_trampoline, _native.EVENT_FN(), None)

    def _deliver_event(self, category: str, channel_url: str, payload: str) -> None:
        handler = self._event_handler
        if handler is not None:
            def call(handler: EventHandler) -> None:
                known = _CATEGORIES.get(category)
                handler(known if known is not None else category, channel_url, json.loads(payload))
            _callbacks._run(call, handler)
        for listener in list(self._event_listeners):
            _callbacks._run(listener, category, channel_url, payload)

    def _add_connection_listener(self, listener: ConnectionListener) -> None:
        """Not for applications: also calls `listener(event_number, error_details_or_None)`
        for each connection change, after the handler."""
        self._connection_listeners.append(listener)
        self._update_connection_callback()

    def _add_event_listener(self, listener: EventListener) -> None:
        """Not for applications: also calls `listener(category, channel_url, payload_json)`
        for each event, after the handler."""
        self._event_listeners.append(listener)
        self._update_event_callback()

    def set_connection_handler(self, handler: Optional[ConnectionHandler]) -> None:
        """`handler(event, error_or_None)` for connection changes. `event` is a
        :class:`ConnectionEventKind` (a str: "connecting", "connected", "reconnect_started",
        "reconnect_succeeded", "reconnect_failed", "disconnected", "session_token_required");
        `error` says why for reconnect_started, reconnect_failed and disconnected. None
        removes it."""
        self._connection_handler = handler
        self._update_connection_callback()

    def set_event_handler(self, handler: Optional[EventHandler]) -> None:
        """`handler(category, channel_url, payload)` for every real-time, sync and local
        sending event (payload decoded from JSON), after the cache was updated. `category`
        is an :class:`EventCategory` (a str), or the plain name (a str) of a category the
        library does not know, as a newer server may stream. A message this client sent is
        reported once, as "message_sent", never also as "message_received"."""
        self._event_handler = handler
        self._update_event_callback()

    def _add_keyed(self, keyed: Dict[str, int], adder: str, id: str, trampoline: Any,
                   wrapped: Callable[..., None]) -> None:
        if not isinstance(id, str) or not id:
            raise error_for(Status.INVALID_ARGUMENT, "id must be a non-empty str")
        handle = self.handle
        key = _callbacks.start(wrapped, lambda user_data: getattr(lib, adder)(
            handle, id.encode("utf-8"), trampoline, user_data), persistent=True)
        old = keyed.get(id)
        keyed[id] = key
        if old:
            _callbacks.unregister(old)

    def _remove_keyed(self, keyed: Dict[str, int], remover: str, id: str) -> None:
        if not isinstance(id, str) or not id:
            raise error_for(Status.INVALID_ARGUMENT, "id must be a non-empty str")
        _native.check(getattr(lib, remover)(self.handle, id.encode("utf-8")))
        key = keyed.pop(id, 0)
        if key:
            _callbacks.unregister(key)

    def add_connection_handler(self, id: str, handler: ConnectionHandler) -> None:
        """Adds `handler(event, error_or_None)` for connection changes under `id` (a non-empty
        str), beside :meth:`set_connection_handler`'s and the other added ones: each gets every
        change, in the order their ids were first added. An id already present replaces its
        handler in place."""

        def deliver(event: int, details: Optional[_native.ErrorDetails]) -> None:
            kind = CONNECTION_EVENT_KINDS.get(event)
            handler(kind if kind is not None else str(event), error_for(*details) if details else None)

        self._add_keyed(self._keyed_connection, "parley_client_add_connection_handler", id,
                        _callbacks.connection_trampoline, deliver)

    def remove_connection_handler(self, id: str) -> None:
        """Removes the connection handler added under `id` (nothing if there is none). Also from
        inside a handler: the removed one is not called again, not even for the current change."""
        self._remove_keyed(self._keyed_connection, "parley_client_remove_connection_handler", id)

    def add_event_handler(self, id: str, handler: EventHandler) -> None:
        """Adds `handler(category, channel_url, payload)` (as :meth:`set_event_handler`'s) under
        `id` (a non-empty str), beside the set handler and the other added ones: each gets every
        event, in the order their ids were first added. An id already present replaces its
        handler in place."""

        def deliver(category: str, channel_url: str, payload: str) -> None:
            known = _CATEGORIES.get(category)
            handler(known if known is not None else category, channel_url, json.loads(payload))

        self._add_keyed(self._keyed_event, "parley_client_add_event_handler", id, _callbacks.event_trampoline, deliver)

    def remove_event_handler(self, id: str) -> None:
        """Removes the event handler added under `id` (nothing if there is none). Also from inside
        a handler: the removed one is not called again, not even for the current event."""
        self._remove_keyed(self._keyed_event, "parley_client_remove_event_handler", id)

    # -- queries -----------------------------------------------------------------

    def create_query(self, kind: str, **options: Any) -> Query:
        """A stateful list query (:class:`parley.Query`) of `kind`: "previous_messages",
        "group_channels", "public_group_channels", "members", "operators", "banned_users" or
        "muted_users", with that kind's options (docs/C-API.md, "Queries"), e.g.
        ``client.create_query("previous_messages", channel_url=url, limit=30)``. Iterate it for
        its items, or call :meth:`parley.Query.load_next_page` page by page."""
        return Query(self, kind, options)

    def reconnect(self) -> None:
        """Reconnects the event stream now: skips the backoff wait, or, when open, replaces the
        connection with a new one that resumes where it stopped (reconnect_started, then
        reconnect_succeeded after the catch-up)."""
        _native.check(lib.parley_client_reconnect(self.handle))

    def set_session_token(self, token: str) -> None:
        """Replaces the session token (answer to "session_token_required")."""
        _native.check(lib.parley_client_set_session_token(self.handle, token.encode("utf-8")))

    @property
    def connection_state(self) -> str:
        """"closed", "connecting", "open" or "reconnecting". "open" comes once the engine
        took the server's ``connected`` event: the session's first "connected" connection
        event is then already queued, ahead of any "disconnected" that follows."""
        state = ctypes.c_int(0)
        _native.check(lib.parley_client_connection_state(self.handle, ctypes.byref(state)))
        return STATE_NAMES[state.value]

    def metrics(self) -> Metrics:
        """The engine's counters and gauges (:class:`parley.Metrics`): the stream's state and
        reconnections, events, catch-ups, resyncs, sends and the outbox, the cache's size and
        rows, evictions, the search index, open views and the callback queue. Cheap enough to
        call every second; works before connect and after disconnect."""
        metrics: Metrics = _native.read_json(lib.parley_client_metrics, self.handle)
        return metrics

    # -- sending -----------------------------------------------------------------

    def _start_send(self, progress: Optional[ProgressHandler], callback: ResultCallback,
                    call: Callable[[ctypes.c_void_p], int]) -> None:
        """Registers the completion `callback(message, error)` (carrying the progress handler,
        which the progress trampoline finds through the same key) and runs `call(user_data)`,
        which returns a status."""
        complete = _callbacks.decoding(callback)
        setattr(complete, "progress", progress)
        _callbacks.start(complete, call)

    def _progress_fn(self, progress: Optional[ProgressHandler]) -> Any:
        return _callbacks.progress_trampoline if progress else _native.PROGRESS_FN()

    def _send_with_callback(self, function_name: str, channel_url: str, params: Mapping[str, Any],
                           progress: Optional[ProgressHandler], callback: ResultCallback) -> Tuple[Message, int]:
        """Not for applications (the binding's sends use it): starts `function_name`
        (``parley_client_send_user_message`` or ``..._send_file_message``); `callback(message,
        error)` runs exactly once on the callback context. Returns the stored pending message
        and the operation id."""
        operation = ctypes.c_uint64(0)
        pending = ctypes.c_void_p()
        args: List[Any] = [self.handle, ctypes.byref(pending), ctypes.byref(operation),
                      channel_url.encode("utf-8"), _encode_json(dict(params))]
        if function_name == "parley_client_send_file_message":
            args.append(self._progress_fn(progress))
        self._start_send(progress, callback, lambda user_data: getattr(lib, function_name)(
            *args, _callbacks.result_trampoline, user_data))
        pending_message: Message = json.loads(_native.take_string(pending))
        return pending_message, operation.value

    def _send_files_with_callbacks(self, channel_url: str, files: Sequence[Mapping[str, Any]],
                                   progress: Optional[ProgressHandler], callbacks: Sequence[ResultCallback]) -> List[Message]:
        """Not for applications: :meth:`send_file_messages` with `callbacks[i](message, error)`
        run exactly once for file i on the callback context. Returns the pending messages."""
        remaining = [len(callbacks)]
        counting = threading.Lock()
        key = 0

        def outcome(index: int, req_id: str, error: Optional[_native.ErrorDetails], message_json: str) -> None:
            if 0 <= index < len(callbacks):
                if error is not None:
                    callbacks[index](None, error_for(*error))
                else:
                    callbacks[index](json.loads(message_json), None)
            with counting:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last:
                _callbacks.unregister(key)

        setattr(outcome, "progress", progress)
        # Registered before the call: the last outcome may come before the call returns.
        key = _callbacks.register(outcome)
        pending = ctypes.c_void_p()
        _callbacks.calling(key, lambda user_data: lib.parley_client_send_file_messages(
            self.handle, ctypes.byref(pending), channel_url.encode("utf-8"), _encode_json([dict(f) for f in files]),
            self._progress_fn(progress), _callbacks.file_sent_trampoline, user_data))
        messages: List[Message] = json.loads(_native.take_string(pending))
        return messages

    def _resend_with_callback(self, req_id: str, progress: Optional[ProgressHandler], callback: ResultCallback) -> int:
        """Not for applications: :meth:`resend_message` with `callback(message, error)` run
        exactly once on the callback context. Returns the operation id."""
        operation = ctypes.c_uint64(0)
        self._start_send(progress, callback, lambda user_data: lib.parley_client_resend_message(
            self.handle, ctypes.byref(operation), req_id.encode("utf-8"), self._progress_fn(progress),
            _callbacks.result_trampoline, user_data))
        return operation.value

    def _send(self, function_name: str, channel_url: str, params: Mapping[str, Any],
              progress: Optional[ProgressHandler]) -> Tuple[Message, concurrent.futures.Future[Message]]:
        future, done = self._future_and_callback()
        pending_message, operation_id = self._send_with_callback(function_name, channel_url, params, progress, done)
        setattr(future, "operation_id", operation_id)
        return pending_message, cast("concurrent.futures.Future[Message]", future)

    def send_user_message(
        self, channel_url: str, message: Optional[str] = None, **params: Unpack[UserMessageParams],
    ) -> Tuple[Message, concurrent.futures.Future[Message]]:
        """Sends a user message. Returns (pending_message, future): the pending message is
        already stored (``sending_status`` "pending", its ``req_id``); the future gives the
        server's message or raises the failure. `params` are the send's fields
        (:class:`parley.UserMessageParams`: ``custom_type``, ``mentioned_user_ids``, ...)."""
        return self._send("parley_client_send_user_message", channel_url, user_message_document(message, params), None)

    def send_file_message(
        self, channel_url: str, progress: Optional[ProgressHandler] = None, **params: Unpack[FileMessageParams],
    ) -> Tuple[Message, concurrent.futures.Future[Message]]:
        """Sends a file message: ``url=...`` for a hosted file or ``file_path=...`` to upload
        one (``progress(req_id, sent, total)`` reports the upload). Returns (pending, future).
        `params` are the send's fields (:class:`parley.FileMessageParams`)."""
        return self._send("parley_client_send_file_message", channel_url, params, progress)

    def send_file_messages(
        self, channel_url: str, files: Sequence[FileMessageParams], progress: Optional[ProgressHandler] = None,
    ) -> List[Tuple[Message, concurrent.futures.Future[Message]]]:
        """Sends 1 to 20 file messages in one call, each its own message (each item is
        :meth:`send_file_message`'s params). Every item is checked before any is stored; the
        outbox delivers them in order. Returns (pending_message, future) per file, in order;
        ``progress(req_id, sent, total)`` reports each upload. A failed file is resent alone
        with :meth:`resend_message`."""
        results = [self._future_and_callback() for _ in files]
        pending = self._send_files_with_callbacks(channel_url, files, progress, [done for _, done in results])
        return [(message, cast("concurrent.futures.Future[Message]", future)) for message, (future, _) in zip(pending, results)]

    def resend_message(self, req_id: str, progress: Optional[ProgressHandler] = None) -> concurrent.futures.Future[Message]:
        """Resends a failed message (same req_id); the future gives the server's message."""
        future, done = self._future_and_callback()
        setattr(future, "operation_id", self._resend_with_callback(req_id, progress, done))
        return cast("concurrent.futures.Future[Message]", future)

    def cancel_message(self, req_id: str) -> None:
        """Cancels a pending message not yet sent, an upload in progress, or a failed message."""
        _native.check(lib.parley_client_cancel_message(self.handle, req_id.encode("utf-8")))

    def remove_failed_messages(self, channel_url: str) -> List[str]:
        """Removes the channel's failed messages; returns their req_ids."""
        out = ctypes.c_void_p()
        _native.check(lib.parley_client_remove_failed_messages(self.handle, ctypes.byref(out), channel_url.encode("utf-8")))
        removed: List[str] = json.loads(_native.take_string(out) or "[]")
        return removed

    # -- the cache -----------------------------------------------------------------

    def cached_channels(self, order: str = "latest_last_message", limit: int = 100) -> List[Channel]:
        """Cached channels (works offline)."""
        out = ctypes.c_void_p()
        _native.check(lib.parley_client_cached_channels(self.handle, ctypes.byref(out), order.encode("utf-8"), limit))
        channels: List[Channel] = json.loads(_native.take_string(out))
        return channels

    def cached_channel(self, channel_url: str) -> Optional[Channel]:
        """The cached channel, or None."""
        out = ctypes.c_void_p()
        status = lib.parley_client_cached_channel(self.handle, ctypes.byref(out), channel_url.encode("utf-8"))
        if status == Status.NOT_FOUND:
            return None
        _native.check(status)
        channel: Channel = json.loads(_native.take_string(out))
        return channel

    def cached_messages(self, channel_url: str, before_ts: int = -1, limit: int = 30) -> List[Message]:
        """Cached messages of the channel, oldest first (pending/failed ones last when before_ts is -1),
        holes included: :meth:`cached_message_page` says whether a page is known to be continuous."""
        out = ctypes.c_void_p()
        _native.check(lib.parley_client_cached_messages(self.handle, ctypes.byref(out), channel_url.encode("utf-8"), before_ts,
                                                        limit))
        messages: List[Message] = json.loads(_native.take_string(out))
        return messages

    def cached_message_page(self, channel_url: str, before_ts: int = -1, limit: int = 30) -> CachedMessagePage:
        """:meth:`cached_messages` marked: ``{"messages": [...], "continuous": bool}``.
        ``continuous`` is true only when the cache knows no message is missing between the
        page's first and last message (and, with `before_ts`, up to just before it). Ranges
        become known when loaded from the server (a message collection without filters, or
        :meth:`list_messages` with ``include_reply_type="ALL"`` and no filters) and stay so
        while the stream extends them. False: the page may span a hole (e.g. after a
        ``resync`` event); load that range from the server."""
        out = ctypes.c_void_p()
        _native.check(lib.parley_client_cached_message_page(self.handle, ctypes.byref(out), channel_url.encode("utf-8"), before_ts,
                                                            limit))
        page: CachedMessagePage = json.loads(_native.take_string(out))
        return page

    # -- collections ---------------------------------------------------------------

    def group_channel_collection(
        self, query: Union[None, GroupChannelListQuery, Mapping[str, Any]] = None, *,
        on_added: Optional[ChannelsHandler] = None, on_updated: Optional[ChannelsHandler] = None,
        on_deleted: Optional[DeletedHandler] = None, on_error: Optional[ErrorHandler] = None,
        on_deleted_channels: Optional[ChannelsHandler] = None, on_freshness_changed: Optional[FreshnessHandler] = None,
        **options: Unpack[GroupChannelListOptions],
    ) -> GroupChannelCollection:
        """A live list of the connected user's channels. `query` is a
        :class:`GroupChannelListQuery` (or its dict form); keyword options override its
        fields (``order=GroupChannelListOrder.CHRONOLOGICAL, limit=50``). Invalid options
        raise :class:`InvalidArgument` naming the field. Use it as a context manager.
        A deletion calls `on_deleted` with the URLs, then `on_deleted_channels` with the
        channels as the view last held them. `on_freshness_changed` gets each change of its
        :class:`parley.Freshness`."""
        return GroupChannelCollection._create(self, make_query(query, options), on_added, on_updated, on_deleted, on_error,
                                              on_deleted_channels, on_freshness_changed)

    def message_collection(
        self, channel_url: str, starting_point: int = NEWEST, params: Union[None, MessageListParams, Mapping[str, Any]] = None, *,
        on_added: Optional[MessagesHandler] = None, on_updated: Optional[MessagesHandler] = None,
        on_deleted: Optional[MessagesHandler] = None, on_channel_updated: Optional[ChannelHandler] = None,
        on_channel_deleted: Optional[ChannelDeletedHandler] = None, on_huge_gap_detected: Optional[HugeGapHandler] = None,
        on_error: Optional[ErrorHandler] = None, on_freshness_changed: Optional[FreshnessHandler] = None,
        **options: Unpack[MessageListOptions],
    ) -> MessageCollection:
        """The live chat view of `channel_url` from `starting_point` (ms; default the newest
        end). `params` is a :class:`MessageListParams` (or its dict form); keyword options
        override its fields (``previous_result_size=50, reverse=True``). Call ``start()``,
        then page; use it as a context manager. The handlers' `channel` is the channel as
        cached, None when the cache does not hold it. `on_freshness_changed` gets each change
        of its :class:`parley.Freshness`."""
        return MessageCollection._create(self, channel_url, starting_point, make_params(params, options), on_added, on_updated,
                                         on_deleted, on_channel_updated, on_channel_deleted, on_huge_gap_detected, on_error,
                                         on_freshness_changed)

    def sync_view(
        self, channel_url: str, viewpoint: int = NEWEST_VIEWPOINT, options: Union[None, SyncViewOptions, Mapping[str, Any]] = None, *,
        on_action: Optional[ActionHandler] = None, on_error: Optional[ErrorHandler] = None,
        on_freshness_changed: Optional[FreshnessHandler] = None, **overrides: Unpack[SyncViewOverrides],
    ) -> SyncView:
        """The SyncManager-style view of `channel_url` from `viewpoint` (ms; default the newest
        end). `options` is a :class:`SyncViewOptions` (or its dict form); keyword options
        override its fields (``limit=50, sender_user_ids=["bob"]``). Nothing loads until the
        first ``fetch``; use it as a context manager. `on_freshness_changed` gets each change of
        its :class:`parley.Freshness`."""
        return SyncView._create(self, channel_url, viewpoint, make_options(options, overrides), on_action, on_error,
                                on_freshness_changed)

    def search_messages(
        self, query: str, *, order: Union[SearchOrder, str] = SearchOrder.TIME, channel_urls: Optional[List[str]] = None,
        custom_types: Optional[List[str]] = None, sender_ids: Optional[List[str]] = None, message_ts_from: Optional[int] = None,
        message_ts_to: Optional[int] = None, limit: int = 20, advanced_query: bool = False, highlight_start: str = "<b>",
        highlight_end: str = "</b>", search_server: bool = False, relevance_window: Optional[int] = None,
        on_added: Optional[SearchHandler] = None, on_updated: Optional[SearchHandler] = None,
        on_deleted: Optional[SearchHandler] = None, on_error: Optional[ErrorHandler] = None,
        on_freshness_changed: Optional[FreshnessHandler] = None,
    ) -> MessageSearch:
        """A live search of the cached messages for `query` (plain text: every word, the last
        as a prefix; ``advanced_query=True``: an FTS5 expression), optionally also of the
        server's (``search_server=True``). Relevance order ranks the newest ``relevance_window``
        matches (1 to 1,000,000; None: 5,000); ``load_older()`` moves to the next window. Nothing
        loads until ``load_more()``; use it as a context manager. Invalid params raise
        :class:`InvalidArgument` naming the field."""
        params = search_params(
            query, order=order, channel_urls=channel_urls, custom_types=custom_types, sender_ids=sender_ids,
            message_ts_from=message_ts_from, message_ts_to=message_ts_to, limit=limit, advanced_query=advanced_query,
            highlight_start=highlight_start, highlight_end=highlight_end, search_server=search_server,
            relevance_window=relevance_window)
        return MessageSearch(self, params, on_added, on_updated, on_deleted, on_error, on_freshness_changed)

    def clear_cached_data(self) -> None:
        """Removes everything cached for the current user (pending and failed messages too).
        Open collections and sync views report what they showed as deleted, then reload
        from the server (after the next catch-up when offline)."""
        _native.check(lib.parley_client_clear_cached_data(self.handle))

    def rekey_cache(self, key: Optional[str] = None, passphrase: Optional[str] = None,
                    passphrase_iterations: Optional[int] = None, passphrase_memory_mb: Optional[int] = None) -> None:
        """Encrypts the current user's cache file with another key (``key``: 64 hexadecimal
        digits) or passphrase, or removes its encryption (neither). The file is rewritten
        beside itself and renamed over the old one: a crash leaves it whole under one key or
        the other. The client uses the new key from then on. Blocks while the file is
        rewritten; raises :class:`InvalidState` when no cache file is open (connect first),
        :class:`CacheKeyError` when the client's current key does not open the file."""
        document: Dict[str, Any] = {}
        if key is not None:
            document["cache_key"] = key
        if passphrase is not None:
            document["cache_passphrase"] = passphrase
        if passphrase_iterations is not None:
            document["cache_passphrase_iterations"] = passphrase_iterations
        if passphrase_memory_mb is not None:
            document["cache_passphrase_memory_mb"] = passphrase_memory_mb
        _native.check(lib.parley_client_rekey_cache(self.handle, _encode_json(document)))
