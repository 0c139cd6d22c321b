# Shell helpers shared by the end-to-end benchmark scripts (sourced).

# A free TCP port on 127.0.0.1 (racy by nature; the scripts bind at once).
free_port() {
    python3 -c 'import socket
s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# Waits until something listens on port $1, or fails if process $2 died.
wait_listen() {
    for _ in $(seq 100); do
        if ss -Hltn "sport = :$1" | grep -q .; then return 0; fi
        kill -0 "$2" 2>/dev/null || { echo "process $2 died before listening on $1" >&2; return 1; }
        sleep 0.05
    done
    echo "nothing listens on port $1" >&2
    return 1
}

CLK_TCK=$(getconf CLK_TCK)
# utime+stime of the whole process in clock ticks, in pure bash (no fork:
# on a saturated machine a fork can take tens of ms). Empty if it is gone.
cpu_ticks() {
    local line
    read -r line <"/proc/$1/stat" 2>/dev/null || { echo ""; return; }
    line=${line##*) }
    # shellcheck disable=SC2086
    set -- $line
    echo $((${12} + ${13}))
}
