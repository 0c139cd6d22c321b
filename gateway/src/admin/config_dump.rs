//! `/config_dump`: the loaded configuration as JSON, in Envoy's field names.

use engine::tls::{DownstreamTls, Reloadable};
use engine::{
    Cluster, ClusterTarget, ConfigSource, DomainMatcher, DynamicResources, FilterChain,
    HeaderMatchKind, HeaderMatcher, HostRewrite, HttpConnectionManager, LbPolicy, Listener,
    PathMatch, QueryParamMatch, Redirect, RedirectPath, Route, RouteAction, VirtualHost,
};
use serde_json::{json, Value};

use super::state::Inner;

pub(super) fn render(inner: &Inner) -> Value {
    let b = &inner.bootstrap;
    let listeners: Vec<Value> = b.listeners.iter().map(|l| listener(l)).collect();

    let clusters: Vec<Value> = b.clusters.iter().map(|c| cluster(c)).collect();
    // Resources that came over xDS or from files are listed apart from the
    // bootstrap's own, with the version they arrived in (as Envoy's
    // `dynamic_listeners` / `dynamic_active_clusters`).
    let (dyn_listeners, listeners) =
        split_dynamic(inner, "listeners", &b.listeners, listeners, |l| &l.name);
    let (dyn_clusters, clusters) =
        split_dynamic(inner, "clusters", &b.clusters, clusters, |c| &c.name);
    let mut dump = json!({
        "version": inner.snapshot.version,
        "node": { "id": b.node.id, "cluster": b.node.cluster },
        "admin": b.admin.map(|a| a.to_string()),
        "static_resources": { "listeners": listeners, "clusters": clusters },
    });
    let limits = &b.runtime.listener_connection_limits;
    if !limits.is_empty() {
        // One flat static layer with the keys in force, as Envoy's
        // `/runtime` lists them.
        let keys: serde_json::Map<String, Value> = limits
            .iter()
            .map(|(l, n)| {
                (
                    format!("envoy.resource_limits.listener.{l}.connection_limit"),
                    json!(n),
                )
            })
            .collect();
        dump["layered_runtime"] = json!({ "layers": [{ "static_layer": keys }] });
    }
    if !inner.snapshot.warming.is_empty() {
        // Listed with the others above, but not serving yet (Envoy's
        // `dynamic_warming_clusters`).
        let mut warming: Vec<&String> = inner.snapshot.warming.keys().collect();
        warming.sort();
        dump["warming_clusters"] = json!(warming);
    }
    if inner.xds.is_some() {
        dump["dynamic_active"] = json!({ "listeners": dyn_listeners, "clusters": dyn_clusters });
    }
    if let Some(d) = &b.dynamic {
        dump["dynamic_resources"] = dynamic_resources(d);
    }
    if let Some(x) = &inner.xds {
        dump["xds"] = super::xds::dump(x);
    }
    dump
}

/// One listener: its address, listener filters and filter chains.
fn listener(l: &Listener) -> Value {
    json!({
        "name": l.name,
        "address": l.address.to_string(),
        "per_connection_buffer_limit_bytes": l.per_connection_buffer_limit_bytes,
        "listener_filters": listener_filters(&l.listener_filters),
        "filter_chains": l.filter_chains.iter().map(chain).collect::<Vec<_>>(),
        "default_filter_chain": l.default_filter_chain.as_ref().map(chain),
    })
}

/// A listener's filters, in the order they run, and their timeout.
fn listener_filters(f: &engine::ListenerFilters) -> Value {
    let proxy_protocol = f.proxy_protocol.as_ref().map(|p| {
        json!({
            "allow_requests_without_proxy_protocol": p.allow_without,
            "v1": p.allow_v1,
            "v2": p.allow_v2,
            "stat_prefix": p.stat_prefix,
            "pass_through_tlvs": match &p.pass_through {
                engine::TlvSelection::None => json!(null),
                engine::TlvSelection::All => json!("INCLUDE_ALL"),
                engine::TlvSelection::Types(t) => json!(t),
            },
        })
    });
    json!({
        "proxy_protocol": proxy_protocol,
        "tls_inspector": f.tls_inspector,
        "listener_filters_timeout": f.any().then(|| f.timeout.map(|t| format!("{}s", t.as_secs_f64()))),
        "continue_on_listener_filters_timeout": f.continue_on_timeout,
    })
}

