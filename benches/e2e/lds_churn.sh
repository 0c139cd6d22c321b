#!/usr/bin/env bash
# Filter-chain updates under load (issue 17): a fixed open-loop rate from the
# bundled loadgen while an LDS file source gets one update per second that
# flips ONE filter chain's route between clusters A and B; the listener's
# other chain stays the same. Checks that no request fails and shows how the
# reconnects the updates cause are spread over time.
#
# Set-up: two demo backends (A, B); the gateway with static clusters A, B
# and `stable` (same backend as A) and a listener from a file
# (`lds_config: { path_config_source }`) on 0.0.0.0:PORT with two chains:
#
#   churn   prefix_ranges 127.0.0.1/32  route / → A, B, A, B, ... (the update)
#   stable  prefix_ranges 127.0.0.2/32  route / → stable (never changes)
#
# loadgen drives http://127.0.0.1:PORT/ (the churn chain) open loop at
# --rate over -c connections; a second, lighter loadgen drives
# http://127.0.0.2:PORT/ (the stable chain), whose connections must not be
# drained. After loadgen's warm-up, the listener file is rewritten once per
# --update-ms (a new file renamed over the old one, version_info 2, 3, ...),
# one update per second of the measured window. Meanwhile the admin /stats
# page is sampled every --sample-ms: gateway_downstream_cx_total (new
# connections), gateway_downstream_cx_active, the LDS accepted/rejected
# counters and gateway_upstream_rq_total per cluster (the A/B split).
#
# Reported (markdown on stdout): requests intended / answered / ok / failed
# per loadgen, latency, LDS updates written / accepted / rejected, new
# connections per second (1 s bins starting at each update), the reconnects'
# timing after their update (share per 100 ms of the second after an
# update, the busiest --sample-ms slice), and the responses' split between A
# and B. Exit status 1 if any request failed, or if an update was rejected
# or not applied (the run measured nothing then); 2 for bad usage.
#
# The gateway runs alone on --proxy-cpus; the backends, both loadgens and
# the sampler share --client-cpus. `gateway --drain-time-s` and
# `--drain-strategy` are passed when the gateway has those flags (spreading
# a drain is issue 17's work); else that is noted in the report and they
# are skipped. A drained connection gets its notice (GOAWAY) at a random
# point of the first (drain time - drain_timeout) seconds, so with the
# HCM's default drain_timeout (5 s) a drain time of 5 s or less tells every
# connection at once: hence --drain-timeout-s, set on both chains.
# Everything started is killed on exit; the whole run is bounded by warm-up
# + duration + 30 s (loadgen) and a few seconds of set-up.
#
# -m is small on purpose: at 125 req/s per connection a stream or two is in
# flight, and loadgen re-dials a closed connection only once each of its
# -m stream slots noticed, at its next scheduled send (up to -m × -c / rate
# seconds: 32 ms here, 128 ms at -m 16), which the latency tail then shows.
#
# COMMIT (environment) labels the report; default: git HEAD, "+dirty" when
# files outside docs/ and benches/e2e/ have uncommitted changes (set it when
# CARGO_TARGET_DIR holds binaries built from another tree).
#
# Usage: benches/e2e/lds_churn.sh [options]
#   --rate N            open-loop req/s on the churn chain       [2000]
#   -c N                loadgen connections on the churn chain   [16]
#   -m N                streams per connection (see below)       [4]
#   --duration S        measured seconds = number of updates     [30]
#   --warmup S          loadgen warm-up before the first update  [2]
#   --update-ms MS      time between two LDS updates             [1000]
#   --sample-ms MS      /stats sampling period                   [100]
#   --stable-rate N     open-loop req/s on the stable chain, 0: none [200]
#   --stable-conns N    connections on the stable chain          [4]
#   --drain-time-s S    gateway --drain-time-s, when it has it   [10]
#   --drain-strategy X  gateway --drain-strategy (gradual | immediate) [gradual]
#   --drain-timeout-s S the chains' HCM drain_timeout            [1]
#   --shards N          gateway data shards                      [1]
#   --proxy-cpus LIST   CPUs of the gateway                      [1]
#   --client-cpus LIST  CPUs of backends, loadgens and sampler   [0]
#   --out DIR           keep logs, loadgen JSON and samples here [none]
#   --no-build          use the existing target/release binaries
#   -h, --help          this text
set -euo pipefail

