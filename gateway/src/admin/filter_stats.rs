//! `/stats`: the HTTP filters' counters (Envoy's `cors.*`, `csrf.*`, …), one family per filter, each outcome a label, summed over shards.

use std::fmt::Write as _;
use std::sync::Arc;

use super::exposition::metric;
use super::prometheus::{sum, ShardCounter};
use shards::stats::ShardStats;

/// One filter's family: its name, help, and (label, counter) pairs.
type Family = (
    &'static str,
    &'static str,
    &'static [(&'static str, ShardCounter)],
);

static FAMILIES: [Family; 12] = [
    (
        "gateway_cors_total",
        "CORS filter: requests with an Origin the route's policy allows (origin_valid) or does not (origin_invalid).",
        &[
            ("origin_valid", |s| &s.cors.origin_valid),
            ("origin_invalid", |s| &s.cors.origin_invalid),
        ],
    ),
    (
        "gateway_csrf_total",
        "CSRF filter: state-changing requests checked: valid, invalid, and (among the invalid) without a source origin.",
        &[
            ("request_valid", |s| &s.csrf.request_valid),
            ("request_invalid", |s| &s.csrf.request_invalid),
            ("missing_source_origin", |s| &s.csrf.missing_source_origin),
        ],
    ),
    (
        "gateway_compressor_total",
        "Compressor filters (summed over filters): responses compressed or not and why, the accept-encoding each saw, request bodies compressed, and bytes in and out.",
        &[
            ("compressed", |s| &s.compressor.compressed),
            ("not_compressed", |s| &s.compressor.not_compressed),
            ("no_accept_header", |s| &s.compressor.no_accept_header),
            ("header_identity", |s| &s.compressor.header_identity),
            ("header_wildcard", |s| &s.compressor.header_wildcard),
            ("header_not_valid", |s| &s.compressor.header_not_valid),
            ("header_compressor_used", |s| &s.compressor.header_compressor_used),
            ("header_compressor_overshadowed", |s| &s.compressor.header_compressor_overshadowed),
            ("content_length_too_small", |s| &s.compressor.content_length_too_small),
            ("not_compressed_etag", |s| &s.compressor.not_compressed_etag),
            ("total_uncompressed_bytes", |s| &s.compressor.total_uncompressed_bytes),
            ("total_compressed_bytes", |s| &s.compressor.total_compressed_bytes),
            ("request_compressed", |s| &s.compressor.request_compressed),
            ("request_not_compressed", |s| &s.compressor.request_not_compressed),
            ("request_content_length_too_small", |s| &s.compressor.request_content_length_too_small),
            ("request_total_uncompressed_bytes", |s| &s.compressor.request_total_uncompressed_bytes),
            ("request_total_compressed_bytes", |s| &s.compressor.request_total_compressed_bytes),
        ],
    ),
    (
        "gateway_decompressor_total",
        "Decompressor filters: bodies decoded or not per direction, bytes in and out per direction, bodies that did not decode, and bodies cut at their inflate ratio (compression bombs).",
        &[
            ("request_decompressed", |s| &s.decompressor.request_decompressed),
            ("request_not_decompressed", |s| &s.decompressor.request_not_decompressed),
            ("response_decompressed", |s| &s.decompressor.response_decompressed),
            ("response_not_decompressed", |s| &s.decompressor.response_not_decompressed),
            ("request_total_compressed_bytes", |s| &s.decompressor.request_total_compressed_bytes),
            ("request_total_uncompressed_bytes", |s| &s.decompressor.request_total_uncompressed_bytes),
            ("response_total_compressed_bytes", |s| &s.decompressor.response_total_compressed_bytes),
            ("response_total_uncompressed_bytes", |s| &s.decompressor.response_total_uncompressed_bytes),
            ("decode_errors", |s| &s.decompressor.decode_errors),
            ("ratio_exceeded", |s| &s.decompressor.ratio_exceeded),
        ],
    ),
    (
        "gateway_fault_total",
        "Fault injection: delays and aborts injected, faults not injected because max_active_faults were in flight.",
        &[
            ("delays_injected", |s| &s.fault.delays_injected),
            ("aborts_injected", |s| &s.fault.aborts_injected),
            ("faults_overflow", |s| &s.fault.faults_overflow),
        ],
    ),
    (
        "gateway_health_check_filter_total",
        "Health check filter: checks answered here (request_total: ok or failed, and why), and pass-through checks answered from the cache.",
        &[
            ("request_total", |s| &s.health_check.request_total),
            ("ok", |s| &s.health_check.ok),
            ("failed", |s| &s.health_check.failed),
            ("cached_response", |s| &s.health_check.cached_response),
            ("failed_cluster_not_found", |s| &s.health_check.failed_cluster_not_found),
            ("failed_cluster_empty", |s| &s.health_check.failed_cluster_empty),
            ("failed_cluster_unhealthy", |s| &s.health_check.failed_cluster_unhealthy),
        ],
    ),
    (
        "gateway_local_rate_limit_total",
        "Local rate limit: requests the filter was enabled for, within their limits (ok), past one (rate_limited; enforced: refused), past a shadow descriptor's.",
        &[
            ("enabled", |s| &s.local_rate_limit.enabled),
            ("ok", |s| &s.local_rate_limit.ok),
            ("rate_limited", |s| &s.local_rate_limit.rate_limited),
            ("enforced", |s| &s.local_rate_limit.enforced),
            ("shadow_mode", |s| &s.local_rate_limit.shadow_mode),
        ],
    ),
    (
        "gateway_rbac_total",
        "RBAC HTTP filter: requests its rules allowed or denied, and what its shadow rules would have done.",
        &[
            ("allowed", |s| &s.rbac.allowed),
            ("denied", |s| &s.rbac.denied),
            ("shadow_allowed", |s| &s.rbac.shadow_allowed),
            ("shadow_denied", |s| &s.rbac.shadow_denied),
        ],
    ),
    (
        "gateway_network_rbac_total",
        "RBAC network filter: connections its rules allowed or denied (closed), and what its shadow rules would have done.",
        &[
            ("allowed", |s| &s.network_rbac.allowed),
            ("denied", |s| &s.network_rbac.denied),
            ("shadow_allowed", |s| &s.network_rbac.shadow_allowed),
            ("shadow_denied", |s| &s.network_rbac.shadow_denied),
        ],
    ),
    (
        "gateway_ext_authz_total",
        "External authorization: checks allowed (ok), denied, failed (error; those let through also failure_mode_allowed), not made (disabled), and allowed with changes the gateway refuses (invalid).",
        &[
            ("ok", |s| &s.ext_authz.ok),
            ("denied", |s| &s.ext_authz.denied),
            ("error", |s| &s.ext_authz.error),
            ("failure_mode_allowed", |s| &s.ext_authz.failure_mode_allowed),
            ("disabled", |s| &s.ext_authz.disabled),
            ("invalid", |s| &s.ext_authz.invalid),
        ],
    ),
    (
        "gateway_grpc_web_total",
        "gRPC-Web: requests converted to gRPC, and those refused (a text body that is not base64).",
        &[
            ("converted", |s| &s.grpc_web.converted),
            ("bad_request", |s| &s.grpc_web.bad_request),
        ],
    ),
    (
        "gateway_tracing_total",
        "Tracing: requests sampled or not, and spans exported, dropped (a shard's queue full) or lost in a failed export.",
        &[
            ("sampled", |s| &s.tracing.sampled),
            ("not_sampled", |s| &s.tracing.not_sampled),
            ("exported", |s| &s.tracing.exported),
            ("dropped", |s| &s.tracing.dropped),
            ("export_failed", |s| &s.tracing.export_failed),
        ],
    ),
];

/// Gauges, summed over shards.
static GAUGES: [(&str, &str, ShardCounter); 1] = [(
    "gateway_fault_active",
    "Faults (delays, aborts) in flight now.",
    |s| &s.fault.active,
)];

pub(super) fn render(out: &mut String, shards: &[Arc<ShardStats>]) {
    for (name, help, f) in &GAUGES {
        metric(out, name, "gauge", help);
        let _ = writeln!(out, "{name} {}", sum(shards, f));
    }
    for (name, help, outcomes) in &FAMILIES {
        metric(out, name, "counter", help);
        for (outcome, f) in outcomes.iter() {
            let _ = writeln!(out, "{name}{{outcome=\"{outcome}\"}} {}", sum(shards, f));
        }
    }
}
