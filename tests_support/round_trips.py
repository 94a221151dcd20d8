"""A TCP relay in front of PostgreSQL that counts round trips: each time a client connection
sends after the database last spoke on it (or sends first) is one. A test points a server's
`--database` at `RoundTripCounter.url(database_url)` and reads `turns` around what it measures.
"""
from __future__ import annotations

import socket
import threading
from urllib.parse import urlsplit, urlunsplit


class RoundTripCounter:
    def __init__(self, target_host: str, target_port: int):
        self._target = (target_host, target_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._turns = 0
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @classmethod
    def before(cls, database_url: str) -> "RoundTripCounter":
        parts = urlsplit(database_url)
        return cls(parts.hostname or "127.0.0.1", parts.port or 5432)

    def url(self, database_url: str) -> str:
        """`database_url` reached through the relay."""
        parts = urlsplit(database_url)
        credentials = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        return urlunsplit((parts.scheme, f"{credentials}127.0.0.1:{self.port}", parts.path, parts.query, parts.fragment))

    @property
    def turns(self) -> int:
        with self._lock:
            return self._turns

    def close(self) -> None:
        self._closed = True
        for sock in [self._listener] + self._sockets:
            try:
                sock.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._target)
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sockets += [client, upstream]
            # Who spoke last on this connection: the client's next bytes after the database's
            # begin a round trip.
            state = {"last": "database"}
            threading.Thread(target=self._pump, args=(client, upstream, "client", state), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, "database", state), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, side: str, state: dict) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                with self._lock:
                    if side == "client" and state["last"] != "client":
                        self._turns += 1
                    state["last"] = side
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
