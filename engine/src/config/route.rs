//! `RouteConfiguration`: virtual hosts, routes, their matchers and the
//! clusters they send to.

use std::time::Duration;

use regex::Regex;

use super::header_mutation::RouteHeaders;
use super::http_filter::PerFilterConfig;
use super::retry::RetryPolicy;
pub use crate::matcher::HeaderMatchKind;

/// Envoy's default route timeout (`RouteAction.timeout`).
pub const DEFAULT_ROUTE_TIMEOUT: Duration = Duration::from_secs(15);

/// `route_config` (inline `RouteConfiguration`).
#[derive(Debug, Clone)]
pub struct RouteConfig {
    pub name: String,
    pub virtual_hosts: Vec<VirtualHost>,
}

#[derive(Debug, Clone)]
pub struct VirtualHost {
    pub name: String,
    pub domains: Vec<DomainMatcher>,
    pub routes: Vec<Route>,
    /// Its own `typed_per_filter_config` (its routes have it resolved into
    /// theirs).
    pub per_filter: PerFilterConfig,
}

/// One entry of `VirtualHost.domains`, classified as Envoy does.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DomainMatcher {
    /// `example.com` (stored lowercase).
    Exact(String),
    /// `*.example.com` or `*-bar.foo.com`: stores the part after `*`.
    Suffix(String),
    /// `foo.*`: stores the part before `*`.
    Prefix(String),
    /// `*`.
    Any,
}

#[derive(Debug, Clone)]
pub struct Route {
    pub name: String,
    pub matcher: RouteMatch,
    pub action: RouteAction,
    /// Its header edits with its virtual host's and table's, in the
    /// order they apply.
    pub headers: RouteHeaders,
    /// `decorator`: the span's name when the request is traced.
    pub decorator: Option<Decorator>,
    /// `typed_per_filter_config`, its own or else its virtual host's, per
    /// filter type.
    pub per_filter: PerFilterConfig,
}

#[derive(Debug, Clone)]
pub struct RouteMatch {
    pub path: PathMatch,
    /// `case_sensitive` (default true) for `prefix`, `path` and
    /// `path_separated_prefix`.
    pub case_sensitive: bool,
    pub headers: Vec<HeaderMatcher>,
    /// `query_parameters`: every one must match.
    pub query: Vec<QueryParamMatcher>,
    /// `grpc`: only requests whose `content-type` is gRPC's.
    pub grpc: bool,
    /// `runtime_fraction`: the share of requests the route takes (its
    /// `default_value`; no runtime layer can override it).
    pub fraction: Option<Fraction>,
}

impl RouteMatch {
    /// A matcher on the path alone (case-sensitive).
    pub fn new(path: PathMatch) -> Self {
        Self {
            path,
            case_sensitive: true,
            headers: Vec::new(),
            query: Vec::new(),
            grpc: false,
            fraction: None,
        }
    }
}

/// One `query_parameters` entry: the first value of the parameter `name`
/// (compared as written, not percent-decoded, as Envoy does).
#[derive(Debug, Clone)]
pub struct QueryParamMatcher {
    pub name: String,
    pub kind: QueryParamMatch,
}

#[derive(Debug, Clone)]
pub enum QueryParamMatch {
    /// `present_match`: whether the parameter is there; no specifier at
    /// all is `Present(true)`.
    Present(bool),
    /// `string_match` on its value (`a` without `=` has the value "").
    Value(HeaderMatchKind),
}

/// A `FractionalPercent`: `numerator` out of `denominator` (100, 10 000
/// or 1 000 000).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fraction {
    pub numerator: u32,
    pub denominator: u32,
}

impl Fraction {
    /// Whether a request with this random value falls in the share, as
    /// Envoy evaluates a fractional percent: `random % denominator <
    /// numerator`.
    pub fn includes(&self, random: u64) -> bool {
        random % u64::from(self.denominator) < u64::from(self.numerator)
    }
}

