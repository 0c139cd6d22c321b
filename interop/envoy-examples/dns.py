#!/usr/bin/env python3
"""A tiny authoritative DNS server for the compose-like test network of run.sh.

It stands in for Docker's embedded DNS: the compose service names (one A
record per replica) and the container names answer with their addresses on
the test subnet. Stdlib only, UDP only (answers are far below 512 bytes).

    dns.py --listen 10.213.0.1 --port 53 --table /path/to/table

The table file has one `name address` pair per line; a name may appear on
several lines (one A record each). It is re-read whenever its mtime changes,
so run.sh registers scaled-up replicas by rewriting it (atomically).

Answers: A for a known name -> its records (TTL --ttl, default 5 s); any
other type for a known name -> NOERROR with no records (NODATA), as Docker's
DNS answers AAAA for an IPv4-only container; an unknown name -> NXDOMAIN.
Anything that is not a standard query gets NOTIMP / FORMERR.
"""
import argparse
import os
import socket
import struct
import sys
import time


def parse_name(msg, off):
    labels = []
    while True:
        if off >= len(msg):
            raise ValueError("truncated name")
        n = msg[off]
        if n == 0:
            return ".".join(labels), off + 1
        if n & 0xC0:
            raise ValueError("compressed name in question")
        labels.append(msg[off + 1:off + 1 + n].decode("ascii", "replace"))
        off += 1 + n


class Table:
    def __init__(self, path):
        self.path = path
        self.mtime = None
        self.records = {}

    def lookup(self, name):
        try:
            st = os.stat(self.path)
            if st.st_mtime_ns != self.mtime:
                recs = {}
                with open(self.path) as f:
                    for line in f:
                        parts = line.split()
                        if len(parts) == 2:
                            recs.setdefault(parts[0].lower().rstrip("."), []).append(parts[1])
                self.records, self.mtime = recs, st.st_mtime_ns
        except FileNotFoundError:
            self.records = {}
        return self.records.get(name.lower().rstrip("."))


def answer(query, table, ttl):
    if len(query) < 12:
        return None
    qid, flags, qd, _an, _ns, _ar = struct.unpack("!HHHHHH", query[:12])
    if flags & 0x8000:  # a response: ignore
        return None
    opcode = (flags >> 11) & 0xF
    rd = flags & 0x0100
    head = lambda rcode, an: struct.pack(
        "!HHHHHH", qid, 0x8000 | (opcode << 11) | 0x0400 | rd | 0x0080 | rcode, qd if qd == 1 else 0, an, 0, 0)
    if opcode != 0:
        return head(4, 0)  # NOTIMP
    if qd != 1:
        return head(1, 0)  # FORMERR
    try:
        name, off = parse_name(query, 12)
        qtype, qclass = struct.unpack("!HH", query[off:off + 4])
    except (ValueError, struct.error):
        return head(1, 0)[:4] + b"\0\0\0\0\0\0\0\0"
    question = query[12:off + 4]
    addrs = table.lookup(name)
    if addrs is None:
        return head(3, 0) + question  # NXDOMAIN
    if qtype not in (1, 255) or qclass != 1:
        return head(0, 0) + question  # NODATA
    rrs = b"".join(
        struct.pack("!HHHIH", 0xC00C, 1, 1, ttl, 4) + socket.inet_aton(a) for a in addrs)
    return head(0, len(addrs)) + question + rrs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True)
    ap.add_argument("--port", type=int, default=53)
    ap.add_argument("--table", required=True)
    ap.add_argument("--ttl", type=int, default=5)
    ap.add_argument("--log", action="store_true", help="log every query to stderr")
    args = ap.parse_args()
    table = Table(args.table)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((args.listen, args.port))
    print(f"dns.py: serving {args.table} on {args.listen}:{args.port}", file=sys.stderr, flush=True)
    while True:
        query, peer = sock.recvfrom(4096)
        try:
            resp = answer(query, table, args.ttl)
        except Exception as e:  # never die on a bad packet
            print(f"dns.py: {peer}: {e!r}", file=sys.stderr, flush=True)
            continue
        if resp is not None:
            sock.sendto(resp, peer)
            if args.log:
                try:
                    name, off = parse_name(query, 12)
                    qtype = struct.unpack("!H", query[off:off + 2])[0]
                except Exception:
                    name, qtype = "?", 0
                rcode = resp[3] & 0xF
                print(f"{time.strftime('%H:%M:%S')} {peer[0]} {name} type={qtype} rcode={rcode} "
                      f"an={struct.unpack('!H', resp[6:8])[0]}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
