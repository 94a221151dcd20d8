"""The client's metrics (:meth:`parley.Client.metrics`; docs/C-API.md "Metrics" lists each).

Names and units follow Prometheus: counters end in ``_total`` (they only grow, for the life of
the client), durations are in seconds, sizes in bytes; every other number is a gauge.
"""
from __future__ import annotations

from typing import Literal, TypedDict

__all__ = ["ConnectionStateName", "Metrics"]

#: The event stream's state as :attr:`parley.Client.connection_state` names it.
ConnectionStateName = Literal["closed", "connecting", "open", "reconnecting"]


class Metrics(TypedDict):
    """One reading of the client's counters and gauges."""

    connection_state: ConnectionStateName
    connection_state_seconds: float
    reconnects_total: int
    reconnect_failures_total: int
    events_received_total: int
    events_applied_total: int
    catch_up_passes_total: int
    catch_up_seconds_total: float
    resyncs_total: int
    sends_total: int
    sends_retried_total: int
    sends_succeeded_total: int
    send_failures_total: int
    outbox_pending_messages: int
    outbox_failed_messages: int
    cache_size_bytes: int
    cache_size_limit_bytes: int
    cache_messages: int
    cache_channels: int
    evicted_channels_total: int
    evicted_messages_total: int
    search_index_messages: int
    search_index_backlog_messages: int
    open_views: int
    open_group_channel_collections: int
    open_message_collections: int
    open_sync_views: int
    open_message_searches: int
    callback_queue_depth: int
    callbacks_total: int
    callback_slowest_seconds: float
