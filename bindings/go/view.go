package parley

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"runtime/cgo"
	"sync"
)

// view is what every view (channel and message collections, sync views, searches) shares:
// its handler's handle, its changes channel, closing once, and loads awaited with a context.
type view[Change any] struct {
	client  *Client
	handle  cgo.Handle
	changes *queue[Change]
	// mutex is held for reading by every call that uses the native handle, for writing by
	// Close, so that the handle is never disposed under a call.
	mutex  sync.RWMutex
	closed bool
}

func (v *view[Change]) init(client *Client, self any) {
	v.client = client
	v.changes = newQueue[Change]()
	v.handle = cgo.NewHandle(self)
}

// channel is the view's changes channel; a zero view's is closed.
func (v *view[Change]) channel() <-chan Change {
	if v.changes == nil {
		closed := make(chan Change)
		close(closed)
		return closed
	}
	return v.changes.out
}

// use runs f unless the view (or its client) is closed.
func (v *view[Change]) use(f func() error) error {
	if v.client == nil {
		return errNotMade
	}
	v.mutex.RLock()
	defer v.mutex.RUnlock()
	if v.closed {
		return ErrClosed
	}
	return v.client.use(func(*C.parley_client) error { return f() })
}

// close runs dispose once; after it no callback of the view runs, so the handle and the
// changes channel go.
func (v *view[Change]) close(self closer, dispose func()) {
	v.mutex.Lock()
	defer v.mutex.Unlock()
	if v.closed || v.client == nil {
		return
	}
	v.closed = true
	dispose()
	v.changes.close()
	v.handle.Delete()
	v.client.untrack(self)
}

// load starts a view's load with a one-shot completion and waits for it or for ctx. Loads of
// views have no operation id: when ctx ends first the load goes on, its result is dropped,
// and the call returns ctx's error (as an ErrCancelled *Error).
func (v *view[Change]) load(ctx context.Context, op string, start func(handle C.uintptr_t) C.int) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", &Error{Code: ErrCancelled, Op: op, Message: "the context ended before the call", cause: err}
	}
	done := make(chan outcome, 1)
	handle := cgo.NewHandle(completion(func(err *C.parley_error, text *C.char) {
		done <- outcome{errorFromC(op, err), goString(text)}
	}))
	err := v.use(func() error { return call(op, func() C.int { return start(C.uintptr_t(handle)) }) })
	if err != nil {
		handle.Delete()
		return "", err
	}
	select {
	case result := <-done:
		if result.err != nil {
			return "", result.err
		}
		return result.json, nil
	case <-ctx.Done():
		return "", &Error{Code: ErrCancelled, Op: op, Message: "the context ended; the load goes on in the view", cause: ctx.Err()}
	}
}

// intGetter reads one int property of a view.
func (v *view[Change]) intGetter(op string, get func(out *C.int) C.int) (int, error) {
	var value C.int
	err := v.use(func() error { return call(op, func() C.int { return get(&value) }) })
	return int(value), err
}

// stringGetter reads one owned string property of a view.
func (v *view[Change]) stringGetter(op string, get func(out **C.char) C.int) (string, error) {
	var text *C.char
	err := v.use(func() error { return call(op, func() C.int { return get(&text) }) })
	return takeString(text), err
}
