//! `/stats`: Prometheus text exposition, every counter summed over shards.

use std::fmt::Write as _;
use std::sync::Arc;

use super::exposition::{escape, metric};
use super::state::Inner;
use shards::stats::{Counter, HostCounter, ShardStats, StatusClasses};

pub(super) fn sum(shards: &[Arc<ShardStats>], f: impl Fn(&ShardStats) -> &Counter) -> u64 {
    shards.iter().map(|s| f(s).get()).sum()
}

pub(super) type ShardCounter = fn(&ShardStats) -> &Counter;

/// The gateway-wide counters and gauges: one series each, summed over shards.
static SHARD_COUNTERS: [(&str, &str, &str, ShardCounter); 71] = [
        (
            "gateway_downstream_cx_total",
            "counter",
            "Downstream connections accepted.",
            |s| &s.downstream.cx_total,
        ),
        (
            "gateway_downstream_cx_active",
            "gauge",
            "Open downstream connections.",
            |s| &s.downstream.cx_active,
        ),
        (
            "gateway_downstream_cx_http1_total",
            "counter",
            "Downstream connections served as HTTP/1.x.",
            |s| &s.downstream.cx_http1_total,
        ),
        (
            "gateway_downstream_cx_http2_total",
            "counter",
            "Downstream connections served as HTTP/2.",
            |s| &s.downstream.cx_http2_total,
        ),
        (
            "gateway_downstream_rq_http1_total",
            "counter",
            "Downstream requests taken over HTTP/1.x.",
            |s| &s.downstream.rq_http1_total,
        ),
        (
            "gateway_downstream_rq_upgrade_refused",
            "counter",
            "Upgrade (WebSocket over HTTP/1.1 or HTTP/2) and CONNECT requests refused with 403 or 404.",
            |s| &s.downstream.rq_upgrade_refused,
        ),
        (
            "gateway_downstream_rq_upgrades_total",
            "counter",
            "Upgrade and CONNECT requests sent upstream, whatever the answer.",
            |s| &s.downstream.rq_upgrades_total,
        ),
        (
            "gateway_downstream_tls_handshake",
            "counter",
            "Downstream TLS handshakes completed.",
            |s| &s.downstream.tls_handshake,
        ),
        (
            "gateway_downstream_tls_session_reused",
            "counter",
            "Downstream TLS handshakes that resumed a session (ticket or cache).",
            |s| &s.downstream.tls_session_reused,
        ),
        (
            "gateway_downstream_tls_handshake_error",
            "counter",
            "Downstream TLS handshakes refused: bad records, no common version or cipher suite, a client certificate that does not verify.",
            |s| &s.downstream.tls_handshake_error,
        ),
        (
            "gateway_access_log_dropped",
            "counter",
            "Access log lines dropped: the writer's queue was full (a data shard never waits on the log).",
            |s| &s.downstream.access_log_dropped,
        ),
        (
            "gateway_downstream_tls_handshake_abandoned",
            "counter",
            "Downstream TLS handshakes the client closed or reset before they completed.",
            |s| &s.downstream.tls_handshake_abandoned,
        ),
        (
            "gateway_downstream_tls_handshake_timeout",
            "counter",
            "Downstream TLS handshakes not complete within the handshake timeout (10 s, or the idle timeout if shorter).",
            |s| &s.downstream.tls_handshake_timeout,
        ),
        (
            "gateway_downstream_cx_no_filter_chain_match",
            "counter",
            "Downstream connections no filter chain matched (no default chain): closed unanswered.",
            |s| &s.downstream.cx_no_filter_chain_match,
        ),
        (
            "gateway_downstream_cx_listener_filters_timeout",
            "counter",
            "Downstream connections whose PROXY header or ClientHello did not come within listener_filters_timeout.",
            |s| &s.downstream.cx_listener_filters_timeout,
        ),
        (
            "gateway_downstream_cx_proxy_proto_error",
            "counter",
            "Downstream connections closed for a missing or malformed PROXY protocol header.",
            |s| &s.downstream.cx_proxy_proto_error,
        ),
        (
            "gateway_downstream_cx_protocol_error",
            "counter",
            "Downstream connections closed on a protocol error or failed handshake.",
            |s| &s.downstream.cx_protocol_error,
        ),
        (
            "gateway_downstream_cx_reset_flood",
            "counter",
            "Downstream connections cut off (GOAWAY) for flooding stream resets.",
            |s| &s.downstream.cx_reset_flood,
        ),
        (
            "gateway_downstream_cx_idle_timeout",
            "counter",
            "Downstream connections closed by the idle timeout.",
            |s| &s.downstream.cx_idle_timeout,
        ),
        (
            "gateway_downstream_rq_header_timeout",
            "counter",
            "HTTP/1.1 request heads not complete within request_headers_timeout (408, connection closed).",
            |s| &s.downstream.rq_header_timeout,
        ),
        (
            "gateway_downstream_rq_total",
            "counter",
            "Downstream requests (streams).",
            |s| &s.downstream.rq_total,
        ),
        (
            "gateway_downstream_rq_active",
            "gauge",
            "Downstream requests in flight.",
            |s| &s.downstream.rq_active,
        ),
        (
            "gateway_downstream_rq_reset_by_client",
            "counter",
            "Streams the client reset before completion.",
            |s| &s.downstream.rq_reset_by_client,
        ),
        (
            "gateway_downstream_rq_reset_before_upstream",
            "counter",
            "Streams the client reset before their request went upstream (never sent).",
            |s| &s.downstream.rq_reset_before_upstream,
        ),
        (
            "gateway_downstream_rq_no_route",
            "counter",
            "Requests answered 404 for want of a route.",
            |s| &s.downstream.rq_no_route,
        ),
        (
            "gateway_downstream_rq_redirect",
            "counter",
            "Requests answered by a route's redirect (Envoy's rq_redirect).",
            |s| &s.downstream.rq_redirect,
        ),
        (
            "gateway_downstream_rq_direct_response",
            "counter",
            "Requests answered by a route's direct_response (Envoy's rq_direct_response).",
            |s| &s.downstream.rq_direct_response,
        ),
        (
            "gateway_downstream_rq_redirected_with_normalized_path",
            "counter",
            "Requests answered 307 to their path unescaped and normalized (path_with_escaped_slashes_action UNESCAPE_AND_REDIRECT).",
            |s| &s.downstream.rq_redirected_with_normalized_path,
        ),
        (
            "gateway_downstream_rq_failed_path_normalization",
            "counter",
            "Requests answered 400 for an escaped slash in their path (path_with_escaped_slashes_action REJECT_REQUEST).",
            |s| &s.downstream.rq_failed_path_normalization,
        ),
        (
            "gateway_downstream_header_values_refused",
            "counter",
            "Header values a route's *_headers_to_add formatted with CR, LF or NUL: left out.",
            |s| &s.downstream.header_values_refused,
        ),
        (
            "gateway_downstream_rq_timeout",
            "counter",
            "Requests that hit the route timeout.",
            |s| &s.downstream.rq_timeout,
        ),
        (
            "gateway_downstream_rq_request_timeout",
            "counter",
            "Requests not received whole within the connection manager's request_timeout: 408 (Envoy's downstream_rq_timeout).",
            |s| &s.downstream.rq_request_timeout,
        ),
        (
            "gateway_upstream_rq_no_healthy_upstream",
            "counter",
            "Requests answered 503: no routable host.",
            |s| &s.rq_no_healthy_upstream,
        ),
        (
            "gateway_upstream_rq_retry",
            "counter",
            "Retries made by routes' retry_policy (Envoy's upstream_rq_retry).",
            |s| &s.rq_retry,
        ),
        (
            "gateway_upstream_rq_retry_body_overflow",
            "counter",
            "Requests not retried past their body's retry buffer: the route's per_request_buffer_limit_bytes, else the listener's per_connection_buffer_limit_bytes (Envoy's retry_or_shadow_abandoned).",
            |s| &s.downstream.rq_retry_body_overflow,
        ),
        (
            "gateway_upstream_rq_per_try_idle_timeout",
            "counter",
            "Attempts given up after their retry policy's per_try_idle_timeout (Envoy's upstream_rq_per_try_idle_timeout).",
            |s| &s.downstream.rq_per_try_idle_timeout,
        ),
        (
            "gateway_upstream_rq_retry_success",
            "counter",
            "Retried requests answered with what the policy keeps (upstream_rq_retry_success).",
            |s| &s.rq_retry_success,
        ),
        (
            "gateway_upstream_rq_retry_limit_exceeded",
            "counter",
            "Retriable failures past num_retries (upstream_rq_retry_limit_exceeded).",
            |s| &s.rq_retry_limit_exceeded,
        ),
        (
            "gateway_upstream_rq_per_try_timeout",
            "counter",
            "Attempts past their retry policy's per_try_timeout, hedged ones aside (Envoy's upstream_rq_per_try_timeout).",
            |s| &s.rq_per_try_timeout,
        ),
        (
            "gateway_upstream_rq_hedged",
            "counter",
            "Attempts past their per_try_timeout left in flight beside a new attempt (hedge_on_per_try_timeout).",
            |s| &s.rq_hedged,
        ),
        (
            "gateway_downstream_rq_idle_timeout",
            "counter",
            "Streams ended by stream_idle_timeout.",
            |s| &s.downstream.rq_idle_timeout,
        ),
        (
            "gateway_downstream_rq_max_duration_reached",
            "counter",
            "Streams ended by max_stream_duration.",
            |s| &s.downstream.rq_max_duration_reached,
        ),
        (
            "gateway_downstream_cx_max_duration_reached",
            "counter",
            "Connections drained (GOAWAY) at max_connection_duration.",
            |s| &s.downstream.cx_max_duration_reached,
        ),
        (
            "gateway_downstream_cx_max_requests_reached",
            "counter",
            "Connections drained (GOAWAY) at max_requests_per_connection.",
            |s| &s.downstream.cx_max_requests_reached,
        ),
        (
            "gateway_downstream_flow_control_paused_reading_total",
            "counter",
            "Times a connection's unwritten output reached per_connection_buffer_limit_bytes (its response data paused).",
            |s| &s.downstream.flow_control_paused_reading_total,
        ),
        (
            "gateway_downstream_cx_overflow",
            "counter",
            "Times a listener stopped accepting at its runtime connection_limit with a connection waiting.",
            |s| &s.downstream.cx_overflow,
        ),
        (
            "gateway_downstream_cx_outbound_flood",
            "counter",
            "Downstream connections closed for more than max_outbound_frames unwritten frames.",
            |s| &s.downstream.cx_outbound_flood,
        ),
        (
            "gateway_downstream_cx_outbound_control_flood",
            "counter",
            "Downstream connections closed for more than max_outbound_control_frames unwritten PING/SETTINGS ACKs and RST_STREAMs.",
            |s| &s.downstream.cx_outbound_control_flood,
        ),
        (
            "gateway_downstream_cx_inbound_empty_frames_flood",
            "counter",
            "Downstream connections ended (GOAWAY ENHANCE_YOUR_CALM) past max_consecutive_inbound_frames_with_empty_payload.",
            |s| &s.downstream.cx_inbound_empty_frames_flood,
        ),
        (
            "gateway_downstream_cx_inbound_priority_frames_flood",
            "counter",
            "Downstream connections ended (GOAWAY ENHANCE_YOUR_CALM) past max_inbound_priority_frames_per_stream.",
            |s| &s.downstream.cx_inbound_priority_frames_flood,
        ),
        (
            "gateway_downstream_cx_inbound_window_update_frames_flood",
            "counter",
            "Downstream connections ended (GOAWAY ENHANCE_YOUR_CALM) past max_inbound_window_update_frames_per_data_frame_sent.",
            |s| &s.downstream.cx_inbound_window_update_frames_flood,
        ),
        (
            "gateway_downstream_rq_header_overflow",
            "counter",
            "Requests over max_request_headers_kb (answered 431) or max_headers_count (reset).",
            |s| &s.downstream.rq_header_overflow,
        ),
        (
            "gateway_downstream_rq_rejected_with_underscores_in_headers",
            "counter",
            "Requests reset for a header name with an underscore (headers_with_underscores_action REJECT_REQUEST).",
            |s| &s.downstream.rq_rejected_with_underscores_in_headers,
        ),
        (
            "gateway_downstream_dropped_headers_with_underscores",
            "counter",
            "Request header fields dropped for an underscore in their name (headers_with_underscores_action DROP_HEADER).",
            |s| &s.downstream.dropped_headers_with_underscores,
        ),
        (
            "gateway_tcp_proxy_cx_total",
            "counter",
            "Connections taken by tcp_proxy filter chains.",
            |s| &s.tunnel.tcp_cx_total,
        ),
        (
            "gateway_tunnel_cx_active",
            "gauge",
            "Open tunnels: tcp_proxy connections and upgraded HTTP/1.1 connections.",
            |s| &s.tunnel.active,
        ),
        (
            "gateway_tcp_proxy_cx_no_route",
            "counter",
            "tcp_proxy connections closed at once: their cluster is not in the config.",
            |s| &s.tunnel.tcp_no_route,
        ),
        (
            "gateway_tcp_proxy_cx_no_healthy_upstream",
            "counter",
            "tcp_proxy connections closed at once: their cluster had no host to pick.",
            |s| &s.tunnel.tcp_no_healthy_upstream,
        ),
        (
            "gateway_tcp_proxy_connect_attempts_exceeded",
            "counter",
            "tcp_proxy connections closed after max_connect_attempts failed connects.",
            |s| &s.tunnel.tcp_connect_attempts_exceeded,
        ),
        (
            "gateway_tunnel_idle_timeout",
            "counter",
            "Tunnels closed by their idle timeout.",
            |s| &s.tunnel.idle_timeout,
        ),
        (
            "gateway_tunnel_max_duration_reached",
            "counter",
            "Tunnels closed at max_downstream_connection_duration.",
            |s| &s.tunnel.max_duration_reached,
        ),
        (
            "gateway_tunnel_rx_bytes_total",
            "counter",
            "Bytes tunnels moved from clients to backends.",
            |s| &s.tunnel.rx_bytes,
        ),
        (
            "gateway_tunnel_tx_bytes_total",
            "counter",
            "Bytes tunnels moved from backends to clients.",
            |s| &s.tunnel.tx_bytes,
        ),
        (
            "gateway_mirror_rq_total",
            "counter",
            "Request copies sent to mirror clusters (request_mirror_policies).",
            |s| &s.mirror.rq_total,
        ),
        (
            "gateway_mirror_rq_active",
            "gauge",
            "Request copies in flight to mirror clusters.",
            |s| &s.mirror.active,
        ),
        (
            "gateway_mirror_rq_backlog_overflow",
            "counter",
            "Request copies abandoned: their unsent body passed 1 MiB or the listener's per_connection_buffer_limit_bytes, whichever is larger, or the shard's 64 MiB of copy bodies (the mirror read slower than the client sent).",
            |s| &s.mirror.backlog_overflow,
        ),
        (
            "gateway_mirror_rq_abandoned",
            "counter",
            "Request copies abandoned: the request's stream ended before the request did.",
            |s| &s.mirror.abandoned,
        ),
        (
            "gateway_mirror_rq_overflow",
            "counter",
            "Request copies not made: the shard held its most copies, or the mirror cluster's circuit breakers were full.",
            |s| &s.mirror.overflow,
        ),
        (
            "gateway_mirror_rq_unknown_cluster",
            "counter",
            "Request copies not made: the mirror cluster is not in the config.",
            |s| &s.mirror.unknown_cluster,
        ),
        (
            "gateway_mirror_rq_failed",
            "counter",
            "Request copies ended without an answer: no host, connect failure or reset.",
            |s| &s.mirror.failed,
        ),
        (
            "gateway_mirror_rq_timeout",
            "counter",
            "Request copies ended at their route's timeout.",
            |s| &s.mirror.timeout,
        ),
    ];

