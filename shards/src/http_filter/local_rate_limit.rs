//! The local rate limit filter (Envoy's `envoy.filters.http.local_ratelimit`): token buckets that hold for the gateway as a whole (one atomic each, shared by the shards: `engine::rate_limit`), chosen by the descriptors the route's `rate_limits` actions make from the request; a request a bucket refuses is answered 429 (`RL`), or passed on marked when the filter is not enforced.

use std::net::IpAddr;
use std::sync::OnceLock;
use std::time::Instant;

use engine::rate_limit::{SharedBucket, Take};
use engine::{
    ClusterTarget, LocalDescriptor, LocalRateLimit, PerRoute, RateLimitAction, RateLimitPolicy,
    RouteAction, VhRateLimits,
};
use smallvec::SmallVec;

use super::header_mutation::{self, FormatInput, Head};
use super::{FilterCx, Flow, HttpFilter, Reply, RequestFlow, RequestHead, ResponseHead};
use crate::stats::LocalRateLimitStats;

/// The instant buckets count time from: one per process, so every shard
/// reads the same clock into the same buckets.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Hashes of dynamic descriptor values: the same in every shard.
fn value_hash(value: &[u8]) -> u64 {
    static SEEDS: OnceLock<ahash::RandomState> = OnceLock::new();
    SEEDS
        .get_or_init(|| ahash::RandomState::with_seeds(0x5eed, 0x0b0e, 0xcafe, 0xf00d))
        .hash_one(value)
}

/// A descriptor the request made: (key, value) pairs.
type Made = SmallVec<[(String, Vec<u8>); 2]>;

/// The `x-ratelimit-*` fields the response gets.
#[derive(Debug, Clone, Copy)]
struct Quota {
    limit: u32,
    take: Take,
}

/// A connection's own buckets (`local_rate_limit_per_downstream_connection`),
/// by the config they were made from.
#[derive(Default)]
struct ConnBuckets {
    sets: Vec<(usize, Vec<SharedBucket>, Option<SharedBucket>)>,
}

/// The descriptors `policies` make of this request.
fn descriptors(
    policies: &[RateLimitPolicy],
    stage: u32,
    cx: &FilterCx<'_>,
    head: &RequestHead<'_>,
) -> SmallVec<[Made; 2]> {
    let mut out = SmallVec::new();
    'policy: for p in policies.iter().filter(|p| p.stage == stage) {
        let mut made = Made::new();
        for action in &p.actions {
            match action {
                RateLimitAction::SourceCluster => made.push((
                    "source_cluster".into(),
                    cx.snapshot.node.cluster.as_bytes().to_vec(),
                )),
                RateLimitAction::DestinationCluster => match cx.route.map(|r| &r.action) {
                    Some(RouteAction::Forward(a)) => match &a.target {
                        ClusterTarget::Cluster(c) => {
                            made.push(("destination_cluster".into(), c.as_bytes().to_vec()))
                        }
                        _ => continue 'policy,
                    },
                    _ => continue 'policy,
                },
                RateLimitAction::RequestHeaders {
                    header,
                    key,
                    skip_if_absent,
                } => match head.get(header.as_bytes()) {
                    Some(v) => made.push((key.clone(), v.to_vec())),
                    None if *skip_if_absent => {}
                    None => continue 'policy,
                },
                RateLimitAction::QueryParameters {
                    name,
                    key,
                    skip_if_absent,
                } => {
                    let path = head.get(b":path").unwrap_or_default();
                    match engine::route::query_value(path, name.as_bytes()) {
                        Some(v) => made.push((key.clone(), v.to_vec())),
                        None if *skip_if_absent => {}
                        None => continue 'policy,
                    }
                }
                RateLimitAction::RemoteAddress => made.push((
                    "remote_address".into(),
                    cx.conn.peer.ip().to_string().into_bytes(),
                )),
                RateLimitAction::MaskedRemoteAddress { v4, v6 } => made.push((
                    "masked_remote_address".into(),
                    masked(cx.conn.peer.ip(), *v4, *v6).into_bytes(),
                )),
                RateLimitAction::GenericKey { key, value } => {
                    made.push((key.clone(), value.as_bytes().to_vec()))
                }
                RateLimitAction::HeaderValueMatch {
                    key,
                    value,
                    expect_match,
                    headers,
                } => {
                    let all = headers.iter().all(|m| head.matches(m));
                    if all != *expect_match {
                        continue 'policy;
                    }
                    made.push((key.clone(), value.as_bytes().to_vec()));
                }
            }
        }
        if !made.is_empty() {
            out.push(made);
        }
    }
    out
}

