#!/usr/bin/env bash
# Interop check: the gateway's ADS client against go-control-plane
# (envoyproxy/go-control-plane: cache/v3 SnapshotCache + server/v3), the
# reference Go control plane, in two passes: State of the World
# (`api_type: GRPC`, StreamAggregatedResources) and Delta xDS
# (`api_type: DELTA_GRPC`, DeltaAggregatedResources, served by the same
# server from the same SnapshotCache). Both run the same scenario; where
# Delta differs by design (only changed resources are sent, so a type's
# version moves only when one of its resources changes; a NACK names the
# rejected version) the expected values say so, and Delta adds checks of
# its own (what was resent, initial_resource_versions on reconnect).
#
# Nothing is fetched from GitHub or the Go module proxy: go-control-plane and
# its Go dependencies come from Debian's golang-*-dev packages (GOPATH
# layout, GO111MODULE=off). go-control-plane is packaged only in Debian
# unstable (sid), Go 1.24 in trixie, so the .debs are fetched with a private apt state
# directory (`apt-get download`, nothing installed, the system's sources
# untouched) and unpacked with `dpkg-deb -x` under $GOCP_DIR.
#
# Usage:  interop/go-control-plane/run.sh
# Env:    GOCP_DIR     toolchain + Go sources + server binary (default /tmp/gocp-interop)
#         GW_BIN_DIR   where gateway and demo-backend are (default <repo>/target/release)
#         SKIP_CARGO=1 do not run `cargo build --release -p gateway -p demo-backend --bins`
#         IDLE_SECS    idle time for each keepalive check (default 130: long
#                      enough for grpc-go to act on 30 s PINGs, were any sent)
#         SKIP_PING_POLICY=1  skip the check against grpc-go's default server options
#         BASE_PORT    first of the loopback ports used (default 19100)
#         MODES        passes to run, in order (default "sotw delta")
# Exit status 0 only if every check passed; prints "MODE: N passed, N failed"
# per pass and ends with the totals, "N passed, N failed".
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
GOCP_DIR=${GOCP_DIR:-/tmp/gocp-interop}
GW_BIN_DIR=${GW_BIN_DIR:-$REPO/target/release}
IDLE_SECS=${IDLE_SECS:-130}
BASE_PORT=${BASE_PORT:-19100}
ADS_PORT=$BASE_PORT
LISTEN_PORT=$((BASE_PORT + 1))
ADMIN_PORT=$((BASE_PORT + 2))
BE1_PORT=$((BASE_PORT + 11))
BE2_PORT=$((BASE_PORT + 12))
WORK=$(mktemp -d /tmp/gocp-run.XXXXXX)

GO_VERSION=1.24
# Exactly the Debian packages whose sources the server imports (go list -deps).
GO_PKGS="golang-$GO_VERSION-go golang-$GO_VERSION-src
golang-github-envoyproxy-go-control-plane-dev golang-github-cncf-xds-dev
golang-github-envoyproxy-protoc-gen-validate-dev golang-cel-expr-dev
golang-github-golang-protobuf-1-5-dev golang-golang-x-net-dev
golang-golang-x-sys-dev golang-golang-x-text-dev golang-google-genproto-dev
golang-google-grpc-dev golang-google-protobuf-dev"

MODES=${MODES:-sotw delta}
MODE=sotw     # the pass running: sotw or delta
RESTARTED=0   # whether this pass's control plane was restarted
LOGDIR=$WORK  # this pass's logs: $WORK/$MODE
PASSED=0
FAILED=0
PIDS=()

log() { printf '\n== %s\n' "$*"; }
pass() { PASSED=$((PASSED + 1)); printf 'PASS %s\n' "$*"; }
fail() { FAILED=$((FAILED + 1)); printf 'FAIL %s\n' "$*"; }
info() { printf 'INFO %s\n' "$*"; }
check() { # check "description" command...
	local what=$1
	shift
	if "$@"; then pass "$what"; else fail "$what"; fi
}

cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	echo "logs kept in $WORK"
}
trap cleanup EXIT

# --- toolchain and sources -------------------------------------------------

