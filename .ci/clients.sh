#!/usr/bin/env bash
# Real clients against the built gateway: curl over HTTP/1.1 (keep-alive,
# bodies, Expect: 100-continue, HTTP/1.0's 426) and HTTP/2 on the same
# port, then both over TLS (ALPN), in front of a demo backend; headless
# Chromium (apt-installed when missing) loading a page over TLS; a gRPC
# client (grpcio, pip-installed when missing) over TLS keeping a stateful
# session across two backends; a real HTTP/1.1 server (Python's
# http.server) as an upstream, in cleartext and over TLS; WebSocket
# clients (Python's websockets, Chromium) over ws://, wss:// and wss://
# passed through by SNI; curl and Chromium decoding gzip, brotli and zstd
# from the compressor filter; Chromium's CORS preflight from a page on
# another origin, allowed and refused; a gRPC-Web client (sonora) through
# the gRPC-Web filter; an OTLP receiver on the official protos getting a
# traced request's span. Every port is chosen by the kernel
# (the CORS page's origin is a port asked of the kernel first).
# Usage: .ci/clients.sh [target/debug|target/release]   (default target/debug)
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${1:-target/debug}
if ! command -v curl >/dev/null; then
    sudo -n apt-get install -y -q curl >/dev/null 2>&1 || apt-get install -y -q curl >/dev/null
fi

# shellcheck source=.ci/common.sh
. .ci/common.sh

"$BIN/demo-backend" --listen 127.0.0.1:0 >"$work/backend.log" 2>&1 &
pids+=($!)
backend=$(await_addr "$work/backend.log" "listening on")
# shellcheck source=benches/e2e/lib.sh
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

# A browser: headless Chromium loads a page through the gateway over TLS,
# trusting exactly our certificate (its key's SPKI hash), then the
# gateway's counters say it came over HTTP/2 (ALPN).
if ! command -v chromium >/dev/null; then
    sudo -n apt-get install -y -q chromium >/dev/null 2>&1 || apt-get install -y -q chromium >/dev/null
fi
# .ci/chromium_page.py drives Chromium over its DevTools protocol with
# Python's `websockets`: installed before the first page that needs it
# (the CORS pages), not only before the WebSocket clients. On a fresh
# machine the CORS checks read nothing otherwise.
if ! python3 -c 'import websockets' 2>/dev/null; then
    python3 -m pip install -q websockets >/dev/null 2>&1 || pip install -q websockets >/dev/null
fi
spki=$(openssl x509 -in "$work/cert.pem" -pubkey -noout | openssl pkey -pubin -outform der |
    openssl dgst -sha256 -binary | base64)
tls_admin=$(await_addr "$work/gateway-tls.log" "admin on")
h2_before=$(curl -s "${tls_admin%/}/stats" | awk '$1 == "gateway_downstream_cx_http2_total" {print $2}')
page=$(timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
    --no-first-run --user-data-dir="$work/chromium" --ignore-certificate-errors-spki-list="$spki" \
    --dump-dom "$url/" 2>"$work/chromium.log" || true)
h2_after=$(curl -s "${tls_admin%/}/stats" | awk '$1 == "gateway_downstream_cx_http2_total" {print $2}')
check "Chromium loads a page over TLS" "hello from backend" "$(grep -o 'hello from backend' <<<"$page" | head -1)"
check "Chromium came over HTTP/2" "more" "$([[ ${h2_after:-0} -gt ${h2_before:-0} ]] && echo more || echo same)"

# gRPC (grpcio) over TLS with a stateful session, in front of two backends.
if ! python3 -c 'import grpc' 2>/dev/null; then
    python3 -m pip install -q grpcio >/dev/null 2>&1 || pip install -q grpcio >/dev/null