/// One cluster: endpoints, upstream protocol and TLS, load balancing and
/// outlier detection.
fn cluster(c: &Cluster) -> Value {
    let endpoints: Vec<Value> = c
        .endpoints
        .iter()
        .map(|e| {
            json!({
                "address": e.address.to_string(),
                "load_balancing_weight": e.weight,
                "health_status": e.health.as_str(),
            })
        })
        .collect();
    let mut v = json!({
        "name": c.name,
        "type": "STATIC",
        "lb_policy": c.lb_policy.as_str(),
        "connect_timeout": format!("{}s", c.connect_timeout.as_secs_f64()),
        "http2": {
            "max_concurrent_streams": c.http2.max_concurrent_streams,
            "initial_stream_window_size": c.http2.initial_stream_window_size,
            "initial_connection_window_size": c.http2.initial_connection_window_size,
        },
        "per_connection_buffer_limit_bytes": c.per_connection_buffer_limit_bytes,
        "endpoints": endpoints,
    });
    v["upstream_protocol"] = json!(c.upstream.protocol.as_str());
    if let Some(n) = c.upstream.max_requests_per_connection {
        v["max_requests_per_connection"] = json!(n);
    }
    v["upstream_idle_timeout"] = json!(c
        .upstream
        .idle_timeout
        .map(|t| format!("{}s", t.as_secs_f64())));
    if let Some(t) = &c.upstream.tls {
        v["upstream_tls"] = json!({
            "sni": t.sni,
            "alpn_protocols": t.alpn,
            "verifies_server_certificate": t.verifies,
            "sds_secrets": t.secrets().iter().map(ToString::to_string).collect::<Vec<_>>(),
            "ready": t.is_ready(),
        });
    }
    if let LbPolicy::LeastRequest(lr) = &c.lb_policy {
        v["least_request_lb_config"] = json!({
            "choice_count": lr.choice_count,
            "active_request_bias": lr.active_request_bias,
        });
    }
    v["common_lb_config"] = json!({
        "healthy_panic_threshold": c.common_lb.healthy_panic_threshold,
        "override_host_status": c.common_lb.override_host_status.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
    });
    if let Some(o) = &c.outlier_detection {
        v["outlier_detection"] = outlier_json(o);
    }
    if let Some(e) = &c.eds {
        v["type"] = json!("EDS");
        v["eds_cluster_config"] = json!({ "service_name": e.service_name });
    }
    v
}

/// `dynamic_resources`: the ADS server and where LDS and CDS come from.
fn dynamic_resources(d: &DynamicResources) -> Value {
    json!({
        "ads_config": d.ads.as_ref().map(|a| json!({
            "cluster_name": a.cluster,
            "authority": a.authority,
            "set_node_on_first_message_only": a.set_node_on_first_message_only,
        })),
        "lds_config": d.lds.as_ref().map(source),
        "cds_config": d.cds.as_ref().map(source),
    })
}

/// Splits rendered resources into (dynamic, static) by whether xDS holds a
/// resource of that name; dynamic ones are wrapped with their type's version.
fn split_dynamic<T>(
    inner: &Inner,
    kind: &str,
    items: &[std::sync::Arc<T>],
    rendered: Vec<Value>,
    name: impl Fn(&T) -> &String,
) -> (Vec<Value>, Vec<Value>) {
    let Some(t) = inner
        .xds
        .as_ref()
        .and_then(|x| x.types.iter().find(|t| t.name == kind))
    else {
        return (Vec::new(), rendered);
    };
    let mut dynamic = Vec::new();
    let mut fixed = Vec::new();
    for (item, v) in items.iter().zip(rendered) {
        if t.resources.iter().any(|n| n == name(item)) {
            dynamic.push(json!({ "version_info": t.version, "resource": v }));
        } else {
            fixed.push(v);
        }
    }
    (dynamic, fixed)
}