#[derive(Debug, Clone)]
pub enum PathMatch {
    Prefix(String),
    Path(String),
    /// `path_separated_prefix`: the prefix, then the end of the path or a
    /// `/` (`/api` takes `/api` and `/api/x`, not `/apix`).
    SeparatedPrefix(String),
    /// `safe_regex`: must match the whole path (query stripped), as in Envoy.
    Regex(Regex),
    /// `connect_matcher`: CONNECT requests, which no other matcher takes
    /// (an HTTP/1.1 CONNECT has no path).
    Connect,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderMatcher {
    /// Lowercase header name; `:authority`, `:path`, `:method`, `:scheme` allowed.
    pub name: String,
    pub kind: HeaderMatchKind,
    pub invert: bool,
}

/// What a matched route does: Envoy's `route`, `redirect` or
/// `direct_response` (the `action` oneof).
// Routes are config, built once per snapshot: a boxed forward action
// would cost every forwarded request a pointer chase to save bytes on a
// few redirect routes.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum RouteAction {
    /// `route`: forwarded to a cluster.
    Forward(ForwardAction),
    /// `redirect`: answered with a 3xx and a `location`.
    Redirect(Redirect),
    /// `direct_response`: answered with a fixed status and body.
    DirectResponse(DirectResponse),
}

impl ForwardAction {
    /// The timeout for a gRPC request with this `grpc-timeout` value:
    /// Envoy's rule. With `max_grpc_timeout` set, the header's value (0
    /// when absent) less `grpc_timeout_offset` (only if that leaves some),
    /// capped by `max_grpc_timeout` unless that is 0; 0 means none.
    /// Without it, the route's `timeout`.
    pub fn timeout_for(&self, grpc_timeout: Option<Duration>) -> Option<Duration> {
        let Some(max) = self.max_grpc_timeout else {
            return self.timeout;
        };
        let mut t = grpc_timeout.unwrap_or_default();
        if let Some(offset) = self.grpc_timeout_offset {
            if offset < t {
                t -= offset;
            }
        }
        if !max.is_zero() && (t.is_zero() || t > max) {
            t = max;
        }
        (!t.is_zero()).then_some(t)
    }
}

impl RouteAction {
    /// The forwarding action, when the route forwards.
    #[inline]
    pub fn forward(&self) -> Option<&ForwardAction> {
        match self {
            Self::Forward(f) => Some(f),
            _ => None,
        }
    }
}

/// `redirect` (`RedirectAction`): how the `location` is made from the
/// request (see `engine::route::redirect_location`). Unset parts keep the
/// request's.
#[derive(Debug, Clone)]
pub struct Redirect {
    /// `scheme_redirect` (lower case), or `https` for `https_redirect`.
    pub scheme: Option<String>,
    /// `host_redirect`.
    pub host: Option<String>,
    /// `port_redirect`.
    pub port: Option<u16>,
    pub path: RedirectPath,
    /// `strip_query`.
    pub strip_query: bool,
    /// `response_code`: 301, 302, 303, 307 or 308.
    pub status: u16,
}

/// The path part of a redirect.
#[derive(Debug, Clone)]
pub enum RedirectPath {
    /// The request's path.
    Keep,
    /// `path_redirect`: the whole path; its own query, if it has one,
    /// replaces the request's (and `strip_query` does not remove it).
    Path { path: String, has_query: bool },
    /// `prefix_rewrite`: the part the route's prefix (or path) matched
    /// is replaced.
    Prefix(String),
    /// `regex_rewrite`: every match in the path (query excluded) replaced.
    Regex {
        pattern: Regex,
        substitution: String,
    },
}

/// `direct_response` (`DirectResponseAction`).
#[derive(Debug, Clone)]
pub struct DirectResponse {
    /// 200..=599.
    pub status: u16,
    /// `body`, read once at load (`filename`, `inline_bytes`,
    /// `inline_string` or `environment_variable`); `None` when unset.
    pub body: Option<bytes::Bytes>,
}