fi
"$BIN/demo-backend" --listen 127.0.0.1:0 --name b2 >"$work/backend2.log" 2>&1 &
pids+=($!)
backend2=$(await_addr "$work/backend2.log" "listening on")
cat >"$work/session.yaml" <<YAML
admin: { address: { socket_address: { address: 127.0.0.1, port_value: 0 } } }
static_resources:
  listeners:
  - name: ingress
    address: { socket_address: { address: 127.0.0.1, port_value: 0 } }
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            alpn_protocols: [h2]
            tls_certificates:
            - certificate_chain: { filename: $work/cert.pem }
              private_key: { filename: $work/key.pem }
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: "/" }
                route: { cluster: backends }
          http_filters:
          - name: envoy.filters.http.stateful_session
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.stateful_session.v3.StatefulSession
              session_state:
                name: envoy.http.stateful_session.cookie
                typed_config:
                  "@type": type.googleapis.com/envoy.extensions.http.stateful_session.cookie.v3.CookieBasedSessionState
                  cookie: { name: grpc-session, path: /, ttl: 60s }
          - name: envoy.filters.http.router
  clusters:
  - name: backends
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: { http2_protocol_options: {} }
    load_assignment:
      cluster_name: backends
      endpoints:
      - lb_endpoints:
        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: ${backend##*:} } } }
        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: ${backend2##*:} } } }
YAML
"$BIN/gateway" -c "$work/session.yaml" --shards 1 >"$work/gateway-grpc.log" 2>&1 &
pids+=($!)
grpc_gw=$(await_addr "$work/gateway-grpc.log" "listener ingress on")
if python3 .ci/grpc_session_client.py "localhost:${grpc_gw##*:}" "$work/cert.pem" 10; then
    echo "ok   gRPC over TLS keeps its stateful session"
else
    echo "FAIL gRPC over TLS with a stateful session"
    failures=$((failures + 1))
fi

# HTTP/1.1 upstreams: a real server (Python's http.server, keep-alive on)
# behind a cluster with no protocol options (HTTP/1.1, Envoy's default),
# in cleartext and over TLS (its certificate checked against trusted_ca).
python3 .ci/h1_backend.py >"$work/h1.log" 2>&1 &
pids+=($!)
h1=$(await_addr "$work/h1.log" "listening on")
python3 .ci/h1_backend.py "$work/cert.pem" "$work/key.pem" >"$work/h1tls.log" 2>&1 &
pids+=($!)
h1tls=$(await_addr "$work/h1tls.log" "listening on")
cat >"$work/upstream.yaml" <<YAML
admin: { address: { socket_address: { address: 127.0.0.1, port_value: 0 } } }
static_resources:
  listeners:
  - name: ingress
    address: { socket_address: { address: 127.0.0.1, port_value: 0 } }
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: "/tls/" }
                route: { cluster: h1tls }
              - match: { prefix: "/" }
                route: { cluster: h1 }
          http_filters:
          - name: envoy.filters.http.router
  clusters:
  - name: h1
    connect_timeout: 1s
    load_assignment:
      cluster_name: h1
      endpoints:
      - lb_endpoints:
        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: ${h1##*:} } } }
  - name: h1tls
    connect_timeout: 1s
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni: localhost
        common_tls_context:
          validation_context:
            trusted_ca: { filename: $work/cert.pem }
            match_typed_subject_alt_names: [{ san_type: DNS, matcher: { exact: localhost } }]
    load_assignment:
      cluster_name: h1tls
      endpoints:
      - lb_endpoints:
        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: ${h1tls##*:} } } }
YAML
"$BIN/gateway" -c "$work/upstream.yaml" --shards 1 >"$work/gateway-h1.log" 2>&1 &
pids+=($!)
up=$(await_addr "$work/gateway-h1.log" "listener ingress on")
check "HTTP/1.1 upstream: HTTP/2 client" "200 hello h1 from python /a?b=1" \
    "$(curl -s -w '%{http_code} ' --http2-prior-knowledge "http://$up/a?b=1" -o "$work/h1.out"; cat "$work/h1.out")"
check "HTTP/1.1 upstream: POST body" "posted" "$(curl -s -d posted "http://$up/echo")"
peers=$(for _ in 1 2 3; do curl -s -D - -o /dev/null "http://$up/" | tr -d '\r' | awk -F': ' '$1 == "x-peer" {print $2}'; done | sort -u | wc -l)
check "HTTP/1.1 upstream: one kept-alive connection for three requests" "1" "$peers"
check "HTTP/1.1 upstream over TLS (trusted_ca, SAN matcher)" "200 hello h1 from python /tls/x" \
    "$(curl -s -w '%{http_code} ' "http://$up/tls/x" -o "$work/h1tls.out"; cat "$work/h1tls.out")"

# Compression: three TLS listeners, each with one compressor (gzip, brotli,
# zstd), in front of the HTTP/1.1 server's 30 KB page. curl decodes each
# (`--compressed`, asking for that coding) to the page the server sent;
# headless Chromium (which asks for gzip, br and zstd over TLS) loads the
# page through each and reads it whole, and the listener's compressor
# counts the response it compressed.
direct=$(curl -s "http://$h1/page/x" | sha256sum)
# A listener on port 0 serving TLS (the certificate above, h2 and
# http/1.1) into a connection manager: its head, to its `route_config`.
tls_listener() { # name
    cat <<YAML
  - name: $1
    address: { socket_address: { address: 127.0.0.1, port_value: 0 } }
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            tls_certificates: [ { certificate_chain: { filename: $work/cert.pem }, private_key: { filename: $work/key.pem } } ]
            alpn_protocols: [h2, http/1.1]
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: $1
YAML
}
compressor() { # name, library type
    tls_listener "$1"
    cat <<YAML
          route_config:
            virtual_hosts: [ { name: all, domains: ["*"], routes: [ { match: { prefix: "/" }, route: { cluster: h1 } } ] } ]
          http_filters:
          - name: envoy.filters.http.compressor
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.compressor.v3.Compressor
              compressor_library: { name: $1, typed_config: { "@type": type.googleapis.com/envoy.extensions.compression.$2 } }
          - name: envoy.filters.http.router
YAML
}
{
    echo "admin: { address: { socket_address: { address: 127.0.0.1, port_value: 0 } } }"
    echo "static_resources:"
    echo "  listeners:"
    compressor gz gzip.compressor.v3.Gzip
    compressor br brotli.compressor.v3.Brotli
    compressor zs zstd.compressor.v3.Zstd
    cat <<YAML
  clusters:
  - name: h1
    connect_timeout: 1s
    load_assignment:
      cluster_name: h1
      endpoints: [ { lb_endpoints: [ { endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: ${h1##*:} } } } } ] } ]
YAML
} >"$work/compress.yaml"
"$BIN/gateway" -c "$work/compress.yaml" --shards 1 >"$work/gateway-compress.log" 2>&1 &
pids+=($!)
zs=$(await_addr "$work/gateway-compress.log" "listener zs on")
gz=$(await_addr "$work/gateway-compress.log" "listener gz on")
br=$(await_addr "$work/gateway-compress.log" "listener br on")
cadmin=$(await_addr "$work/gateway-compress.log" "admin on")
compressed() { curl -s "${cadmin%/}/stats" | awk '$1 == "gateway_compressor_total{outcome=\"compressed\"}" {print $2}'; }
for pair in "gzip $gz" "br $br" "zstd $zs"; do
    coding=${pair%% *}
    at=${pair#* }
    curl -sk --compressed -H "accept-encoding: $coding" -D "$work/c.h" -o "$work/c.body" "https://localhost:${at##*:}/page/x"
    check "curl --compressed decodes $coding" "$coding $direct" \
        "$(tr -d '\r' <"$work/c.h" | awk -F': ' 'tolower($1) == "content-encoding" {print $2}') $(sha256sum <"$work/c.body")"
    before=$(compressed)
    page=$(timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
        --no-first-run --user-data-dir="$work/chromium-$coding" --ignore-certificate-errors-spki-list="$spki" \
        --dump-dom "https://localhost:${at##*:}/page/x" 2>"$work/chromium-$coding.log" || true)
    check "Chromium decodes $coding: the whole page" "row 799: the quick brown fox the end" \
        "$(grep -o 'row 799: the quick brown fox' <<<"$page" | head -1) $(grep -o 'the end' <<<"$page" | head -1)"
    check "Chromium's page came $coding-compressed" "more" "$([[ $(compressed) -gt ${before:-0} ]] && echo more || echo same)"
done

# CORS: a page on one origin (a TLS listener's direct response) whose
# script POSTs, with a field that makes Chromium send a preflight, to an
# API on another origin (a second listener, the CORS filter before the
# HTTP/1.1 server's echo). The API's policy takes the page's origin: the
# gateway answers the preflight and Chromium reads the echo. A second API
# whose policy takes another origin: the preflight goes to the backend,
# which refuses it, and Chromium blocks the request.
site_port=$(free_port)
cors_api() { # name, allowed origin
    tls_listener "$1"
    cat <<YAML
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              typed_per_filter_config:
                envoy.filters.http.cors:
                  "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy
                  allow_origin_string_match: [ { exact: "$2" } ]
                  allow_methods: POST
                  allow_headers: x-token
              routes: [ { match: { prefix: "/" }, route: { cluster: h1 } } ]
          http_filters:
          - name: envoy.filters.http.cors
            typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors }
          - name: envoy.filters.http.router
YAML
}
page_html='<html><body><p id=out>pending</p><script>
const api = new URLSearchParams(location.search).get("api");
fetch(api + "/echo", { method: "POST", headers: { "x-token": "1" }, body: "allowed by CORS" })
  .then(r => r.text()).then(t => { document.getElementById("out").textContent = t; })
  .catch(() => { document.getElementById("out").textContent = "blocked"; });
</script></body></html>'
{
    echo "admin: { address: { socket_address: { address: 127.0.0.1, port_value: 0 } } }"
    echo "static_resources:"
    echo "  listeners:"
    cat <<YAML
  - name: site
    address: { socket_address: { address: 127.0.0.1, port_value: $site_port } }
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            tls_certificates: [ { certificate_chain: { filename: $work/cert.pem }, private_key: { filename: $work/key.pem } } ]
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: site
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: "/" }
                direct_response: { status: 200, body: { filename: $work/page.html } }
                response_headers_to_add: [ { header: { key: content-type, value: text/html } } ]
          http_filters:
          - name: envoy.filters.http.router
YAML
    cors_api api "https://localhost:$site_port"
    cors_api api2 "https://elsewhere.example"
    cat <<YAML
  clusters:
  - name: h1
    connect_timeout: 1s
    load_assignment:
      cluster_name: h1
      endpoints: [ { lb_endpoints: [ { endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: ${h1##*:} } } } } ] } ]
YAML
} >"$work/cors.yaml"
printf '%s' "$page_html" >"$work/page.html"
"$BIN/gateway" -c "$work/cors.yaml" --shards 1 >"$work/gateway-cors.log" 2>&1 &
pids+=($!)
api=$(await_addr "$work/gateway-cors.log" "listener api on")
api2=$(await_addr "$work/gateway-cors.log" "listener api2 on")
await_addr "$work/gateway-cors.log" "listener site on" >/dev/null
cors_page() { # api address
    timeout 60 python3 .ci/chromium_page.py "https://localhost:$site_port/?api=https://localhost:${1##*:}" out pending 30 -- \
        --no-sandbox --disable-gpu --disable-background-networking --no-first-run \
        --ignore-certificate-errors-spki-list="$spki" 2>"$work/chromium-cors.log" || true
}
check "Chromium's cross-origin POST after a preflight the gateway answers" "allowed by CORS" "$(cors_page "$api")"
check "Chromium's cross-origin POST from an origin the policy does not take" "blocked" "$(cors_page "$api2")"

# Envoy's examples as they are written: a listener without a name (Envoy
# names it), traffic_direction set, and an X.509 v1 certificate (what
# `openssl x509 -req` makes, no SAN) served to curl, which trusts it.
openssl ecparam -name prime256v1 -genkey -noout -out "$work/v1-key.pem"
openssl req -new -key "$work/v1-key.pem" -subj /CN=v1.example.com -out "$work/v1.csr" 2>/dev/null
openssl x509 -req -in "$work/v1.csr" -signkey "$work/v1-key.pem" -days 2 -out "$work/v1-cert.pem" 2>/dev/null
cat >"$work/v1.yaml" <<YAML
admin: { address: { socket_address: { address: 127.0.0.1, port_value: 0 } } }
static_resources:
  listeners:
  - address: { socket_address: { address: 127.0.0.1, port_value: 0 } }
    traffic_direction: INBOUND
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            tls_certificates:
            - certificate_chain: { filename: $work/v1-cert.pem }
              private_key: { filename: $work/v1-key.pem }
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: v1
          route_config:
            virtual_hosts:
            - { name: all, domains: ["*"], routes: [{ match: { prefix: "/" }, route: { cluster: demo } }] }
          http_filters:
          - name: envoy.filters.http.router
            typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
  clusters:
  - name: demo
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: { http2_protocol_options: {} }
    load_assignment:
      cluster_name: demo
      endpoints:
      - lb_endpoints:
        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: ${backend##*:} } } }
YAML
"$BIN/gateway" -c "$work/v1.yaml" --shards 1 >"$work/gateway-v1.log" 2>&1 &
pids+=($!)
v1=$(await_addr "$work/gateway-v1.log" "listener .* on")
check "an unnamed listener serving an X.509 v1 certificate" "200" \
    "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$work/v1-cert.pem" \
        --resolve "v1.example.com:${v1##*:}:127.0.0.1" "https://v1.example.com:${v1##*:}/")"

# WebSocket: a real server (.ci/ws_backend.py, RFC 6455 echo) behind a
# route that enables upgrades; Python's `websockets` (installed with
# Chromium above) over ws:// and wss:// (HTTP/1.1 by ALPN), headless
# Chromium over wss:// from a page the gateway itself serves (a direct
# response), and wss:// passed through by SNI (tls_inspector + tcp_proxy)
# to a TLS WebSocket server whose certificate the client checks.
python3 .ci/ws_backend.py --listen 127.0.0.1:0 >"$work/ws.log" 2>&1 &
pids+=($!)
ws=$(await_addr "$work/ws.log" "listening on")
python3 .ci/ws_backend.py --listen 127.0.0.1:0 --tls "$work/cert.pem" "$work/key.pem" >"$work/wss.log" 2>&1 &
pids+=($!)
wss=$(await_addr "$work/wss.log" "listening on")
cat >"$work/ws.yaml" <<YAML
admin: { address: { socket_address: { address: 127.0.0.1, port_value: 0 } } }
static_resources:
  listeners:
  - name: ingress
    address: { socket_address: { address: 127.0.0.1, port_value: 0 } }
    listener_filters:
    - name: envoy.filters.listener.tls_inspector
      typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector }
    filter_chains:
    - filter_chain_match: { server_names: [passthrough.localhost] }
      filters:
      - name: envoy.filters.network.tcp_proxy
        typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: wss, cluster: wss }
    - filter_chain_match: { transport_protocol: tls }
      transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            alpn_protocols: [h2, http/1.1]
            tls_certificates:
            - certificate_chain: { filename: $work/cert.pem }
              private_key: { filename: $work/key.pem }
      filters: &hcm
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ws
          http2_protocol_options: { allow_connect: true }
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: "/ws" }
                route: { cluster: ws, upgrade_configs: [{ upgrade_type: websocket }] }
              - match: { path: "/" }
                response_headers_to_add: [{ header: { key: content-type, value: text/html }, append_action: OVERWRITE_IF_EXISTS_OR_ADD }]
                direct_response:
                  status: 200
                  body:
                    inline_string: |
                      <html><body><pre id="out">pending</pre><script>
                      const ws = new WebSocket("wss://" + location.host + "/ws");
                      ws.onopen = () => ws.send("from chromium");
                      ws.onmessage = (e) => { document.getElementById("out").textContent = e.data; ws.close(); };
                      ws.onerror = () => { document.getElementById("out").textContent = "error"; };
                      </script></body></html>
          http_filters:
          - name: envoy.filters.http.router
    - filter_chain_match: { transport_protocol: raw_buffer }
      filters: *hcm
  clusters:
  - name: ws
    connect_timeout: 1s
    load_assignment:
      cluster_name: ws
      endpoints:
      - lb_endpoints:
        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: ${ws##*:} } } }
  - name: wss
    connect_timeout: 1s
    load_assignment:
      cluster_name: wss
      endpoints:
      - lb_endpoints:
        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: ${wss##*:} } } }
YAML
"$BIN/gateway" -c "$work/ws.yaml" --shards 1 >"$work/gateway-ws.log" 2>&1 &
pids+=($!)
wsgw=$(await_addr "$work/gateway-ws.log" "listener ingress on")
ws_client() { # url [sni host]: sends a text and a 100 kB binary message, prints the echoes
    python3 - "$@" "$work/cert.pem" <<'PY'
import asyncio, ssl, sys
import websockets
async def main(url, ca):
    ctx = ssl.create_default_context(cafile=ca) if url.startswith("wss") else None
    async with websockets.connect(url, ssl=ctx, open_timeout=10) as ws:
        await ws.send("hello")
        text = await asyncio.wait_for(ws.recv(), 10)
        await ws.send(b"\x00\x01" * 50000)
        binary = await asyncio.wait_for(ws.recv(), 10)
        print(text, len(binary))
asyncio.run(main(sys.argv[1], sys.argv[-1]))
PY
}
check "WebSocket (Python websockets) over ws://" "echo: hello 100006" \
    "$(timeout 30 bash -c "$(declare -f ws_client); work=$work; ws_client ws://localhost:${wsgw##*:}/ws" 2>&1)"
check "WebSocket (Python websockets) over wss://" "echo: hello 100006" \
    "$(timeout 30 bash -c "$(declare -f ws_client); work=$work; ws_client wss://localhost:${wsgw##*:}/ws" 2>&1)"
# The same client through the passthrough chain: its TLS is the backend's,
# reached by the name the gateway's table sends to tcp_proxy.
check "WebSocket over wss:// passed through by SNI (tcp_proxy)" "echo: hello 100006" \
    "$(timeout 30 python3 - "${wsgw##*:}" "$work/cert.pem" <<'PY' 2>&1
import asyncio, socket, ssl, sys
import websockets
async def main(port, ca):
    ctx = ssl.create_default_context(cafile=ca)
    ctx.check_hostname = False  # the backend's certificate names localhost
    sock = socket.create_connection(("127.0.0.1", int(port)))
    async with websockets.connect("wss://passthrough.localhost/ws", sock=sock, ssl=ctx,
                                  server_hostname="passthrough.localhost", open_timeout=10) as ws:
        await ws.send("hello")
        text = await asyncio.wait_for(ws.recv(), 10)
        await ws.send(b"\x00\x01" * 50000)
        binary = await asyncio.wait_for(ws.recv(), 10)
        print(text, len(binary))
asyncio.run(main(sys.argv[1], sys.argv[2]))
PY
)"
ws_admin=$(await_addr "$work/gateway-ws.log" "admin on")
# `--dump-dom` dumps at the load event, before the WebSocket's answer: the
# page is read over Chromium's DevTools protocol until its text changes.
counter() { # name: its value in the WebSocket gateway's /stats
    curl -s "${ws_admin%/}/stats" | awk -v n="$1" '$1 == n {print $2}'
}
chromium_ws() { # extra Chromium flags...
    timeout 60 python3 .ci/chromium_page.py "https://localhost:${wsgw##*:}/" out pending 30 -- \
        --no-sandbox --disable-gpu --disable-background-networking --no-first-run \
        --ignore-certificate-errors-spki-list="$spki" "$@" 2>&1
}
# The page comes over HTTP/2 (ALPN), whose SETTINGS allow extended
# CONNECT (`allow_connect`): Chromium opens its WebSocket as a stream of
# that connection (RFC 8441), no HTTP/1.1 connection is made.
h1_before=$(counter gateway_downstream_cx_http1_total)
# Chromium now and then gives nothing back on this page (about one run in
# five, before the page's answer): what it said is printed, and it gets
# one more try.
ws_h2=$(chromium_ws)
if [[ $ws_h2 != "echo: from chromium" ]]; then
    echo "Chromium's WebSocket over HTTP/2, first try: ${ws_h2:-(nothing)}; trying once more" >&2
    ws_h2=$(chromium_ws)
fi
check "Chromium's WebSocket over HTTP/2 (RFC 8441, wss://)" "echo: from chromium" "$ws_h2"
check "Chromium's WebSocket came over HTTP/2" "$h1_before" "$(counter gateway_downstream_cx_http1_total)"
# With HTTP/2 off, the same page upgrades an HTTP/1.1 connection.
check "Chromium's WebSocket over HTTP/1.1 (wss://)" "echo: from chromium" "$(chromium_ws --disable-http2)"
check "Chromium's WebSocket came over HTTP/1.1" "more" \
    "$([[ $(counter gateway_downstream_cx_http1_total) -gt $h1_before ]] && echo more || echo same)"
tunnels=
for _ in $(seq 50); do
    tunnels=$(counter gateway_tunnel_cx_active)
    [[ $tunnels == 0 ]] && break
    sleep 0.1
done
check "WebSocket tunnels all closed" "0" "$tunnels"

# gRPC-Web: a real gRPC-Web client (Python's sonora, pip-installed when
# missing) through the gRPC-Web filter to the demo backend's gRPC echo.
if ! python3 -c 'import sonora' 2>/dev/null; then
    python3 -m pip install -q sonora >/dev/null 2>&1 || pip install -q sonora >/dev/null
fi
cat >"$work/grpc-web.yaml" <<YAML
admin: { address: { socket_address: { address: 127.0.0.1, port_value: 0 } } }
static_resources:
  listeners:
  - name: ingress
    address: { socket_address: { address: 127.0.0.1, port_value: 0 } }
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: "/" }
                route: { cluster: grpc }
          http_filters:
          - name: envoy.filters.http.grpc_web
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.grpc_web.v3.GrpcWeb
          - name: envoy.filters.http.router
  clusters:
  - name: grpc
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: { http2_protocol_options: {} }
    load_assignment:
      cluster_name: grpc
      endpoints:
      - lb_endpoints:
        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: ${backend##*:} } } }
YAML
"$BIN/gateway" -c "$work/grpc-web.yaml" --shards 1 >"$work/gateway-grpc-web.log" 2>&1 &
pids+=($!)
web_gw=$(await_addr "$work/gateway-grpc-web.log" "listener ingress on")
web=$(timeout 30 python3 .ci/grpc_web_client.py "$web_gw" 2>&1 || true)
check "gRPC-Web client (sonora) echoed" "hello from grpc-web" "$(sed -n 1p <<<"$web")"
check "gRPC-Web client sees the backend's failure" "NOT_FOUND not here" "$(sed -n 2p <<<"$web")"

# Tracing: an OTLP receiver on the official generated protos (Python's
# opentelemetry-proto, pip-installed when missing) gets the span of a
# request that came with a W3C context, decoded independently of ours.
if ! python3 -c 'import opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc' 2>/dev/null; then
    python3 -m pip install -q opentelemetry-proto >/dev/null 2>&1 || pip install -q opentelemetry-proto >/dev/null
fi
python3 .ci/otlp_receiver.py "$work/otlp.port" >"$work/otlp.spans" 2>"$work/otlp.log" &
pids+=($!)
for _ in $(seq 100); do [[ -s $work/otlp.port ]] && break; sleep 0.1; done
otlp_port=$(cat "$work/otlp.port")
cat >"$work/tracing.yaml" <<YAML
admin: { address: { socket_address: { address: 127.0.0.1, port_value: 0 } } }
static_resources:
  listeners:
  - name: ingress
    address: { socket_address: { address: 127.0.0.1, port_value: 0 } }
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          tracing:
            provider:
              name: envoy.tracers.opentelemetry
              typed_config:
                "@type": type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig
                grpc_service: { envoy_grpc: { cluster_name: otel }, timeout: 1s }
                service_name: ci-gateway
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: "/" }
                route: { cluster: backend }
                decorator: { operation: ciOperation }
          http_filters:
          - name: envoy.filters.http.router
  clusters:
  - name: backend
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: { http2_protocol_options: {} }
    load_assignment:
      cluster_name: backend
      endpoints:
      - lb_endpoints:
        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: ${backend##*:} } } }
  - name: otel
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: { http2_protocol_options: {} }
    load_assignment:
      cluster_name: otel
      endpoints:
      - lb_endpoints:
        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: $otlp_port } } }
YAML
"$BIN/gateway" -c "$work/tracing.yaml" --shards 1 >"$work/gateway-tracing.log" 2>&1 &
pids+=($!)
trace_gw=$(await_addr "$work/gateway-tracing.log" "listener ingress on")
curl -s -o /dev/null -H 'traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' "http://$trace_gw/"
span=
for _ in $(seq 50); do
    span=$(head -1 "$work/otlp.spans" 2>/dev/null || true)
    [[ -n $span ]] && break
    sleep 0.1
done
span_fields=$(python3 -c 'import json,sys; s=json.loads(sys.argv[1] or "{}"); print(s.get("service"), s.get("name"), s.get("kind"), s.get("trace_id"), s.get("parent_span_id"), s.get("status_code"))' "$span")
check "OTLP receiver (opentelemetry-proto) got the span" \
    "ci-gateway ciOperation 2 0af7651916cd43dd8448eb211c80319c b7ad6b7169203331 200" "$span_fields"

# The admin's live dashboard in headless Chromium: it loads, its values
# match /stats/prometheus, its charts move with traffic, a hostile cluster
# name shows as text; the screenshot is the one in docs/observability.md.
cat >"$work/dashboard.yaml" <<YAML
admin: { address: { socket_address: { address: 127.0.0.1, port_value: 0 } } }
static_resources:
  listeners:
  - name: ingress
    address: { socket_address: { address: 127.0.0.1, port_value: 0 } }
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { path: /odd }
                route: { cluster: "<img src=x onerror=alert(1)>" }
              - match: { prefix: / }
                route: { cluster: backend }
          http_filters:
          - name: envoy.filters.http.router
  clusters:
  - name: backend
    type: STATIC
    connect_timeout: 1s
    load_assignment:
      cluster_name: backend
      endpoints: [ { lb_endpoints: [ { endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: ${h1##*:} } } } } ] } ]
  - name: "<img src=x onerror=alert(1)>"
    type: STATIC
    connect_timeout: 1s
    load_assignment:
      cluster_name: odd
      endpoints: [ { lb_endpoints: [ { endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: ${h1##*:} } } } } ] } ]
YAML
"$BIN/gateway" -c "$work/dashboard.yaml" --shards 1 >"$work/gateway-dashboard.log" 2>&1 &
pids+=($!)
dash_gw=$(await_addr "$work/gateway-dashboard.log" "listener ingress on")
dash_admin=$(await_addr "$work/gateway-dashboard.log" "admin on http://")
dash_admin=${dash_admin%/}
dash=$(cd .ci && timeout 90 python3 dashboard_check.py "${dash_admin#http://}" "$dash_gw" "$work/dashboard.png" -- \
    --no-sandbox --disable-gpu --disable-background-networking --no-first-run 2>"$work/chromium-dashboard.log" || true)
check "the admin dashboard in Chromium (values, charts, listeners, escaping, screenshot): 11 checks passed" "11" "$(grep -c '^ok' <<<"$dash" || true)"
if [[ $(grep -c '^ok' <<<"$dash" || true) != 11 ]]; then
    echo "dashboard check said: $dash" >&2
    tail -20 "$work/chromium-dashboard.log" >&2 || true
fi

if [[ $failures -gt 0 ]]; then
    echo "clients: $failures failures; gateway log:" >&2
    cat "$work/gateway.log" >&2
    exit 1
fi
echo "clients: all passed"
