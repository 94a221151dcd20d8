package parley_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"parley"
)

func TestConnectReturnsTheUserAndReportsTheConnection(t *testing.T) {
	userID, token := newUser(t, "alice")
	client := newClient(t)
	changes := client.ConnectionChanges()
	user, err := client.Connect(testContext(t), userID, token)
	if err != nil {
		t.Fatal(err)
	}
	if user.UserID != userID || user.Nickname != "alice" || len(user.Raw) == 0 {
		t.Fatalf("connect gave %+v", user)
	}
	receive(t, changes, "connected", func(c parley.ConnectionChange) bool { return c.Event == parley.ConnectionConnected })
	if current, err := client.CurrentUserID(); err != nil || current != userID {
		t.Fatalf("current user %q, %v", current, err)
	}
	if state, err := client.ConnectionState(); err != nil || state != parley.StateOpen {
		t.Fatalf("state %v, %v", state, err)
	}
	if err := client.Disconnect(); err != nil {
		t.Fatal(err)
	}
	change := receive(t, changes, "disconnected", func(c parley.ConnectionChange) bool { return c.Event == parley.ConnectionDisconnected })
	if change.Event.String() != "disconnected" {
		t.Fatalf("the event's name is %q", change.Event.String())
	}
}

func TestEventsArriveOnTheChannelAfterTheCacheHasThem(t *testing.T) {
	client, userID := connected(t, "bob")
	events := client.Events()
	sender, _ := newUser(t, "carol")
	channelURL := newChannel(t, "events", userID, sender)
	adminSend(t, channelURL, sender, "hello bob")
	event := receive(t, events, "message_received", func(e parley.Event) bool { return e.Category == "message_received" })
	var data struct {
		Message parley.Message `json:"message"`
	}
	if err := json.Unmarshal(event.Payload, &data); err != nil {
		t.Fatal(err)
	}
	message := data.Message
	if event.ChannelURL != channelURL || message.Message != "hello bob" || message.User == nil || message.User.UserID != sender {
		t.Fatalf("event %+v, message %+v", event, message)
	}
	page, err := client.CachedMessages(channelURL, -1, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 1 || page.Messages[0].MessageID != message.MessageID {
		t.Fatalf("the cache holds %+v", page.Messages)
	}
}

func TestServerRefusalsAreErrorsMatchedByCode(t *testing.T) {
	userID, _ := newUser(t, "dave")
	client := newClient(t)
	_, err := client.Connect(testContext(t), userID, "not-a-token")
	if !errors.Is(err, parley.ErrUnauthorized) {
		t.Fatalf("a wrong token gave %v", err)
	}
	var parleyError *parley.Error
	if !errors.As(err, &parleyError) || parleyError.HTTPStatus != 401 || parleyError.Retryable() || parley.IsRetryable(err) {
		t.Fatalf("details of %v: %+v", err, parleyError)
	}
	if errors.Is(err, parley.ErrNotFound) {
		t.Fatal("an unauthorized error matched ErrNotFound")
	}
}

func TestBadInputIsRefusedWithAClearError(t *testing.T) {
	if _, err := parley.New(parley.Config{Extra: map[string]any{"no_such_key": 1}}); !errors.Is(err, parley.ErrInvalidArgument) {
		t.Fatalf("an unknown configuration key gave %v", err)
	}
	if _, err := parley.New(parley.Config{Extra: map[string]any{"dispatch_mode": "thread"}}); !errors.Is(err, parley.ErrInvalidArgument) {
		t.Fatalf("thread dispatch gave %v", err)
	}
	if _, err := newClient(t).Connect(testContext(t), "erin\x00", "token"); !errors.Is(err, parley.ErrInvalidArgument) {
		t.Fatalf("a NUL byte in the user id gave %v", err)
	}
	client, _ := connected(t, "erin")
	ctx := testContext(t)
	if _, err := client.Perform(ctx, "no_such_operation", nil); !errors.Is(err, parley.ErrInvalidArgument) {
		t.Fatalf("an unknown operation gave %v", err)
	}
	_, err := client.GetGroupChannel(ctx, parley.GetGroupChannelParams{})
	var parleyError *parley.Error
	if !errors.As(err, &parleyError) || parleyError.Code != parley.ErrInvalidArgument || parleyError.Message == "" {
		t.Fatalf("a missing channel_url gave %v", err)
	}
	if _, err := client.Perform(ctx, "get_group_channel", map[string]any{"channel_url": func() {}}); !errors.Is(err, parley.ErrInvalidArgument) {
		t.Fatalf("parameters that do not encode gave %v", err)
	}
	if _, err := client.NewMessageCollection("bad\x00url", parley.Newest, parley.MessageCollectionParams{}); !errors.Is(err, parley.ErrInvalidArgument) {
		t.Fatalf("a NUL byte gave %v", err)
	}
	if _, err := client.NewSearch(parley.SearchParams{Query: ""}); !errors.Is(err, parley.ErrInvalidArgument) {
		t.Fatalf("an empty search gave %v", err)
	}
	if _, err := client.NewChannelCollection(parley.ChannelQuery{Limit: 1000}); !errors.Is(err, parley.ErrInvalidArgument) {
		t.Fatalf("a limit out of range gave %v", err)
	}
	if _, err := client.GetGroupChannel(ctx, parley.GetGroupChannelParams{ChannelURL: "no-such-channel"}); !errors.Is(err, parley.ErrNotFound) {
		t.Fatalf("an unknown channel gave %v", err)
	}
}

// blackHole accepts connections and never answers: a request to it waits until cancelled.
func blackHole(t *testing.T) string {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mutex sync.Mutex
	var accepted []net.Conn
	go func() {
		for {
			connection, err := listener.Accept()
			if err != nil {
				return
			}
			mutex.Lock()
			accepted = append(accepted, connection)
			mutex.Unlock()
		}
	}()
	t.Cleanup(func() {
		listener.Close()
		mutex.Lock()
		defer mutex.Unlock()
		for _, connection := range accepted {
			connection.Close()
		}
	})
	return "http://" + listener.Addr().String()
}

func TestAContextCancelsTheCallInTheLibrary(t *testing.T) {
	client, err := parley.New(parley.Config{ServerURL: blackHole(t), APIToken: "token", CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	started := time.Now()
	_, err = client.Request(ctx, "GET", "/v3/users", nil)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, parley.ErrCancelled) {
		t.Fatalf("a request past its deadline gave %v", err)
	}
	if elapsed := time.Since(started); elapsed > 5*time.Second {
		t.Fatalf("the cancelled request returned after %v", elapsed)
	}
	cancelled, cancelNow := context.WithCancel(context.Background())
	cancelNow()
	if _, err := client.Request(cancelled, "GET", "/v3/users", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled context gave %v", err)
	}
}

func TestANetworkFailureIsRetryable(t *testing.T) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := "http://" + listener.Addr().String()
	listener.Close()
	client, err := parley.New(parley.Config{ServerURL: closedPort, APIToken: "token", CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	_, err = client.Request(testContext(t), "GET", "/v3/users", nil)
	if !errors.Is(err, parley.ErrNetwork) || !parley.IsRetryable(err) {
		t.Fatalf("a refused connection gave %v", err)
	}
}

func TestCloseIsSafeFromAnyGoroutineAndAfterUse(t *testing.T) {
	client, err := parley.New(parley.Config{ServerURL: blackHole(t), APIToken: "token", CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	events := client.Events()
	inFlight := make(chan error, 1)
	go func() {
		_, err := client.Request(context.Background(), "GET", "/v3/users", nil)
		inFlight <- err
	}()
	time.Sleep(100 * time.Millisecond)
	var group sync.WaitGroup
	for i := 0; i < 8; i++ {
		group.Add(1)
		go func() {
			defer group.Done()
			_ = client.Close()
		}()
	}
	group.Wait()
	select {
	case err := <-inFlight:
		if !errors.Is(err, parley.ErrCancelled) && !errors.Is(err, parley.ErrClosed) {
			t.Fatalf("the call in flight gave %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call in flight did not return after Close")
	}
	if _, open := <-events; open {
		t.Fatal("the events channel is still open after Close")
	}
	if _, err := client.Request(context.Background(), "GET", "/v3/users", nil); !errors.Is(err, parley.ErrClosed) {
		t.Fatalf("a call after Close gave %v", err)
	}
	if err := client.Close(); err != nil {
		t.Fatalf("a second Close gave %v", err)
	}
}

func TestTheLibrarysTables(t *testing.T) {
	if parley.Version() == "" {
		t.Fatal("no version")
	}
	operations, err := parley.Operations()
	if err != nil || len(operations) == 0 {
		t.Fatalf("operations: %d, %v", len(operations), err)
	}
	categories, err := parley.EventCategories()
	if err != nil || len(categories) == 0 || categories[0].Source == "" {
		t.Fatalf("event categories: %+v, %v", categories, err)
	}
	sources, err := parley.CollectionSources()
	if err != nil || len(sources) == 0 || sources[0].Name == "" {
		t.Fatalf("sources: %+v, %v", sources, err)
	}
	keys, err := parley.ConfigurationKeys()
	if err != nil || len(keys) == 0 {
		t.Fatalf("configuration keys: %+v, %v", keys, err)
	}
	if parley.ErrNotFound.Name() != "not_found" || parley.FreshnessCatchingUp.String() != "catching_up" {
		t.Fatalf("names: %q %q", parley.ErrNotFound.Name(), parley.FreshnessCatchingUp.String())
	}
}

func TestZeroValuesGiveErrorsNotCrashes(t *testing.T) {
	var client parley.Client
	if _, err := client.Connect(context.Background(), "someone", "token"); !errors.Is(err, parley.ErrInvalidHandle) {
		t.Fatalf("a zero client's Connect gave %v", err)
	}
	if _, open := <-client.Events(); open {
		t.Fatal("a zero client's events channel is open")
	}
	if err := client.Close(); err != nil {
		t.Fatalf("a zero client's Close gave %v", err)
	}
	var collection parley.ChannelCollection
	if _, err := collection.LoadMore(context.Background()); !errors.Is(err, parley.ErrInvalidHandle) {
		t.Fatalf("a zero collection's LoadMore gave %v", err)
	}
	if _, open := <-collection.Changes(); open {
		t.Fatal("a zero collection's changes channel is open")
	}
	_ = collection.Close()
	var view parley.MessageCollection
	if _, err := view.Start(context.Background()); !errors.Is(err, parley.ErrInvalidHandle) {
		t.Fatalf("a zero view's Start gave %v", err)
	}
	var syncView parley.SyncView
	if _, err := syncView.Fetch(context.Background(), parley.Previous); !errors.Is(err, parley.ErrInvalidHandle) {
		t.Fatalf("a zero sync view's Fetch gave %v", err)
	}
	var search parley.Search
	if _, err := search.Results(); !errors.Is(err, parley.ErrInvalidHandle) {
		t.Fatalf("a zero search's Results gave %v", err)
	}
	var query parley.Query
	if _, err := query.Next(context.Background()); !errors.Is(err, parley.ErrInvalidHandle) {
		t.Fatalf("a zero query's Next gave %v", err)
	}
	_ = query.Close()
}
