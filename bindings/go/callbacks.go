package parley

// The library's callbacks arrive here, on the client's dispatch goroutine (manual dispatch).
// Each copies what it was given (borrowed for the call) and hands it on to a channel: no
// application code runs inside a callback, so a slow reader never holds up the library.

/*
#include "shim.h"
*/
import "C"

import "runtime/cgo"

// completion receives one asynchronous call's outcome; the handle is deleted after it ran.
type completion func(err *C.parley_error, json *C.char)

//export parleyGoResult
func parleyGoResult(handle C.uintptr_t, err *C.parley_error, json *C.char) {
	h := cgo.Handle(handle)
	var done completion
	switch value := h.Value().(type) {
	case completion:
		done = value
	case *upload:
		done = value.done
	}
	h.Delete()
	done(err, json)
}

// upload is the user_data of a file send: its progress reports, then its completion.
type upload struct {
	progress *queue[Progress]
	done     completion
}

//export parleyGoProgress
func parleyGoProgress(handle C.uintptr_t, reqID *C.char, sent, total C.int64_t) {
	switch value := cgo.Handle(handle).Value().(type) {
	case *upload:
		value.progress.push(Progress{ReqID: C.GoString(reqID), SentBytes: int64(sent), TotalBytes: int64(total)})
	case *batchUpload:
		value.progress.push(Progress{ReqID: C.GoString(reqID), SentBytes: int64(sent), TotalBytes: int64(total)})
	}
}

// batchUpload is the user_data of a send of several files: progress, then one outcome per
// file; the last one frees the handle.
type batchUpload struct {
	progress *queue[Progress]
	results  []FileSent
	left     int
	done     chan []FileSent
}

//export parleyGoFileSent
func parleyGoFileSent(handle C.uintptr_t, index C.int, reqID *C.char, err *C.parley_error, json *C.char) {
	h := cgo.Handle(handle)
	batch := h.Value().(*batchUpload)
	sent := FileSent{Index: int(index), ReqID: C.GoString(reqID)}
	if e := errorFromC("send file messages", err); e != nil {
		sent.Err = e
	} else if decodeErr := decode("send file messages", goString(json), &sent.Message); decodeErr != nil {
		sent.Err = decodeErr
	}
	if int(index) >= 0 && int(index) < len(batch.results) {
		batch.results[index] = sent
	}
	batch.left--
	if batch.left == 0 {
		h.Delete()
		batch.progress.close()
		batch.done <- batch.results
	}
}

// startCompletion receives a message collection start's two completions: the cache's list
// (which 0), then the server's (which 1), after which its handle is deleted.
type startCompletion func(which int, err *C.parley_error, json *C.char)

//export parleyGoStart
func parleyGoStart(handle C.uintptr_t, which C.int, err *C.parley_error, json *C.char) {
	h := cgo.Handle(handle)
	done := h.Value().(startCompletion)
	if which == 1 {
		h.Delete()
	}
	done(int(which), err, json)
}

//export parleyGoEvent
func parleyGoEvent(handle C.uintptr_t, category, channelURL, payload *C.char) {
	sink := cgo.Handle(handle).Value().(*queue[Event])
	sink.push(Event{
		Category:   Category(C.GoString(category)),
		ChannelURL: C.GoString(channelURL),
		Payload:    rawJSON(payload),
	})
}

//export parleyGoConnection
func parleyGoConnection(handle C.uintptr_t, event C.int, err *C.parley_error) {
	sink := cgo.Handle(handle).Value().(*queue[ConnectionChange])
	change := ConnectionChange{Event: ConnectionEvent(event)}
	if e := errorFromC("connection", err); e != nil {
		change.Err = e
	}
	sink.push(change)
}

// viewSink is what every view's handler reports to besides its own kind of changes.
type viewSink interface {
	reportError(err *Error)
	reportFreshness(freshness Freshness)
}

//export parleyGoViewError
func parleyGoViewError(handle C.uintptr_t, err *C.parley_error) {
	// A nil *Error in the change's error interface would read as a failure: none is passed.
	if e := errorFromC("background step", err); e != nil {
		cgo.Handle(handle).Value().(viewSink).reportError(e)
	}
}

//export parleyGoFreshness
func parleyGoFreshness(handle C.uintptr_t, freshness C.int) {
	cgo.Handle(handle).Value().(viewSink).reportFreshness(Freshness(freshness))
}

//export parleyGoChannels
func parleyGoChannels(handle C.uintptr_t, kind C.int, context *C.parley_collection_context, json *C.char) {
	cgo.Handle(handle).Value().(*ChannelCollection).report(int(kind), sourceFromC(context.source, context.source_name, context.detail), json)
}

//export parleyGoMessageEvent
func parleyGoMessageEvent(handle C.uintptr_t, event *C.parley_message_event) {
	cgo.Handle(handle).Value().(*MessageCollection).report(event)
}

//export parleyGoSyncAction
func parleyGoSyncAction(handle C.uintptr_t, action, list C.int, json *C.char) {
	cgo.Handle(handle).Value().(*SyncView).report(SyncAction(action), SyncList(list), json)
}

// fetchCompletion receives a sync view fetch's outcome.
type fetchCompletion func(err *C.parley_error, hasMore, offline bool)

//export parleyGoSyncFetch
func parleyGoSyncFetch(handle C.uintptr_t, err *C.parley_error, hasMore, offline C.int) {
	h := cgo.Handle(handle)
	done := h.Value().(fetchCompletion)
	h.Delete()
	done(err, hasMore != 0, offline != 0)
}

//export parleyGoSearchResults
func parleyGoSearchResults(handle C.uintptr_t, kind C.int, json *C.char) {
	cgo.Handle(handle).Value().(*Search).report(int(kind), json)
}

//export parleyGoLog
func parleyGoLog(handle C.uintptr_t, level C.int, message *C.char) {
	sink := cgo.Handle(handle).Value().(*queue[LogRecord])
	sink.push(LogRecord{Level: LogLevel(level), Message: C.GoString(message)})
}

// posted is a job given to parley_client_post; its handle is deleted after it ran.
type posted func()

//export parleyGoPosted
func parleyGoPosted(handle C.uintptr_t) {
	h := cgo.Handle(handle)
	job := h.Value().(posted)
	h.Delete()
	job()
}
