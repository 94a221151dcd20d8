package parley_test

// 300 clients in one process against the real server (docs/THREADING.md: a process may hold
// thousands of clients, and what a client costs must not be a thread of its own): all
// connecting at once succeed, the process's threads stay flat, a server killed and started
// again under them loses nothing, and each client's events arrive in order and exactly once
// while clients are created and closed, also by their own event readers. Each test runs a
// server of its own (the restart test kills it). PARLEY_MANY_CLIENTS changes the number.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"parley"
)

// The goal is a small process-wide set of threads (network threads, the shared callback pool),
// at most 16 whatever the number of clients. The slack is libdispatch's worker pool and the Go
// runtime's own threads (a few per core, for the scheduler and cgo calls in flight), which the
// library shares with everything else in the process.
const (
	manyThreadGoal  = 16
	manyThreadSlack = 8
)

func manyClientCount() int {
	if count, err := strconv.Atoi(os.Getenv("PARLEY_MANY_CLIENTS")); err == nil && count >= 20 {
		return count
	}
	return 300
}

// raiseFileLimit lifts the soft descriptor limit to the hard one: each client holds a few.
func raiseFileLimit(t *testing.T) {
	var limit syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &limit); err != nil {
		t.Fatal(err)
	}
	saved := limit
	limit.Cur = limit.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &limit); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &saved) })
}

// processThreads counts the process's threads: those the library started (every one it
// starts is named: parley-net-N, parley-cb-N, libdispatch's workers) and the Go runtime's own,
// which carry the program's name. Go starts a thread for each goroutine waiting in a C call
// while others run, so how many it keeps depends on how the program calls, not on the clients.
func processThreads(t *testing.T) (library int, goRuntime int) {
	program, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		name, err := os.ReadFile("/proc/self/task/" + task.Name() + "/comm")
		if err != nil {
			continue // ended meanwhile
		}
		if string(name) == string(program) {
			goRuntime++
		} else {
			library++
		}
	}
	return library, goRuntime
}

// ownServer is a parley-server of one test, which it may kill and start again.
type ownServer struct {
	binary, database, apiToken, url, port string
	command                               *exec.Cmd
}

