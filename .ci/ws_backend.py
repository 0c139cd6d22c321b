#!/usr/bin/env python3
"""A WebSocket echo server (RFC 6455), stdlib only, for .ci/clients.sh.

Each message (text or binary) is answered with "echo: " and the message;
pings with pongs; a close with a close. A request without an upgrade gets
200 "ws backend". Prints "listening on HOST:PORT" once bound (port 0: the
kernel's choice).

Usage: ws_backend.py --listen 127.0.0.1:0 [--tls CERT KEY]
"""
import argparse
import base64
import hashlib
import socket
import ssl
import struct
import sys
import threading

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def read_exact(conn, n):
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def read_frame(conn):
    b0, b1 = read_exact(conn, 2)
    opcode = b0 & 0x0F
    masked = b1 & 0x80
    length = b1 & 0x7F
    if length == 126:
        (length,) = struct.unpack("!H", read_exact(conn, 2))
    elif length == 127:
        (length,) = struct.unpack("!Q", read_exact(conn, 8))
    mask = read_exact(conn, 4) if masked else b"\0\0\0\0"
    payload = bytearray(read_exact(conn, length))
    for i in range(length):
        payload[i] ^= mask[i % 4]
    return opcode, bytes(payload)


def frame(opcode, payload):
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
    return head + payload


def serve(conn):
    with conn:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = conn.recv(4096)
            if not chunk:
                return
            head += chunk
        head, rest = head.split(b"\r\n\r\n", 1)
        fields = {}
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            fields[name.strip().lower()] = value.strip()
        if fields.get(b"upgrade", b"").lower() != b"websocket":
            body = b"ws backend"
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body))
            return
        # As RFC 6455 servers do (§4.2.1): a handshake without a 16-byte
        # key or version 13 is refused. An HTTP/2 client's WebSocket
        # (RFC 8441) has no key; the gateway must make one.
        key = fields.get(b"sec-websocket-key", b"")
        try:
            key_ok = len(base64.b64decode(key, validate=True)) == 16
        except ValueError:
            key_ok = False
        if not key_ok or fields.get(b"sec-websocket-version") != b"13":
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            return
        accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
        conn.sendall(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n"
        )
        if rest:
            raise SystemExit("a client sent frames before the 101: not handled here")
        try:
            while True:
                opcode, payload = read_frame(conn)
                if opcode in (1, 2):
                    conn.sendall(frame(opcode, b"echo: " + payload))
                elif opcode == 9:
                    conn.sendall(frame(10, payload))
                elif opcode == 8:
                    conn.sendall(frame(8, payload[:2]))
                    return
        except (EOFError, OSError):
            return


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--listen", default="127.0.0.1:0")
    p.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    a = p.parse_args()
    ctx = None
    if a.tls:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(*a.tls)
    host, port = a.listen.rsplit(":", 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, int(port)))
    s.listen(128)
    print("listening on %s:%d" % s.getsockname(), flush=True)
    while True:
        conn, _ = s.accept()
        threading.Thread(target=accepted, args=(conn, ctx), daemon=True).start()


def accepted(conn, ctx):
    if ctx is not None:
        try:
            conn = ctx.wrap_socket(conn, server_side=True)
        except (ssl.SSLError, OSError):
            conn.close()
            return
    serve(conn)


if __name__ == "__main__":
    sys.exit(main())
