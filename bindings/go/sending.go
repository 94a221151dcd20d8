package parley

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"runtime/cgo"
	"unsafe"
)

// UserMessageParams is a user message to send. Message is required; ReqID is made up when
// empty; Extra takes the other keys by their wire names ("mention_type",
// "mentioned_user_ids", "sorted_metaarray", "is_silent", ...; include/parley/sending.h).
type UserMessageParams struct {
	Message         string
	ReqID           string
	CustomType      string
	Data            string
	ParentMessageID int64
	Extra           map[string]any
}

func (p UserMessageParams) document() map[string]any {
	document := map[string]any{}
	for key, value := range p.Extra {
		document[key] = value
	}
	document["message"] = p.Message
	if p.ReqID != "" {
		document["req_id"] = p.ReqID
	}
	if p.CustomType != "" {
		document["custom_type"] = p.CustomType
	}
	if p.Data != "" {
		document["data"] = p.Data
	}
	if p.ParentMessageID != 0 {
		document["parent_message_id"] = p.ParentMessageID
	}
	return document
}

// FileMessageParams is a file message to send: URL (a hosted file) or FilePath (a local file
// uploaded with the message). ThumbnailSizes asks the server for up to 3 thumbnails of an
// uploaded image, each fitting in its box. Extra takes the other keys by their wire names
// ("thumbnails", "file_size", ...; include/parley/sending.h).
type FileMessageParams struct {
	URL            string
	FilePath       string
	FileName       string
	FileType       string
	ReqID          string
	ThumbnailSizes []ThumbnailSize
	Extra          map[string]any
}

// ThumbnailSize is a box a thumbnail of an uploaded image fits in (sides 1 to 4096).
type ThumbnailSize struct {
	MaxWidth  int `json:"max_width"`
	MaxHeight int `json:"max_height"`
}

func (p FileMessageParams) document() map[string]any {
	document := map[string]any{}
	for key, value := range p.Extra {
		document[key] = value
	}
	for key, value := range map[string]string{"url": p.URL, "file_path": p.FilePath, "file_name": p.FileName, "file_type": p.FileType, "req_id": p.ReqID} {
		if value != "" {
			document[key] = value
		}
	}
	if len(p.ThumbnailSizes) > 0 {
		document["thumbnail_sizes"] = p.ThumbnailSizes
	}
	return document
}

// Progress is how far the upload of a file message has come.
type Progress struct {
	ReqID      string
	SentBytes  int64
	TotalBytes int64
}

// Sending is a message on its way: Pending is the local copy stored with its outbox entry
// before the send started; Wait gives the server's copy or the failure.
type Sending struct {
	Pending  Message
	client   *Client
	done     chan outcome
	cancel   func()
	op       string
	progress *queue[Progress]
}

// Wait waits for the server's copy of the message. When ctx ends first the send is
// cancelled (what becomes of the message then is the client's resend policy).
func (s *Sending) Wait(ctx context.Context) (Message, error) {
	text, err := s.client.wait(ctx, s.done, s.cancel)
	if err != nil {
		return Message{}, err
	}
	var message Message
	return message, decode(s.op, text, &message)
}

// Progress is the channel of a file message's upload progress, closed once the send
// completed; nil for a user message.
func (s *Sending) Progress() <-chan Progress {
	if s.progress == nil {
		return nil
	}
	return s.progress.out
}

// SendUserMessage sends a user message to channelURL through the outbox and waits for the
// server's copy. The pending copy appears in the views at once; with the default resend
// policy a message that failed for connection reasons is resent by itself later.
func (c *Client) SendUserMessage(ctx context.Context, channelURL string, params UserMessageParams) (Message, error) {
	sending, err := c.StartUserMessage(channelURL, params)
	if err != nil {
		return Message{}, err
	}
	return sending.Wait(ctx)
}

// StartUserMessage stores a user message as pending and starts sending it; Wait on the
// result gives the server's copy.
func (c *Client) StartUserMessage(channelURL string, params UserMessageParams) (*Sending, error) {
	return c.startSend("send user message", channelURL, params.document(), false, func(native *C.parley_client, pending **C.char, op *C.uint64_t, url, paramsText *C.char, h C.uintptr_t) C.int {
		return C.go_send_user_message(native, pending, op, url, paramsText, h)
	})
}

// SendFileMessage sends a file message to channelURL and waits for the server's copy.
func (c *Client) SendFileMessage(ctx context.Context, channelURL string, params FileMessageParams) (Message, error) {
	sending, err := c.StartFileMessage(channelURL, params)
	if err != nil {
		return Message{}, err
	}
	return sending.Wait(ctx)
}

// StartFileMessage stores a file message as pending and starts sending it (uploading
// FilePath if given); its Progress channel reports the upload, Wait gives the server's copy.
func (c *Client) StartFileMessage(channelURL string, params FileMessageParams) (*Sending, error) {
	return c.startSend("send file message", channelURL, params.document(), true, func(native *C.parley_client, pending **C.char, op *C.uint64_t, url, paramsText *C.char, h C.uintptr_t) C.int {
		return C.go_send_file_message(native, pending, op, url, paramsText, h)
	})
}

