package parley_test

import (
	"errors"
	"testing"

	"parley"
)

func TestSubscribersEachGetEveryEventUntilTheyUnsubscribe(t *testing.T) {
	client, userID := connected(t, "tina")
	first, unsubscribeFirst, err := client.SubscribeEvents()
	if err != nil {
		t.Fatal(err)
	}
	second, unsubscribeSecond, err := client.SubscribeEvents()
	if err != nil {
		t.Fatal(err)
	}
	defer unsubscribeSecond()
	other, _ := newUser(t, "uma")
	channelURL := newChannel(t, "subscribers", userID, other)
	adminSend(t, channelURL, other, "to both")
	isText := func(text string) func(parley.Event) bool {
		return func(e parley.Event) bool {
			return e.Category == "message_received" && e.ChannelURL == channelURL && containsText(e, text)
		}
	}
	receive(t, first, "the first subscriber's event", isText("to both"))
	receive(t, second, "the second subscriber's event", isText("to both"))
	unsubscribeFirst()
	unsubscribeFirst() // a second call does nothing
	for range first {
	}
	adminSend(t, channelURL, other, "to the second")
	receive(t, second, "the event after the first left", isText("to the second"))
}

func containsText(event parley.Event, text string) bool {
	var data struct {
		Message parley.Message `json:"message"`
	}
	return jsonDecode(event.Payload, &data) == nil && data.Message.Message == text
}

func TestLogsArriveOnTheirChannel(t *testing.T) {
	userID, token := newUser(t, "vera")
	client := newClient(t)
	if _, err := client.Logs(parley.LogLevel(9)); !errors.Is(err, parley.ErrInvalidArgument) {
		t.Fatalf("a level out of range gave %v", err)
	}
	logs, err := client.Logs(parley.LogTrace)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Connect(testContext(t), userID, token); err != nil {
		t.Fatal(err)
	}
	record := receive(t, logs, "a log record", func(r parley.LogRecord) bool { return r.Message != "" })
	if record.Level < parley.LogError || record.Level > parley.LogTrace {
		t.Fatalf("a record of level %v", record.Level)
	}
	_ = client.Close()
	for range logs {
	}
}
