package parley_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"parley"
)

// Many goroutines use one client at once (run with -race): calls, views and their channels
// need no locks of the application's.
func TestOneClientFromManyGoroutines(t *testing.T) {
	client, userID := connected(t, "yuri")
	other, _ := newUser(t, "zoe")
	channelURL := newChannel(t, "busy", userID, other)
	ctx := testContext(t)
	const workers = 8
	var group sync.WaitGroup
	failures := make(chan error, workers*4)
	for worker := 0; worker < workers; worker++ {
		group.Add(1)
		go func(worker int) {
			defer group.Done()
			text := fmt.Sprintf("from worker %d", worker)
			if _, err := client.SendUserMessage(ctx, channelURL, parley.UserMessageParams{Message: text}); err != nil {
				failures <- err
				return
			}
			view, err := client.NewMessageCollection(channelURL, parley.Newest, parley.MessageCollectionParams{})
			if err != nil {
				failures <- err
				return
			}
			defer view.Close()
			started, err := view.Start(ctx)
			if err != nil {
				failures <- err
				return
			}
			if len(started.Server) == 0 {
				failures <- fmt.Errorf("worker %d: the view shows nothing", worker)
			}
			if _, err := client.GetGroupChannel(ctx, parley.GetGroupChannelParams{ChannelURL: channelURL}); err != nil {
				failures <- err
			}
			if _, err := client.CachedChannels("", 10); err != nil {
				failures <- err
			}
		}(worker)
	}
	group.Wait()
	close(failures)
	for err := range failures {
		t.Error(err)
	}
	page, err := client.CachedMessages(channelURL, -1, 100)
	if err != nil || len(page.Messages) != workers {
		t.Fatalf("the cache holds %d messages (%v), expected %d", len(page.Messages), err, workers)
	}
}

func TestAViewLoadReturnsWhenItsContextEnds(t *testing.T) {
	client, _ := connected(t, "abe")
	collection, err := client.NewChannelCollection(parley.ChannelQuery{})
	if err != nil {
		t.Fatal(err)
	}
	defer collection.Close()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := collection.LoadMore(cancelled); !errors.Is(err, context.Canceled) || !errors.Is(err, parley.ErrCancelled) {
		t.Fatalf("a load with a cancelled context gave %v", err)
	}
	// The collection is still usable.
	if _, err := collection.LoadMore(testContext(t)); err != nil {
		t.Fatal(err)
	}
}
