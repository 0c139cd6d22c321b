//! `RouteConfiguration` → `engine::RouteConfig`: virtual hosts, domain
//! classification, path/header matching, the route action; per-route
//! filter configs are `per_filter`'s.

use std::collections::{HashMap, HashSet};

use engine::{
    ClusterTarget, DomainMatcher, ForwardAction, HeaderMutation, HostRewrite, PathMatch, Route,
    RouteAction, RouteConfig, RouteHeaders, RouteMatch, VirtualHost, WeightedClusters,
};

use super::common::{reject_set, timeout_or};
use super::hash_policy::hash_policies;
use super::header_mutation::header_mutation;
use super::local_rate_limit::rate_limit_policies;
use super::mirror::mirror_policies;
use super::per_filter::{typed_per_filter_config, Level};
use super::retry::{hedge_policy, retry_policy};
use super::route_reply::{direct_response, redirect, DEFAULT_MAX_DIRECT_RESPONSE_BODY};
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::core::v3 as core;
use crate::pb::envoy::config::route::v3 as pb;

/// Where `typed_per_filter_config` is not supported (weighted cluster
/// entries).
const PER_FILTER_CONFIG_HERE: &str =
    "not supported here; set typed_per_filter_config on the virtual host or route";

/// Validates a route table.
///
/// `inline` says the table came inline in an HTTP connection manager rather
/// than over RDS: as in Envoy, `validate_clusters` then defaults to true, so
/// a route naming a cluster not in `known_clusters` rejects the config.
/// Otherwise (or with `validate_clusters: false`) unknown clusters are
/// accepted and answered with 503 at request time.
pub fn route_config(
    rc: &pb::RouteConfiguration,
    path: &Path,
    known_clusters: &HashSet<String>,
    inline: bool,
) -> Result<RouteConfig> {
    reject_set!(
        path,
        rc,
        internal_only_headers,
        vhds,
        cluster_specifier_plugins,
        ignore_port_in_host_matching,
        ignore_path_parameters_in_path_matching,
    );
    super::common::metadata(rc.metadata.as_ref(), || path.clone())?;
    let check = rc
        .validate_clusters
        .unwrap_or(inline)
        .then_some(known_clusters);
    let table = TableDefaults {
        max_direct_response_body: rc
            .max_direct_response_body_size_bytes
            .unwrap_or(DEFAULT_MAX_DIRECT_RESPONSE_BODY),
        headers: level_headers(
            path,
            &rc.request_headers_to_add,
            &rc.request_headers_to_remove,
            &rc.response_headers_to_add,
            &rc.response_headers_to_remove,
        )?,
        most_specific_header_mutations_wins: rc.most_specific_header_mutations_wins,
        mirrors: mirror_policies(
            &rc.request_mirror_policies,
            &path.field("request_mirror_policies"),
            check,
        )?,
        per_filter: typed_per_filter_config(
            &rc.typed_per_filter_config,
            &path.field("typed_per_filter_config"),
            Level::RouteConfig,
            None,
        )?,
    };
    // Envoy rejects a domain listed by two virtual hosts of one table.
    let mut seen: HashMap<(u8, String), usize> = HashMap::new();
    let mut virtual_hosts = Vec::with_capacity(rc.virtual_hosts.len());
    for (i, vh) in rc.virtual_hosts.iter().enumerate() {
        let vpath = path.field("virtual_hosts").index(i);
        let vh = virtual_host(vh, &vpath, check, &table)?;
        for (j, d) in vh.domains.iter().enumerate() {
            if let Some(prev) = seen.insert(domain_key(d), i) {
                return Err(Error::invalid(
                    vpath.field("domains").index(j),
                    format!(
                        "duplicate domain {:?} (also in virtual_hosts[{prev}])",
                        rc.virtual_hosts[i].domains[j]
                    ),
                ));
            }
        }
        virtual_hosts.push(vh);
    }
    Ok(RouteConfig {
        name: rc.name.clone(),
        virtual_hosts,
    })
}

/// What a route table gives each of its routes.
#[derive(Debug, Clone)]
pub struct TableDefaults {
    /// `max_direct_response_body_size_bytes`.
    pub max_direct_response_body: u32,
    /// The table's own (request, response) header edits.
    pub headers: (HeaderMutation, HeaderMutation),
    pub most_specific_header_mutations_wins: bool,
    /// `request_mirror_policies`: a route's when neither it nor its
    /// virtual host has any.
    pub mirrors: Vec<engine::MirrorPolicy>,
    /// The table's `typed_per_filter_config`: its virtual hosts' fill in
    /// from it.
    pub per_filter: engine::PerFilterConfig,
}

