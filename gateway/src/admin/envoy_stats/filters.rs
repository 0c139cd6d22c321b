//! The HTTP filters' families under Envoy 1.40's names: for each filter of each connection manager of the snapshot (made with the config, so at zero from the start), its instance's counts summed over the shards: `http.<prefix>.cors.*`, `.csrf.*`, `.fault.*`, `.health_check.*`, `.rbac[.<rules_stat_prefix>].*`, `.ext_authz[.<stat_prefix>].*`, `.compressor.<library>.<coding>.*`, `.decompressor.<library>.<coding>.{request,response}.*`, and `<stat_prefix>.http_local_rate_limit.*`.

use std::collections::HashSet;

use engine::HttpFilterConfig;
use shards::stats::filters::{coding_stat_name, instance_name};
use shards::stats::{
    CompressorStats, CorsStats, Counter, CsrfStats, DecompressorStats, ExtAuthzStats, FaultStats,
    HealthCheckStats, LocalRateLimitStats, RbacStats,
};

use super::super::state::Inner;
use super::families::{Blocks, Families};
use super::{Family, Kind};

const HTTP: &str = "envoy_http_conn_manager_prefix";

/// One of a block's counters, or none (a series Envoy has for a feature
/// the gateway refuses: always 0).
type Of<T> = Option<fn(&T) -> &Counter>;

const CORS: [(&str, Of<CorsStats>); 2] = [
    ("origin_invalid", Some(|c| &c.origin_invalid)),
    ("origin_valid", Some(|c| &c.origin_valid)),
];

const CSRF: [(&str, Of<CsrfStats>); 3] = [
    ("missing_source_origin", Some(|c| &c.missing_source_origin)),
    ("request_invalid", Some(|c| &c.request_invalid)),
    ("request_valid", Some(|c| &c.request_valid)),
];

const FAULT: [(&str, Of<FaultStats>); 4] = [
    ("aborts_injected", Some(|f| &f.aborts_injected)),
    ("delays_injected", Some(|f| &f.delays_injected)),
    ("faults_overflow", Some(|f| &f.faults_overflow)),
    ("response_rl_injected", None),
];

const HEALTH_CHECK: [(&str, Of<HealthCheckStats>); 8] = [
    ("cached_response", Some(|h| &h.cached_response)),
    ("degraded", None),
    ("failed", Some(|h| &h.failed)),
    ("failed_cluster_empty", Some(|h| &h.failed_cluster_empty)),
    (
        "failed_cluster_not_found",
        Some(|h| &h.failed_cluster_not_found),
    ),
    (
        "failed_cluster_unhealthy",
        Some(|h| &h.failed_cluster_unhealthy),
    ),
    ("ok", Some(|h| &h.ok)),
    ("request_total", Some(|h| &h.request_total)),
];

const EXT_AUTHZ: [(&str, Of<ExtAuthzStats>); 13] = [
    ("denied", Some(|a| &a.denied)),
    ("disabled", Some(|a| &a.disabled)),
    ("error", Some(|a| &a.error)),
    ("failure_mode_allowed", Some(|a| &a.failure_mode_allowed)),
    ("filter_state_name_collision", None),
    ("ignored_dynamic_metadata", None),
    ("invalid", Some(|a| &a.invalid)),
    ("ok", Some(|a| &a.ok)),
    ("omitted_response_headers", None),
    ("request_header_limits_reached", None),
    ("response_header_limits_reached", None),
    ("shadow_denied", None),
    ("shadow_error", None),
];

const LOCAL_RATE_LIMIT: [(&str, Of<LocalRateLimitStats>); 5] = [
    ("enabled", Some(|l| &l.enabled)),
    ("enforced", Some(|l| &l.enforced)),
    ("ok", Some(|l| &l.ok)),
    ("rate_limited", Some(|l| &l.rate_limited)),
    ("shadow_mode", Some(|l| &l.shadow_mode)),
];

const COMPRESSOR: [(&str, Of<CompressorStats>); 17] = [
    ("compressed", Some(|c| &c.compressed)),
    (
        "content_length_too_small",
        Some(|c| &c.content_length_too_small),
    ),
    (
        "header_compressor_overshadowed",
        Some(|c| &c.header_compressor_overshadowed),
    ),
    (
        "header_compressor_used",
        Some(|c| &c.header_compressor_used),
    ),
    ("header_identity", Some(|c| &c.header_identity)),
    ("header_not_valid", Some(|c| &c.header_not_valid)),
    ("header_wildcard", Some(|c| &c.header_wildcard)),
    ("no_accept_header", Some(|c| &c.no_accept_header)),
    ("not_compressed", Some(|c| &c.not_compressed)),
    ("not_compressed_etag", Some(|c| &c.not_compressed_etag)),
    (
        "total_compressed_bytes",
        Some(|c| &c.total_compressed_bytes),
    ),
    (
        "total_uncompressed_bytes",
        Some(|c| &c.total_uncompressed_bytes),
    ),
    ("request.compressed", Some(|c| &c.request_compressed)),
    (
        "request.content_length_too_small",
        Some(|c| &c.request_content_length_too_small),
    ),
    (
        "request.not_compressed",
        Some(|c| &c.request_not_compressed),
    ),
    (
        "request.total_compressed_bytes",
        Some(|c| &c.request_total_compressed_bytes),
    ),
    (
        "request.total_uncompressed_bytes",
        Some(|c| &c.request_total_uncompressed_bytes),
    ),
];

