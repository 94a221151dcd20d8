package parley

import (
	"encoding/json"
	"sync"
)

// Category is the category of an Event: one of the constants below (the library's list is
// EventCategories), or the plain name of one a newer library or server reports.
type Category string

// The event categories. The server's come from its real-time stream (docs/PROTOCOL.md §9);
// the sync ones from the catch-up after (re)connecting; the local ones from this client's
// sends and its cache. A message this client sent is reported to it once, as
// CategoryMessageSent, never as CategoryMessageReceived: that is what the other members get.
const (
	// Server. The payload is the event's data object: its "channel" (every category except
	// channel_deleted; on a replay only the first event of each channel carries it) and the
	// fields of its category.
	CategoryMessageReceived      Category = "message_received"    // "message"
	CategoryMessageUpdated       Category = "message_updated"     // "message"
	CategoryMessageDeleted       Category = "message_deleted"     // "message_id"
	CategoryMention              Category = "mention"             // "message"
	CategoryReactionUpdated      Category = "reaction_updated"    // "reaction"
	CategoryThreadInfoUpdated    Category = "thread_info_updated" // "parent_message_id", "thread_info"
	CategoryReadStatus           Category = "read_status"         // "user", "read_ts"
	CategoryDeliveryStatus       Category = "delivery_status"     // "user", "delivered_ts"
	CategoryTypingStatus         Category = "typing_status"       // "typing_users"
	CategoryUserMuted            Category = "user_muted"          // "user", "end_at", "description"
	CategoryUserUnmuted          Category = "user_unmuted"        // "user"
	CategoryUserBanned           Category = "user_banned"         // "user", "end_at", "description"
	CategoryUserUnbanned         Category = "user_unbanned"       // "user"
	CategoryChannelFrozen        Category = "channel_frozen"
	CategoryChannelUnfrozen      Category = "channel_unfrozen"
	CategoryChannelChanged       Category = "channel_changed"
	CategoryChannelDeleted       Category = "channel_deleted"  // no "channel": the URL is Event.ChannelURL
	CategoryChannelHidden        Category = "channel_hidden"   // "user_id", "hide_previous_messages", "allow_auto_unhide"
	CategoryMetadataCreated      Category = "metadata_created" // "metadata"
	CategoryMetadataUpdated      Category = "metadata_updated" // "metadata"
	CategoryMetadataDeleted      Category = "metadata_deleted" // "keys"
	CategoryMetacounterCreated   Category = "metacounter_created"
	CategoryMetacounterUpdated   Category = "metacounter_updated"
	CategoryMetacounterDeleted   Category = "metacounter_deleted"
	CategoryOperatorUpdated      Category = "operator_updated"    // "operators"
	CategoryInvitationReceived   Category = "invitation_received" // "inviter", "invitees"
	CategoryInvitationDeclined   Category = "invitation_declined" // "invitee", "inviter"
	CategoryUserJoined           Category = "user_joined"         // "users"
	CategoryUserLeft             Category = "user_left"           // "user"
	CategoryPinnedMessageUpdated Category = "pinned_message_updated"
	CategoryPollUpdated          Category = "poll_updated" // "poll"
	CategoryPollVoted            Category = "poll_voted"   // "poll"
	CategoryPollDeleted          Category = "poll_deleted" // "poll_id"

	// Local: this client's sends (the payload is the message; message_failed's carries
	// ErrorCode and ErrorMessage) and its cache file.
	CategoryMessagePending       Category = "message_pending"
	CategoryMessageSent          Category = "message_sent"
	CategoryMessageFailed        Category = "message_failed"
	CategoryMessageCanceled      Category = "message_canceled"
	CategoryMessageResendStarted Category = "message_resend_started"
	CategoryCacheUnavailable     Category = "cache_unavailable" // {"reason"}
	CategoryCacheRecovered       Category = "cache_recovered"   // {"reason", "moved_to", "lost", ...}

	// Sync: what the catch-up found changed while the stream was away.
	CategoryChannelChangelog        Category = "channel_changelog"         // the channel
	CategoryChannelChangelogDeleted Category = "channel_changelog_deleted" // {"channel_url"}
	CategoryMessageChangelog        Category = "message_changelog"         // the message
	CategoryMessageChangelogDeleted Category = "message_changelog_deleted" // {"channel_url", "message_id"}
	CategoryPollChangelog           Category = "poll_changelog"            // the message whose poll changed
	CategoryResync                  Category = "resync"                    // {"reason", "channel_urls"}
)

// categories is every constant above, in the library's order.
var categories = []Category{
	CategoryMessageReceived, CategoryMessageUpdated, CategoryMessageDeleted, CategoryMention,
	CategoryReactionUpdated, CategoryThreadInfoUpdated, CategoryReadStatus, CategoryDeliveryStatus,
	CategoryTypingStatus, CategoryUserMuted, CategoryUserUnmuted, CategoryUserBanned,
	CategoryUserUnbanned, CategoryChannelFrozen, CategoryChannelUnfrozen, CategoryChannelChanged,
	CategoryChannelDeleted, CategoryChannelHidden, CategoryMetadataCreated, CategoryMetadataUpdated,
	CategoryMetadataDeleted, CategoryMetacounterCreated, CategoryMetacounterUpdated,
	CategoryMetacounterDeleted, CategoryOperatorUpdated, CategoryInvitationReceived,
	CategoryInvitationDeclined, CategoryUserJoined, CategoryUserLeft, CategoryPinnedMessageUpdated,
	CategoryPollUpdated, CategoryPollVoted, CategoryPollDeleted,
	CategoryMessagePending, CategoryMessageSent, CategoryMessageFailed, CategoryMessageCanceled,
	CategoryMessageResendStarted, CategoryCacheUnavailable, CategoryCacheRecovered,
	CategoryChannelChangelog, CategoryChannelChangelogDeleted, CategoryMessageChangelog,
	CategoryMessageChangelogDeleted, CategoryPollChangelog, CategoryResync,
}

