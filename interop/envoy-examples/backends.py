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
"""
import argparse
import json
import socket
import ssl
import sys
import threading
import urllib.parse
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["hello", "locality", "echo"])
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
    opts = ap.parse_args()
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.allow_reuse_address = True

    servers = []
    if opts.mode == "hello":
        servers.append(ThreadingHTTPServer((opts.bind, opts.port), hello_handler(opts)))
    elif opts.mode == "locality":
        servers.append(ThreadingHTTPServer((opts.bind, opts.port), locality_handler(opts)))
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