func startOwnServer(t *testing.T) *ownServer {
	t.Helper()
	binary := os.Getenv("PARLEY_SERVER_BIN")
	if binary == "" {
		here, _ := os.Getwd()
		binary = filepath.Join(here, "..", "..", "server", ".build", "release", "parley-server")
	}
	database, drop, err := newDatabase(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	server := &ownServer{binary: binary, database: database, apiToken: randomHex(16), port: "0"}
	server.start(t)
	t.Cleanup(func() {
		server.stop(syscall.SIGTERM)
		drop()
	})
	return server
}

func (s *ownServer) start(t *testing.T) {
	t.Helper()
	command := exec.Command(s.binary, "--port", s.port, "--database", s.database, "--shutdown-drain-seconds", "0")
	command.Env = append(os.Environ(), "PARLEY_API_TOKEN="+s.apiToken)
	stdout, err := command.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := command.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	const prefix = "parley-server listening on "
	if err != nil || !strings.HasPrefix(line, prefix) {
		_ = command.Process.Kill()
		_ = command.Wait()
		t.Fatalf("unexpected first line from parley-server: %q (%v)", line, err)
	}
	s.command = command
	s.url = strings.TrimSpace(strings.TrimPrefix(line, prefix))
	s.port = s.url[strings.LastIndex(s.url, ":")+1:]
}

func (s *ownServer) stop(signal syscall.Signal) {
	if s.command == nil {
		return
	}
	_ = s.command.Process.Signal(signal)
	_ = s.command.Wait()
	s.command = nil
}

// call runs an admin request; with attempts > 1 it tries again on a failure (a server starting).
func (s *ownServer) call(t *testing.T, method, path string, body any, attempts int) map[string]any {
	t.Helper()
	encoded, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	var lastError string
	for attempt := 0; attempt < attempts; attempt++ {
		if attempt > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		request, _ := http.NewRequest(method, s.url+path, bytes.NewReader(encoded))
		request.Header.Set("Api-Token", s.apiToken)
		request.Header.Set("Content-Type", "application/json")
		response, err := http.DefaultClient.Do(request)
		if err != nil {
			lastError = err.Error()
			continue
		}
		var answer map[string]any
		_ = json.NewDecoder(response.Body).Decode(&answer)
		response.Body.Close()
		if response.StatusCode < 400 {
			return answer
		}
		lastError = fmt.Sprintf("%d: %v", response.StatusCode, answer)
	}
	t.Fatalf("%s %s: %s", method, path, lastError)
	return nil
}

// manyPopulation is users with a session token each, one channel of them all, and a sender.
type manyPopulation struct {
	server          *ownServer
	sender, channel string
	users, tokens   []string
}

func newManyPopulation(t *testing.T, server *ownServer, count int) *manyPopulation {
	tag := randomHex(4)
	population := &manyPopulation{server: server, sender: "many-sender-" + tag, channel: "many-channel-" + tag}
	server.call(t, "POST", "/v3/users", map[string]any{"user_id": population.sender, "nickname": "sender"}, 1)
	members := []string{population.sender}
	for i := 0; i < count; i++ {
		userID := fmt.Sprintf("many-%s-%d", tag, i)
		server.call(t, "POST", "/v3/users", map[string]any{"user_id": userID, "nickname": fmt.Sprintf("member %d", i)}, 1)
		token, _ := server.call(t, "POST", "/v3/users/"+userID+"/token", map[string]any{}, 1)["token"].(string)
		population.users = append(population.users, userID)
		population.tokens = append(population.tokens, token)
		members = append(members, userID)
	}
	server.call(t, "POST", "/v3/group_channels", map[string]any{"channel_url": population.channel, "user_ids": members}, 1)
	return population
}

// post sends text from the sender; its req_id keeps a retried post from being stored twice.
func (p *manyPopulation) post(t *testing.T, text string, attempts int) {
	p.server.call(t, "POST", "/v3/group_channels/"+p.channel+"/messages", map[string]any{
		"message_type": "MESG", "user_id": p.sender, "message": text, "req_id": strings.ReplaceAll(text, " ", "-")}, attempts)
}

// trackedClient is one client with a goroutine reading its events in order.
type trackedClient struct {
	userID     string
	client     *parley.Client
	connectErr error
	connected  atomic.Bool

	mutex sync.Mutex
	texts []string
	// closeAt: the text on whose arrival the event reader closes the client itself.
	closeAt string
	closed  chan struct{}
}

// messageText is the text of a message event: message_received carries {channel, message},
// message_changelog the message itself.
func messageText(event parley.Event) (string, bool) {
	var payload struct {
		Message json.RawMessage `json:"message"`
	}
	if json.Unmarshal(event.Payload, &payload) != nil {
		return "", false
	}
	switch event.Category {
	case "message_received":
		var message struct {
			Message string `json:"message"`
		}
		return message.Message, json.Unmarshal(payload.Message, &message) == nil
	case "message_changelog":
		var text string
		return text, json.Unmarshal(payload.Message, &text) == nil
	}
	return "", false
}

func newTrackedClient(t *testing.T, serverURL, userID, closeAt string) *trackedClient {
	client, err := parley.New(parley.Config{ServerURL: serverURL, MemoryCache: true})
	if err != nil {
		t.Fatal(err)
	}
	tracked := &trackedClient{userID: userID, client: client, closeAt: closeAt, closed: make(chan struct{})}
	events := client.Events()
	go func() {
		defer close(tracked.closed)
		for event := range events {
			text, ok := messageText(event)
			if !ok {
				continue
			}
			tracked.mutex.Lock()
			tracked.texts = append(tracked.texts, text)
			closeNow := text == tracked.closeAt
			tracked.mutex.Unlock()
			if closeNow {
				_ = client.Close() // the channel then closes, after the events delivered before
			}
		}
	}()
	return tracked
}

func (c *trackedClient) connect(token string) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	_, c.connectErr = c.client.Connect(ctx, c.userID, token)
	if c.connectErr != nil {
		return
	}
	for deadline := time.Now().Add(45 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if state, err := c.client.ConnectionState(); err == nil && state == parley.StateOpen {
			c.connected.Store(true)
			return
		}
	}
}

