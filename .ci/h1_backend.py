"""A real HTTP/1.1 server (Python's http.server, keep-alive on) for the
gateway's HTTP/1.1 upstreams, optionally over TLS. GET answers
`hello h1 from python PATH` (under `/page/`, an HTML page of some 30 KB,
for the compressors), POST echoes its body; every answer names the
client's port in `x-peer`, so the caller can see which upstream connection
carried it. Prints `listening on HOST:PORT` once ready.

Usage: h1_backend.py [CERT_PEM KEY_PEM]
"""
import http.server
import ssl
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self, body: bytes, ctype: str = "text/plain") -> None:
        self.send_response(200)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.send_header("x-peer", str(self.client_address[1]))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        if self.path.startswith("/page/"):
            rows = "".join(f"<li>row {i}: the quick brown fox</li>" for i in range(800))
            page = f"<html><body><h1>compressed page</h1><ul>{rows}</ul><p>the end</p></body></html>"
            self.answer(page.encode(), "text/html; charset=utf-8")
            return
        self.answer(f"hello h1 from python {self.path}".encode())

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("content-length", "0"))
        self.answer(self.rfile.read(length))

    def log_message(self, *args) -> None:
        pass


def main() -> int:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if len(sys.argv) == 3:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[1], sys.argv[2])
        ctx.set_alpn_protocols(["http/1.1"])
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    host, port = server.server_address[:2]
    print(f"listening on {host}:{port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
