"""Where a live message's delivery across two servers spends its time, step by step, read
from a packet capture of the loopback interface (scripts/trace-delivery.sh makes one).

For each POST of a message to the sending server (A), the first packet of each later step
before the next POST: A's statements to PostgreSQL and their answers (the write turn, when A
took it first, then the write that commits; a server that wrote last claims the turn in the
write itself), A's answer to the POST, PostgreSQL's notification
to the receiving server (B), B's read and its first rows, and B's event frame to the
receiver. Printed as p50 and p90 from the POST's arrival, over the messages whose every
step was seen. Packets carry time stamps from the kernel, so nothing here slows the servers.

    python3 trace_delivery.py CAPTURE A_PORT B_PORT PG_PORT A_PG_PORTS B_PG_PORTS

A_PG_PORTS and B_PG_PORTS: the local ports of each server's connections to PostgreSQL,
comma-separated (`ss -tnp` lists them by process).
"""
import statistics
import struct
import sys
from typing import Callable, Dict, List, NamedTuple, Optional, Set

# Bytes before the IPv4 header, by the capture's link type.
LINK_HEADER = {0: 4, 1: 14, 101: 0, 113: 16, 276: 20}


class Packet(NamedTuple):
    time: float
    source: int
    destination: int
    payload: bytes


def read_capture(path: str) -> List[Packet]:
    """The TCP packets with a payload, from a libpcap file (micro- or nanosecond stamps)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        raise SystemExit(f"{path}: not a capture file (too short)")
    for order in ("<", ">"):
        magic = struct.unpack(order + "I", data[:4])[0]
        if magic in (0xA1B2C3D4, 0xA1B23C4D):
            break
    else:
        raise SystemExit(f"{path}: not a libpcap capture file")
    scale = 1e-6 if magic == 0xA1B2C3D4 else 1e-9
    link = struct.unpack(order + "I", data[20:24])[0] & 0x0FFFFFFF
    if link not in LINK_HEADER:
        raise SystemExit(f"{path}: link type {link} is not supported")
    skip = LINK_HEADER[link]
    packets: List[Packet] = []
    offset = 24
    while offset + 16 <= len(data):
        seconds, fraction, captured, _ = struct.unpack(order + "IIII", data[offset:offset + 16])
        frame = data[offset + 16:offset + 16 + captured]
        offset += 16 + captured
        ip = frame[skip:]
        if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 6:
            continue  # IPv4 TCP only: the servers listen on 127.0.0.1
        ip_header = (ip[0] & 0x0F) * 4
        tcp = ip[ip_header:]
        if len(tcp) < 20:
            continue
        tcp_header = (tcp[12] >> 4) * 4
        length = struct.unpack(">H", ip[2:4])[0] - ip_header - tcp_header
        if length <= 0:
            continue
        source, destination = struct.unpack(">HH", tcp[:4])
        packets.append(Packet(seconds + fraction * scale, source, destination, tcp[tcp_header:]))
    return packets


def ports(text: str) -> Set[int]:
    return {int(p) for p in text.split(",") if p}


def main(argv: List[str]) -> int:
    if len(argv) != 7:
        print("usage: trace_delivery.py CAPTURE A_PORT B_PORT PG_PORT A_PG_PORTS B_PG_PORTS "
              "(scripts/trace-delivery.sh runs it)", file=sys.stderr)
        return 2
    packets = read_capture(argv[1])
    a_port, b_port, pg_port = int(argv[2]), int(argv[3]), int(argv[4])
    a_pg, b_pg = ports(argv[5]), ports(argv[6])
    posts = [p.time for p in packets
             if p.destination == a_port and p.payload.startswith(b"POST ") and b"/messages" in p.payload.split(b"\r\n")[0]]
    steps: Dict[str, List[float]] = {name: [] for name in (
        "A sends the write turn", "the turn answered", "A sends the write", "the write answered",
        "A answers the POST", "B holds the notification", "B sends its read", "B has the rows",
        "B writes the frame")}
    matched = 0
    for index, start in enumerate(posts):
        end = posts[index + 1] if index + 1 < len(posts) else start + 0.1
        window = [p for p in packets if start <= p.time < end]

        def first(test: Callable[[Packet], bool], after: float = start) -> Optional[float]:
            return next((p.time for p in window if p.time >= after and test(p)), None)

        answer = first(lambda p: p.source == a_port and p.payload.startswith(b"HTTP/"))
        if answer is None:
            continue
        # A's statements before its answer: the write is the last; a turn taken first (two or
        # more statements) is the first. A server that wrote last claims the turn in the
        # write's own statement: one statement, no turn rows for that message.
        to_pg = [p.time for p in window if p.source in a_pg and p.destination == pg_port and p.time < answer]
        from_pg = [p.time for p in window if p.source == pg_port and p.destination in a_pg and p.time < answer]
        if not to_pg:
            continue
        write_answered = next((t for t in from_pg if t >= to_pg[-1]), None)
        turn = None
        if len(to_pg) >= 2:
            turn = (to_pg[0], next((t for t in from_pg if t >= to_pg[0]), None))
        notified = first(lambda p: p.source == pg_port and p.destination in b_pg and p.payload[:1] == b"A")
        read = first(lambda p: p.source in b_pg and p.destination == pg_port, notified) if notified else None
        rows = first(lambda p: p.source == pg_port and p.destination in b_pg, read) if read else None
        frame = first(lambda p: p.source == b_port and b"message_received" in p.payload)
        later = [to_pg[-1], write_answered, answer, notified, read, rows, frame]
        if any(moment is None for moment in later) or (turn is not None and turn[1] is None):
            continue
        matched += 1
        moments = ([turn[0], turn[1]] if turn else [None, None]) + later
        for name, moment in zip(steps, moments):
            if moment is not None:
                steps[name].append((moment - start) * 1000)
    print(f"{len(posts)} POSTs to the sending server, {matched} with every step seen")
    if not matched:
        return 1
    print(f"{'step (time from the POST reaching A)':40} {'p50':>8} {'p90':>8}")
    for name, values in steps.items():
        values.sort()
        if not values:
            print(f"{name:40} {'-':>8} {'-':>8}   (no message took the turn first)")
            continue
        share = "" if len(values) == matched else f"   ({len(values)} of {matched} messages)"
        print(f"{name:40} {statistics.median(values):6.2f} ms {values[int(len(values) * 0.9)]:6.2f} ms{share}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