func (c *trackedClient) count(text string) int {
	c.mutex.Lock()
	defer c.mutex.Unlock()
	n := 0
	for _, seen := range c.texts {
		if seen == text {
			n++
		}
	}
	return n
}

// ordered is the numbers of the texts "PREFIX n", in arrival order.
func (c *trackedClient) ordered(prefix string) []int {
	c.mutex.Lock()
	defer c.mutex.Unlock()
	var numbers []int
	for _, text := range c.texts {
		if number, err := strconv.Atoi(strings.TrimPrefix(text, prefix)); err == nil && strings.HasPrefix(text, prefix) {
			numbers = append(numbers, number)
		}
	}
	return numbers
}

// connectAll makes a client of each user and connects them all at once; it fails the test
// unless every one connects with its stream open.
func connectAll(t *testing.T, population *manyPopulation) []*trackedClient {
	clients := make([]*trackedClient, len(population.users))
	for i, userID := range population.users {
		clients[i] = newTrackedClient(t, population.server.url, userID, "")
	}
	t.Cleanup(func() { closeAll(clients) })
	started := time.Now()
	var group sync.WaitGroup
	for i := range clients {
		group.Add(1)
		go func(i int) {
			defer group.Done()
			clients[i].connect(population.tokens[i])
		}(i)
	}
	group.Wait()
	var failed []string
	for _, client := range clients {
		if !client.connected.Load() {
			failed = append(failed, fmt.Sprintf("%s (%v)", client.userID, client.connectErr))
		}
	}
	t.Logf("%d clients connected at once in %.1f s", len(clients), time.Since(started).Seconds())
	if len(failed) > 0 {
		t.Fatalf("%d of %d clients did not connect: %v", len(failed), len(clients), failed[:fewer(len(failed), 5)])
	}
	return clients
}

func closeAll(clients []*trackedClient) {
	for _, client := range clients {
		_ = client.client.Close()
	}
}

func fewer(a, b int) int {
	if a < b {
		return a
	}
	return b
}

func TestManyClientsConnectAtOnce(t *testing.T) {
	raiseFileLimit(t)
	server := startOwnServer(t)
	connectAll(t, newManyPopulation(t, server, manyClientCount()))
}

func TestManyClientsKeepTheProcessThreadsFlat(t *testing.T) {
	// Measured in a process of its own: the Go runtime keeps every OS thread it ever started
	// (and libdispatch's workers linger), so after earlier tests the count would hide some.
	if os.Getenv("PARLEY_MANY_THREADS_MEASURE") == "" {
		measure := exec.Command(os.Args[0], "-test.run=^TestManyClientsKeepTheProcessThreadsFlat$", "-test.v", "-test.count=1")
		measure.Env = append(os.Environ(), "PARLEY_MANY_THREADS_MEASURE=1")
		output, err := measure.CombinedOutput()
		t.Logf("in a process of its own:\n%s", output)
		if err != nil {
			t.Fatalf("the measurement failed: %v", err)
		}
		return
	}
	raiseFileLimit(t)
	server := startOwnServer(t)
	population := newManyPopulation(t, server, manyClientCount())
	// The process-wide parts exist before the count: one client connected and gone.
	warm := newTrackedClient(t, server.url, population.users[0], "")
	warm.connect(population.tokens[0])
	_ = warm.client.Close()
	time.Sleep(time.Second)
	before, goBefore := processThreads(t)
	clients := connectAll(t, population)
	time.Sleep(time.Second)
	after, goAfter := processThreads(t)
	t.Logf("library threads: %d before, %d with %d clients connected: %d added (the Go runtime's: %d -> %d)",
		before, after, len(clients), after-before, goBefore, goAfter)
	if after-before > manyThreadGoal+manyThreadSlack {
		t.Errorf("%d clients added %d library threads (%d -> %d); the goal is at most %d (+%d for shared pools)",
			len(clients), after-before, before, after, manyThreadGoal, manyThreadSlack)
	}
}

