// Package parley is the Go binding of Parley, an embeddable chat sync engine: group channels
// and messages kept in a local SQLite cache, synchronized with a server, and shown as live
// views. It calls the library's C ABI (include/parley.h) through cgo and pkg-config.
//
// The library's callbacks of every Client run on one goroutine of the process (the library's
// manual dispatch mode, all clients in one dispatch group, driven by its event fd), which
// hands everything they report to channels:
// Client.Events, Client.ConnectionChanges and each view's Changes. An Event's Category is one
// of the Category constants (a sender gets CategoryMessageSent for its message, the other
// members CategoryMessageReceived), and Event.Message, Event.Channel, Event.DeletedMessage,
// Event.DeletedChannelURL and Event.Resync decode its payload. Calls that talk to the
// server take a context.Context, whose end cancels the operation in the library. Failures
// are *Error values matched with errors.Is against the status codes (ErrNotFound, ...) and
// read with errors.As; Error.Retryable is the library's retry rule. Close is safe from any
// goroutine, more than once.
//
// The catalog's operations (Operations) are methods of Client generated from the library's
// own operation table: operations_gen.go, rewritten by `go generate`.
//
// bindings/go/README.md has the build, the model and examples.
package parley
