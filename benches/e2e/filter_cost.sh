#!/usr/bin/env bash
# What the edge's HTTP filters cost when they are configured but let a
# request pass (issue 30's target: <= 3 % CPU per request each). The same
# bootstrap, run by the gateway and by Envoy 1.40, in two modes,
# alternating within each round:
#
#   bare     the route forwards, the router alone;
#   filters  the same route behind fault (no fault for this request),
#            health check (another path), RBAC (ALLOW, a policy that takes
#            it), CORS (a policy; no Origin), CSRF (a GET), local rate limit
#            (a bucket it never empties), a gzip compressor (the answer
#            is below min_content_length), ext_authz (disabled for the
#            route), gRPC-Web (not a gRPC-Web request), and the connection
#            manager's tracing (OpenTelemetry, random_sampling 0: each
#            request's context is made and sent upstream, no span): every
#            filter runs its request and response hooks and does nothing.
#
# The requests carry `accept-encoding: gzip, br` (so the compressor
# negotiates). Reported per round and as medians: req/s, p99 and the
# proxy's CPU-µs per request (utime+stime from /proc over the measured
# window), then the filters/bare ratio of each proxy (median of per-round
# ratios); the per-filter share is that ratio's excess over the 10 filters.
# Envoy runs with --concurrency 1; both alone on CPU 1, backends and
# loadgen on CPU 0.
#
# Usage: benches/e2e/filter_cost.sh [--rounds N] [--duration S] [-c N] [-m N]
#        [--targets "gateway envoy"] [--no-build]
set -euo pipefail

ROUNDS=5
DURATION=5
CONNS=16
STREAMS=32
TARGETS="gateway envoy"
BUILD=1
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) ROUNDS=$2; shift ;;
        --duration) DURATION=$2; shift ;;
        -c) CONNS=$2; shift ;;
        -m) STREAMS=$2; shift ;;
        --targets) TARGETS=$2; shift ;;
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
case " $TARGETS " in *" envoy "*) ENVOY_BIN=$(find_envoy) ;; esac

BACKENDS=()
for i in 1 2 3; do
    port=$(free_port)
    taskset -c 0 "$BIN/demo-backend" --listen "127.0.0.1:$port" --name "b$i" --cpu 0 \
        >"$WORK/backend$i.log" 2>&1 &
    PIDS+=($!)
    wait_listen "$port" $!
    BACKENDS+=("$port")
done

# $1: bare | filters; $2: the admin port. Writes $WORK/$1.yaml for $PORT.
write_config() {
    local per_route=""
    local filters=""
    local tracing=""
    if [ "$1" = filters ]; then
        per_route='
                typed_per_filter_config:
                  envoy.filters.http.cors:
                    "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy
                    allow_origin_string_match: [ { exact: "https://app.example" } ]
                  envoy.filters.http.ext_authz:
                    "@type": type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute
                    disabled: true'
        tracing='
          tracing:
            random_sampling: { value: 0 }
            provider:
              name: envoy.tracers.opentelemetry
              typed_config:
                "@type": type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig
                grpc_service: { envoy_grpc: { cluster_name: backends }, timeout: 1s }
                service_name: bench'
        filters='
          - name: envoy.filters.http.ext_authz
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz
              grpc_service: { envoy_grpc: { cluster_name: backends }, timeout: 0.25s }
              transport_api_version: V3
          - name: envoy.filters.http.grpc_web
            typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.grpc_web.v3.GrpcWeb }
          - name: envoy.filters.http.fault
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault
              abort: { http_status: 503, percentage: { numerator: 0, denominator: HUNDRED } }
          - name: envoy.filters.http.health_check
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.health_check.v3.HealthCheck
              pass_through_mode: false
              headers: [ { name: ":path", string_match: { exact: /healthz } } ]
          - name: envoy.filters.http.rbac
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC
              rules:
                action: ALLOW
                policies:
                  everyone:
                    permissions: [ { url_path: { path: { prefix: / } } } ]
                    principals: [ { direct_remote_ip: { address_prefix: 127.0.0.0, prefix_len: 8 } } ]
          - name: envoy.filters.http.cors
            typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors }
          - name: envoy.filters.http.csrf
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.csrf.v3.CsrfPolicy
              filter_enabled: { default_value: { numerator: 100, denominator: HUNDRED } }
          - name: envoy.filters.http.local_ratelimit
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit
              stat_prefix: rl
              token_bucket: { max_tokens: 1000000000, tokens_per_fill: 1000000000, fill_interval: 1s }
              filter_enabled: { default_value: { numerator: 100, denominator: HUNDRED } }
              filter_enforced: { default_value: { numerator: 100, denominator: HUNDRED } }
          - name: envoy.filters.http.compressor
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.compressor.v3.Compressor
              compressor_library:
                name: gzip
                typed_config: { "@type": type.googleapis.com/envoy.extensions.compression.gzip.compressor.v3.Gzip }'
    fi
    cat >"$WORK/$1.yaml" <<EOF
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
          stat_prefix: ingress$tracing
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: "/" }
                route: { cluster: backends }$per_route
          http_filters:$filters
          - name: envoy.filters.http.router
            typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
  clusters:
  - name: backends
    type: STATIC
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