func TestManyClientsLoseNothingAcrossAServerRestart(t *testing.T) {
	raiseFileLimit(t)
	server := startOwnServer(t)
	population := newManyPopulation(t, server, manyClientCount())
	clients := connectAll(t, population)
	texts := []string{"restart 0", "restart 1", "restart 2", "restart 3", "restart 4", "restart 5"}
	for _, text := range texts[:3] {
		population.post(t, text, 1)
	}
	server.stop(syscall.SIGKILL)
	time.Sleep(time.Second)
	server.start(t)
	started := time.Now()
	for _, text := range texts[3:] {
		population.post(t, text, 50)
	}
	missing := func() int {
		n := 0
		for _, client := range clients {
			for _, text := range texts {
				if client.count(text) == 0 {
					n++
				}
			}
		}
		return n
	}
	for deadline := time.Now().Add(40 * time.Second); missing() > 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if lost := missing(); lost > 0 {
		t.Fatalf("%d of %d deliveries never came within 40 s of the start", lost, len(clients)*len(texts))
	}
	t.Logf("every client held every message %.1f s after the start", time.Since(started).Seconds())
	time.Sleep(1500 * time.Millisecond) // a second report of a message would come about now
	for _, client := range clients {
		for _, text := range texts {
			if n := client.count(text); n > 1 {
				t.Errorf("%s got %q %d times", client.userID, text, n)
			}
		}
	}
}

func TestManyClientsEventsInOrderWhileClientsComeAndGo(t *testing.T) {
	raiseFileLimit(t)
	server := startOwnServer(t)
	population := newManyPopulation(t, server, manyClientCount())
	clients := connectAll(t, population)
	const messages = 20
	count := len(clients)
	churned, selfClosing := count/3, count/6
	for i := churned; i < churned+selfClosing; i++ {
		clients[i].mutex.Lock()
		clients[i].closeAt = fmt.Sprintf("order %d", i%messages)
		clients[i].mutex.Unlock()
	}
	var newcomers []*trackedClient
	t.Cleanup(func() { closeAll(newcomers) })
	var joining sync.WaitGroup
	for k := 0; k < messages; k++ {
		population.post(t, fmt.Sprintf("order %d", k), 1)
		for i := k * churned / messages; i < (k+1)*churned/messages; i++ {
			_ = clients[i].client.Close()
			fresh := newTrackedClient(t, server.url, population.users[i], "")
			newcomers = append(newcomers, fresh)
			joining.Add(1)
			go func(fresh *trackedClient, token string, closeAtOnce bool) {
				defer joining.Done()
				if closeAtOnce {
					go fresh.connect(token) // closed while it connects: Connect returns ErrCancelled or ErrClosed
					_ = fresh.client.Close()
					return
				}
				fresh.connect(token)
			}(fresh, population.tokens[i], len(newcomers)%2 == 0)
		}
	}
	joining.Wait()
	survivors := clients[churned+selfClosing:]
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		done := true
		for _, client := range survivors {
			done = done && len(client.ordered("order ")) >= messages
		}
		if done {
			break
		}
	}
	for _, client := range clients[churned : churned+selfClosing] {
		select {
		case <-client.closed:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not close itself at %q", client.userID, client.closeAt)
		}
	}
	for _, client := range append(clients, newcomers...) {
		received := client.ordered("order ")
		for i := 1; i < len(received); i++ {
			if received[i] <= received[i-1] {
				t.Errorf("%s: out of order or twice: %v", client.userID, received)
				break
			}
		}
	}
	for _, client := range survivors {
		received := client.ordered("order ")
		if len(received) != messages {
			t.Errorf("%s got %d of %d messages: %v", client.userID, len(received), messages, received)
		}
	}
}