RATE=2000
CONNS=16
STREAMS=4
DURATION=30
WARMUP=2
UPDATE_MS=1000
SAMPLE_MS=100
STABLE_RATE=200
STABLE_CONNS=4
DRAIN_TIME_S=10
DRAIN_STRATEGY=gradual
DRAIN_TIMEOUT_S=1
SHARDS=1
PROXY_CPUS=1
CLIENT_CPUS=0
OUT_DIR=
BUILD=1
while [ $# -gt 0 ]; do
    case "$1" in
        --rate) RATE=$2; shift ;;
        -c) CONNS=$2; shift ;;
        -m) STREAMS=$2; shift ;;
        --duration) DURATION=$2; shift ;;
        --warmup) WARMUP=$2; shift ;;
        --update-ms) UPDATE_MS=$2; shift ;;
        --sample-ms) SAMPLE_MS=$2; shift ;;
        --stable-rate) STABLE_RATE=$2; shift ;;
        --stable-conns) STABLE_CONNS=$2; shift ;;
        --drain-time-s) DRAIN_TIME_S=$2; shift ;;
        --drain-strategy) DRAIN_STRATEGY=$2; shift ;;
        --drain-timeout-s) DRAIN_TIMEOUT_S=$2; shift ;;
        --shards) SHARDS=$2; shift ;;
        --proxy-cpus) PROXY_CPUS=$2; shift ;;
        --client-cpus) CLIENT_CPUS=$2; shift ;;
        --out) OUT_DIR=$2; shift ;;
        --no-build) BUILD=0 ;;
        -h|--help) awk 'NR > 1 && /^set -euo/ { exit } NR > 1' "$0"; exit 0 ;;
        *) echo "lds_churn.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
for v in RATE CONNS STREAMS DURATION UPDATE_MS SAMPLE_MS STABLE_CONNS SHARDS; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "lds_churn.sh: $v=${!v}: not a positive integer" >&2; exit 2; }
done
for v in WARMUP STABLE_RATE DRAIN_TIME_S DRAIN_TIMEOUT_S; do
    [[ ${!v} =~ ^[0-9]+$ ]] || { echo "lds_churn.sh: $v=${!v}: not an integer" >&2; exit 2; }
done

case $DRAIN_STRATEGY in gradual|immediate) ;; *) echo "lds_churn.sh: --drain-strategy: gradual or immediate" >&2; exit 2 ;; esac

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$ROOT/benches/e2e/lib.sh"
# shellcheck source-path=SCRIPTDIR source=harness.sh
. "$ROOT/benches/e2e/harness.sh"

log() { printf '[lds_churn %s] %s\n' "$(date +%T)" "$*" >&2; }

if [ "$BUILD" = 1 ]; then
    log "building release binaries"
    cargo build --release -q -p gateway -p demo-backend -p loadgen --bin gateway --bin demo-backend --bin loadgen
fi
for b in gateway demo-backend loadgen; do
    [ -x "$BIN/$b" ] || { echo "missing $BIN/$b (build first, or drop --no-build)" >&2; exit 1; }
done
command -v curl >/dev/null || { echo "lds_churn.sh needs curl" >&2; exit 1; }

WORK=$(mktemp -d /tmp/lds_churn.XXXXXX)
PIDS=()
if [ -n "$OUT_DIR" ]; then mkdir -p "$OUT_DIR"; OUT_DIR=$(cd "$OUT_DIR" && pwd); fi
trap cleanup EXIT
trap 'exit 130' INT TERM

# Waits up to 10 s for a line matching $2 in file $1 (process $3 alive);
# prints the line's last field.
await_field() { # file, pattern, pid
    local line
    for _ in $(seq 100); do
        if line=$(grep -m1 -- "$2" "$1" 2>/dev/null); then
            echo "${line##* }"
            return 0
        fi
        kill -0 "$3" 2>/dev/null || break
        sleep 0.1
    done
    echo "no '$2' in $1:" >&2
    cat "$1" >&2
    return 1
}