/// A `ConfigSource` as `"ads"` or the watched file's path.
fn source(s: &ConfigSource) -> Value {
    match s {
        ConfigSource::Ads { .. } => json!("ads"),
        ConfigSource::Path(p) => json!(p.display().to_string()),
    }
}

/// `outlier_detection` with its defaults filled in, in Envoy's field names.
fn outlier_json(o: &engine::OutlierDetection) -> Value {
    let secs = |d: std::time::Duration| format!("{}s", d.as_secs_f64());
    let mut v = json!({
        "interval": secs(o.interval),
        "base_ejection_time": secs(o.base_ejection_time),
        "max_ejection_time": secs(o.max_ejection_time),
        "max_ejection_percent": o.max_ejection_percent,
    });
    if let Some(c) = &o.consecutive_5xx {
        v["consecutive_5xx"] = json!(c.threshold);
        v["enforcing_consecutive_5xx"] = json!(c.enforcement_percentage);
    }
    if let Some(c) = &o.consecutive_gateway_failure {
        v["consecutive_gateway_failure"] = json!(c.threshold);
        v["enforcing_consecutive_gateway_failure"] = json!(c.enforcement_percentage);
    }
    if let Some(s) = &o.success_rate {
        v["success_rate_stdev_factor"] = json!(s.stdev_factor);
        v["enforcing_success_rate"] = json!(s.enforcement_percentage);
        v["success_rate_minimum_hosts"] = json!(s.minimum_hosts);
        v["success_rate_request_volume"] = json!(s.request_volume);
    }
    if let Some(f) = &o.failure_percentage {
        v["failure_percentage_threshold"] = json!(f.threshold);
        v["enforcing_failure_percentage"] = json!(f.enforcement_percentage);
        v["failure_percentage_minimum_hosts"] = json!(f.minimum_hosts);
        v["failure_percentage_request_volume"] = json!(f.request_volume);
    }
    v
}

/// One filter chain: its match, TLS (certificates by name, never keys) and
/// HTTP connection manager or TCP proxy.
fn chain(c: &FilterChain) -> Value {
    let (filter, config) = match &c.tcp_proxy {
        Some(t) => ("tcp_proxy", tcp_proxy(t)),
        None => ("http_connection_manager", http_connection_manager(&c.http)),
    };
    // Certificates by their names, never their keys.
    let tls = c.tls.as_deref().map(downstream_tls);
    let m = &c.filter_chain_match;
    let ranges = |v: &[engine::filter_chain::CidrRange]| {
        v.iter().map(ToString::to_string).collect::<Vec<_>>()
    };
    json!({
        "name": c.name,
        "filter_chain_match": {
            "destination_port": m.destination_port,
            "prefix_ranges": ranges(&m.prefix_ranges),
            "server_names": m.server_names,
            "transport_protocol": m.transport_protocol,
            "application_protocols": m.application_protocols,
            "direct_source_prefix_ranges": ranges(&m.direct_source_prefix_ranges),
            "source_type": format!("{:?}", m.source_type),
            "source_prefix_ranges": ranges(&m.source_prefix_ranges),
            "source_ports": m.source_ports,
        },
        "tls": tls,
        filter: config,
    })
}