/// `addr/len` of the client's address masked to its prefix.
fn masked(ip: IpAddr, v4: u8, v6: u8) -> String {
    match ip {
        IpAddr::V4(a) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(v4)).unwrap_or(0);
            format!("{}/{v4}", std::net::Ipv4Addr::from(u32::from(a) & mask))
        }
        IpAddr::V6(a) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(v6)).unwrap_or(0);
            format!("{}/{v6}", std::net::Ipv6Addr::from(u128::from(a) & mask))
        }
    }
}

/// Whether a made descriptor is a configured one (same keys in order;
/// a configured entry without a value takes any).
fn matches(d: &LocalDescriptor, made: &Made) -> bool {
    d.entries.len() == made.len()
        && d.entries
            .iter()
            .zip(made)
            .all(|((k, v), (mk, mv))| k == mk && v.as_ref().is_none_or(|v| v.as_bytes() == &mv[..]))
}

/// The policies a route gives this filter.
fn route_policies<'a>(
    f: &'a LocalRateLimit,
    cx: &FilterCx<'a>,
) -> SmallVec<[&'a [RateLimitPolicy]; 2]> {
    let mut out = SmallVec::new();
    if !f.rate_limits.is_empty() {
        out.push(&f.rate_limits[..]);
        return out;
    }
    let Some(limits) = cx.route.and_then(|r| r.per_filter.rate_limits.as_deref()) else {
        return out;
    };
    let mode = match limits.include_vh {
        true => VhRateLimits::Include,
        false => f.vh_rate_limits,
    };
    match mode {
        VhRateLimits::Override if limits.route.is_empty() => out.push(&limits.virtual_host[..]),
        VhRateLimits::Include => {
            out.push(&limits.route[..]);
            out.push(&limits.virtual_host[..]);
        }
        _ => out.push(&limits.route[..]),
    }
    out
}

/// A rate of refill (tokens per second), for strictest-first.
fn rate(d: &LocalDescriptor) -> f64 {
    f64::from(d.shape.tokens_per_fill) / d.shape.fill_interval.as_secs_f64()
}

