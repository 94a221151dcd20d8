package parley

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"runtime/cgo"
	"unsafe"
)

// SyncViewOptions shapes a SyncView. Zero values leave the library's defaults; Extra takes
// any other option by its wire name (include/parley/sync_view.h lists them all).
type SyncViewOptions struct {
	// Limit is the messages per fetch, 1..200 (default 30).
	Limit int
	// MessageTypeFilter: "all" (default), "user", "file" or "admin".
	MessageTypeFilter string
	Extra             map[string]any
}

func (o SyncViewOptions) document() map[string]any {
	document := map[string]any{}
	for key, value := range o.Extra {
		document[key] = value
	}
	if o.Limit != 0 {
		document["limit"] = o.Limit
	}
	if o.MessageTypeFilter != "" {
		document["message_type_filter"] = o.MessageTypeFilter
	}
	return document
}

// SyncAction is what the application does to one of a sync view's lists.
type SyncAction int

// The actions.
const (
	ActionInsert SyncAction = C.PARLEY_SYNC_ACTION_INSERT
	ActionUpdate SyncAction = C.PARLEY_SYNC_ACTION_UPDATE
	ActionRemove SyncAction = C.PARLEY_SYNC_ACTION_REMOVE
	ActionClear  SyncAction = C.PARLEY_SYNC_ACTION_CLEAR
)

func (a SyncAction) String() string {
	names := [...]string{"", "insert", "update", "remove", "clear"}
	if a > 0 && int(a) < len(names) {
		return names[a]
	}
	return "unknown"
}

// SyncList is one of a sync view's three lists.
type SyncList int

// The lists.
const (
	// ListSucceeded: the server's messages, by (created_at, message_id).
	ListSucceeded SyncList = C.PARLEY_SYNC_LIST_SUCCEEDED
	// ListPending: this client's messages being sent, in send order.
	ListPending SyncList = C.PARLEY_SYNC_LIST_PENDING
	// ListFailed: this client's failed messages.
	ListFailed SyncList = C.PARLEY_SYNC_LIST_FAILED
)

func (l SyncList) String() string {
	names := [...]string{"", "succeeded", "pending", "failed"}
	if l > 0 && int(l) < len(names) {
		return names[l]
	}
	return "unknown"
}

// SyncDirection is the way a Fetch pages.
type SyncDirection int

// The directions.
const (
	Previous SyncDirection = C.PARLEY_SYNC_DIRECTION_PREVIOUS
	Next     SyncDirection = C.PARLEY_SYNC_DIRECTION_NEXT
)

// SyncChange is one report of a SyncView: an action on a list (Action is nonzero), or a
// freshness change, or a background error.
type SyncChange struct {
	Action    SyncAction
	List      SyncList
	Messages  []Message
	Freshness Freshness
	Err       error
}

// FetchResult is what a fetch completed with: whether more messages exist that way, and
// whether it gave only what the cache holds because the server could not be reached.
type FetchResult struct {
	HasMore bool
	Offline bool
}

// SyncView is the SyncManager-style view of one channel's messages: every change arrives on
// Changes as an action on the succeeded, pending or failed list.
type SyncView struct {
	view[SyncChange]
	native *C.parley_sync_view
}

// NewSyncView creates the view of channelURL from viewpoint (Unix ms, or Newest). Nothing
// loads until the first Fetch.
func (c *Client) NewSyncView(channelURL string, viewpoint int64, options SyncViewOptions) (*SyncView, error) {
	op := "new sync view"
	if err := checkText(op, channelURL); err != nil {
		return nil, err
	}
	optionsText, err := encodeParams(op, options.document())
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(optionsText))
	url := cString(channelURL)
	defer C.free(unsafe.Pointer(url))
	syncView := &SyncView{}
	syncView.init(c, syncView)
	err = c.use(func(native *C.parley_client) error {
		err := call(op, func() C.int {
			return C.go_sync_view_create(&syncView.native, native, url, C.int64_t(viewpoint), optionsText, C.uintptr_t(syncView.handle))
		})
		if err == nil {
			c.track(syncView)
		}
		return err
	})
	if err != nil {
		syncView.changes.close()
		syncView.handle.Delete()
		return nil, err
	}
	return syncView, nil
}