/// A chain's TCP proxy.
fn tcp_proxy(t: &engine::TcpProxy) -> Value {
    let target = match &t.target {
        engine::TcpTarget::Cluster(c) => json!({ "cluster": c }),
        engine::TcpTarget::Weighted(w) => {
            let mut below = 0;
            let clusters: Vec<Value> = w
                .clusters
                .iter()
                .map(|(name, bound)| {
                    let weight = bound - below;
                    below = *bound;
                    json!({ "name": name, "weight": weight })
                })
                .collect();
            json!({ "weighted_clusters": clusters })
        }
    };
    json!({
        "stat_prefix": t.stat_prefix,
        "target": target,
        "idle_timeout_ms": t.idle_timeout.map(|d| d.as_millis() as u64),
        "max_connect_attempts": t.max_connect_attempts,
        "max_downstream_connection_duration_ms": t
            .max_downstream_connection_duration
            .map(|d| d.as_millis() as u64),
        "access_log": t.access_log.len(),
    })
}

/// A chain's HTTP connection manager: codec, limits, timeouts and its
/// route table (inline, or the one RDS sent).
fn http_connection_manager(h: &HttpConnectionManager) -> Value {
    let vhosts: Vec<Value> = h
        .route_config
        .virtual_hosts
        .iter()
        .map(virtual_host)
        .collect();
    let mut hcm = json!({
        "stat_prefix": h.stat_prefix,
        "codec_type": match h.codec_type {
            engine::CodecType::Auto => "AUTO",
            engine::CodecType::Http1 => "HTTP1",
            engine::CodecType::Http2 => "HTTP2",
        },
        "http_protocol_options": {
            "accept_http_10": h.http1.accept_http_10,
            "default_host_for_http_10": h.http1.default_host_for_http_10,
            "allow_absolute_url": h.http1.allow_absolute_url,
            "enable_trailers": h.http1.enable_trailers,
        },
        "max_concurrent_streams": h.max_concurrent_streams,
        "max_header_list_size": h.max_header_list_size,
        "initial_stream_window_size": h.initial_stream_window_size,
        "initial_connection_window_size": h.initial_connection_window_size,
        "idle_timeout": h.idle_timeout.map(|t| format!("{}s", t.as_secs_f64())),
        "stream_idle_timeout": h.stream_idle_timeout.map(|t| format!("{}s", t.as_secs_f64())),
        "drain_timeout": format!("{}s", h.drain_timeout.as_secs_f64()),
        "max_stream_duration": h.max_stream_duration.map(|t| format!("{}s", t.as_secs_f64())),
        "max_connection_duration": h.max_connection_duration.map(|t| format!("{}s", t.as_secs_f64())),
        "max_requests_per_connection": h.max_requests_per_connection,
        "max_headers_count": h.max_headers_count,
        "headers_with_underscores_action": h.headers_with_underscores_action.as_str(),
        "http2_flood_limits": {
            "max_outbound_frames": h.http2_flood.max_outbound_frames,
            "max_outbound_control_frames": h.http2_flood.max_outbound_control_frames,
            "max_consecutive_inbound_frames_with_empty_payload":
                h.http2_flood.max_consecutive_inbound_frames_with_empty_payload,
            "max_inbound_priority_frames_per_stream":
                h.http2_flood.max_inbound_priority_frames_per_stream,
            "max_inbound_window_update_frames_per_data_frame_sent":
                h.http2_flood.max_inbound_window_update_frames_per_data_frame_sent,
        },
        "route_config": { "name": h.route_config.name, "virtual_hosts": vhosts },
    });
    if let Some(rds) = &h.rds {
        hcm["rds"] = json!({ "route_config_name": rds.route_config_name });
    }
    hcm
}

/// One virtual host: its domains as Envoy writes them and its routes.
fn virtual_host(vh: &VirtualHost) -> Value {
    let domains: Vec<String> = vh
        .domains
        .iter()
        .map(|d| match d {
            DomainMatcher::Exact(e) => e.clone(),
            DomainMatcher::Suffix(s) => format!("*{s}"),
            DomainMatcher::Prefix(p) => format!("{p}*"),
            DomainMatcher::Any => "*".into(),
        })
        .collect();
    let routes: Vec<Value> = vh.routes.iter().map(route).collect();
    json!({ "name": vh.name, "domains": domains, "routes": routes })
}

