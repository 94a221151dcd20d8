package parley_test

import (
	"errors"
	"strings"
	"testing"

	"parley"
)

// The cache encrypted at rest: the key opens it, a wrong key or none is ErrCacheKey, and
// RekeyCache changes the key the file is sealed with.
func TestAnEncryptedCacheOpensOnlyWithItsKeyAndRekeyChangesIt(t *testing.T) {
	userID, token := newUser(t, "sealed")
	channelURL := newChannel(t, "sealed-room", userID)
	directory := t.TempDir()
	keyA, keyB := strings.Repeat("5a", 32), strings.Repeat("a5", 32)
	open := func(key string) (*parley.Client, error) {
		client, err := parley.New(parley.Config{ServerURL: testServer.url, CacheDir: directory, CacheKey: key})
		if err != nil {
			t.Fatal(err)
		}
		_, err = client.Connect(testContext(t), userID, token)
		return client, err
	}
	client, err := open(keyA)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.SendUserMessage(testContext(t), channelURL, parley.UserMessageParams{Message: "sealed text"}); err != nil {
		t.Fatal(err)
	}
	if err := client.RekeyCache(parley.CacheKeys{Key: keyB}); err != nil {
		t.Fatal(err)
	}
	if page, err := client.CachedMessages(channelURL, -1, 10); err != nil || len(page.Messages) != 1 {
		t.Fatalf("after the rekey: %+v, %v", page, err)
	}
	client.Close()
	for _, key := range []string{keyA, ""} {
		refused, err := open(key)
		if !errors.Is(err, parley.ErrCacheKey) {
			t.Fatalf("key %q: %v, want ErrCacheKey", key, err)
		}
		refused.Close()
	}
	client, err = open(keyB)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if page, err := client.CachedMessages(channelURL, -1, 10); err != nil || len(page.Messages) != 1 {
		t.Fatalf("with the new key: %+v, %v", page, err)
	}
}
