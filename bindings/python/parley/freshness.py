"""Freshness of the live views and where their pages came from (docs/C-API.md, "Freshness").

Every view (:class:`parley.GroupChannelCollection`, :class:`parley.MessageCollection`,
:class:`parley.SyncView`) has a :class:`Freshness` (its ``freshness`` property), reports each
change to ``on_freshness_changed`` (and, on an :class:`parley.AsyncClient`, to the async
iterator ``freshness_changes()``), and says where each load's result came from: the lists
loads give are :class:`Page` objects (plain lists with ``origin``, a :class:`PageOrigin`); a
sync view's :class:`parley.FetchResult` has ``origin``.
"""
from __future__ import annotations

import ctypes
import enum
from typing import Any, Callable, Iterable, List, Optional, TypeVar

from . import _callbacks, _native

T = TypeVar("T")


class Freshness(str, enum.Enum):
    """Whether what a view shows is live or possibly stale (``PARLEY_FRESHNESS_*``); the first
    that holds: ``OFFLINE`` (no event stream), ``CATCHING_UP`` (the stream is open and the
    catch-up after it, or the view's own part of it, runs), ``CACHED`` (the server has not
    confirmed what the view shows: shown from the cache, or nothing loaded yet), ``LIVE``."""

    LIVE = "live"
    CACHED = "cached"
    CATCHING_UP = "catching_up"
    OFFLINE = "offline"


class PageOrigin(str, enum.Enum):
    """Where a load's result came from (``PARLEY_PAGE_ORIGIN_*``): ``SERVER`` when the server's
    answer to that load vouched for all of it, ``CACHE`` otherwise (read from the cache, or
    nothing to read past the end)."""

    CACHE = "cache"
    SERVER = "server"


_FRESHNESS_CODES = {1: Freshness.LIVE, 2: Freshness.CACHED, 3: Freshness.CATCHING_UP, 4: Freshness.OFFLINE}
_ORIGIN_CODES = {1: PageOrigin.CACHE, 2: PageOrigin.SERVER}

#: ``on_freshness_changed(freshness)``: called for each change, on the callback context.
FreshnessHandler = Callable[[Freshness], None]


class Page(List[T]):
    """A load's result: the list it gave, with ``origin`` (None when it is not known, e.g. the
    view was disposed before the result was read)."""

    def __init__(self, items: Iterable[T] = (), origin: Optional[PageOrigin] = None) -> None:
        super().__init__(items)
        self.origin = origin

    def __repr__(self) -> str:
        return f"Page({list.__repr__(self)}, origin={self.origin!r})"


def freshness_of(function: Any, handle: Optional[int]) -> Freshness:
    """A view's freshness through its getter (`function(handle, &out)`); raises what it reports."""
    out = ctypes.c_int(0)
    _native.check(function(handle, ctypes.byref(out)))
    return _FRESHNESS_CODES[out.value]


def origin_of(function: Any, handle: Optional[int]) -> Optional[PageOrigin]:
    """The origin a view's getter reports for its last result; None when there is none or the
    view is gone (a completion may run after dispose)."""
    if handle is None:
        return None
    out = ctypes.c_int(0)
    if function(handle, ctypes.byref(out)) != 0:
        return None
    return _ORIGIN_CODES.get(out.value)


def _freshness_changed(user_data: Optional[int], code: int) -> None:
    # The view's persistent callable gets the Freshness (its `_receive` tells it from the rest).
    value = _FRESHNESS_CODES.get(code)
    if value is not None:
        _callbacks._run(_callbacks._peek(user_data), value)


#: The handlers' ``freshness_changed`` (one pointer, alive as long as the module).
freshness_trampoline = _native.FRESHNESS_FN(_freshness_changed)
