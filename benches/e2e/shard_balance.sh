#!/usr/bin/env bash
# How evenly SO_REUSEPORT spreads long-lived HTTP/2 clients over the
# gateway's data shards (issue 33): N shards, C long-lived h2c clients in
# groups with skewed request rates (a few busy gRPC-like clients, many
# quiet browser-like ones), each round on a fresh gateway (the kernel's
# reuseport hash and the clients' ports change). Per round it prints each
# shard's open connections (the admin's Envoy series
# `listener.<addr>.worker_<n>.downstream_cx_active`) and CPU over the
# measured window (the shard thread's utime+stime from /proc), and the
# imbalance max ÷ mean of both; the summary gives their median and range
# over the rounds, for each connection steering mode (the gateway's
# `--connection-steering`), the modes alternating within each round.
#
# Usage: benches/e2e/shard_balance.sh [options]
#   --shards N        data shards                           [4]
#   --cpus LIST       the gateway's CPUs (--cpu-list)       [all]
#   --groups "R..."   one loadgen per group, its total req/s; the clients
#                     are split evenly over the groups      ["8000 2000 500 100"]
#   --clients C       long-lived connections in all         [64]
#   --rounds N        fresh gateways                        [5]
#   --duration S      measured seconds per round            [5]
#   --modes "M..."    --connection-steering modes to compare
#                     ["least-connections kernel-hash"]
#   --no-build        use the release binaries as they are
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=benches/e2e/lib.sh
. benches/e2e/lib.sh

SHARDS=4
CPUS=0-$(($(nproc) - 1))
GROUPS_RATES="8000 2000 500 100"
CLIENTS=64
ROUNDS=5
DURATION=5
MODES="least-connections kernel-hash"
BUILD=1
while [ $# -gt 0 ]; do
    case $1 in
        --shards) SHARDS=$2; shift ;;
        --cpus) CPUS=$2; shift ;;
        --groups) GROUPS_RATES=$2; shift ;;
        --clients) CLIENTS=$2; shift ;;
        --rounds) ROUNDS=$2; shift ;;
        --duration) DURATION=$2; shift ;;
        --modes) MODES=$2; shift ;;
        --no-build) BUILD=0 ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) echo "shard_balance.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