# ---------------------------------------------------------------- backends
declare -A BACKEND_PORT
for name in A B; do
    port=$(free_port)
    taskset -c "$CLIENT_CPUS" "$BIN/demo-backend" --listen "127.0.0.1:$port" --name "$name" \
        >"$WORK/backend-$name.log" 2>&1 &
    PIDS+=($!)
    wait_listen "$port" $!
    BACKEND_PORT[$name]=$port
done

# ---------------------------------------------------------------- gateway
# A free port on every address (the listener binds 0.0.0.0 so that
# 127.0.0.1 and 127.0.0.2 reach it and select different chains).
PROXY_PORT=$(free_port 0.0.0.0)
cluster() { # name, backend port
    cat <<EOF
  - name: $1
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: { http2_protocol_options: {} }
    load_assignment:
      cluster_name: $1
      endpoints:
      - lb_endpoints:
        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: $2 } } }
EOF
}
{
    cat <<EOF
node: { id: lds-churn, cluster: bench }
admin:
  address: { socket_address: { address: 127.0.0.1, port_value: 0 } }
dynamic_resources:
  lds_config: { path_config_source: { path: $WORK/lds.yaml } }
static_resources:
  clusters:
EOF
    cluster A "${BACKEND_PORT[A]}"
    cluster B "${BACKEND_PORT[B]}"
    cluster stable "${BACKEND_PORT[A]}"
} >"$WORK/bootstrap.yaml"

# One filter chain: name, destination address, cluster.
chain() {
    cat <<EOF
  - name: $1
    filter_chain_match: { prefix_ranges: [{ address_prefix: $2, prefix_len: 32 }] }
    filters:
    - name: envoy.filters.network.http_connection_manager
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
        stat_prefix: $1
        drain_timeout: ${DRAIN_TIMEOUT_S}s
        route_config:
          name: $1
          virtual_hosts:
          - name: all
            domains: ["*"]
            routes:
            - match: { prefix: / }
              route: { cluster: $3 }
        http_filters:
        - name: envoy.filters.http.router
          typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
EOF
}
# The listener file with the churn chain routed to $1; version_info is
# @VERSION@, filled in by the updater.
lds_template() { # cluster
    cat <<EOF
version_info: "@VERSION@"
resources:
- "@type": type.googleapis.com/envoy.config.listener.v3.Listener
  name: ingress
  address: { socket_address: { address: 0.0.0.0, port_value: $PROXY_PORT } }
  filter_chains:
EOF
    chain churn 127.0.0.1 "$1"
    chain stable 127.0.0.2 stable
}
lds_template A >"$WORK/lds-A.tmpl"
lds_template B >"$WORK/lds-B.tmpl"
sed 's/@VERSION@/1/' "$WORK/lds-A.tmpl" >"$WORK/lds.yaml"

GW_ARGS=(--config "$WORK/bootstrap.yaml" --shards "$SHARDS" --cpu-list "$PROXY_CPUS" --log info)
GW_HELP=$("$BIN/gateway" --help 2>/dev/null || true)
DRAIN_NOTE=
if grep -q -- '--drain-time-s' <<<"$GW_HELP"; then
    GW_ARGS+=(--drain-time-s "$DRAIN_TIME_S")
    DRAIN_NOTE="gateway --drain-time-s $DRAIN_TIME_S"
else
    DRAIN_NOTE="gateway has no --drain-time-s (not passed)"
fi
if grep -q -- '--drain-strategy' <<<"$GW_HELP"; then
    GW_ARGS+=(--drain-strategy "$DRAIN_STRATEGY")
    DRAIN_NOTE+=" --drain-strategy $DRAIN_STRATEGY"
else
    DRAIN_NOTE+=", no --drain-strategy (not passed)"
