#!/usr/bin/env bash
# WebSocket through the gateway and through HAProxy 2.6, in the same run:
# an HTTP/1.1 upgrade forwarded to a WebSocket echo backend, then a byte
# tunnel (gateway: `upgrade_configs: [{ upgrade_type: websocket }]` on the
# connection manager; HAProxy: `mode http`, which tunnels a 101 by itself,
# `timeout tunnel 1h`).
#
# Load: per round, per proxy (the order alternates each round), the proxy
# is started alone on CPU 1 (gateway --shards 1 --cpu-list 1; HAProxy one
# thread, cpu-map), then benches' ws_load on CPU 0 opens C WebSockets
# through it to benches' ws_echo (also on CPU 0) and runs request/response
# ping-pong on each (one masked binary message of B bytes, wait for its
# echo, again) for a warm-up second, then the measured window. Reported per
# round: messages/s, p50/p99 round trip, the proxy's CPU-µs per message
# (utime+stime from /proc/PID/stat, read by ws_load at the window's start
# and end, ÷ round trips completed in it) and its CPU use over the window;
# then medians, ranges and gateway ÷ HAProxy ratios (median of the
# per-round ratios). ws_load and ws_echo share CPU 0: first, once, they run
# alone (ws_load straight to ws_echo, no proxy), which gives the most
# msgs/s CPU 0 can drive; the cpu0 column is their CPU use in each round
# (CPU 0's time, as a share of one CPU). When a proxy's rate comes near
# that ceiling, msgs/s and latency measure CPU 0 as much as the proxy, and
# CPU-µs per message (with the proxy near 100 %) is the figure that
# compares the proxies.
#
# Idle: per proxy, after a 1 s load as warm-up and 2 s of quiet, VmRSS of
# the proxy; ws_load --idle opens N WebSockets (one message echoed on each),
# and 2 s after they are all open (the gateway's tunnels give back their
# buffers after 1 s quiet) VmRSS again: (after - before) / N = bytes per
# idle tunnel (a client socket, a backend socket and the proxy's state).
# Each tunnel costs the proxy 2 descriptors: N = 10,000 would need 20,000
# plus its own, over this machine's hard limit (ulimit -Hn, 20000), hence
# the default of 9000; the soft limit is raised to the hard one, and an N
# that does not fit is refused.
#
# Usage: benches/e2e/websocket.sh [--rounds N] [--duration S] [--conns C]
#        [--size B] [--idle N] [--warmup S] [--no-build]
#   --rounds N     load rounds, each runs both proxies           [7]
#   --duration S   measured seconds per run                      [10]
#   --conns C      WebSockets doing ping-pong                    [50]
#   --size B       message payload bytes                         [128]
#   --idle N       idle WebSockets per proxy (0: no idle test)   [9000]
#   --warmup S     warm-up seconds before each window            [1]
#   --no-build     use target/release as it is
# Default run: about 3 minutes (without the build).
set -euo pipefail

ROUNDS=7
DURATION=10
CONNS=50
SIZE=128
IDLE=9000
WARMUP=1
BUILD=1
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) ROUNDS=$2; shift ;;
        --duration) DURATION=$2; shift ;;
        --conns) CONNS=$2; shift ;;
        --size) SIZE=$2; shift ;;
        --idle) IDLE=$2; shift ;;
        --warmup) WARMUP=$2; shift ;;
        --no-build) BUILD=0 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "websocket.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$ROOT/target/release
PROXY_CPU=1
LOAD_CPU=0
# The proxy's descriptors besides the tunnels' (listeners, io_uring, logs).
FD_SPARE=200
# Seconds idle tunnels are held; the measurement is 2 s after they are open.
IDLE_HOLD=4

if [ "$BUILD" = 1 ]; then
    (cd "$ROOT" && cargo build --release -q -p gateway -p benches --bin gateway --bin ws_load --bin ws_echo)
fi
for b in gateway ws_load ws_echo; do
    [ -x "$BIN/$b" ] || { echo "websocket.sh: $BIN/$b is missing (run without --no-build)" >&2; exit 1; }
done
HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)
[ -x "$HAPROXY" ] || { echo "websocket.sh: haproxy not found" >&2; exit 1; }

ulimit -n "$(ulimit -Hn)"
if [ "$IDLE" -gt 0 ] && [ $((2 * IDLE + FD_SPARE)) -gt "$(ulimit -n)" ]; then
    echo "websocket.sh: --idle $IDLE needs $((2 * IDLE + FD_SPARE)) descriptors in the proxy (2 per tunnel + $FD_SPARE); the limit is $(ulimit -n): at most --idle $((($(ulimit -n) - FD_SPARE) / 2))" >&2
    exit 2
