package parley_test

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"parley"
)

// relay forwards TCP connections to the test server until cut: then its connections close
// and new ones are refused, as when the network goes away, until restore.
type relay struct {
	t        testing.TB
	address  string
	target   string
	mutex    sync.Mutex
	listener net.Listener
	open     []net.Conn
}

func newRelay(t testing.TB) *relay {
	t.Helper()
	target := testServer.url[len("http://"):]
	r := &relay{t: t, target: target}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.address = listener.Addr().String()
	r.serve(listener)
	t.Cleanup(r.cut)
	return r
}

func (r *relay) url() string { return "http://" + r.address }

func (r *relay) serve(listener net.Listener) {
	r.mutex.Lock()
	r.listener = listener
	r.mutex.Unlock()
	go func() {
		for {
			incoming, err := listener.Accept()
			if err != nil {
				return
			}
			outgoing, err := net.Dial("tcp", r.target)
			if err != nil {
				incoming.Close()
				continue
			}
			r.mutex.Lock()
			r.open = append(r.open, incoming, outgoing)
			r.mutex.Unlock()
			go func() { _, _ = io.Copy(outgoing, incoming); outgoing.Close() }()
			go func() { _, _ = io.Copy(incoming, outgoing); incoming.Close() }()
		}
	}()
}

// cut closes every connection and stops listening.
func (r *relay) cut() {
	r.mutex.Lock()
	defer r.mutex.Unlock()
	if r.listener != nil {
		r.listener.Close()
		r.listener = nil
	}
	for _, connection := range r.open {
		connection.Close()
	}
	r.open = nil
}

// restore listens again on the same address.
func (r *relay) restore() {
	r.t.Helper()
	var listener net.Listener
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		if listener, err = net.Listen("tcp", r.address); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		r.t.Fatalf("the relay cannot listen on %s again: %v", r.address, err)
	}
	r.serve(listener)
}

func TestOfflineSendFailsRetryablyAndIsResentOnceBack(t *testing.T) {
	userID, token := newUser(t, "quinn")
	other, _ := newUser(t, "rita")
	channelURL := newChannel(t, "offline", userID, other)
	adminSend(t, channelURL, other, "before the cut")
	network := newRelay(t)
	client, err := parley.New(parley.Config{ServerURL: network.url(), CacheDir: t.TempDir(), RequestTimeout: 5 * time.Second,
		Extra: map[string]any{"resend_policy": "manual", "reconnect_initial_delay_ms": 50, "reconnect_max_delay_ms": 200}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	connection := client.ConnectionChanges()
	ctx := testContext(t)
	if _, err := client.Connect(ctx, userID, token); err != nil {
		t.Fatal(err)
	}
	receive(t, connection, "connected", func(c parley.ConnectionChange) bool { return c.Event == parley.ConnectionConnected })
	view, err := client.NewMessageCollection(channelURL, parley.Newest, parley.MessageCollectionParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	if started, err := view.Start(ctx); err != nil || len(started.Server) != 1 {
		t.Fatalf("start: %+v, %v", started, err)
	}
	waitUntil(t, "the view to be live", func() bool { f, _ := view.Freshness(); return f == parley.FreshnessLive })

	network.cut()
	lost := receive(t, connection, "the reconnect", func(c parley.ConnectionChange) bool { return c.Event == parley.ConnectionReconnectStarted })
	if lost.Err == nil || !parley.IsRetryable(lost.Err) {
		t.Fatalf("the reconnect's cause: %v", lost.Err)
	}
	receive(t, view.Changes(), "the view going offline", func(c parley.MessageChange) bool {
		return c.Kind == parley.FreshnessChanged && c.Freshness == parley.FreshnessOffline
	})
	_, err = client.SendUserMessage(ctx, channelURL, parley.UserMessageParams{Message: "sent offline", ReqID: "offline-1"})
	if !parley.IsRetryable(err) || !errors.Is(err, parley.ErrNetwork) {
		t.Fatalf("a send while offline gave %v", err)
	}
	failed := receive(t, view.Changes(), "the failed message", func(c parley.MessageChange) bool {
		return c.Kind == parley.Updated && c.SendingStatus == parley.SendingFailed
	})
	if failed.Messages[0].ReqID != "offline-1" || failed.Messages[0].SendingStatus != "failed" {
		t.Fatalf("failed: %+v", failed.Messages)
	}
	if _, err := client.SendUserMessage(ctx, channelURL, parley.UserMessageParams{Message: "dropped later", ReqID: "offline-2"}); !parley.IsRetryable(err) {
		t.Fatalf("the second send while offline gave %v", err)
	}

	network.restore()
	receive(t, connection, "the reconnect's success", func(c parley.ConnectionChange) bool {
		return c.Event == parley.ConnectionReconnectSucceeded
	})
	resent, err := client.ResendMessage(ctx, "offline-1")
	if err != nil || resent.MessageID == 0 || resent.Message != "sent offline" {
		t.Fatalf("resent %+v, %v", resent, err)
	}
	removed, err := client.RemoveFailedMessages(channelURL)
	if err != nil || len(removed) != 1 || removed[0] != "offline-2" {
		t.Fatalf("removed %v, %v", removed, err)
	}
	if err := client.CancelMessage("offline-2"); !errors.Is(err, parley.ErrNotFound) {
		t.Fatalf("cancelling a removed message gave %v", err)
	}
	listing := admin(t, "GET", "/v3/group_channels/"+channelURL+"/messages?message_ts=0&prev_limit=0&next_limit=10", nil)
	if messages, _ := listing["messages"].([]any); len(messages) != 2 {
		t.Fatalf("the server holds %d messages, expected 2", len(messages))
	}
}

func TestClosingTheClientClosesItsViewsAndQueries(t *testing.T) {
	client, userID := connected(t, "sam")
	channelURL := newChannel(t, "closing", userID)
	collection, err := client.NewChannelCollection(parley.ChannelQuery{IncludeEmpty: true})
	if err != nil {
		t.Fatal(err)
	}
	view, err := client.NewMessageCollection(channelURL, parley.Newest, parley.MessageCollectionParams{})
	if err != nil {
		t.Fatal(err)
	}
	query, err := client.NewQuery(parley.QueryMembers, map[string]any{"channel_url": channelURL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	if _, err := collection.LoadMore(ctx); err != nil {
		t.Fatal(err)
	}
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	for range collection.Changes() {
	}
	for range view.Changes() {
	}
	if _, err := collection.LoadMore(ctx); !errors.Is(err, parley.ErrClosed) {
		t.Fatalf("a collection's load after the client closed gave %v", err)
	}
	if _, err := view.Start(ctx); !errors.Is(err, parley.ErrClosed) {
		t.Fatalf("a view's start after the client closed gave %v", err)
	}
	if _, err := query.Next(ctx); !errors.Is(err, parley.ErrClosed) {
		t.Fatalf("a query after the client closed gave %v", err)
	}
	if err := view.Close(); err != nil {
		t.Fatalf("closing a closed view gave %v", err)
	}
	if _, err := client.NewSearch(parley.SearchParams{Query: "x"}); !errors.Is(err, parley.ErrClosed) {
		t.Fatalf("a new search after close gave %v", err)
	}
}