fi
DRAIN_NOTE+="; HCM drain_timeout ${DRAIN_TIMEOUT_S} s"
log "$DRAIN_NOTE"
taskset -c "$PROXY_CPUS" "$BIN/gateway" "${GW_ARGS[@]}" >"$WORK/gateway.log" 2>&1 &
GW_PID=$!
PIDS+=("$GW_PID")
ADMIN=$(await_field "$WORK/gateway.log" "admin on" "$GW_PID")
ADMIN=${ADMIN%/}
wait_listen "$PROXY_PORT" "$GW_PID"
# Both chains answer, from the expected backends, before the load starts.
for dst in 127.0.0.1:A 127.0.0.2:A; do
    got=$(curl -s -m 5 --http2-prior-knowledge -o /dev/null -w '%{http_code} %header{x-backend}' \
        "http://${dst%%:*}:$PROXY_PORT/" 2>/dev/null || true)
    if [ "$got" != "200 ${dst##*:}" ]; then
        echo "lds_churn.sh: http://${dst%%:*}:$PROXY_PORT/ answered '$got', not '200 ${dst##*:}'" >&2
        cat "$WORK/gateway.log" >&2
        exit 1
    fi
done
log "gateway on 0.0.0.0:$PROXY_PORT (admin $ADMIN), backends A :${BACKEND_PORT[A]}, B :${BACKEND_PORT[B]}"

# ---------------------------------------------------------------- the run
# Bounded: loadgen gets its own timeout; the sampler stops at the same time.
LIMIT=$((WARMUP + DURATION + 30))
LG_COMMON=(-t 1 -m "$STREAMS" --warmup "${WARMUP}s" -d "${DURATION}s" --json -q)
log "load: $RATE req/s open loop, -c $CONNS -m $STREAMS on the churn chain; stable chain: ${STABLE_RATE} req/s, -c $STABLE_CONNS; warm-up ${WARMUP} s, $DURATION s measured, one update per ${UPDATE_MS} ms"
T0=$EPOCHREALTIME
timeout "$LIMIT" taskset -c "$CLIENT_CPUS" "$BIN/loadgen" "${LG_COMMON[@]}" -c "$CONNS" --rate "$RATE" \
    "http://127.0.0.1:$PROXY_PORT/" >"$WORK/loadgen-churn.json" 2>"$WORK/loadgen-churn.log" &
LG_PID=$!
PIDS+=("$LG_PID")
SLG_PID=
if [ "$STABLE_RATE" -gt 0 ]; then
    timeout "$LIMIT" taskset -c "$CLIENT_CPUS" "$BIN/loadgen" "${LG_COMMON[@]}" -c "$STABLE_CONNS" \
        --rate "$STABLE_RATE" "http://127.0.0.2:$PROXY_PORT/" \
        >"$WORK/loadgen-stable.json" 2>"$WORK/loadgen-stable.log" &
    SLG_PID=$!
    PIDS+=("$SLG_PID")
fi

# Updater and sampler in one process (one clock): samples /stats every
# SAMPLE_MS from T0; after the warm-up (plus a quarter of an update
# period), writes update k = 0 .. DURATION-1 every UPDATE_MS, flipping the
# churn chain B, A, B, ...; stops when the churn loadgen has exited (plus
# one last sample) or at LIMIT.
taskset -c "$CLIENT_CPUS" python3 - "$WORK" "$ADMIN" "$T0" "$WARMUP" "$DURATION" "$UPDATE_MS" \
    "$SAMPLE_MS" "$LG_PID" "$LIMIT" <<'PY' &
import os, re, sys, time, urllib.request
work, admin, t0, warmup, n_updates, update_ms, sample_ms, lg_pid, limit = sys.argv[1:]
t0, warmup, n_updates = float(t0), float(warmup), int(n_updates)
update_s, sample_s, lg_pid, limit = int(update_ms) / 1000, int(sample_ms) / 1000, int(lg_pid), float(limit)
tmpl = {c: open(f"{work}/lds-{c}.tmpl").read() for c in "AB"}
line_re = re.compile(r'^([a-z_]+)(\{[^}]*\})? ([0-9.eE+-]+)$')
def sample():
    with urllib.request.urlopen(admin + "/stats", timeout=5) as r:
        text = r.read().decode()
    v = {"cx_total": 0, "cx_active": 0, "acc": 0, "rej": 0, "A": 0, "B": 0, "stable": 0,
         "pushes": 0, "push_max": 0.0}
    for line in text.splitlines():
        m = line_re.match(line)
        if not m:
            continue
        name, labels, val = m.group(1), m.group(2) or "", float(m.group(3))
        if name == "gateway_downstream_cx_total": v["cx_total"] = int(val)
        elif name == "gateway_downstream_cx_active": v["cx_active"] = int(val)
        elif name == "gateway_xds_update_accepted_total" and 'type="listeners"' in labels: v["acc"] = int(val)
        elif name == "gateway_xds_update_rejected_total" and 'type="listeners"' in labels: v["rej"] = int(val)
        elif name == "gateway_config_pushes_total": v["pushes"] = int(val)
        elif name == "gateway_config_push_max_seconds": v["push_max"] = val
        elif name == "gateway_upstream_rq_total":
            c = re.search(r'cluster="([^"]*)"', labels)
            if c and c.group(1) in ("A", "B", "stable"): v[c.group(1)] += int(val)
    return v