fi

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$ROOT/benches/e2e/lib.sh"

WORK=$(mktemp -d -t websocket-bench.XXXXXX)
PIDS=()
cleanup() {
    set +e
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    sleep 0.3
    for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Drops $1 from PIDS (it ended: never signal a reused id).
forget() {
    local keep=() p
    for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
    PIDS=("${keep[@]}")
}

# Stops process $1: TERM, then KILL after 3 s.
stop_pid() {
    if kill "$1" 2>/dev/null; then
        for _ in $(seq 60); do
            kill -0 "$1" 2>/dev/null || break
            sleep 0.05
        done
        kill -KILL "$1" 2>/dev/null || true
    fi
    wait "$1" 2>/dev/null || true
    forget "$1"
}

# Waits for a line matching $2 in file $1 written by process $3 (10 s).
wait_line() {
    for _ in $(seq 200); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        kill -0 "$3" 2>/dev/null || { echo "process $3 died; its output:" >&2; cat "$1" >&2; return 1; }
        sleep 0.05
    done
    echo "no line matching '$2' in $1 after 10 s:" >&2
    cat "$1" >&2
    return 1
}

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# A value of the ws_load output $1: line starting with $2, KEY=VALUE $3.
field() {
    awk -v p="$2" -v k="$3" '$1 == p { for (i = 2; i <= NF; i++) { split($i, a, "="); if (a[1] == k) print a[2] } }' "$1"
}

# ---------------------------------------------------------------- backend
taskset -c "$LOAD_CPU" "$BIN/ws_echo" --listen 127.0.0.1:0 --cpu "$LOAD_CPU" >"$WORK/echo.log" 2>&1 &
ECHO_PID=$!
PIDS+=("$ECHO_PID")
wait_line "$WORK/echo.log" '^listening on ' "$ECHO_PID"
ECHO_ADDR=$(sed -n 's/^listening on //p' "$WORK/echo.log")
ECHO_PORT=${ECHO_ADDR##*:}

# ---------------------------------------------------------------- proxies
# The gateway's bootstrap. Each WebSocket holds an upstream connection of
# its own, and a cluster's circuit breakers default to Envoy's 1024
# connections (the 1025th upgrade gets a 503, "overflow"): raised here, as
# HAProxy's maxconn is, so that the idle test's N tunnels fit.
write_gateway_bootstrap() { # file
    cat >"$1" <<EOF
admin: { address: { socket_address: { address: 127.0.0.1, port_value: 0 } } }
static_resources:
  listeners:
  - name: ingress
    address: { socket_address: { address: 127.0.0.1, port_value: 0 } }
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          stream_idle_timeout: 300s
          upgrade_configs: [{ upgrade_type: websocket }]
          route_config:
            name: ws
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: "/" }
                route: { cluster: ws_echo }
          http_filters:
          - name: envoy.filters.http.router
            typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
  clusters:
  - name: ws_echo
    type: STATIC
    connect_timeout: 1s
    circuit_breakers:
      thresholds:
      - { max_connections: 1000000, max_pending_requests: 1000000, max_requests: 1000000 }
    load_assignment:
      cluster_name: ws_echo
      endpoints:
      - lb_endpoints:
        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: $ECHO_PORT } } }
EOF
}

# HAProxy's own: lib.sh's write_haproxy_cfg is for h2 backends and
# keep-alive request timeouts; a WebSocket wants plain HTTP/1.1 to the
# backend and `timeout tunnel` once upgraded.
write_haproxy_ws_cfg() { # file, port
    cat >"$1" <<EOF
global
    nbthread 1
    cpu-map auto:1/1 $PROXY_CPU
    maxconn $((IDLE + CONNS + 100))
    log stdout format raw local0 emerg

defaults
    mode http
    timeout connect 5s
    timeout client 300s
    timeout server 300s
    timeout http-request 10s
    timeout tunnel 1h

frontend fe
    bind 127.0.0.1:$2
    maxconn $((IDLE + CONNS + 100))
    default_backend be

backend be
    server echo $ECHO_ADDR
EOF
}

