package parley_test

// The shared runtime's settings: set before the first client in a process of its own (this
// test binary run again), and refused once clients run with different numbers.

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"parley"
)

const runtimeChildVariable = "PARLEY_GO_RUNTIME_CHILD"

// TestRuntimeConfiguredBeforeTheFirstClient runs in a process of its own: the test binary
// starts itself again with only this test and the variable set.
func TestRuntimeConfiguredBeforeTheFirstClient(t *testing.T) {
	if os.Getenv(runtimeChildVariable) != "1" {
		executable, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		child := exec.Command(executable, "-test.run=^TestRuntimeConfiguredBeforeTheFirstClient$", "-test.count=1", "-test.v")
		child.Env = append(os.Environ(), runtimeChildVariable+"=1")
		output, err := child.CombinedOutput()
		if err != nil || !strings.Contains(string(output), "--- PASS: TestRuntimeConfiguredBeforeTheFirstClient") {
			t.Fatalf("the child process failed (%v):\n%s", err, output)
		}
		return
	}
	before, err := parley.Runtime()
	if err != nil {
		t.Fatal(err)
	}
	if before.NetworkThreads != 0 || before.CallbackThreads != 0 || before.DefaultNetworkThreads < 1 || before.DefaultCallbackThreads < 2 {
		t.Fatalf("before any client: %+v", before)
	}
	for _, wrong := range []parley.RuntimeSettings{{NetworkThreads: 65}, {CallbackThreads: -1}} {
		if err := parley.ConfigureRuntime(wrong); !errors.Is(err, parley.ErrInvalidArgument) {
			t.Fatalf("ConfigureRuntime(%+v) = %v, want ErrInvalidArgument", wrong, err)
		}
	}
	if err := parley.ConfigureRuntime(parley.RuntimeSettings{NetworkThreads: 3, CallbackThreads: 5}); err != nil {
		t.Fatal(err)
	}
	client, err := parley.New(parley.Config{ServerURL: "http://127.0.0.1:9", MemoryCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	after, err := parley.Runtime()
	if err != nil {
		t.Fatal(err)
	}
	// Go's clients dispatch manually: the callback pool may not have started (0) yet.
	if after.NetworkThreads != 3 || (after.CallbackThreads != 5 && after.CallbackThreads != 0) {
		t.Fatalf("with a client after ConfigureRuntime(3, 5): %+v", after)
	}
	if err := parley.ConfigureRuntime(parley.RuntimeSettings{NetworkThreads: 3, CallbackThreads: 5}); err != nil {
		t.Fatalf("the numbers in force again: %v", err)
	}
	if err := parley.ConfigureRuntime(parley.RuntimeSettings{NetworkThreads: 2}); !errors.Is(err, parley.ErrInvalidState) {
		t.Fatalf("a different number once clients run: %v, want ErrInvalidState", err)
	}
	if still, _ := parley.Runtime(); still.NetworkThreads != 3 {
		t.Fatalf("a refused change changed the runtime: %+v", still)
	}
}
