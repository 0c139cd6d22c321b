#!/usr/bin/env bash
# HTTP/2 conformance of the built gateway: h2spec (../shared/tools/h2spec)
# against a gateway in front of a demo backend, every port chosen by the
# kernel (port 0) and read back from what the processes print.
# Usage: .ci/h2spec.sh [target/debug|target/release]   (default target/debug)
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${1:-target/debug}
H2SPEC=${H2SPEC:-../shared/tools/h2spec/h2spec}
if [[ ! -x $H2SPEC ]]; then
    echo "h2spec not found at $H2SPEC" >&2
    exit 1
fi

# shellcheck source=.ci/common.sh
. .ci/common.sh

"$BIN/demo-backend" --listen 127.0.0.1:0 >"$work/backend.log" 2>&1 &
pids+=($!)
backend=$(await_addr "$work/backend.log" "listening on")

# The benchmarks' bootstrap (benches/e2e/lib.sh): a listener on port 0
# routing everything to the backend; run once in cleartext (h2c prior
# knowledge) and once over TLS (ALPN h2, a self-signed certificate).
# shellcheck source=benches/e2e/lib.sh
. benches/e2e/lib.sh
make_test_cert "$work"

# Runs h2spec (extra arguments: $2...) against a gateway on bootstrap $1.
run_h2spec() {
    local name=$1
    shift
    "$BIN/gateway" -c "$work/$name.yaml" --shards 1 >"$work/$name.log" 2>&1 &
    local pid=$!
    pids+=("$pid")
    local gateway
    gateway=$(await_addr "$work/$name.log" "listener ingress on")
    echo "h2spec ($name) against the gateway on $gateway (backend $backend)"
    "$H2SPEC" -h 127.0.0.1 -p "${gateway##*:}" -o 2 -j "$work/$name.xml" "$@" >"$work/$name.out" 2>&1 || {
        cat "$work/$name.out"
        echo "h2spec ($name): failures above" >&2
        exit 1
    }
    kill "$pid" 2>/dev/null || true
    local summary passed skipped failed
    summary=$(tail -n 1 "$work/$name.out")
    echo "$summary"
    # "146 tests, 146 passed, 0 skipped, 0 failed" as the plain closing line.
    read -r _ _ passed _ skipped _ failed _ <<<"${summary//,/}"
    echo "h2spec ($name): $passed passed, $failed failed, $skipped skipped"
}

# HTTP2, not AUTO, in cleartext: AUTO takes bytes that are not the HTTP/2
# preface for HTTP/1.1 (as Envoy does), and h2spec's "invalid preface"
# test expects an HTTP/2 answer. Over TLS, ALPN says h2.
CODEC_TYPE=HTTP2 PROXY_PORT=0 BACKEND_PORT=${backend##*:} write_bootstrap "$work/h2c.yaml" h2spec-gateway
run_h2spec h2c
TLS_CERT=$work/cert.pem TLS_KEY=$work/key.pem PROXY_PORT=0 BACKEND_PORT=${backend##*:} \
    write_bootstrap "$work/tls.yaml" h2spec-gateway-tls
run_h2spec tls -t -k
