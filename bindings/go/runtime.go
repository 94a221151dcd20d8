package parley

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync"
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
