#!/usr/bin/env bash
# Hitless upgrades under load (issue 32's acceptance): the gateway serves
# open-loop HTTP/2 load (loadgen --rate) and holds idle HTTP/2 connections
# (idle_conns) while it is upgraded UPGRADES times in a row with
# `--restart-epoch` (each epoch takes the listening sockets, the previous
# one drains and exits). Reports the load's failed requests and refused
# connections, and its p99 against a steady window of the same length
# without upgrades, measured in the same run.
#
# Usage: benches/e2e/upgrade.sh [--rate R] [--idle N] [--upgrades K]
#        [--shards S] [--no-build]
# Needs release builds of gateway, demo-backend, loadgen and the benches'
# idle_conns (built unless --no-build).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=lib.sh
source benches/e2e/lib.sh

RATE=20000 IDLE=1000 UPGRADES=5 SHARDS=1 BUILD=1
while [ $# -gt 0 ]; do
    case "$1" in
        --rate) RATE=$2; shift 2 ;;
        --idle) IDLE=$2; shift 2 ;;
        --upgrades) UPGRADES=$2; shift 2 ;;
        --shards) SHARDS=$2; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
if [ "$BUILD" = 1 ]; then
    cargo build --release -q -p gateway -p demo-backend -p loadgen --bins
    cargo build --release -q -p benches --bin idle_conns
fi
bin=target/release
work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    pkill -f "gateway.*--base-id $BASE" 2>/dev/null || true
    rm -rf "$work"
}
BASE=$((RANDOM % 10000 + 50000))
trap cleanup EXIT

backend_port=$(free_port)
"$bin/demo-backend" --listen "127.0.0.1:$backend_port" >/dev/null 2>&1 &
pids+=($!)
wait_listen "$backend_port" "${pids[-1]}"
port=$(free_port)
admin=$(free_port)
sed -e "s/@PORT@/$port/" -e "s/@ADMIN@/$admin/" -e "s/@BACKEND@/$backend_port/" \
    benches/e2e/upgrade.yaml >"$work/gateway.yaml"

# Epoch $1, its stderr in $work/epoch-$1.log.
start_epoch() {
    "$bin/gateway" --config "$work/gateway.yaml" --shards "$SHARDS" \
        --restart-epoch "$1" --base-id "$BASE" --drain-time-s 2 \
        --parent-shutdown-time-s 10 >/dev/null 2>"$work/epoch-$1.log" &
    echo $!
}
epoch_pid=$(start_epoch 0)
wait_listen "$port" "$epoch_pid"

# $IDLE idle HTTP/2 connections to the epoch serving now. A drain closes
# them (GOAWAY, then closed as idle) and idle_conns does not reconnect:
# each epoch gets a fresh set, so that every upgrade happens with $IDLE
# idle connections open on the parent.
idle_set() {
    "$bin/idle_conns" "127.0.0.1:$port" "$IDLE" 3600 >"$work/idle-$1.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 200); do
        grep -q '^ready' "$work/idle-$1.log" && return 0
        sleep 0.05
    done
    echo "idle_conns did not get $IDLE connections:" >&2
    cat "$work/idle-$1.log" >&2
    return 1
}
idle_set 0

# One window of load: $1 seconds, its JSON report in $2.
load() {
    "$bin/loadgen" -q --json -t 1 -c 16 -m 8 --rate "$RATE" --warmup 1s \
        -d "${1}s" "http://127.0.0.1:$port/" >"$2"
}

window=$((UPGRADES * 3 + 2))
echo "== steady: ${window}s at $RATE req/s, $IDLE idle h2 connections"
load "$window" "$work/steady.json"

echo "== $UPGRADES upgrades in ${window}s at $RATE req/s"
load "$window" "$work/upgrades.json" &
lg=$!
sleep 2
for epoch in $(seq 1 "$UPGRADES"); do
    parent=$epoch_pid
    epoch_pid=$(start_epoch "$epoch")
    # The parent exits once its successor took over and its drain ended.
    for _ in $(seq 300); do
        kill -0 "$parent" 2>/dev/null || break
        sleep 0.05
    done
    if kill -0 "$parent" 2>/dev/null; then
        echo "epoch $((epoch - 1)) (pid $parent) still runs 15 s after epoch $epoch started" >&2
        cat "$work/epoch-$((epoch - 1)).log" >&2
        exit 1
    fi
    grep -q "took over from process" "$work/epoch-$epoch.log" || {
        echo "epoch $epoch did not take over:" >&2; cat "$work/epoch-$epoch.log" >&2; exit 1; }
    echo "epoch $epoch took over from pid $parent"
    idle_set "$epoch"
    sleep 0.5
done
wait "$lg"

python3 - "$work/steady.json" "$work/upgrades.json" "$UPGRADES" <<'EOF'
import json, sys
steady, up = (json.load(open(p)) for p in sys.argv[1:3])
def p99(r):
    return r["latency_us"]["p99"] / 1000.0
for name, r in (("steady", steady), ("upgrades", up)):
    print(f"{name:9} requests {r['requests']:>8}  succeeded {r['succeeded']:>8}  "
          f"errors {r['errors_total']:>4} {r['errors']}  reconnects {r['reconnects']:>4}  "
          f"p99 {p99(r):7.2f} ms  ({r['rps']:.0f} req/s)")
print(f"p99 during {sys.argv[3]} upgrades / steady: {p99(up) / p99(steady):.2f}")
bad = any(r["errors_total"] or r["requests"] != r["succeeded"] for r in (steady, up))
sys.exit(1 if bad else 0)
EOF
