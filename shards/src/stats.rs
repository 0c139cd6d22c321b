//! Per-shard counters, written by one shard and read by the admin server.
//!
//! Every counter has exactly one writer (its shard), so increments are a
//! relaxed load + store, not a locked read-modify-write, and no cache line is
//! written by two cores. The admin server sums the shards when asked.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;

use engine::HostId;

pub mod envoy;
pub mod filters;
pub mod proxy_proto;
pub mod tls;

/// A single-writer counter or gauge.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Only the owning shard may call the mutators.
    #[inline]
    pub fn inc(&self) {
        self.add(1);
    }
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }
    #[inline]
    pub fn dec(&self) {
        self.0.store(self.0.load(Relaxed).wrapping_sub(1), Relaxed);
    }
    #[inline]
    pub fn set(&self, v: u64) {
        self.0.store(v, Relaxed);
    }
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// Response classes counted per listener and per host.
#[derive(Debug, Default)]
pub struct StatusClasses {
    pub c1xx: Counter,
    pub c2xx: Counter,
    pub c3xx: Counter,
    pub c4xx: Counter,
    pub c5xx: Counter,
}

impl StatusClasses {
    pub const NAMES: [&'static str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

    #[inline]
    pub fn record(&self, status: u16) {
        match status / 100 {
            1 => self.c1xx.inc(),
            2 => self.c2xx.inc(),
            3 => self.c3xx.inc(),
            4 => self.c4xx.inc(),
            _ => self.c5xx.inc(),
        }
    }

    pub fn classes(&self) -> [(&'static str, u64); 5] {
        [
            ("1xx", self.c1xx.get()),
            ("2xx", self.c2xx.get()),
            ("3xx", self.c3xx.get()),
            ("4xx", self.c4xx.get()),
            ("5xx", self.c5xx.get()),
        ]
    }
}

/// Shard-wide downstream counters.
#[derive(Debug, Default)]
pub struct DownstreamStats {
    /// Requests whose body passed the retry buffer (the route's
    /// `per_request_buffer_limit_bytes`, else the listener's buffer
    /// limit): not retried from then on (Envoy's
    /// `retry_or_shadow_abandoned`).
    pub rq_retry_body_overflow: Counter,
    /// Attempts given up after their `per_try_idle_timeout` (Envoy's
    /// `upstream_rq_per_try_idle_timeout`).
    pub rq_per_try_idle_timeout: Counter,
    pub cx_total: Counter,
    pub cx_active: Counter,
    /// Connections served as HTTP/1.x and as HTTP/2.
    pub cx_http1_total: Counter,
    pub cx_http2_total: Counter,
    /// Requests taken over HTTP/1.x (the rest of `rq_total` is HTTP/2's).
    pub rq_http1_total: Counter,
    /// HTTP/1.1 upgrade requests (WebSocket and the like), HTTP/2
    /// extended CONNECTs and CONNECT, refused: no route takes them (Envoy
    /// without `upgrade_configs`).
    pub rq_upgrade_refused: Counter,
    /// Upgrades and CONNECTs sent to a backend (or, terminated, connected
    /// to it), whatever its answer (Envoy's `downstream_cx_upgrades_total`).
    pub rq_upgrades_total: Counter,
    pub cx_protocol_error: Counter,
    /// TLS handshakes completed, of which resumed; handshakes that failed
    /// (bad or unexpected bytes, no common version or suite, no
    /// certificate for the SNI under `require_sni`) or did not complete in
    /// time.
    pub tls_handshake: Counter,
    pub tls_session_reused: Counter,
    pub tls_handshake_error: Counter,
    pub tls_handshake_timeout: Counter,
    /// Connections no filter chain matched (and the listener has no
    /// default chain): closed unanswered (Envoy's
    /// `no_filter_chain_match`).
    pub cx_no_filter_chain_match: Counter,
    /// Connections whose ClientHello (or first byte) did not come within
    /// `listener_filters_timeout` (Envoy's `downstream_pre_cx_timeout`).
    pub cx_listener_filters_timeout: Counter,
    /// Connections closed for a missing or malformed PROXY header
    /// (Envoy's `downstream_cx_proxy_proto_error`).
    pub cx_proxy_proto_error: Counter,
    /// Connections closed as accepted by the overload manager:
    /// `reject_incoming_connections`, and the global connection limit
    /// (`global_downstream_max_connections`).
    pub cx_overload_reject: Counter,
    pub cx_global_overflow: Counter,
    /// Requests answered 503 by `stop_accepting_requests`, and responses
    /// that closed their connection for `disable_http_keepalive`.
    pub rq_overload_close: Counter,
    pub cx_overload_disable_keepalive: Counter,
    /// Streams `reset_high_memory_stream` reset (Envoy's
    /// `envoy.overload_actions.reset_high_memory_stream.count`).
    pub rq_overload_reset: Counter,
    /// Handshakes the client left (closed or reset its socket) before
    /// they completed.
    pub tls_handshake_abandoned: Counter,
    /// Access log lines dropped because the writer's queue was full.
    pub access_log_dropped: Counter,
    pub cx_reset_flood: Counter,
    pub cx_idle_timeout: Counter,
    /// HTTP/1.1 heads not complete within `request_headers_timeout`
    /// (answered 408, connection closed).
    pub rq_header_timeout: Counter,
    pub rq_total: Counter,
    pub rq_active: Counter,
    pub rq_reset_by_client: Counter,
    /// Streams reset by the client before their request went upstream:
    /// never sent, so no backend sees their reset.
    pub rq_reset_before_upstream: Counter,
    pub rq_no_route: Counter,
    /// Requests a route's `redirect` answered.
    pub rq_redirect: Counter,
    /// Requests a route's `direct_response` answered.
    pub rq_direct_response: Counter,
    /// Requests answered 307 to their normalized path
    /// (`UNESCAPE_AND_REDIRECT`).
    pub rq_redirected_with_normalized_path: Counter,
    /// Requests answered 400 by path normalization (`REJECT_REQUEST`).
    pub rq_failed_path_normalization: Counter,
    /// Header values a route's `*_headers_to_add` made that could not go
    /// on a head (a formatted value with CR, LF or NUL): left out.
    pub header_values_refused: Counter,
    pub rq_timeout: Counter,
    /// Requests not in whole within `request_timeout` (Envoy's
    /// `downstream_rq_timeout`).
    pub rq_request_timeout: Counter,
    pub rq_idle_timeout: Counter,
    /// Streams ended by `max_stream_duration`.
    pub rq_max_duration_reached: Counter,
    /// Connections drained at `max_connection_duration`.
    pub cx_max_duration_reached: Counter,
    /// Connections drained at `max_requests_per_connection`.
    pub cx_max_requests_reached: Counter,
    /// Times a connection's unwritten output reached
    /// `per_connection_buffer_limit_bytes`, pausing its response data.
    pub flow_control_paused_reading_total: Counter,
    /// Times a listener's accept loop paused at its share of the runtime
    /// connection limit (`envoy.resource_limits.listener.<name>.connection_limit`)
    /// with a connection waiting.
    pub cx_overflow: Counter,
    /// Connections closed for `max_outbound_frames` unwritten frames.
    pub cx_outbound_flood: Counter,
    /// Connections closed for `max_outbound_control_frames`.
    pub cx_outbound_control_flood: Counter,
    /// Connections ended for `max_consecutive_inbound_frames_with_empty_payload`.
    pub cx_inbound_empty_frames_flood: Counter,
    /// Connections ended for `max_inbound_priority_frames_per_stream`.
    pub cx_inbound_priority_frames_flood: Counter,
    /// Connections ended for `max_inbound_window_update_frames_per_data_frame_sent`.
    pub cx_inbound_window_update_frames_flood: Counter,
    /// Requests over `max_request_headers_kb` (431) or `max_headers_count`
    /// (reset).
    pub rq_header_overflow: Counter,
    /// Requests reset for an underscore in a header name (`REJECT_REQUEST`).
    pub rq_rejected_with_underscores_in_headers: Counter,
    /// Header fields dropped for an underscore in their name (`DROP_HEADER`).
    pub dropped_headers_with_underscores: Counter,
    pub responses: StatusClasses,
}

impl DownstreamStats {
    /// Adds what a connection's codec refused or dropped by itself.
    #[inline]
    pub fn add_codec(&self, c: h2wire::conn::ServerCounts) {
        if c.is_zero() {
            return;
        }
        self.rq_header_overflow.add(u64::from(c.header_overflow));
        self.rq_rejected_with_underscores_in_headers
            .add(u64::from(c.rejected_with_underscores));
        self.dropped_headers_with_underscores
            .add(u64::from(c.dropped_headers_with_underscores));
    }

    /// Counts a connection that ended on a connection error: by its flood
    /// limit if one ended it, else as a protocol error.
    pub fn conn_error(&self, flood: Option<h2wire::conn::Flood>) {
        use h2wire::conn::Flood;
        match flood {
            None => &self.cx_protocol_error,
            Some(Flood::OutboundFrames) => &self.cx_outbound_flood,
            Some(Flood::OutboundControlFrames) => &self.cx_outbound_control_flood,
            Some(Flood::InboundEmptyFrames) => &self.cx_inbound_empty_frames_flood,
            Some(Flood::InboundPriorityFrames) => &self.cx_inbound_priority_frames_flood,
            Some(Flood::InboundWindowUpdateFrames) => &self.cx_inbound_window_update_frames_flood,
        }
        .inc();
    }
}

/// Counters of one upstream host on one shard.
#[derive(Debug, Default)]
pub struct HostStats {
    pub rq_total: Counter,
    /// Requests routed here by a session's override host, in the last
    /// minute (so an operator sees when a DRAINING host has no live
    /// sessions left).
    pub rq_override_recent: RecentCounter,
    pub rq_active: Counter,
    pub rq_timeout: Counter,
    pub rq_reset: Counter,
    pub rq_retry_refused: Counter,
    /// Idempotent bodiless requests retried once, on another connection,
    /// after their upstream connection died under them.
    pub rq_retry_conn_lost: Counter,
    pub cx_total: Counter,
    /// Connections drained (no new streams) after sending their budget of
    /// stream resets, so a backend's rapid-reset defence never fires.
    pub cx_reset_budget: Counter,
    /// Connections closed after carrying the cluster's
    /// `max_requests_per_connection` (Envoy's `upstream_cx_max_requests`).
    pub cx_max_requests: Counter,
    /// Connections closed after the cluster's `idle_timeout` without a
    /// stream (Envoy's `upstream_cx_idle_timeout`).
    pub cx_idle_timeout: Counter,
    pub cx_active: Counter,
    pub cx_connect_fail: Counter,
    /// Requests refused by the cluster's circuit breakers: `max_requests`
    /// or `max_pending_requests` (Envoy's `upstream_rq_pending_overflow`).
    pub rq_pending_overflow: Counter,
    /// Connections not opened for the cluster's `max_connections`
    /// (Envoy's `upstream_cx_overflow`).
    pub cx_overflow: Counter,
    /// Retries not made for the cluster's `max_retries`
    /// (Envoy's `upstream_rq_retry_overflow`).
    pub rq_retry_overflow: Counter,
    /// Pools not made for the cluster's `max_connection_pools`
    /// (Envoy's `upstream_cx_pool_overflow`).
    pub cx_pool_overflow: Counter,
    /// Times a connection's unwritten request bytes reached the cluster's
    /// `per_connection_buffer_limit_bytes` (the backend's socket stopped
    /// draining), pausing request data to it.
    pub cx_flow_control_backed_up: Counter,
    /// Responses that carried `x-envoy-immediate-health-check-fail`: an
    /// actively checked host fails its check at once (Envoy's router).
    pub rq_immediate_hc_fail: Counter,
    pub responses: StatusClasses,
}

/// Buckets of a sliding window: six 10-second slots, one minute.
const RECENT_SLOTS: usize = 6;
const RECENT_SLOT_SECS: u64 = 10;

/// Seconds since this process first asked: the clock [`RecentCounter`]
/// writers (data shards) and readers (admin) share.
pub fn recent_now() -> u64 {
    static EPOCH: OnceLock<std::time::Instant> = OnceLock::new();
    EPOCH
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_secs()
}

/// A single-writer count of events over the last minute, in 10 s slots.
/// Each slot remembers which 10 s period it counts; a slot from an older
/// period is restarted by the writer and ignored by readers, so nothing has
/// to sweep the window.
#[derive(Debug, Default)]
pub struct RecentCounter {
    counts: [Counter; RECENT_SLOTS],
    periods: [Counter; RECENT_SLOTS],
}

impl RecentCounter {
    /// Counts one event at `now_secs` (seconds on any monotonic clock
    /// shared by writer and readers).
    #[inline]
    pub fn inc(&self, now_secs: u64) {
        let period = now_secs / RECENT_SLOT_SECS;
        let i = (period % RECENT_SLOTS as u64) as usize;
        // Period + 1 so that the default 0 never looks current.
        if self.periods[i].get() != period + 1 {
            self.periods[i].set(period + 1);
            self.counts[i].set(0);
        }
        self.counts[i].inc();
    }

    /// Events in the current and the five previous 10 s periods.
    pub fn sum(&self, now_secs: u64) -> u64 {
        let period = now_secs / RECENT_SLOT_SECS;
        (0..RECENT_SLOTS)
            .filter(|&i| {
                let p = self.periods[i].get();
                p != 0 && p - 1 + RECENT_SLOTS as u64 > period
            })
            .map(|i| self.counts[i].get())
            .sum()
    }

    fn reset(&self) {
        for c in self.counts.iter().chain(&self.periods) {
            c.set(0);
        }
    }
}

/// Picks one counter of a host's stats (admin tables iterate these).
pub type HostCounter = fn(&HostStats) -> &Counter;

impl HostStats {
    /// Zeroes the counters when a recycled `HostId` gets a new host. Gauges
    /// (`rq_active`, `cx_active`) are left alone: streams and connections of
    /// the old host still end and decrement them.
    pub fn reset_counters(&self) {
        for c in [
            &self.rq_total,
            &self.rq_timeout,
            &self.rq_reset,
            &self.rq_retry_refused,
            &self.rq_retry_conn_lost,
            &self.cx_total,
            &self.cx_reset_budget,
            &self.cx_max_requests,
            &self.cx_idle_timeout,
            &self.cx_connect_fail,
            &self.rq_pending_overflow,
            &self.cx_overflow,
            &self.rq_retry_overflow,
            &self.cx_pool_overflow,
            &self.cx_flow_control_backed_up,
            &self.rq_immediate_hc_fail,
            &self.responses.c1xx,
            &self.responses.c2xx,
            &self.responses.c3xx,
            &self.responses.c4xx,
            &self.responses.c5xx,
        ] {
            c.set(0);
        }
        self.rq_override_recent.reset();
    }
}

const CHUNK: usize = 256;
const CHUNKS: usize = 4096;

/// Per-host counters indexed by [`HostId`], allocated a chunk at a time on
/// first use so readers never take a lock and the table never moves.
/// Capacity: `CHUNK * CHUNKS` (about a million) hosts.
pub struct HostStatsTable {
    chunks: Box<[OnceLock<Box<[HostStats]>>]>,
}

impl Default for HostStatsTable {
    fn default() -> Self {
        Self {
            chunks: (0..CHUNKS).map(|_| OnceLock::new()).collect(),
        }
    }
}

impl std::fmt::Debug for HostStatsTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HostStatsTable")
    }
}