PROXY_PID=
PROXY_ADDR=
start_proxy() { # target
    case $1 in
        gateway)
            write_gateway_bootstrap "$WORK/gateway.yaml"
            taskset -c "$PROXY_CPU" "$BIN/gateway" --config "$WORK/gateway.yaml" --shards 1 \
                --cpu-list "$PROXY_CPU" --log warn --drain-time-s 1 >"$WORK/gateway.log" 2>&1 &
            PROXY_PID=$!
            PIDS+=("$PROXY_PID")
            wait_line "$WORK/gateway.log" '^listener ingress on ' "$PROXY_PID"
            PROXY_ADDR=$(sed -n 's/^listener ingress on //p' "$WORK/gateway.log" | head -1)
            ;;
        haproxy)
            local port
            port=$(free_port)
            write_haproxy_ws_cfg "$WORK/haproxy.cfg" "$port"
            taskset -c "$PROXY_CPU" "$HAPROXY" -db -f "$WORK/haproxy.cfg" >"$WORK/haproxy.log" 2>&1 &
            PROXY_PID=$!
            PIDS+=("$PROXY_PID")
            wait_listen "$port" "$PROXY_PID"
            PROXY_ADDR=127.0.0.1:$port
            ;;
    esac
}

# Prints the proxy's log and fails.
proxy_failed() { # target, what
    echo "websocket.sh: $1: $2" >&2
    echo "--- $1 log (tail)" >&2
    tail -20 "$WORK/$1.log" >&2 || true
    exit 1
}

# ---------------------------------------------------------------- load
RESULTS=$WORK/results.tsv
: >"$RESULTS"
load_run() { # round, target
    local out=$WORK/load-$1-$2.out err=$WORK/load-$1-$2.err
    start_proxy "$2"
    if ! taskset -c "$LOAD_CPU" "$BIN/ws_load" --target "$PROXY_ADDR" --conns "$CONNS" --size "$SIZE" \
        --duration "$DURATION" --warmup "$WARMUP" --cpu "proxy=$PROXY_PID" --cpu "echo=$ECHO_PID" \
        >"$out" 2>"$err"; then
        cat "$out" "$err" >&2
        proxy_failed "$2" "round $1: ws_load failed"
    fi
    stop_pid "$PROXY_PID"
    local rate p50 p99 msgs errors cpu util cpu0
    rate=$(field "$out" result rate)
    p50=$(field "$out" result p50_us)
    p99=$(field "$out" result p99_us)
    msgs=$(field "$out" result msgs)
    errors=$(field "$out" result errors)
    cpu=$(field "$out" cpu_us_per_msg proxy)
    util=$(field "$out" cpu_util proxy)
    cpu0=$(awk -v e="$(field "$out" cpu_util echo)" -v l="$(field "$out" cpu_util load)" \
        'BEGIN { printf "%.0f%%", (e + l) * 100 }')
    printf '%-5s %-8s %9s %9s %9s %12s %7s %7s %7s\n' "$1" "$2" "$rate" "$p50" "$p99" "$cpu" \
        "$(awk -v u="$util" 'BEGIN { printf "%.0f%%", u * 100 }')" "$cpu0" "$errors"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$rate" "$p50" "$p99" "$cpu" "$util" "$msgs" >>"$RESULTS"
}