cols = ["cx_total", "cx_active", "acc", "rej", "A", "B", "stable", "pushes", "push_max"]
samples = open(f"{work}/samples.tsv", "w")
samples.write("t\t" + "\t".join(cols) + "\n")
updates = open(f"{work}/updates.tsv", "w")
updates.write("k\tt\tversion\tcluster\n")
first_update = warmup + update_s / 4
next_sample, k, lg_done_at = 0.0, 0, None
def now(): return time.time() - t0
while now() < limit:
    t_next_update = first_update + k * update_s if k < n_updates else float("inf")
    t = now()
    if t >= t_next_update:
        cluster = "B" if k % 2 == 0 else "A"
        version = str(k + 2)
        tmp = f"{work}/lds.yaml.tmp"
        with open(tmp, "w") as f:
            f.write(tmpl[cluster].replace("@VERSION@", version))
        os.rename(tmp, f"{work}/lds.yaml")
        updates.write(f"{k}\t{now():.4f}\t{version}\t{cluster}\n")
        updates.flush()
        k += 1
        continue
    if t >= next_sample:
        try:
            v = sample()
        except Exception as e:
            print(f"sampler: /stats failed at {t:.2f} s: {e}", file=sys.stderr)
        else:
            samples.write(f"{now():.4f}\t" + "\t".join(str(v[c]) for c in cols) + "\n")
            samples.flush()
        next_sample += sample_s
        if lg_done_at is not None and now() >= lg_done_at + 1.0:
            break
        if lg_done_at is None and not os.path.exists(f"/proc/{lg_pid}"):
            lg_done_at = now()
        continue
    time.sleep(max(0.0, min(next_sample, t_next_update) - now()))
PY
SAMPLER_PID=$!
PIDS+=("$SAMPLER_PID")

LG_RC=0
wait "$LG_PID" || LG_RC=$?
forget_pid "$LG_PID"
SLG_RC=0
if [ -n "$SLG_PID" ]; then
    wait "$SLG_PID" || SLG_RC=$?
    forget_pid "$SLG_PID"
fi
wait "$SAMPLER_PID" || { echo "lds_churn.sh: the sampler failed" >&2; exit 1; }
forget_pid "$SAMPLER_PID"
if [ "$LG_RC" != 0 ] || [ "$SLG_RC" != 0 ]; then
    echo "lds_churn.sh: loadgen exited with $LG_RC (churn) / $SLG_RC (stable)" >&2
    cat "$WORK/loadgen-churn.log" >&2
    [ -z "$SLG_PID" ] || cat "$WORK/loadgen-stable.log" >&2
    exit 1
fi
curl -s -m 5 "$ADMIN/config_dump" >"$WORK/config_dump.json" || true
curl -s -m 5 "$ADMIN/stats" >"$WORK/stats.txt" || true

# ---------------------------------------------------------------- report
[ -n "${COMMIT:-}" ] || COMMIT=$(commit_label)
SETTINGS="rate $RATE req/s open loop, -c $CONNS -m $STREAMS; stable chain ${STABLE_RATE} req/s -c $STABLE_CONNS; warm-up ${WARMUP} s, ${DURATION} s measured; one LDS update per ${UPDATE_MS} ms; /stats every ${SAMPLE_MS} ms; gateway --shards $SHARDS on cpus $PROXY_CPUS, clients on cpus $CLIENT_CPUS; $DRAIN_NOTE"
RC=0
python3 - "$WORK" "$COMMIT" "$SETTINGS" "$DURATION" "$RATE" "$STABLE_RATE" "$UPDATE_MS" "$SAMPLE_MS" "$WARMUP" <<'PY' || RC=$?
import json, os, statistics, sys
work, commit, settings, duration, rate, stable_rate, update_ms, sample_ms, warmup = sys.argv[1:]
duration, rate, stable_rate, warmup = int(duration), int(rate), int(stable_rate), int(warmup)
update_s, sample_s = int(update_ms) / 1000, int(sample_ms) / 1000