impl HostStatsTable {
    /// The writer's accessor: allocates the chunk on first use.
    pub fn host(&self, id: HostId) -> &HostStats {
        let (c, i) = (id.index() / CHUNK, id.index() % CHUNK);
        let chunk = self.chunks[c.min(CHUNKS - 1)]
            .get_or_init(|| (0..CHUNK).map(|_| HostStats::default()).collect());
        &chunk[i]
    }

    /// The reader's accessor: `None` when this shard never touched the host.
    pub fn get(&self, id: HostId) -> Option<&HostStats> {
        let (c, i) = (id.index() / CHUNK, id.index() % CHUNK);
        self.chunks.get(c)?.get().map(|chunk| &chunk[i])
    }
}

/// The stateful session filter's decisions (gRFC A55).
#[derive(Debug, Default)]
pub struct SessionStats {
    /// The session's host was used.
    pub override_used: Counter,
    /// The session named a host the cluster does not have.
    pub host_not_found: Counter,
    /// The session's host is not in `override_host_status`.
    pub status_not_in_set: Counter,
    /// The session's host is ejected by outlier detection.
    pub host_ejected: Counter,
    /// A session cookie or header that did not decode.
    pub cookie_invalid: Counter,
    /// A session cookie whose `expires` has passed.
    pub cookie_expired: Counter,
    /// `strict` sessions refused because their host was unavailable.
    pub strict_refused: Counter,
    /// Responses that set a new session (`set-cookie` or header).
    pub session_set: Counter,
}

