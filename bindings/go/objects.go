package parley

/*
#include "shim.h"
*/
import "C"

import (
	"encoding/json"
	"fmt"
)

// The protocol's objects (docs/PROTOCOL.md, "4. Objects"). Each decodes the fields most
// programs read and keeps the whole object as it came in Raw, for everything else.

// BasicUser is a user inside a message, a channel or a list: a sender, an operator.
type BasicUser struct {
	UserID     string            `json:"user_id"`
	Nickname   string            `json:"nickname,omitempty"`
	ProfileURL string            `json:"profile_url,omitempty"`
	IsActive   bool              `json:"is_active,omitempty"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	Role       string            `json:"role,omitempty"`
}

// User is a user's profile (what Connect returns).
type User struct {
	UserID     string            `json:"user_id"`
	Nickname   string            `json:"nickname"`
	ProfileURL string            `json:"profile_url"`
	IsActive   bool              `json:"is_active"`
	IsOnline   bool              `json:"is_online"`
	LastSeenAt int64             `json:"last_seen_at"`
	CreatedAt  int64             `json:"created_at"`
	Metadata   map[string]string `json:"metadata"`
	// Raw is the whole object as the library gave it.
	Raw json.RawMessage `json:"-"`
}

// UnmarshalJSON decodes the fields and keeps the whole object in Raw.
func (u *User) UnmarshalJSON(data []byte) error {
	type fields User
	if err := json.Unmarshal(data, (*fields)(u)); err != nil {
		return err
	}
	u.Raw = append(json.RawMessage(nil), data...)
	return nil
}

// Message is a message. MessageID is 0 for a message not sent yet; Type is "MESG", "FILE" or
// "ADMM"; times are Unix milliseconds. This client's own messages carry SendingStatus
// ("pending", "failed", "canceled", "succeeded"), and failed ones ErrorCode and ErrorMessage.
type Message struct {
	MessageID       int64      `json:"message_id"`
	Type            string     `json:"type"`
	Message         string     `json:"message"`
	ChannelURL      string     `json:"channel_url"`
	CreatedAt       int64      `json:"created_at"`
	UpdatedAt       int64      `json:"updated_at"`
	ReqID           string     `json:"req_id"`
	User            *BasicUser `json:"user,omitempty"`
	CustomType      string     `json:"custom_type"`
	Data            string     `json:"data"`
	ParentMessageID int64      `json:"parent_message_id"`
	IsPinned        bool       `json:"is_pinned"`
	SendingStatus   string     `json:"sending_status"`
	ErrorCode       int        `json:"error_code"`
	ErrorMessage    string     `json:"error_message"`
	// File and Thumbnails are set on file messages only.
	File       *FileInfo   `json:"file,omitempty"`
	Thumbnails []Thumbnail `json:"thumbnails,omitempty"`
	// Raw is the whole object as the library gave it.
	Raw json.RawMessage `json:"-"`
}

// FileInfo is the file of a file message.
type FileInfo struct {
	// URL is absolute; empty while an upload is pending.
	URL  string `json:"url"`
	Name string `json:"name"`
	Size int64  `json:"size"`
	// Type is the MIME type.
	Type        string `json:"type"`
	RequireAuth bool   `json:"require_auth"`
}

// Thumbnail is a thumbnail the server made of an uploaded image: Width and Height are the
// box asked for, RealWidth and RealHeight the image's own size.
type Thumbnail struct {
	URL        string `json:"url"`
	Width      int    `json:"width"`
	Height     int    `json:"height"`
	RealWidth  int    `json:"real_width"`
	RealHeight int    `json:"real_height"`
}

// UnmarshalJSON decodes a thumbnail object, or a bare URL (as a send may name hosted ones).
func (t *Thumbnail) UnmarshalJSON(data []byte) error {
	if len(data) > 0 && data[0] == '"' {
		*t = Thumbnail{}
		return json.Unmarshal(data, &t.URL)
	}
	type fields Thumbnail
	return json.Unmarshal(data, (*fields)(t))
}

// UnmarshalJSON decodes the fields and keeps the whole object in Raw.
func (m *Message) UnmarshalJSON(data []byte) error {
	type fields Message
	if err := json.Unmarshal(data, (*fields)(m)); err != nil {
		return err
	}
	m.Raw = append(json.RawMessage(nil), data...)
	return nil
}

// Channel is a group channel, as this client's user sees it.
type Channel struct {
	ChannelURL         string            `json:"channel_url"`
	Name               string            `json:"name"`
	CoverURL           string            `json:"cover_url"`
	CustomType         string            `json:"custom_type"`
	Data               string            `json:"data"`
	CreatedAt          int64             `json:"created_at"`
	UpdatedAt          int64             `json:"updated_at"`
	IsDistinct         bool              `json:"is_distinct"`
	IsPublic           bool              `json:"is_public"`
	IsSuper            bool              `json:"is_super"`
	Freeze             bool              `json:"freeze"`
	MemberCount        int               `json:"member_count"`
	JoinedMemberCount  int               `json:"joined_member_count"`
	UnreadMessageCount int               `json:"unread_message_count"`
	UnreadMentionCount int               `json:"unread_mention_count"`
	LastMessage        *Message          `json:"last_message,omitempty"`
	Metadata           map[string]string `json:"metadata,omitempty"`
	MemberState        string            `json:"member_state"`
	MyRole             string            `json:"my_role"`
	HiddenState        string            `json:"hidden_state"`
	// Raw is the whole object as the library gave it.
	Raw json.RawMessage `json:"-"`
}

// UnmarshalJSON decodes the fields and keeps the whole object in Raw.
func (ch *Channel) UnmarshalJSON(data []byte) error {
	type fields Channel
	if err := json.Unmarshal(data, (*fields)(ch)); err != nil {
		return err
	}
	ch.Raw = append(json.RawMessage(nil), data...)
	return nil
}

// MetaArrayItem is one entry of a message's sorted_metaarray.
type MetaArrayItem struct {
	Key   string   `json:"key"`
	Value []string `json:"value"`
}

// ConnectionEvent is a change of the session's connection (PARLEY_CONNECTION_*).
type ConnectionEvent int

// The connection events.
const (
	ConnectionConnecting           ConnectionEvent = C.PARLEY_CONNECTION_CONNECTING
	ConnectionConnected            ConnectionEvent = C.PARLEY_CONNECTION_CONNECTED
	ConnectionReconnectStarted     ConnectionEvent = C.PARLEY_CONNECTION_RECONNECT_STARTED
	ConnectionReconnectSucceeded   ConnectionEvent = C.PARLEY_CONNECTION_RECONNECT_SUCCEEDED
	ConnectionReconnectFailed      ConnectionEvent = C.PARLEY_CONNECTION_RECONNECT_FAILED
	ConnectionDisconnected         ConnectionEvent = C.PARLEY_CONNECTION_DISCONNECTED
	ConnectionSessionTokenRequired ConnectionEvent = C.PARLEY_CONNECTION_SESSION_TOKEN_REQUIRED
)

func (e ConnectionEvent) String() string { return C.GoString(C.parley_connection_event_name(C.int(e))) }

// ConnectionChange is one connection event; Err says why for reconnect started, reconnect
// failed and disconnected (nil otherwise, or when there was no failure).
type ConnectionChange struct {
	Event ConnectionEvent
	Err   error
}

// ConnectionState is the event stream's state.
type ConnectionState int

// The stream states.
const (
	StateClosed       ConnectionState = C.PARLEY_STATE_CLOSED
	StateConnecting   ConnectionState = C.PARLEY_STATE_CONNECTING
	StateOpen         ConnectionState = C.PARLEY_STATE_OPEN
	StateReconnecting ConnectionState = C.PARLEY_STATE_RECONNECTING
)

func (s ConnectionState) String() string {
	switch s {
	case StateClosed:
		return "closed"
	case StateConnecting:
		return "connecting"
	case StateOpen:
		return "open"
	case StateReconnecting:
		return "reconnecting"
	}
	return "unknown"
}

// UnmarshalText reads a state by its name ("closed", "connecting", "open", "reconnecting"),
// as the library's JSON (Metrics) gives it.
func (s *ConnectionState) UnmarshalText(text []byte) error {
	for _, state := range []ConnectionState{StateClosed, StateConnecting, StateOpen, StateReconnecting} {
		if state.String() == string(text) {
			*s = state
			return nil
		}
	}
	return fmt.Errorf("unknown connection state %q", text)
}

// Freshness says whether what a view shows is live or possibly stale (docs/C-API.md,
// "Freshness").
type Freshness int

// The freshness states.
const (
	// FreshnessLive: connected, caught up, and the server confirmed what the view shows.
	FreshnessLive Freshness = C.PARLEY_FRESHNESS_LIVE
	// FreshnessCached: caught up, but the server has not confirmed what the view shows.
	FreshnessCached Freshness = C.PARLEY_FRESHNESS_CACHED
	// FreshnessCatchingUp: the stream is open and the catch-up after it runs.
	FreshnessCatchingUp Freshness = C.PARLEY_FRESHNESS_CATCHING_UP
	// FreshnessOffline: no event stream; changes may be missed until it is back.
	FreshnessOffline Freshness = C.PARLEY_FRESHNESS_OFFLINE
)

func (f Freshness) String() string { return C.GoString(C.parley_freshness_name(C.int(f))) }

// PageOrigin says where a load's result came from.
type PageOrigin int

// The page origins.
const (
	OriginNone   PageOrigin = C.PARLEY_PAGE_ORIGIN_NONE
	OriginCache  PageOrigin = C.PARLEY_PAGE_ORIGIN_CACHE
	OriginServer PageOrigin = C.PARLEY_PAGE_ORIGIN_SERVER
)

func (o PageOrigin) String() string {
	switch o {
	case OriginCache:
		return "cache"
	case OriginServer:
		return "server"
	}
	return "none"
}

// Source says why a view reported a change: a real-time category (message_received, ...) or
// one of the engine's own (channel_changelog, local_send, api_load, ...).
type Source struct {
	// Code is the PARLEY_SOURCE_* value; CollectionSources lists them all.
	Code int
	// Name is the source's stable name, e.g. "message_received".
	Name string
	// Detail is the operation's name for local_operation, the live event's category when one
	// caused the change, else "".
	Detail string
}

func sourceFromC(code C.int, name, detail *C.char) Source {
	return Source{Code: int(code), Name: goString(name), Detail: goString(detail)}
}

// decodeList decodes a JSON array the library handed to a callback (borrowed).
func decodeList[T any](text *C.char) []T {
	var items []T
	if text != nil {
		_ = json.Unmarshal([]byte(C.GoString(text)), &items)
	}
	return items
}
