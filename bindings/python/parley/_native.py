"""Loading libparley and declaring the C functions (ctypes).

The one place that knows the C ABI: the structs, the callback (CFUNCTYPE) types, the
signature of every C function the package calls, and the helpers that turn its statuses,
errors and returned strings into Python values.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
from pathlib import Path
from typing import Any, List, Optional, Tuple

from .errors import ParleyError, Status, error_for

c_int_p = ctypes.POINTER(ctypes.c_int)
c_void_pp = ctypes.POINTER(ctypes.c_void_p)


class CError(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_int),
        ("message", ctypes.c_char_p),
        ("http_status", ctypes.c_int),
        ("server_code", ctypes.c_int),
    ]


# -- the client's callbacks (include/parley/client.h, session.h, sending.h) ------------------

LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)
CALLBACK_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
RESULT_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(CError), ctypes.c_char_p)
CONNECTION_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(CError))
EVENT_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p)
PROGRESS_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64)
FILE_SENT_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(CError), ctypes.c_char_p)

# -- collections (include/parley/group_channel_collection.h) -------------------------------


class CCollectionContext(ctypes.Structure):
    """parley_collection_context."""

    _fields_ = [("source", ctypes.c_int), ("source_name", ctypes.c_char_p), ("detail", ctypes.c_char_p)]


CHANNELS_EVENT_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(CCollectionContext), ctypes.c_char_p)
COLLECTION_ERROR_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(CError))
FRESHNESS_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int)  # every view's freshness_changed
GROUP_CHANNEL_COLLECTION_HANDLER_VERSION = 3


class CGroupChannelCollectionHandler(ctypes.Structure):
    """parley_group_channel_collection_handler."""

    _fields_ = [
        ("version", ctypes.c_int),
        ("added", CHANNELS_EVENT_FN),
        ("updated", CHANNELS_EVENT_FN),
        ("deleted", CHANNELS_EVENT_FN),
        ("error", COLLECTION_ERROR_FN),
        ("user_data", ctypes.c_void_p),
        ("deleted_channels", CHANNELS_EVENT_FN),  # version 2
        ("freshness_changed", FRESHNESS_FN),  # version 3
    ]


# -- message collections (include/parley/message_collection.h) ------------------------------


class CMessageEvent(ctypes.Structure):
    """parley_message_event."""

    _fields_ = [
        ("kind", ctypes.c_int), ("source", ctypes.c_int), ("source_name", ctypes.c_char_p), ("detail", ctypes.c_char_p),
        ("sending_status", ctypes.c_int), ("channel_url", ctypes.c_char_p), ("channel_json", ctypes.c_char_p),
        ("messages_json", ctypes.c_char_p),
    ]


MESSAGE_EVENT_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(CMessageEvent))
MESSAGE_COLLECTION_HANDLER_VERSION = 2


class CMessageCollectionHandler(ctypes.Structure):
    """parley_message_collection_handler."""

    _fields_ = [
        ("version", ctypes.c_int), ("event", MESSAGE_EVENT_FN), ("error", COLLECTION_ERROR_FN), ("user_data", ctypes.c_void_p),
        ("freshness_changed", FRESHNESS_FN),  # version 2
    ]


# -- sync views (include/parley/sync_view.h) ----------------------------------------------------

ACTION_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_char_p)
FETCH_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(CError), ctypes.c_int, ctypes.c_int)
SYNC_VIEW_HANDLER_VERSION = 2


class CSyncViewHandler(ctypes.Structure):
    """parley_sync_view_handler."""

    _fields_ = [
        ("version", ctypes.c_int), ("action", ACTION_FN), ("error", COLLECTION_ERROR_FN), ("user_data", ctypes.c_void_p),
        ("freshness_changed", FRESHNESS_FN),  # version 2
    ]


# -- message search (include/parley/search.h) --------------------------------------------------

SEARCH_RESULTS_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)
SEARCH_LOAD_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(CError), ctypes.c_char_p)
MESSAGE_SEARCH_HANDLER_VERSION = 1


class CMessageSearchHandler(ctypes.Structure):
    """parley_message_search_handler."""

    _fields_ = [
        ("version", ctypes.c_int), ("added", SEARCH_RESULTS_FN), ("updated", SEARCH_RESULTS_FN), ("deleted", SEARCH_RESULTS_FN),
        ("error", COLLECTION_ERROR_FN), ("user_data", ctypes.c_void_p), ("freshness_changed", FRESHNESS_FN),
    ]


# -- loading -----------------------------------------------------------------------------------


def _candidates() -> List[Tuple[str, Optional[str]]]:
    """Where the library may be, in the order it is tried: (place, path or loader name); a place
    that offers nothing has None, and its text says why (the ImportError lists every place)."""
    here = Path(__file__).resolve().parent
    # 1. A library bundled inside the installed package (the parley-chat wheel carries one).
    found: List[Tuple[str, Optional[str]]] = [("bundled", str(path)) for path in sorted(here.glob("libparley.so*"))]
    if not found:
        found.append((f"bundled: no libparley.so* in {here}", None))
    # 2. An explicit path: when it does not load, that is the error (no other library replaces it).
    explicit = os.environ.get("PARLEY_LIBRARY")
    if explicit:
        return found + [("PARLEY_LIBRARY", explicit), ("system loader: not tried, PARLEY_LIBRARY is set", None)]
    found.append(("PARLEY_LIBRARY: not set", None))
    # 3. The system loader (ldconfig's cache, LD_LIBRARY_PATH, the default directories).
    system = ctypes.util.find_library("parley")
    if system:
        found.append(("system loader", system))
    found.append(("system loader", "libparley.so.0"))
    return found


def _path_of(name: str) -> str:
    """The loaded library's path: `name` made absolute when it is a path, else the file the
    loader mapped for that bare name (Linux: /proc/self/maps)."""
    if "/" in name:
        return os.path.abspath(name)
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                fields = line.split(None, 5)
                if len(fields) == 6 and os.path.basename(fields[5].strip()).startswith("libparley.so"):
                    return fields[5].strip()
    except OSError:
        pass
    return name


def _load() -> Tuple[ctypes.CDLL, str]:
    tried = []
    for place, candidate in _candidates():
        if candidate is None:
            tried.append(place)
            continue
        try:
            return ctypes.CDLL(candidate), _path_of(candidate)
        except OSError as error:
            tried.append(f"{place}: {error}")
    raise ImportError(
        "cannot load libparley: install the parley-chat wheel (it carries the library), set PARLEY_LIBRARY to "
        "the library's path, or install the library where the system loader finds it. Tried, in order:\n  "
        + "\n  ".join(tried)
    )


lib, library_path = _load()


def _declare(name: str, restype: Any, *argtypes: Any) -> None:
    """Sets the signature of the C function `name`: every function the package calls is declared here."""
    function = getattr(lib, name)
    function.restype = restype
    function.argtypes = list(argtypes)


_declare("parley_version", ctypes.c_char_p)
_declare("parley_last_error_message", ctypes.c_char_p)
_declare("parley_error_name", ctypes.c_char_p, ctypes.c_int)
_declare("parley_error_is_retryable", ctypes.c_int, ctypes.POINTER(CError))
_declare("parley_configuration_keys", ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))
_declare("parley_runtime_configure", ctypes.c_int, ctypes.c_char_p)
_declare("parley_runtime_info", ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))
_declare("parley_free", None, ctypes.c_void_p)
_declare("parley_client_create", ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p)
_declare("parley_client_destroy", ctypes.c_int, ctypes.c_void_p)
_declare("parley_client_event_fd", ctypes.c_int, ctypes.c_void_p, c_int_p)
_declare("parley_client_dispatch", ctypes.c_int, ctypes.c_void_p, ctypes.c_int, c_int_p)
_declare("parley_dispatch_group_create", ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))
_declare("parley_dispatch_group_event_fd", ctypes.c_int, ctypes.c_void_p, c_int_p)
_declare("parley_dispatch_group_dispatch", ctypes.c_int, ctypes.c_void_p, ctypes.c_int, c_int_p)
_declare("parley_dispatch_group_destroy", ctypes.c_int, ctypes.c_void_p)
_declare("parley_client_set_dispatch_group", ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_declare("parley_client_set_log_callback", ctypes.c_int, ctypes.c_void_p, LOG_FN, ctypes.c_void_p, ctypes.c_int)
_declare("parley_client_post", ctypes.c_int, ctypes.c_void_p, CALLBACK_FN, ctypes.c_void_p)
_declare(
    "parley_client_request", ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64),
    ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, RESULT_FN, ctypes.c_void_p,
)
_declare("parley_client_cancel", ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64)
_declare(
    "parley_client_connect", ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64),
    ctypes.c_char_p, ctypes.c_char_p, RESULT_FN, ctypes.c_void_p,
)
_declare("parley_client_disconnect", ctypes.c_int, ctypes.c_void_p)
_declare("parley_client_current_user_id", ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))
_declare(
    "parley_client_perform", ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64),
    ctypes.c_char_p, ctypes.c_char_p, RESULT_FN, ctypes.c_void_p,
)
_declare("parley_operations", ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))
_declare("parley_event_categories", ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))
_declare("parley_client_set_connection_handler", ctypes.c_int, ctypes.c_void_p, CONNECTION_FN, ctypes.c_void_p)
_declare("parley_client_set_event_handler", ctypes.c_int, ctypes.c_void_p, EVENT_FN, ctypes.c_void_p)
_declare("parley_client_add_connection_handler", ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, CONNECTION_FN, ctypes.c_void_p)
_declare("parley_client_remove_connection_handler", ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)
_declare("parley_client_add_event_handler", ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, EVENT_FN, ctypes.c_void_p)
_declare("parley_client_remove_event_handler", ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)
_declare("parley_query_create", ctypes.c_int, c_void_pp, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)
_declare("parley_query_load_next_page", ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64), RESULT_FN, ctypes.c_void_p)
_declare("parley_query_has_next", ctypes.c_int, ctypes.c_void_p, c_int_p)
_declare("parley_query_is_loading", ctypes.c_int, ctypes.c_void_p, c_int_p)
_declare("parley_query_dispose", ctypes.c_int, ctypes.c_void_p)
_declare("parley_client_reconnect", ctypes.c_int, ctypes.c_void_p)
_declare("parley_client_set_session_token", ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)
_declare("parley_client_connection_state", ctypes.c_int, ctypes.c_void_p, c_int_p)
_declare(
    "parley_client_send_user_message", ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
    ctypes.POINTER(ctypes.c_uint64), ctypes.c_char_p, ctypes.c_char_p, RESULT_FN, ctypes.c_void_p,
)
_declare(
    "parley_client_send_file_message", ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
    ctypes.POINTER(ctypes.c_uint64), ctypes.c_char_p, ctypes.c_char_p, PROGRESS_FN, RESULT_FN, ctypes.c_void_p,
)
_declare(
    "parley_client_send_file_messages", ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
    ctypes.c_char_p, ctypes.c_char_p, PROGRESS_FN, FILE_SENT_FN, ctypes.c_void_p,
)
_declare(
    "parley_client_resend_message", ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64),
    ctypes.c_char_p, PROGRESS_FN, RESULT_FN, ctypes.c_void_p,
)
_declare("parley_client_cancel_message", ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)
_declare("parley_client_remove_failed_messages", ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p)
_declare("parley_client_cached_channels", ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_int)
_declare("parley_client_cached_channel", ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p)
_declare(
    "parley_client_cached_messages", ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p,
    ctypes.c_int64, ctypes.c_int,
)
_declare(
    "parley_client_cached_message_page", ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p,
    ctypes.c_int64, ctypes.c_int,
)
_declare("parley_client_clear_cached_data", ctypes.c_int, ctypes.c_void_p)
_declare("parley_client_rekey_cache", ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)
_declare("parley_client_metrics", ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))

# Collections.
_declare("parley_collection_sources", ctypes.c_int, c_void_pp)
_declare("parley_group_channel_collection_create", ctypes.c_int, c_void_pp, ctypes.c_void_p, ctypes.c_char_p,
         ctypes.POINTER(CGroupChannelCollectionHandler))
_declare("parley_group_channel_collection_load_more", ctypes.c_int, ctypes.c_void_p, RESULT_FN, ctypes.c_void_p)
_declare("parley_group_channel_collection_has_more", ctypes.c_int, ctypes.c_void_p, c_int_p)
_declare("parley_group_channel_collection_channels", ctypes.c_int, ctypes.c_void_p, c_void_pp)
_declare("parley_group_channel_collection_dispose", ctypes.c_int, ctypes.c_void_p)

# Message collections.
_declare("parley_message_collection_create", ctypes.c_int, c_void_pp, ctypes.c_void_p, ctypes.c_char_p,
         ctypes.c_int64, ctypes.c_char_p, ctypes.POINTER(CMessageCollectionHandler))
_declare("parley_message_collection_start", ctypes.c_int, ctypes.c_void_p, RESULT_FN, RESULT_FN, ctypes.c_void_p)
_declare("parley_message_collection_load_previous", ctypes.c_int, ctypes.c_void_p, RESULT_FN, ctypes.c_void_p)
_declare("parley_message_collection_load_next", ctypes.c_int, ctypes.c_void_p, RESULT_FN, ctypes.c_void_p)
_declare("parley_message_collection_has_previous", ctypes.c_int, ctypes.c_void_p, c_int_p)
_declare("parley_message_collection_has_next", ctypes.c_int, ctypes.c_void_p, c_int_p)
_declare("parley_message_collection_messages", ctypes.c_int, ctypes.c_void_p, c_void_pp)
_declare("parley_message_collection_dispose", ctypes.c_int, ctypes.c_void_p)

# Sync views.
_declare("parley_sync_view_create", ctypes.c_int, c_void_pp, ctypes.c_void_p, ctypes.c_char_p,
         ctypes.c_int64, ctypes.c_char_p, ctypes.POINTER(CSyncViewHandler))
_declare("parley_sync_view_fetch", ctypes.c_int, ctypes.c_void_p, ctypes.c_int, FETCH_FN, ctypes.c_void_p)
_declare("parley_sync_view_fetch_all_next", ctypes.c_int, ctypes.c_void_p, FETCH_FN, ctypes.c_void_p)
_declare("parley_sync_view_reset_viewpoint", ctypes.c_int, ctypes.c_void_p, ctypes.c_int64)
_declare("parley_sync_view_viewpoint", ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64))
_declare("parley_sync_view_messages", ctypes.c_int, ctypes.c_void_p, ctypes.c_int, c_void_pp)
_declare("parley_sync_view_dispose", ctypes.c_int, ctypes.c_void_p)
_declare("parley_message_search_create", ctypes.c_int, c_void_pp, ctypes.c_void_p, ctypes.c_char_p,
         ctypes.POINTER(CMessageSearchHandler))
_declare("parley_message_search_load_more", ctypes.c_int, ctypes.c_void_p, SEARCH_LOAD_FN, ctypes.c_void_p)
_declare("parley_message_search_load_older", ctypes.c_int, ctypes.c_void_p, SEARCH_LOAD_FN, ctypes.c_void_p)
_declare("parley_message_search_has_more", ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int))
_declare("parley_message_search_relevance_window", ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64),
         ctypes.POINTER(ctypes.c_int))
_declare("parley_message_search_results", ctypes.c_int, ctypes.c_void_p, c_void_pp)
_declare("parley_message_search_dispose", ctypes.c_int, ctypes.c_void_p)

# Freshness and page origin of every view.
for _view in ("group_channel_collection", "message_collection", "sync_view", "message_search"):
    _declare(f"parley_{_view}_freshness", ctypes.c_int, ctypes.c_void_p, c_int_p)
_declare("parley_group_channel_collection_last_page_origin", ctypes.c_int, ctypes.c_void_p, c_int_p)
_declare("parley_message_collection_last_page_origin", ctypes.c_int, ctypes.c_void_p, c_int_p)
_declare("parley_sync_view_last_fetch_origin", ctypes.c_int, ctypes.c_void_p, c_int_p)
_declare("parley_message_search_last_page_origin", ctypes.c_int, ctypes.c_void_p, c_int_p)


# -- statuses, errors and returned strings --------------------------------------------------


def last_error_message() -> str:
    """The message of the calling thread's last failed call."""
    return (lib.parley_last_error_message() or b"").decode("utf-8", "replace")