/// The CORS filter (Envoy's `cors.*`): requests with an `Origin` its
/// policy took, and ones it did not.
#[derive(Debug, Default)]
pub struct CorsStats {
    pub origin_valid: Counter,
    pub origin_invalid: Counter,
}

/// The CSRF filter (Envoy's `csrf.*`), over the state-changing requests
/// it checked.
#[derive(Debug, Default)]
pub struct CsrfStats {
    /// Neither `Origin` nor `Referer` (or `Origin: null`): refused.
    pub missing_source_origin: Counter,
    /// The source origin is neither the destination nor an additional one.
    pub request_invalid: Counter,
    pub request_valid: Counter,
}

/// The compressor filters (Envoy's `compressor.<library>.*`, summed over
/// the filters).
#[derive(Debug, Default)]
pub struct CompressorStats {
    pub compressed: Counter,
    pub not_compressed: Counter,
    pub no_accept_header: Counter,
    pub header_identity: Counter,
    pub header_wildcard: Counter,
    pub header_not_valid: Counter,
    pub header_compressor_used: Counter,
    pub header_compressor_overshadowed: Counter,
    pub content_length_too_small: Counter,
    pub not_compressed_etag: Counter,
    pub total_uncompressed_bytes: Counter,
    pub total_compressed_bytes: Counter,
    pub request_compressed: Counter,
    pub request_not_compressed: Counter,
    pub request_content_length_too_small: Counter,
    pub request_total_uncompressed_bytes: Counter,
    pub request_total_compressed_bytes: Counter,
}