const DECOMPRESSOR: [(&str, Of<DecompressorStats>); 8] = [
    ("request.decompressed", Some(|d| &d.request_decompressed)),
    (
        "request.not_decompressed",
        Some(|d| &d.request_not_decompressed),
    ),
    (
        "request.total_compressed_bytes",
        Some(|d| &d.request_total_compressed_bytes),
    ),
    (
        "request.total_uncompressed_bytes",
        Some(|d| &d.request_total_uncompressed_bytes),
    ),
    ("response.decompressed", Some(|d| &d.response_decompressed)),
    (
        "response.not_decompressed",
        Some(|d| &d.response_not_decompressed),
    ),
    (
        "response.total_compressed_bytes",
        Some(|d| &d.response_total_compressed_bytes),
    ),
    (
        "response.total_uncompressed_bytes",
        Some(|d| &d.response_total_uncompressed_bytes),
    ),
];

/// Each filter instance of the snapshot's connection managers, once.
pub(super) fn filters(inner: &Inner, out: &mut Vec<Family>) {
    let mut fam = Families::default();
    let all = Every::of(inner);
    let mut seen = HashSet::new();
    let managers = inner
        .snapshot
        .listeners
        .iter()
        .flat_map(|l| l.chains())
        .map(|c| &c.http);
    for hcm in managers {
        let p = hcm.stat_prefix.as_str();
        for f in &hcm.http_filters {
            let Some(name) = instance_name(&f.config, p) else {
                continue;
            };
            // Kinds apart: a fault and a health check filter of one manager
            // share a name.
            if !seen.insert((std::mem::discriminant(&f.config), name.clone())) {
                continue;
            }
            let http = || vec![(HTTP, p.to_owned())];
            match &f.config {
                HttpFilterConfig::Cors => {
                    let base = format!("http.{p}.cors");
                    let group = (&all.cors, name.as_str());
                    write(&mut fam, group, ("http.cors", &base), http(), &CORS);
                }
                HttpFilterConfig::Csrf(_) => {
                    let base = format!("http.{p}.csrf");
                    let group = (&all.csrf, name.as_str());
                    write(&mut fam, group, ("http.csrf", &base), http(), &CSRF);
                }
                HttpFilterConfig::Fault(_) => {
                    let base = format!("http.{p}.fault");
                    let group = (&all.fault, name.as_str());
                    write(&mut fam, group, ("http.fault", &base), http(), &FAULT);
                    let active = all.fault.sum(&name, |f| &f.active);
                    fam.get(Kind::Gauge, "http.fault.active_faults").push(
                        format!("{base}.active_faults"),
                        http(),
                        active,
                    );
                }
                HttpFilterConfig::HealthCheck(_) => {
                    let base = format!("http.{p}.health_check");
                    let group = (&all.health_check, name.as_str());
                    write(
                        &mut fam,
                        group,
                        ("http.health_check", &base),
                        http(),
                        &HEALTH_CHECK,
                    );
                }
                HttpFilterConfig::Rbac(r) => {
                    // The rules' counters under their prefix, the shadow
                    // rules' under theirs (Envoy adds a dot after each).
                    let group = (&all.rbac, name.as_str());
                    let rules: [(&str, Of<RbacStats>); 2] = [
                        ("allowed", Some(|r| &r.allowed)),
                        ("denied", Some(|r| &r.denied)),
                    ];
                    let shadow: [(&str, Of<RbacStats>); 2] = [
                        ("shadow_allowed", Some(|r| &r.shadow_allowed)),
                        ("shadow_denied", Some(|r| &r.shadow_denied)),
                    ];
                    for (prefix, counters) in [
                        (&r.rules_stat_prefix, rules),
                        (&r.shadow_rules_stat_prefix, shadow),
                    ] {
                        let (base, labels) = prefixed(
                            &format!("http.{p}.rbac"),
                            prefix,
                            "envoy_rbac_http_prefix",
                            http(),
                        );
                        write(&mut fam, group, ("http.rbac", &base), labels, &counters);
                    }
                }
                HttpFilterConfig::ExtAuthz(a) => {
                    let (base, labels) = prefixed(
                        &format!("http.{p}.ext_authz"),
                        &a.stat_prefix,
                        "envoy_ext_authz_prefix",
                        http(),
                    );
                    let group = (&all.ext_authz, name.as_str());
                    write(
                        &mut fam,
                        group,
                        ("http.ext_authz", &base),
                        labels,
                        &EXT_AUTHZ,
                    );
                }
                HttpFilterConfig::LocalRateLimit(l) => {
                    // Not under the connection manager's name, nor labelled
                    // with it: Envoy's.
                    let base = format!("{}.http_local_rate_limit", l.stat_prefix);
                    let labels = vec![("envoy_local_http_ratelimit_prefix", l.stat_prefix.clone())];
                    let group = (&all.local_rate_limit, name.as_str());
                    let family = ("http_local_rate_limit", base.as_str());
                    write(&mut fam, group, family, labels, &LOCAL_RATE_LIMIT);
                }
                HttpFilterConfig::Compressor(c) => {
                    // The library's name and coding are in the metric's
                    // name, as Envoy has no tag for them.
                    let coding = coding_stat_name(c.library.coding());
                    let lib = format!("compressor.{}.{coding}", c.library_name);
                    let family = format!("http.{lib}");
                    let base = format!("http.{p}.{lib}");
                    let group = (&all.compressor, name.as_str());
                    write(&mut fam, group, (&family, &base), http(), &COMPRESSOR);
                }
                HttpFilterConfig::Decompressor(d) => {
                    let coding = coding_stat_name(d.library.coding);
                    let lib = format!("decompressor.{}.{coding}", d.library_name);
                    let family = format!("http.{lib}");
                    let base = format!("http.{p}.{lib}");
                    let group = (&all.decompressor, name.as_str());
                    write(&mut fam, group, (&family, &base), http(), &DECOMPRESSOR);
                }
                _ => {}
            }
        }
    }
    fam.into_vec(out);
}

