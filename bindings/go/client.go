package parley

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"runtime/cgo"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Config configures a Client. Zero values leave the library's defaults (docs/C-REFERENCE.md
// lists every key and its default).
type Config struct {
	// ServerURL is the server's base URL, e.g. "http://127.0.0.1:8080".
	ServerURL string
	// APIToken is the admin token Request sends (not needed for a user's session).
	APIToken string
	// CacheDir is the directory of the cache files, one per server and user
	// (<CacheDir>/<server host>/<user_id>.sqlite, created with mode 0700). Empty:
	// $XDG_CACHE_HOME/parley, or $HOME/.cache/parley when XDG_CACHE_HOME is not set (or
	// not absolute).
	CacheDir string
	// MemoryCache keeps the cache in memory only: nothing survives the process.
	MemoryCache bool
	// CacheKey encrypts the cache file at rest: 32 bytes as 64 hexadecimal digits
	// ("cache_key"). A wrong key, or none for an encrypted file, fails Connect with
	// ErrCacheKey and leaves the file as it was (docs/C-API.md "Encryption at rest").
	CacheKey string
	// CachePassphrase encrypts the cache file with a key derived from it by Argon2id
	// ("cache_passphrase"; its limits through Extra: "cache_passphrase_iterations",
	// "cache_passphrase_memory_mb"). Not with CacheKey.
	CachePassphrase string
	// LogLevel is "off", "error", "warning" (the default), "info", "debug" or "trace": the
	// most verbose records kept, which Client.Logs delivers (Logs sets the level again).
	LogLevel string
	// RequestTimeout bounds each request (default 30 s).
	RequestTimeout time.Duration
	// Extra holds any other configuration keys by their wire names ("resend_policy",
	// "reconnect_max_delay_ms", ...). A key the library does not know is refused.
	Extra map[string]any
}

func (config Config) document() (string, error) {
	document := map[string]any{"dispatch_mode": "manual"}
	for key, value := range config.Extra {
		document[key] = value
	}
	if config.ServerURL != "" {
		document["server_url"] = config.ServerURL
	}
	if config.APIToken != "" {
		document["api_token"] = config.APIToken
	}
	if config.CacheDir != "" {
		document["cache_dir"] = config.CacheDir
	}
	if config.MemoryCache {
		document["cache_mode"] = "memory"
	}
	if config.CacheKey != "" {
		document["cache_key"] = config.CacheKey
	}
	if config.CachePassphrase != "" {
		document["cache_passphrase"] = config.CachePassphrase
	}
	if config.LogLevel != "" {
		document["log_level"] = config.LogLevel
	}
	if config.RequestTimeout != 0 {
		document["request_timeout_ms"] = config.RequestTimeout.Milliseconds()
	}
	if mode, ok := document["dispatch_mode"]; ok && mode != "manual" {
		return "", &Error{Code: ErrInvalidArgument, Op: "new client", Message: "dispatch_mode: the Go binding dispatches callbacks itself (\"manual\")"}
	}
	text, err := json.Marshal(document)
	return string(text), err
}

// Client is one user's connection to a server with its local cache. Its callbacks run on the
// one goroutine that dispatches every Client of the process (runtime.go), which hands every
// result, event and change to the channels and calls waiting for them: an application reads
// them where it likes and needs no locks. Every
// method is safe to call from any goroutine; Close too, also more than once.
type Client struct {
	native *C.parley_client
	// stopped is closed by Close; nil in a Client not made by New.
	stopped chan struct{}

	closeOnce sync.Once
	closed    atomic.Bool
	// closing is held for reading by every call that uses native, for writing by Close, so
	// that the client is never destroyed under a call.
	closing sync.RWMutex

	mutex       sync.Mutex
	events      *queue[Event]
	eventHandle cgo.Handle
	connections *queue[ConnectionChange]
	connHandle  cgo.Handle
	logs        *queue[LogRecord]
	logHandle   cgo.Handle
	// subscriptions are those of SubscribeEvents and SubscribeConnectionChanges.
	subscriptions map[*subscription]struct{}
	views         map[closer]struct{}
}

// errNotMade is the error of a Client, view or query used without being made by its
// constructor (a zero value).
var errNotMade = &Error{Code: ErrInvalidHandle, Op: "use", Message: "not made by its constructor (parley.New, Client.NewChannelCollection, ...)"}

// closer is a view or query the client closes with itself.
type closer interface{ Close() error }