/// The per-host counters: one series per cluster and host.
static HOST_COUNTERS: [(&str, &str, &str, HostCounter); 18] = [
        (
            "gateway_upstream_rq_pending_overflow",
            "counter",
            "Requests refused by the cluster's circuit breakers (max_requests, max_pending_requests, max_connections): 503 with x-envoy-overloaded.",
            |h| &h.rq_pending_overflow,
        ),
        (
            "gateway_upstream_cx_overflow",
            "counter",
            "Connections not opened for the cluster's max_connections.",
            |h| &h.cx_overflow,
        ),
        (
            "gateway_upstream_rq_retry_overflow",
            "counter",
            "Retries not made for the cluster's max_retries.",
            |h| &h.rq_retry_overflow,
        ),
        (
            "gateway_upstream_cx_pool_overflow",
            "counter",
            "Connection pools not made for the cluster's max_connection_pools.",
            |h| &h.cx_pool_overflow,
        ),
        (
            "gateway_upstream_rq_immediate_hc_fail",
            "counter",
            "Responses that carried x-envoy-immediate-health-check-fail (an actively checked host then fails at once).",
            |h| &h.rq_immediate_hc_fail,
        ),
        (
            "gateway_upstream_rq_total",
            "counter",
            "Upstream requests per host.",
            |h| &h.rq_total,
        ),
        (
            "gateway_upstream_rq_active",
            "gauge",
            "Upstream requests in flight per host.",
            |h| &h.rq_active,
        ),
        (
            "gateway_upstream_rq_timeout",
            "counter",
            "Upstream requests that timed out.",
            |h| &h.rq_timeout,
        ),
        (
            "gateway_upstream_rq_reset",
            "counter",
            "Upstream streams reset or failed after connect.",
            |h| &h.rq_reset,
        ),
        (
            "gateway_upstream_rq_retry_refused",
            "counter",
            "Requests resent after an upstream refused the stream (GOAWAY/REFUSED_STREAM).",
            |h| &h.rq_retry_refused,
        ),
        (
            "gateway_upstream_rq_retry_conn_lost",
            "counter",
            "Idempotent bodiless requests retried once after their upstream connection died.",
            |h| &h.rq_retry_conn_lost,
        ),
        (
            "gateway_upstream_cx_reset_budget",
            "counter",
            "Upstream connections drained after spending their budget of stream resets.",
            |h| &h.cx_reset_budget,
        ),
        (
            "gateway_upstream_cx_max_requests",
            "counter",
            "Upstream connections drained after carrying the cluster's max_requests_per_connection.",
            |h| &h.cx_max_requests,
        ),
        (
            "gateway_upstream_cx_idle_timeout",
            "counter",
            "Upstream connections closed after the cluster's idle_timeout without a stream.",
            |h| &h.cx_idle_timeout,
        ),
        (
            "gateway_upstream_cx_total",
            "counter",
            "Upstream connections opened.",
            |h| &h.cx_total,
        ),
        (
            "gateway_upstream_cx_active",
            "gauge",
            "Open upstream connections.",
            |h| &h.cx_active,
        ),
        (
            "gateway_upstream_cx_connect_fail",
            "counter",
            "Upstream connect or handshake failures.",
            |h| &h.cx_connect_fail,
        ),
        (
            "gateway_upstream_flow_control_backed_up_total",
            "counter",
            "Times an upstream connection's unwritten request bytes reached the cluster's per_connection_buffer_limit_bytes, pausing request data to it.",
            |h| &h.cx_flow_control_backed_up,
        ),
    ];

