package parley

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"unsafe"
)

// ChannelQuery selects and orders the channels of a ChannelCollection or a channel list
// Query. Zero values leave the library's defaults; Extra takes any other option by its wire
// name (include/parley/group_channel_collection.h lists them all).
type ChannelQuery struct {
	// Order: "latest_last_message" (default), "chronological", "channel_name_alphabetical"
	// or "metadata_value_alphabetical" (with Extra["metadata_order_key"]).
	Order string
	// IncludeEmpty lists channels without a message too.
	IncludeEmpty bool
	// CustomTypes keeps the channels of these custom types.
	CustomTypes []string
	// ChannelNameContains keeps channels whose name contains it (case-insensitive).
	ChannelNameContains string
	// ChannelURLs keeps these channels.
	ChannelURLs []string
	// Limit is the page size, 1..100 (default 20).
	Limit int
	Extra map[string]any
}

func (q ChannelQuery) document() map[string]any {
	document := map[string]any{}
	for key, value := range q.Extra {
		document[key] = value
	}
	if q.Order != "" {
		document["order"] = q.Order
	}
	if q.IncludeEmpty {
		document["include_empty"] = true
	}
	if q.CustomTypes != nil {
		document["custom_types"] = q.CustomTypes
	}
	if q.ChannelNameContains != "" {
		document["channel_name_contains"] = q.ChannelNameContains
	}
	if q.ChannelURLs != nil {
		document["channel_urls"] = q.ChannelURLs
	}
	if q.Limit != 0 {
		document["limit"] = q.Limit
	}
	return document
}

// ChangeKind says what a view's change reports.
type ChangeKind int

// The kinds of changes views report.
const (
	// Added: Channels / Messages / Results entered the view.
	Added ChangeKind = iota + 1
	// Updated: shown items changed (they are given as they are now).
	Updated
	// Deleted: items left the view (as last shown).
	Deleted
	// FreshnessChanged: the view's Freshness changed (the change's Freshness field).
	FreshnessChanged
	// BackgroundError: a step the view took by itself failed (the change's Err field).
	BackgroundError
	// ChannelUpdated: a message view's channel changed (Channel).
	ChannelUpdated
	// ChannelDeleted: a message view's channel is gone (deleted, left, banned).
	ChannelDeleted
	// HugeGapDetected: a message view missed too many messages: close it and open a new one.
	HugeGapDetected
)

func (k ChangeKind) String() string {
	names := [...]string{"", "added", "updated", "deleted", "freshness_changed", "background_error",
		"channel_updated", "channel_deleted", "huge_gap_detected"}
	if k > 0 && int(k) < len(names) {
		return names[k]
	}
	return "unknown"
}

// ChannelChange is one report of a ChannelCollection, in the order the library made them.
type ChannelChange struct {
	Kind   ChangeKind
	Source Source
	// Channels: the channels added or updated (in the view's order), or for Deleted those
	// that left, as the view last held them.
	Channels []Channel
	// DeletedURLs: for Deleted, the URLs of the channels that left.
	DeletedURLs []string
	Freshness   Freshness
	Err         error
}

// ChannelCollection is the live list of the connected user's group channels that match a
// query, page by page (LoadMore); the loaded part is kept exact and each change reported on
// Changes.
type ChannelCollection struct {
	view[ChannelChange]
	native *C.parley_group_channel_collection
	// pendingDeletedURLs holds a deletion's URLs until its channel objects follow.
	pendingDeletedURLs []string
}

// NewChannelCollection creates a collection of the connected user's channels (the client
// must have connected; it may be offline since). Nothing loads until the first LoadMore.
func (c *Client) NewChannelCollection(query ChannelQuery) (*ChannelCollection, error) {
	queryText, err := encodeParams("new channel collection", query.document())
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(queryText))
	collection := &ChannelCollection{}
	collection.init(c, collection)
	err = c.use(func(native *C.parley_client) error {
		err := call("new channel collection", func() C.int {
			return C.go_channel_collection_create(&collection.native, native, queryText, C.uintptr_t(collection.handle))
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

// Changes is the channel of the collection's reports; it closes when the collection closes.
func (col *ChannelCollection) Changes() <-chan ChannelChange { return col.channel() }

func (col *ChannelCollection) report(kind int, source Source, text *C.char) {
	switch kind {
	case C.CHANNELS_ADDED:
		col.changes.push(ChannelChange{Kind: Added, Source: source, Channels: decodeList[Channel](text)})
	case C.CHANNELS_UPDATED:
		col.changes.push(ChannelChange{Kind: Updated, Source: source, Channels: decodeList[Channel](text)})
	case C.CHANNELS_DELETED:
		// The same deletion's channel objects follow at once (deleted_channels).
		col.pendingDeletedURLs = decodeList[string](text)
	case C.CHANNELS_DELETED_OBJECTS:
		col.changes.push(ChannelChange{Kind: Deleted, Source: source, Channels: decodeList[Channel](text), DeletedURLs: col.pendingDeletedURLs})
		col.pendingDeletedURLs = nil
	}
}

func (col *ChannelCollection) reportError(err *Error) {
	col.changes.push(ChannelChange{Kind: BackgroundError, Err: err})
}

func (col *ChannelCollection) reportFreshness(freshness Freshness) {
	col.changes.push(ChannelChange{Kind: FreshnessChanged, Freshness: freshness})
}

// LoadMore loads the next page (the first call: the first page) and returns the channels it
// added; none past the end.
func (col *ChannelCollection) LoadMore(ctx context.Context) ([]Channel, error) {
	text, err := col.load(ctx, "channel collection load more", func(h C.uintptr_t) C.int {
		return C.go_channel_collection_load_more(col.native, h)
	})
	if err != nil {
		return nil, err
	}
	var channels []Channel
	return channels, decode("channel collection load more", text, &channels)
}

// HasMore reports whether more channels follow the loaded ones.
func (col *ChannelCollection) HasMore() (bool, error) {
	value, err := col.intGetter("channel collection has more", func(out *C.int) C.int {
		return C.parley_group_channel_collection_has_more(col.native, out)
	})
	return value != 0, err
}

// Channels is the loaded channels in order.
func (col *ChannelCollection) Channels() ([]Channel, error) {
	text, err := col.stringGetter("channel collection channels", func(out **C.char) C.int {
		return C.parley_group_channel_collection_channels(col.native, out)
	})
	if err != nil {
		return nil, err
	}
	var channels []Channel
	return channels, decode("channel collection channels", text, &channels)
}

// Freshness is the collection's freshness as of the changes delivered so far.
func (col *ChannelCollection) Freshness() (Freshness, error) {
	value, err := col.intGetter("channel collection freshness", func(out *C.int) C.int {
		return C.parley_group_channel_collection_freshness(col.native, out)
	})
	return Freshness(value), err
}

// LastPageOrigin says where the last LoadMore's page came from.
func (col *ChannelCollection) LastPageOrigin() (PageOrigin, error) {
	value, err := col.intGetter("channel collection last page origin", func(out *C.int) C.int {
		return C.parley_group_channel_collection_last_page_origin(col.native, out)
	})
	return PageOrigin(value), err
}

// Close stops the collection; its Changes channel closes after the reports already made.
// Safe more than once and from any goroutine.
func (col *ChannelCollection) Close() error {
	col.close(col, func() { C.parley_group_channel_collection_dispose(col.native) })
	return nil
}