impl Default for TableDefaults {
    fn default() -> Self {
        Self {
            max_direct_response_body: DEFAULT_MAX_DIRECT_RESPONSE_BODY,
            headers: Default::default(),
            most_specific_header_mutations_wins: false,
            mirrors: Vec::new(),
            per_filter: engine::PerFilterConfig::default(),
        }
    }
}

/// What a virtual host gives each of its routes.
struct VhDefaults<'a> {
    headers: &'a (HeaderMutation, HeaderMutation),
    retry_policy: Option<&'a engine::RetryPolicy>,
    /// Its `hedge_policy`'s `hedge_on_per_try_timeout`.
    hedge: bool,
    attempt_count: (bool, bool),
    /// Its own `request_mirror_policies`, else its table's.
    mirrors: &'a [engine::MirrorPolicy],
    /// Its `per_request_buffer_limit_bytes`.
    per_request_buffer_limit: Option<u32>,
}

/// One level's (request, response) header edits, from its four lists.
fn level_headers(
    path: &Path,
    request_add: &[core::HeaderValueOption],
    request_remove: &[String],
    response_add: &[core::HeaderValueOption],
    response_remove: &[String],
) -> Result<(HeaderMutation, HeaderMutation)> {
    Ok((
        header_mutation(
            request_add,
            &path.field("request_headers_to_add"),
            request_remove,
            &path.field("request_headers_to_remove"),
        )?,
        header_mutation(
            response_add,
            &path.field("response_headers_to_add"),
            response_remove,
            &path.field("response_headers_to_remove"),
        )?,
    ))
}

/// Validates one virtual host. `known_clusters`: when `Some`, every cluster
/// a route names must be in it; `table`: what its route table gives it.
pub fn virtual_host(
    vh: &pb::VirtualHost,
    path: &Path,
    known_clusters: Option<&HashSet<String>>,
    table: &TableDefaults,
) -> Result<VirtualHost> {
    reject_set!(path, vh, require_tls, virtual_clusters, matcher,);
    super::common::metadata(vh.metadata.as_ref(), || path.clone())?;
    if vh.name.is_empty() {
        return Err(Error::invalid(path.field("name"), "required"));
    }
    if vh.domains.is_empty() {
        return Err(Error::invalid(
            path.field("domains"),
            "at least one domain is required",
        ));
    }
    let vh_retry = match &vh.retry_policy {
        Some(p) => Some(retry_policy(p, &path.field("retry_policy"))?),
        None => None,
    };
    let vh_headers = level_headers(
        path,
        &vh.request_headers_to_add,
        &vh.request_headers_to_remove,
        &vh.response_headers_to_add,
        &vh.response_headers_to_remove,
    )?;
    let mut domains = Vec::with_capacity(vh.domains.len());
    for (i, d) in vh.domains.iter().enumerate() {
        let dpath = path.field("domains").index(i);
        let m = domain(d, &dpath)?;
        if domains.contains(&m) {
            return Err(Error::invalid(dpath, format!("duplicate domain {d:?}")));
        }
        domains.push(m);
    }
    let vh_mirrors = mirror_policies(
        &vh.request_mirror_policies,
        &path.field("request_mirror_policies"),
        known_clusters,
    )?;
    let defaults = VhDefaults {
        per_request_buffer_limit: vh.per_request_buffer_limit_bytes,
        mirrors: if vh_mirrors.is_empty() {
            &table.mirrors
        } else {
            &vh_mirrors
        },
        headers: &vh_headers,
        retry_policy: vh_retry.as_ref(),
        hedge: match &vh.hedge_policy {
            Some(h) => hedge_policy(h, &path.field("hedge_policy"))?,
            None => false,
        },
        attempt_count: (
            vh.include_request_attempt_count,
            vh.include_attempt_count_in_response,
        ),
    };
    let routes = vh
        .routes
        .iter()
        .enumerate()
        .map(|(i, r)| {
            route(
                r,
                &path.field("routes").index(i),
                known_clusters,
                table,
                &defaults,
            )
        })
        .collect::<Result<Vec<Route>>>()?;
    let per_filter = typed_per_filter_config(
        &vh.typed_per_filter_config,
        &path.field("typed_per_filter_config"),
        Level::VirtualHost,
        vh.cors.as_ref().map(|c| (c, path.field("cors"))),
    )?
    .or(&table.per_filter);
    // Each route's own per-filter configs fill in from the virtual host's,
    // once here rather than per request.
    let vh_limits: std::sync::Arc<[engine::RateLimitPolicy]> =
        rate_limit_policies(&vh.rate_limits, &path.field("rate_limits"))?.into();
    let routes = routes
        .into_iter()
        .map(|mut r| {
            if let Some(limits) = r.per_filter.rate_limits.as_mut() {
                std::sync::Arc::make_mut(limits).virtual_host = std::sync::Arc::clone(&vh_limits);
            }
            Route {
                per_filter: r.per_filter.or(&per_filter),
                ..r
            }
        })
        .collect();
    Ok(VirtualHost {
        name: vh.name.clone(),
        domains,
        routes,
        per_filter,
    })
}