// Categories lists every Category constant, in the order of the library's table
// (EventCategories).
func Categories() []Category { return append([]Category(nil), categories...) }

var categorySources struct {
	once    sync.Once
	sources map[Category]string
}

// Source is where events of the category come from, as the library's table says: "server"
// (the real-time stream), "sync" (the catch-up) or "local" (sending, the cache); "" for a
// category the library does not know.
func (c Category) Source() string {
	categorySources.once.Do(func() {
		categorySources.sources = map[Category]string{}
		table, err := EventCategories()
		if err != nil {
			return
		}
		for _, entry := range table {
			categorySources.sources[Category(entry.Name)] = entry.Source
		}
	})
	return categorySources.sources[c]
}

// Event is a real-time, sync or local event, after it was applied to the cache. Payload is
// the event's JSON object, whose shape depends on Category (see the Category constants);
// Message, Channel, DeletedMessage, DeletedChannelURL and Resync decode the common ones.
type Event struct {
	Category   Category
	ChannelURL string
	Payload    json.RawMessage
}

// DeletedMessage names a message that is gone: the payload of message_deleted and
// message_changelog_deleted.
type DeletedMessage struct {
	ChannelURL string `json:"channel_url"`
	MessageID  int64  `json:"message_id"`
}

// Resync is the payload of a resync event: the stream resumed past the server's retention,
// so events were lost. ChannelURLs are the channels the catch-up found changed or removed
// meanwhile (sorted); their messages may have arrived unreported: reload them.
type Resync struct {
	Reason      string   `json:"reason"`
	ChannelURLs []string `json:"channel_urls"`
}

// Message gives the message the event carries: the payload's "message" for
// message_received, message_updated and mention; the payload itself for the local sending
// categories (message_pending, message_sent, message_failed with ErrorCode and ErrorMessage,
// message_canceled, message_resend_started), message_changelog and poll_changelog. false for
// any other category.
func (e Event) Message() (Message, bool) {
	var message Message
	switch e.Category {
	case CategoryMessageReceived, CategoryMessageUpdated, CategoryMention:
		var data struct {
			Message *Message `json:"message"`
		}
		if json.Unmarshal(e.Payload, &data) != nil || data.Message == nil {
			return message, false
		}
		return *data.Message, true
	case CategoryMessagePending, CategoryMessageSent, CategoryMessageFailed, CategoryMessageCanceled,
		CategoryMessageResendStarted, CategoryMessageChangelog, CategoryPollChangelog:
		return message, json.Unmarshal(e.Payload, &message) == nil
	}
	return message, false
}

// Channel gives the channel the event carries, as this client's user sees it: the
// payload's "channel" for the server's categories (all but channel_deleted; false when the
// event has none, as replayed events after the first of their channel), the payload itself
// for channel_changelog. false for any other category.
func (e Event) Channel() (Channel, bool) {
	var channel Channel
	switch {
	case e.Category == CategoryChannelChangelog:
		return channel, json.Unmarshal(e.Payload, &channel) == nil
	case e.Category == CategoryChannelDeleted || e.Category.Source() != "server":
		return channel, false
	}
	var data struct {
		Channel *Channel `json:"channel"`
	}
	if json.Unmarshal(e.Payload, &data) != nil || data.Channel == nil {
		return channel, false
	}
	return *data.Channel, true
}

// DeletedMessage gives the message a message_deleted or message_changelog_deleted event
// removed (false for any other category).
func (e Event) DeletedMessage() (DeletedMessage, bool) {
	var deleted DeletedMessage
	if e.Category != CategoryMessageDeleted && e.Category != CategoryMessageChangelogDeleted {
		return deleted, false
	}
	if json.Unmarshal(e.Payload, &deleted) != nil || deleted.MessageID == 0 {
		return DeletedMessage{}, false
	}
	if deleted.ChannelURL == "" {
		deleted.ChannelURL = e.ChannelURL
	}
	return deleted, true
}

// DeletedChannelURL gives the channel a channel_deleted or channel_changelog_deleted event
// removed from the cache (false for any other category).
func (e Event) DeletedChannelURL() (string, bool) {
	if e.Category != CategoryChannelDeleted && e.Category != CategoryChannelChangelogDeleted {
		return "", false
	}
	var data struct {
		ChannelURL string `json:"channel_url"`
	}
	if json.Unmarshal(e.Payload, &data) != nil || data.ChannelURL == "" {
		data.ChannelURL = e.ChannelURL
	}
	return data.ChannelURL, data.ChannelURL != ""
}

// Resync gives a resync event's payload (false for any other category).
func (e Event) Resync() (Resync, bool) {
	var resync Resync
	if e.Category != CategoryResync {
		return resync, false
	}
	return resync, json.Unmarshal(e.Payload, &resync) == nil
}
