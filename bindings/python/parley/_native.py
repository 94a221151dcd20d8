"""Loading libparley and declaring the C functions (ctypes)."""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path

c_int_p = ctypes.POINTER(ctypes.c_int)

LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)
CALLBACK_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class CError(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_int),
        ("message", ctypes.c_char_p),
        ("http_status", ctypes.c_int),
        ("server_code", ctypes.c_int),
    ]


RESULT_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(CError), ctypes.c_char_p)
CONNECTION_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(CError))
EVENT_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p)
PROGRESS_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64)


def _candidates() -> list[str]:
    found: list[str] = []
    explicit = os.environ.get("PARLEY_LIBRARY")
    if explicit:
        return [explicit]  # an explicit choice is never silently replaced
    here = Path(__file__).resolve().parent
    found += [str(path) for path in sorted(here.glob("libparley.so*"))]
    system = ctypes.util.find_library("parley")
    if system:
        found.append(system)
    found.append("libparley.so.0")
    return found


def _load() -> ctypes.CDLL:
    errors = []
    for candidate in _candidates():
        try:
            return ctypes.CDLL(candidate)
        except OSError as error:
            errors.append(f"{candidate}: {error}")
    raise ImportError(
        "cannot load libparley; set PARLEY_LIBRARY to the library's path. Tried:\n  " + "\n  ".join(errors)
    )


lib = _load()


def _declare(name: str, restype, *argtypes) -> None:
    function = getattr(lib, name)
    function.restype = restype
    function.argtypes = list(argtypes)


_declare("parley_version", ctypes.c_char_p)
_declare("parley_last_error_message", ctypes.c_char_p)
_declare("parley_error_name", ctypes.c_char_p, ctypes.c_int)
_declare("parley_free", None, ctypes.c_void_p)
_declare("parley_client_create", ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p)
_declare("parley_client_destroy", ctypes.c_int, ctypes.c_void_p)
_declare("parley_client_event_fd", ctypes.c_int, ctypes.c_void_p, c_int_p)
_declare("parley_client_dispatch", ctypes.c_int, ctypes.c_void_p, ctypes.c_int, c_int_p)
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