/// The decompressor filters (Envoy's `decompressor.<library>.*`).
#[derive(Debug, Default)]
pub struct DecompressorStats {
    pub request_decompressed: Counter,
    pub request_not_decompressed: Counter,
    pub response_decompressed: Counter,
    pub response_not_decompressed: Counter,
    /// Bytes in and out, per direction.
    pub request_total_compressed_bytes: Counter,
    pub request_total_uncompressed_bytes: Counter,
    pub response_total_compressed_bytes: Counter,
    pub response_total_uncompressed_bytes: Counter,
    /// Bodies that were not their coding, or ended early.
    pub decode_errors: Counter,
    /// Bodies cut at their inflate ratio (a compression bomb).
    pub ratio_exceeded: Counter,
}

/// The fault injection filter (Envoy's `fault.*`).
#[derive(Debug, Default)]
pub struct FaultStats {
    pub delays_injected: Counter,
    pub aborts_injected: Counter,
    /// Faults not injected: `max_active_faults` were in flight.
    pub faults_overflow: Counter,
    /// Faults in flight now (a gauge).
    pub active: Counter,
}

/// The health check filter (Envoy's `health_check.*`).
#[derive(Debug, Default)]
pub struct HealthCheckStats {
    /// Health checks answered here.
    pub request_total: Counter,
    pub ok: Counter,
    pub failed: Counter,
    /// Pass-through checks answered from the cache.
    pub cached_response: Counter,
    pub failed_cluster_not_found: Counter,
    pub failed_cluster_empty: Counter,
    pub failed_cluster_unhealthy: Counter,
}

