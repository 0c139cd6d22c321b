#!/usr/bin/env bash
# Real clients against the built gateway: curl over HTTP/1.1 (keep-alive,
# bodies, Expect: 100-continue, HTTP/1.0's 426) and HTTP/2 on the same
# port, then both over TLS (ALPN), in front of a demo backend; every port
# chosen by the kernel.
# Usage: .ci/clients.sh [target/debug|target/release]   (default target/debug)
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${1:-target/debug}
if ! command -v curl >/dev/null; then
    sudo -n apt-get install -y -q curl >/dev/null 2>&1 || apt-get install -y -q curl >/dev/null
fi

# shellcheck source=common.sh
. .ci/common.sh

"$BIN/demo-backend" --listen 127.0.0.1:0 >"$work/backend.log" 2>&1 &
pids+=($!)
backend=$(await_addr "$work/backend.log" "listening on")
# shellcheck source=../benches/e2e/lib.sh
. benches/e2e/lib.sh
PROXY_PORT=0 BACKEND_PORT=${backend##*:} write_bootstrap "$work/bootstrap.yaml" clients-gateway
"$BIN/gateway" -c "$work/bootstrap.yaml" --shards 1 >"$work/gateway.log" 2>&1 &
pids+=($!)
gw=$(await_addr "$work/gateway.log" "listener ingress on")

failures=0
check() { # name, expected, actual
    if [[ "$2" == "$3" ]]; then
        echo "ok   $1"
    else
        echo "FAIL $1: expected '$2', got '$3'"
        failures=$((failures + 1))
    fi
}

check "HTTP/1.1 keep-alive: two requests, one connection" "200 1 1.1;200 0 1.1;" \
    "$(curl -s -o /dev/null -o /dev/null -w '%{http_code} %{num_connects} %{http_version};' "http://$gw/" "http://$gw/")"
check "HTTP/1.1 body echoed" "echo me" "$(curl -s -d 'echo me' "http://$gw/echo")"
head -c 2000000 /dev/urandom >"$work/upload"
curl -s -H 'Expect: 100-continue' --data-binary "@$work/upload" "http://$gw/echo" -o "$work/echoed"
check "HTTP/1.1 2 MB upload with Expect: 100-continue" "$(sha256sum <"$work/upload")" "$(sha256sum <"$work/echoed")"
check "HTTP/1.0 refused with 426" "426" "$(curl -s -o /dev/null -w '%{http_code}' --http1.0 "http://$gw/")"
check "HTTP/2 on the same port" "200 2" \
    "$(curl -s -o /dev/null -w '%{http_code} %{http_version}' --http2-prior-knowledge "http://$gw/")"

# The same over TLS: ALPN picks the protocol.
make_test_cert "$work"
TLS_CERT=$work/cert.pem TLS_KEY=$work/key.pem PROXY_PORT=0 BACKEND_PORT=${backend##*:} \
    write_bootstrap "$work/tls.yaml" clients-gateway-tls
"$BIN/gateway" -c "$work/tls.yaml" --shards 1 >"$work/gateway-tls.log" 2>&1 &
pids+=($!)
tls=$(await_addr "$work/gateway-tls.log" "listener ingress on")
url="https://localhost:${tls##*:}"
check "TLS: HTTP/2 by ALPN" "200 2" \
    "$(curl -s --cacert "$work/cert.pem" -o /dev/null -w '%{http_code} %{http_version}' "$url/")"
check "TLS: HTTP/1.1 by ALPN, keep-alive" "200 1 1.1;200 0 1.1;" \
    "$(curl -s --cacert "$work/cert.pem" --http1.1 -o /dev/null -o /dev/null \
        -w '%{http_code} %{num_connects} %{http_version};' "$url/" "$url/")"
check "TLS: 2 MB upload over HTTP/2" "$(sha256sum <"$work/upload")" \
    "$(curl -s --cacert "$work/cert.pem" --data-binary "@$work/upload" "$url/echo" | sha256sum)"
check "TLS: a client that does not trust the certificate is refused" "60" \
    "$(curl -s -o /dev/null "$url/"; echo $?)"

if [[ $failures -gt 0 ]]; then
    echo "clients: $failures failures; gateway log:" >&2
    cat "$work/gateway.log" >&2
    exit 1
fi
echo "clients: all passed"
