//! Phase 1's start, for a new stream: the connection manager's own edits of its request (`stamp.rs`), its route, and what the stream keeps of both (rewrites, timeouts, retry policy, forwarding fields, the access log's record).

use std::time::Instant;

use engine::route::{regex_rewrite_path, rewrite_path, route_request_at, RequestView};
use engine::{HostRewrite, RetryHeaders};
use h2wire::message::HeaderList;

use super::stamp::{self, ClientClass};
use super::ConnCx;
use crate::http_filter::router::HeadView;
use crate::http_filter::Reply;
use crate::local_reply::LocalReply;
use crate::wire::dstream::DStream;
use crate::wire::logging::LogState;

impl ConnCx {
    /// Sets up `s` for its request `head` (which the connection manager
    /// may rewrite): a gRPC request or not, and the `Upgrade` it asks for
    /// if any. `Err`: the reply the connection manager makes instead (a
    /// path normalization's, a refused upgrade's).
    pub(super) fn set_up(
        &self,
        s: &mut DStream,
        head: &mut HeaderList,
        (grpc, upgrade, in_stream): (bool, Option<&[u8]>, bool),
        now: Instant,
    ) -> Result<(), Box<Reply>> {
        let cx = self;
        let mut remote = None;
        let mut refused = None;
        // Looked up once: a listener by name, then its chain.
        let hcm = s.snap.as_ref().and_then(|snap| cx.hcm(snap));
        if let Some(hcm) = hcm {
            let shard = &cx.wire.shard;
            let at = (cx.peer, cx.local.port());
            let id_bits = || shard.request_id_bits();
            let stats = &shard.stats.downstream;
            match stamp::request(hcm, head, at, (grpc, id_bits), stats) {
                Ok(st) => {
                    if let Some(snap) = s.snap.as_ref().filter(|_| hcm.add_user_agent) {
                        add_user_agent(&snap.node, &mut s.edits, head);
                    }
                    s.xff = st.forwarded_for;
                    s.class = st.class;
                    s.external = (st.class == ClientClass::Edge).then(|| st.client.remote.ip());
                    remote = (st.client.remote != cx.peer).then_some(st.client.remote);
                    s.remote = remote;
                    if hcm.request_id.in_response {
                        s.request_id = head.get(stamp::REQUEST_ID).map(Box::from);
                    }
                }
                Err(reply) => refused = Some(reply),
            }
            if hcm.request_id.in_response && s.request_id.is_none() {
                // A refused request's own id, echoed as Envoy does.
                s.request_id = head.get(stamp::REQUEST_ID).map(Box::from);
            }
        }
        if let Some(hcm) = hcm.filter(|_| refused.is_none()) {
            s.filtered = hcm.http_filters.len() > 1;
            s.reply_needs_head = hcm.local_reply.is_some();
            // The request's random value: `runtime_fraction` matches.
            let random = cx.wire.shard.random_u64();
            let routed = route_request_at(&hcm.route_config, &HeadView(head), random);
            s.route = routed.map(|(at, _)| at);
            if let Some(token) = upgrade {
                // `upgrade_configs`: the route's say, else its manager's.
                let forward = routed.and_then(|(_, r)| r.action.forward());
                let upgrades = forward.map(|a| a.upgrades.as_slice());
                if in_stream && s.bodyless {
                    // An extended CONNECT that ends at once has no tunnel.
                    refused = Some(Box::new(Reply::from(LocalReply::BadRequest)));
                } else if engine::upgrade_allowed(&hcm.upgrades, upgrades, token) {
                    // A direct response or redirect answers it as any
                    // request; a request with a body is not upgraded
                    // (but an extended CONNECT's body is its tunnel).
                    s.upgrade = forward.is_some() && (s.bodyless || in_stream);
                    s.terminate = token == b"CONNECT"
                        && forward.is_some_and(|a| engine::terminates_connect(&a.upgrades));
                } else {
                    cx.wire.shard.stats.downstream.rq_upgrade_refused.inc();
                    // Envoy answers a CONNECT it does not take 404.
                    let status = if token == b"CONNECT" { 404 } else { 403 };
                    refused = Some(Box::new(Reply::new(status, "", "")));
                }
            }
            // Its response heads get the route's edits (from the config,
            // which the stream then keeps).
            s.route_edits = routed.is_some_and(|(_, r)| !r.headers.response.is_empty());
            let policy = routed.and_then(|(_, r)| r.action.forward()?.retry_policy.as_ref());
            s.retry_policy = policy.is_some();
            s.retry_any_status = policy.is_some_and(|p| p.any_status());
            s.try_idle = policy.and_then(|p| p.per_try_idle_timeout);
            if let Some((route, action)) =
                routed.and_then(|(_, r)| r.action.forward().map(|a| (r, a)))
            {
                s.mirrored = !action.mirrors.is_empty();
                let view = HeadView(head);
                let path = view.path();
                s.path = match (&action.prefix_rewrite, &action.regex_rewrite) {
                    (Some(new), _) => Some(rewrite_path(&route.matcher, new, path)),
                    (None, Some((re, sub))) => Some(regex_rewrite_path(re, sub, path)),
                    (None, None) => None,
                }
                .map(|p| p.into_bytes().into_boxed_slice());
                (s.authority, s.auto_host) = match &action.host_rewrite {
                    None => (None, false),
                    Some(HostRewrite::Literal(h)) => (Some(h.as_bytes().into()), false),
                    Some(HostRewrite::Header(name)) => {
                        let v = head.get(name.as_bytes()).filter(|v| !v.is_empty());
                        (v.map(Box::from), false)
                    }
                    Some(HostRewrite::PathRegex(re, sub)) => {
                        let bare = path.split('?').next().unwrap_or(path);
                        let host = re.replace_all(bare, sub.as_str());
                        (Some(host.as_bytes().into()), false)
                    }
                    // The host is known only once picked (per attempt).
                    Some(HostRewrite::Auto) => (None, true),
                };
                s.forwarded_host = action.append_x_forwarded_host;
                s.timeout = match grpc {
                    true => action.timeout_for(
                        head.get(b"grpc-timeout")
                            .and_then(engine::headers::parse_grpc_timeout),
                    ),
                    false => action.timeout,
                };
                s.per_try = action.retry_policy.as_ref().and_then(|p| p.per_try_timeout);
                s.hedging = action.hedge_on_per_try_timeout;
                s.count_attempts = action.attempt_count;
                if s.class == ClientClass::Internal {
                    // Only an internal client may steer the router (Envoy).
                    if let Some(t) = stamp::millis(head, b"x-envoy-upstream-rq-timeout-ms") {
                        s.timeout = t;
                    }
                    let text = |n: &[u8]| head.get(n).and_then(|v| std::str::from_utf8(v).ok());
                    let retry = RetryHeaders {
                        retry_on: text(b"x-envoy-retry-on"),
                        retry_grpc_on: text(b"x-envoy-retry-grpc-on"),
                        max_retries: text(b"x-envoy-max-retries"),
                        status_codes: text(b"x-envoy-retriable-status-codes"),
                        header_names: text(b"x-envoy-retriable-header-names"),
                    };
                    if let Some(p) = retry.policy(action.retry_policy.as_ref()) {
                        s.retry_policy = true;
                        s.retry_any_status |= p.any_status();
                        s.try_idle = s.try_idle.or(p.per_try_idle_timeout);
                        s.per_try = s.per_try.or(p.per_try_timeout);
                        s.header_policy = Some(Box::new(p));
                    }
                    let per_try = b"x-envoy-upstream-rq-per-try-timeout-ms";
                    if let Some(t) = stamp::millis(head, per_try) {
                        s.per_try = t;
                    }
                    // Envoy reads "true" and "false", nothing else.
                    match head.get(b"x-envoy-hedge-on-per-try-timeout") {
                        Some(b"true") => s.hedging = true,
                        Some(b"false") => s.hedging = false,
                        _ => {}
                    }
                }
            }
            // Envoy's HCM: the edge (`use_remote_address`) overwrites it,
            // an inner hop trusts the client's.
            let client_xfp = head.get(b"x-forwarded-proto").is_some();
            s.xfp = (hcm.trust.overwrites_forwarded_proto() || !client_xfp).then_some(cx.scheme);
            s.envoy_headers = hcm.envoy_headers;
            s.idle = hcm.stream_idle_timeout;
            s.ends_at = hcm.max_stream_duration.map(|d| now + d);
            s.request_ends = hcm.request_timeout.filter(|_| !s.bodyless).map(|d| now + d);
            if s.upgrade {
                // A tunnel lasts as long as its two sides want (its idle
                // timeout and `max_stream_duration` hold): the route's
                // timeouts and retries are for requests (Envoy's tunnel
                // outlived its 15 s route timeout; the header saying it
                // still goes).
                (s.per_try, s.try_idle, s.request_ends) = (None, None, None);
                (s.retry_policy, s.retry_any_status, s.hedging) = (false, false, false);
                s.header_policy = None;
            }
        }
        // A refused request is logged too.
        s.log = (!cx.logs.is_empty()).then(|| LogState::new(&cx.logs, head, now, remote));
        refused.map_or(Ok(()), Err)
    }
}