def tsv(name):
    def num(x):
        try:
            return float(x)
        except ValueError:
            return x
    rows = [l.rstrip("\n").split("\t") for l in open(f"{work}/{name}")]
    return [dict(zip(rows[0], (num(x) for x in r))) for r in rows[1:]]
S, U = tsv("samples.tsv"), tsv("updates.tsv")
if len(S) < 2:
    sys.exit("lds_churn.sh: too few /stats samples")
lg = {"churn": json.load(open(f"{work}/loadgen-churn.json"))}
if stable_rate > 0:
    lg["stable"] = json.load(open(f"{work}/loadgen-stable.json"))

def fmt(x):
    return f"{x:,.0f}" if isinstance(x, (int, float)) and float(x).is_integer() else (f"{x:,.1f}" if isinstance(x, float) else str(x))
rows = []
def row(k, v): rows.append((k, v))

# Requests.
failed_total = 0
for name, d in lg.items():
    r = rate if name == "churn" else stable_rate
    errs = {k: v for k, v in d["errors"].items() if v}
    # Every failure is one error (a non-2xx response is a non_2xx error).
    failed = max(d["errors_total"], d["requests"] - d["succeeded"])
    failed_total += failed
    lat = d["latency_us"]
    row(f"{name} chain: requests intended / answered / ok",
        f"{r * duration:,} / {d['requests']:,} / {d['succeeded']:,}")
    row(f"{name} chain: **failed**", f"**{failed}**" + (f" ({', '.join(f'{k} {v}' for k, v in errs.items())})" if errs else ""))
    row(f"{name} chain: latency p50 / p99 / max (µs)", f"{lat['p50']:,} / {lat['p99']:,} / {lat['max']:,}")
    row(f"{name} chain: loadgen reconnects", f"{d['reconnects']}")

# Updates.
acc0 = S[0]["acc"]
acc = S[-1]["acc"] - acc0
rej = S[-1]["rej"] - S[0]["rej"]
pushes = S[-1]["pushes"] - S[0]["pushes"]
row("LDS updates written / accepted / rejected", f"{len(U)} / {acc:.0f} / {rej:.0f}")
row("config pushes (all shards applied); slowest push", f"{pushes:.0f}; {S[-1]['push_max'] * 1000:.1f} ms")
# When each update was seen applied: the first sample whose accepted count includes it.
lag = []
for i, u in enumerate(U):
    for s in S:
        if s["t"] >= u["t"] and s["acc"] - acc0 >= i + 1:
            lag.append(s["t"] - u["t"])
            break
if lag:
    row("update seen applied after the rename (median / max)",
        f"{statistics.median(lag) * 1000:.0f} / {max(lag) * 1000:.0f} ms (file polled every 250 ms; ±{sample_s * 1000:.0f} ms sampling)")

