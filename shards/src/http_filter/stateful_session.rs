//! The stateful session filter (gRFC A55, Envoy's `envoy.filters.http.stateful_session`): on the request, the session's host (from a cookie or a header) becomes the stream's override host, which the router honours if the host may serve; on the response, the session is bound again when another host served. Decoding and encoding live in `engine::session`.

use std::net::SocketAddr;
use std::time::SystemTime;

use engine::session::{self as codec, CookieFormat, SessionValue};
use engine::{SessionState, StatefulSession};

use super::{FilterCx, Flow, HttpFilter, RequestFlow, RequestHead, ResponseHead};
use crate::shard::OverrideHost;
use crate::stats::SessionStats;

/// Wall-clock seconds: Envoy's cookie `expires` is a UNIX time, so cookies
/// stay valid across gateways (and Envoys) that share a fleet.
fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The filter as the stream's route configures it: the listener's config,
/// unless the route (or its virtual host) disabled or replaced it. `None`:
/// off for this request, and for a request no route matched (it is
/// answered 404 without a session read).
fn on_route<'a>(listener: &'a StatefulSession, cx: &FilterCx<'a>) -> Option<&'a StatefulSession> {
    let per_route = cx.route?.per_filter.stateful_session.as_ref();
    codec::effective(Some(listener), None, per_route)
}

/// Request side: the session the request carries, as the stream's override
/// host. `None` when the request path is outside the cookie's path (the
/// response is then left alone too, as A55 says). A value that does not
/// decode, or has expired, is counted and ignored: never an error.
fn read(
    config: &StatefulSession,
    head: &RequestHead<'_>,
    stats: &SessionStats,
) -> Option<OverrideHost> {
    let value = match config.session_state.as_ref()? {
        SessionState::Cookie(cookie) => {
            if let Some(path) = &cookie.path {
                let req_path = head
                    .get(b":path")
                    .and_then(|p| std::str::from_utf8(p).ok())
                    .unwrap_or("/");
                if !codec::path_matches(path, req_path) {
                    return None;
                }
            }
            codec::find_cookie(head.get_all(b"cookie"), &cookie.name)
                .map(|raw| codec::decode_cookie_value(raw, unix_now()))
        }
        SessionState::Header(h) => head
            .get(h.name.as_bytes())
            .map(|v| codec::decode_header_value(v, unix_now())),
    };
    let (address, cluster) = match value {
        Some(SessionValue::Valid { address, cluster }) => (Some(address), cluster),
        Some(SessionValue::Invalid) => {
            stats.cookie_invalid.inc();
            (None, None)
        }
        Some(SessionValue::Expired) => {
            stats.cookie_expired.inc();
            (None, None)
        }
        None => (None, None),
    };
    Some(OverrideHost {
        address,
        cluster: cluster.map(String::into_boxed_str),
        strict: config.strict.then_some(config.strict_not_found_status),
    })
}

/// Response side: the field that (re)binds the session to `served`.
fn bind(config: &StatefulSession, served: SocketAddr, format: CookieFormat) -> Option<Binding<'_>> {
    match config.session_state.as_ref()? {
        SessionState::Cookie(cookie) => Some(Binding::Cookie(codec::set_cookie(
            cookie,
            served,
            unix_now(),
            format,
        ))),
        SessionState::Header(h) => Some(Binding::Header(&h.name, codec::header_value(served))),
    }
}

/// How a response binds its session.
enum Binding<'a> {
    /// A `set-cookie`, beside the upstream's own cookies.
    Cookie(String),
    /// The session header, replacing any value the upstream sent (Envoy's
    /// `setCopy`), so a client never reads a stale one.
    Header(&'a str, String),
}

impl HttpFilter for StatefulSession {
    fn on_request_headers(&self, cx: &mut FilterCx<'_>, head: &mut RequestHead<'_>) -> RequestFlow {
        if let Some(config) = on_route(self, cx) {
            if let Some(session) = read(config, head, &cx.shard.stats.session) {
                *cx.override_host = Some(session);
            }
        }
        RequestFlow::Continue
    }

    fn on_response_headers(&self, cx: &mut FilterCx<'_>, head: &mut ResponseHead<'_>) -> Flow {
        // Only where the request side applied, and a host served (Envoy
        // binds on error replies too, once a host was chosen).
        let (Some(session), Some(served)) = (cx.override_host.as_ref(), cx.served) else {
            return Flow::Continue;
        };
        if session.address == Some(served) {
            return Flow::Continue;
        }
        let Some(config) = on_route(self, cx) else {
            return Flow::Continue;
        };
        let bound = match bind(config, served, cx.shard.cookie_format) {
            Some(Binding::Cookie(value)) => head.append(b"set-cookie", value.as_bytes()),
            Some(Binding::Header(name, value)) => head.set(name.as_bytes(), value.as_bytes()),
            None => return Flow::Continue,
        };
        if bound.is_ok() {
            cx.shard.stats.session.session_set.inc();
        }
        Flow::Continue
    }
}
