#!/usr/bin/env bash
# Whether the local rate limit holds for the gateway as a whole (issue 30:
# N shards together admit the configured rate within ±5 %). The gateway
# runs 2 shards (CPUs 0 and 1) with one route limited to RATE requests per
# second (a bucket of RATE/10 tokens, refilled continuously); loadgen
# offers twice that, open loop, over 8 connections the kernel spreads over
# the shards, for DURATION seconds. Admitted = the 2xx answers; the
# expected count is the bucket's start (full) plus RATE per second. Each
# round reports admitted/expected; the median and range over the rounds.
#
# Usage: benches/e2e/rate_limit_accuracy.sh [--rounds N] [--duration S]
#        [--rate R] [--no-build]
set -euo pipefail

ROUNDS=5
DURATION=10
RATE=2000
BUILD=1
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) ROUNDS=$2; shift ;;
        --duration) DURATION=$2; shift ;;
        --rate) RATE=$2; shift ;;
        --no-build) BUILD=0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$ROOT/target/release
if [ "$BUILD" = 1 ]; then
    (cd "$ROOT" && cargo build --release -q -p gateway -p demo-backend -p loadgen --bin gateway --bin demo-backend --bin loadgen)
fi
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$ROOT/benches/e2e/lib.sh"

BACKEND=$(free_port)
"$BIN/demo-backend" --listen "127.0.0.1:$BACKEND" --name b1 >"$WORK/backend.log" 2>&1 &
PIDS+=($!)
wait_listen "$BACKEND" $!
BURST=$((RATE / 10))

echo "rate_limit_accuracy at $(commit_label), $(date -u +%F): 2 shards, limit $RATE/s (burst $BURST), offered $((2 * RATE))/s open loop, ${DURATION}s x $ROUNDS rounds"
RATIOS=()
for r in $(seq "$ROUNDS"); do
    PORT=$(free_port)
    cat >"$WORK/gw.yaml" <<EOF
admin: { address: { socket_address: { address: 127.0.0.1, port_value: $(free_port) } } }
static_resources:
  listeners:
  - name: ingress
    address: { socket_address: { address: 127.0.0.1, port_value: $PORT } }
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          route_config:
            virtual_hosts: [ { name: all, domains: ["*"], routes: [ { match: { prefix: "/" }, route: { cluster: backend } } ] } ]
          http_filters:
          - name: envoy.filters.http.local_ratelimit
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit
              stat_prefix: rl
              token_bucket: { max_tokens: $BURST, tokens_per_fill: $RATE, fill_interval: 1s }
              filter_enabled: { default_value: { numerator: 100, denominator: HUNDRED } }
              filter_enforced: { default_value: { numerator: 100, denominator: HUNDRED } }
          - name: envoy.filters.http.router
            typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
  clusters:
  - name: backend
    type: STATIC
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: { http2_protocol_options: {} }
    load_assignment:
      cluster_name: backend
      endpoints: [ { lb_endpoints: [ { endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: $BACKEND } } } } ] } ]
EOF
    "$BIN/gateway" --config "$WORK/gw.yaml" --shards 2 --log warn >"$WORK/gateway.log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    wait_listen "$PORT" "$pid"
    "$BIN/loadgen" -t 1 -c 8 -m 8 --rate "$((2 * RATE))" --warmup 0s -d "${DURATION}s" --json \
        "http://127.0.0.1:$PORT/" >"$WORK/out.json" 2>/dev/null
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    ratio=$(python3 - "$WORK/out.json" "$RATE" "$BURST" "$DURATION" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rate, burst, secs = float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
classes = d.get("status") or {}
ok = classes.get("2xx") if isinstance(classes, dict) else None
if ok is None:
    ok = d.get("requests", 0) - (d.get("errors") or {}).get("non_2xx", 0)
expected = burst + rate * secs
print(f"{ok / expected:.4f} {ok} {expected:.0f}")
PY
)
    read -r q ok expected <<<"$ratio"
    printf 'round %s: admitted %s of %s expected: x%s\n' "$r" "$ok" "$expected" "$q"
    RATIOS+=("$q")
done
python3 - "${RATIOS[@]}" <<'PY'
import statistics, sys
v = sorted(float(x) for x in sys.argv[1:])
print(f"admitted/expected: median x{statistics.median(v):.4f} ({v[0]:.4f}-{v[-1]:.4f})")
PY
