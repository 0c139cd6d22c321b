#!/usr/bin/env bash
# What slow clients cost a proxy in memory (issue 33): slowhttptest opens
# C connections that send a request body slowly (`-B`, slow body) or read
# their responses slowly through a small receive window (`-X`, slow read),
# against the gateway and HAProxy in alternating rounds, each mode on a
# fresh proxy in front of the demo backend (HTTP/2 upstream). It prints
# each proxy's RSS before and its peak during the test, and the growth per
# connection; the summary gives the medians and gateway ÷ HAProxy.
#
# Usage: benches/e2e/slow_clients.sh [options]
#   --conns C       slowhttptest connections                [1000]
#   --seconds S     length of each test                     [20]
#   --rounds N      rounds (gateway and HAProxy each)       [2]
#   --modes "M..."  slow-body and/or slow-read              ["slow-body slow-read"]
#   --targets "T.." gateway and/or haproxy                  ["gateway haproxy"]
#   --no-build      use the release binaries as they are
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=benches/e2e/lib.sh
. benches/e2e/lib.sh

CONNS=1000
SECONDS_EACH=20
ROUNDS=2
MODES="slow-body slow-read"
TARGETS="gateway haproxy"
BUILD=1
while [ $# -gt 0 ]; do
    case $1 in
        --conns) CONNS=$2; shift ;;
        --seconds) SECONDS_EACH=$2; shift ;;
        --rounds) ROUNDS=$2; shift ;;
        --modes) MODES=$2; shift ;;
        --targets) TARGETS=$2; shift ;;
        --no-build) BUILD=0 ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        *) echo "slow_clients.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
command -v slowhttptest >/dev/null || { echo "slow_clients.sh: needs slowhttptest (apt-get install slowhttptest)" >&2; exit 2; }
if [ "$BUILD" = 1 ]; then
    cargo build --release -q -p gateway -p demo-backend --bin gateway --bin demo-backend
fi
BIN=target/release
make_work_dir slow-clients

# What write_bootstrap and write_haproxy_cfg (lib.sh) read.
SHARDS=1
PROXY_CPUS=1
UPSTREAM_PROTO=h2
BACKEND_PORT=$(free_port)
taskset -c 0 "$BIN/demo-backend" --listen "127.0.0.1:$BACKEND_PORT" >"$WORK/backend.log" 2>&1 &
BACKEND_PID=$!
PIDS+=("$BACKEND_PID")
wait_listen "$BACKEND_PORT" "$BACKEND_PID"

start_proxy() { # target
    PROXY_PORT=$(free_port)
    case $1 in
        gateway)
            write_bootstrap "$WORK/gateway.yaml" slow-clients
            "$BIN/gateway" --config "$WORK/gateway.yaml" --shards 1 --cpu-list 1 --log warn >"$WORK/proxy.log" 2>&1 &
            ;;
        haproxy)
            write_haproxy_cfg "$WORK/haproxy.cfg" $((CONNS + 1000))
            taskset -c 1 haproxy -db -f "$WORK/haproxy.cfg" >"$WORK/proxy.log" 2>&1 &
            ;;
        *) echo "unknown target $1" >&2; exit 2 ;;
    esac
    PROXY_PID=$!
    PIDS+=("$PROXY_PID")
    wait_listen "$PROXY_PORT" "$PROXY_PID"
    sleep 0.5
}

echo "round	target	mode	rss_before_kb	rss_peak_kb	established_peak" >"$WORK/results.tsv"
for round in $(seq "$ROUNDS"); do
    read -ra targets <<<"$TARGETS"
    if [ $((round % 2)) = 0 ]; then mapfile -t targets < <(printf '%s\n' "${targets[@]}" | tac); fi
    for target in "${targets[@]}"; do
        for mode in $MODES; do
            start_proxy "$target"
            before=$(rss_kb "$PROXY_PID")
            case $mode in
                # A POST announcing 64 KiB, its body 1–20 bytes every 5 s.
                slow-body) args=(-B -t POST -s 65536 -i 5 -x 20) ;;
                # Requests pipelined 3 at a time, read 32 bytes every 2 s
                # through a 32–64 byte receive window.
                slow-read) args=(-X -k 3 -n 2 -z 32 -w 32 -y 64) ;;
                *) echo "unknown mode $mode" >&2; exit 2 ;;
            esac
            timeout $((SECONDS_EACH + 30)) slowhttptest -c "$CONNS" -r 500 -l "$SECONDS_EACH" -p 5 \
                -u "http://127.0.0.1:$PROXY_PORT/" "${args[@]}" >"$WORK/slow-$round-$target-$mode.log" 2>&1 &
            slow=$!
            PIDS+=("$slow")
            peak=$before
            est_peak=0
            while kill -0 "$slow" 2>/dev/null; do
                r=$(rss_kb "$PROXY_PID")
                [ "$r" -gt "$peak" ] && peak=$r
                e=$(ss -Htn state established "( sport = :$PROXY_PORT )" | wc -l)
                [ "$e" -gt "$est_peak" ] && est_peak=$e
                sleep 0.5
            done
            kill "$PROXY_PID" 2>/dev/null || true
            wait "$PROXY_PID" 2>/dev/null || true
            printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$target" "$mode" "$before" "$peak" "$est_peak" >>"$WORK/results.tsv"
            echo "round $round $target $mode: RSS $before -> peak $peak KiB (+$(( (peak - before) / 1024 )) MiB), $est_peak connections at most"
        done
    done
done

python3 - "$WORK/results.tsv" "$CONNS" "$SECONDS_EACH" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
conns, secs = sys.argv[2:4]
G = {}
print(f"\n## Slow clients: {conns} slowhttptest connections, {secs} s, median over rounds\n")
print("| proxy | mode | RSS before MiB | RSS growth MiB | bytes per connection |")
print("|---|---|---:|---:|---:|")
for t in ("gateway", "haproxy"):
    for mode in ("slow-body", "slow-read"):
        rs = [r for r in rows if r["target"] == t and r["mode"] == mode]
        if not rs:
            continue
        grow = statistics.median(int(r["rss_peak_kb"]) - int(r["rss_before_kb"]) for r in rs)
        before = statistics.median(int(r["rss_before_kb"]) for r in rs)
        G[(t, mode)] = grow
        print(f"| {t} | {mode} | {before / 1024:.1f} | {grow / 1024:.1f} | {grow * 1024 / int(conns):.0f} |")
for mode in ("slow-body", "slow-read"):
    if G.get(("haproxy", mode)):
        print(f"\ngateway ÷ HAProxy RSS growth, {mode}: {G[('gateway', mode)] / G[('haproxy', mode)]:.2f} (goal ≤ 1.00)")
PY