/// A hash key for a `DomainMatcher` (kept local so this does not depend on
/// which traits the engine type derives).
fn domain_key(d: &DomainMatcher) -> (u8, String) {
    match d {
        DomainMatcher::Exact(s) => (0, s.clone()),
        DomainMatcher::Suffix(s) => (1, s.clone()),
        DomainMatcher::Prefix(s) => (2, s.clone()),
        DomainMatcher::Any => (3, String::new()),
    }
}

/// Classifies a `domains` entry the way Envoy matches it.
fn domain(d: &str, path: &Path) -> Result<DomainMatcher> {
    let d = d.to_ascii_lowercase();
    let misplaced = || {
        Error::invalid(
            path.clone(),
            format!("{d:?}: '*' is only allowed as the first or last character"),
        )
    };
    if d.is_empty() {
        return Err(Error::invalid(path.clone(), "must not be empty"));
    }
    if d == "*" {
        return Ok(DomainMatcher::Any);
    }
    if let Some(rest) = d.strip_prefix('*') {
        return if rest.contains('*') {
            Err(misplaced())
        } else {
            Ok(DomainMatcher::Suffix(rest.to_owned()))
        };
    }
    if let Some(rest) = d.strip_suffix('*') {
        return if rest.contains('*') {
            Err(misplaced())
        } else {
            Ok(DomainMatcher::Prefix(rest.to_owned()))
        };
    }
    if d.contains('*') {
        return Err(misplaced());
    }
    Ok(DomainMatcher::Exact(d))
}

fn route(
    r: &pb::Route,
    path: &Path,
    known_clusters: Option<&HashSet<String>>,
    table: &TableDefaults,
    vh: &VhDefaults<'_>,
) -> Result<Route> {
    use pb::route::Action;
    reject_set!(path, r, tracing, stat_prefix,);
    super::common::metadata(r.metadata.as_ref(), || path.clone())?;
    let Some(m) = &r.r#match else {
        return Err(Error::invalid(path.field("match"), "required"));
    };
    let matcher = super::route_match::route_match(m, &path.field("match"))?;
    let action = match &r.action {
        Some(Action::Route(a)) => {
            let mut action = route_action(a, &path.field("route"), known_clusters, &matcher)?;
            // The route's own policy whole, else its virtual host's.
            action.retry_policy = action.retry_policy.or_else(|| vh.retry_policy.cloned());
            // Likewise the route's `hedge_policy`, else its virtual host's.
            if a.hedge_policy.is_none() {
                action.hedge_on_per_try_timeout = vh.hedge;
            }
            action.attempt_count = vh.attempt_count;
            // The most specific non-empty list, whole (Envoy's).
            if action.mirrors.is_empty() {
                action.mirrors = vh.mirrors.to_vec();
            }
            action.per_request_buffer_limit = r
                .per_request_buffer_limit_bytes
                .or(vh.per_request_buffer_limit);
            RouteAction::Forward(action)
        }
        Some(Action::Redirect(r)) => RouteAction::Redirect(redirect(r, &path.field("redirect"))?),
        Some(Action::DirectResponse(d)) => RouteAction::DirectResponse(direct_response(
            d,
            &path.field("direct_response"),
            table.max_direct_response_body,
        )?),
        Some(Action::FilterAction(_)) => {
            return Err(Error::unsupported(path.field("filter_action")))
        }
        Some(Action::NonForwardingAction(_)) => {
            return Err(Error::unsupported(path.field("non_forwarding_action")))
        }
        None => return Err(Error::invalid(path.field("route"), "required")),
    };
    let legacy_cors = match &r.action {
        Some(pb::route::Action::Route(a)) => a
            .cors
            .as_ref()
            .map(|c| (c, path.field("route").field("cors"))),
        _ => None,
    };
    let mut per_filter = typed_per_filter_config(
        &r.typed_per_filter_config,
        &path.field("typed_per_filter_config"),
        Level::Route,
        legacy_cors,
    )?;
    if let Some(pb::route::Action::Route(a)) = &r.action {
        // The virtual host's list is filled in by `virtual_host`.
        per_filter.rate_limits = Some(std::sync::Arc::new(engine::RouteRateLimits {
            route: rate_limit_policies(&a.rate_limits, &path.field("route").field("rate_limits"))?
                .into(),
            virtual_host: Vec::new().into(),
            include_vh: a.include_vh_rate_limits.unwrap_or(false),
        }));
    }
    let own = level_headers(
        path,
        &r.request_headers_to_add,
        &r.request_headers_to_remove,
        &r.response_headers_to_add,
        &r.response_headers_to_remove,
    )?;
    let headers = RouteHeaders::fold(
        own,
        vh.headers,
        &table.headers,
        table.most_specific_header_mutations_wins,
    );
    let decorator = match &r.decorator {
        Some(d) if d.operation.is_empty() => {
            return Err(Error::invalid(
                path.field("decorator").field("operation"),
                "required",
            ))
        }
        Some(d) => Some(engine::Decorator {
            operation: d.operation.clone(),
            propagate: d.propagate.unwrap_or(true),
        }),
        None => None,
    };
    Ok(Route {
        name: r.name.clone(),
        matcher,
        action,
        headers,
        decorator,
        per_filter,
    })
}

