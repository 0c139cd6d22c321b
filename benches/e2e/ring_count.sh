#!/usr/bin/env bash
# System calls, io_uring requests and context switches per proxied request
# of one proxy at a fixed open-loop rate: where a proxy's low-load CPU goes.
#
# Layout as compare.sh: the proxy alone on CPU 1 (one shard / thread), the
# demo backend and loadgen (-c16 -m32, --rate R) on CPU 0. After 2 s of load
# it counts the proxy's syscalls (`perf stat` on the syscalls tracepoints)
# for 3 s, then records `io_uring:io_uring_submit_req` for 1 s and breaks
# the ring requests down by opcode, and `io_uring_enter` calls by
# (to_submit, min_complete, flags).
#
# Usage: benches/e2e/ring_count.sh TARGET RATE [gateway arguments...]
#   TARGET: gateway (target/release/gateway), haproxy, or a gateway binary's
#           path (an A/B of two builds)
# Needs perf, haproxy for TARGET haproxy, and release builds
# (cargo build --release -p gateway -p demo-backend -p loadgen --bins).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$ROOT/target/release
TARGET=${1:?usage: ring_count.sh TARGET RATE [gateway arguments...]}
RATE=${2:?usage: ring_count.sh TARGET RATE [gateway arguments...]}
shift 2
[ "$TARGET" = gateway ] && TARGET=$BIN/gateway
WORK=$(mktemp -d /tmp/ring_count.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$ROOT/benches/e2e/lib.sh"

BACKEND_PORT=$(free_port)
taskset -c 0 "$BIN/demo-backend" --listen "127.0.0.1:$BACKEND_PORT" --name bench --cpu 0 \
    >"$WORK/backend.log" 2>&1 &
PIDS+=($!)
wait_listen "$BACKEND_PORT" "${PIDS[0]}"

PROXY_PORT=$(free_port)
# shellcheck disable=SC2034 # read by write_haproxy_cfg (lib.sh)
SHARDS=1
# shellcheck disable=SC2034 # read by write_haproxy_cfg (lib.sh)
PROXY_CPUS=1
if [ "$TARGET" = haproxy ]; then
    write_haproxy_cfg "$WORK/haproxy.cfg" 1000
    taskset -c 1 haproxy -db -f "$WORK/haproxy.cfg" >"$WORK/proxy.log" 2>&1 &
else
    write_bootstrap "$WORK/gateway.yaml" ring-count
    taskset -c 1 "$TARGET" --config "$WORK/gateway.yaml" --shards 1 --cpu-list 1 --log warn "$@" \
        >"$WORK/proxy.log" 2>&1 &
fi
PROXY=$!
PIDS+=("$PROXY")
wait_listen "$PROXY_PORT" "$PROXY"

"$BIN/loadgen" "http://127.0.0.1:$PROXY_PORT/" -c 16 -m 32 -t 1 --cpu-list 0 -d 7s --warmup 1s \
    --rate "$RATE" --json -q >"$WORK/load.json" 2>"$WORK/load.err" &
LOAD=$!
PIDS+=("$LOAD")
sleep 2
t0=$(cpu_ticks "$PROXY")
perf stat -x, -o "$WORK/stat.txt" -p "$PROXY" \
    -e 'syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_sendto,syscalls:sys_enter_recvfrom' \
    -e 'syscalls:sys_enter_epoll_wait,syscalls:sys_enter_writev,syscalls:sys_enter_readv' \
    -e 'context-switches,io_uring:io_uring_submit_req,sched:sched_waking,irq_vectors:call_function_single_entry,irq_vectors:reschedule_entry' -- sleep 3
t1=$(cpu_ticks "$PROXY")
perf record -q -o "$WORK/ring.data" -p "$PROXY" \
    -e io_uring:io_uring_submit_req -e syscalls:sys_enter_io_uring_enter -- sleep 1 >/dev/null 2>&1
wait "$LOAD"
perf script -i "$WORK/ring.data" 2>/dev/null >"$WORK/ring.txt" || true

python3 - "$WORK" "$RATE" "$((t1 - t0))" "$CLK_TCK" <<'PY'
import collections, json, re, sys
work, rate, ticks, hz = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
load = json.load(open(f"{work}/load.json"))
rps = load["rps"] or rate
print(f"achieved {rps:.0f} req/s, {load['errors_total']} errors; proxy "
      f"{ticks / hz / 3 / rps * 1e6:.1f} CPU-µs/request (/proc, 3 s)\n")
print("| per request | count |\n|---|---:|")
for line in open(f"{work}/stat.txt"):
    f = line.strip().split(",")
    if len(f) > 2 and f[0].replace(".", "").isdigit():
        name = f[2].replace("syscalls:sys_enter_", "")
        print(f"| {name} | {float(f[0]) / (rps * 3):.3f} |")
ops, enters = collections.Counter(), collections.Counter()
for line in open(f"{work}/ring.txt"):
    m = re.search(r"opcode ([A-Z_]+)", line)
    if m:
        ops[m.group(1)] += 1
    m = re.search(r"to_submit: (0x[0-9a-f]+), min_complete: (0x[0-9a-f]+), flags: (0x[0-9a-f]+)", line)
    if m:
        enters[tuple(int(x, 16) for x in m.groups())] += 1
print("\n| ring request (1 s) | per request |\n|---|---:|")
for op, n in ops.most_common():
    print(f"| {op} | {n / rps:.3f} |")
print("\n| io_uring_enter (to_submit, min_complete, flags) | per request |\n|---|---:|")
for k, n in enters.most_common(8):
    print(f"| {k} | {n / rps:.3f} |")
PY