/// `route` (Envoy's `RouteAction`): where and how a request is forwarded.
#[derive(Debug, Clone)]
pub struct ForwardAction {
    pub target: ClusterTarget,
    /// `timeout`; `None` when configured as 0 (disabled).
    pub timeout: Option<Duration>,
    pub prefix_rewrite: Option<String>,
    /// `regex_rewrite`: every match in the path (query excluded) replaced
    /// by the substitution (in the regex crate's syntax); exclusive with
    /// `prefix_rewrite`.
    pub regex_rewrite: Option<(Regex, String)>,
    /// `host_rewrite_literal`, `host_rewrite_header`, `auto_host_rewrite`
    /// or `host_rewrite_path_regex`.
    pub host_rewrite: Option<HostRewrite>,
    /// `append_x_forwarded_host`: a request whose host was rewritten goes
    /// with its original in `x-forwarded-host`.
    pub append_x_forwarded_host: bool,
    /// `cluster_not_found_response_code`: the status when the cluster
    /// (a `cluster_header`'s, or one gone from the config) is unknown.
    pub cluster_not_found_status: u16,
    /// `hash_policy`: what a request's hash is made of, for `RING_HASH` and
    /// `MAGLEV` clusters (see `engine::lb::request_hash`).
    pub hash_policy: Vec<HashPolicy>,
    /// `retry_policy`, its own or else its virtual host's (Envoy takes the
    /// route's whole, not merged).
    pub retry_policy: Option<RetryPolicy>,
    /// `hedge_policy.hedge_on_per_try_timeout`, the route's policy else
    /// its virtual host's: an attempt past its `per_try_timeout` stays in
    /// flight beside the retry it makes, and the first good answer wins.
    pub hedge_on_per_try_timeout: bool,
    /// `max_grpc_timeout`: when set, a gRPC request's `grpc-timeout`
    /// replaces the route timeout, capped by it (0: no cap).
    pub max_grpc_timeout: Option<Duration>,
    /// `grpc_timeout_offset`: taken off a `grpc-timeout` that is used.
    pub grpc_timeout_offset: Option<Duration>,
    /// Its virtual host's `include_request_attempt_count` and
    /// `include_attempt_count_in_response`: `x-envoy-attempt-count` on the
    /// request going upstream, and on the response.
    pub attempt_count: (bool, bool),
    /// `upgrade_configs`: this route's say on upgrades (WebSocket), ahead
    /// of its connection manager's.
    pub upgrades: Vec<super::upgrade::UpgradeConfig>,
    /// `request_mirror_policies`: the route's own, else its virtual
    /// host's, else its table's (the most specific non-empty list, whole).
    pub mirrors: Vec<super::mirror::MirrorPolicy>,
    /// `per_request_buffer_limit_bytes`, the route's else its virtual
    /// host's: the most request body kept to replay on a retry (at most
    /// the listener's `per_connection_buffer_limit_bytes`, which applies
    /// when this is unset).
    pub per_request_buffer_limit: Option<u32>,
}

/// One `hash_policy` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HashPolicy {
    pub kind: HashOn,
    /// `terminal`: once this entry gave a hash, the later ones are skipped.
    pub terminal: bool,
}

/// What one `hash_policy` entry hashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HashOn {
    /// `header.header_name` (lower case): the header's value.
    Header(String),
    /// `cookie`: the cookie's value; when absent and `ttl` is set, a
    /// cookie made from the client's address is hashed and set on the
    /// response.
    Cookie {
        name: String,
        ttl: Option<Duration>,
        path: Option<String>,
    },
    /// `connection_properties.source_ip`.
    SourceIp,
    /// `query_parameter.name`: the first value of that parameter.
    QueryParameter(String),
}

#[derive(Debug, Clone)]
pub enum ClusterTarget {
    Cluster(String),
    Weighted(WeightedClusters),
    /// `cluster_header`: the cluster the request's field of that
    /// (lowercase) name names.
    Header(String),
}

/// How a forwarded request's host is rewritten.
#[derive(Debug, Clone)]
pub enum HostRewrite {
    /// `host_rewrite_literal`.
    Literal(String),
    /// `host_rewrite_header`: the value of that (lowercase) request field,
    /// when it has a non-empty one.
    Header(String),
    /// `auto_host_rewrite`: the chosen host's `hostname` (a DNS cluster's
    /// name), when it has one.
    Auto,
    /// `host_rewrite_path_regex`: the path (query left off) with every
    /// match of the pattern replaced, as Envoy does (no match: the path).
    PathRegex(Regex, String),
}

