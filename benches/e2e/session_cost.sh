#!/usr/bin/env bash
# End-to-end cost of the stateful session filter (gRFC A55): the same
# gateway, cluster and load in three modes, alternating rounds:
#
#   off      no filter; clients carry no cookie (nothing sets one);
#   cookies  no filter; the backends set a cookie of the same name, size and
#            format the filter would (once per session), so requests carry
#            the same `cookie` header as with the filter on: this isolates
#            what the filter itself costs from what carrying a per-session
#            cookie through the proxy costs (HPACK, header copies);
#   on       the filter: every request after a session's first carries its
#            cookie; the gateway finds and decodes it (Envoy's format),
#            looks the host up in the host map and skips the policy.
#
# All runs use `loadgen --sessions N` (each virtual session keeps a cookie
# jar), so the load generator's own work is the same. Reported per round and as medians: req/s, p99, and the gateway's
# CPU-µs per request (utime+stime from /proc over the measured window),
# which is the figure that compares the two on a shared machine; plus the
# affinity breaks loadgen saw (must be 0 with the filter on).
#
# Layout (2-core machine): gateway alone on CPU 1; three demo backends and
# the load generator share CPU 0.
#
# Usage: benches/e2e/session_cost.sh [--rounds N] [--duration S] [-c N] [-m N]
#        [--sessions N] [--no-build]
set -euo pipefail

ROUNDS=3
DURATION=5
CONNS=16
STREAMS=32
SESSIONS=512
BUILD=1
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) ROUNDS=$2; shift ;;
        --duration) DURATION=$2; shift ;;
        -c) CONNS=$2; shift ;;
        -m) STREAMS=$2; shift ;;
        --sessions) SESSIONS=$2; shift ;;
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

# The cookie the filter writes for ADDR (Envoy's format, ttl 3600 s).
envoy_cookie() {
    python3 - "$1" <<'PY'
import base64, sys, time
addr = sys.argv[1].encode()
def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out
msg = b"\x0a" + varint(len(addr)) + addr + b"\x10" + varint(int(time.time()) + 3600)
print('session="%s"; Max-Age=3600; Path=/; HttpOnly' % base64.b64encode(msg).decode())
PY
}

PLAIN=()
COOKIE_SETTING=()
for i in 1 2 3; do
    port=$(free_port)
    taskset -c 0 "$BIN/demo-backend" --listen "127.0.0.1:$port" --name "b$i" --cpu 0 \
        >"$WORK/backend$i.log" 2>&1 &
    PIDS+=($!)
    wait_listen "$port" $!
    PLAIN+=("$port")
    port=$(free_port)
    taskset -c 0 "$BIN/demo-backend" --listen "127.0.0.1:$port" --name "c$i" --cpu 0 \
        --set-cookie-once "$(envoy_cookie "127.0.0.1:$port")" >"$WORK/cbackend$i.log" 2>&1 &
    PIDS+=($!)
    wait_listen "$port" $!
    COOKIE_SETTING+=("$port")
done

# $1: on | off | cookies; writes the config and prints nothing.
write_config() {
    local filter=""
    local -a BACKENDS=("${PLAIN[@]}")
    if [ "$1" = cookies ]; then BACKENDS=("${COOKIE_SETTING[@]}"); fi
    if [ "$1" = on ]; then
        filter='
          - name: envoy.filters.http.stateful_session
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.stateful_session.v3.StatefulSession
              session_state:
                name: envoy.http.stateful_session.cookie
                typed_config:
                  "@type": type.googleapis.com/envoy.extensions.http.stateful_session.cookie.v3.CookieBasedSessionState
                  cookie: { name: session, path: /, ttl: 3600s }'
    fi
    cat >"$WORK/gateway-$1.yaml" <<EOF
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
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: "/" }
                route: { cluster: backends }
          http_filters:$filter
          - name: envoy.filters.http.router
            typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
  clusters:
  - name: backends
    type: STATIC
    lb_policy: LEAST_REQUEST
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: { http2_protocol_options: {} }
    load_assignment:
      cluster_name: backends
      endpoints:
      - lb_endpoints:
        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: ${BACKENDS[0]} } } }
        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: ${BACKENDS[1]} } } }
        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: ${BACKENDS[2]} } } }
EOF
}

# $1: on|off → prints "rps p99_us cpu_us_per_req broken"
run_one() {
    PORT=$(free_port)
    write_config "$1"
    taskset -c 1 "$BIN/gateway" --config "$WORK/gateway-$1.yaml" --shards 1 --cpu-list 1 \
        --log warn >"$WORK/gateway-$1.log" 2>&1 &
    local gw=$!
    PIDS+=("$gw")
    wait_listen "$PORT" "$gw"
    # Warm-up outside the measured window (connections, sessions, pools).
    taskset -c 0 "$BIN/loadgen" -t 1 -c "$CONNS" -m "$STREAMS" --sessions "$SESSIONS" \
        --warmup 0s -d 1s "http://127.0.0.1:$PORT/" >/dev/null 2>&1
    local t0 t1
    t0=$(cpu_ticks "$gw")
    taskset -c 0 "$BIN/loadgen" -t 1 -c "$CONNS" -m "$STREAMS" --sessions "$SESSIONS" \
        --warmup 0s -d "${DURATION}s" --json "http://127.0.0.1:$PORT/" >"$WORK/out.json" 2>/dev/null
    t1=$(cpu_ticks "$gw")
    kill "$gw"
    wait "$gw" 2>/dev/null || true
    python3 - "$WORK/out.json" "$((t1 - t0))" "$CLK_TCK" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ticks, hz = int(sys.argv[2]), int(sys.argv[3])
n = d.get("requests") or d.get("completed") or 0
rps = d.get("rps") or d.get("req_per_sec") or 0
lat = d.get("latency_us") or d.get("latency") or {}
p99 = lat.get("p99", 0)
s = d.get("sessions") or {}
cpu = ticks / hz * 1e6 / n if n else float("nan")
print(f"{rps:.0f} {p99} {cpu:.2f} {s.get('broken', 'n/a')}")
PY
}

printf '%-6s %-8s %10s %10s %14s %8s\n' round mode req/s p99_us cpu_us/req broken
RESULTS=()
for r in $(seq "$ROUNDS"); do
    for mode in off cookies on; do
        read -r rps p99 cpu broken < <(run_one "$mode")
        printf '%-6s %-8s %10s %10s %14s %8s\n' "$r" "$mode" "$rps" "$p99" "$cpu" "$broken"
        RESULTS+=("$r $mode $rps $cpu")
    done
done
python3 - "${RESULTS[@]}" <<'PY'
import statistics, sys
rows = [a.split() for a in sys.argv[1:]]
by = {}
for r, mode, rps, cpu in rows:
    by.setdefault(mode, {})[r] = (float(rps), float(cpu))
def med(mode, k):
    return statistics.median(v[k] for v in by[mode].values())
def ratio(a, b, k):
    # Per-round ratios (the machine's speed drifts between rounds), then the median.
    return statistics.median(by[a][r][k] / by[b][r][k] for r in by[a])
for mode in ("off", "cookies", "on"):
    print(f"median {mode:8} req/s {med(mode,0):8.0f}  cpu-us/req {med(mode,1):6.2f}")
for a, b in (("on", "off"), ("on", "cookies"), ("cookies", "off")):
    print(f"{a}/{b:8} req/s x{ratio(a,b,0):.3f}  cpu-us/req x{ratio(a,b,1):.3f}  (median of per-round ratios)")
PY
