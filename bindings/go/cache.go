package parley

/*
#include "shim.h"
*/
import "C"

import (
	"encoding/json"
	"unsafe"
)

// The local cache, read directly: these work offline and after Disconnect (the last user's
// cache stays open).

// CachedChannels is up to limit (1..1000) cached channels in order ("" for
// "latest_last_message", "chronological", "channel_name_alphabetical").
func (c *Client) CachedChannels(order string, limit int) ([]Channel, error) {
	op := "cached channels"
	if err := checkText(op, order); err != nil {
		return nil, err
	}
	var orderText *C.char
	if order != "" {
		orderText = cString(order)
		defer C.free(unsafe.Pointer(orderText))
	}
	var channels []Channel
	return channels, c.readCache(op, &channels, func(native *C.parley_client, out **C.char) C.int {
		return C.parley_client_cached_channels(native, out, orderText, C.int(limit))
	})
}

// CachedChannel is one cached channel; ErrNotFound when it is not cached.
func (c *Client) CachedChannel(channelURL string) (Channel, error) {
	op := "cached channel"
	if err := checkText(op, channelURL); err != nil {
		return Channel{}, err
	}
	url := cString(channelURL)
	defer C.free(unsafe.Pointer(url))
	var channel Channel
	return channel, c.readCache(op, &channel, func(native *C.parley_client, out **C.char) C.int {
		return C.parley_client_cached_channel(native, out, url)
	})
}

// CachedMessagePage is a page of cached messages: Continuous is true only when the cache
// knows no message of the channel is missing between the first and the last.
type CachedMessagePage struct {
	Messages   []Message `json:"messages"`
	Continuous bool      `json:"continuous"`
}

// CachedMessages is the newest limit (1..1000) cached messages of the channel created before
// beforeTS (Unix ms; -1 = the newest, then the channel's pending and failed messages follow),
// oldest first, marked with whether the page is continuous.
func (c *Client) CachedMessages(channelURL string, beforeTS int64, limit int) (CachedMessagePage, error) {
	op := "cached messages"
	if err := checkText(op, channelURL); err != nil {
		return CachedMessagePage{}, err
	}
	url := cString(channelURL)
	defer C.free(unsafe.Pointer(url))
	var page CachedMessagePage
	return page, c.readCache(op, &page, func(native *C.parley_client, out **C.char) C.int {
		return C.parley_client_cached_message_page(native, out, url, C.int64_t(beforeTS), C.int(limit))
	})
}

// ClearCachedData removes everything cached for the current user, pending and failed
// messages too; open views report what they showed as deleted and reload.
func (c *Client) ClearCachedData() error {
	return c.use(func(native *C.parley_client) error {
		return call("clear cached data", func() C.int { return C.parley_client_clear_cached_data(native) })
	})
}

// CacheKeys names the key RekeyCache gives the cache file: Key (64 hexadecimal digits) or
// Passphrase (with its Argon2id limits, 0 for the defaults); neither removes the encryption.
type CacheKeys struct {
	Key                  string
	Passphrase           string
	PassphraseIterations int
	PassphraseMemoryMB   int
}

// RekeyCache rewrites the current user's cache file under another key, or plain: beside
// itself, synced, renamed over the old one (a crash leaves it whole under one key or the
// other). The client uses the new key from then on. ErrInvalidState when no cache file is
// open (Connect first), ErrCacheKey when the current key does not open the file.
func (c *Client) RekeyCache(keys CacheKeys) error {
	document := map[string]any{}
	if keys.Key != "" {
		document["cache_key"] = keys.Key
	}
	if keys.Passphrase != "" {
		document["cache_passphrase"] = keys.Passphrase
	}
	if keys.PassphraseIterations != 0 {
		document["cache_passphrase_iterations"] = keys.PassphraseIterations
	}
	if keys.PassphraseMemoryMB != 0 {
		document["cache_passphrase_memory_mb"] = keys.PassphraseMemoryMB
	}
	text, err := json.Marshal(document)
	if err != nil {
		return err
	}
	// C memory holds the only other copy; both are wiped after the call.
	text = append(text, 0)
	keyJSON := (*C.char)(C.CBytes(text))
	defer func() {
		C.go_wipe(unsafe.Pointer(keyJSON), C.size_t(len(text)))
		C.free(unsafe.Pointer(keyJSON))
		for index := range text {
			text[index] = 0
		}
	}()
	return c.use(func(native *C.parley_client) error {
		return call("rekey cache", func() C.int { return C.parley_client_rekey_cache(native, keyJSON) })
	})
}

func (c *Client) readCache(op string, into any, read func(native *C.parley_client, out **C.char) C.int) error {
	var text *C.char
	err := c.use(func(native *C.parley_client) error { return call(op, func() C.int { return read(native, &text) }) })
	if err != nil {
		return err
	}
	return decode(op, takeString(text), into)
}
