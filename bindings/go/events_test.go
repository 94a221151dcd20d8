package parley_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"parley"
)

// A sender and a recipient in one channel: what each of them is told, and what the payloads
// decode to.
func TestSenderAndRecipientGetTheirCategoriesAndPayloads(t *testing.T) {
	ctx := testContext(t)
	sender, senderID := connected(t, "sender")
	recipient, recipientID := connected(t, "recipient")
	sent := sender.Events()
	received := recipient.Events()
	channelURL := uniqueID("categories")
	admin(t, "POST", "/v3/group_channels", map[string]any{"channel_url": channelURL, "name": "categories",
		"user_ids": []string{senderID, recipientID}, "operator_ids": []string{senderID}})

	message, err := sender.SendUserMessage(ctx, channelURL, parley.UserMessageParams{Message: "hello recipient"})
	if err != nil {
		t.Fatal(err)
	}

	// Every event the sender is given, kept to check at the end what it was not told.
	var senderSaw []parley.Event
	fromSender := func(what string, match func(parley.Event) bool) parley.Event {
		t.Helper()
		return receive(t, sent, "the sender's "+what, func(e parley.Event) bool {
			senderSaw = append(senderSaw, e)
			return match(e)
		})
	}

	// The sender: pending, then sent; the payload is the message itself.
	pending := fromSender("message_pending", isCategory(parley.CategoryMessagePending, channelURL))
	if pendingMessage, ok := pending.Message(); !ok || pendingMessage.ReqID != message.ReqID || pendingMessage.MessageID != 0 {
		t.Fatalf("message_pending gave %+v, %v (sent %+v)", pendingMessage, ok, message)
	}
	sentEvent := fromSender("message_sent", isCategory(parley.CategoryMessageSent, channelURL))
	sentMessage, ok := sentEvent.Message()
	if !ok || sentMessage.MessageID != message.MessageID || sentMessage.Message != "hello recipient" ||
		sentMessage.SendingStatus != "succeeded" || sentMessage.User == nil || sentMessage.User.UserID != senderID {
		t.Fatalf("message_sent gave %+v, %v (sent %+v)", sentMessage, ok, message)
	}
	if _, ok := sentEvent.Channel(); ok {
		t.Fatal("message_sent gave a channel")
	}
	if sentEvent.Category.Source() != "local" {
		t.Fatalf("message_sent's source is %q", sentEvent.Category.Source())
	}

	// The recipient: message_received, the message under "message" beside the channel.
	event := receive(t, received, "message_received", isCategory(parley.CategoryMessageReceived, channelURL))
	got, ok := event.Message()
	if !ok || got.MessageID != message.MessageID || got.Message != "hello recipient" || got.User == nil ||
		got.User.UserID != senderID || got.ChannelURL != channelURL {
		t.Fatalf("message_received gave %+v, %v: %s", got, ok, event.Payload)
	}
	channel, ok := event.Channel()
	if !ok || channel.ChannelURL != channelURL || channel.Name != "categories" || channel.LastMessage == nil ||
		channel.LastMessage.MessageID != message.MessageID {
		t.Fatalf("message_received's channel %+v, %v", channel, ok)
	}
	if event.Category.Source() != "server" {
		t.Fatalf("message_received's source is %q", event.Category.Source())
	}
	if _, ok := event.DeletedMessage(); ok {
		t.Fatal("message_received gave a deleted message")
	}
	// What a program decoding the payload by hand finds.
	var data struct {
		Category parley.Category `json:"category"`
		Message  parley.Message  `json:"message"`
	}
	if err := json.Unmarshal(event.Payload, &data); err != nil || data.Category != parley.CategoryMessageReceived || data.Message.MessageID != message.MessageID {
		t.Fatalf("the payload %s decoded to %+v, %v", event.Payload, data, err)
	}

	// An edit: message_updated to the recipient, carrying the new text.
	if _, err := sender.UpdateMessage(ctx, parley.UpdateMessageParams{ChannelURL: channelURL, MessageID: message.MessageID, Message: parley.Ptr("edited")}); err != nil {
		t.Fatal(err)
	}
	updated := receive(t, received, "message_updated", isCategory(parley.CategoryMessageUpdated, channelURL))
	if edited, ok := updated.Message(); !ok || edited.MessageID != message.MessageID || edited.Message != "edited" {
		t.Fatalf("message_updated gave %+v, %v", edited, ok)
	}

	// A channel change: channel_changed to both, the channel under "channel".
	if _, err := sender.UpdateGroupChannel(ctx, parley.UpdateGroupChannelParams{ChannelURL: channelURL, Name: parley.Ptr("renamed")}); err != nil {
		t.Fatal(err)
	}
	for _, who := range []string{"sender", "recipient"} {
		var changed parley.Event
		if who == "sender" {
			changed = fromSender("channel_changed", isCategory(parley.CategoryChannelChanged, channelURL))
		} else {
			changed = receive(t, received, "the recipient's channel_changed", isCategory(parley.CategoryChannelChanged, channelURL))
		}
		if renamed, ok := changed.Channel(); !ok || renamed.ChannelURL != channelURL || renamed.Name != "renamed" {
			t.Fatalf("%s's channel_changed gave %+v, %v", who, renamed, ok)
		}
		if _, ok := changed.Message(); ok {
			t.Fatalf("%s's channel_changed gave a message", who)
		}
	}

	// A deletion: message_deleted, naming the message.
	if _, err := sender.DeleteMessage(ctx, parley.DeleteMessageParams{ChannelURL: channelURL, MessageID: message.MessageID}); err != nil {
		t.Fatal(err)
	}
	deletedEvent := receive(t, received, "message_deleted", isCategory(parley.CategoryMessageDeleted, channelURL))
	if deleted, ok := deletedEvent.DeletedMessage(); !ok || deleted != (parley.DeletedMessage{ChannelURL: channelURL, MessageID: message.MessageID}) {
		t.Fatalf("message_deleted gave %+v, %v: %s", deleted, ok, deletedEvent.Payload)
	}
	if _, ok := deletedEvent.Message(); ok {
		t.Fatal("message_deleted gave a message")
	}

	// The channel deleted: channel_deleted, without a channel.
	if _, err := sender.DeleteGroupChannel(ctx, parley.DeleteGroupChannelParams{ChannelURL: channelURL}); err != nil {
		t.Fatal(err)
	}
	gone := receive(t, received, "channel_deleted", isCategory(parley.CategoryChannelDeleted, channelURL))
	if url, ok := gone.DeletedChannelURL(); !ok || url != channelURL {
		t.Fatalf("channel_deleted gave %q, %v", url, ok)
	}
	if _, ok := gone.Channel(); ok {
		t.Fatal("channel_deleted gave a channel")
	}

	// The sender, to the end: told of the deletion, never of its own message as
	// message_received, nor of its own edit.
	fromSender("channel_deleted", isCategory(parley.CategoryChannelDeleted, channelURL))
	toldOfDeletion := false
	for _, e := range senderSaw {
		switch e.Category {
		case parley.CategoryMessageReceived, parley.CategoryMessageUpdated:
			t.Fatalf("the sender got %s: %s", e.Category, e.Payload)
		case parley.CategoryMessageDeleted:
			deleted, ok := e.DeletedMessage()
			toldOfDeletion = ok && deleted.MessageID == message.MessageID
		}
	}
	if !toldOfDeletion {
		t.Fatalf("the sender was not told of the deletion: %v", senderSaw)
	}
}

