package parley_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"parley"
)

func TestChannelCollectionLoadsPagesAndReportsChanges(t *testing.T) {
	userID, token := newUser(t, "frank")
	other, _ := newUser(t, "grace")
	var urls []string
	for i := 0; i < 3; i++ {
		channelURL := newChannel(t, fmt.Sprintf("room%d", i), userID, other)
		adminSend(t, channelURL, other, fmt.Sprintf("first in room%d", i))
		urls = append(urls, channelURL)
	}
	client := connectAs(t, userID, token)
	collection, err := client.NewChannelCollection(parley.ChannelQuery{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer collection.Close()
	ctx := testContext(t)
	first, err := collection.LoadMore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Newest last message first: room2, room1 (the limit is 2).
	if len(first) != 2 || first[0].ChannelURL != urls[2] || first[1].ChannelURL != urls[1] {
		t.Fatalf("first page: %+v", channelURLs(first))
	}
	if more, err := collection.HasMore(); err != nil || !more {
		t.Fatalf("has more after the first page: %v, %v", more, err)
	}
	second, err := collection.LoadMore(ctx)
	if err != nil || len(second) != 1 || second[0].ChannelURL != urls[0] {
		t.Fatalf("second page: %v, %v", channelURLs(second), err)
	}
	// A new message in the oldest channel moves it to the top: an update.
	adminSend(t, urls[0], other, "back on top")
	change := receive(t, collection.Changes(), "the update of room0", func(c parley.ChannelChange) bool {
		return c.Kind == parley.Updated && len(c.Channels) == 1 && c.Channels[0].ChannelURL == urls[0]
	})
	if change.Channels[0].LastMessage == nil || change.Channels[0].LastMessage.Message != "back on top" || change.Source.Name == "" {
		t.Fatalf("the update: %+v", change)
	}
	shown, err := collection.Channels()
	if err != nil || len(shown) != 3 || shown[0].ChannelURL != urls[0] {
		t.Fatalf("shown: %v, %v", channelURLs(shown), err)
	}
	// Leaving a channel deletes it from the view, with its URL and its last state.
	if _, err := client.LeaveChannel(ctx, parley.LeaveChannelParams{ChannelURL: urls[1]}); err != nil {
		t.Fatal(err)
	}
	deleted := receive(t, collection.Changes(), "the deletion of room1", func(c parley.ChannelChange) bool { return c.Kind == parley.Deleted })
	if len(deleted.DeletedURLs) != 1 || deleted.DeletedURLs[0] != urls[1] || len(deleted.Channels) != 1 || deleted.Channels[0].Name != "room1" {
		t.Fatalf("the deletion: %+v", deleted)
	}
	if freshness, err := collection.Freshness(); err != nil || freshness != parley.FreshnessLive {
		t.Fatalf("freshness %v, %v", freshness, err)
	}
	if err := collection.Close(); err != nil {
		t.Fatal(err)
	}
	for range collection.Changes() {
	}
	if _, err := collection.LoadMore(ctx); !errors.Is(err, parley.ErrClosed) {
		t.Fatalf("a load after Close gave %v", err)
	}
}

func channelURLs(channels []parley.Channel) []string {
	urls := make([]string, len(channels))
	for i, channel := range channels {
		urls[i] = channel.ChannelURL
	}
	return urls
}

func TestMessageCollectionStartsPagesAndShowsASendOnce(t *testing.T) {
	userID, token := newUser(t, "heidi")
	other, _ := newUser(t, "ivan")
	channelURL := newChannel(t, "chat", userID, other)
	for i := 0; i < 25; i++ {
		adminSend(t, channelURL, other, fmt.Sprintf("message %02d", i))
	}
	client := connectAs(t, userID, token)
	collection, err := client.NewMessageCollection(channelURL, parley.Newest, parley.MessageCollectionParams{PreviousResultSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer collection.Close()
	ctx := testContext(t)
	started, err := collection.Start(ctx)
	if err != nil || started.ServerErr != nil {
		t.Fatalf("start: %v, %v", err, started.ServerErr)
	}
	if len(started.Server) != 10 || started.Server[9].Message != "message 24" {
		t.Fatalf("the server's first page: %v", texts(started.Server))
	}
	older, err := collection.LoadPrevious(ctx)
	if err != nil || len(older) != 10 || older[0].Message != "message 05" {
		t.Fatalf("older: %v, %v", texts(older), err)
	}
	if more, _ := collection.HasPrevious(); !more {
		t.Fatal("no older messages reported, 5 are left")
	}
	if origin, _ := collection.LastPageOrigin(); origin != parley.OriginServer {
		t.Fatalf("the older page came from %v", origin)
	}
	if newer, err := collection.LoadNext(ctx); err != nil || len(newer) != 0 {
		t.Fatalf("newer than the newest end: %v, %v", texts(newer), err)
	}
	if more, _ := collection.HasNext(); more {
		t.Fatal("newer messages reported at the newest end")
	}
	sent, err := client.SendUserMessage(ctx, channelURL, parley.UserMessageParams{Message: "from heidi", ReqID: "req-heidi-1"})
	if err != nil || sent.MessageID == 0 || sent.ReqID != "req-heidi-1" {
		t.Fatalf("sent %+v, %v", sent, err)
	}
	pending := receive(t, collection.Changes(), "the pending message", func(c parley.MessageChange) bool {
		return c.Kind == parley.Added && c.SendingStatus == parley.SendingPending
	})
	if len(pending.Messages) != 1 || pending.Messages[0].ReqID != "req-heidi-1" {
		t.Fatalf("pending: %+v", pending.Messages)
	}
	succeeded := receive(t, collection.Changes(), "the sent message", func(c parley.MessageChange) bool {
		return c.Kind == parley.Updated && c.SendingStatus == parley.SendingSucceeded
	})
	if succeeded.Source.Name != "message_sent" || succeeded.Messages[0].MessageID != sent.MessageID {
		t.Fatalf("succeeded: %+v", succeeded)
	}
	shown, err := collection.Messages()
	if err != nil || len(shown) != 21 || shown[20].MessageID != sent.MessageID {
		t.Fatalf("shown: %d messages, %v", len(shown), err)
	}
	// Another member's message arrives live at the newest end.
	adminSend(t, channelURL, other, "live one")
	receive(t, collection.Changes(), "the live message", func(c parley.MessageChange) bool {
		return c.Kind == parley.Added && c.Source.Name == "message_received" && len(c.Messages) == 1 && c.Messages[0].Message == "live one"
	})
}

func texts(messages []parley.Message) []string {
	result := make([]string, len(messages))
	for i, message := range messages {
		result[i] = message.Message
	}
	return result
}

func TestSyncViewReportsActionsOnItsLists(t *testing.T) {
	userID, token := newUser(t, "judy")
	other, _ := newUser(t, "kim")
	channelURL := newChannel(t, "sync", userID, other)
	for i := 0; i < 6; i++ {
		adminSend(t, channelURL, other, fmt.Sprintf("sync %d", i))
	}
	client := connectAs(t, userID, token)
	view, err := client.NewSyncView(channelURL, parley.Newest, parley.SyncViewOptions{Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	ctx := testContext(t)
	result, err := view.Fetch(ctx, parley.Previous)
	if err != nil || !result.HasMore || result.Offline {
		t.Fatalf("fetch: %+v, %v", result, err)
	}
	insert := receive(t, view.Changes(), "the fetch's insert", func(c parley.SyncChange) bool {
		return c.Action == parley.ActionInsert && c.List == parley.ListSucceeded
	})
	if len(insert.Messages) != 4 || insert.Messages[3].Message != "sync 5" {
		t.Fatalf("inserted %v", texts(insert.Messages))
	}
	if origin, err := view.LastFetchOrigin(); err != nil || origin == parley.OriginNone {
		t.Fatalf("the fetch's origin: %v, %v", origin, err)
	}
	if _, err := client.SendUserMessage(ctx, channelURL, parley.UserMessageParams{Message: "judy says hi"}); err != nil {
		t.Fatal(err)
	}
	receive(t, view.Changes(), "the pending insert", func(c parley.SyncChange) bool {
		return c.Action == parley.ActionInsert && c.List == parley.ListPending
	})
	receive(t, view.Changes(), "the succeeded insert", func(c parley.SyncChange) bool {
		return c.Action == parley.ActionInsert && c.List == parley.ListSucceeded && len(c.Messages) == 1 && c.Messages[0].Message == "judy says hi"
	})
	succeeded, err := view.Messages(parley.ListSucceeded)
	if err != nil || len(succeeded) != 5 {
		t.Fatalf("the succeeded list: %v, %v", texts(succeeded), err)
	}
	if all, err := view.FetchAllNext(ctx); err != nil || all.HasMore || all.Offline {
		t.Fatalf("fetch all next: %+v, %v", all, err)
	}
	if err := view.ResetViewpoint(0); err != nil {
		t.Fatal(err)
	}
	receive(t, view.Changes(), "the clear", func(c parley.SyncChange) bool { return c.Action == parley.ActionClear })
	if viewpoint, err := view.Viewpoint(); err != nil || viewpoint != 0 {
		t.Fatalf("viewpoint %d, %v", viewpoint, err)
	}
}

func TestSearchFindsCachedMessagesAndFollowsNewOnes(t *testing.T) {
	userID, token := newUser(t, "leo")
	other, _ := newUser(t, "mia")
	channelURL := newChannel(t, "search", userID, other)
	for _, text := range []string{"Hello world", "goodbye moon", "hello there, wonderful world"} {
		adminSend(t, channelURL, other, text)
	}
	client := connectAs(t, userID, token)
	ctx := testContext(t)
	// The messages reach the cache through a collection's load.
	collection, err := client.NewMessageCollection(channelURL, parley.Newest, parley.MessageCollectionParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer collection.Close()
	if _, err := collection.Start(ctx); err != nil {
		t.Fatal(err)
	}
	search, err := client.NewSearch(parley.SearchParams{Query: "hello wor", ChannelURLs: []string{channelURL}})
	if err != nil {
		t.Fatal(err)
	}
	defer search.Close()
	results, err := search.LoadMore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || results[0].Message.Message != "hello there, wonderful world" || !strings.Contains(results[1].Snippet, "<b>") || results[0].Origin != "cache" {
		t.Fatalf("results: %+v", results)
	}
	adminSend(t, channelURL, other, "hello new world")
	added := receive(t, search.Changes(), "the new result", func(c parley.SearchChange) bool { return c.Kind == parley.Added })
	if len(added.Results) != 1 || added.Results[0].Message.Message != "hello new world" {
		t.Fatalf("added: %+v", added.Results)
	}
	shown, err := search.Results()
	if err != nil || len(shown) != 3 {
		t.Fatalf("shown: %+v, %v", shown, err)
	}
	ranked, err := client.NewSearch(parley.SearchParams{Query: "world", Order: "relevance", ChannelURLs: []string{channelURL}})
	if err != nil {
		t.Fatal(err)
	}
	defer ranked.Close()
	byRelevance, err := ranked.LoadMore(ctx)
	if err != nil || len(byRelevance) != 3 || byRelevance[0].Score <= 0 {
		t.Fatalf("by relevance: %+v, %v", byRelevance, err)
	}
	if more, err := ranked.HasMore(); err != nil || more {
		t.Fatalf("more results after all three: %v, %v", more, err)
	}
	// A window of the two newest matches, then the one below it.
	windowed, err := client.NewSearch(parley.SearchParams{Query: "world", Order: "relevance", ChannelURLs: []string{channelURL}, RelevanceWindow: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer windowed.Close()
	newest, err := windowed.LoadMore(ctx)
	if edge, edgeErr := windowed.RelevanceWindow(); err != nil || edgeErr != nil || len(newest) != 2 || edge != (parley.RelevanceWindow{RankedMatches: 2, OlderMatchesExist: true}) {
		t.Fatalf("the newest window: %+v, %+v, %v, %v", newest, edge, err, edgeErr)
	}
	older, err := windowed.LoadOlder(ctx)
	if edge, edgeErr := windowed.RelevanceWindow(); err != nil || edgeErr != nil || len(older) != 1 || edge != (parley.RelevanceWindow{RankedMatches: 1, OlderMatchesExist: false}) {
		t.Fatalf("the window below: %+v, %+v, %v, %v", older, edge, err, edgeErr)
	}
	if older[0].Message.MessageID >= newest[0].Message.MessageID || older[0].Message.MessageID >= newest[1].Message.MessageID {
		t.Fatalf("the window below holds %d, above %d and %d", older[0].Message.MessageID, newest[0].Message.MessageID, newest[1].Message.MessageID)
	}
	var failure *parley.Error
	if _, err := search.LoadOlder(ctx); !errors.As(err, &failure) || failure.Code != parley.ErrInvalidState {
		t.Fatalf("load older in time order: %v", err)
	}
}

func TestQueryPagesThroughMembers(t *testing.T) {
	client, userID := connected(t, "nina")
	var members []string
	for i := 0; i < 4; i++ {
		member, _ := newUser(t, fmt.Sprintf("member%d", i))
		members = append(members, member)
	}
	channelURL := newChannel(t, "crowd", append(members, userID)...)
	query, err := client.NewQuery(parley.QueryMembers, map[string]any{"channel_url": channelURL, "limit": 2})
	if err != nil {
		t.Fatal(err)
	}
	defer query.Close()
	ctx := testContext(t)
	seen := 0
	for pages := 0; pages < 5; pages++ {
		more, err := query.HasNext()
		if err != nil {
			t.Fatal(err)
		}
		if !more {
			break
		}
		page, err := query.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen += len(page)
	}
	if seen != 5 {
		t.Fatalf("the query listed %d members, the channel has 5", seen)
	}
	_, err = client.NewQuery(parley.QueryKind(99), nil)
	var failure *parley.Error
	if !errors.As(err, &failure) || failure.Code != parley.ErrInvalidArgument || !strings.Contains(failure.Message, "99") {
		t.Fatalf("an unknown kind gave %v", err)
	}
	if _, err := client.NewQuery(parley.QueryMembers, map[string]any{"channel_url": channelURL, "no_such_option": 1}); !errors.Is(err, parley.ErrInvalidArgument) {
		t.Fatalf("an unknown option gave %v", err)
	}
}

func TestGeneratedOperationsReachTheServer(t *testing.T) {
	client, userID := connected(t, "oscar")
	other, _ := newUser(t, "pat")
	ctx := testContext(t)
	channel, err := client.CreateGroupChannel(ctx, parley.CreateGroupChannelParams{
		UserIDs: []string{userID, other}, Name: parley.Ptr("made in Go"), CustomType: parley.Ptr("go"),
		OperatorIDs: []string{userID},
	})
	if err != nil {
		t.Fatal(err)
	}
	if channel.Name != "made in Go" || channel.CustomType != "go" || channel.MemberCount != 2 {
		t.Fatalf("created %+v", channel)
	}
	cached, err := client.CachedChannel(channel.ChannelURL)
	if err != nil || cached.Name != "made in Go" {
		t.Fatalf("the cache has %+v, %v", cached, err)
	}
	updated, err := client.UpdateGroupChannel(ctx, parley.UpdateGroupChannelParams{ChannelURL: channel.ChannelURL, Name: parley.Ptr("renamed")})
	if err != nil || updated.Name != "renamed" {
		t.Fatalf("updated %+v, %v", updated, err)
	}
	message, err := client.SendUserMessage(ctx, channel.ChannelURL, parley.UserMessageParams{Message: "to be edited"})
	if err != nil {
		t.Fatal(err)
	}
	edited, err := client.UpdateMessage(ctx, parley.UpdateMessageParams{ChannelURL: channel.ChannelURL, MessageID: message.MessageID, Message: parley.Ptr("edited")})
	if err != nil || edited.Message != "edited" {
		t.Fatalf("edited %+v, %v", edited, err)
	}
	page, err := client.ListMessages(ctx, parley.ListMessagesParams{ChannelURL: channel.ChannelURL, MessageTS: parley.Ptr(int64(0)), PrevLimit: parley.Ptr(int64(0)), NextLimit: parley.Ptr(int64(10))})
	if err != nil || len(page.Messages) != 1 || page.Messages[0].Message != "edited" {
		t.Fatalf("listed %+v, %v", page, err)
	}
	list, err := client.ListMyGroupChannels(ctx, parley.ListMyGroupChannelsParams{ShowEmpty: parley.Ptr(true)})
	if err != nil || len(list.Channels) != 1 || list.Channels[0].ChannelURL != channel.ChannelURL {
		t.Fatalf("my channels: %+v, %v", list, err)
	}
	if cached, err := client.CachedChannels("chronological", 10); err != nil || len(cached) != 1 {
		t.Fatalf("cached channels: %v, %v", channelURLs(cached), err)
	}
	if err := client.ClearCachedData(); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CachedChannel(channel.ChannelURL); !errors.Is(err, parley.ErrNotFound) {
		t.Fatalf("a channel after clearing the cache gave %v", err)
	}
	if _, err := client.CachedChannels("no_such_order", 10); !errors.Is(err, parley.ErrInvalidArgument) {
		t.Fatalf("an unknown order gave %v", err)
	}
}
