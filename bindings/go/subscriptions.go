package parley

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"sync"
	"sync/atomic"
	"unsafe"
)

// LogLevel is the verbosity of the library's log records.
type LogLevel int

// The log levels, from the least verbose.
const (
	LogOff     LogLevel = C.PARLEY_LOG_OFF
	LogError   LogLevel = C.PARLEY_LOG_ERROR
	LogWarning LogLevel = C.PARLEY_LOG_WARNING
	LogInfo    LogLevel = C.PARLEY_LOG_INFO
	LogDebug   LogLevel = C.PARLEY_LOG_DEBUG
	LogTrace   LogLevel = C.PARLEY_LOG_TRACE
)

func (l LogLevel) String() string {
	names := [...]string{"off", "error", "warning", "info", "debug", "trace"}
	if l >= 0 && int(l) < len(names) {
		return names[l]
	}
	return "unknown"
}

// LogRecord is one line of the library's log.
type LogRecord struct {
	Level   LogLevel
	Message string
}

// Logs returns the channel of the library's log records up to maxLevel (LogError..LogTrace).
// The first call subscribes; a later one changes the level and returns the same channel.
// Without it the library's records go nowhere. The channel closes with the client.
func (c *Client) Logs(maxLevel LogLevel) (<-chan LogRecord, error) {
	if maxLevel < LogError || maxLevel > LogTrace {
		return nil, &Error{Code: ErrInvalidArgument, Op: "logs", Message: fmt.Sprintf("the level %d is not one of LogError..LogTrace", maxLevel)}
	}
	c.mutex.Lock()
	defer c.mutex.Unlock()
	fresh := c.logs == nil
	if fresh {
		c.logs = newQueue[LogRecord]()
		c.logHandle = cgo.NewHandle(c.logs)
	}
	err := c.use(func(native *C.parley_client) error {
		return call("logs", func() C.int { return C.go_set_log_callback(native, C.uintptr_t(c.logHandle), C.int(maxLevel)) })
	})
	if err != nil && fresh {
		c.logs.close()
		c.logHandle.Delete()
		c.logs, c.logHandle = nil, 0
		return nil, err
	}
	return c.logs.out, err
}

// subscription is one named handler of the client's events or connection changes.
type subscription struct {
	handle cgo.Handle
	finish func() // closes the channel
	once   sync.Once
}

// end closes the subscription's channel and frees its handle, once.
func (s *subscription) end() {
	s.once.Do(func() {
		s.finish()
		s.handle.Delete()
	})
}

var subscriptionCounter atomic.Uint64

// SubscribeEvents adds a subscriber of its own beside Events: a channel of every event from
// now on, in the library's order, and a function that ends the subscription (its channel then
// closes after the events delivered before). Safe from any goroutine; the channel also closes
// with the client.
func (c *Client) SubscribeEvents() (<-chan Event, func(), error) {
	events := newQueue[Event]()
	unsubscribe, err := c.subscribe("subscribe events", cgo.NewHandle(events), events.close,
		func(native *C.parley_client, id *C.char, handle C.uintptr_t) C.int {
			return C.go_add_event_handler(native, id, handle)
		},
		func(native *C.parley_client, id *C.char) C.int {
			return C.parley_client_remove_event_handler(native, id)
		})
	if err != nil {
		return nil, nil, err
	}
	return events.out, unsubscribe, nil
}

// SubscribeConnectionChanges adds a subscriber of the connection changes beside
// ConnectionChanges, as SubscribeEvents does for events.
func (c *Client) SubscribeConnectionChanges() (<-chan ConnectionChange, func(), error) {
	changes := newQueue[ConnectionChange]()
	unsubscribe, err := c.subscribe("subscribe connection changes", cgo.NewHandle(changes), changes.close,
		func(native *C.parley_client, id *C.char, handle C.uintptr_t) C.int {
			return C.go_add_connection_handler(native, id, handle)
		},
		func(native *C.parley_client, id *C.char) C.int {
			return C.parley_client_remove_connection_handler(native, id)
		})
	if err != nil {
		return nil, nil, err
	}
	return changes.out, unsubscribe, nil
}

func (c *Client) subscribe(op string, handle cgo.Handle, finish func(),
	add func(*C.parley_client, *C.char, C.uintptr_t) C.int, remove func(*C.parley_client, *C.char) C.int) (func(), error) {
	sub := &subscription{handle: handle, finish: finish}
	id := C.CString(fmt.Sprintf("go-%d", subscriptionCounter.Add(1)))
	err := c.use(func(native *C.parley_client) error {
		return call(op, func() C.int { return add(native, id, C.uintptr_t(handle)) })
	})
	if err != nil {
		C.free(unsafe.Pointer(id))
		sub.end()
		return nil, err
	}
	c.mutex.Lock()
	c.subscriptions[sub] = struct{}{}
	c.mutex.Unlock()
	var unsubscribeOnce sync.Once
	unsubscribe := func() {
		unsubscribeOnce.Do(func() {
			defer C.free(unsafe.Pointer(id))
			_ = c.use(func(native *C.parley_client) error {
				remove(native, id)
				// A delivery running on the dispatch goroutine may still hold the handle: the
				// channel closes in a job queued after it.
				job := cgo.NewHandle(posted(func() {
					c.mutex.Lock()
					delete(c.subscriptions, sub)
					c.mutex.Unlock()
					sub.end()
				}))
				if C.go_post(native, C.uintptr_t(job)) != C.PARLEY_OK {
					job.Delete()
				}
				return nil
			})
		})
	}
	return unsubscribe, nil
}