# ---------------------------------------------------------------- idle
IDLE_RESULTS=$WORK/idle.tsv
: >"$IDLE_RESULTS"
idle_run() { # target
    local out=$WORK/idle-$1.out err=$WORK/idle-$1.err port before after down up lp rc=0
    start_proxy "$1"
    port=${PROXY_ADDR##*:}
    # Warm-up: the same load as the rounds, for a second.
    taskset -c "$LOAD_CPU" "$BIN/ws_load" --target "$PROXY_ADDR" --conns "$CONNS" --size "$SIZE" \
        --duration 1 --warmup 0 >"$out" 2>"$err" || { cat "$out" "$err" >&2; proxy_failed "$1" "idle warm-up failed"; }
    sleep 2
    before=$(rss_kb "$PROXY_PID")
    taskset -c "$LOAD_CPU" "$BIN/ws_load" --target "$PROXY_ADDR" --idle "$IDLE" --hold "$IDLE_HOLD" \
        --size "$SIZE" >"$out" 2>"$err" &
    lp=$!
    PIDS+=("$lp")
    for _ in $(seq 1200); do
        grep -q '^idle .* open' "$out" && break
        kill -0 "$lp" 2>/dev/null || break
        sleep 0.05
    done
    if ! grep -q '^idle .* open' "$out"; then
        cat "$out" "$err" >&2
        proxy_failed "$1" "ws_load --idle $IDLE did not open its WebSockets"
    fi
    sleep 2
    after=$(rss_kb "$PROXY_PID")
    down=$(ss -Htn state established "( sport = :$port )" | wc -l)
    up=$(ss -Htn state established "( dport = :$ECHO_PORT )" | wc -l)
    wait "$lp" || rc=$?
    forget "$lp"
    [ "$rc" = 0 ] || { cat "$out" "$err" >&2; proxy_failed "$1" "ws_load --idle exited $rc"; }
    stop_pid "$PROXY_PID"
    local per=$(((after - before) * 1024 / IDLE))
    printf '%-8s %9s %9s %9s %9s %9s  %s\n' "$1" "$before" "$after" "$down" "$up" "$per" "$(sed -n 's/^idle \(.* open\)/\1/p' "$out")"
    printf '%s\t%s\t%s\t%s\n' "$1" "$before" "$after" "$per" >>"$IDLE_RESULTS"
}

# ---------------------------------------------------------------- run
echo "websocket.sh at $(commit_label), $(date -u +%F): $ROUNDS rounds, ${WARMUP}s warm-up + ${DURATION}s measured, $CONNS conns ping-pong, $SIZE-byte messages, idle $IDLE"
echo "machine: $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)); proxy alone on CPU $PROXY_CPU, ws_echo + ws_load on CPU $LOAD_CPU; $("$HAPROXY" -v | head -1 | cut -d' ' -f1-3); backend $ECHO_ADDR"
# CPU 0 alone: the load side's ceiling.
out=$WORK/direct.out
taskset -c "$LOAD_CPU" "$BIN/ws_load" --target "$ECHO_ADDR" --conns "$CONNS" --size "$SIZE" \
    --duration "$DURATION" --warmup "$WARMUP" --cpu "echo=$ECHO_PID" >"$out" 2>"$WORK/direct.err" ||
    { cat "$out" "$WORK/direct.err" >&2; echo "websocket.sh: ws_load straight to ws_echo failed" >&2; exit 1; }
echo "CPU 0 alone (ws_load straight to ws_echo, no proxy): $(field "$out" result rate) msgs/s, p50 $(field "$out" result p50_us) µs, p99 $(field "$out" result p99_us) µs: the most msgs/s this layout can show"
echo
printf '%-5s %-8s %9s %9s %9s %12s %7s %7s %7s\n' round target msgs/s p50_us p99_us proxy_us/msg proxy% cpu0% errors
TARGETS=(gateway haproxy)
for round in $(seq "$ROUNDS"); do
    for i in 0 1; do
        load_run "$round" "${TARGETS[$(((i + round - 1) % 2))]}"
    done
done

if [ "$IDLE" -gt 0 ]; then
    echo
    echo "idle: $IDLE WebSockets per proxy, each with one $SIZE-byte message echoed, held quiet 2 s"
    printf '%-8s %9s %9s %9s %9s %9s  %s\n' target rss0_kB rss1_kB down_est up_est B/tunnel opening
    for t in gateway haproxy; do idle_run "$t"; done
fi

echo
python3 - "$RESULTS" "$IDLE_RESULTS" <<'PY'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().splitlines()]
by = {}
for r, t, rate, p50, p99, cpu, util, msgs in rows:
    by.setdefault(t, {})[r] = dict(rate=float(rate), p50=float(p50), p99=float(p99), cpu=float(cpu), util=float(util))
names = [("rate", "msgs/s", "{:.0f}"), ("p50", "p50 µs", "{:.0f}"), ("p99", "p99 µs", "{:.0f}"),
         ("cpu", "proxy CPU-µs/msg", "{:.2f}"), ("util", "proxy CPU use", "{:.2f}")]
def rng(v, f):
    return f"{f.format(min(v))}–{f.format(max(v))}"
print(f"{'summary':18} " + "  ".join(f"{t + ' median (range)':>28}" for t in by))
for k, label, f in names:
    cells = []
    for t in by:
        v = [x[k] for x in by[t].values()]
        cells.append(f"{f.format(statistics.median(v)) + ' (' + rng(v, f) + ')':>28}")
    print(f"{label:18} " + "  ".join(cells))
if "gateway" in by and "haproxy" in by:
    print()
    g, h = by["gateway"], by["haproxy"]
    for k, label, _ in names[:4]:
        ratios = [g[r][k] / h[r][k] for r in g if r in h and h[r][k]]
        print(f"gateway ÷ HAProxy {label:17} x{statistics.median(ratios):.3f} ({min(ratios):.3f}–{max(ratios):.3f}; median of {len(ratios)} per-round ratios)")
idle = {t: (int(b), int(a), int(p)) for t, b, a, p in (l.split("\t") for l in open(sys.argv[2]).read().splitlines())}
if idle:
    print()
    for t, (b, a, p) in idle.items():
        print(f"idle {t:8} RSS {b} -> {a} kB: {p} bytes per idle tunnel")
    if "gateway" in idle and "haproxy" in idle and idle["haproxy"][2] > 0:
        print(f"gateway ÷ HAProxy bytes per idle tunnel x{idle['gateway'][2] / idle['haproxy'][2]:.2f}")
PY
