package parley

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"math"
	"runtime/cgo"
	"unsafe"
)

// Newest is the starting point (or sync view viewpoint) that means "the newest end".
const Newest int64 = math.MaxInt64

// MessageCollectionParams shapes a MessageCollection. Zero values leave the library's
// defaults; Extra takes any other option by its wire name
// (include/parley/message_collection.h lists them all).
type MessageCollectionParams struct {
	// PreviousResultSize is the page size toward older messages, 1..200 (default 20).
	PreviousResultSize int
	// NextResultSize is the page size toward newer messages, 0..200.
	NextResultSize int
	// Reverse lists the newest first.
	Reverse bool
	// MessageTypeFilter: "all" (default), "user", "file" or "admin".
	MessageTypeFilter string
	// CustomTypes keeps messages of these custom types.
	CustomTypes []string
	// SenderUserIDs keeps messages of these senders.
	SenderUserIDs []string
	Extra         map[string]any
}

func (p MessageCollectionParams) document() map[string]any {
	document := map[string]any{}
	for key, value := range p.Extra {
		document[key] = value
	}
	if p.PreviousResultSize != 0 {
		document["previous_result_size"] = p.PreviousResultSize
	}
	if p.NextResultSize != 0 {
		document["next_result_size"] = p.NextResultSize
	}
	if p.Reverse {
		document["reverse"] = true
	}
	if p.MessageTypeFilter != "" {
		document["message_type_filter"] = p.MessageTypeFilter
	}
	if p.CustomTypes != nil {
		document["custom_types"] = p.CustomTypes
	}
	if p.SenderUserIDs != nil {
		document["sender_user_ids"] = p.SenderUserIDs
	}
	return document
}

// SendingStatus is the sending state of the messages a MessageChange carries.
type SendingStatus int

// The sending states.
const (
	SendingNone      SendingStatus = C.PARLEY_SENDING_STATUS_NONE
	SendingPending   SendingStatus = C.PARLEY_SENDING_STATUS_PENDING
	SendingFailed    SendingStatus = C.PARLEY_SENDING_STATUS_FAILED
	SendingCanceled  SendingStatus = C.PARLEY_SENDING_STATUS_CANCELED
	SendingSucceeded SendingStatus = C.PARLEY_SENDING_STATUS_SUCCEEDED
)

func (s SendingStatus) String() string {
	names := [...]string{"none", "pending", "failed", "canceled", "succeeded"}
	if s >= 0 && int(s) < len(names) {
		return names[s]
	}
	return "unknown"
}

// MessageChange is one report of a MessageCollection, in the order the library made them.
type MessageChange struct {
	// Kind is Added, Updated, Deleted, ChannelUpdated, ChannelDeleted, HugeGapDetected,
	// FreshnessChanged or BackgroundError.
	Kind          ChangeKind
	Source        Source
	SendingStatus SendingStatus
	ChannelURL    string
	// Channel is the channel as cached (null when not cached).
	Channel json.RawMessage
	// Messages in the view's order (none for channel events).
	Messages  []Message
	Freshness Freshness
	Err       error
}

// MessageCollection is the live view of one group channel's messages around a starting
// point: Start, then LoadPrevious / LoadNext; every change of what it shows arrives on
// Changes.
type MessageCollection struct {
	view[MessageChange]
	native *C.parley_message_collection
}

// NewMessageCollection creates the view of channelURL from startingPoint (Unix ms, or
// Newest). The client must have connected (it may be offline since). Nothing loads until
// Start.
func (c *Client) NewMessageCollection(channelURL string, startingPoint int64, params MessageCollectionParams) (*MessageCollection, error) {
	op := "new message collection"
	if err := checkText(op, channelURL); err != nil {
		return nil, err
	}
	paramsText, err := encodeParams(op, params.document())
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(paramsText))
	url := cString(channelURL)
	defer C.free(unsafe.Pointer(url))
	collection := &MessageCollection{}
	collection.init(c, collection)
	err = c.use(func(native *C.parley_client) error {
		err := call(op, func() C.int {
			return C.go_message_collection_create(&collection.native, native, url, C.int64_t(startingPoint), paramsText, C.uintptr_t(collection.handle))
		})
		if err == nil {
			c.track(collection)
		}
		return err
	})
	if err != nil {
		collection.changes.close()
		collection.handle.Delete()
		return nil, err
	}
	return collection, nil
}

// Changes is the channel of the view's reports; it closes when the view closes.
func (col *MessageCollection) Changes() <-chan MessageChange { return col.channel() }

// messageEventKinds maps the library's message event kinds onto ChangeKind.
var messageEventKinds = map[C.int]ChangeKind{
	C.PARLEY_MESSAGE_EVENT_ADDED: Added, C.PARLEY_MESSAGE_EVENT_UPDATED: Updated,
	C.PARLEY_MESSAGE_EVENT_DELETED: Deleted, C.PARLEY_MESSAGE_EVENT_CHANNEL_UPDATED: ChannelUpdated,
	C.PARLEY_MESSAGE_EVENT_CHANNEL_DELETED: ChannelDeleted, C.PARLEY_MESSAGE_EVENT_HUGE_GAP_DETECTED: HugeGapDetected,
}

