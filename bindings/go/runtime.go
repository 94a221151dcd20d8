package parley

/*
#include "shim.h"
*/
import "C"

import (
	"encoding/json"
	"fmt"
	"sync"
	"unsafe"
)

// Every Client of the process is attached to one dispatch group of the library: one file
// descriptor that is readable while any of them has callbacks waiting, watched by one
// goroutine. A process with thousands of clients thus has one goroutine (and one thread
// blocked in poll) for their callbacks, not one per client.
var shared struct {
	once  sync.Once
	group *C.parley_dispatch_group
	err   error
}

func sharedDispatchGroup() (*C.parley_dispatch_group, error) {
	shared.once.Do(func() {
		var group *C.parley_dispatch_group
		if err := call("dispatch group", func() C.int { return C.parley_dispatch_group_create(&group) }); err != nil {
			shared.err = err
			return
		}
		var fd C.int
		if err := call("dispatch group fd", func() C.int { return C.parley_dispatch_group_event_fd(group, &fd) }); err != nil {
			C.parley_dispatch_group_destroy(group)
			shared.err = err
			return
		}
		shared.group = group
		go dispatchForever(group, fd)
	})
	return shared.group, shared.err
}

// dispatchForever runs the callbacks of every Client whenever the group's fd says some wait.
// The group lives as long as the process.
func dispatchForever(group *C.parley_dispatch_group, fd C.int) {
	for {
		if ready := C.go_wait(fd, -1); ready < 0 {
			panic(fmt.Sprintf("parley: waiting for callbacks failed (errno %d)", -ready))
		}
		C.parley_dispatch_group_dispatch(group, 0, nil)
	}
}

// RuntimeSettings are the threads every Client of the process shares
// (parley_runtime_configure): NetworkThreads run the HTTP requests and event streams of all
// clients (1..64; default one per core, at most 4), CallbackThreads are the callback pool's
// core threads for clients that dispatch on library threads (1..64; default one per core, at
// least 2, at most 8). Go's Clients dispatch through one goroutine, so only NetworkThreads
// concerns them. A zero field keeps its default.
type RuntimeSettings struct {
	NetworkThreads  int `json:"network_threads,omitempty"`
	CallbackThreads int `json:"callback_threads,omitempty"`
}

// ConfigureRuntime sets the shared threads before the first Client is created. Once clients
// started them, a different number fails with ErrInvalidState and nothing changes (the
// numbers in force are accepted); a number out of range fails with ErrInvalidArgument.
func ConfigureRuntime(settings RuntimeSettings) error {
	encoded, err := json.Marshal(settings)
	if err != nil {
		return &Error{Code: ErrInvalidArgument, Message: err.Error(), Op: "configure runtime"}
	}
	text := C.CString(string(encoded))
	defer C.free(unsafe.Pointer(text))
	return call("configure runtime", func() C.int { return C.parley_runtime_configure(text) })
}

// RuntimeInfo is the shared runtime's state (parley_runtime_info): the numbers of threads in
// force (0 before the first Client), the callback threads running past blocked callbacks
// now, and the defaults of this machine.
type RuntimeInfo struct {
	NetworkThreads         int `json:"network_threads"`
	CallbackThreads        int `json:"callback_threads"`
	CallbackExtraThreads   int `json:"callback_extra_threads"`
	DefaultNetworkThreads  int `json:"default_network_threads"`
	DefaultCallbackThreads int `json:"default_callback_threads"`
}

// Runtime reads the shared runtime's state.
func Runtime() (RuntimeInfo, error) {
	var info RuntimeInfo
	return info, readTable("runtime info", func(out **C.char) C.int { return C.parley_runtime_info(out) }, &info)
}
