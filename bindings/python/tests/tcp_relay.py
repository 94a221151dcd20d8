"""Pieces the tests' TCP proxies share (test_fault_injection.py, test_sync.py)."""
from __future__ import annotations

import random
import socket
import threading
import time
from typing import Any, Callable, List


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


class ForwardingProxy:
    """Forwards each TCP connection to the server with two pump threads (`_pump`, one per
    direction, `from_client` telling which), started in the listener's thread."""

    def __init__(self, server_url: str) -> None:
        self.target_port = int(server_url.rsplit(":", 1)[1])
        self.listener = loopback_listener(16)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.sockets: List[socket.socket] = []

    def start(self) -> None:
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            upstream.settimeout(None)
            self.sockets += [client, upstream]
            connection = self._connection_state()
            threading.Thread(target=self._pump, args=(client, upstream, connection, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, connection, False), daemon=True).start()

    def _connection_state(self) -> Any:
        """What the two pumps of one connection share."""
        return None

    def _pump(self, source: socket.socket, sink: socket.socket, connection: Any, from_client: bool) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.listener.close()
        shut_down(*self.sockets)


def pump_stream(source: socket.socket, sink: socket.socket, stream: Any, from_client: bool,
                marks: Callable[[bytes], bool], pause: Callable[[], None]) -> None:
    """One direction of a connection that may be an event stream: a request for which `marks`
    is true sets `stream`; that stream's answer passes through its `connected` event, then
    `pause()` runs before the rest goes on (later bytes wait in the socket meanwhile)."""
    pending = b""
    try:
        while data := source.recv(65536):
            if from_client and marks(data):
                stream.set()
            if from_client or not stream.is_set():
                sink.sendall(data)
                continue
            pending += data
            start = pending.find(b"event: connected")
            end = pending.find(b"\n\n", start) if start >= 0 else -1
            if end < 0:
                continue
            stream.clear()
            sink.sendall(pending[:end + 2])
            pause()
            sink.sendall(pending[end + 2:])
            pending = b""
    except OSError:
        pass
    finally:
        shut_down(source, sink)


class HoldingProxy(ForwardingProxy):
    """Forwards TCP connections to the server. Once armed, the connection of the next request
    whose bytes contain `marker` has (part of) its answer held until `release` (how much: the
    subclass's `_pump`). Each connection's state is an event, set while its answer is held."""

    def __init__(self, server_url: str, marker: bytes) -> None:
        super().__init__(server_url)
        self.marker = marker
        self.armed = False
        self.released = threading.Event()

    def arm(self) -> None:
        self.armed = True

    def release(self) -> None:
        self.released.set()

    def _connection_state(self) -> Any:
        return threading.Event()

    def _takes(self, data: bytes) -> bool:
        """Whether `data` is the request armed for (which disarms the proxy)."""
        taken = self.armed and self.marker in data
        if taken:
            self.armed = False
        return taken

    def close(self) -> None:
        self.released.set()
        super().close()


class AnswerHoldingProxy(HoldingProxy):
    """A `HoldingProxy` that holds the whole answer to the marked request when it arrives from
    the server (so the server has read what it answers)."""

    def __init__(self, server_url: str, marker: bytes) -> None:
        super().__init__(server_url, marker)
        self.answered = threading.Event()  # the held answer came from the server
        self.forwarded = threading.Event()  # the held answer went on to the client
        self.start()

    def _pump(self, source: socket.socket, sink: socket.socket, hold: Any, from_client: bool) -> None:
        try:
            while data := source.recv(65536):
                if from_client and self._takes(data):
                    hold.set()  # before the request goes on: its answer is the next bytes back
                held = not from_client and hold.is_set()
                if held:
                    hold.clear()
                    self.answered.set()
                    self.released.wait(30)
                sink.sendall(data)
                if held:
                    self.forwarded.set()
        except OSError:
            pass
        finally:
            shut_down(source, sink)


class StreamHoldingProxy(HoldingProxy):
    """A `HoldingProxy` for an event stream: the marked stream's answer passes through its
    `connected` event; what follows (the replay, live events) is held."""

    def __init__(self, server_url: str, marker: bytes) -> None:
        super().__init__(server_url, marker)
        self.holding = threading.Event()  # `connected` went on; the rest is held
        self.start()

    def _pump(self, source: socket.socket, sink: socket.socket, held: Any, from_client: bool) -> None:
        def pause() -> None:
            self.holding.set()
            self.released.wait(30)

        pump_stream(source, sink, held, from_client, self._takes, pause)


class ReplayDelayingProxy(ForwardingProxy):
    """Forwards TCP connections to the server; each event stream (a request whose bytes contain
    `marker`) passes its answer through the `connected` event, then waits a random time up to
    `most` seconds (drawn from `seed`) before the rest goes on: a replay that comes after the
    catch-up's first answers, as a slow link would make it."""

    def __init__(self, server_url: str, marker: bytes, most: float, seed: int) -> None:
        super().__init__(server_url)
        self.marker = marker
        self.most = most
        self.random = random.Random(seed)
        self.lock = threading.Lock()
        self.start()

    def _connection_state(self) -> Any:
        return threading.Event()  # set: this connection is a stream whose `connected` has not passed

    def _pump(self, source: socket.socket, sink: socket.socket, stream: Any, from_client: bool) -> None:
        def pause() -> None:
            with self.lock:
                seconds = self.random.uniform(0, self.most)
            time.sleep(seconds)

        pump_stream(source, sink, stream, from_client, lambda data: self.marker in data, pause)


class RequestRefusingProxy(ForwardingProxy):
    """Forwards TCP connections to the server, except that the next `refusals` requests whose
    bytes contain `marker` are answered 503 by the proxy itself, which then closes that
    connection (the other connections, the event stream's among them, carry on). `requests`:
    the request lines seen, in order."""

    def __init__(self, server_url: str, marker: bytes, refusals: int) -> None:
        super().__init__(server_url)
        self.marker = marker
        self.lock = threading.Lock()
        self.left = refusals
        self.refused = 0
        self.requests: List[bytes] = []
        self.start()

    def _pump(self, source: socket.socket, sink: socket.socket, connection: Any, from_client: bool) -> None:
        try:
            while data := source.recv(65536):
                if from_client and data.split(b" ", 1)[0] in (b"GET", b"POST", b"PUT", b"DELETE", b"PATCH"):
                    with self.lock:
                        self.requests.append(data.split(b"\r\n", 1)[0])
                if from_client and self.marker in data:
                    with self.lock:
                        refuse = self.left > 0
                        if refuse:
                            self.left -= 1
                            self.refused += 1
                    if refuse:
                        body = b'{"error":true,"code":500902,"message":"refused by the test proxy"}'
                        source.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                                       b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
                        break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            shut_down(source, sink)