func (col *MessageCollection) report(event *C.parley_message_event) {
	col.changes.push(MessageChange{
		Kind:          messageEventKinds[event.kind],
		Source:        sourceFromC(event.source, event.source_name, event.detail),
		SendingStatus: SendingStatus(event.sending_status),
		ChannelURL:    goString(event.channel_url),
		Channel:       rawJSON(event.channel_json),
		Messages:      decodeList[Message](event.messages_json),
	})
}

func (col *MessageCollection) reportError(err *Error) {
	col.changes.push(MessageChange{Kind: BackgroundError, Err: err})
}

func (col *MessageCollection) reportFreshness(freshness Freshness) {
	col.changes.push(MessageChange{Kind: FreshnessChanged, Freshness: freshness})
}

// StartResult is what Start gives: the list the cache held, then the list after the
// server's page replaced it. Offline, ServerErr is the network error (matching ErrNetwork),
// Server is nil, and the server's page follows as changes after the next connection.
type StartResult struct {
	Cached    []Message
	Server    []Message
	ServerErr error
}

// Start starts the view and waits for both of its lists. It fails only when the cache's list
// does (or ctx ends); a failure of the server's page is StartResult.ServerErr.
func (col *MessageCollection) Start(ctx context.Context) (StartResult, error) {
	op := "message collection start"
	if err := ctx.Err(); err != nil {
		return StartResult{}, &Error{Code: ErrCancelled, Op: op, Message: "the context ended before the call", cause: err}
	}
	cached := make(chan outcome, 1)
	server := make(chan outcome, 1)
	handle := cgo.NewHandle(startCompletion(func(which int, err *C.parley_error, text *C.char) {
		result := outcome{errorFromC(op, err), goString(text)}
		if which == 0 {
			cached <- result
		} else {
			server <- result
		}
	}))
	err := col.use(func() error {
		return call(op, func() C.int { return C.go_message_collection_start(col.native, C.uintptr_t(handle)) })
	})
	if err != nil {
		handle.Delete()
		return StartResult{}, err
	}
	var result StartResult
	for _, step := range []chan outcome{cached, server} {
		select {
		case got := <-step:
			var messages []Message
			if got.err == nil {
				got.err = asError(decode(op, got.json, &messages))
			}
			if step == cached {
				if got.err != nil {
					return result, got.err
				}
				result.Cached = messages
			} else if got.err != nil {
				result.ServerErr = got.err
			} else {
				result.Server = messages
			}
		case <-ctx.Done():
			return result, &Error{Code: ErrCancelled, Op: op, Message: "the context ended; the view goes on starting", cause: ctx.Err()}
		}
	}
	return result, nil
}

// LoadPrevious loads older messages and returns those it added (none when HasPrevious is
// false).
func (col *MessageCollection) LoadPrevious(ctx context.Context) ([]Message, error) {
	return col.loadMessages(ctx, "message collection load previous", 1)
}

// LoadNext loads newer messages and returns those it added (none at the newest end).
func (col *MessageCollection) LoadNext(ctx context.Context) ([]Message, error) {
	return col.loadMessages(ctx, "message collection load next", 0)
}

func (col *MessageCollection) loadMessages(ctx context.Context, op string, previous C.int) ([]Message, error) {
	text, err := col.load(ctx, op, func(h C.uintptr_t) C.int {
		return C.go_message_collection_load(col.native, previous, h)
	})
	if err != nil {
		return nil, err
	}
	var messages []Message
	return messages, decode(op, text, &messages)
}

// HasPrevious reports whether older messages exist beyond the shown ones.
func (col *MessageCollection) HasPrevious() (bool, error) {
	value, err := col.intGetter("message collection has previous", func(out *C.int) C.int {
		return C.parley_message_collection_has_previous(col.native, out)
	})
	return value != 0, err
}

// HasNext reports whether newer messages exist beyond the shown ones (false at the newest end).
func (col *MessageCollection) HasNext() (bool, error) {
	value, err := col.intGetter("message collection has next", func(out *C.int) C.int {
		return C.parley_message_collection_has_next(col.native, out)
	})
	return value != 0, err
}

// Messages is the shown messages: the server's in order, then this client's pending and
// failed ones in send order.
func (col *MessageCollection) Messages() ([]Message, error) {
	text, err := col.stringGetter("message collection messages", func(out **C.char) C.int {
		return C.parley_message_collection_messages(col.native, out)
	})
	if err != nil {
		return nil, err
	}
	var messages []Message
	return messages, decode("message collection messages", text, &messages)
}

// Freshness is the view's freshness as of the changes delivered so far.
func (col *MessageCollection) Freshness() (Freshness, error) {
	value, err := col.intGetter("message collection freshness", func(out *C.int) C.int {
		return C.parley_message_collection_freshness(col.native, out)
	})
	return Freshness(value), err
}

// LastPageOrigin says where the last load's result came from.
func (col *MessageCollection) LastPageOrigin() (PageOrigin, error) {
	value, err := col.intGetter("message collection last page origin", func(out *C.int) C.int {
		return C.parley_message_collection_last_page_origin(col.native, out)
	})
	return PageOrigin(value), err
}

// Close stops the view; its Changes channel closes after the reports already made. Safe
// more than once and from any goroutine.
func (col *MessageCollection) Close() error {
	col.close(col, func() { C.parley_message_collection_dispose(col.native) })
	return nil
}
