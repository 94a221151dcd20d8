"""A TCP relay in front of PostgreSQL that counts round trips: each time a client connection
sends after the database last spoke on it (or sends first) is one. A test points a server's
`--database` at `RoundTripCounter.url(database_url)` and reads `turns` around what it measures;
with `recording` set, what the client sent in each round trip is kept too (`sent`, and per
connection `sent_by_connection`), and `statements_in` tells the statements in it.
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
        # What clients sent in each round trip while `recording` was set, in order.
        self.recording = False
        self._sent: list[tuple[int, bytearray]] = []
        self._connections = 0
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

    @property
    def sent(self) -> list[bytes]:
        with self._lock:
            return [bytes(turn) for _, turn in self._sent]

    @property
    def sent_by_connection(self) -> list[list[bytes]]:
        """The round trips recorded, connection by connection, each in its order."""
        with self._lock:
            by_connection: dict[int, list[bytes]] = {}
            for connection, turn in self._sent:
                by_connection.setdefault(connection, []).append(bytes(turn))
            return list(by_connection.values())

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
            self._connections += 1
            state: dict = {"last": "database", "turn": None, "connection": self._connections}
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
                        state["turn"] = None
                        if self.recording:
                            state["turn"] = bytearray()
                            self._sent.append((state["connection"], state["turn"]))
                    if side == "client" and state["turn"] is not None:
                        state["turn"].extend(data)
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


def statements_in(sent: bytes) -> list[str]:
    """The statements a round trip's bytes run, in PostgreSQL's frontend protocol: each simple
    query (`Q`) by its text, each execution (`E`) of an extended-protocol statement by the text
    of the `Parse` before it, or `prepared` for a statement parsed in an earlier round trip.
    Messages without a type byte (the startup) end the reading."""
    statements: list[str] = []
    parsed = "prepared"
    at = 0
    while at + 5 <= len(sent):
        kind = chr(sent[at])
        length = int.from_bytes(sent[at + 1:at + 5], "big")
        if length < 4 or not kind.isalpha():
            break
        body = sent[at + 5:at + 1 + length]
        if kind == "Q":
            statements.append(body.split(b"\0", 1)[0].decode(errors="replace"))
        elif kind == "P":
            # Parse: the statement's name, then its text.
            parsed = body.split(b"\0", 2)[1].decode(errors="replace")
        elif kind == "B":
            # Bind of a statement parsed earlier (named) or just now (unnamed).
            if body.split(b"\0", 2)[1]:
                parsed = "prepared"
        elif kind == "E":
            statements.append(parsed)
            parsed = "prepared"
        at += 1 + length
    return statements
