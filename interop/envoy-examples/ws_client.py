#!/usr/bin/env python3
"""The websocket example's client (shared/websocket/Dockerfile, target
websocket-client: interact.sh, expect driving websocat), stdlib only.

  ws_client.py [options] PORT[/PATH] PROTOCOL BACKEND

does interact.sh's exchange with PROTOCOL://localhost:PORT[/PATH] (ws or
wss; wss without verifying the certificate, as `websocat --insecure`):
send the text message HELO, expect one holding "[BACKEND] HELO" within 1 s
(expect's `set timeout 1`), send GOODBYE, expect it again within 1 s; then
drop the connection without a close frame (interact.sh ends websocat with
^C). The handshake may take 2 s: websocat connects while expect waits 1 s
for a first line, and buffers the HELO typed meanwhile. Exit 0 if both
replies came, else 1; every step is printed (the response head, each
message received), so that a failure shows what came instead.

Options not in interact.sh (the harness's [extra] checks):
  --ping          then send a ping, expect a pong with its payload
  --close         then send a close (1000), expect a close back, then the end
                  of the connection within 3 s
  --peer-cert PEM the TLS peer's certificate must be this one
  --host H        connect to H instead of localhost
  --timeout S     expect's timeout (default 1)
"""
import argparse
import base64
import hashlib
import os
import socket
import ssl
import struct
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from backends import WsReader, read_head, ws_accept, ws_frame  # noqa: E402

OPS = {0: "continuation", 1: "text", 2: "binary", 8: "close", 9: "ping", 10: "pong"}


def say(msg):
    print(msg, flush=True)


class Client:
    def __init__(self, sock, rest):
        self.sock = sock
        self.rd = WsReader(sock, rest)
        self.t0 = time.monotonic()

    def send(self, op, payload):
        self.sock.sendall(ws_frame(op, payload, mask=os.urandom(4)))
        self.t0 = time.monotonic()
        say("sent %s %r" % (OPS[op], payload.decode() if op == 1 else payload))

    def recv_until(self, want, timeout):
        """Messages until WANT(op, payload) holds; False at the deadline, EOF or a close."""
        deadline = time.monotonic() + timeout
        message, first = b"", None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                say("nothing more within %gs" % timeout)
                return False
            self.sock.settimeout(left)
            try:
                fin, op, masked, payload = self.rd.frame()
            except (socket.timeout, TimeoutError):
                say("nothing more within %gs" % timeout)
                return False
            except (EOFError, OSError) as e:
                say("connection ended: %s" % (e or type(e).__name__))
                return False
            took = time.monotonic() - self.t0
            note = " (masked!)" if masked else ""
            if op in (1, 2) or (op == 0 and first is not None):
                first = op or first
                message += payload
                if not fin:
                    continue
                say("received %s %r after %.3fs%s" % (OPS[first], message.decode("utf-8", "replace"), took, note))
                if want(first, message):
                    return True
                message, first = b"", None
            else:
                say("received %s %r after %.3fs%s" % (OPS.get(op, "opcode %d" % op), payload, took, note))
                if want(op, payload):
                    return True
                if op == 9:  # websocat answers pings
                    self.sock.sendall(ws_frame(10, payload, mask=os.urandom(4)))
                elif op == 8:
                    return False


