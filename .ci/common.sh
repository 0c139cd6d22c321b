# shellcheck shell=bash
# Sourced by the CI scripts that run the built binaries (h2spec.sh,
# clients.sh): a work directory removed on exit together with every
# process recorded in `pids`, and a wait for the address a process prints.

work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# Waits up to 10 s for a line matching $2 in file $1; prints its last field.
await_addr() {
    for _ in $(seq 100); do
        if line=$(grep -m1 "$2" "$1" 2>/dev/null); then
            echo "${line##* }"
            return 0
        fi
        sleep 0.1
    done
    echo "timed out waiting for '$2' in $1:" >&2
    cat "$1" >&2
    return 1
}