setup_go() {
	local root=$GOCP_DIR/root
	if [ -x "$root/usr/lib/go-$GO_VERSION/bin/go" ] &&
		[ -f "$root/usr/share/gocode/src/github.com/envoyproxy/go-control-plane/pkg/cache/v3/simple.go" ]; then
		return 0
	fi
	log "fetching Go $GO_VERSION (trixie) and go-control-plane (sid) from Debian into $GOCP_DIR"
	local apt=$GOCP_DIR/apt
	mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/sources" "$apt/prefs" "$apt/debs" "$root"
	cat >"$apt/sources/sid.sources" <<-EOF
		Types: deb
		URIs: http://deb.debian.org/debian
		Suites: trixie sid
		Components: main
		Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
	EOF
	local opts=(-o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache"
		-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$apt/sources"
		-o Dir::Etc::Preferences=/dev/null -o "Dir::Etc::PreferencesParts=$apt/prefs"
		-o Dir::State::status=/dev/null -o APT::Sandbox::User=root)
	apt-get "${opts[@]}" -q update >"$apt/update.log" 2>&1 || {
		cat "$apt/update.log"
		return 1
	}
	# shellcheck disable=SC2086
	(cd "$apt/debs" && apt-get "${opts[@]}" -q download $GO_PKGS) >"$apt/download.log" 2>&1 || {
		cat "$apt/download.log"
		return 1
	}
	local f
	for f in "$apt"/debs/*.deb; do dpkg-deb -x "$f" "$root" || return 1; done
	for f in "$apt"/debs/*.deb; do
		printf '%s %s\n' "$(dpkg-deb -f "$f" Package)" "$(dpkg-deb -f "$f" Version)"
	done >"$GOCP_DIR/versions.txt"
}

go_env() {
	export GOROOT=$GOCP_DIR/root/usr/lib/go-$GO_VERSION
	export PATH=$GOROOT/bin:$PATH
	export GOPATH=$GOCP_DIR/root/usr/share/gocode
	export GO111MODULE=off GOFLAGS= GOPROXY=off GOTOOLCHAIN=local
	export GOCACHE=$GOCP_DIR/gocache
}

build_server() {
	local bin=$GOCP_DIR/xds-server
	if [ -x "$bin" ] && [ "$bin" -nt "$HERE/main.go" ]; then return 0; fi
	log "building the go-control-plane server ($(go version))"
	(cd "$HERE" && go vet . && go build -o "$bin" .)
}

# --- helpers ---------------------------------------------------------------

wait_until() { # wait_until SECONDS command...
	local deadline=$((SECONDS + $1))
	shift
	until "$@"; do
		[ $SECONDS -ge $deadline ] && return 1
		sleep 0.2
	done
}

get() { curl -s -m 5 --http2-prior-knowledge "http://127.0.0.1:$LISTEN_PORT${1:-/}"; }
code() { curl -s -m 5 --http2-prior-knowledge -o /dev/null -w '%{http_code}' "http://127.0.0.1:$LISTEN_PORT${1:-/}"; }
admin() { curl -s -m 5 "http://127.0.0.1:$ADMIN_PORT$1"; }
stat() { admin /stats | awk -v n="$1" '$1 == n { print $2 }'; }
stat_is() { [ "$(stat "$1")" = "$2" ]; }

# "clusters=V endpoints=V listeners=V routes=V" from /config_dump's xds object.
versions() {
	admin /config_dump | python3 -c '
import json, sys
d = json.load(sys.stdin)["xds"]
print(" ".join("%s=%s" % (t["type"], t["version_info"]) for t in d["resources"]))'
}
# want V: the versions /config_dump shows once snapshot V is served. State
# of the World sends every type each time (but a NACKed cluster stays at
# 8 under 9). Delta sends only what changed: the endpoints change with
# every version; the cluster at 9 (NACKed: stays at 1) and at 10 (good
# again); the listener and routes never after 1. (A restarted server's
# version 1 is sent as an empty first response for the wildcards.)
want() {
	local v=$1
	if [ "$MODE" = sotw ]; then
		[ "$v" = 9 ] && echo "clusters=8 endpoints=9 listeners=9 routes=9" && return
		echo "clusters=$v endpoints=$v listeners=$v routes=$v"
	else
		local c=1
		[ "$v" -ge 10 ] && c=10
		echo "clusters=$c endpoints=$v listeners=1 routes=1"
	fi
}
all_at() { [ "$(versions 2>/dev/null)" = "$(want "$1")" ]; }
# xds_field TYPE KEY: one field of a type's entry in /config_dump's xds object.
xds_field() {
	admin /config_dump | python3 -c '
import json, sys
d = json.load(sys.stdin)["xds"]
t = [t for t in d["resources"] if t["type"] == sys.argv[1]][0]
print(json.dumps(t[sys.argv[2]]))' "$1" "$2"
}

# acked_types V: the types a response of snapshot V goes out for (see want).
acked_types() {
	if [ "$MODE" = sotw ] || { [ "$1" = 1 ] && [ "$RESTARTED" = 0 ]; }; then
		echo Cluster ClusterLoadAssignment Listener RouteConfiguration
	elif [ "$1" = 1 ]; then
		echo Cluster ClusterLoadAssignment Listener
	elif [ "$1" = 10 ]; then
		echo Cluster ClusterLoadAssignment
	else
		echo ClusterLoadAssignment
	fi
}
# Every type sent at version V ACKed at V on the control plane's side.
acked_all() {
	local v=$1 t
	for t in $(acked_types "$v"); do
		grep -q "REQUEST ACK .* type=$t version=\"$v\"" "$CP_LOG" || return 1
	done
}
# responses_at V: "type:count" of each response sent at version V.
responses_at() {
	grep "RESPONSE .*version=\"$1\"" "$CP_LOG" | sed -E 's/.* type=([A-Za-z]+) .* resources=([0-9]+).*/\1:\2/' | sort | tr '\n' ' '
}
backends_seen() { # backends_seen N: the backend names answering N requests
	local i
	for i in $(seq "$1"); do get; echo; done | grep . | sort -u | tr '\n' ' '
}

