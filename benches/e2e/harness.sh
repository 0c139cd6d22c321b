# shellcheck shell=bash
# The process harness compare.sh and handshakes.sh share: the proxies they
# start, pinned and tracked, and the clean-up on exit. The functions read
# the caller's globals: WORK (the run's directory), PIDS (processes to
# kill on exit), OUT_DIR (where to keep WORK, if set), PROXY_CPUS and
# PROXY_PORT; launch_proxy sets PROXY_PID. Not for the .ci scripts, which
# have their own `cleanup` (.ci/common.sh).

# CPUs in a taskset list ("0-2,5" → 4).
cpu_count() {
    python3 -c 'import sys
n=0
for p in sys.argv[1].split(","):
    a,_,b=p.partition("-"); n+= (int(b)-int(a)+1) if b else 1
print(n)' "$1"
}

# On exit: every process started, killed; WORK kept in OUT_DIR, then removed.
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    sleep 0.3
    for pid in "${PIDS[@]}"; do
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if [ -n "$OUT_DIR" ]; then
        cp -r "$WORK"/. "$OUT_DIR"/ 2>/dev/null || true
    fi
    rm -rf "$WORK"
    exit $rc
}

forget_pid() { # remove $1 from PIDS after it was stopped
    local keep=() p
    for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
    PIDS=("${keep[@]}")
}

# Stops a process (TERM, then KILL after 5 s) and forgets it.
stop_pid() {
    kill "$1" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    forget_pid "$1"
}

# Starts a proxy pinned to PROXY_CPUS, logging to WORK/$1; waits for PROXY_PORT.
launch_proxy() { # log-file, command...
    local log=$1
    shift
    taskset -c "$PROXY_CPUS" "$@" >>"$WORK/$log" 2>&1 &
    PROXY_PID=$!
    PIDS+=("$PROXY_PID")
    wait_listen "$PROXY_PORT" "$PROXY_PID"
}

stop_proxy() {
    if [ -n "$PROXY_PID" ]; then stop_pid "$PROXY_PID"; fi
    PROXY_PID=
}
