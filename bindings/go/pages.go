package parley

import "encoding/json"

// The list answers of the catalog's operations.

// ChannelListPage is a page of channels; Next is the token of the next page ("" at the end).
type ChannelListPage struct {
	Channels []Channel `json:"channels"`
	Next     string    `json:"next"`
}

// MessageListPage is a page of messages around a timestamp.
type MessageListPage struct {
	Messages []Message `json:"messages"`
	HasPrev  bool      `json:"has_prev"`
	HasNext  bool      `json:"has_next"`
}

// UserListPage is a page of users.
type UserListPage struct {
	Users []User `json:"users"`
	Next  string `json:"next"`
}

// ChannelChangelogPage lists the channels changed and deleted since a token or time.
type ChannelChangelogPage struct {
	Updated []Channel `json:"updated"`
	Deleted []string  `json:"deleted"`
	HasMore bool      `json:"has_more"`
	Next    string    `json:"next"`
}

// MessageChangelogPage lists the messages changed and deleted since a token or time.
type MessageChangelogPage struct {
	Updated []Message         `json:"updated"`
	Deleted []json.RawMessage `json:"deleted"`
	HasMore bool              `json:"has_more"`
	Next    string            `json:"next"`
}

// Ptr returns a pointer to value: the optional parameters of the catalog's operations are
// pointers, nil meaning "not given" (the server's default applies).
func Ptr[T any](value T) *T { return &value }
