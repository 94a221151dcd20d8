// chat_tail shows a group channel's newest messages, optionally sends one, then prints the
// channel's new messages as they arrive.
//
//	chat_tail -server http://127.0.0.1:8080 -user alice -token "$TOKEN" -channel general \
//	          [-send "hello"] [-follow N] [-cache DIR]
//
// -follow N waits for N new messages from others (0: exits after the send); Ctrl-C stops it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"parley"
)

func main() {
	server := flag.String("server", "http://127.0.0.1:8080", "the server's base URL")
	user := flag.String("user", "", "the user to connect as")
	token := flag.String("token", os.Getenv("PARLEY_SESSION_TOKEN"), "the user's session token (default $PARLEY_SESSION_TOKEN)")
	channel := flag.String("channel", "", "the channel's URL")
	send := flag.String("send", "", "a message to send first")
	follow := flag.Int("follow", 0, "how many new messages of others to wait for")
	cacheDir := flag.String("cache", "", "the cache directory (default: the library's)")
	flag.Parse()
	if *user == "" || *token == "" || *channel == "" {
		fmt.Fprintln(os.Stderr, "chat_tail: -user, -token and -channel are required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *server, *user, *token, *channel, *send, *follow, *cacheDir); err != nil {
		fmt.Fprintln(os.Stderr, "chat_tail:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, server, user, token, channel, send string, follow int, cacheDir string) error {
	client, err := parley.New(parley.Config{ServerURL: server, CacheDir: cacheDir})
	if err != nil {
		return err
	}
	defer client.Close()

	connectCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := client.Connect(connectCtx, user, token); err != nil {
		return err
	}

	view, err := client.NewMessageCollection(channel, parley.Newest, parley.MessageCollectionParams{PreviousResultSize: 20})
	if err != nil {
		return err
	}
	defer view.Close()
	started, err := view.Start(connectCtx)
	if err != nil {
		return err
	}
	shown := started.Server
	if started.ServerErr != nil {
		// Offline: the cache's copy is what there is; the view catches up once connected.
		fmt.Printf("(offline: %v)\n", started.ServerErr)
		shown = started.Cached
	}
	for _, message := range shown {
		printMessage(message)
	}

	if send != "" {
		sent, err := client.SendUserMessage(connectCtx, channel, parley.UserMessageParams{Message: send})
		if parley.IsRetryable(err) {
			// The outbox resends it by itself once the server is back.
			fmt.Printf("queued (%v)\n", err)
		} else if err != nil {
			return err
		} else {
			fmt.Printf("sent %d\n", sent.MessageID)
		}
	}

	if follow == 0 {
		return nil
	}
	fmt.Println("following")
	for received := 0; received < follow; {
		select {
		case change, open := <-view.Changes():
			if !open {
				return errors.New("the view closed")
			}
			if change.Kind == parley.ChannelDeleted {
				return errors.New("the channel is gone")
			}
			if change.Kind != parley.Added || change.SendingStatus != parley.SendingSucceeded {
				continue
			}
			for _, message := range change.Messages {
				if message.User != nil && message.User.UserID == user {
					continue // our own message, shown when sent
				}
				printMessage(message)
				received++
			}
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

func printMessage(message parley.Message) {
	sender := "admin"
	if message.User != nil {
		sender = message.User.UserID
	}
	at := time.UnixMilli(message.CreatedAt).UTC().Format("15:04:05")
	fmt.Printf("[%s] %s: %s\n", at, sender, message.Message)
}