impl HttpFilter for LocalRateLimit {
    fn on_request_headers(&self, cx: &mut FilterCx<'_>, head: &mut RequestHead<'_>) -> RequestFlow {
        let config: &LocalRateLimit = match cx
            .route
            .and_then(|r| r.per_filter.local_rate_limit.as_ref())
        {
            Some(PerRoute::Disabled) => return RequestFlow::Continue,
            Some(PerRoute::Override(l)) => l,
            None => self,
        };
        let stats = cx.counters::<LocalRateLimitStats>();
        if !config.enabled.includes(cx.shard.random_u64()) {
            return RequestFlow::Continue;
        }
        stats.inc(|s| &s.enabled);
        let now = cx.now.saturating_duration_since(epoch()).as_nanos() as u64;
        // Matching descriptors, strictest first.
        let mut matched: SmallVec<[(&LocalDescriptor, Option<u64>); 2]> = SmallVec::new();
        if !config.descriptors.is_empty() {
            for list in route_policies(config, cx) {
                for made in descriptors(list, config.stage, cx, head) {
                    for d in config.descriptors.iter().filter(|d| matches(d, &made)) {
                        // A wildcard entry's bucket is its value's.
                        let dynamic = d.dynamic.as_ref().map(|_| {
                            let key: Vec<u8> = made
                                .iter()
                                .flat_map(|(_, v)| v.iter().copied().chain([0]))
                                .collect();
                            value_hash(&key)
                        });
                        matched.push((d, dynamic));
                    }
                }
            }
        }
        matched.sort_by(|a, b| rate(a.0).total_cmp(&rate(b.0)));
        let per_conn = config.per_connection;
        let key = config as *const LocalRateLimit as usize;
        let take_from = |cx: &mut FilterCx<'_>,
                         which: Option<usize>,
                         dynamic: Option<u64>|
         -> Option<(u32, Take)> {
            let take = |b: &SharedBucket| (b.shape.max_tokens, b.take(now));
            if per_conn {
                return cx.with_conn_state(|c: &mut ConnBuckets| {
                    let at = match c.sets.iter().position(|(k, _, _)| *k == key) {
                        Some(at) => at,
                        None => {
                            let buckets = config
                                .descriptors
                                .iter()
                                .map(|d| SharedBucket::new(d.shape))
                                .collect();
                            let default =
                                config.bucket.as_ref().map(|b| SharedBucket::new(b.shape));
                            c.sets.push((key, buckets, default));
                            c.sets.len() - 1
                        }
                    };
                    let (_, buckets, default) = &c.sets[at];
                    match which {
                        Some(i) => Some(take(&buckets[i])),
                        None => default.as_ref().map(take),
                    }
                });
            }
            match which {
                Some(i) => {
                    let d = &config.descriptors[i];
                    Some(match (dynamic, &d.dynamic) {
                        (Some(h), Some(table)) => take(table.bucket(h)),
                        _ => take(&d.bucket),
                    })
                }
                None => config.bucket.as_ref().map(take),
            }
        };
        let mut shown: Option<Quota> = None;
        let mut refused: Option<Quota> = None;
        for (d, dynamic) in &matched {
            let index = config.descriptors.iter().position(|x| std::ptr::eq(x, *d));
            let Some((limit, take)) = take_from(cx, index, *dynamic) else {
                continue;
            };
            if !take.allowed && d.shadow {
                stats.inc(|s| &s.shadow_mode);
                continue;
            }
            let quota = Quota { limit, take };
            shown.get_or_insert(quota);
            if !take.allowed {
                refused = Some(quota);
                break;
            }
        }
        if refused.is_none() && (matched.is_empty() || config.always_consume_default) {
            if let Some((limit, take)) = take_from(cx, None, None) {
                let quota = Quota { limit, take };
                if !take.allowed {
                    refused = Some(quota);
                } else if matched.is_empty() {
                    shown = Some(quota);
                }
            }
        }
        let Some(quota) = refused else {
            stats.inc(|s| &s.ok);
            if let (true, Some(q)) = (config.x_ratelimit_headers, shown) {
                cx.set_state(q);
            }
            return RequestFlow::Continue;
        };
        stats.inc(|s| &s.rate_limited);
        let input = FormatInput {
            peer: cx.conn.peer,
            upstream: None,
            protocol: cx.conn.protocol,
            status: None,
            sni: cx.conn.sni,
        };
        if !config.enforced.includes(cx.shard.random_u64()) {
            let mutation = std::slice::from_ref(&config.request_headers_when_not_enforced);
            header_mutation::apply(mutation, Head::Request(head.list), head.edits, &input);
            return RequestFlow::Continue;
        }
        stats.inc(|s| &s.enforced);
        let mut reply = Reply::new(config.status, "local_rate_limited", "RL");
        let levels = std::slice::from_ref(&config.response_headers_to_add);
        header_mutation::apply(
            levels,
            Head::Response {
                list: None,
                request: Some(head.list),
            },
            &mut reply.fields,
            &input,
        );
        if config.x_ratelimit_headers {
            add_quota(&mut reply.fields, quota);
        }
        if cx.grpc {
            reply.grpc_status = Some(if config.resource_exhausted { 8 } else { 14 });
        }
        RequestFlow::Reply(reply)
    }

    fn on_response_headers(&self, cx: &mut FilterCx<'_>, head: &mut ResponseHead<'_>) -> Flow {
        if let Some(q) = cx.state::<Quota>().copied() {
            add_quota(head.edits, q);
        }
        Flow::Continue
    }
}

/// `x-ratelimit-limit`, `-remaining`, `-reset` (draft 03).
fn add_quota(edits: &mut super::HeaderEdits, q: Quota) {
    let _ = edits.set(b"x-ratelimit-limit", q.limit.to_string().as_bytes());
    let _ = edits.set(
        b"x-ratelimit-remaining",
        q.take.remaining.to_string().as_bytes(),
    );
    let _ = edits.set(
        b"x-ratelimit-reset",
        q.take.reset_secs.to_string().as_bytes(),
    );
}