// A send the server refuses: message_failed, the message with the error.
func TestARefusedSendIsReportedAsMessageFailed(t *testing.T) {
	client, _ := connected(t, "outsider")
	events := client.Events()
	owner, _ := newUser(t, "owner")
	channelURL := newChannel(t, "closed", owner)
	_, err := client.SendUserMessage(testContext(t), channelURL, parley.UserMessageParams{Message: "let me in"})
	if err == nil {
		t.Fatal("a send to a channel of others succeeded")
	}
	failed := receive(t, events, "message_failed", isCategory(parley.CategoryMessageFailed, channelURL))
	message, ok := failed.Message()
	if !ok || message.Message != "let me in" || message.SendingStatus != "failed" || message.ErrorCode == 0 || message.ErrorMessage == "" {
		t.Fatalf("message_failed gave %+v, %v: %s", message, ok, failed.Payload)
	}
}

// The catch-up's categories, from a server that keeps too few events for a client that was
// away: resync, the changelogs of a channel and a message, and the deletions.
func TestCatchUpCategoriesAndPayloads(t *testing.T) {
	ctx := testContext(t)
	database, drop, err := newDatabase(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	apiToken := randomHex(16)
	serverURL, stop, err := startServer(database, apiToken, "--event-retention", "3")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	admin, err := parley.New(parley.Config{ServerURL: serverURL, APIToken: apiToken, MemoryCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	call := func(method, path string, body any) map[string]any {
		t.Helper()
		answer, err := admin.Request(ctx, method, path, body)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		var fields map[string]any
		_ = json.Unmarshal(answer, &fields)
		return fields
	}
	for _, user := range []string{"alice", "bob"} {
		call("POST", "/v3/users", map[string]any{"user_id": user, "nickname": user})
	}
	token, _ := call("POST", "/v3/users/alice/token", nil)["token"].(string)
	client, err := parley.New(parley.Config{ServerURL: serverURL, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	events := client.Events()
	connections := client.ConnectionChanges()
	if _, err := client.Connect(ctx, "alice", token); err != nil {
		t.Fatal(err)
	}
	receive(t, connections, "connected", func(c parley.ConnectionChange) bool { return c.Event == parley.ConnectionConnected })
	// Made while connected: the events put them in the cache.
	call("POST", "/v3/group_channels", map[string]any{"channel_url": "room", "name": "Room", "user_ids": []string{"alice", "bob"}})
	call("POST", "/v3/group_channels", map[string]any{"channel_url": "leaving", "user_ids": []string{"alice", "bob"}})
	send := func(text string) int64 {
		id, _ := call("POST", "/v3/group_channels/room/messages", map[string]any{"message_type": "MESG", "user_id": "bob", "message": text})["message_id"].(float64)
		return int64(id)
	}
	gone, edited := send("will be deleted"), send("will be edited")
	waitUntil(t, "both channels and messages cached", func() bool {
		_, err := client.CachedChannel("leaving")
		page, _ := client.CachedMessages("room", -1, 10)
		return err == nil && len(page.Messages) == 2
	})
	drain(events, nil)
	if err := client.Disconnect(); err != nil {
		t.Fatal(err)
	}
	// More changes than the server keeps events for: only the changelogs can tell.
	call("DELETE", fmt.Sprintf("/v3/group_channels/room/messages/%d", gone), nil)
	call("PUT", fmt.Sprintf("/v3/group_channels/room/messages/%d", edited), map[string]any{"message": "edited while away"})
	call("PUT", "/v3/group_channels/leaving/leave", map[string]any{"user_ids": []string{"alice"}})
	for i := 0; i < 4; i++ {
		call("PUT", "/v3/group_channels/room", map[string]any{"name": fmt.Sprintf("Room %d", i)})
	}
	if _, err := client.Connect(ctx, "alice", token); err != nil {
		t.Fatal(err)
	}

	// Each category with the payload it must decode to.
	awaitEvents(t, events, map[string]func(parley.Event) bool{
		"message_changelog_deleted of the deleted message": func(e parley.Event) bool {
			deleted, ok := e.DeletedMessage()
			return e.Category == parley.CategoryMessageChangelogDeleted && e.Category.Source() == "sync" &&
				ok && deleted == parley.DeletedMessage{ChannelURL: "room", MessageID: gone}
		},
		"message_changelog of the edited message": func(e parley.Event) bool {
			message, ok := e.Message()
			return e.Category == parley.CategoryMessageChangelog && ok && message.MessageID == edited &&
				message.Message == "edited while away" && message.ChannelURL == "room"
		},
		"channel_changelog of the renamed channel": func(e parley.Event) bool {
			channel, ok := e.Channel()
			return e.Category == parley.CategoryChannelChangelog && ok && channel.ChannelURL == "room" && channel.Name == "Room 3"
		},
		"channel_changelog_deleted of the channel left": func(e parley.Event) bool {
			url, ok := e.DeletedChannelURL()
			return e.Category == parley.CategoryChannelChangelogDeleted && ok && url == "leaving"
		},
		"resync naming both channels": func(e parley.Event) bool {
			resync, ok := e.Resync()
			return e.Category == parley.CategoryResync && ok && resync.Reason != "" &&
				contains(resync.ChannelURLs, "room") && contains(resync.ChannelURLs, "leaving")
		},
	})
}

// Every category the library reports has its constant, with the library's source.
func TestEveryCategoryHasItsConstant(t *testing.T) {
	table, err := parley.EventCategories()
	if err != nil {
		t.Fatal(err)
	}
	constants := map[parley.Category]bool{}
	for _, category := range parley.Categories() {
		constants[category] = true
	}
	if len(constants) != len(table) {
		t.Fatalf("%d constants, the library has %d categories", len(constants), len(table))
	}
	for _, entry := range table {
		category := parley.Category(entry.Name)
		if !constants[category] || category.Source() != entry.Source {
			t.Fatalf("the library's %q (%s): constant %v, source %q", entry.Name, entry.Source, constants[category], category.Source())
		}
	}
	if parley.Category("from_a_newer_server").Source() != "" {
		t.Fatal("an unknown category has a source")
	}
}

// An error's text names its code once.
func TestErrorTextNamesItsCodeOnce(t *testing.T) {
	_, err := parley.New(parley.Config{ServerURL: testServer.url, Extra: map[string]any{"no_such_key": 1}})
	var failure *parley.Error
	if !errors.As(err, &failure) || failure.Code != parley.ErrInvalidArgument {
		t.Fatalf("an unknown key gave %v", err)
	}
	if strings.Count(err.Error(), "invalid_argument") != 1 || !strings.Contains(err.Error(), "no_such_key") ||
		strings.HasPrefix(failure.Message, "invalid_argument") {
		t.Fatalf("the error reads %q (message %q)", err.Error(), failure.Message)
	}
	userID, _ := newUser(t, "mallory")
	client := newClient(t)
	_, err = client.Connect(testContext(t), userID, "not-a-token")
	if !errors.As(err, &failure) || strings.Count(err.Error(), "unauthorized") != 1 {
		t.Fatalf("a refused connect reads %q", err)
	}
}

// awaitEvents takes events until each matcher (by its description) matched one, failing the
// test after 15 seconds with what came.
func awaitEvents(t *testing.T, events <-chan parley.Event, matchers map[string]func(parley.Event) bool) {
	t.Helper()
	var seen []string
	deadline := time.After(15 * time.Second)
	for len(matchers) > 0 {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatalf("the events closed; seen:\n%s", strings.Join(seen, "\n"))
			}
			seen = append(seen, fmt.Sprintf("%s %q %s", e.Category, e.ChannelURL, e.Payload))
			for description, match := range matchers {
				if match(e) {
					delete(matchers, description)
				}
			}
		case <-deadline:
			var missing []string
			for description := range matchers {
				missing = append(missing, description)
			}
			t.Fatalf("timed out waiting for %s; seen:\n%s", strings.Join(missing, ", "), strings.Join(seen, "\n"))
		}
	}
}

func isCategory(category parley.Category, channelURL string) func(parley.Event) bool {
	return func(e parley.Event) bool { return e.Category == category && e.ChannelURL == channelURL }
}

// drain takes what events holds now, without waiting, passing each to check (if not nil).
func drain(events <-chan parley.Event, check func(parley.Event)) []parley.Event {
	var taken []parley.Event
	for {
		select {
		case e, ok := <-events:
			if !ok {
				return taken
			}
			if check != nil {
				check(e)
			}
			taken = append(taken, e)
		default:
			return taken
		}
	}
}

func contains(list []string, value string) bool {
	for _, item := range list {
		if item == value {
			return true
		}
	}
	return false
}
