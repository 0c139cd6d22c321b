#!/usr/bin/env bash
# A victim's latency on an established TLS (h2) connection to the gateway
# (or, with --target haproxy, to HAProxy with the same certificate and
# backend), alone and then while a handshake flood runs against the same
# listener: N `openssl s_time -new` processes, each a closed loop of full
# TLS handshakes. Prints h2load's latency line for both runs and the
# gateway's handshake counters. The proxy runs alone on --proxy-cpus; the
# clients and the backend share the other CPU, so on a 2-core VM the flood
# is bounded by that CPU, not the proxy's (see docs/security.md), and
# HAProxy under the same flood tells what of the victim's latency is its
# client's share of that CPU.
# Usage: benches/e2e/handshake_flood.sh [--flood N] [--duration S]
#        [--proxy-cpus LIST] [--client-cpus LIST] [--target gateway|haproxy]
#        [--no-build]
set -euo pipefail
cd "$(dirname "$0")/../.."
FLOOD=16 DURATION=5 PROXY_CPUS=1 CLIENT_CPUS=0 BUILD=1 TARGET=gateway
while [[ $# -gt 0 ]]; do
    case $1 in
        --flood) FLOOD=$2; shift ;;
        --target) TARGET=$2; shift ;;
        --duration) DURATION=$2; shift ;;
        --proxy-cpus) PROXY_CPUS=$2; shift ;;
        --client-cpus) CLIENT_CPUS=$2; shift ;;
        --no-build) BUILD=0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
case $TARGET in
    gateway|haproxy) ;;
    *) echo "--target: gateway or haproxy, not $TARGET" >&2; exit 2 ;;
esac
[[ $BUILD == 1 ]] && cargo build --release -q -p gateway -p demo-backend --bins
# shellcheck source=.ci/common.sh
. .ci/common.sh
# shellcheck source=benches/e2e/lib.sh
. benches/e2e/lib.sh
make_test_cert "$work"
taskset -c "$CLIENT_CPUS" target/release/demo-backend --listen 127.0.0.1:0 >"$work/backend.log" 2>&1 &
pids+=($!)
backend=$(await_addr "$work/backend.log" "listening on")
if [[ $TARGET == haproxy ]]; then
    PROXY_PORT=$(free_port)
    # shellcheck disable=SC2034 # read by write_haproxy_cfg (lib.sh)
    SHARDS=1
    TLS_CERT=$work/cert.pem TLS_KEY=$work/key.pem BACKEND_PORT=${backend##*:} \
        write_haproxy_cfg "$work/haproxy.cfg" 4000
    taskset -c "$PROXY_CPUS" haproxy -db -f "$work/haproxy.cfg" >"$work/haproxy.log" 2>&1 &
    pids+=($!)
    wait_listen "$PROXY_PORT" "${pids[-1]}"
    gw=127.0.0.1:$PROXY_PORT
    admin=
else
    TLS_CERT=$work/cert.pem TLS_KEY=$work/key.pem PROXY_PORT=0 BACKEND_PORT=${backend##*:} \
        write_bootstrap "$work/gateway.yaml" flood-gateway
    taskset -c "$PROXY_CPUS" target/release/gateway -c "$work/gateway.yaml" --shards 1 \
        >"$work/gateway.log" 2>&1 &
    pids+=($!)
    gw=$(await_addr "$work/gateway.log" "listener ingress on")
    admin=$(await_addr "$work/gateway.log" "admin on")
fi
victim() {
    timeout $((DURATION + 15)) taskset -c "$CLIENT_CPUS" h2load -c1 -m1 -D "$DURATION" \
        "https://127.0.0.1:${gw##*:}/" 2>&1 | grep -E "^requests:|^time for request" ||
        echo "victim failed"
}
echo "== $TARGET: victim alone (one TLS h2 connection, one request at a time)"
victim
for _ in $(seq "$FLOOD"); do
    timeout $((DURATION + 5)) taskset -c "$CLIENT_CPUS" openssl s_time \
        -connect "127.0.0.1:${gw##*:}" -new -time $((DURATION + 3)) >/dev/null 2>&1 &
    pids+=($!)
done
sleep 1
echo "== $TARGET: victim during a flood of $FLOOD s_time processes"
victim
if [[ -n $admin ]]; then
    curl -s "${admin%/}/stats" | grep -E '^gateway_downstream_tls_handshake(_abandoned|_timeout|_error)? '
fi
