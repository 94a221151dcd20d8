"""Searching messages (include/parley/search.h): a live view of the cached messages matching a
query, which works offline and can continue on the server.

``client.search_messages("lunch fri")`` finds the cached messages containing "lunch" and a
word starting with "fri" (case and the accents of Latin letters do not matter; the query is
split into words by the index's own tokenizer, and punctuation and symbols only separate
words, so any text is a valid query). :meth:`MessageSearch.load_more` loads a page of results; the
view then keeps them equal to a fresh search of the cache, reporting each change as a
:class:`SearchChange` (added / updated / deleted). ``search_server=True`` makes each load ask
the server for its next page too (docs/C-API.md "Searching messages"). In relevance order the
search ranks a window of the newest matches (``relevance_window``, 5,000);
:meth:`MessageSearch.load_older` moves to the next window of older ones.
"""
from __future__ import annotations

import concurrent.futures
import ctypes
import enum
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, TypedDict, Union, cast

from . import _callbacks, _native
from ._collection_base import ErrorHandler, NativeCollection
from ._native import SEARCH_LOAD_FN, SEARCH_RESULTS_FN
from .errors import ParleyError
from .freshness import FreshnessHandler, Page, PageOrigin, origin_of
from .objects import Message

if TYPE_CHECKING:
    from .client import Client

lib = _native.lib


class SearchOrder(str, enum.Enum):
    """The order of results: newest first, or most relevant first (ties newest first) among a
    window of the newest matches."""

    TIME = "time"
    RELEVANCE = "relevance"


@dataclass(frozen=True)
class RelevanceWindow:
    """Where a relevance search stands: how many matches its current window ranks, and whether
    older matches lie below it (:meth:`MessageSearch.load_older` moves there)."""

    ranked_matches: int
    older_matches_exist: bool


class SearchResult(TypedDict):
    """One result: the message, its text around the matches with the matched words between
    the highlight markers, a score (bigger is more relevant; the cache's and the server's
    are not comparable; 0 for the cache's results in time order, which does not rank) and where the shown copy comes from ("cache" or "server")."""

    message: Message
    snippet: str
    score: float
    origin: str


class SearchChangeKind(enum.Enum):
    ADDED = "added"
    UPDATED = "updated"
    DELETED = "deleted"


@dataclass(frozen=True)
class SearchChange:
    """Results that entered the view, changed (message, snippet, score or origin) or left it,
    in the view's order. A load's own results come with its Future, not as a change."""

    kind: SearchChangeKind
    results: List[SearchResult]


SearchHandler = Callable[[List[SearchResult]], None]


def _results(kind: SearchChangeKind) -> Any:
    def receive(user_data: Optional[int], results_json: Optional[bytes]) -> None:
        target = _callbacks._peek(user_data)
        if target is not None:
            _callbacks._run(target, SearchChange(kind, json.loads((results_json or b"[]").decode("utf-8"))))

    return SEARCH_RESULTS_FN(receive)


_added_trampoline = _results(SearchChangeKind.ADDED)
_updated_trampoline = _results(SearchChangeKind.UPDATED)
_deleted_trampoline = _results(SearchChangeKind.DELETED)


def _loaded(user_data: Optional[int], error: Any, results_json: Optional[bytes]) -> None:
    _callbacks.finish(user_data, error, lambda: json.loads((results_json or b"[]").decode("utf-8")))


_load_trampoline = SEARCH_LOAD_FN(_loaded)


def search_params(
    query: str, *, order: Union[SearchOrder, str] = SearchOrder.TIME, channel_urls: Optional[List[str]] = None,
    custom_types: Optional[List[str]] = None, sender_ids: Optional[List[str]] = None, message_ts_from: Optional[int] = None,
    message_ts_to: Optional[int] = None, limit: int = 20, advanced_query: bool = False, highlight_start: str = "<b>",
    highlight_end: str = "</b>", search_server: bool = False, relevance_window: Optional[int] = None,
) -> Dict[str, Any]:
    """The params document of ``parley_message_search_create`` (None fields left out)."""
    document: Dict[str, Any] = {
        "query": query, "order": order.value if isinstance(order, SearchOrder) else order, "limit": limit, "advanced_query": advanced_query,
        "highlight_start": highlight_start, "highlight_end": highlight_end, "search_server": search_server,
    }
    optional = {"channel_urls": channel_urls, "custom_types": custom_types, "sender_ids": sender_ids,
                "message_ts_from": message_ts_from, "message_ts_to": message_ts_to, "relevance_window": relevance_window}
    document.update({key: value for key, value in optional.items() if value is not None})
    return document