// New creates a client. It connects to nothing yet: see Connect.
func New(config Config) (*Client, error) {
	document, err := config.document()
	if err != nil {
		return nil, err
	}
	client := &Client{stopped: make(chan struct{}), views: map[closer]struct{}{}, subscriptions: map[*subscription]struct{}{}}
	documentText := C.CString(document)
	defer C.free(unsafe.Pointer(documentText))
	if err := call("new client", func() C.int { return C.parley_client_create(&client.native, documentText) }); err != nil {
		return nil, err
	}
	group, err := sharedDispatchGroup()
	if err == nil {
		err = call("dispatch group", func() C.int { return C.parley_client_set_dispatch_group(client.native, group) })
	}
	if err != nil {
		C.parley_client_destroy(client.native)
		return nil, err
	}
	return client, nil
}

// Close stops the client's views and queries, cancels its calls in flight (they return
// ErrCancelled), destroys it and closes its channels. Safe from any goroutine, more than
// once, and after any use. It returns nil, also when called again; every other method
// called after it returns ErrClosed.
func (c *Client) Close() error {
	if c.stopped == nil {
		return nil // a Client not made by New holds nothing
	}
	c.closeOnce.Do(func() {
		// From here no call starts, and no view or query is made (they are tracked while
		// made, under closing).
		c.closing.Lock()
		c.closed.Store(true)
		c.closing.Unlock()
		c.mutex.Lock()
		views := make([]closer, 0, len(c.views))
		for view := range c.views {
			views = append(views, view)
		}
		c.mutex.Unlock()
		for _, view := range views {
			_ = view.Close()
		}
		// Waits for a dispatch of this client in progress, then runs the callbacks still
		// queued (calls in flight complete with ErrCancelled) here.
		C.parley_client_destroy(c.native)
		close(c.stopped)
		c.mutex.Lock()
		defer c.mutex.Unlock()
		if c.events != nil && c.eventHandle != 0 {
			c.events.close()
			c.eventHandle.Delete()
		}
		if c.connections != nil && c.connHandle != 0 {
			c.connections.close()
			c.connHandle.Delete()
		}
		if c.logs != nil {
			c.logs.close()
			c.logHandle.Delete()
		}
		for sub := range c.subscriptions {
			sub.end()
		}
	})
	return nil
}

// use runs f with the native client unless the client is closed.
func (c *Client) use(f func(native *C.parley_client) error) error {
	if c.stopped == nil {
		return errNotMade
	}
	c.closing.RLock()
	defer c.closing.RUnlock()
	if c.closed.Load() {
		return ErrClosed
	}
	return f(c.native)
}

func (c *Client) track(view closer) {
	c.mutex.Lock()
	c.views[view] = struct{}{}
	c.mutex.Unlock()
}

func (c *Client) untrack(view closer) {
	c.mutex.Lock()
	delete(c.views, view)
	c.mutex.Unlock()
}

// outcome is what an asynchronous call completed with.
type outcome struct {
	err  *Error
	json string
}

// await starts an asynchronous call with start (given the completion's handle and where to
// put the operation id), then waits for its completion or for ctx. When ctx ends first, the
// operation is cancelled in the library (if it has an id) and its completion still awaited:
// an error then matches both ErrCancelled and ctx's error.
func (c *Client) await(ctx context.Context, op string, start func(native *C.parley_client, handle C.uintptr_t, operationID *C.uint64_t) C.int) (string, error) {
	done, cancel, err := c.begin(ctx, op, start)
	if err != nil {
		return "", err
	}
	return c.wait(ctx, done, cancel)
}

// begin is await's first half: it starts the call and gives where its outcome arrives and
// how to cancel it.
func (c *Client) begin(ctx context.Context, op string, start func(native *C.parley_client, handle C.uintptr_t, operationID *C.uint64_t) C.int) (chan outcome, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, &Error{Code: ErrCancelled, Op: op, Message: "the context ended before the call", cause: err}
	}
	done := make(chan outcome, 1)
	handle := cgoNewCompletion(op, done)
	var operationID C.uint64_t
	err := c.use(func(native *C.parley_client) error {
		return call(op, func() C.int { return start(native, C.uintptr_t(handle), &operationID) })
	})
	if err != nil {
		handle.Delete() // a call that failed runs no callback
		return nil, nil, err
	}
	cancel := func() {
		if operationID != 0 {
			_ = c.use(func(native *C.parley_client) error {
				C.parley_client_cancel(native, operationID)
				return nil
			})
		}
	}
	return done, cancel, nil
}

