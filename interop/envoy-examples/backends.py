#!/usr/bin/env python3
"""Stdlib stand-ins for the service images of Envoy's examples (run.sh starts
one per "container" namespace). Each reproduces what the examples' verify.sh
checks look at; see the notes per mode.

  hello    front-proxy's service1/service2 (shared/python/tracing/service2.py,
           aiohttp-tracing-service2): GET /{type}/{service} answers
           "Hello from behind Envoy (service N)! hostname H resolved IP\n",
           404 "404: Not Found" when {service} is not SERVICE_NAME.
           H is the container name here (Docker's is the container id).
  locality locality-load-balancing/service.py: GET / answers
           "Hello from HOST!\n", or 503 "503: Unhealthy" after GET /unhealthy;
           GET /healthy and /unhealthy flip it (201 "[HOST] Set to ...").
  echo     the tls example's echo service (envoyproxy/toolshed rust/echo,
           shared/echo): any method and path answers the request as
           serde_json pretty JSON {hostname, method, scheme, headers,
           query_params, body, path}; headers in arrival order, names
           lowercased (a repeated name keeps its first place and last value,
           as its IndexMap does). Plain HTTP with --http-port, TLS with
           --https-port --cert --key (ALPN http/1.1: this stand-in speaks
           HTTP/1.1 only; the real one also offers h2).
  websocket
           the websocket example's service-ws / service-wss (websocat 1.11,
           shared/websocket: `websocat -E ws-listen:0.0.0.0:80
           literalreply:'[ws] HELO'`, `websocat wss-listen:0.0.0.0:443
           literalreply:"[wss] HELO" --pkcs12-der ...`): an RFC 6455 server
           on any path; every message (text or binary) is answered with a
           text message holding --reply, a ping with a pong, a close with a
           close (its status code echoed); a request that is not a
           WebSocket upgrade gets websocat's 400 "Only WebSocket connections
           are welcome here" and the connection closed. Plain with
           --http-port, TLS with --https-port --cert --key (no ALPN, as
           websocat's native-tls; the PEM pair the example's pkcs12 is made
           from).

The aiohttp services of the cors, csrf and gzip examples (shared/python's
aiohttp-service image running the example's service.py; aiohttp's ways are
reproduced where a check could see them: a GET route also answers HEAD,
text is "text/plain; charset=utf-8", a path no route matches answers 404
"404: Not Found", a matched path with another method 405 "405: Method Not
Allowed", request bodies are read whole, chunked or not, and a
Content-Encoding gzip or deflate is decoded first, as aiohttp's
auto_decompress does; other codings are not decoded):
  cors-frontend
           cors/frontend/service.py: GET / answers the file --file (the
           example's frontend/index.html) as "text/html; charset=utf-8".
  cors-backend
           cors/backend/service.py: GET /cors/{status} answers "Success!".
  csrf-samesite, csrf-crosssite
           csrf/samesite/service.py and csrf/crosssite/service.py: GET /
           answers the file --file (csrf/index.html) as text
           (web.Response(text=...): "text/plain; charset=utf-8");
           csrf-samesite also POST /csrf/{status}: "Success!".
  data     shared/python/data-service.py (aiohttp-data-service, the gzip
           example's service): GET /file.txt answers 10 MiB (10485760) of
           zero bytes as text ("text/plain; charset=utf-8"), GET /file.json
           the same bytes as web.json_response(body=...) does
           ("application/json"), any other /file.{suffix} 500 (the file is
           not in the image); POST /upload answers "OK" with the header
           decompressed-size: the summed length of the names of what
           aiohttp's request.post() parses from the (decoded) body: for
           application/x-www-form-urlencoded (curl --data-binary's type)
           parse_qsl(body.rstrip().decode(charset), keep_blank_values=True),
           so for a body with no '&', '=', '%' or '+' (10 MiB of zeros) its
           length; 0 for another Content-Type (post() parses nothing),
           multipart/form-data is not modelled (500). The log says how each
           upload came (Content-Encoding, bytes on the wire, bytes decoded).
"""
import argparse
import base64
import hashlib
import json
import re
import socket
import socketserver
import ssl
import struct
import sys
import threading
import urllib.parse
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Base(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def version_string(self):
        return "Python/3.11 aiohttp/3.9.5"  # what the example images say

    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))

    def reply(self, status, body, ctype="text/plain; charset=utf-8", reason=None):
        data = body.encode()
        self.send_response(status, reason)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def read_body(self):
        """The request body as it came (Content-Length or chunked)."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            out = []
            while True:
                size = int(self.rfile.readline(65537).split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(out)
                out.append(self.rfile.read(size))
                self.rfile.readline(65537)  # the CRLF after the chunk
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""


def hello_handler(opts):
    class H(Base):
        def do_GET(self):
            parts = urllib.parse.urlsplit(self.path).path.split("/")
            # aiohttp route "/{service_type}/{service}": exactly two non-empty segments
            if len(parts) != 3 or not parts[1] or not parts[2]:
                return self.reply(404, "404: Not Found")
            service = parts[2]
            if opts.service_name and service != opts.service_name:
                return self.reply(404, "404: Not Found")
            self.reply(200, f"Hello from behind Envoy (service {service})! "
                            f"hostname {opts.hostname} resolved {opts.ip}\n")
    return H


def locality_handler(opts):
    state = {"healthy": True}
    lock = threading.Lock()

    class H(Base):
        def do_GET(self):
            path = urllib.parse.urlsplit(self.path).path
            if path == "/":
                if state["healthy"]:
                    return self.reply(200, f"Hello from {opts.host}!\n")
                return self.reply(503, "503: Unhealthy", reason="Unhealthy")
            if path in ("/healthy", "/unhealthy"):
                with lock:
                    state["healthy"] = path == "/healthy"
                word = "healthy" if state["healthy"] else "unhealthy"
                return self.reply(201, f"[{opts.host}] Set to {word}\n")
            self.reply(404, "404: Not Found")
    return H


def echo_handler(opts):
    class H(Base):
        def handle_any(self):
            headers = {}
            for k, v in self.headers.items():
                headers[k.lower()] = v
            split = urllib.parse.urlsplit(self.path)
            params = dict(urllib.parse.parse_qsl(split.query)) if split.query else {}
            body = self.read_body().decode("utf-8", "replace")
            doc = {
                "hostname": opts.hostname,
                "method": self.command,
                "scheme": split.scheme or "http",  # the real one reads the URI's scheme only
                "headers": headers,
                "query_params": params,
                "body": body,
                "path": split.path or "/",
            }
            self.reply(200, json.dumps(doc, indent=2) + "\n", ctype="application/json")
        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = handle_any
    return H


# --- aiohttp services (cors, csrf, gzip) -----------------------------------------

class AiohttpError(Exception):
    """A handler's unhandled exception: aiohttp answers 500."""


