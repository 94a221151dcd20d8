"""Pieces the tests' TCP proxies share (test_fault_injection.py, test_sync.py)."""
from __future__ import annotations

import socket


def loopback_listener(backlog: int) -> socket.socket:
    """A listening socket on a free loopback port."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(backlog)
    return listener


def shut_down(*ends: socket.socket) -> None:
    """Shuts both directions of each socket, ignoring ones already gone: a pump thread
    blocked in `recv` on the other end then returns."""
    for end in ends:
        try:
            end.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