/// The local rate limit filter (Envoy's `http_local_rate_limit.*`).
#[derive(Debug, Default)]
pub struct LocalRateLimitStats {
    /// Requests the filter was enabled for.
    pub enabled: Counter,
    /// Requests within their limits.
    pub ok: Counter,
    /// Requests past a limit (enforced or not).
    pub rate_limited: Counter,
    /// Of those, the ones refused.
    pub enforced: Counter,
    /// Past a `shadow_mode` descriptor's limit, let through.
    pub shadow_mode: Counter,
}

/// The RBAC filters (Envoy's `rbac.*`), the HTTP filter's requests and
/// the network filter's connections apart.
#[derive(Debug, Default)]
pub struct RbacStats {
    pub allowed: Counter,
    pub denied: Counter,
    pub shadow_allowed: Counter,
    pub shadow_denied: Counter,
}

/// The external authorisation filter's checks, by outcome (Envoy's
/// `ext_authz.*` counters).
#[derive(Debug, Default)]
pub struct ExtAuthzStats {
    /// Allowed.
    pub ok: Counter,
    /// Denied by the service.
    pub denied: Counter,
    /// No answer (timeout, failure, a 5xx, garbage).
    pub error: Counter,
    /// Errors let through (`failure_mode_allow`).
    pub failure_mode_allowed: Counter,
    /// Not checked: `filter_enabled` left them out.
    pub disabled: Counter,
    /// Allowed with changes the gateway cannot make (answered 500).
    pub invalid: Counter,
}