def aiohttp_decompress(body, coding):
    """aiohttp's auto_decompress of a request body (DeflateBuffer): gzip, deflate (zlib or raw)."""
    coding = (coding or "").strip().lower()
    try:
        if coding in ("gzip", "x-gzip"):
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif coding == "deflate":
            # a zlib header, else raw deflate, as aiohttp's ZLibDecompressor guesses
            wbits = zlib.MAX_WBITS if body[:1] and (body[0] & 0x0F) == 8 else -zlib.MAX_WBITS
            d = zlib.decompressobj(wbits)
        else:
            return body
        return d.decompress(body) + d.flush()
    except zlib.error as e:
        raise AiohttpError(f"Can not decode content-encoding: {coding} ({e})")


def aiohttp_handler(routes):
    """An aiohttp web.Application's answers for ROUTES: [(method, path regex, fn(handler, match, body))],
    fn returning (status, body bytes, content-type, extra headers)."""
    compiled = [(m, re.compile(r), fn) for m, r, fn in routes]

    class H(Base):
        def handle_any(self):
            raw = self.read_body()
            path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
            allowed = []
            for method, rx, fn in compiled:
                m = rx.fullmatch(path)
                if not m:
                    continue
                if self.command == method or (method == "GET" and self.command == "HEAD"):
                    try:
                        body = aiohttp_decompress(raw, self.headers.get("Content-Encoding"))
                        status, data, ctype, extra = fn(self, m, body)
                    except AiohttpError as e:
                        self.log_message("500: %s", e)
                        return self.send_bytes(500, b"500 Internal Server Error\n\nServer got itself in trouble",
                                               "text/plain; charset=utf-8")
                    return self.send_bytes(status, data, ctype, extra)
                allowed += [method] + (["HEAD"] if method == "GET" else [])
            if allowed:
                return self.send_bytes(405, b"405: Method Not Allowed", "text/plain; charset=utf-8",
                                       {"Allow": ",".join(sorted(set(allowed)))})
            self.send_bytes(404, b"404: Not Found", "text/plain; charset=utf-8")

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = handle_any

        def send_bytes(self, status, data, ctype, extra=None):
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError) as e:
                    self.log_message("%s: the client left before the body was sent (%s)", self.requestline, e)
                    self.close_connection = True
    return H