/// The whole `/stats` page.
pub(super) fn render(inner: &Inner) -> String {
    let mut out = String::with_capacity(4096);
    gateway_wide(&mut out, inner);
    session_and_lb(&mut out, inner);
    super::filter_stats::render(&mut out, &inner.shards);
    per_host(&mut out, inner);
    control(&mut out, inner);
    if let Some(x) = &inner.xds {
        super::xds::prometheus(x, &mut out);
    }
    out
}

/// The shard counters, the status classes, the served version, the listeners and the health check.
fn gateway_wide(out: &mut String, inner: &Inner) {
    let sh = &inner.shards;
    for (name, kind, help, f) in &SHARD_COUNTERS {
        metric(out, name, kind, help);
        let _ = writeln!(out, "{name} {}", sum(sh, *f));
    }
    metric(
        out,
        "gateway_upstream_rq_unknown_cluster",
        "counter",
        "Requests answered 503: cluster not found.",
    );
    let _ = writeln!(
        out,
        "gateway_upstream_rq_unknown_cluster {}",
        sum(sh, |s| &s.rq_unknown_cluster)
    );
    metric(
        out,
        "gateway_downstream_rq_xx",
        "counter",
        "Downstream responses by status class.",
    );
    for (i, class) in StatusClasses::NAMES.iter().enumerate() {
        let v: u64 = sh
            .iter()
            .map(|s| s.downstream.responses.classes()[i].1)
            .sum();
        let _ = writeln!(
            out,
            "gateway_downstream_rq_xx{{response_code_class=\"{class}\"}} {v}"
        );
    }
    metric(
        out,
        "gateway_config_version",
        "gauge",
        "Snapshot version served by the shards (minimum).",
    );
    let _ = writeln!(
        out,
        "gateway_config_version {}",
        sh.iter()
            .map(|s| s.snapshot_version.get())
            .min()
            .unwrap_or(0)
    );
    metric(
        out,
        "gateway_shards_serving",
        "gauge",
        "Data shards serving.",
    );
    let _ = writeln!(out, "gateway_shards_serving {}", sum(sh, |s| &s.serving));
    metric(
        out,
        "gateway_listener_serving",
        "gauge",
        "1 for a listener that accepts, 0 for one that cannot bind its address (retried every 5 s).",
    );
    for l in &inner.snapshot.listeners {
        let name = escape(&l.name);
        let _ = writeln!(out, "gateway_listener_serving{{listener=\"{name}\"}} 1");
    }
    for n in inner.not_serving.iter() {
        let name = escape(&n.name);
        let _ = writeln!(out, "gateway_listener_serving{{listener=\"{name}\"}} 0");
    }
    metric(
        out,
        "gateway_clusters",
        "gauge",
        "Clusters serving (active) and warming: added with an active health check whose first round has not ended (Envoy's cluster_manager.active_clusters, warming_clusters).",
    );
    let _ = writeln!(
        out,
        "gateway_clusters{{state=\"active\"}} {}\ngateway_clusters{{state=\"warming\"}} {}",
        inner.snapshot.clusters.len(),
        inner.snapshot.warming.len()
    );
    metric(
        out,
        "gateway_server_live",
        "gauge",
        "0 after POST /healthcheck/fail (until /healthcheck/ok), as Envoy's server.live.",
    );
    let _ = writeln!(
        out,
        "gateway_server_live {}",
        u8::from(!inner.flags.health_failed())
    );
}