/// `weighted_clusters`: cumulative weights so a pick is one binary search.
#[derive(Debug, Clone)]
pub struct WeightedClusters {
    /// `(cluster name, cumulative upper bound)`, strictly increasing bounds.
    pub clusters: Vec<(String, u32)>,
    pub total_weight: u32,
}

impl WeightedClusters {
    /// Builds from `(name, weight)` pairs; zero weights are dropped.
    /// Returns `None` when the total is 0.
    pub fn new(entries: impl IntoIterator<Item = (String, u32)>) -> Option<Self> {
        let mut total: u32 = 0;
        let mut clusters = Vec::new();
        for (name, w) in entries {
            if w == 0 {
                continue;
            }
            total = total.checked_add(w)?;
            clusters.push((name, total));
        }
        (total > 0).then_some(Self {
            clusters,
            total_weight: total,
        })
    }

    /// Picks the cluster for a random value in `0..total_weight`.
    pub fn pick(&self, random: u32) -> &str {
        let r = random % self.total_weight;
        let i = self.clusters.partition_point(|(_, bound)| *bound <= r);
        &self.clusters[i].0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts_replace_the_route_timeout_when_max_grpc_timeout_is_set() {
        let s = Duration::from_secs;
        let action = |max: Option<Duration>, offset: Option<Duration>| ForwardAction {
            target: ClusterTarget::Cluster("c".into()),
            timeout: Some(s(15)),
            prefix_rewrite: None,
            regex_rewrite: None,
            host_rewrite: None,
            append_x_forwarded_host: false,
            cluster_not_found_status: 503,
            hash_policy: vec![],
            retry_policy: None,
            hedge_on_per_try_timeout: false,
            attempt_count: (false, false),
            upgrades: Vec::new(),
            mirrors: Vec::new(),
            per_request_buffer_limit: None,
            max_grpc_timeout: max,
            grpc_timeout_offset: offset,
        };
        // Unset: grpc-timeout is not read.
        assert_eq!(action(None, None).timeout_for(Some(s(2))), Some(s(15)));
        // 0 (Istio's): the client's, uncapped; no header: no timeout at all.
        assert_eq!(
            action(Some(s(0)), None).timeout_for(Some(s(60))),
            Some(s(60))
        );
        assert_eq!(action(Some(s(0)), None).timeout_for(None), None);
        // Capped; no header: the cap.
        assert_eq!(
            action(Some(s(5)), None).timeout_for(Some(s(60))),
            Some(s(5))
        );
        assert_eq!(action(Some(s(5)), None).timeout_for(None), Some(s(5)));
        // The offset comes off before the cap, and only if it leaves some.
        assert_eq!(
            action(Some(s(5)), Some(Duration::from_millis(500))).timeout_for(Some(s(2))),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            action(Some(s(5)), Some(s(1))).timeout_for(Some(s(10))),
            Some(s(5))
        );
        assert_eq!(
            action(Some(s(5)), Some(s(3))).timeout_for(Some(s(2))),
            Some(s(2))
        );
    }

    #[test]
    fn weighted_pick_follows_cumulative_bounds() {
        let w = WeightedClusters::new([("a".into(), 1), ("z".into(), 0), ("b".into(), 3)]).unwrap();
        assert_eq!(w.total_weight, 4);
        assert_eq!(w.pick(0), "a");
        assert_eq!(w.pick(1), "b");
        assert_eq!(w.pick(3), "b");
        assert_eq!(w.pick(4), "a");
        assert!(WeightedClusters::new([("a".into(), 0)]).is_none());
    }
}

/// A route's `decorator`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decorator {
    /// `operation`: the traced request's span name.
    pub operation: String,
    /// `propagate` (default true): a traced request carries it upstream
    /// as `x-envoy-decorator-operation`.
    pub propagate: bool,
}
