package parley_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"parley"
)

// metricsOf reads the client's metrics, failing the test on an error.
func metricsOf(t testing.TB, client *parley.Client) parley.Metrics {
	t.Helper()
	metrics, err := client.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	return metrics
}

func TestMetricsFollowSendsViewsAndACutConnection(t *testing.T) {
	userID, token := newUser(t, "mira")
	other, _ := newUser(t, "nils")
	channelURL := newChannel(t, "metered", userID, other)
	network := newRelay(t)
	client, err := parley.New(parley.Config{ServerURL: network.url(), CacheDir: t.TempDir(), RequestTimeout: 5 * time.Second,
		Extra: map[string]any{"reconnect_initial_delay_ms": 50, "reconnect_max_delay_ms": 200}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if before := metricsOf(t, client); before.ConnectionState != parley.StateClosed || before.SendsTotal != 0 {
		t.Fatalf("before connect: %+v", before)
	}
	connection := client.ConnectionChanges()
	ctx := testContext(t)
	if _, err := client.Connect(ctx, userID, token); err != nil {
		t.Fatal(err)
	}
	receive(t, connection, "connected", func(c parley.ConnectionChange) bool { return c.Event == parley.ConnectionConnected })

	for i := 0; i < 3; i++ {
		if _, err := client.SendUserMessage(ctx, channelURL, parley.UserMessageParams{Message: fmt.Sprintf("counted %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	// The rows are counted again a moment after a commit (docs/C-API.md, "Metrics").
	waitUntil(t, "three cached messages", func() bool { return metricsOf(t, client).CacheMessages == 3 })
	sent := metricsOf(t, client)
	if sent.ConnectionState != parley.StateOpen || sent.SendsTotal != 3 || sent.SendsSucceededTotal != 3 ||
		sent.OutboxPendingMessages != 0 || sent.OutboxFailedMessages != 0 || sent.CacheChannels != 1 || sent.CacheSizeBytes <= 0 {
		t.Fatalf("after three sends: %+v", sent)
	}

	// The open views gauges follow creating and closing views.
	channels, err := client.NewChannelCollection(parley.ChannelQuery{})
	if err != nil {
		t.Fatal(err)
	}
	messages, err := client.NewMessageCollection(channelURL, parley.Newest, parley.MessageCollectionParams{})
	if err != nil {
		t.Fatal(err)
	}
	if open := metricsOf(t, client); open.OpenViews != 2 || open.OpenGroupChannelCollections != 1 || open.OpenMessageCollections != 1 {
		t.Fatalf("with two views open: %+v", open)
	}
	_ = channels.Close()
	_ = messages.Close()
	if closed := metricsOf(t, client); closed.OpenViews != 0 {
		t.Fatalf("with the views closed: %+v", closed)
	}

	// A cut connection: one reconnection once it is back.
	network.cut()
	receive(t, connection, "the reconnect", func(c parley.ConnectionChange) bool { return c.Event == parley.ConnectionReconnectStarted })
	if offline := metricsOf(t, client); offline.ConnectionState == parley.StateOpen || offline.ReconnectsTotal != 0 {
		t.Fatalf("offline: %+v", offline)
	}
	network.restore()
	receive(t, connection, "the reconnect's success", func(c parley.ConnectionChange) bool {
		return c.Event == parley.ConnectionReconnectSucceeded
	})
	back := metricsOf(t, client)
	if back.ReconnectsTotal != 1 || back.ConnectionState != parley.StateOpen || back.CatchUpPassesTotal < 2 {
		t.Fatalf("back: %+v", back)
	}
}

func TestMetricsOfAClosedClientAreAnError(t *testing.T) {
	client := newClient(t)
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Metrics(); !errors.Is(err, parley.ErrClosed) {
		t.Fatalf("the metrics of a closed client gave %v", err)
	}
	var zero parley.Client
	if _, err := zero.Metrics(); !errors.Is(err, parley.ErrInvalidHandle) {
		t.Fatalf("the metrics of a zero client gave %v", err)
	}
}