/// Per cluster and host: the counters and the status classes.
fn per_host(out: &mut String, inner: &Inner) {
    let sh = &inner.shards;
    let mut hosts: Vec<(&str, &engine::snapshot::Host)> = inner
        .snapshot
        .clusters
        .iter()
        .flat_map(|(name, c)| c.hosts.iter().map(move |h| (name.as_str(), h)))
        .collect();
    hosts.sort_by(|a, b| (a.0, a.1.address).cmp(&(b.0, b.1.address)));
    let labels = |cluster: &str, h: &engine::snapshot::Host| {
        format!("cluster=\"{cluster}\",host=\"{}\"", h.address)
    };
    for (name, kind, help, f) in &HOST_COUNTERS {
        metric(out, name, kind, help);
        for (cluster, h) in &hosts {
            let _ = writeln!(
                out,
                "{name}{{{}}} {}",
                labels(cluster, h),
                inner.host_sum(h.id, *f)
            );
        }
    }
    let name = "gateway_upstream_rq_xx";
    metric(out, name, "counter", "Upstream responses by status class.");
    for (cluster, h) in &hosts {
        for (i, class) in StatusClasses::NAMES.iter().enumerate() {
            let v: u64 = sh
                .iter()
                .filter_map(|s| s.hosts.get(h.id))
                .map(|hs| hs.responses.classes()[i].1)
                .sum();
            let _ = writeln!(
                out,
                "{name}{{{},response_code_class=\"{class}\"}} {v}",
                labels(cluster, h)
            );
        }
    }
}