# New connections: deltas of cx_total between samples, from the first
# update to the end (the initial connections come before).
if U:
    t_first = U[0]["t"]
    base = max((s for s in S if s["t"] <= t_first), key=lambda s: s["t"], default=S[0])
    deltas = []  # (t_end_of_slice, new connections)
    prev = base
    for s in S:
        if s["t"] <= base["t"]:
            continue
        deltas.append((s["t"], s["cx_total"] - prev["cx_total"]))
        prev = s
    total_new = sum(d for _, d in deltas)
    # 1 s (update period) bins, bin k starting at update k.
    ut = [u["t"] for u in U]
    per_bin = [0] * len(U)
    offsets = []  # (offset after the last update, count)
    for t, d in deltas:
        if d == 0:
            continue
        k = max(i for i, x in enumerate(ut) if x <= t) if t >= ut[0] else 0
        per_bin[k] += d
        offsets.append((t - ut[k], d))
    row("new connections after the first update (cx_total)", f"{total_new:.0f}")
    conns = lg["churn"]["connections"]
    row(f"new connections per update period: median / min / max (churn chain has {conns})",
        f"{statistics.median(per_bin):.0f} / {min(per_bin):.0f} / {max(per_bin):.0f}")
    # Per 100 ms of the period after an update (a sample's slice is
    # attributed to its end: the reconnects happened at most sample-ms earlier).
    nb = max(1, round(update_s / 0.1))
    hist = [0] * nb
    for off, d in offsets:
        hist[min(nb - 1, int(off / 0.1))] += d
    if total_new:
        row("share of new connections by time after their update (100 ms steps)",
            " ".join(f"{h / total_new * 100:.0f}" for h in hist) + " %")
        busiest = max((d for _, d in deltas), default=0)
        row(f"busiest {sample_s * 1000:.0f} ms slice", f"{busiest:.0f} new connections")
        # Per update: the share of its period's reconnects in its busiest slice.
        peaks = []
        for k in range(len(U)):
            ds = [d for t, d in deltas if (k + 1 == len(U) or t < ut[k + 1]) and t >= ut[k]]
            if sum(ds):
                peaks.append(max(ds) / sum(ds))
        if peaks:
            row(f"share of an update's reconnects in its busiest {sample_s * 1000:.0f} ms slice (median)",
                f"{statistics.median(peaks) * 100:.0f} %")
    act = [s["cx_active"] for s in S if ut[0] <= s["t"] <= warmup + duration]
    row("downstream connections open, from the first update to the end of the load (min / max)", f"{min(act):.0f} / {max(act):.0f}")
    with open(f"{work}/per_update.tsv", "w") as f:
        f.write("k\tcluster\tnew_conns\n")
        for k, u in enumerate(U):
            f.write(f"{k}\t{u['cluster']}\t{per_bin[k]}\n")
    row("new connections per update period, in order", " ".join(str(int(x)) for x in per_bin))

# Backend split of the churn chain (the gateway's upstream requests per
# cluster, over the update window: both routes alternate).
if U:
    a = S[-1]["A"] - base["A"]
    b = S[-1]["B"] - base["B"]
    st = S[-1]["stable"] - base["stable"]
    if a + b:
        row("churn chain's upstream requests A / B (from the first update)",
            f"{a:,.0f} / {b:,.0f} ({a / (a + b) * 100:.0f} % / {b / (a + b) * 100:.0f} %)")
    row("stable chain's upstream requests (cluster stable)", f"{st:,.0f}")
    # Requests sent to the route of the latest applied update, in the
    # slices where no update was applied (drained connections keep their
    # chain, so their route, until they go).
    fresh = stale = 0
    for p, s in zip(S, S[1:]):
        if s["t"] <= ut[0] or s["acc"] != p["acc"]:
            continue
        n = int(p["acc"] - acc0)
        if n < 1:
            continue
        cur = U[n - 1]["cluster"]
        old = "A" if cur == "B" else "B"
        fresh += s[cur] - p[cur]
        stale += s[old] - p[old]
    if fresh + stale:
        row("churn requests on the latest update's route / on an older one",
            f"{fresh / (fresh + stale) * 100:.0f} % / {stale / (fresh + stale) * 100:.0f} %")

print(f"LDS churn at {commit}: {settings}.")
print()
print("| | |")
print("|---|---:|")
for k, v in rows:
    print(f"| {k} | {v} |")
print()
bad = []
if failed_total:
    bad.append(f"{failed_total} request(s) failed")
if rej or acc < len(U):
    bad.append(f"only {acc:.0f} of {len(U)} LDS updates accepted ({rej:.0f} rejected)")
if stable_rate > 0 and lg["stable"]["reconnects"]:
    print(f"note: the stable chain's loadgen reconnected {lg['stable']['reconnects']} time(s): an update drained the unchanged chain", file=sys.stderr)
if bad:
    print("FAIL: " + "; ".join(bad), file=sys.stderr)
    sys.exit(1)
PY
if [ "$RC" != 0 ]; then
    log "gateway log (last 40 lines):"
    tail -n 40 "$WORK/gateway.log" >&2
fi
if [ -n "$OUT_DIR" ]; then log "logs, loadgen JSON, samples.tsv and updates.tsv in $OUT_DIR"; fi
exit "$RC"