/// `base.<prefix>` and its label when the filter has a stat prefix, else
/// `base` and the manager's label alone.
fn prefixed(
    base: &str,
    prefix: &str,
    tag: &'static str,
    http: Vec<(&'static str, String)>,
) -> (String, Vec<(&'static str, String)>) {
    if prefix.is_empty() {
        return (base.to_owned(), http);
    }
    // A configured prefix may end in the dot Envoy adds.
    let prefix = prefix.strip_suffix('.').unwrap_or(prefix);
    let mut labels = vec![(tag, prefix.to_owned())];
    labels.extend(http);
    (format!("{base}.{prefix}"), labels)
}

/// Writes `counters` of the blocks named `group.1` as
/// `<family>.<counter>` families, series `<base>.<counter>`.
fn write<T>(
    fam: &mut Families,
    (blocks, name): (&Blocks<T>, &str),
    (family, base): (&str, &str),
    labels: Vec<(&'static str, String)>,
    counters: &[(&str, Of<T>)],
) {
    for (s, f) in counters {
        let v = f.map_or(0, |f| blocks.sum(name, f));
        fam.get(Kind::Counter, &format!("{family}.{s}")).push(
            format!("{base}.{s}"),
            labels.clone(),
            v,
        );
    }
}

/// Every shard's filter blocks, by kind.
struct Every {
    cors: Blocks<CorsStats>,
    csrf: Blocks<CsrfStats>,
    fault: Blocks<FaultStats>,
    health_check: Blocks<HealthCheckStats>,
    rbac: Blocks<RbacStats>,
    ext_authz: Blocks<ExtAuthzStats>,
    local_rate_limit: Blocks<LocalRateLimitStats>,
    compressor: Blocks<CompressorStats>,
    decompressor: Blocks<DecompressorStats>,
}

impl Every {
    fn of(inner: &Inner) -> Self {
        Self {
            cors: Blocks::of(inner, |s| &s.envoy.filters.cors),
            csrf: Blocks::of(inner, |s| &s.envoy.filters.csrf),
            fault: Blocks::of(inner, |s| &s.envoy.filters.fault),
            health_check: Blocks::of(inner, |s| &s.envoy.filters.health_check),
            rbac: Blocks::of(inner, |s| &s.envoy.filters.rbac),
            ext_authz: Blocks::of(inner, |s| &s.envoy.filters.ext_authz),
            local_rate_limit: Blocks::of(inner, |s| &s.envoy.filters.local_rate_limit),
            compressor: Blocks::of(inner, |s| &s.envoy.filters.compressor),
            decompressor: Blocks::of(inner, |s| &s.envoy.filters.decompressor),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_prefix_is_a_segment_and_a_label_first() {
        let http = || vec![(HTTP, "ingress".to_owned())];
        let (base, labels) = prefixed(
            "http.ingress.rbac",
            "myrbac_",
            "envoy_rbac_http_prefix",
            http(),
        );
        assert_eq!(base, "http.ingress.rbac.myrbac_");
        assert_eq!(
            labels,
            [
                ("envoy_rbac_http_prefix", "myrbac_".to_owned()),
                (HTTP, "ingress".to_owned())
            ]
        );
        // Its own dot is not doubled; no prefix, no label.
        assert_eq!(prefixed("b", "p.", "t", http()).0, "b.p");
        assert_eq!(prefixed("b", "", "t", http()), ("b".to_owned(), http()));
    }
}