/// What the control shard counts: certificate reloads and config pushes.
fn control(out: &mut String, inner: &Inner) {
    let (reloaded, failed) = inner.tls_reloads;
    metric(
        out,
        "gateway_tls_certificate_reloads_total",
        "counter",
        "Listener TLS contexts read again after their certificate files changed.",
    );
    let _ = writeln!(out, "gateway_tls_certificate_reloads_total {reloaded}");
    metric(
        out,
        "gateway_tls_certificate_reload_failures_total",
        "counter",
        "Certificate file changes that could not be loaded (the previous certificates stay).",
    );
    let _ = writeln!(
        out,
        "gateway_tls_certificate_reload_failures_total {failed}"
    );
    let p = &inner.pushes;
    metric(
        out,
        "gateway_config_pushes_total",
        "counter",
        "Snapshots pushed to every data shard (reloads and xDS updates).",
    );
    let _ = writeln!(out, "gateway_config_pushes_total {}", p.count);
    metric(
        out,
        "gateway_config_push_seconds_total",
        "counter",
        "Time from snapshot build to the last shard's ack, summed over pushes.",
    );
    let _ = writeln!(
        out,
        "gateway_config_push_seconds_total {:.6}",
        p.total.as_secs_f64()
    );
    dns(out, inner);
    health_checks(out, inner);
    for (name, help, v) in [
        (
            "gateway_config_push_last_seconds",
            "Duration of the latest push.",
            p.last,
        ),
        (
            "gateway_config_push_max_seconds",
            "Longest push since start.",
            p.max,
        ),
    ] {
        metric(out, name, "gauge", help);
        let _ = writeln!(out, "{name} {:.6}", v.as_secs_f64());
    }
}
/// DNS clusters' lookups (Envoy's `update_success` and `update_failure`
/// of such clusters) and the hosts they found.
fn dns(out: &mut String, inner: &Inner) {
    if inner.dns.is_empty() {
        return;
    }
    metric(
        out,
        "gateway_dns_lookups_total",
        "counter",
        "Lookups of DNS clusters' names, by outcome (a failure keeps the hosts found before).",
    );
    for (cluster, c) in inner.dns.iter() {
        for (outcome, n) in [("success", c.successes), ("failure", c.failures)] {
            let _ = writeln!(
                out,
                "gateway_dns_lookups_total{{cluster=\"{cluster}\",outcome=\"{outcome}\"}} {n}"
            );
        }
    }
    metric(
        out,
        "gateway_dns_hosts",
        "gauge",
        "Hosts a DNS cluster's names resolved to.",
    );
    for (cluster, c) in inner.dns.iter() {
        let _ = writeln!(
            out,
            "gateway_dns_hosts{{cluster=\"{cluster}\"}} {}",
            c.hosts
        );
    }
}

