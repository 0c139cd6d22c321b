//! The stateful session filter on the data path (gRFC A55, Envoy's
//! `envoy.filters.http.stateful_session`): reads a request's session (cookie
//! or header) and writes the response's when the serving host changed.
//! Decoding and encoding live in `engine::session`; this module only binds
//! them to h2 requests, the shard's stats and the wall clock.

use std::net::SocketAddr;
use std::time::SystemTime;

use engine::session::{self as codec, CookieFormat, SessionValue};
use engine::{SessionState, StatefulSession};
use http::header::{HeaderName, HeaderValue, COOKIE, SET_COOKIE};
use http::request::Parts;

use crate::stats::SessionStats;

/// What the session filter reads of a request, whichever HTTP/2 codec
/// decoded it.
pub trait SessionSource {
    /// `:path`, with the query.
    fn path(&self) -> &str;
    /// The values of every `cookie` field.
    fn cookies(&self) -> impl Iterator<Item = &[u8]>;
    /// The first value of the field `name`.
    fn header(&self, name: &str) -> Option<&[u8]>;
}

impl SessionSource for Parts {
    fn path(&self) -> &str {
        self.uri.path_and_query().map_or("/", |p| p.as_str())
    }
    fn cookies(&self) -> impl Iterator<Item = &[u8]> {
        self.headers.get_all(COOKIE).iter().map(|v| v.as_bytes())
    }
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers.get(name).map(|v| v.as_bytes())
    }
}

impl SessionSource for h2wire::message::HeaderList {
    fn path(&self) -> &str {
        self.get(b":path")
            .and_then(|p| std::str::from_utf8(p).ok())
            .unwrap_or("/")
    }
    fn cookies(&self) -> impl Iterator<Item = &[u8]> {
        self.get_all(b"cookie")
    }
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.get(name.as_bytes())
    }
}

/// A request the session filter applies to.
pub struct RequestSession<'a> {
    pub config: &'a StatefulSession,
    /// The session's host, when the request carried a valid, unexpired one.
    pub host: Option<SocketAddr>,
    /// gRPC's `ip:port;cluster` dialect names the cluster too.
    pub cluster: Option<String>,
}

/// Wall-clock seconds: Envoy's cookie `expires` is a UNIX time, so cookies
/// stay valid across gateways (and Envoys) that share a fleet.
fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl<'a> RequestSession<'a> {
    /// Request side. `None` when the filter is off for this route or the
    /// request path is outside the cookie's path (then the response is left
    /// alone too, as A55 says). A value that does not decode, or has
    /// expired, is counted and ignored: never an error response.
    pub fn read(
        config: Option<&'a StatefulSession>,
        req: &impl SessionSource,
        stats: &SessionStats,
    ) -> Option<Self> {
        let config = config?;
        let state = config.session_state.as_ref()?;
        let value = match state {
            SessionState::Cookie(cookie) => {
                if let Some(path) = &cookie.path {
                    if !codec::path_matches(path, req.path()) {
                        return None;
                    }
                }
                codec::find_cookie(req.cookies(), &cookie.name)
                    .map(|raw| codec::decode_cookie_value(raw, unix_now()))
            }
            SessionState::Header(h) => req
                .header(h.name.as_str())
                .map(|v| codec::decode_header_value(v, unix_now())),
        };
        let (host, cluster) = match value {
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
        Some(Self {
            config,
            host,
            cluster,
        })
    }

    /// [`read`](Self::read) with the filter as this route configures it
    /// (A39 merge of the listener's filter and the virtual host's and
    /// route's per-route configs).
    pub fn for_route(
        hcm: &'a engine::HttpConnectionManager,
        vhost: &'a engine::VirtualHost,
        route: &'a engine::Route,
        req: &impl SessionSource,
        stats: &SessionStats,
    ) -> Option<Self> {
        let config = codec::effective(
            hcm.stateful_session.as_ref(),
            vhost.stateful_session.as_ref(),
            route.stateful_session.as_ref(),
        );
        Self::read(config, req, stats)
    }

    /// Response side: the header that (re)binds the session to `served`,
    /// unless the request's session already named it.
    pub fn response_header(
        &self,
        served: SocketAddr,
        format: CookieFormat,
    ) -> Option<(HeaderName, HeaderValue)> {
        if self.host == Some(served) {
            return None;
        }
        let header = match self.config.session_state.as_ref()? {
            SessionState::Cookie(cookie) => {
                let value = codec::set_cookie(cookie, served, unix_now(), format);
                (SET_COOKIE, HeaderValue::try_from(value).ok()?)
            }
            SessionState::Header(h) => (
                HeaderName::try_from(h.name.as_str()).ok()?,
                HeaderValue::try_from(codec::header_value(served)).ok()?,
            ),
        };
        Some(header)
    }
}
