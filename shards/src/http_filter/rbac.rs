//! The RBAC filter (Envoy's `envoy.filters.http.rbac`): the route's (or the filter's) policies judge the request by who asks (addresses, client certificate, fields) and what it asks (path, fields, destination, server name); a denied request is answered 403. Shadow rules are judged and counted only. The network filter's check (`check_connection`) judges a connection as it opens.

use std::net::{IpAddr, SocketAddr};

use engine::rbac::{PeerIdentity, RbacInput};
use engine::{PerRoute, RbacFilter};

use super::{FilterCx, HttpFilter, Reply, RequestFlow, RequestHead};
use crate::stats::filters::Both;
use crate::stats::RbacStats;

/// A request as the policies read it.
struct Request<'a, 'h> {
    head: &'a RequestHead<'h>,
    cx: &'a FilterCx<'a>,
    path: Option<&'a str>,
}

impl RbacInput for Request<'_, '_> {
    fn header(&self, name: &str) -> Vec<&str> {
        match self.head.get(name.as_bytes()) {
            None => Vec::new(),
            Some(first) => {
                let name = name.as_bytes();
                let mut all: Vec<&str> = self
                    .head
                    .list
                    .iter()
                    .filter(|(n, _, _)| *n == name)
                    .filter_map(|(_, v, _)| std::str::from_utf8(v).ok())
                    .collect();
                if all.is_empty() {
                    // A pseudo-header or an edited field: its one value.
                    all.extend(std::str::from_utf8(first).ok());
                }
                all
            }
        }
    }

    fn path(&self) -> Option<&str> {
        self.path
    }

    fn local(&self) -> SocketAddr {
        self.cx.conn.local
    }

    fn direct_remote(&self) -> SocketAddr {
        self.cx.conn.direct_peer
    }

    fn remote(&self) -> IpAddr {
        self.cx.conn.peer.ip()
    }

    fn sni(&self) -> Option<&str> {
        self.cx.conn.sni
    }

    fn peer(&self) -> Option<&PeerIdentity> {
        self.cx.conn.peer_identity
    }
}

/// Judges `input` by `filter`, counting; whether it may go on.
pub(crate) fn judge(
    filter: &RbacFilter,
    input: &dyn RbacInput,
    stats: Both<'_, RbacStats>,
) -> bool {
    if let Some(shadow) = &filter.shadow {
        match shadow.evaluate(input).allowed {
            true => stats.inc(|s| &s.shadow_allowed),
            false => stats.inc(|s| &s.shadow_denied),
        }
    }
    let Some(rules) = &filter.rules else {
        return true;
    };
    let verdict = rules.evaluate(input);
    match verdict.allowed {
        true => stats.inc(|s| &s.allowed),
        false => stats.inc(|s| &s.denied),
    }
    verdict.allowed
}

impl HttpFilter for RbacFilter {
    fn on_request_headers(&self, cx: &mut FilterCx<'_>, head: &mut RequestHead<'_>) -> RequestFlow {
        let filter: &RbacFilter = match cx.route.and_then(|r| r.per_filter.rbac.as_ref()) {
            Some(PerRoute::Disabled) => return RequestFlow::Continue,
            Some(PerRoute::Override(f)) => f,
            None => self,
        };
        if filter.rules.is_none() && filter.shadow.is_none() {
            return RequestFlow::Continue;
        }
        let path = head.get(b":path").and_then(|p| {
            let p = std::str::from_utf8(p).ok()?;
            Some(p.split(['?', '#']).next().unwrap_or(p))
        });
        let input = Request { head, cx, path };
        if judge(filter, &input, cx.counters()) {
            return RequestFlow::Continue;
        }
        // Envoy 1.40 sets no response flag (its details say why).
        RequestFlow::Reply(Reply::new(403, "RBAC: access denied", ""))
    }
}

/// A connection as the network filter's policies read it.
pub(crate) struct Connection<'a> {
    pub local: SocketAddr,
    pub peer: SocketAddr,
    /// The socket's peer (the proxy that sent a PROXY header, if any).
    pub direct_peer: SocketAddr,
    pub sni: Option<&'a str>,
    pub identity: Option<&'a PeerIdentity>,
}

impl RbacInput for Connection<'_> {
    fn header(&self, _name: &str) -> Vec<&str> {
        Vec::new()
    }

    fn path(&self) -> Option<&str> {
        None
    }

    fn local(&self) -> SocketAddr {
        self.local
    }

    fn direct_remote(&self) -> SocketAddr {
        self.direct_peer
    }

    fn remote(&self) -> IpAddr {
        self.peer.ip()
    }

    fn sni(&self) -> Option<&str> {
        self.sni
    }

    fn peer(&self) -> Option<&PeerIdentity> {
        self.identity
    }
}