# $1: target, $2: mode → prints "rps p99_us cpu_us_per_req"
run_one() {
    PORT=$(free_port)
    write_config "$2" "$(free_port)"
    if [ "$1" = envoy ]; then
        taskset -c 1 "$ENVOY_BIN" -c "$WORK/$2.yaml" --concurrency 1 --base-id 71 \
            -l error >"$WORK/envoy-$2.log" 2>&1 &
    else
        taskset -c 1 "$BIN/gateway" --config "$WORK/$2.yaml" --shards 1 --cpu-list 1 \
            --log warn >"$WORK/gateway-$2.log" 2>&1 &
    fi
    local pid=$!
    PIDS+=("$pid")
    wait_listen "$PORT" "$pid"
    # Warm-up outside the measured window (connections, pools).
    taskset -c 0 "$BIN/loadgen" -t 1 -c "$CONNS" -m "$STREAMS" --warmup 0s -d 1s \
        -H "accept-encoding: gzip, br" "http://127.0.0.1:$PORT/" >/dev/null 2>&1
    # The filters really run (a bench of a config that does nothing
    # measures nothing): the health check filter answers its path, and
    # the compressor negotiated (vary on the small answer).
    if [ "$2" = filters ] && ! curl -s -o /dev/null -w '%{http_code}' --http2-prior-knowledge \
        "http://127.0.0.1:$PORT/healthz" | grep -q '^200$'; then
        echo "$1 did not run the health check filter" >&2
        return 1
    fi
    local t0 t1
    t0=$(cpu_ticks "$pid")
    taskset -c 0 "$BIN/loadgen" -t 1 -c "$CONNS" -m "$STREAMS" --warmup 0s -d "${DURATION}s" \
        -H "accept-encoding: gzip, br" --json "http://127.0.0.1:$PORT/" >"$WORK/out.json" 2>/dev/null
    t1=$(cpu_ticks "$pid")
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    python3 - "$WORK/out.json" "$((t1 - t0))" "$CLK_TCK" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ticks, hz = int(sys.argv[2]), int(sys.argv[3])
n = d.get("requests") or d.get("completed") or 0
rps = d.get("rps") or d.get("req_per_sec") or 0
p99 = (d.get("latency_us") or d.get("latency") or {}).get("p99", 0)
print(f"{rps:.0f} {p99} {ticks / hz * 1e6 / n if n else float('nan'):.2f}")
PY
}

echo "filter_cost at $(commit_label), $(date -u +%F): rounds $ROUNDS, ${DURATION}s, -c$CONNS -m$STREAMS, targets: $TARGETS"
printf '%-6s %-8s %-8s %10s %10s %12s\n' round target mode req/s p99_us cpu_us/req
RESULTS=()
for r in $(seq "$ROUNDS"); do
    for t in $TARGETS; do
        for mode in bare filters; do
            read -r rps p99 cpu < <(run_one "$t" "$mode")
            printf '%-6s %-8s %-8s %10s %10s %12s\n' "$r" "$t" "$mode" "$rps" "$p99" "$cpu"
            RESULTS+=("$r $t $mode $rps $cpu")
        done
    done
done
python3 - "${RESULTS[@]}" <<'PY'
import statistics, sys
by = {}
for a in sys.argv[1:]:
    r, t, mode, rps, cpu = a.split()
    by.setdefault((t, mode), {})[r] = (float(rps), float(cpu))
for t in dict.fromkeys(k[0] for k in by):
    for mode in ("bare", "filters"):
        v = by[(t, mode)].values()
        print(f"median {t:8} {mode:8} req/s {statistics.median(x[0] for x in v):8.0f}  cpu-us/req {statistics.median(x[1] for x in v):6.2f}")
    h, b = by[(t, "filters")], by[(t, "bare")]
    ratios = sorted(h[r][1] / b[r][1] for r in h)
    m = statistics.median(ratios)
    print(f"{t}: filters/bare cpu-us/req x{m:.3f} ({ratios[0]:.3f}-{ratios[-1]:.3f}), per-round ratios' median; per filter +{(m - 1) / 10 * 100:.1f} %")
PY
