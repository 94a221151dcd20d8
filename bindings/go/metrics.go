package parley

/*
#include "shim.h"
*/
import "C"

// Metrics is one reading of the client's counters and gauges (docs/C-API.md, "Metrics",
// lists each). The JSON names are the Prometheus names: counters end in _total and only grow
// for the life of the client, durations are in seconds, sizes in bytes; every other number
// is a gauge.
type Metrics struct {
	ConnectionState             ConnectionState `json:"connection_state"`
	ConnectionStateSeconds      float64         `json:"connection_state_seconds"`
	ReconnectsTotal             int64           `json:"reconnects_total"`
	ReconnectFailuresTotal      int64           `json:"reconnect_failures_total"`
	EventsReceivedTotal         int64           `json:"events_received_total"`
	EventsAppliedTotal          int64           `json:"events_applied_total"`
	CatchUpPassesTotal          int64           `json:"catch_up_passes_total"`
	CatchUpSecondsTotal         float64         `json:"catch_up_seconds_total"`
	ResyncsTotal                int64           `json:"resyncs_total"`
	SendsTotal                  int64           `json:"sends_total"`
	SendsRetriedTotal           int64           `json:"sends_retried_total"`
	SendsSucceededTotal         int64           `json:"sends_succeeded_total"`
	SendFailuresTotal           int64           `json:"send_failures_total"`
	OutboxPendingMessages       int64           `json:"outbox_pending_messages"`
	OutboxFailedMessages        int64           `json:"outbox_failed_messages"`
	CacheSizeBytes              int64           `json:"cache_size_bytes"`
	CacheSizeLimitBytes         int64           `json:"cache_size_limit_bytes"`
	CacheMessages               int64           `json:"cache_messages"`
	CacheChannels               int64           `json:"cache_channels"`
	EvictedChannelsTotal        int64           `json:"evicted_channels_total"`
	EvictedMessagesTotal        int64           `json:"evicted_messages_total"`
	SearchIndexMessages         int64           `json:"search_index_messages"`
	SearchIndexBacklogMessages  int64           `json:"search_index_backlog_messages"`
	OpenViews                   int64           `json:"open_views"`
	OpenGroupChannelCollections int64           `json:"open_group_channel_collections"`
	OpenMessageCollections      int64           `json:"open_message_collections"`
	OpenSyncViews               int64           `json:"open_sync_views"`
	OpenMessageSearches         int64           `json:"open_message_searches"`
	CallbackQueueDepth          int64           `json:"callback_queue_depth"`
	CallbacksTotal              int64           `json:"callbacks_total"`
	CallbackSlowestSeconds      float64         `json:"callback_slowest_seconds"`
}

// Metrics reads the client's counters and gauges. It does not talk to the server and is
// cheap enough to call every second (before Connect and after Disconnect too).
func (c *Client) Metrics() (Metrics, error) {
	var metrics Metrics
	return metrics, c.readCache("metrics", &metrics, func(native *C.parley_client, out **C.char) C.int {
		return C.parley_client_metrics(native, out)
	})
}