/// The gRPC-Web filter's requests: converted to gRPC, and refused (a
/// text body that is not base64).
#[derive(Debug, Default)]
pub struct GrpcWebStats {
    pub converted: Counter,
    pub bad_request: Counter,
}

/// Tracing: requests sampled or not, and their spans exported, dropped
/// (the shard's queue full: a collector slower than the traffic) or lost
/// with an export that failed.
#[derive(Debug, Default)]
pub struct TracingStats {
    pub sampled: Counter,
    pub not_sampled: Counter,
    pub exported: Counter,
    pub dropped: Counter,
    pub export_failed: Counter,
}

/// Load-balancing picks by policy, and picks made in panic mode.
#[derive(Debug, Default)]
pub struct LbStats {
    pub round_robin: Counter,
    pub random: Counter,
    pub least_request: Counter,
    pub ring_hash: Counter,
    pub maglev: Counter,
    /// `RING_HASH` / `MAGLEV` picks without a hash (no `hash_policy`
    /// entry found its input): a random host, as in Envoy.
    pub hash_missing: Counter,
    /// Picks made while the cluster was below `healthy_panic_threshold`.
    pub panic: Counter,
}

/// Tunnels: `tcp_proxy` connections (Envoy's `tcp.<stat_prefix>.*`,
/// summed over proxies) and upgraded HTTP/1.1 connections.
#[derive(Debug, Default)]
pub struct TunnelStats {
    /// Connections a `tcp_proxy` chain took.
    pub tcp_cx_total: Counter,
    /// Tunnels open now (TCP proxies and upgrades).
    pub active: Counter,
    /// Closed at once: the cluster is not in the snapshot
    /// (`downstream_cx_no_route`).
    pub tcp_no_route: Counter,
    /// Closed at once: the cluster had no host to pick.
    pub tcp_no_healthy_upstream: Counter,
    /// Closed after `max_connect_attempts` connects failed
    /// (`upstream_cx_connect_attempts_exceeded`).
    pub tcp_connect_attempts_exceeded: Counter,
    /// Closed by the idle timeout (`idle_timeout`).
    pub idle_timeout: Counter,
    /// Closed at `max_downstream_connection_duration`.
    pub max_duration_reached: Counter,
    /// Bytes from clients to backends (`downstream_cx_rx_bytes_total`).
    pub rx_bytes: Counter,
    /// Bytes from backends to clients (`downstream_cx_tx_bytes_total`).
    pub tx_bytes: Counter,
}