/// One route: its path and header match, target and action.
fn route(r: &Route) -> Value {
    let m = match &r.matcher.path {
        PathMatch::Prefix(p) => json!({ "prefix": p }),
        PathMatch::Path(p) => json!({ "path": p }),
        PathMatch::SeparatedPrefix(p) => json!({ "path_separated_prefix": p }),
        PathMatch::Regex(re) => json!({ "safe_regex": re.as_str() }),
        PathMatch::Connect => json!({ "connect_matcher": {} }),
    };
    let headers: Vec<Value> = r.matcher.headers.iter().map(header_matcher).collect();
    let query: Vec<Value> = r
        .matcher
        .query
        .iter()
        .map(|q| match &q.kind {
            QueryParamMatch::Present(p) => json!({ "name": q.name, "present_match": p }),
            QueryParamMatch::Value(kind) => {
                json!({ "name": q.name, "string_match": match_kind(kind) })
            }
        })
        .collect();
    let mut out = json!({
        "name": r.name,
        "match": m,
        "case_sensitive": r.matcher.case_sensitive,
        "headers": headers,
        "query_parameters": query,
        "grpc": r.matcher.grpc,
        "runtime_fraction": r.matcher.fraction.map(runtime_fraction),
        "decorator": r.decorator.as_ref().map(|d| json!({ "operation": d.operation, "propagate": d.propagate })),
    });
    let action = match &r.action {
        RouteAction::Forward(a) => json!({
            "route": route_target(&a.target),
            "timeout": a.timeout.map(|t| format!("{}s", t.as_secs_f64())),
            "prefix_rewrite": a.prefix_rewrite,
            "host_rewrite": a.host_rewrite.as_ref().map(|h| match h {
                HostRewrite::Literal(v) => json!({ "host_rewrite_literal": v }),
                HostRewrite::Header(v) => json!({ "host_rewrite_header": v }),
                HostRewrite::Auto => json!({ "auto_host_rewrite": true }),
                HostRewrite::PathRegex(re, sub) => json!({
                    "host_rewrite_path_regex": { "pattern": re.as_str(), "substitution": sub }
                }),
            }),
            "append_x_forwarded_host": a.append_x_forwarded_host,
            "cluster_not_found_response_code": a.cluster_not_found_status,
            "retry_policy": a.retry_policy.as_ref().map(|p| json!({
                "num_retries": p.num_retries,
                "per_try_timeout": p.per_try_timeout.map(|t| format!("{}s", t.as_secs_f64())),
                "retriable_status_codes": p.retriable_status_codes,
                "previous_hosts": p.previous_hosts,
            })),
            "request_mirror_policies": a.mirrors.iter().map(mirror_policy).collect::<Vec<_>>(),
        }),
        RouteAction::Redirect(rd) => json!({ "redirect": redirect(rd) }),
        RouteAction::DirectResponse(d) => json!({
            "direct_response": {
                "status": d.status,
                // The body's size, not its bytes (it may be a file's).
                "body_bytes": d.body.as_ref().map(|b| b.len()),
            }
        }),
    };
    if let (Value::Object(out), Value::Object(action)) = (&mut out, action) {
        out.extend(action);
    }
    out
}

/// A `RuntimeFractionalPercent`'s default, in Envoy's names.
fn runtime_fraction(f: engine::Fraction) -> Value {
    json!({
        "default_value": {
            "numerator": f.numerator,
            "denominator": match f.denominator {
                100 => "HUNDRED",
                10_000 => "TEN_THOUSAND",
                _ => "MILLION",
            },
        }
    })
}

