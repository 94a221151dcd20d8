package parley_test

// The tests run against the real parley-server: TestMain starts one on a free loopback port
// with a fresh database (a SQLite file, or with PARLEY_TEST_BACKEND=postgres a database made
// on the PostgreSQL server PARLEY_TEST_PG names, as scripts/pg-test-cluster.sh provides) and
// stops it at the end. Tests share it and keep apart by their own user and channel ids.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"parley"
)

// testServer is the server every test talks to.
var testServer struct {
	url      string
	apiToken string
	database string
}

func TestMain(m *testing.M) {
	// A test that runs itself again in a process of its own needs no server there.
	if os.Getenv(runtimeChildVariable) == "1" {
		os.Exit(m.Run())
	}
	os.Exit(runWithServer(m))
}

func runWithServer(m *testing.M) int {
	binary := serverBinary()
	if _, err := os.Stat(binary); err != nil {
		fmt.Fprintf(os.Stderr, "parley-server not found at %s: build it (scripts/test.sh does) or set PARLEY_SERVER_BIN\n", binary)
		return 2
	}
	directory, err := os.MkdirTemp("", "parley-go-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer os.RemoveAll(directory)
	// The go commands the tests run (building the example programs) keep the build cache,
	// which would otherwise follow XDG_CACHE_HOME below into an empty directory.
	if os.Getenv("GOCACHE") == "" {
		if cache, err := exec.Command("go", "env", "GOCACHE").Output(); err == nil {
			os.Setenv("GOCACHE", strings.TrimSpace(string(cache)))
		}
	}
	// Clients keep their default cache files under the run's own directory.
	os.Setenv("XDG_CACHE_HOME", filepath.Join(directory, "xdg-cache"))
	database, dropDatabase, err := newDatabase(directory)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer dropDatabase()
	testServer.apiToken = randomHex(16)
	testServer.database = database
	serverURL, stop, err := startServer(database, testServer.apiToken)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer stop()
	testServer.url = serverURL
	fmt.Fprintf(os.Stderr, "parley-server at %s on %s\n", testServer.url, strings.SplitN(database, "://", 2)[0])
	return m.Run()
}

// serverBinary is the parley-server the tests run: PARLEY_SERVER_BIN, default the
// repository's release build.
func serverBinary() string {
	if binary := os.Getenv("PARLEY_SERVER_BIN"); binary != "" {
		return binary
	}
	here, _ := os.Getwd()
	return filepath.Join(here, "..", "..", "server", ".build", "release", "parley-server")
}

// startServer starts parley-server on a free loopback port with database, the admin token
// apiToken and the further flags extra; it returns the server's URL and the function that
// stops it.
func startServer(database, apiToken string, extra ...string) (string, func(), error) {
	command := exec.Command(serverBinary(), append([]string{"--port", "0", "--database", database}, extra...)...)
	command.Env = append(os.Environ(), "PARLEY_API_TOKEN="+apiToken)
	stdout, err := command.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	serverLog := &bytes.Buffer{}
	command.Stderr = serverLog
	if err := command.Start(); err != nil {
		return "", nil, fmt.Errorf("starting parley-server: %w", err)
	}
	stop := func() {
		_ = command.Process.Signal(syscall.SIGTERM)
		stopped := make(chan struct{})
		go func() { _ = command.Wait(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			_ = command.Process.Kill()
			<-stopped
		}
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	const prefix = "parley-server listening on "
	if err != nil || !strings.HasPrefix(line, prefix) {
		stop()
		return "", nil, fmt.Errorf("unexpected first line from parley-server: %q (%v)\n%s", line, err, serverLog.String())
	}
	return strings.TrimSpace(strings.TrimPrefix(line, prefix)), stop, nil
}

// newDatabase gives the server's --database: a SQLite file in directory, or a new
// PostgreSQL database (dropped by the function returned) with PARLEY_TEST_BACKEND=postgres.
func newDatabase(directory string) (string, func(), error) {
	backend := strings.ToLower(strings.TrimSpace(os.Getenv("PARLEY_TEST_BACKEND")))
	switch backend {
	case "", "sqlite":
		return filepath.Join(directory, "server.sqlite"), func() {}, nil
	case "postgres":
	default:
		return "", nil, fmt.Errorf("PARLEY_TEST_BACKEND=%q is not one of sqlite, postgres", backend)
	}
	base := os.Getenv("PARLEY_TEST_PG")
	if base == "" {
		return "", nil, fmt.Errorf("PARLEY_TEST_BACKEND=postgres needs PARLEY_TEST_PG: source scripts/pg-test-cluster.sh start")
	}
	parts, err := url.Parse(base)
	if err != nil {
		return "", nil, fmt.Errorf("PARLEY_TEST_PG: %w", err)
	}
	tool := func(name string) string {
		if bin := os.Getenv("PARLEY_PG_BIN"); bin != "" {
			return filepath.Join(bin, name)
		}
		return name
	}
	user := parts.User.Username()
	if user == "" {
		user = "parley"
	}
	port := parts.Port()
	if port == "" {
		port = "5432"
	}
	connection := []string{"-h", parts.Hostname(), "-p", port, "-U", user}
	name := "parley_go_" + randomHex(8)
	if output, err := exec.Command(tool("createdb"), append(connection, name)...).CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("createdb %s: %v: %s", name, err, output)
	}
	parts.Path = "/" + name
	drop := func() {
		_ = exec.Command(tool("dropdb"), append(connection, "--if-exists", "--force", name)...).Run()
	}
	return parts.String(), drop, nil
}

func randomHex(bytes int) string {
	buffer := make([]byte, bytes)
	if _, err := rand.Read(buffer); err != nil {
		panic(err)
	}
	return hex.EncodeToString(buffer)
}

// uniqueID makes an id no other test uses: the base, then random hex.
func uniqueID(base string) string { return base + "-" + randomHex(4) }

// admin calls the server's REST API with the API token (test setup only).
func admin(t testing.TB, method, path string, body any) map[string]any {
	t.Helper()
	var reader *bytes.Reader
	if body != nil {
		encoded, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		reader = bytes.NewReader(encoded)
	} else {
		reader = bytes.NewReader(nil)
	}
	request, err := http.NewRequest(method, testServer.url+path, reader)
	if err != nil {
		t.Fatal(err)
	}
	request.Header.Set("Api-Token", testServer.apiToken)
	request.Header.Set("Content-Type", "application/json")
	response, err := http.DefaultClient.Do(request)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer response.Body.Close()
	var answer map[string]any
	_ = json.NewDecoder(response.Body).Decode(&answer)
	if response.StatusCode >= 400 {
		t.Fatalf("%s %s -> %d: %v", method, path, response.StatusCode, answer)
	}
	return answer
}

// newUser creates a user and returns its id and a fresh session token.
func newUser(t testing.TB, base string) (string, string) {
	t.Helper()
	userID := uniqueID(base)
	admin(t, "POST", "/v3/users", map[string]any{"user_id": userID, "nickname": base})
	return userID, sessionToken(t, userID)
}

func sessionToken(t testing.TB, userID string) string {
	t.Helper()
	token, _ := admin(t, "POST", "/v3/users/"+userID+"/token", map[string]any{})["token"].(string)
	if token == "" {
		t.Fatalf("no session token for %s", userID)
	}
	return token
}

// adminSend sends a message as userID through the admin API and returns its id.
func adminSend(t testing.TB, channelURL, userID, text string) int64 {
	t.Helper()
	answer := admin(t, "POST", "/v3/group_channels/"+channelURL+"/messages",
		map[string]any{"message_type": "MESG", "user_id": userID, "message": text})
	id, _ := answer["message_id"].(float64)
	return int64(id)
}

// newChannel creates a group channel of the given members through the admin API.
func newChannel(t testing.TB, name string, members ...string) string {
	t.Helper()
	channelURL := uniqueID(name)
	admin(t, "POST", "/v3/group_channels", map[string]any{"channel_url": channelURL, "name": name, "user_ids": members})
	return channelURL
}

// newClient makes a client of the test server with its cache in the test's directory,
// closed when the test ends.
func newClient(t testing.TB) *parley.Client {
	t.Helper()
	client, err := parley.New(parley.Config{ServerURL: testServer.url, APIToken: testServer.apiToken, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// connected makes a client connected as a new user.
func connected(t testing.TB, base string) (*parley.Client, string) {
	t.Helper()
	userID, token := newUser(t, base)
	return connectAs(t, userID, token), userID
}

// connectAs makes a client connected as userID, once its event stream is open: Connect
// returns before that, and what happened meanwhile comes with the catch-up, not live.
func connectAs(t testing.TB, userID, token string) *parley.Client {
	t.Helper()
	client := newClient(t)
	if _, err := client.Connect(testContext(t), userID, token); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the stream to open", func() bool {
		state, err := client.ConnectionState()
		return err == nil && state == parley.StateOpen
	})
	return client
}

// waitUntil polls condition until it holds, failing the test after 15 seconds.
func waitUntil(t testing.TB, what string, condition func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !condition() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testContext ends with the test or after 30 seconds, whichever is first.
func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// receive takes values from ch until one satisfies match, failing the test after timeout.
func receive[T any](t testing.TB, ch <-chan T, what string, match func(T) bool) T {
	t.Helper()
	deadline := time.After(15 * time.Second)
	var seen []T
	for {
		select {
		case value, ok := <-ch:
			if !ok {
				t.Fatalf("waiting for %s: the channel closed (seen: %+v)", what, seen)
			}
			if match(value) {
				return value
			}
			seen = append(seen, value)
		case <-deadline:
			t.Fatalf("waiting for %s: timed out (seen: %+v)", what, seen)
		}
	}
}

func jsonDecode(data []byte, into any) error { return json.Unmarshal(data, into) }