two_listening() { [ "$(grep -cs 'listening on' "$WORK/backend.log")" -eq 2 ]; }
start_backend() {
	"$GW_BIN_DIR/demo-backend" --listen "127.0.0.1:$BE1_PORT" --listen "127.0.0.1:$BE2_PORT" \
		--name be >"$WORK/backend.log" 2>&1 &
	PIDS+=($!)
	wait_until 10 two_listening
}

CP_PID=
start_cp() { # start_cp LOGNAME [extra flags]
	CP_LOG=$LOGDIR/$1
	shift
	"$GOCP_DIR/xds-server" -port "$ADS_PORT" -listener-port "$LISTEN_PORT" \
		-backend "127.0.0.1:$BE1_PORT" -backend2 "127.0.0.1:$BE2_PORT" "$@" >"$CP_LOG" 2>&1 &
	CP_PID=$!
	PIDS+=($CP_PID)
	wait_until 10 grep -qs 'ADS server listening' "$CP_LOG"
}
stop_cp() { kill "$CP_PID" 2>/dev/null; wait "$CP_PID" 2>/dev/null; }

GW_PID=
start_gw() { # start_gw LOGNAME
	"$GW_BIN_DIR/gateway" --config "$LOGDIR/bootstrap.yaml" --shards 1 >"$LOGDIR/$1" 2>&1 &
	GW_PID=$!
	PIDS+=($GW_PID)
	wait_until 10 grep -qs 'admin on' "$LOGDIR/$1"
}
stop_gw() { kill "$GW_PID" 2>/dev/null; wait "$GW_PID" 2>/dev/null; }

write_bootstrap() { # write_bootstrap API_TYPE
	cat >"$LOGDIR/bootstrap.yaml" <<-EOF
		node: { id: gw-interop, cluster: edge }
		admin: { address: { socket_address: { address: 127.0.0.1, port_value: $ADMIN_PORT } } }
		dynamic_resources:
		  ads_config:
		    api_type: $1
		    transport_api_version: V3
		    grpc_services: [{ envoy_grpc: { cluster_name: xds } }]
		  lds_config: { ads: {}, resource_api_version: V3 }
		  cds_config: { ads: {}, resource_api_version: V3 }
		static_resources:
		  clusters:
		  - name: xds
		    type: STATIC
		    connect_timeout: 1s
		    load_assignment:
		      cluster_name: xds
		      endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: $ADS_PORT } } } }] }]
		    typed_extension_protocol_options:
		      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
		        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
		        explicit_http_config: { http2_protocol_options: {} }
	EOF
}