def check(status: int) -> None:
    """Raises the ParleyError of a failed synchronous call's status (PARLEY_OK passes)."""
    if status != Status.OK:
        raise error_for(status, last_error_message())


ErrorDetails = Tuple[int, str, int, int]


def error_details(error: Any) -> ErrorDetails:
    """A `const parley_error *` given to a callback, as (code, message, http_status, server_code):
    the arguments of :func:`parley.error_for`."""
    e = error.contents
    return e.code, (e.message or b"").decode("utf-8", "replace"), e.http_status, e.server_code


def error_from(error: Any) -> ParleyError:
    """A `const parley_error *` given to a callback, as its exception."""
    return error_for(*error_details(error))


def take_string(pointer: ctypes.c_void_p) -> str:
    """Copies a string the library returned and frees it ("" for NULL)."""
    if not pointer.value:
        return ""
    try:
        return ctypes.string_at(pointer.value).decode("utf-8")
    finally:
        lib.parley_free(pointer.value)


def take_json(pointer: ctypes.c_void_p) -> Any:
    """Decodes a JSON text the library returned and frees it (None for NULL)."""
    if not pointer.value:
        return None
    return json.loads(take_string(pointer))


def read_flag(function: Any, *arguments: Any) -> bool:
    """A boolean getter's answer: `function(*arguments, &out)` (raises what it reports)."""
    out = ctypes.c_int(0)
    check(function(*arguments, ctypes.byref(out)))
    return bool(out.value)


def read_json(function: Any, *arguments: Any) -> Any:
    """A JSON getter's answer, decoded: `function(*arguments, &out)` (raises what it reports;
    None for NULL)."""
    out = ctypes.c_void_p()
    check(function(*arguments, ctypes.byref(out)))
    return take_json(out)


class HandleOwner:
    """An object that owns one library handle (a client, a view, a query): :attr:`handle`
    raises InvalidHandle once it is released. `_released` says how, in that error."""

    _released = "the object is released"

    def __init__(self) -> None:
        self._handle: Optional[int] = None

    @property
    def handle(self) -> int:
        if self._handle is None:
            raise error_for(Status.INVALID_HANDLE, self._released)
        return self._handle

    def _release(self) -> Optional[int]:
        """Forgets the handle and returns it (None when it was already released)."""
        handle, self._handle = self._handle, None
        return handle