func (c *Client) startSend(op, channelURL string, params map[string]any, withProgress bool, start func(*C.parley_client, **C.char, *C.uint64_t, *C.char, *C.char, C.uintptr_t) C.int) (*Sending, error) {
	if err := checkText(op, channelURL); err != nil {
		return nil, err
	}
	paramsText, err := encodeParams(op, params)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(paramsText))
	url := cString(channelURL)
	defer C.free(unsafe.Pointer(url))
	sending := &Sending{client: c, done: make(chan outcome, 1), op: op}
	finished := completion(func(err *C.parley_error, text *C.char) {
		if sending.progress != nil {
			sending.progress.close()
		}
		sending.done <- outcome{errorFromC(op, err), goString(text)}
	})
	var handle cgo.Handle
	if withProgress {
		sending.progress = newQueue[Progress]()
		handle = cgo.NewHandle(&upload{progress: sending.progress, done: finished})
	} else {
		handle = cgo.NewHandle(finished)
	}
	var pending *C.char
	var operationID C.uint64_t
	err = c.use(func(native *C.parley_client) error {
		return call(op, func() C.int { return start(native, &pending, &operationID, url, paramsText, C.uintptr_t(handle)) })
	})
	if err != nil {
		handle.Delete()
		if sending.progress != nil {
			sending.progress.close()
		}
		return nil, err
	}
	sending.cancel = func() {
		_ = c.use(func(native *C.parley_client) error {
			C.parley_client_cancel(native, operationID)
			return nil
		})
	}
	return sending, decode(op, takeString(pending), &sending.Pending)
}

// FileSent is the outcome of one file of SendFileMessages: its position in the call's list,
// its req_id, and the server's copy or the failure.
type FileSent struct {
	Index   int
	ReqID   string
	Message Message
	Err     error
}

// MaxFilesPerSend is the most files one SendFileMessages call takes.
const MaxFilesPerSend = C.PARLEY_MAX_FILES_PER_SEND

// SendFileMessages sends 1 to MaxFilesPerSend files to channelURL in one call, each its own
// message, delivered in order, and waits for every outcome. Every item is checked before any
// is stored: one bad item fails the call (naming "files[i]") and stores none. A file that
// fails stays a failed message of its own (its FileSent.Err). progress, if not nil, receives
// the uploads' progress and is closed at the end. When ctx ends first the sends go on and
// the call returns ctx's error.
func (c *Client) SendFileMessages(ctx context.Context, channelURL string, files []FileMessageParams, progress chan<- Progress) ([]FileSent, error) {
	op := "send file messages"
	if err := checkText(op, channelURL); err != nil {
		return nil, err
	}
	documents := make([]map[string]any, len(files))
	for i, file := range files {
		documents[i] = file.document()
	}
	paramsText, err := encodeParams(op, documents)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(paramsText))
	url := cString(channelURL)
	defer C.free(unsafe.Pointer(url))
	batch := &batchUpload{progress: newQueue[Progress](), results: make([]FileSent, len(files)), left: len(files), done: make(chan []FileSent, 1)}
	go func() {
		for report := range batch.progress.out {
			if progress != nil {
				progress <- report
			}
		}
		if progress != nil {
			close(progress)
		}
	}()
	handle := cgo.NewHandle(batch)
	var pending *C.char
	err = c.use(func(native *C.parley_client) error {
		return call(op, func() C.int { return C.go_send_file_messages(native, &pending, url, paramsText, C.uintptr_t(handle)) })
	})
	if err != nil {
		// The handle stays: when storing one file failed, those stored before it still
		// complete (with ErrCancelled) after the call returned.
		batch.progress.close()
		return nil, err
	}
	C.parley_free(unsafe.Pointer(pending))
	select {
	case results := <-batch.done:
		return results, nil
	case <-ctx.Done():
		return nil, &Error{Code: ErrCancelled, Op: op, Message: "the context ended; the sends go on", cause: ctx.Err()}
	}
}

// ResendMessage resends a failed message (same req_id) and waits for the server's copy.
func (c *Client) ResendMessage(ctx context.Context, reqID string) (Message, error) {
	op := "resend message"
	if err := checkText(op, reqID); err != nil {
		return Message{}, err
	}
	id := cString(reqID)
	defer C.free(unsafe.Pointer(id))
	text, err := c.await(ctx, op, func(native *C.parley_client, h C.uintptr_t, operationID *C.uint64_t) C.int {
		return C.go_resend_message(native, operationID, id, h)
	})
	if err != nil {
		return Message{}, err
	}
	var message Message
	return message, decode(op, text, &message)
}

// CancelMessage removes a pending message not yet sent, an upload in progress, or a failed
// message; its send returns ErrCancelled.
func (c *Client) CancelMessage(reqID string) error {
	op := "cancel message"
	if err := checkText(op, reqID); err != nil {
		return err
	}
	id := cString(reqID)
	defer C.free(unsafe.Pointer(id))
	return c.use(func(native *C.parley_client) error {
		return call(op, func() C.int { return C.parley_client_cancel_message(native, id) })
	})
}

// RemoveFailedMessages removes the channel's failed messages and returns their req_ids.
func (c *Client) RemoveFailedMessages(channelURL string) ([]string, error) {
	op := "remove failed messages"
	if err := checkText(op, channelURL); err != nil {
		return nil, err
	}
	url := cString(channelURL)
	defer C.free(unsafe.Pointer(url))
	var text *C.char
	err := c.use(func(native *C.parley_client) error {
		return call(op, func() C.int { return C.parley_client_remove_failed_messages(native, &text, url) })
	})
	if err != nil {
		return nil, err
	}
	var reqIDs []string
	return reqIDs, json.Unmarshal([]byte(takeString(text)), &reqIDs)
}
