#!/usr/bin/env bash
# What compressing responses costs each proxy, and what it gains (issue
# 30: gzip, brotli and zstd CPU per MB and ratio against Envoy's and
# nginx's, on the same bodies and levels). One body, 1 MiB of this
# repository's Rust sources (text, as an edge serves), from an nginx origin
# that does not compress; in front of it, in turn and alternating within
# each round:
#
#   gateway  the compressor filter with the library's Envoy defaults
#            (gzip level 6, window 12, memory 5; brotli quality 3, window 18;
#            zstd level 3), the same bootstrap as
#   envoy    Envoy 1.40 (--concurrency 1);
#   nginx    nginx (1.22 here) as the compressing proxy: gzip_comp_level 6 (its
#            window 15, memory 8) and the brotli filter module at quality 3;
#            it has no zstd.
#
# Each proxy alone on CPU 1 (one shard / one worker); the origin and h2load
# on CPU 0. h2load fetches the body N times over 4 connections with
# `accept-encoding: <coding>`; reported: the proxy's CPU-ms per MiB of
# body compressed (utime+stime over the fetches, less nothing: the
# proxying is included, as the body must be proxied anyway; the `identity`
# row is that floor), and the compressed size (compressed/original).
#
# Usage: benches/e2e/compression_cost.sh [--rounds N] [-n FETCHES]
#        [--targets "gateway envoy nginx"] [--no-build]
set -euo pipefail

ROUNDS=3
FETCHES=200
TARGETS="gateway envoy nginx"
BUILD=1
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) ROUNDS=$2; shift ;;
        -n) FETCHES=$2; shift ;;
        --targets) TARGETS=$2; shift ;;
        --no-build) BUILD=0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$ROOT/target/release
if [ "$BUILD" = 1 ]; then
    (cd "$ROOT" && cargo build --release -q -p gateway --bin gateway)
fi
command -v nginx >/dev/null || apt-get install -y -q nginx libnginx-mod-http-brotli-filter >/dev/null
command -v h2load >/dev/null || apt-get install -y -q nghttp2-client >/dev/null
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
case " $TARGETS " in *" envoy "*) ENVOY_BIN=$(find_envoy) ;; esac

# The body: 1 MiB of the sources, always the same bytes for a commit.
mkdir -p "$WORK/www"
(cd "$ROOT" && git ls-files '*.rs' | sort | xargs cat) >"$WORK/all.txt"
head -c 1048576 "$WORK/all.txt" >"$WORK/www/body.txt"
SIZE=$(stat -c %s "$WORK/www/body.txt")

ORIGIN=$(free_port)
cat >"$WORK/origin.conf" <<EOF
daemon off;
user root;
worker_processes 1;
pid $WORK/origin.pid;
error_log $WORK/origin.err;
events { worker_connections 1024; }
http {
    access_log off;
    types { text/plain txt; }
    server { listen 127.0.0.1:$ORIGIN; root $WORK/www; gzip off; }
}
EOF
taskset -c 0 nginx -c "$WORK/origin.conf" &
PIDS+=($!)
wait_listen "$ORIGIN" $!

# $1: coding (gzip | br | zstd | identity); $2: admin port. Writes
# $WORK/proxy.yaml for $PORT.
write_config() {
    local library
    case "$1" in
        gzip) library='{ "@type": type.googleapis.com/envoy.extensions.compression.gzip.compressor.v3.Gzip }' ;;
        br) library='{ "@type": type.googleapis.com/envoy.extensions.compression.brotli.compressor.v3.Brotli }' ;;
        *) library='{ "@type": type.googleapis.com/envoy.extensions.compression.zstd.compressor.v3.Zstd }' ;;
    esac
    cat >"$WORK/proxy.yaml" <<EOF
admin: { address: { socket_address: { address: 127.0.0.1, port_value: $2 } } }
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
              routes: [ { match: { prefix: "/" }, route: { cluster: origin } } ]
          http_filters:
          - name: envoy.filters.http.compressor
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.compressor.v3.Compressor
              compressor_library: { name: lib, typed_config: $library }
          - name: envoy.filters.http.router
            typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
  clusters:
  - name: origin
    type: STATIC
    load_assignment:
      cluster_name: origin
      endpoints:
      - lb_endpoints:
        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: $ORIGIN } } }
EOF
}