/// `add_user_agent`, as Envoy 1.40 does it: the node's cluster as
/// `x-envoy-downstream-service-cluster` (empty when it has none), and as
/// `user-agent` when the request's is absent or empty; the node's id as
/// `x-envoy-downstream-service-node` when it has one. The first two
/// replace the client's, whoever the client is (as edits: the edge's
/// removal of client `x-envoy-*` fields does not take ours).
fn add_user_agent(
    node: &engine::Node,
    edits: &mut Option<Box<crate::http_filter::HeaderEdits>>,
    head: &mut HeaderList,
) {
    // The node's names are not checked at load: a value that cannot be
    // a header value is left out (the edits refuse it; so does this).
    let e = edits.get_or_insert_with(Default::default);
    let _ = e.set(
        b"x-envoy-downstream-service-cluster",
        node.cluster.as_bytes(),
    );
    if !node.id.is_empty() {
        let _ = e.set(b"x-envoy-downstream-service-node", node.id.as_bytes());
    }
    let safe = node
        .cluster
        .bytes()
        .all(|b| b == b' ' || b == b'\t' || (0x21..0x7f).contains(&b));
    if safe && head.get(b"user-agent").is_none_or(<[u8]>::is_empty) {
        stamp::set_field(head, b"user-agent", node.cluster.as_bytes());
    }
}