/// Request mirroring (`request_mirror_policies`): copies sent to mirror
/// clusters, and the ones dropped (the requests copied are never
/// affected).
#[derive(Debug, Default)]
pub struct MirrorStats {
    /// Copies sent (their host picked, their stream opened or waiting).
    pub rq_total: Counter,
    /// Copies in flight now.
    pub active: Counter,
    /// Abandoned: the copy's unsent body passed its bound (1 MiB or the
    /// listener's `per_connection_buffer_limit_bytes`, the larger; the
    /// mirror reads slower than the client sends), or the shard's.
    pub backlog_overflow: Counter,
    /// Abandoned: the request's stream ended before the request did
    /// (a client reset, an answer before the body was whole).
    pub abandoned: Counter,
    /// Not made: the shard holds its most copies already, or the mirror
    /// cluster's circuit breakers are full.
    pub overflow: Counter,
    /// Not made: the mirror cluster is not in the config.
    pub unknown_cluster: Counter,
    /// Ended without an answer: no host, connect failure, reset.
    pub failed: Counter,
    /// Ended at their route's timeout.
    pub timeout: Counter,
}

/// Everything one shard counts.
#[derive(Debug, Default)]
pub struct ShardStats {
    pub session: SessionStats,
    pub cors: CorsStats,
    pub csrf: CsrfStats,
    pub compressor: CompressorStats,
    pub decompressor: DecompressorStats,
    pub fault: FaultStats,
    pub health_check: HealthCheckStats,
    pub local_rate_limit: LocalRateLimitStats,
    pub rbac: RbacStats,
    pub network_rbac: RbacStats,
    pub ext_authz: ExtAuthzStats,
    pub grpc_web: GrpcWebStats,
    pub tracing: TracingStats,
    pub tunnel: TunnelStats,
    pub mirror: MirrorStats,
    pub lb: LbStats,
    pub downstream: DownstreamStats,
    pub hosts: HostStatsTable,
    /// Envoy's per-cluster, per-connection-manager and per-listener series.
    pub envoy: envoy::EnvoyStats,
    /// Requests for a cluster the snapshot does not have (503).
    pub rq_unknown_cluster: Counter,
    /// Requests whose cluster had no routable host (503).
    pub rq_no_healthy_upstream: Counter,
    /// Retries a route's `retry_policy` made (Envoy's `upstream_rq_retry`).
    pub rq_retry: Counter,
    /// Retried requests whose last attempt got an answer the policy keeps
    /// (`upstream_rq_retry_success`).
    pub rq_retry_success: Counter,
    /// Retriable failures past `num_retries` (`upstream_rq_retry_limit_exceeded`).
    pub rq_retry_limit_exceeded: Counter,
    /// Attempts past their `per_try_timeout`, hedged ones aside (Envoy's
    /// `upstream_rq_per_try_timeout`).
    pub rq_per_try_timeout: Counter,
    /// Attempts past their `per_try_timeout` left in flight beside a new
    /// one (`hedge_on_per_try_timeout`; Envoy has no counter for it).
    pub rq_hedged: Counter,
    /// The sum of the hosts' `rq_immediate_hc_fail`: what the control
    /// shard polls before it looks at any host.
    pub immediate_hc_fail: Counter,
    pub snapshots_applied: Counter,
    pub snapshot_version: Counter,
    /// Set once the shard has applied its first snapshot and bound listeners.
    pub serving: Counter,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_counter_forgets_after_a_minute() {
        let c = RecentCounter::default();
        assert_eq!(c.sum(0), 0);
        c.inc(5);
        c.inc(15);
        c.inc(15);
        assert_eq!(c.sum(15), 3);
        assert_eq!(c.sum(59), 3);
        // At 60 s the slot of period 0 is a minute old.
        assert_eq!(c.sum(60), 2);
        assert_eq!(c.sum(70), 0);
        // A slot reused a minute later restarts from zero (the two events
        // at 15 s are still inside the window at 65 s, not at 75 s).
        c.inc(65);
        assert_eq!(c.sum(65), 3);
        assert_eq!(c.sum(75), 1);
    }
}
