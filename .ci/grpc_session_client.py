"""A gRPC client (grpcio) over TLS through the gateway, with a stateful
session: the first call's response sets the session cookie (initial
metadata), and every call that sends it back reaches the same backend.

Usage: grpc_session_client.py HOST:PORT CA_PEM [CALLS]
"""
import sys

import grpc


def main() -> int:
    target, ca = sys.argv[1], sys.argv[2]
    calls = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    with open(ca, "rb") as f:
        creds = grpc.ssl_channel_credentials(root_certificates=f.read())
    channel = grpc.secure_channel(
        target, creds, options=(("grpc.ssl_target_name_override", "localhost"),)
    )
    # The demo backend echoes any method's messages: raw bytes in and out.
    echo = channel.unary_unary("/demo.Echo/Echo")
    reply, call = echo.with_call(b"hello", timeout=5)
    meta = dict(call.initial_metadata())
    assert reply == b"hello", reply
    backend = meta["x-backend"]
    cookie = meta["set-cookie"].split(";")[0]
    for i in range(calls):
        reply, call = echo.with_call(
            b"again %d" % i, metadata=(("cookie", cookie),), timeout=5
        )
        got = dict(call.initial_metadata())["x-backend"]
        if got != backend:
            print(f"call {i}: backend {got}, session said {backend}")
            return 1
    # Without the cookie the calls spread over both backends: the session
    # is what held them on one.
    seen = {
        dict(echo.with_call(b"free", timeout=5)[1].initial_metadata())["x-backend"]
        for _ in range(calls)
    }
    if len(seen) < 2:
        print(f"without the session every call went to {seen}: the test proves nothing")
        return 1
    print(f"grpc: {calls + 1} calls over TLS, all to {backend}; without the session: {sorted(seen)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
