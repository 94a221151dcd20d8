package parley_test

// The programs users copy: the README's Go blocks (each a whole program) are compiled, those
// that talk to a server are run against it, and so is examples/go/chat_tail.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"parley"
	"parley/internal/catalogrender"
)

// buildProgram compiles the main package in directory (of a module that requires parley and
// replaces it with this directory) into an executable and returns its path.
func buildProgram(t *testing.T, directory, name string) string {
	t.Helper()
	binary := filepath.Join(t.TempDir(), name)
	command := exec.Command("go", "build", "-o", binary, ".")
	command.Dir = directory
	if output, err := command.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", name, err, output)
	}
	return binary
}

// readmePrograms are the ```go blocks of README.md, in order.
func readmePrograms(t *testing.T) []string {
	t.Helper()
	text, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(text), -1)
	programs := make([]string, len(blocks))
	for i, block := range blocks {
		programs[i] = block[1]
	}
	return programs
}

func TestReadmeExamples(t *testing.T) {
	programs := readmePrograms(t)
	if len(programs) < 5 {
		t.Fatalf("README.md has %d Go blocks, expected at least 5", len(programs))
	}
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// One module, a package per program: one go vet checks them all.
	directory := t.TempDir()
	module := "module readme\n\ngo 1.19\n\nrequire parley v0.0.0\n\nreplace parley => " + here + "\n"
	if err := os.WriteFile(filepath.Join(directory, "go.mod"), []byte(module), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, program := range programs {
		packageDirectory := filepath.Join(directory, fmt.Sprintf("program%d", i))
		if err := os.Mkdir(packageDirectory, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(packageDirectory, "main.go"), []byte(program), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	vet := exec.Command("go", "vet", "./...")
	vet.Dir = directory
	if output, err := vet.CombinedOutput(); err != nil {
		t.Fatalf("go vet of the README's programs: %v\n%s", err, output)
	}
	build := func(name string) string {
		for i, program := range programs {
			if strings.HasPrefix(program, "// "+name+" ") {
				return buildProgram(t, filepath.Join(directory, fmt.Sprintf("program%d", i)), name)
			}
		}
		t.Fatalf("README.md has no program %s", name)
		return ""
	}
	makeUser, sendOne, receiveOne := build("make_user"), build("send_one"), build("receive_one")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := func(binary string, args ...string) *exec.Cmd {
		command := exec.CommandContext(ctx, binary, args...)
		command.Env = append(os.Environ(), "XDG_CACHE_HOME="+t.TempDir(),
			"PARLEY_SERVER_URL="+testServer.url, "PARLEY_API_TOKEN="+testServer.apiToken)
		return command
	}

	// make_user: the users and their tokens.
	me, other := uniqueID("readme"), uniqueID("reader")
	output, err := run(makeUser, me, other).CombinedOutput()
	if err != nil {
		t.Fatalf("make_user failed: %v\n%s", err, output)
	}
	tokens := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(output)), "\n") {
		if fields := strings.Fields(line); len(fields) == 2 {
			tokens[fields[0]] = fields[1]
		}
	}
	if len(tokens) != 2 || tokens[me] == "" || tokens[other] == "" {
		t.Fatalf("make_user printed:\n%s", output)
	}
	if user := admin(t, "GET", "/v3/users/"+other, nil); user["user_id"] != other {
		t.Fatalf("the server has %v", user)
	}

	// receive_one waits for a message; send_one sends it, to a channel it creates.
	receiver := run(receiveOne, testServer.url, other, tokens[other])
	receiverOut, err := receiver.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var receiverErr bytes.Buffer
	receiver.Stderr = &receiverErr
	if err := receiver.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(receiverOut)
	if !lines.Scan() || lines.Text() != "waiting" {
		_ = receiver.Wait()
		t.Fatalf("receive_one printed %q first\n%s", lines.Text(), receiverErr.String())
	}
	output, err = run(sendOne, testServer.url, me, other, tokens[me]).CombinedOutput()
	if err != nil {
		t.Fatalf("send_one failed: %v\n%s", err, output)
	}
	for _, want := range []string{"connected as " + me, "sent message ", "message_pending ", "message_sent "} {
		if !strings.Contains(string(output), want) {
			t.Fatalf("send_one's output lacks %q:\n%s", want, output)
		}
	}
	if strings.Contains(string(output), "message_received") {
		t.Fatalf("the sender was told message_received:\n%s", output)
	}
	rest, _ := io.ReadAll(receiverOut)
	if err := receiver.Wait(); err != nil {
		t.Fatalf("receive_one failed: %v\n%s\n%s", err, rest, receiverErr.String())
	}
	if want := me + " in \"Go\": hello from Go\n"; string(rest) != want {
		t.Fatalf("receive_one printed %q, expected %q\n%s", rest, want, receiverErr.String())
	}
}

func TestExampleChatTailShowsSendsAndFollows(t *testing.T) {
	binary := buildProgram(t, filepath.Join("..", "..", "examples", "go", "chat_tail"), "chat_tail")
	me, token := newUser(t, "tail")
	other, _ := newUser(t, "talker")
	channelURL := newChannel(t, "tail", me, other)
	adminSend(t, channelURL, other, "before the program")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	command := exec.CommandContext(ctx, binary, "-server", testServer.url, "-user", me, "-channel", channelURL,
		"-send", "from chat_tail", "-follow", "1", "-cache", t.TempDir())
	command.Env = append(os.Environ(), "PARLEY_SESSION_TOKEN="+token)
	stdout, err := command.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	command.Stderr = &stderr
	if err := command.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	var seen []string
	for lines.Scan() {
		seen = append(seen, lines.Text())
		if lines.Text() == "following" {
			break
		}
	}
	adminSend(t, channelURL, other, "while following")
	rest, _ := io.ReadAll(stdout)
	if err := command.Wait(); err != nil {
		t.Fatalf("chat_tail failed: %v\n%s\n%s", err, strings.Join(seen, "\n"), stderr.String())
	}
	output := strings.Join(seen, "\n") + "\n" + string(rest)
	for _, want := range []string{other + ": before the program", "sent ", "following", other + ": while following"} {
		if !strings.Contains(output, want) {
			t.Fatalf("chat_tail's output lacks %q:\n%s\n%s", want, output, stderr.String())
		}
	}
	listing := admin(t, "GET", "/v3/group_channels/"+channelURL+"/messages?message_ts=0&prev_limit=0&next_limit=10", nil)
	messages, _ := listing["messages"].([]any)
	if len(messages) != 3 {
		t.Fatalf("the channel holds %d messages, expected 3: %v", len(messages), listing)
	}
}

func TestOperationsGenerated(t *testing.T) {
	catalog, err := parley.Operations()
	if err != nil {
		t.Fatal(err)
	}
	operations, err := catalogrender.FromCatalog(catalog)
	if err != nil {
		t.Fatal(err)
	}
	want, err := catalogrender.Render(operations)
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile("operations_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		t.Fatalf("operations_gen.go differs from the loaded library's catalog: run %s", catalogrender.Command)
	}
	if len(operations) < 80 || catalogrender.GoName("list_my_group_channels") != "ListMyGroupChannels" || catalogrender.GoName("user_ids") != "UserIDs" {
		t.Fatalf("%d operations; names %q %q", len(operations), catalogrender.GoName("list_my_group_channels"), catalogrender.GoName("user_ids"))
	}
}
