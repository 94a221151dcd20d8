"""Where a live message's delivery across two servers spends its time, step by step, read
from a packet capture of the loopback interface (scripts/trace-delivery.sh makes one).

For each POST of a message to the sending server (A), the first packet of each later step
before the next POST: A's statements to PostgreSQL and their answers (the first one takes the
channel's lock and the event numbers, the last one writes and commits), A's answer to the
POST, A's statement that reads the bound and announces the commit, PostgreSQL's notification
to the receiving server (B), which tells B its bound, B's read of the events and its first
rows, and B's event frame to the receiver (docs/ARCHITECTURE.md, "Order across servers").
Printed as p50 and p90 from the POST's arrival, over the messages whose every step was seen.
Packets carry time stamps from the kernel, so nothing here slows the servers.

    python3 trace_delivery.py CAPTURE A_PORT B_PORT PG_PORT A_PG_PORTS B_PG_PORTS

A_PG_PORTS and B_PG_PORTS: the local ports of each server's connections to PostgreSQL,
comma-separated (`ss -tnp` lists them by process).
"""
import bisect
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
        "A sends its first statement", "the first answered", "A sends the write", "the write answered",
        "A answers the POST", "A sends the bound and announcement", "B holds the notification",
        "B sends its read of the events", "B has the events", "B writes the frame")}
    matched = 0
    packets.sort(key=lambda p: p.time)
    times = [p.time for p in packets]
    for index, start in enumerate(posts):
        end = posts[index + 1] if index + 1 < len(posts) else start + 0.1
        begin = bisect.bisect_left(times, start)
        window = packets[begin:bisect.bisect_left(times, end, begin)]
        # What follows the commit is found step after step, each after the one before (the
        # next POST may come first).
        following = packets[begin:bisect.bisect_left(times, start + 0.2, begin)]

        def first(test: Callable[[Packet], bool], after: float = start) -> Optional[float]:
            return next((p.time for p in window if p.time >= after and test(p)), None)

        def next_one(test: Callable[[Packet], bool], after: Optional[float]) -> Optional[float]:
            if after is None:
                return None
            return next((p.time for p in following if p.time >= after and test(p)), None)

        def bound_read(p: Packet) -> bool:
            return b"parley_stream_bound" in p.payload or b"parley_follow_up" in p.payload

        answer = first(lambda p: p.source == a_port and p.payload.startswith(b"HTTP/"))
        if answer is None:
            continue
        # A's statements of the write before its answer (its bound read may go before the
        # answer too): the first takes the lock and the numbers, the last writes and commits.
        to_pg = [p for p in window
                 if p.source in a_pg and p.destination == pg_port and p.time < answer and not bound_read(p)]
        if len(to_pg) < 2:
            continue

        def answered(sent: Packet) -> Optional[float]:
            return next_one(lambda p: p.source == pg_port and p.destination == sent.source, sent.time)

        first_answered, write_answered = answered(to_pg[0]), answered(to_pg[-1])
        announced = next_one(lambda p: p.source in a_pg and bound_read(p), write_answered)
        notified = next_one(lambda p: p.source == pg_port and p.destination in b_pg and p.payload[:1] == b"A", announced)
        read = next_one(lambda p: p.source in b_pg and p.destination == pg_port and not bound_read(p), notified)
        rows = next_one(lambda p: p.source == pg_port and p.destination in b_pg, read)
        frame = next_one(lambda p: p.source == b_port and b"message_received" in p.payload, rows)
        found = [to_pg[0].time, first_answered, to_pg[-1].time, write_answered, answer, announced, notified,
                 read, rows, frame]
        moments = [moment for moment in found if moment is not None]
        if len(moments) < len(found):
            continue
        matched += 1
        for name, moment in zip(steps, moments):
            steps[name].append((moment - start) * 1000)
    print(f"{len(posts)} POSTs to the sending server, {matched} with every step seen")
    if not matched:
        return 1
    print(f"{'step (time from the POST reaching A)':40} {'p50':>8} {'p90':>8}")
    for name, values in steps.items():
        values.sort()
        print(f"{name:40} {statistics.median(values):6.2f} ms {values[int(len(values) * 0.9)]:6.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
