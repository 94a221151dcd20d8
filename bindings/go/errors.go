package parley

// #include "shim.h"
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
)

// Code is one of the library's status codes (PARLEY_E_*). Each is also an error value, so
// that errors.Is(err, parley.ErrNotFound) matches any *Error of that code.
type Code int

// The library's status codes (include/parley/common.h; docs/C-REFERENCE.md has their meanings).
const (
	ErrInvalidArgument Code = C.PARLEY_E_INVALID_ARGUMENT
	ErrInvalidHandle   Code = C.PARLEY_E_INVALID_HANDLE
	ErrInvalidJSON     Code = C.PARLEY_E_INVALID_JSON
	ErrNoMemory        Code = C.PARLEY_E_NO_MEMORY
	ErrInvalidState    Code = C.PARLEY_E_INVALID_STATE
	ErrNetwork         Code = C.PARLEY_E_NETWORK
	ErrTimeout         Code = C.PARLEY_E_TIMEOUT
	ErrCancelled       Code = C.PARLEY_E_CANCELLED
	ErrServer          Code = C.PARLEY_E_SERVER
	ErrUnauthorized    Code = C.PARLEY_E_UNAUTHORIZED
	ErrForbidden       Code = C.PARLEY_E_FORBIDDEN
	ErrNotFound        Code = C.PARLEY_E_NOT_FOUND
	ErrCache           Code = C.PARLEY_E_CACHE
	ErrProtocol        Code = C.PARLEY_E_PROTOCOL
	ErrTLS             Code = C.PARLEY_E_TLS
	ErrIO              Code = C.PARLEY_E_IO
	ErrLimitExceeded   Code = C.PARLEY_E_LIMIT_EXCEEDED
	ErrCacheKey        Code = C.PARLEY_E_CACHE_KEY
	ErrInternal        Code = C.PARLEY_E_INTERNAL
)

// Name is the code's stable name ("not_found", ...), as parley_error_name gives it.
func (c Code) Name() string { return C.GoString(C.parley_error_name(C.int(c))) }

func (c Code) String() string { return c.Name() }

func (c Code) Error() string { return "parley: " + c.Name() }

// ErrClosed is returned by every method of a Client, view or query used after its Close.
var ErrClosed = errors.New("parley: closed")

// Error is a failure reported by the library: errors.Is matches it against its Code, and
// errors.As gives its details. A call cancelled through its context also matches the
// context's error (context.Canceled or context.DeadlineExceeded).
type Error struct {
	Code Code
	// Message is the library's explanation.
	Message string
	// HTTPStatus is the status of the server's answer, 0 if none.
	HTTPStatus int
	// ServerCode is the server's own error code, 0 if none.
	ServerCode int
	// Op names the call that failed ("perform create_group_channel", "connect", ...).
	Op string

	cause error
}

func (e *Error) Error() string {
	text := fmt.Sprintf("parley: %s: %s", e.Op, e.Code.Name())
	if e.Message != "" {
		text += ": " + e.Message
	}
	if e.HTTPStatus != 0 {
		text += fmt.Sprintf(" (HTTP %d", e.HTTPStatus)
		if e.ServerCode != 0 {
			text += fmt.Sprintf(", server code %d", e.ServerCode)
		}
		text += ")"
	}
	return text
}

// Is reports whether target is this error's Code.
func (e *Error) Is(target error) bool {
	code, ok := target.(Code)
	return ok && code == e.Code
}

// Unwrap gives the context's error when the call was cancelled through its context.
func (e *Error) Unwrap() error { return e.cause }

// Retryable reports whether trying the same call again later may succeed: network failures,
// timeouts and the server's own trouble (5xx, 408, 429). Every other error is a refusal the
// same request gets again. It is the library's rule (parley_error_is_retryable).
func (e *Error) Retryable() bool {
	return C.go_is_retryable(C.int(e.Code), C.int(e.HTTPStatus), C.int(e.ServerCode)) != 0
}

// IsRetryable reports whether err is (or wraps) an *Error that is Retryable.
func IsRetryable(err error) bool {
	var parleyError *Error
	return errors.As(err, &parleyError) && parleyError.Retryable()
}

// errorFromC copies an error the library handed to a callback (borrowed), or nil.
func errorFromC(op string, e *C.parley_error) *Error {
	if e == nil {
		return nil
	}
	return &Error{
		Code:       Code(e.code),
		Message:    C.GoString(e.message),
		HTTPStatus: int(e.http_status),
		ServerCode: int(e.server_code),
		Op:         op,
	}
}

// call runs one synchronous library call and turns its status into an error. The error text
// is per OS thread, so the goroutine stays on its thread from the call to reading the text.
// That text starts with the code's name ("invalid_argument: ..."), which Error.Error prints
// already: Message keeps the rest.
func call(op string, f func() C.int) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	status := f()
	if status == C.PARLEY_OK {
		return nil
	}
	code := Code(status)
	return &Error{Code: code, Message: strings.TrimPrefix(C.GoString(C.parley_last_error_message()), code.Name()+": "), Op: op}
}

// asError turns a decoding failure (an *Error or nil) into *Error.
func asError(err error) *Error {
	if err == nil {
		return nil
	}
	if parleyError, ok := err.(*Error); ok {
		return parleyError
	}
	return &Error{Code: ErrInternal, Message: err.Error()}
}

// checkText refuses text the library cannot take: a C string ends at its first NUL byte.
func checkText(op string, values ...string) error {
	for _, value := range values {
		for i := 0; i < len(value); i++ {
			if value[i] == 0 {
				return &Error{Code: ErrInvalidArgument, Op: op, Message: "text contains a NUL byte"}
			}
		}
	}
	return nil
}
