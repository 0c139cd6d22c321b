#!/usr/bin/env bash
# The gateway with Envoy's default access log (to $ACCESS_LOG, default
# /tmp/bench-access.log) added to the bootstrap it is given with --config:
# run as compare.sh's `baseline` target, it measures logging on ÷ off in
# one run:
#   benches/e2e/compare.sh --targets "gateway baseline haproxy" \
#       --baseline benches/e2e/gateway_with_access_log.sh --idle-conns 0 --tools loadgen
# compare.sh runs from the repository root, so the binary is found there
# ($GATEWAY_BIN overrides). Delete the log file afterwards: it grows by
# about 100 bytes a request.
set -euo pipefail
log=${ACCESS_LOG:-/tmp/bench-access.log}
args=("$@")
for i in "${!args[@]}"; do
    if [ "${args[$i]}" = "--config" ]; then
        cfg=${args[$((i + 1))]}
        sed "s|^\(\s*\)stat_prefix: ingress\$|&\n\1access_log:\n\1- name: envoy.access_loggers.file\n\1  typed_config:\n\1    \"@type\": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog\n\1    path: $log|" "$cfg" >"$cfg.log.yaml"
        args[i + 1]=$cfg.log.yaml
    fi
done
exec "${GATEWAY_BIN:-$PWD/target/release/gateway}" "${args[@]}"