/// Active health checking (Envoy's `cluster.<name>.health_check.*`).
fn health_checks(out: &mut String, inner: &Inner) {
    if inner.health.is_empty() {
        return;
    }
    metric(
        out,
        "gateway_health_checks_total",
        "counter",
        "Active health checks ended, by outcome (failure: a wrong answer; network_failure: none).",
    );
    for (cluster, c) in inner.health.iter() {
        let k = &c.checks;
        for (outcome, n) in [
            ("success", k.success.get()),
            ("failure", k.failure.get()),
            ("network_failure", k.network_failure.get()),
        ] {
            let _ = writeln!(
                out,
                "gateway_health_checks_total{{cluster=\"{cluster}\",outcome=\"{outcome}\"}} {n}"
            );
        }
    }
    for (name, help, get) in [
        (
            "gateway_health_check_hosts",
            "Hosts actively checked.",
            (|c| c.hosts) as fn(&crate::health::Counts) -> u64,
        ),
        (
            "gateway_health_check_healthy",
            "Checked hosts passing.",
            |c| c.healthy,
        ),
        (
            "gateway_health_check_changes_total",
            "Times a checked host's verdict changed.",
            |c| c.changes,
        ),
    ] {
        let kind = if name.ends_with("_total") {
            "counter"
        } else {
            "gauge"
        };
        metric(out, name, kind, help);
        for (cluster, c) in inner.health.iter() {
            let _ = writeln!(out, "{name}{{cluster=\"{cluster}\"}} {}", get(c));
        }
    }
}