# --- build -----------------------------------------------------------------

setup_go || { echo "cannot set up Go and go-control-plane from Debian"; exit 2; }
go_env
build_server || { echo "cannot build the go-control-plane server"; exit 2; }
[ -f "$GOCP_DIR/versions.txt" ] && info "Debian packages: $(tr '\n' ',' <"$GOCP_DIR/versions.txt")"
if [ "${SKIP_CARGO:-0}" != 1 ]; then
	log "cargo build --release -p gateway -p demo-backend --bins"
	(cd "$REPO" && cargo build --release -p gateway -p demo-backend --bins) || { echo "cargo build failed"; exit 2; }
fi
for b in gateway demo-backend; do
	[ -x "$GW_BIN_DIR/$b" ] || { echo "missing $GW_BIN_DIR/$b"; exit 2; }
done

# --- checks ----------------------------------------------------------------

# One pass: gateway first, then the control plane, updates, a NACK, a
# control plane restart and idle checks, all against fresh processes.
run_checks() {
	local api=GRPC
	[ "$MODE" = delta ] && api=DELTA_GRPC
	RESTARTED=0
	LOGDIR=$WORK/$MODE
	mkdir -p "$LOGDIR"
	write_bootstrap "$api"
	check "bootstrap (api_type: $api) passes gateway --check" "$GW_BIN_DIR/gateway" --check --config "$LOGDIR/bootstrap.yaml"

	log "[$MODE] gateway first, control plane not up yet"
	start_gw gateway.log || { fail "gateway did not start"; return 1; }
	sleep 2
	check "/ready is 503 before the first LDS/CDS" test "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$ADMIN_PORT/ready")" = 503
	check "gateway_xds_connected 0 while the server is down" test "$(stat gateway_xds_connected)" = 0

	log "[$MODE] go-control-plane up: snapshot version 1 (endpoint be-1)"
	start_cp cp.log || { fail "go-control-plane server did not start"; return 1; }
	check "every type applied at version 1 (/config_dump)" wait_until 15 all_at 1
	check "go-control-plane saw ACKs of version 1 for CDS, EDS, LDS, RDS" wait_until 5 acked_all 1
	check "requests came over the $MODE API (api=$MODE in go-control-plane's log)" grep -q "REQUEST INITIAL .*type=Cluster .*api=$MODE" "$CP_LOG"
	check "/ready is 200" test "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$ADMIN_PORT/ready")" = 200
	check "GET / through listener 'ingress' reaches be-1" test "$(get)" = "hello from be-1"
	check "POST /echo is echoed" test "$(curl -s -m 5 --http2-prior-knowledge -d 'echo me' "http://127.0.0.1:$LISTEN_PORT/echo")" = "echo me"
	check "gateway_xds_connected 1" test "$(stat gateway_xds_connected)" = 1
	local t
	for t in clusters endpoints listeners routes; do
		check "gateway_xds_update_accepted_total{type=\"$t\"} >= 1" test "$(stat "gateway_xds_update_accepted_total{type=\"$t\"}")" -ge 1
	done
	check "RDS subscribed to [routes], EDS to [echo]" test "$(xds_field routes subscribed)$(xds_field endpoints subscribed)" = '["routes"]["echo"]'
	if [ "$MODE" = delta ]; then
		check "delta: EDS subscribed by name ([echo])" grep -q 'REQUEST INITIAL .*type=ClusterLoadAssignment .*names=\[echo\]' "$CP_LOG"
		check "delta: RDS subscribed by name ([routes])" grep -q 'REQUEST INITIAL .*type=RouteConfiguration .*names=\[routes\]' "$CP_LOG"
		for t in Cluster Listener; do
			check "delta: $t subscribed as a wildcard (no names)" grep -q "REQUEST INITIAL .*type=$t .*names=\[\] " "$CP_LOG"
		done
	fi
	check "no NACK in go-control-plane's log" bash -c "! grep -q 'REQUEST NACK' '$CP_LOG'"
	grep -E 'REQUEST (INITIAL|ACK)' "$CP_LOG" | head -8 | sed 's/^/    cp: /'

	log "[$MODE] snapshot update (SIGHUP): version 2 adds endpoint be-2"
	kill -HUP "$CP_PID"
	check "every type applied at version 2 ($(want 2))" wait_until 10 all_at 2
	check "go-control-plane saw ACKs of version 2 ($(acked_types 2))" wait_until 5 acked_all 2
	if [ "$MODE" = delta ]; then
		check "delta: version 2 sent only the changed ClusterLoadAssignment (sent: $(responses_at 2))" \
			test "$(responses_at 2)" = "ClusterLoadAssignment:1 "
	fi
	local seen
	seen=$(backends_seen 8)
	check "both endpoints serve after the update (saw: $seen)" test "$seen" = "hello from be-1 hello from be-2 "

	if command -v h2load >/dev/null; then
		log "[$MODE] 6 updates while h2load sends 30000 requests"
		h2load -n 30000 -c 4 -m 8 "http://127.0.0.1:$LISTEN_PORT/" >"$LOGDIR/h2load.txt" 2>&1 &
		local h2=$!
		sleep 0.2
		for _ in 1 2 3 4 5 6; do kill -HUP "$CP_PID"; sleep 0.1; done
		wait $h2
		grep -E '^(requests|status codes):' "$LOGDIR/h2load.txt" | sed 's/^/    /'
		check "no failed request and only 2xx during updates" grep -q '30000 succeeded, 0 failed, 0 errored, 0 timeout' "$LOGDIR/h2load.txt"
	else
		info "h2load not found (apt-get install nghttp2-client): skipping the load-during-updates check"
		for _ in 1 2 3 4 5 6; do kill -HUP "$CP_PID"; sleep 0.1; done
	fi
	check "every type applied at version 8 ($(want 8))" wait_until 10 all_at 8

	log "[$MODE] invalid update (SIGUSR1): version 9 whose cluster has connect_timeout 0s"
	local n0 nacks nacked=8
	# A Delta NACK names the rejected response (version 9); a State of the
	# World one carries the version still in use (8).
	[ "$MODE" = delta ] && nacked=9
	n0=$(grep -c 'REQUEST NACK' "$CP_LOG")
	kill -USR1 "$CP_PID"
	sleep 1
	nacks=$(($(grep -c 'REQUEST NACK' "$CP_LOG") - n0))
	check "go-control-plane saw a NACK of the Cluster (version=\"$nacked\")" grep -q "REQUEST NACK .*type=Cluster version=\"$nacked\".*connect_timeout" "$CP_LOG"
	grep -m1 'REQUEST NACK' "$CP_LOG" | sed 's/^/    cp: /'
	info "NACKs in the first second: $nacks (go-control-plane's SotW server resends a NACKed version at once, see its issue #962; its Delta server does not)"
	check "clusters keep the last good version, the rest move ($(want 9))" test "$(versions)" = "$(want 9)"
	check "/config_dump clusters error_state names version 9" test "$(xds_field clusters error_state | python3 -c 'import json,sys; print(json.load(sys.stdin)["version_info"])')" = 9
	check "gateway_xds_update_rejected_total{type=\"clusters\"} > 0" test "$(stat 'gateway_xds_update_rejected_total{type="clusters"}')" -gt 0
	check "traffic still flows during the NACKs" test "$(code)" = 200
	kill -HUP "$CP_PID"
	check "a good version 10 ends the NACKs: every type at 10 ($(want 10))" wait_until 10 all_at 10
	check "go-control-plane saw ACKs of version 10 ($(acked_types 10))" wait_until 5 acked_all 10

	log "[$MODE] control plane restart (its snapshot starts again at version 1: be-1 only)"
	local restarts0 restarts1 closed
	restarts0=$(stat gateway_xds_stream_restarts_total)
	stop_cp
	check "gateway_xds_connected 0 after the server died" wait_until 5 stat_is gateway_xds_connected 0
	check "last config still serves while the server is down" test "$(code)" = 200
	sleep 2
	RESTARTED=1
	start_cp cp-restarted.log || { fail "go-control-plane did not restart"; return 1; }
	check "gateway reconnects (gateway_xds_connected 1)" wait_until 40 stat_is gateway_xds_connected 1
	check "every type applied at the new server's version 1" wait_until 10 all_at 1
	check "go-control-plane (restarted) saw ACKs of version 1 ($(acked_types 1))" wait_until 5 acked_all 1
	if [ "$MODE" = sotw ]; then
		check "reconnect requests carry the last accepted version (10)" grep -q 'REQUEST INITIAL .*type=Cluster version="10"' "$CP_LOG"
	else
		local ty name
		for ty in Cluster:echo ClusterLoadAssignment:echo Listener:ingress RouteConfiguration:routes; do
			name=${ty#*:}
			ty=${ty%:*}
			check "delta: reconnect's $ty request has initial_resource_versions for $name" \
				grep -q "REQUEST INITIAL .*type=$ty .*initial=map\[$name:[0-9a-f]" "$CP_LOG"
		done
		# The restarted server's cluster, listener and routes hash as the
		# ones held (same content): only the endpoints differ (be-1 only).
		check "delta: the restarted server resent only the endpoints (sent: $(responses_at 1))" \
			test "$(responses_at 1)" = "Cluster:0 ClusterLoadAssignment:1 Listener:0 "
	fi
	seen=$(backends_seen 6)
	check "only be-1 serves after the server's version 1 (saw: $seen)" test "$seen" = "hello from be-1 "
	info "gateway_xds_stream_restarts_total went from $restarts0 to $(stat gateway_xds_stream_restarts_total) over one restart"

	log "[$MODE] idle ${IDLE_SECS}s on go-control-plane's example gRPC options (keepalive 30s, MinTime 30s)"
	restarts1=$(stat gateway_xds_stream_restarts_total)
	sleep "$IDLE_SECS"
	check "ADS stream survives ${IDLE_SECS}s idle (no STREAM_CLOSED, no restart)" \
		test "$(grep -c STREAM_CLOSED "$CP_LOG"):$(stat gateway_xds_stream_restarts_total)" = "0:$restarts1"
	stop_gw
	stop_cp

	if [ "${SKIP_PING_POLICY:-0}" != 1 ]; then
		log "[$MODE] idle ${IDLE_SECS}s on grpc-go's default server options (grpc.NewServer(): ping MinTime 5m)"
		RESTARTED=0
		start_cp cp-default-opts.log -grpc-options default || { fail "server did not start"; return 1; }
		start_gw gateway-default-opts.log || { fail "gateway did not start"; return 1; }
		check "every type applied at version 1" wait_until 15 all_at 1
		restarts1=$(stat gateway_xds_stream_restarts_total)
		sleep "$IDLE_SECS"
		closed=$(grep -c STREAM_CLOSED "$CP_LOG")
		check "ADS stream survives ${IDLE_SECS}s idle against a default grpc-go server" \
			test "$closed:$(stat gateway_xds_stream_restarts_total)" = "0:$restarts1"
		grep STREAM_ "$CP_LOG" | sed 's/^/    cp: /'
		grep 'ADS stream' "$LOGDIR/gateway-default-opts.log" | sed 's/\x1b\[[0-9;]*m//g; s/^/    gw: /'
		stop_gw
		stop_cp
	fi
}

start_backend || { fail "demo backend did not start"; exit 1; }
SUMMARY=
for MODE in $MODES; do
	case $MODE in sotw | delta) ;; *) echo "MODES: want sotw and/or delta, got $MODE"; exit 2 ;; esac
	p0=$PASSED f0=$FAILED
	run_checks
	# Whatever ended the pass, the next one starts from fresh processes.
	stop_gw
	stop_cp
	SUMMARY+="$MODE: $((PASSED - p0)) passed, $((FAILED - f0)) failed"$'\n'
done

echo
printf '%s' "$SUMMARY"
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