TEXT = "text/plain; charset=utf-8"


def read_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read().encode("utf-8")


def cors_frontend_handler(opts):
    page = read_text(opts.file)
    return aiohttp_handler([
        ("GET", r"/", lambda h, m, b: (200, page, "text/html; charset=utf-8", None)),
    ])


def success(h, m, b):
    return 200, b"Success!", TEXT, None


def cors_backend_handler(opts):
    return aiohttp_handler([("GET", r"/cors/[^{}/]+", success)])


def csrf_handler(opts):
    page = read_text(opts.file)
    routes = [("GET", r"/", lambda h, m, b: (200, page, TEXT, None))]
    if opts.mode == "csrf-samesite":
        routes.insert(0, ("POST", r"/csrf/[^{}/]+", success))
    return aiohttp_handler(routes)


DATA_SIZE = 10 * 1024 * 1024  # the image's dd bs=1024 count=10240 of /dev/zero


def data_handler(opts):
    zeros = b"\0" * DATA_SIZE

    def get_file(h, m, body):
        suffix = m.group(1)
        if suffix == "txt":
            return 200, zeros, TEXT, None
        if suffix == "json":
            return 200, zeros, "application/json", None
        raise AiohttpError(f"no /code/data/file.{suffix} in the image")

    def upload(h, m, body):
        ctype = h.headers.get("Content-Type")
        media = ctype.split(";", 1)[0].strip().lower() if ctype else "application/octet-stream"
        charset = "utf-8"
        for param in (ctype or "").split(";")[1:]:
            k, _, v = param.strip().partition("=")
            if k.strip().lower() == "charset" and v.strip():
                charset = v.strip().strip('"')
        size = 0
        if media == "multipart/form-data":
            raise AiohttpError("multipart/form-data is not modelled by this stand-in")
        if media in ("", "application/x-www-form-urlencoded") and body:
            try:
                query = body.rstrip().decode(charset)
            except (LookupError, UnicodeDecodeError) as e:
                raise AiohttpError(f"decoding the form body: {e}")
            size = sum(len(k) for k, _ in urllib.parse.parse_qsl(query, keep_blank_values=True, encoding=charset))
        h.log_message("upload: Content-Encoding %s, Content-Type %s, Transfer-Encoding %s, Content-Length %s; "
                      "%d bytes decoded -> decompressed-size: %d",
                      h.headers.get("Content-Encoding"), ctype, h.headers.get("Transfer-Encoding"),
                      h.headers.get("Content-Length"), len(body), size)
        return 200, b"OK", TEXT, {"decompressed-size": str(size)}

    return aiohttp_handler([
        ("GET", r"/file\.([^{}/]+)", get_file),
        ("POST", r"/upload", upload),
    ])


