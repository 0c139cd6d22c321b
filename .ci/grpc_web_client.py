"""A real gRPC-Web client (sonora, over HTTP/1.1) through the gateway's
gRPC-Web filter to a gRPC echo backend: a unary call echoed, and a call the
backend fails (its status and message reach the client from the trailer
frame). Usage: grpc_web_client.py HOST:PORT"""
import sys

import grpc
import sonora.client

addr = sys.argv[1]
with sonora.client.insecure_web_channel(f"http://{addr}") as channel:
    echo = channel.unary_unary(
        "/test.Echo/Unary",
        request_serializer=lambda b: b,
        response_deserializer=lambda b: b,
    )
    print(echo(b"hello from grpc-web", timeout=10).decode())
    try:
        echo(b"x", timeout=10, metadata=[("x-grpc-status", "5"), ("x-grpc-message", "not here")])
        print("no error")
    except grpc.RpcError as e:
        print(e.code().name, e.details())
