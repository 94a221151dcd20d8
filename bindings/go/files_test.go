package parley_test

import (
	"bytes"
	"errors"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"parley"
)

func TestAFileMessageUploadsWithProgress(t *testing.T) {
	client, userID := connected(t, "walt")
	channelURL := newChannel(t, "files", userID)
	path := filepath.Join(t.TempDir(), "notes.txt")
	content := bytes.Repeat([]byte("parley "), 40000)
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	sending, err := client.StartFileMessage(channelURL, parley.FileMessageParams{FilePath: path, FileType: "text/plain"})
	if err != nil {
		t.Fatal(err)
	}
	if sending.Pending.MessageID != 0 || sending.Pending.SendingStatus != "pending" || sending.Pending.Type != "FILE" {
		t.Fatalf("pending: %+v", sending.Pending)
	}
	var last parley.Progress
	for report := range sending.Progress() {
		if report.SentBytes > report.TotalBytes || report.ReqID != sending.Pending.ReqID {
			t.Fatalf("progress %+v", report)
		}
		last = report
	}
	// The upload's body is the file and its multipart framing.
	if last.TotalBytes < int64(len(content)) || last.SentBytes != last.TotalBytes {
		t.Fatalf("the last progress %+v is not the whole upload of %d bytes", last, len(content))
	}
	message, err := sending.Wait(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if message.MessageID == 0 || message.Type != "FILE" || message.ReqID != sending.Pending.ReqID {
		t.Fatalf("sent %+v", message)
	}
	var file struct {
		File struct {
			Name string `json:"name"`
			Size int64  `json:"size"`
		} `json:"file"`
	}
	if err := jsonDecode(message.Raw, &file); err != nil || file.File.Name != "notes.txt" || file.File.Size != int64(len(content)) {
		t.Fatalf("the file: %+v, %v (%s)", file, err, message.Raw)
	}
}

func TestSeveralFilesInOneSend(t *testing.T) {
	client, userID := connected(t, "xena")
	channelURL := newChannel(t, "batch", userID)
	ctx := testContext(t)
	files := []parley.FileMessageParams{
		{URL: "https://example.com/a.png", FileName: "a.png", FileType: "image/png"},
		{URL: "https://example.com/b.png", FileName: "b.png", FileType: "image/png"},
	}
	results, err := client.SendFileMessages(ctx, channelURL, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 {
		t.Fatalf("results: %+v", results)
	}
	for i, result := range results {
		if result.Err != nil || result.Index != i || result.Message.MessageID == 0 || result.Message.ReqID != result.ReqID {
			t.Fatalf("result %d: %+v", i, result)
		}
	}
	if results[0].Message.MessageID >= results[1].Message.MessageID {
		t.Fatalf("the files were not delivered in order: %d, %d", results[0].Message.MessageID, results[1].Message.MessageID)
	}
	missing := []parley.FileMessageParams{files[0], {FilePath: filepath.Join(t.TempDir(), "absent.bin")}}
	_, err = client.SendFileMessages(ctx, channelURL, missing, nil)
	var failure *parley.Error
	if !errors.As(err, &failure) || (failure.Code != parley.ErrIO && failure.Code != parley.ErrInvalidArgument) || !bytes.Contains([]byte(failure.Message), []byte("files[1]")) {
		t.Fatalf("a missing file gave %v", err)
	}
	if _, err := client.SendFileMessages(ctx, channelURL, nil, nil); !errors.Is(err, parley.ErrInvalidArgument) {
		t.Fatalf("no files gave %v", err)
	}
	page, err := client.CachedMessages(channelURL, -1, 10)
	if err != nil || len(page.Messages) != 2 {
		t.Fatalf("the channel caches %d messages (%v): the refused call stored some", len(page.Messages), err)
	}
}

func TestThumbnailSizesReachTheAnswerAndTheCache(t *testing.T) {
	client, userID := connected(t, "thea")
	channelURL := newChannel(t, "thumbnails", userID)
	picture := image.NewRGBA(image.Rect(0, 0, 400, 200))
	var encoded bytes.Buffer
	if err := png.Encode(&encoded, picture); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "picture.png")
	if err := os.WriteFile(path, encoded.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	boxes := []parley.ThumbnailSize{{MaxWidth: 100, MaxHeight: 100}, {MaxWidth: 40, MaxHeight: 40}}
	message, err := client.SendFileMessage(testContext(t), channelURL,
		parley.FileMessageParams{FilePath: path, FileType: "image/png", ThumbnailSizes: boxes})
	if err != nil {
		t.Fatal(err)
	}
	if message.File == nil || message.File.Type != "image/png" || message.File.Name != "picture.png" {
		t.Fatalf("the file: %+v", message.File)
	}
	var made [][4]int
	for _, thumbnail := range message.Thumbnails {
		if thumbnail.URL == "" {
			t.Fatalf("a thumbnail without a URL: %+v", message.Thumbnails)
		}
		made = append(made, [4]int{thumbnail.Width, thumbnail.Height, thumbnail.RealWidth, thumbnail.RealHeight})
	}
	if want := [][4]int{{100, 100, 100, 50}, {40, 40, 40, 20}}; !reflect.DeepEqual(made, want) {
		t.Fatalf("thumbnails %v, want %v", made, want)
	}
	cached, err := client.CachedMessages(channelURL, -1, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(cached.Messages) != 1 || !reflect.DeepEqual(cached.Messages[0].Thumbnails, message.Thumbnails) {
		t.Fatalf("cached %+v, sent %+v", cached.Messages, message.Thumbnails)
	}
	// A box of side 0 is refused before anything is sent, naming the item.
	_, err = client.SendFileMessage(testContext(t), channelURL,
		parley.FileMessageParams{FilePath: path, ThumbnailSizes: []parley.ThumbnailSize{{MaxWidth: 0, MaxHeight: 10}}})
	if !errors.Is(err, parley.ErrInvalidArgument) || !strings.Contains(err.Error(), "thumbnail_sizes[0].max_width") {
		t.Fatalf("a box of side 0: %v", err)
	}
}