fn route_action(
    a: &pb::RouteAction,
    path: &Path,
    known_clusters: Option<&HashSet<String>>,
    matcher: &RouteMatch,
) -> Result<ForwardAction> {
    use pb::route_action::{ClusterSpecifier as C, HostRewriteSpecifier as H};
    reject_set!(
        path,
        a,
        metadata_match,
        priority,
        idle_timeout,
        internal_redirect_policy,
        max_stream_duration,
    );
    let check = |name: &str, p: Path| -> Result<()> {
        if name.is_empty() {
            return Err(Error::invalid(p, "required"));
        }
        match known_clusters {
            Some(known) if !known.contains(name) => {
                Err(Error::invalid(p, format!("unknown cluster {name:?}")))
            }
            _ => Ok(()),
        }
    };
    let target = match &a.cluster_specifier {
        Some(C::Cluster(name)) => {
            check(name, path.field("cluster"))?;
            ClusterTarget::Cluster(name.clone())
        }
        Some(C::WeightedClusters(w)) => {
            ClusterTarget::Weighted(weighted(w, &path.field("weighted_clusters"), &check)?)
        }
        Some(C::ClusterHeader(h)) => {
            let name = h.to_ascii_lowercase();
            if name.is_empty() || name.starts_with(':') {
                return Err(Error::invalid(
                    path.field("cluster_header"),
                    format!("{h:?} is not a request field name"),
                ));
            }
            ClusterTarget::Header(name)
        }
        Some(C::ClusterSpecifierPlugin(_)) => {
            return Err(Error::unsupported(path.field("cluster_specifier_plugin")))
        }
        Some(C::InlineClusterSpecifierPlugin(_)) => {
            return Err(Error::unsupported(
                path.field("inline_cluster_specifier_plugin"),
            ))
        }
        None => {
            return Err(Error::invalid(
                path.field("cluster"),
                "one of cluster or weighted_clusters is required",
            ))
        }
    };
    let host_rewrite = match &a.host_rewrite_specifier {
        None => None,
        Some(H::HostRewriteLiteral(h)) => Some(HostRewrite::Literal(h.clone())),
        Some(H::AutoHostRewrite(on)) => on.then_some(HostRewrite::Auto),
        // Envoy takes an empty name, which rewrites nothing.
        Some(H::HostRewriteHeader(h)) if h.is_empty() => None,
        Some(H::HostRewriteHeader(h)) => Some(HostRewrite::Header(h.to_ascii_lowercase())),
        Some(H::HostRewritePathRegex(rr)) => {
            let (re, sub) =
                super::route_reply::regex_rewrite(rr, &path.field("host_rewrite_path_regex"))?;
            Some(HostRewrite::PathRegex(re, sub))
        }
    };
    use pb::route_action::ClusterNotFoundResponseCode as NotFound;
    let cluster_not_found_status = match NotFound::try_from(a.cluster_not_found_response_code) {
        Ok(NotFound::ServiceUnavailable) => 503,
        Ok(NotFound::NotFound) => 404,
        Ok(NotFound::InternalServerError) => 500,
        Err(_) => {
            return Err(Error::invalid(
                path.field("cluster_not_found_response_code"),
                format!("unknown value {}", a.cluster_not_found_response_code),
            ))
        }
    };
    let prefix_rewrite = (!a.prefix_rewrite.is_empty()).then(|| a.prefix_rewrite.clone());
    let regex_rewrite = match &a.regex_rewrite {
        Some(_) if prefix_rewrite.is_some() => {
            return Err(Error::invalid(
                path.field("regex_rewrite"),
                "only one of prefix_rewrite and regex_rewrite may be set",
            ))
        }
        Some(rr) => Some(super::route_reply::regex_rewrite(
            rr,
            &path.field("regex_rewrite"),
        )?),
        None => None,
    };
    if prefix_rewrite.is_some() && matches!(matcher.path, PathMatch::Regex(_)) {
        // Envoy: prefix_rewrite needs a literal prefix/path to replace.
        return Err(Error::invalid(
            path.field("prefix_rewrite"),
            "cannot be used with a safe_regex match",
        ));
    }
    Ok(ForwardAction {
        target,
        timeout: timeout_or(
            a.timeout.as_ref(),
            engine::DEFAULT_ROUTE_TIMEOUT,
            &path.field("timeout"),
        )?,
        prefix_rewrite,
        regex_rewrite,
        host_rewrite,
        append_x_forwarded_host: a.append_x_forwarded_host,
        cluster_not_found_status,
        hash_policy: hash_policies(&a.hash_policy, &path.field("hash_policy"))?,
        retry_policy: match &a.retry_policy {
            Some(p) => Some(retry_policy(p, &path.field("retry_policy"))?),
            None => None,
        },
        hedge_on_per_try_timeout: match &a.hedge_policy {
            Some(h) => hedge_policy(h, &path.field("hedge_policy"))?,
            None => false,
        },
        // The virtual host's, set by the caller.
        attempt_count: (false, false),
        upgrades: super::upgrade::route_upgrades(
            &a.upgrade_configs,
            &path.field("upgrade_configs"),
        )?,
        mirrors: mirror_policies(
            &a.request_mirror_policies,
            &path.field("request_mirror_policies"),
            known_clusters,
        )?,
        // The route's own, set by the caller.
        per_request_buffer_limit: None,
        max_grpc_timeout: match &a.max_grpc_timeout {
            Some(d) => Some(super::common::duration(d, &path.field("max_grpc_timeout"))?),
            None => None,
        },
        grpc_timeout_offset: match &a.grpc_timeout_offset {
            Some(d) => Some(super::common::duration(
                d,
                &path.field("grpc_timeout_offset"),
            )?),
            None => None,
        },
    })
}

