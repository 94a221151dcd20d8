package parley

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"sync"
	"unsafe"
)

// QueryKind is the list a Query pages through.
type QueryKind int

// The query kinds; the options of each: docs/C-API.md "Queries".
const (
	// QueryPreviousMessages: a channel's messages, older on each page (option channel_url).
	QueryPreviousMessages QueryKind = C.PARLEY_QUERY_PREVIOUS_MESSAGES
	// QueryGroupChannels: the user's channels, with a channel collection's query options.
	QueryGroupChannels QueryKind = C.PARLEY_QUERY_GROUP_CHANNELS
	// QueryPublicGroupChannels: public channels.
	QueryPublicGroupChannels QueryKind = C.PARLEY_QUERY_PUBLIC_GROUP_CHANNELS
	// QueryMembers: a channel's members.
	QueryMembers QueryKind = C.PARLEY_QUERY_MEMBERS
	// QueryOperators: a channel's operators.
	QueryOperators QueryKind = C.PARLEY_QUERY_OPERATORS
	// QueryBannedUsers: a channel's bans (operators only).
	QueryBannedUsers QueryKind = C.PARLEY_QUERY_BANNED_USERS
	// QueryMutedUsers: a channel's mutes (operators only).
	QueryMutedUsers QueryKind = C.PARLEY_QUERY_MUTED_USERS
)

// Query pages through one of the server's lists: each Next gives the page after the last
// one. Its pages are not written to the cache.
type Query struct {
	client *Client
	native *C.parley_query
	mutex  sync.RWMutex
	closed bool
}

// NewQuery creates a query of kind with its options by their wire names (nil: none), e.g.
// {"channel_url": "general", "limit": 30}. Nothing is sent until Next.
func (c *Client) NewQuery(kind QueryKind, options map[string]any) (*Query, error) {
	op := "new query"
	optionsText, err := encodeParams(op, options)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(optionsText))
	query := &Query{client: c}
	err = c.use(func(native *C.parley_client) error {
		err := call(op, func() C.int { return C.parley_query_create(&query.native, native, C.int(kind), optionsText) })
		if err == nil {
			c.track(query)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return query, nil
}

// Next loads the next page: the page's items as the server gives them (none past the end).
// Cancelling ctx cancels the load in the library; the query's position is then unchanged.
func (q *Query) Next(ctx context.Context) ([]json.RawMessage, error) {
	// The lock covers the start only: Close may dispose the query while a load is in flight,
	// which then completes with ErrCancelled.
	if q.client == nil {
		return nil, errNotMade
	}
	q.mutex.RLock()
	if q.closed {
		q.mutex.RUnlock()
		return nil, ErrClosed
	}
	done, cancel, err := q.client.begin(ctx, "query next", func(_ *C.parley_client, h C.uintptr_t, op *C.uint64_t) C.int {
		return C.go_query_load(q.native, op, h)
	})
	q.mutex.RUnlock()
	if err != nil {
		return nil, err
	}
	text, err := q.client.wait(ctx, done, cancel)
	if err != nil {
		return nil, err
	}
	var items []json.RawMessage
	return items, decode("query next", text, &items)
}

// HasNext reports whether another page may follow.
func (q *Query) HasNext() (bool, error) {
	if q.client == nil {
		return false, errNotMade
	}
	q.mutex.RLock()
	defer q.mutex.RUnlock()
	if q.closed {
		return false, ErrClosed
	}
	var value C.int
	err := call("query has next", func() C.int { return C.parley_query_has_next(q.native, &value) })
	return value != 0, err
}

// Close releases the query. Safe more than once.
func (q *Query) Close() error {
	q.mutex.Lock()
	defer q.mutex.Unlock()
	if !q.closed && q.client != nil {
		q.closed = true
		C.parley_query_dispose(q.native)
		q.client.untrack(q)
	}
	return nil
}
