package parley

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"unsafe"
)

// SearchParams describes a message search. Query is required; zero values leave the
// library's defaults; Extra takes any other option by its wire name
// (include/parley/search.h lists them all).
type SearchParams struct {
	// Query is plain text: every word must occur, the last one as a prefix.
	Query string
	// Order: "time" (newest first, the default) or "relevance" (most relevant first among a
	// window of the newest matches; LoadOlder moves to the next window).
	Order string
	// Limit is the results per load, 1..100 (default 20).
	Limit int
	// ChannelURLs keeps messages of these channels.
	ChannelURLs []string
	// SearchServer makes each load ask the server for its next page too.
	SearchServer bool
	// RelevanceWindow is how many of the newest matches relevance order ranks at a time,
	// 1..1000000 (default 5000).
	RelevanceWindow int
	Extra           map[string]any
}

func (p SearchParams) document() map[string]any {
	document := map[string]any{}
	for key, value := range p.Extra {
		document[key] = value
	}
	document["query"] = p.Query
	if p.Order != "" {
		document["order"] = p.Order
	}
	if p.Limit != 0 {
		document["limit"] = p.Limit
	}
	if p.ChannelURLs != nil {
		document["channel_urls"] = p.ChannelURLs
	}
	if p.SearchServer {
		document["search_server"] = true
	}
	if p.RelevanceWindow != 0 {
		document["relevance_window"] = p.RelevanceWindow
	}
	return document
}

// SearchResult is one result of a Search.
type SearchResult struct {
	Message Message `json:"message"`
	// Snippet is the matching text with the words highlighted.
	Snippet string `json:"snippet"`
	// Score: bigger is more relevant (0 for the cache's results in time order).
	Score float64 `json:"score"`
	// Origin is "cache" or "server".
	Origin string `json:"origin"`
}

// SearchChange is one report of a Search: results Added, Updated or Deleted (as last
// reported), or FreshnessChanged, or BackgroundError.
type SearchChange struct {
	Kind      ChangeKind
	Results   []SearchResult
	Freshness Freshness
	Err       error
}

// Search is a live view of the cached messages that match a query, optionally continued on
// the server; it works offline.
type Search struct {
	view[SearchChange]
	native *C.parley_message_search
}

// NewSearch creates a search. Nothing loads until the first LoadMore.
func (c *Client) NewSearch(params SearchParams) (*Search, error) {
	op := "new search"
	paramsText, err := encodeParams(op, params.document())
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(paramsText))
	search := &Search{}
	search.init(c, search)
	err = c.use(func(native *C.parley_client) error {
		err := call(op, func() C.int {
			return C.go_search_create(&search.native, native, paramsText, C.uintptr_t(search.handle))
		})
		if err == nil {
			c.track(search)
		}
		return err
	})
	if err != nil {
		search.changes.close()
		search.handle.Delete()
		return nil, err
	}
	return search, nil
}

// Changes is the channel of the search's reports; it closes when the search closes.
func (s *Search) Changes() <-chan SearchChange { return s.channel() }

// searchKinds maps the handler field that ran onto ChangeKind.
var searchKinds = map[int]ChangeKind{C.SEARCH_ADDED: Added, C.SEARCH_UPDATED: Updated, C.SEARCH_DELETED: Deleted}

func (s *Search) report(kind int, text *C.char) {
	s.changes.push(SearchChange{Kind: searchKinds[kind], Results: decodeList[SearchResult](text)})
}

func (s *Search) reportError(err *Error) {
	s.changes.push(SearchChange{Kind: BackgroundError, Err: err})
}

func (s *Search) reportFreshness(freshness Freshness) {
	s.changes.push(SearchChange{Kind: FreshnessChanged, Freshness: freshness})
}

// LoadMore loads the next Limit results (the first call: the first ones) and returns them;
// in relevance order, within the current window.
func (s *Search) LoadMore(ctx context.Context) ([]SearchResult, error) {
	return s.loadPage(ctx, "search load more", 0)
}

// LoadOlder (relevance order) moves to the next window of older matches and returns its first
// Limit results; those shown before are reported Deleted. Without older matches nothing changes
// and it returns none. In time order it fails with ErrInvalidState (LoadMore goes on there).
func (s *Search) LoadOlder(ctx context.Context) ([]SearchResult, error) {
	return s.loadPage(ctx, "search load older", 1)
}

func (s *Search) loadPage(ctx context.Context, op string, older C.int) ([]SearchResult, error) {
	text, err := s.load(ctx, op, func(h C.uintptr_t) C.int { return C.go_search_load(s.native, older, h) })
	if err != nil {
		return nil, err
	}
	var results []SearchResult
	return results, decode(op, text, &results)
}

// RelevanceWindow is where a relevance search stands: how many matches its current window
// ranks, and whether older matches lie below it (LoadOlder moves there).
type RelevanceWindow struct {
	RankedMatches     int64
	OlderMatchesExist bool
}

// RelevanceWindow reads the current window's edge; it follows the cache's changes as the
// results do (zero in time order and before the first load).
func (s *Search) RelevanceWindow() (RelevanceWindow, error) {
	var ranked C.int64_t
	var older C.int
	err := s.use(func() error {
		return call("search relevance window", func() C.int {
			return C.parley_message_search_relevance_window(s.native, &ranked, &older)
		})
	})
	return RelevanceWindow{RankedMatches: int64(ranked), OlderMatchesExist: older != 0}, err
}

// HasMore reports whether more results exist beyond those shown.
func (s *Search) HasMore() (bool, error) {
	value, err := s.intGetter("search has more", func(out *C.int) C.int { return C.parley_message_search_has_more(s.native, out) })
	return value != 0, err
}

// Results is the results shown, in the view's order.
func (s *Search) Results() ([]SearchResult, error) {
	text, err := s.stringGetter("search results", func(out **C.char) C.int { return C.parley_message_search_results(s.native, out) })
	if err != nil {
		return nil, err
	}
	var results []SearchResult
	return results, json.Unmarshal([]byte(text), &results)
}

// Freshness is the search's freshness.
func (s *Search) Freshness() (Freshness, error) {
	value, err := s.intGetter("search freshness", func(out *C.int) C.int { return C.parley_message_search_freshness(s.native, out) })
	return Freshness(value), err
}

// LastPageOrigin says where the last load's results came from.
func (s *Search) LastPageOrigin() (PageOrigin, error) {
	value, err := s.intGetter("search last page origin", func(out *C.int) C.int {
		return C.parley_message_search_last_page_origin(s.native, out)
	})
	return PageOrigin(value), err
}

// Close stops the search; its Changes channel closes after the reports already made.
func (s *Search) Close() error {
	s.close(s, func() { C.parley_message_search_dispose(s.native) })
	return nil
}