// wait takes a call's outcome; when ctx ends first it runs cancel and still waits for the
// outcome (the library completes every call exactly once, with ErrCancelled if need be).
func (c *Client) wait(ctx context.Context, done chan outcome, cancel func()) (string, error) {
	var result outcome
	select {
	case result = <-done:
	case <-ctx.Done():
		cancel()
		result = <-done
		if result.err != nil && result.err.Code == ErrCancelled {
			result.err.cause = ctx.Err()
		}
	}
	if result.err != nil {
		return "", result.err
	}
	return result.json, nil
}

// Connect starts the session of userID with a session token the server issued
// (POST /v3/users/{user_id}/token): opens the user's cache, starts the real-time stream and
// catches the cache up. It returns the user. With the server unreachable but the user in the
// cache it returns the cached user and keeps reconnecting.
func (c *Client) Connect(ctx context.Context, userID, sessionToken string) (User, error) {
	if err := checkText("connect", userID, sessionToken); err != nil {
		return User{}, err
	}
	user := cString(userID)
	defer C.free(unsafe.Pointer(user))
	token := cString(sessionToken)
	defer C.free(unsafe.Pointer(token))
	text, err := c.await(ctx, "connect", func(native *C.parley_client, h C.uintptr_t, op *C.uint64_t) C.int {
		return C.go_connect(native, op, user, token, h)
	})
	if err != nil {
		return User{}, err
	}
	var result User
	return result, decode("connect", text, &result)
}

// Disconnect ends the session; the cache stays open for cached reads.
func (c *Client) Disconnect() error {
	return c.use(func(native *C.parley_client) error {
		return call("disconnect", func() C.int { return C.parley_client_disconnect(native) })
	})
}

// Reconnect reopens the event stream now (skipping a backoff delay, or replacing an open
// stream that may be dead).
func (c *Client) Reconnect() error {
	return c.use(func(native *C.parley_client) error {
		return call("reconnect", func() C.int { return C.parley_client_reconnect(native) })
	})
}

// SetSessionToken replaces the session token (after ConnectionSessionTokenRequired).
func (c *Client) SetSessionToken(token string) error {
	if err := checkText("set session token", token); err != nil {
		return err
	}
	text := cString(token)
	defer C.free(unsafe.Pointer(text))
	return c.use(func(native *C.parley_client) error {
		return call("set session token", func() C.int { return C.parley_client_set_session_token(native, text) })
	})
}

// CurrentUserID is the connected user's id.
func (c *Client) CurrentUserID() (string, error) {
	var text *C.char
	err := c.use(func(native *C.parley_client) error {
		return call("current user id", func() C.int { return C.parley_client_current_user_id(native, &text) })
	})
	return takeString(text), err
}

// ConnectionState is the event stream's state.
func (c *Client) ConnectionState() (ConnectionState, error) {
	var state C.int
	err := c.use(func(native *C.parley_client) error {
		return call("connection state", func() C.int { return C.parley_client_connection_state(native, &state) })
	})
	return ConnectionState(state), err
}

// Events returns the channel of the client's real-time, sync and sending events, each after
// it was applied to the cache. The first call subscribes: call it before Connect to see
// every event of the session. The channel closes when the client closes; undelivered events
// wait for the reader (they are never dropped), so read it for as long as you subscribe.
func (c *Client) Events() <-chan Event {
	c.mutex.Lock()
	defer c.mutex.Unlock()
	if c.events == nil {
		c.events = newQueue[Event]()
		c.eventHandle = cgo.NewHandle(c.events)
		err := c.use(func(native *C.parley_client) error {
			return call("events", func() C.int { return C.go_set_event_handler(native, C.uintptr_t(c.eventHandle)) })
		})
		if err != nil {
			c.events.close()
			c.eventHandle.Delete()
			c.eventHandle = 0
		}
	}
	return c.events.out
}

// ConnectionChanges returns the channel of the session's connection changes (connected,
// reconnect started, ...). Like Events, the first call subscribes, and the channel closes
// with the client.
func (c *Client) ConnectionChanges() <-chan ConnectionChange {
	c.mutex.Lock()
	defer c.mutex.Unlock()
	if c.connections == nil {
		c.connections = newQueue[ConnectionChange]()
		c.connHandle = cgo.NewHandle(c.connections)
		err := c.use(func(native *C.parley_client) error {
			return call("connection changes", func() C.int {
				return C.go_set_connection_handler(native, C.uintptr_t(c.connHandle))
			})
		})
		if err != nil {
			c.connections.close()
			c.connHandle.Delete()
			c.connHandle = 0
		}
	}
	return c.connections.out
}