fn weighted(
    w: &pb::WeightedCluster,
    path: &Path,
    check: &dyn Fn(&str, Path) -> Result<()>,
) -> Result<WeightedClusters> {
    use pb::weighted_cluster::RandomValueSpecifier as R;
    reject_set!(path, w, runtime_key_prefix);
    match &w.random_value_specifier {
        Some(R::HeaderName(_)) => return Err(Error::unsupported(path.field("header_name"))),
        Some(R::UseHashPolicy(_)) => return Err(Error::unsupported(path.field("use_hash_policy"))),
        None => {}
    }
    if w.clusters.is_empty() {
        return Err(Error::invalid(
            path.field("clusters"),
            "at least one cluster is required",
        ));
    }
    let mut entries = Vec::with_capacity(w.clusters.len());
    let mut sum: u64 = 0;
    for (i, c) in w.clusters.iter().enumerate() {
        let cpath = path.field("clusters").index(i);
        reject_set!(
            cpath,
            c,
            metadata_match,
            request_headers_to_add,
            response_headers_to_add,
            response_headers_to_remove,
            request_headers_to_remove,
            host_rewrite_specifier,
            cluster_header,
        );
        if !c.typed_per_filter_config.is_empty() {
            return Err(Error::unsupported_msg(
                cpath.field("typed_per_filter_config"),
                PER_FILTER_CONFIG_HERE,
            ));
        }
        check(&c.name, cpath.field("name"))?;
        let weight = c.weight.unwrap_or(0);
        sum += u64::from(weight);
        entries.push((c.name.clone(), weight));
    }
    // Deprecated in Envoy; older configs still set it to the sum.
    if let Some(total) = w.total_weight {
        if u64::from(total) != sum {
            return Err(Error::invalid(
                path.field("total_weight"),
                format!("{total} does not equal the sum of weights ({sum})"),
            ));
        }
    }
    WeightedClusters::new(entries).ok_or_else(|| {
        Error::invalid(
            path.field("clusters"),
            "total weight must be between 1 and 4294967295",
        )
    })
}
