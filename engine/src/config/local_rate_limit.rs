//! The local rate limit filter's config (`envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit`) and the routes' rate limit actions (`RateLimit`): token buckets shared by the shards, chosen by descriptors the actions make from the request.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::header_mutation::HeaderMutation;
use super::route::{Fraction, HeaderMatcher};
use crate::rate_limit::{BucketShape, SharedBucket};

/// One action of a `RateLimit`: what it adds to the descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RateLimitAction {
    /// `source_cluster`: `("source_cluster", <node cluster>)`.
    SourceCluster,
    /// `destination_cluster`: `("destination_cluster", <route's cluster>)`.
    DestinationCluster,
    /// `request_headers`: `(key, <the field's value>)`; without the field
    /// the policy makes no descriptor, unless `skip_if_absent`.
    RequestHeaders {
        header: String,
        key: String,
        skip_if_absent: bool,
    },
    /// `query_parameters`.
    QueryParameters {
        name: String,
        key: String,
        skip_if_absent: bool,
    },
    /// `remote_address`: `("remote_address", <client address>)`.
    RemoteAddress,
    /// `masked_remote_address`: the client's address masked to a prefix.
    MaskedRemoteAddress { v4: u8, v6: u8 },
    /// `generic_key`.
    GenericKey { key: String, value: String },
    /// `header_value_match`: `(key, value)` when the matchers take the
    /// request (or do not, with `expect_match: false`).
    HeaderValueMatch {
        key: String,
        value: String,
        expect_match: bool,
        headers: Vec<HeaderMatcher>,
    },
}

/// A route's, virtual host's or filter's `RateLimit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimitPolicy {
    /// `stage` (0..=10): only the filters of that stage use it.
    pub stage: u32,
    pub actions: Vec<RateLimitAction>,
}

/// The rate limit actions a route has: its own and its virtual host's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteRateLimits {
    pub route: Arc<[RateLimitPolicy]>,
    pub virtual_host: Arc<[RateLimitPolicy]>,
    /// The route action's deprecated `include_vh_rate_limits`.
    pub include_vh: bool,
}

/// `vh_rate_limits`: how a route's actions combine with its virtual
/// host's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VhRateLimits {
    /// The virtual host's only when the route has none.
    #[default]
    Override,
    Include,
    Ignore,
}

/// Buckets made as distinct values come (a descriptor entry without a
/// value): a fixed table, so a million clients cost what a few do. A
/// value's slot is its hash's; a value finding another in its slot takes
/// the slot with a full bucket (the other's is forgotten, as Envoy's LRU
/// forgets its oldest).
#[derive(Debug)]
pub struct DynamicBuckets {
    /// (value's hash, bucket) per slot; hash 0: free.
    slots: Box<[(AtomicU64, SharedBucket)]>,
}

impl DynamicBuckets {
    pub fn new(shape: BucketShape, max: u32) -> Self {
        let n = (max as usize)
            .saturating_mul(4)
            .clamp(64, 1 << 16)
            .next_power_of_two();
        Self {
            slots: (0..n)
                .map(|_| (AtomicU64::new(0), SharedBucket::new(shape)))
                .collect(),
        }
    }

    /// The bucket for a value whose hash is `hash` (never 0).
    pub fn bucket(&self, hash: u64) -> &SharedBucket {
        let hash = hash.max(1);
        let (tag, bucket) = &self.slots[(hash as usize) & (self.slots.len() - 1)];
        if tag.swap(hash, Ordering::Relaxed) != hash {
            bucket.refill();
        }
        bucket
    }
}

/// One `descriptors` entry: the descriptor it limits and its bucket.
#[derive(Debug)]
pub struct LocalDescriptor {
    /// (key, value); `None`: any value, a bucket per value.
    pub entries: Vec<(String, Option<String>)>,
    pub shape: BucketShape,
    /// `shadow_mode`: judged and counted, never refused.
    pub shadow: bool,
    pub bucket: SharedBucket,
    pub dynamic: Option<DynamicBuckets>,
}

/// `envoy.filters.http.local_ratelimit`, as the filter's config or a
/// route's (which replaces it with its own buckets).
#[derive(Debug)]
pub struct LocalRateLimit {
    pub stat_prefix: String,
    /// `status` (default 429; below 400 means 429).
    pub status: u16,
    /// `token_bucket`: the default bucket (none: only descriptors limit).
    pub bucket: Option<SharedBucket>,
    /// `filter_enabled` (unset: none of the requests).
    pub enabled: Fraction,
    /// `filter_enforced` (unset: none).
    pub enforced: Fraction,
    pub request_headers_when_not_enforced: HeaderMutation,
    pub response_headers_to_add: HeaderMutation,
    pub descriptors: Vec<LocalDescriptor>,
    pub stage: u32,
    /// `local_rate_limit_per_downstream_connection`: each connection has
    /// buckets of its own, of these shapes.
    pub per_connection: bool,
    /// `enable_x_ratelimit_headers: DRAFT_VERSION_03`.
    pub x_ratelimit_headers: bool,
    pub vh_rate_limits: VhRateLimits,
    /// `always_consume_default_token_bucket` (default true).
    pub always_consume_default: bool,
    /// `rate_limited_as_resource_exhausted`: gRPC's 8 instead of 14.
    pub resource_exhausted: bool,
    /// The filter's own `rate_limits` (replacing the route's).
    pub rate_limits: Vec<RateLimitPolicy>,
    /// `max_dynamic_descriptors` (default 20).
    pub max_dynamic: u32,
}

impl PartialEq for LocalRateLimit {
    fn eq(&self, other: &Self) -> bool {
        // Buckets are state: a new config (even an equal one) starts them
        // full, as Envoy's does.
        std::ptr::eq(self, other)
    }
}

impl Eq for LocalRateLimit {}