class TLSServer(ThreadingHTTPServer):
    """Handshakes in the connection's thread, so a stuck client blocks nobody."""
    daemon_threads = True

    def __init__(self, addr, handler, ctx):
        self.ctx = ctx
        super().__init__(addr, handler)

    def finish_request(self, request, client_address):
        request.settimeout(30)
        try:
            request = self.ctx.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as e:
            sys.stderr.write(f"{client_address}: TLS handshake failed: {e}\n")
            return
        super().finish_request(request, client_address)


# --- websocket (websocat's server mode) ---------------------------------------

WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
# websocat 1.x's answer to a request that is not a WebSocket upgrade (src/http_serve.rs).
WS_BAD_REQUEST = (b"HTTP/1.1 400 Bad Request\r\nServer: websocat\r\nContent-Type: text/plain\r\n"
                  b"Connection: close\r\n\r\nOnly WebSocket connections are welcome here\n")


def ws_accept(key):
    """Sec-WebSocket-Accept for a Sec-WebSocket-Key (RFC 6455 4.2.2)."""
    return base64.b64encode(hashlib.sha1(key.strip() + WS_GUID).digest())


def ws_frame(opcode, payload, mask=None):
    """One final frame; masked with the 4 bytes MASK when given (a client's)."""
    n = len(payload)
    bit = 0x80 if mask else 0
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, bit | n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, bit | 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, bit | 127, n)
    if mask:
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        head += mask
    return head + payload


