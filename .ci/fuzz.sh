#!/usr/bin/env bash
# Fuzz smoke: builds every cargo-fuzz target in fuzz/ and runs each for a
# short while (FUZZ_SECONDS, default 20) from its committed seeds, failing on
# any crash, panic or timeout. Long runs are a manual job: docs/fuzzing.md.
# Usage: .ci/fuzz.sh [target...]   (default: every target)
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_TARGET=${FUZZ_SECONDS:-20}

# cargo-fuzz drives libFuzzer through nightly-only flags (-Zsanitizer);
# CI starts from a bare toolchain, so both are installed on first use.
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal
fi

targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
    mapfile -t targets < <(cd fuzz && cargo +nightly fuzz list)
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One build of all targets, with debug assertions and overflow checks (as
# cargo-fuzz always does) but no address sanitizer: the fuzzed crates have
# no unsafe code, and without it the build takes half the time (about 2 of
# the smoke's 5 minutes on 2 cores) and the runs twice the executions. Long
# runs keep the sanitizer (docs/fuzzing.md). A target dir of its own, so
# that this build and a sanitizer build do not keep replacing each other.
start=$(date +%s)
(cd fuzz && cargo +nightly fuzz build --sanitizer none --codegen-units 16 --target-dir target/smoke)
echo "fuzz: built ${#targets[@]} targets in $(($(date +%s) - start)) s"

triple=$(rustc +nightly -vV | sed -n 's/^host: //p')
bin=fuzz/target/smoke/$triple/release
crashes=0
for t in "${targets[@]}"; do
    # The seeds are copied out: libFuzzer adds what it finds to the corpus
    # directory, and CI must never write into the checkout.
    corpus=$work/corpus/$t
    mkdir -p "$corpus" "$work/artifacts/$t"
    cp fuzz/corpus/"$t"/seed-* "$corpus"/
    log=$work/$t.log
    # -timeout: an input that takes 10 s is a hang worth failing on;
    # -print_final_stats: the exec count for the summary.
    if "$bin/$t" "$corpus" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 \
        -print_final_stats=1 -artifact_prefix="$work/artifacts/$t/" >"$log" 2>&1; then
        status=ok
    else
        status=CRASH
        crashes=$((crashes + 1))
        # The panic or sanitizer report and the input that caused it.
        grep -E -A 30 "panicked|ERROR: libFuzzer|ERROR: AddressSanitizer|SUMMARY" "$log" | head -n 60 >&2 || tail -n 40 "$log" >&2
        for a in "$work/artifacts/$t"/*; do
            if [[ -f $a ]]; then
                echo "input $(basename "$a") (hex): $(od -An -tx1 -v "$a" | tr -d ' \n' | head -c 4000)" >&2
            fi
        done
    fi
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    echo "fuzz $t: $status, ${execs:-?} execs, $(find "$corpus" -type f | wc -l) corpus entries, ${SECONDS_PER_TARGET} s"
done

echo "fuzz: ${#targets[@]} targets, $crashes crashes"
[[ $crashes -eq 0 ]]