/// A route's mirror policy, in Envoy's field names.
fn mirror_policy(m: &engine::MirrorPolicy) -> Value {
    let mut v = match &m.cluster {
        engine::MirrorCluster::Named(c) => json!({ "cluster": c }),
        engine::MirrorCluster::Header(h) => json!({ "cluster_header": h }),
    };
    if let Value::Object(o) = &mut v {
        if let Some(f) = m.fraction {
            o.insert("runtime_fraction".into(), runtime_fraction(f));
        }
        if let Some(h) = &m.host_rewrite {
            o.insert("host_rewrite_literal".into(), json!(h));
        }
        o.insert(
            "disable_shadow_host_suffix_append".into(),
            json!(!m.host_suffix),
        );
    }
    v
}

/// A route's `redirect`, in Envoy's field names.
fn redirect(r: &Redirect) -> Value {
    let path = match &r.path {
        RedirectPath::Keep => json!({}),
        RedirectPath::Path { path, .. } => json!({ "path_redirect": path }),
        RedirectPath::Prefix(p) => json!({ "prefix_rewrite": p }),
        RedirectPath::Regex {
            pattern,
            substitution,
        } => {
            json!({ "regex_rewrite": { "pattern": pattern.as_str(), "substitution": substitution } })
        }
    };
    let mut out = json!({
        "scheme_redirect": r.scheme,
        "host_redirect": r.host,
        "port_redirect": r.port,
        "strip_query": r.strip_query,
        "response_code": r.status,
    });
    if let (Value::Object(out), Value::Object(path)) = (&mut out, path) {
        out.extend(path);
    }
    out
}

/// A route's header matcher, in Envoy's field names.
fn header_matcher(hm: &HeaderMatcher) -> Value {
    json!({ "name": hm.name, "match": match_kind(&hm.kind), "invert_match": hm.invert })
}

/// A header's or query parameter's value matcher, in Envoy's field names.
fn match_kind(kind: &HeaderMatchKind) -> Value {
    match kind {
        HeaderMatchKind::Exact(v) => json!({ "exact": v }),
        HeaderMatchKind::Prefix(v) => json!({ "prefix": v }),
        HeaderMatchKind::Suffix(v) => json!({ "suffix": v }),
        HeaderMatchKind::Contains(v) => json!({ "contains": v }),
        HeaderMatchKind::Regex(re) => json!({ "safe_regex": re.as_str() }),
        HeaderMatchKind::Present(p) => json!({ "present_match": p }),
        HeaderMatchKind::Range { start, end } => {
            json!({ "range_match": { "start": start, "end": end } })
        }
    }
}

/// Where a route sends: one cluster, or weighted clusters with each
/// weight (the engine holds cumulative bounds).
fn route_target(target: &ClusterTarget) -> Value {
    match target {
        ClusterTarget::Cluster(c) => json!({ "cluster": c }),
        ClusterTarget::Header(h) => json!({ "cluster_header": h }),
        ClusterTarget::Weighted(w) => {
            let mut prev = 0;
            let cs: Vec<Value> = w
                .clusters
                .iter()
                .map(|(n, bound)| {
                    let weight = bound - prev;
                    prev = *bound;
                    json!({ "name": n, "weight": weight })
                })
                .collect();
            json!({ "weighted_clusters": { "clusters": cs } })
        }
    }
}

/// A chain's downstream TLS: certificates by their names (never their
/// keys), ALPN and protocol versions, the SDS secrets it reads and
/// whether they all came.
fn downstream_tls(t: &DownstreamTls) -> Value {
    let version = |v| match v {
        engine::tls::TlsVersion::V1_2 => "TLSv1_2",
        engine::tls::TlsVersion::V1_3 => "TLSv1_3",
    };
    json!({
        "certificates": t.state().map(|s| s.names.iter().map(|n| json!({ "dns_names": n })).collect::<Vec<_>>()).unwrap_or_default(),
        "alpn_protocols": t.alpn,
        "tls_minimum_protocol_version": version(t.min_version),
        "tls_maximum_protocol_version": version(t.max_version),
        "sds_secrets": t.secrets().iter().map(ToString::to_string).collect::<Vec<_>>(),
        "ready": t.is_ready(),
    })
}