class WsReader:
    """Frames from a socket, after the bytes the handshake read past its end."""

    def __init__(self, sock, buf=b""):
        self.sock, self.buf = sock, buf

    def exact(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("connection closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def frame(self):
        """(fin, opcode, masked, payload), unmasked."""
        b0, b1 = self.exact(2)
        n = b1 & 0x7F
        if n == 126:
            (n,) = struct.unpack("!H", self.exact(2))
        elif n == 127:
            (n,) = struct.unpack("!Q", self.exact(8))
        mask = self.exact(4) if b1 & 0x80 else None
        payload = self.exact(n)
        if mask:
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        return bool(b0 & 0x80), b0 & 0x0F, mask is not None, payload


def read_head(sock, limit=65536):
    """An HTTP head (up to the blank line) and what was read past it; None on EOF."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        if len(buf) > limit:
            return None
        chunk = sock.recv(65536)
        if not chunk:
            return None
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    fields = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower().decode("latin-1")
        fields[name] = (fields[name] + b", " if name in fields else b"") + value.strip()
    return lines[0], fields, rest


def websocket_handler(opts):
    reply = opts.reply.encode()

    def tokens(v):
        return [t.strip().lower() for t in v.split(b",")]

    class H(socketserver.BaseRequestHandler):
        def log(self, msg):
            sys.stderr.write("%s:%s %s\n" % (self.client_address[0], self.client_address[1], msg))

        def handle(self):
            sock = self.request
            sock.settimeout(300)
            try:
                got = read_head(sock)
                if got is None:
                    return self.log("closed before a request head")
                line, fields, rest = got
                method, _, target = line.decode("latin-1").partition(" ")
                if not (method == "GET" and b"websocket" in tokens(fields.get("upgrade", b""))
                        and b"upgrade" in tokens(fields.get("connection", b""))
                        and "sec-websocket-key" in fields):
                    self.log("%s: not a WebSocket upgrade -> 400" % line.decode("latin-1"))
                    sock.sendall(WS_BAD_REQUEST)
                    return
                sock.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                             b"Sec-WebSocket-Accept: " + ws_accept(fields["sec-websocket-key"]) + b"\r\n\r\n")
                self.log("%s -> 101" % line.decode("latin-1"))
                self.frames(sock, WsReader(sock, rest))
            except (EOFError, OSError) as e:
                self.log("connection ended: %s" % (e or type(e).__name__))

        def frames(self, sock, rd):
            message, first = b"", None
            while True:
                fin, op, masked, payload = rd.frame()
                if not masked:
                    self.log("an unmasked frame from the client (opcode %d)" % op)
                if op in (1, 2) or (op == 0 and first is not None):
                    first = op if op else first
                    message += payload
                    if not fin:
                        continue
                    self.log("%s message %r -> %r" % ("text" if first == 1 else "binary", message, reply))
                    sock.sendall(ws_frame(1, reply))
                    message, first = b"", None
                elif op == 9:
                    self.log("ping %r -> pong" % payload)
                    sock.sendall(ws_frame(10, payload))
                elif op == 10:
                    self.log("pong %r" % payload)
                elif op == 8:
                    self.log("close %r -> close" % payload)
                    sock.sendall(ws_frame(8, payload[:2]))
                    return
                else:
                    self.log("opcode %d: protocol error, closing" % op)
                    sock.sendall(ws_frame(8, struct.pack("!H", 1002)))
                    return
    return H


class WsServer(socketserver.ThreadingTCPServer):
    """One thread per connection; TLS handshakes (with CTX) in that thread."""
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, handler, ctx=None):
        self.ctx = ctx
        super().__init__(addr, handler)

    def finish_request(self, request, client_address):
        if self.ctx is not None:
            request.settimeout(30)
            try:
                request = self.ctx.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError) as e:
                sys.stderr.write(f"{client_address}: TLS handshake failed: {e}\n")
                return
            try:
                super().finish_request(request, client_address)
            finally:
                request.close()  # the raw socket that shutdown_request closes is detached
            return
        super().finish_request(request, client_address)


AIOHTTP_MODES = {
    "cors-frontend": cors_frontend_handler,
    "cors-backend": cors_backend_handler,
    "csrf-samesite": csrf_handler,
    "csrf-crosssite": csrf_handler,
    "data": data_handler,
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["hello", "locality", "echo", "websocket", "cors-frontend", "cors-backend",
                                     "csrf-samesite", "csrf-crosssite", "data"])
    ap.add_argument("--bind", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--service-name", default="")
    ap.add_argument("--hostname", default=socket.gethostname())
    ap.add_argument("--ip", default="")
    ap.add_argument("--host", default="")
    ap.add_argument("--http-port", type=int)
    ap.add_argument("--https-port", type=int)
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--reply", default="", help="websocket: the literal reply to every message")
    ap.add_argument("--file", help="cors-frontend, csrf-*: the page GET / answers")
    opts = ap.parse_args()
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.allow_reuse_address = True

    servers = []
    if opts.mode == "hello":
        servers.append(ThreadingHTTPServer((opts.bind, opts.port), hello_handler(opts)))
    elif opts.mode == "locality":
        servers.append(ThreadingHTTPServer((opts.bind, opts.port), locality_handler(opts)))
    elif opts.mode in AIOHTTP_MODES:
        servers.append(ThreadingHTTPServer((opts.bind, opts.port), AIOHTTP_MODES[opts.mode](opts)))
    elif opts.mode == "websocket":
        handler = websocket_handler(opts)
        if opts.http_port:
            servers.append(WsServer((opts.bind, opts.http_port), handler))
        if opts.https_port:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(opts.cert, opts.key)
            servers.append(WsServer((opts.bind, opts.https_port), handler, ctx))
    else:
        handler = echo_handler(opts)
        if opts.http_port:
            servers.append(ThreadingHTTPServer((opts.bind, opts.http_port), handler))
        if opts.https_port:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(opts.cert, opts.key)
            ctx.set_alpn_protocols(["http/1.1"])
            servers.append(TLSServer((opts.bind, opts.https_port), handler, ctx))
    for s in servers[1:]:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    print(f"backends.py {opts.mode}: listening on "
          + ", ".join(f"{s.server_address[0]}:{s.server_address[1]}" for s in servers),
          file=sys.stderr, flush=True)
    servers[0].serve_forever()


if __name__ == "__main__":
    main()