// Request sends a raw REST request (method "GET", "POST", ...; path starting with "/") with
// the configured API token, body encoded as JSON unless nil, and returns the answer's JSON.
func (c *Client) Request(ctx context.Context, method, path string, body any) (json.RawMessage, error) {
	if err := checkText("request", method, path); err != nil {
		return nil, err
	}
	methodText := cString(method)
	defer C.free(unsafe.Pointer(methodText))
	pathText := cString(path)
	defer C.free(unsafe.Pointer(pathText))
	var bodyText *C.char
	if body != nil {
		encoded, err := json.Marshal(body)
		if err != nil {
			return nil, &Error{Code: ErrInvalidArgument, Op: "request", Message: err.Error()}
		}
		bodyText = C.CString(string(encoded))
		defer C.free(unsafe.Pointer(bodyText))
	}
	text, err := c.await(ctx, "request "+method+" "+path, func(native *C.parley_client, h C.uintptr_t, op *C.uint64_t) C.int {
		return C.go_request(native, op, methodText, pathText, bodyText, h)
	})
	if err != nil {
		return nil, err
	}
	return json.RawMessage(text), nil
}

// Perform runs a catalog operation by name (Operations lists them; the generated methods
// such as CreateGroupChannel call it) with params by their wire names, and returns the
// server's answer. The library checks the parameters and applies the answer to the cache.
func (c *Client) Perform(ctx context.Context, operation string, params any) (json.RawMessage, error) {
	op := "perform " + operation
	if err := checkText(op, operation); err != nil {
		return nil, err
	}
	paramsText, err := encodeParams(op, params)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(paramsText))
	name := cString(operation)
	defer C.free(unsafe.Pointer(name))
	text, err := c.await(ctx, op, func(native *C.parley_client, h C.uintptr_t, id *C.uint64_t) C.int {
		return C.go_perform(native, id, name, paramsText, h)
	})
	if err != nil {
		return nil, err
	}
	return json.RawMessage(text), nil
}

// performInto runs Perform and decodes the answer into T (the generated methods' answers).
func performInto[T any](ctx context.Context, c *Client, operation string, params any) (T, error) {
	var result T
	text, err := c.Perform(ctx, operation, params)
	if err != nil {
		return result, err
	}
	return result, decode("perform "+operation, string(text), &result)
}

// encodeParams encodes a parameter object (nil: {}) as a C string (free it).
func encodeParams(op string, params any) (*C.char, error) {
	encoded, err := json.Marshal(params)
	if err != nil {
		return nil, &Error{Code: ErrInvalidArgument, Op: op, Message: "parameters: " + err.Error()}
	}
	if string(encoded) == "null" { // nil, or a nil map or slice: no parameters
		return C.CString("{}"), nil
	}
	return C.CString(string(encoded)), nil
}

// decode reads a JSON answer into result, as an ErrProtocol error when it does not fit.
func decode(op, text string, result any) error {
	if err := json.Unmarshal([]byte(text), result); err != nil {
		return &Error{Code: ErrProtocol, Op: op, Message: "decoding the answer: " + err.Error()}
	}
	return nil
}

// cString copies s for the library. A C string ends at its first NUL byte: the public
// functions refuse text holding one (checkText) before it gets here.
func cString(s string) *C.char { return C.CString(s) }

// goString copies a borrowed C string ("" for NULL).
func goString(text *C.char) string {
	if text == nil {
		return ""
	}
	return C.GoString(text)
}

// takeString copies a string the library returned and frees it.
func takeString(text *C.char) string {
	if text == nil {
		return ""
	}
	defer C.parley_free(unsafe.Pointer(text))
	return C.GoString(text)
}

// rawJSON copies a borrowed JSON text.
func rawJSON(text *C.char) json.RawMessage {
	if text == nil {
		return nil
	}
	return json.RawMessage(C.GoString(text))
}

// cgoNewCompletion makes the handle of a one-shot completion that puts its outcome into done.
func cgoNewCompletion(op string, done chan outcome) cgo.Handle {
	return cgo.NewHandle(completion(func(err *C.parley_error, text *C.char) {
		done <- outcome{errorFromC(op, err), goString(text)}
	}))
}