read -ra RATES <<<"$GROUPS_RATES"
PER_GROUP=$((CLIENTS / ${#RATES[@]}))
[ "$PER_GROUP" -ge 1 ] || { echo "shard_balance.sh: fewer clients than groups" >&2; exit 2; }

if [ "$BUILD" = 1 ]; then
    cargo build --release -q -p gateway -p demo-backend -p loadgen --bin gateway --bin demo-backend --bin loadgen
fi
BIN=target/release
make_work_dir shard-balance

BACKEND_PORT=$(free_port)
"$BIN/demo-backend" --listen "127.0.0.1:$BACKEND_PORT" >"$WORK/backend.log" 2>&1 &
BACKEND_PID=$!
PIDS+=("$BACKEND_PID")
wait_listen "$BACKEND_PORT" "$BACKEND_PID"

# The shard threads' utime+stime (ticks), one line "name ticks" each.
shard_ticks() { # pid
    local t comm line
    for t in /proc/"$1"/task/*; do
        read -r comm <"$t/comm" 2>/dev/null || continue
        [[ $comm == shard-* ]] || continue
        read -r line <"$t/stat" 2>/dev/null || continue
        line=${line##*) }
        # shellcheck disable=SC2086
        set -- $line
        echo "$comm $((${12} + ${13}))"
    done | sort
}

echo "mode	round	shard	cx_active	cpu_ticks" >"$WORK/rounds.tsv"
for round in $(seq "$ROUNDS"); do
  for mode in $MODES; do
    PROXY_PORT=$(free_port)
    ADMIN_PORT=$(free_port)
    UPSTREAM_PROTO=h2
    write_bootstrap "$WORK/gateway.yaml" balance
    "$BIN/gateway" --config "$WORK/gateway.yaml" --shards "$SHARDS" --cpu-list "$CPUS" --log warn \
        --connection-steering "$mode" >"$WORK/gateway-$round-$mode.log" 2>&1 &
    GW=$!
    PIDS+=("$GW")
    wait_listen "$PROXY_PORT" "$GW"
    loads=()
    for rate in "${RATES[@]}"; do
        "$BIN/loadgen" "http://127.0.0.1:$PROXY_PORT/" -c "$PER_GROUP" -m 1 -t 1 --rate "$rate" \
            -d "$((DURATION + 1))s" --warmup 1s -q >"$WORK/load-$round-$rate.out" 2>&1 &
        loads+=($!)
        PIDS+=("$!")
    done
    sleep 1.5
    shard_ticks "$GW" >"$WORK/t0"
    sleep "$DURATION"
    shard_ticks "$GW" >"$WORK/t1"
    curl -s "http://127.0.0.1:$ADMIN_PORT/stats?filter=worker_" >"$WORK/stats-$round.txt" || true
    for p in "${loads[@]}"; do wait "$p" || echo "warning: a loadgen exited with $?" >&2; done
    kill -INT "$GW"; wait "$GW" 2>/dev/null || true
    if grep -q "connection steering off" "$WORK/gateway-$round-$mode.log"; then
        echo "warning: $mode asked, but steering was off: $(grep -o 'steering off.*' "$WORK/gateway-$round-$mode.log")" >&2
    fi
    python3 - "$WORK/t0" "$WORK/t1" "$WORK/stats-$round.txt" "$round" "$PROXY_PORT" "$mode" >>"$WORK/rounds.tsv" <<'PY'
import re, sys
t0 = dict(l.split() for l in open(sys.argv[1]))
t1 = dict(l.split() for l in open(sys.argv[2]))
stats = open(sys.argv[3]).read()
rnd, port, mode = sys.argv[4], sys.argv[5], sys.argv[6]
for name in sorted(t1, key=lambda n: int(n.split("-")[1])):
    shard = int(name.split("-")[1])
    m = re.search(r"^listener\.127\.0\.0\.1_%s\.worker_%d\.downstream_cx_active:? (\d+)" % (port, shard), stats, re.M)
    cx = m.group(1) if m else "NA"
    print(f"{mode}\t{rnd}\t{shard}\t{cx}\t{int(t1[name]) - int(t0.get(name, 0))}")
PY
    awk -v r="$round" -v m="$mode" -F'\t' '$1 == m && $2 == r { printf "%s round %s shard %s: %s connections, %s ticks\n", m, r, $3, $4, $5 }' "$WORK/rounds.tsv"
  done
done

python3 - "$WORK/rounds.tsv" "$SHARDS" "$CLIENTS" "$GROUPS_RATES" "$DURATION" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
shards, clients, groups, duration = sys.argv[2:6]
def imbalance(vals):
    vals = [float(v) for v in vals]
    mean = sum(vals) / len(vals)
    return max(vals) / mean if mean else float("nan")
modes = list(dict.fromkeys(r["mode"] for r in rows))
cx = {m: [] for m in modes}
cpu = {m: [] for m in modes}
for m in modes:
    for r in sorted({r["round"] for r in rows if r["mode"] == m}, key=int):
        rs = [x for x in rows if x["round"] == r and x["mode"] == m]
        if all(x["cx_active"] != "NA" for x in rs):
            cx[m].append(imbalance(x["cx_active"] for x in rs))
        cpu[m].append(imbalance(x["cpu_ticks"] for x in rs))
def cell(v):
    return f"{statistics.median(v):.2f} ({min(v):.2f}–{max(v):.2f})" if v else "—"
rounds = max(len(v) for v in cpu.values())
print(f"\n## Shard balance: {shards} shards, {clients} long-lived h2c clients in groups of total req/s {groups}, {duration} s, {rounds} round(s)\n")
print("| max ÷ mean over shards | " + " | ".join(f"`{m}`" for m in modes) + " | target |")
print("|---|" + "---:|" * len(modes) + "---|")
print("| open connections | " + " | ".join(cell(cx[m]) for m in modes) + " | ≤ 1.20 |")
print("| CPU | " + " | ".join(cell(cpu[m]) for m in modes) + " | ≤ 1.20 |")
PY