/// The stateful session filter, load-balancer picks and outlier detection.
fn session_and_lb(out: &mut String, inner: &Inner) {
    let sh = &inner.shards;
    metric(
        out,
        "gateway_session_override",
        "counter",
        "Stateful session decisions: override host used, or why not (host_not_found, status_not_in_set, host_ejected), undecodable and expired cookies, strict refusals, new sessions set.",
    );
    let session: [(&str, ShardCounter); 8] = [
        ("used", |s| &s.session.override_used),
        ("host_not_found", |s| &s.session.host_not_found),
        ("status_not_in_set", |s| &s.session.status_not_in_set),
        ("host_ejected", |s| &s.session.host_ejected),
        ("cookie_invalid", |s| &s.session.cookie_invalid),
        ("cookie_expired", |s| &s.session.cookie_expired),
        ("strict_refused", |s| &s.session.strict_refused),
        ("session_set", |s| &s.session.session_set),
    ];
    for (outcome, f) in session {
        let _ = writeln!(
            out,
            "gateway_session_override{{outcome=\"{outcome}\"}} {}",
            sum(sh, f)
        );
    }
    metric(
        out,
        "gateway_lb_picks_total",
        "counter",
        "Hosts picked by a load-balancing policy (not by session override).",
    );
    let picks: [(&str, ShardCounter); 5] = [
        ("round_robin", |s| &s.lb.round_robin),
        ("random", |s| &s.lb.random),
        ("least_request", |s| &s.lb.least_request),
        ("ring_hash", |s| &s.lb.ring_hash),
        ("maglev", |s| &s.lb.maglev),
    ];
    for (policy, f) in picks {
        let _ = writeln!(
            out,
            "gateway_lb_picks_total{{policy=\"{policy}\"}} {}",
            sum(sh, f)
        );
    }
    metric(
        out,
        "gateway_lb_healthy_panic_total",
        "counter",
        "Picks made in panic mode (healthy hosts below healthy_panic_threshold).",
    );
    let _ = writeln!(
        out,
        "gateway_lb_healthy_panic_total {}",
        sum(sh, |s| &s.lb.panic)
    );
    let o = &inner.outlier;
    metric(
        out,
        "gateway_outlier_ejections_total",
        "counter",
        "Outlier detection: hosts found to be outliers, by algorithm; enforced=\"false\" when the enforcement draw or max_ejection_percent kept them in.",
    );
    for (i, reason) in engine::outlier::EjectionReason::ALL.iter().enumerate() {
        for (enforced, v) in [
            ("true", o.stats.enforced[i]),
            ("false", o.stats.not_enforced[i]),
        ] {
            let _ = writeln!(
                out,
                "gateway_outlier_ejections_total{{algorithm=\"{}\",enforced=\"{enforced}\"}} {v}",
                reason.as_str()
            );
        }
    }
    metric(
        out,
        "gateway_outlier_ejections_active",
        "gauge",
        "Hosts ejected now.",
    );
    let _ = writeln!(out, "gateway_outlier_ejections_active {}", o.ejected_now);
    metric(
        out,
        "gateway_outlier_unejections_total",
        "counter",
        "Ejections ended, by cause: their timer, or a passing active health check.",
    );
    let _ = writeln!(
        out,
        "gateway_outlier_unejections_total{{cause=\"timer\"}} {}\n\
         gateway_outlier_unejections_total{{cause=\"active_health_check\"}} {}",
        o.stats.unejected, o.stats.unejected_by_check
    );
}