// Changes is the channel of the view's actions; it closes when the view closes.
func (v *SyncView) Changes() <-chan SyncChange { return v.channel() }

func (v *SyncView) report(action SyncAction, list SyncList, text *C.char) {
	v.changes.push(SyncChange{Action: action, List: list, Messages: decodeList[Message](text)})
}

func (v *SyncView) reportError(err *Error) { v.changes.push(SyncChange{Err: err}) }

func (v *SyncView) reportFreshness(freshness Freshness) {
	v.changes.push(SyncChange{Freshness: freshness})
}

// Fetch loads Limit messages in direction (the first fetch: Limit on each side of the
// viewpoint); they arrive on Changes as inserts before it returns.
func (v *SyncView) Fetch(ctx context.Context, direction SyncDirection) (FetchResult, error) {
	return v.fetch(ctx, "sync view fetch", direction, 0)
}

// FetchAllNext loads every newer message, page after page.
func (v *SyncView) FetchAllNext(ctx context.Context) (FetchResult, error) {
	return v.fetch(ctx, "sync view fetch all next", Next, 1)
}

func (v *SyncView) fetch(ctx context.Context, op string, direction SyncDirection, allNext C.int) (FetchResult, error) {
	if err := ctx.Err(); err != nil {
		return FetchResult{}, &Error{Code: ErrCancelled, Op: op, Message: "the context ended before the call", cause: err}
	}
	type fetched struct {
		err    *Error
		result FetchResult
	}
	done := make(chan fetched, 1)
	handle := cgo.NewHandle(fetchCompletion(func(err *C.parley_error, hasMore, offline bool) {
		done <- fetched{errorFromC(op, err), FetchResult{HasMore: hasMore, Offline: offline}}
	}))
	err := v.use(func() error {
		return call(op, func() C.int { return C.go_sync_view_fetch(v.native, C.int(direction), allNext, C.uintptr_t(handle)) })
	})
	if err != nil {
		handle.Delete()
		return FetchResult{}, err
	}
	select {
	case got := <-done:
		if got.err != nil {
			return FetchResult{}, got.err
		}
		return got.result, nil
	case <-ctx.Done():
		return FetchResult{}, &Error{Code: ErrCancelled, Op: op, Message: "the context ended; the fetch goes on in the view", cause: ctx.Err()}
	}
}

// ResetViewpoint starts over from viewpoint (Unix ms, or Newest): a clear action on each
// list, then the next Fetch loads around the new viewpoint.
func (v *SyncView) ResetViewpoint(viewpoint int64) error {
	return v.use(func() error {
		return call("sync view reset viewpoint", func() C.int { return C.parley_sync_view_reset_viewpoint(v.native, C.int64_t(viewpoint)) })
	})
}

// Viewpoint is the viewpoint the view shows now.
func (v *SyncView) Viewpoint() (int64, error) {
	var viewpoint C.int64_t
	err := v.use(func() error {
		return call("sync view viewpoint", func() C.int { return C.parley_sync_view_viewpoint(v.native, &viewpoint) })
	})
	return int64(viewpoint), err
}

// Messages is one list's messages.
func (v *SyncView) Messages(list SyncList) ([]Message, error) {
	text, err := v.stringGetter("sync view messages", func(out **C.char) C.int {
		return C.parley_sync_view_messages(v.native, C.int(list), out)
	})
	if err != nil {
		return nil, err
	}
	var messages []Message
	return messages, decode("sync view messages", text, &messages)
}

// Freshness is the view's freshness.
func (v *SyncView) Freshness() (Freshness, error) {
	value, err := v.intGetter("sync view freshness", func(out *C.int) C.int {
		return C.parley_sync_view_freshness(v.native, out)
	})
	return Freshness(value), err
}

// LastFetchOrigin says where the last fetch's messages came from.
func (v *SyncView) LastFetchOrigin() (PageOrigin, error) {
	value, err := v.intGetter("sync view last fetch origin", func(out *C.int) C.int {
		return C.parley_sync_view_last_fetch_origin(v.native, out)
	})
	return PageOrigin(value), err
}

// Close stops the view; its Changes channel closes after the actions already reported.
func (v *SyncView) Close() error {
	v.close(v, func() { C.parley_sync_view_dispose(v.native) })
	return nil
}