class MessageSearch(NativeCollection[SearchChange]):
    """A live message search. Create it with :meth:`parley.Client.search_messages`, call
    :meth:`load_more` for each page, read :attr:`results`, and dispose it with
    :meth:`dispose` or a ``with`` block. The on_* handlers run on the client's callback
    context, never after :meth:`dispose` returned."""

    _dispose_function = lib.parley_message_search_dispose
    _freshness_function = lib.parley_message_search_freshness

    def __init__(self, client: Client, params: Dict[str, Any], on_added: Optional[SearchHandler] = None,
                 on_updated: Optional[SearchHandler] = None, on_deleted: Optional[SearchHandler] = None,
                 on_error: Optional[ErrorHandler] = None, on_freshness_changed: Optional[FreshnessHandler] = None) -> None:
        """Not for applications: :meth:`parley.Client.search_messages` creates the search."""
        super().__init__()
        self.query = str(params["query"])
        self._handlers = {SearchChangeKind.ADDED: on_added, SearchChangeKind.UPDATED: on_updated,
                          SearchChangeKind.DELETED: on_deleted}
        handler = _native.CMessageSearchHandler(version=_native.MESSAGE_SEARCH_HANDLER_VERSION, added=_added_trampoline,
                                                updated=_updated_trampoline, deleted=_deleted_trampoline)
        self._open(client, on_error, on_freshness_changed, lib.parley_message_search_create, handler, document=params)

    def _deliver(self, change: SearchChange) -> None:
        handler = self._handlers[change.kind]
        if handler is not None:
            handler(change.results)

    def load_more_with_callback(self, done: Callable[[Optional[List[SearchResult]], Optional[ParleyError]], None]) -> None:
        """Loads the next page and calls ``done(results, error)`` on the callback context."""
        handle = self.handle
        _callbacks.start(done, lambda key: lib.parley_message_search_load_more(handle, _load_trampoline, key))

    def load_older_with_callback(self, done: Callable[[Optional[List[SearchResult]], Optional[ParleyError]], None]) -> None:
        """:meth:`load_older`, calling ``done(results, error)`` on the callback context."""
        handle = self.handle
        _callbacks.start(done, lambda key: lib.parley_message_search_load_older(handle, _load_trampoline, key))

    def load_more(self) -> concurrent.futures.Future[Page[SearchResult]]:
        """Loads the next ``limit`` results (the first call: the first ones); the Future gets
        those it added, in the view's order, as a :class:`parley.Page` whose ``origin`` says
        whether the server answered the load. In relevance order it pages within the current
        window (:attr:`relevance_window`)."""
        return self._future_of(self.load_more_with_callback)

    def load_older(self) -> concurrent.futures.Future[Page[SearchResult]]:
        """Relevance order: moves to the next window of older matches and loads its first
        ``limit`` results (the Future gets them; those shown before are reported deleted).
        Without older matches nothing changes and the page is empty; in time order it raises
        :class:`parley.InvalidState` (``load_more`` goes on there)."""
        return self._future_of(self.load_older_with_callback)

    def _future_of(self, start: Callable[[Callable[[Optional[List[SearchResult]], Optional[ParleyError]], None]], None]
                   ) -> concurrent.futures.Future[Page[SearchResult]]:
        future: concurrent.futures.Future[Page[SearchResult]] = concurrent.futures.Future()
        handle = self.handle

        def complete(results: Optional[List[SearchResult]], error: Optional[ParleyError]) -> None:
            if error is not None:
                future.set_exception(error)
            else:
                # Read while the completion runs: this load's origin.
                origin = origin_of(lib.parley_message_search_last_page_origin, handle)
                future.set_result(Page(cast(List[SearchResult], results), origin))

        start(complete)
        return future

    @property
    def last_page_origin(self) -> Optional[PageOrigin]:
        """Where the last load's results came from (None before the first and after a failure)."""
        return origin_of(lib.parley_message_search_last_page_origin, self.handle)

    @property
    def has_more(self) -> bool:
        """More results exist beyond those shown (in the cache, or on the server); it follows
        the cache's changes as :attr:`results` does."""
        return self._flag(lib.parley_message_search_has_more)

    @property
    def relevance_window(self) -> RelevanceWindow:
        """Relevance order: the current window's ranked matches and whether older ones exist; it
        follows the cache's changes as :attr:`results` does (0 and False in time order and
        before the first load)."""
        ranked = ctypes.c_int64(0)
        older = ctypes.c_int(0)
        _native.check(lib.parley_message_search_relevance_window(self.handle, ctypes.byref(ranked), ctypes.byref(older)))
        return RelevanceWindow(ranked.value, bool(older.value))

    @property
    def results(self) -> List[SearchResult]:
        """The results shown, in the view's order, as the changes so far left them."""
        return self._list(lib.parley_message_search_results)