def main():
    ap = argparse.ArgumentParser(description="interact.sh of envoyproxy/examples' websocket example")
    ap.add_argument("port_path", metavar="PORT[/PATH]")
    ap.add_argument("protocol", choices=["ws", "wss"])
    ap.add_argument("backend")
    ap.add_argument("--host", default="localhost")
    ap.add_argument("--timeout", type=float, default=1.0)
    ap.add_argument("--ping", action="store_true")
    ap.add_argument("--close", action="store_true")
    ap.add_argument("--peer-cert")
    opts = ap.parse_args()
    port, slash, path = opts.port_path.partition("/")
    path = "/" + path if slash else "/"
    url = "%s://%s:%s%s" % (opts.protocol, opts.host, port, path)
    expected = ("[%s] HELO" % opts.backend).encode()

    start = time.monotonic()
    try:
        sock = socket.create_connection((opts.host, int(port)), timeout=2)
        sock.settimeout(max(0.1, 2 - (time.monotonic() - start)))
        if opts.protocol == "wss":
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            sock = ctx.wrap_socket(sock, server_hostname=opts.host)
            der = sock.getpeercert(binary_form=True)
            say("%s: TLS %s %s, peer certificate sha256 %s" % (
                url, sock.version(), sock.cipher()[0], hashlib.sha256(der).hexdigest()))
            if opts.peer_cert:
                with open(opts.peer_cert) as f:
                    mine = ssl.PEM_cert_to_DER_cert(f.read())
                if mine != der:
                    say("the peer certificate is not %s's; it is:\n%s" % (
                        opts.peer_cert, ssl.DER_cert_to_PEM_cert(der).rstrip()))
                    return 1
                say("the peer certificate is %s's" % opts.peer_cert)
        key = base64.b64encode(os.urandom(16))
        req = ("GET %s HTTP/1.1\r\nHost: %s:%s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
               "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n\r\n") % (path, opts.host, port, key.decode())
        sock.sendall(req.encode())
        say("> " + req.rstrip().replace("\r\n", "\n> "))
        got = read_head(sock)
    except (OSError, ValueError) as e:
        say("%s: %s" % (url, e or type(e).__name__))
        return 1
    if got is None:
        say("%s: the connection ended before a response head" % url)
        return 1
    line, fields, rest = got
    say("< " + line.decode("latin-1"))
    for k, v in fields.items():
        say("< %s: %s" % (k, v.decode("latin-1")))
    if line.split(b" ")[1:2] != [b"101"] or fields.get("sec-websocket-accept") != ws_accept(key):
        # websocat: "WebSocketError: Received unexpected status code" and exits.
        sock.settimeout(0.5)
        body = rest
        try:
            while len(body) < 1024:
                chunk = sock.recv(1024)
                if not chunk:
                    break
                body += chunk
        except OSError:
            pass
        say("< (body) %r" % body[:1024])
        say("not upgraded (status %s, sec-websocket-accept %s)" % (
            line.decode("latin-1"), "right" if fields.get("sec-websocket-accept") == ws_accept(key) else "wrong or none"))
        return 1

    c = Client(sock, rest)
    ok = True
    for text in (b"HELO", b"GOODBYE"):
        c.send(1, text)
        if not c.recv_until(lambda op, m: op in (1, 2) and expected in m, opts.timeout):
            say("FAIL: no %r after %s" % (expected.decode(), text.decode()))
            ok = False
            break
    if ok and opts.ping:
        c.send(9, b"exg-ping")
        if not c.recv_until(lambda op, m: op == 10 and m == b"exg-ping", opts.timeout):
            say("FAIL: no pong 'exg-ping'")
            ok = False
    if ok and opts.close:
        c.send(8, struct.pack("!H", 1000))
        if not c.recv_until(lambda op, m: op == 8, opts.timeout):
            say("FAIL: no close frame back")
            ok = False
        else:
            # The server ends TCP first (RFC 6455 7.1.1); Envoy's downstream
            # end waits for the client's FIN up to its delayed_close_timeout
            # (1 s) first, hence 3 s here.
            sock.settimeout(3)
            t = time.monotonic()
            try:
                tail = sock.recv(1)
                say("then %s after %.3fs" % ("the end of the connection" if not tail else "more bytes: %r" % tail,
                                              time.monotonic() - t))
                ok = not tail
            except OSError as e:
                say("then no end of the connection within 3s: %s" % (e or type(e).__name__))
                ok = False
    if not opts.close:
        say("dropping the connection (interact.sh: ^C to websocat)")
    sock.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