write_nginx() {
    cat >"$WORK/front.conf" <<EOF
daemon off;
user root;
worker_processes 1;
pid $WORK/front.pid;
error_log $WORK/front.err;
load_module /usr/lib/nginx/modules/ngx_http_brotli_filter_module.so;
events { worker_connections 1024; }
http {
    access_log off;
    server {
        listen 127.0.0.1:$PORT http2;
        gzip on; gzip_comp_level 6; gzip_types text/plain; gzip_min_length 30; gzip_proxied any;
        brotli on; brotli_comp_level 3; brotli_types text/plain;
        location / { proxy_pass http://127.0.0.1:$ORIGIN; proxy_http_version 1.1; }
    }
}
EOF
}

# $1: target, $2: coding → prints "cpu_ms_per_mib compressed_ratio", or
# "- -" where the target has no such coding.
run_one() {
    PORT=$(free_port)
    local pid
    case "$1" in
        envoy)
            write_config "$2" "$(free_port)"
            taskset -c 1 "$ENVOY_BIN" -c "$WORK/proxy.yaml" --concurrency 1 --base-id 79 -l error \
                >"$WORK/envoy.log" 2>&1 &
            ;;
        gateway)
            write_config "$2" "$(free_port)"
            taskset -c 1 "$BIN/gateway" --config "$WORK/proxy.yaml" --shards 1 --cpu-list 1 --log warn \
                >"$WORK/gateway.log" 2>&1 &
            ;;
        nginx)
            if [ "$2" = zstd ]; then echo "- -"; return 0; fi
            write_nginx
            taskset -c 1 nginx -c "$WORK/front.conf" &
            ;;
    esac
    pid=$!
    PIDS+=("$pid")
    wait_listen "$PORT" "$pid"
    local url="http://127.0.0.1:$PORT/body.txt"
    local got
    got=$(curl -s --http2-prior-knowledge -H "accept-encoding: $2" -o "$WORK/one" -w '%{size_download}' "$url")
    if [ "$2" != identity ] && ! curl -s -D - -o /dev/null --http2-prior-knowledge -H "accept-encoding: $2" "$url" |
        grep -qi "^content-encoding: $2"; then
        echo "$1 did not compress with $2" >&2
        kill "$pid"; wait "$pid" 2>/dev/null || true
        echo "- -"
        return 0
    fi
    # nginx's master forks the worker that does the work: count both.
    local procs=("$pid")
    if [ "$1" = nginx ]; then mapfile -t procs < <(pgrep -P "$pid"; echo "$pid"); fi
    local t0=0 t1=0 p
    for p in "${procs[@]}"; do t0=$((t0 + $(cpu_ticks "$p"))); done
    taskset -c 0 h2load -n "$FETCHES" -c 4 -m 1 -H "accept-encoding: $2" "$url" >"$WORK/h2load.out" 2>&1
    for p in "${procs[@]}"; do t1=$((t1 + $(cpu_ticks "$p"))); done
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    python3 - "$((t1 - t0))" "$CLK_TCK" "$FETCHES" "$SIZE" "$got" <<'PY'
import sys
ticks, hz, n, size, got = (int(x) for x in sys.argv[1:])
print(f"{ticks / hz * 1e3 / (n * size / 2**20):.2f} {got / size:.4f}")
PY
}

echo "compression_cost at $(commit_label), $(date -u +%F): body $SIZE B of sources, $FETCHES fetches x $ROUNDS rounds, targets: $TARGETS"
printf '%-6s %-8s %-9s %14s %10s\n' round target coding cpu_ms/MiB size
RESULTS=()
for r in $(seq "$ROUNDS"); do
    for c in identity gzip br zstd; do
        for t in $TARGETS; do
            read -r cpu ratio < <(run_one "$t" "$c")
            printf '%-6s %-8s %-9s %14s %10s\n' "$r" "$t" "$c" "$cpu" "$ratio"
            RESULTS+=("$t $c $cpu $ratio")
        done
    done
done
python3 - "${RESULTS[@]}" <<'PY'
import statistics, sys
by = {}
for a in sys.argv[1:]:
    t, c, cpu, ratio = a.split()
    if cpu != "-":
        by.setdefault((t, c), []).append((float(cpu), float(ratio)))
print("medians: cpu-ms per MiB (range), compressed size / original")
for (t, c), v in sorted(by.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    cpus = sorted(x[0] for x in v)
    print(f"  {c:9} {t:8} {statistics.median(cpus):8.2f} ({cpus[0]:.2f}-{cpus[-1]:.2f})  size x{statistics.median(x[1] for x in v):.4f}")
for c in ("gzip", "br", "zstd"):
    g = by.get(("gateway", c))
    for peer in ("envoy", "nginx"):
        p = by.get((peer, c))
        if g and p:
            ratios = sorted(a[0] / b[0] for a, b in zip(g, p))
            print(f"{c}: gateway/{peer} cpu per MiB x{statistics.median(ratios):.3f} ({ratios[0]:.3f}-{ratios[-1]:.3f}), size x{statistics.median(a[1] for a in g) / statistics.median(b[1] for b in p):.3f}")
PY
