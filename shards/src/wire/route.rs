//! Phases 1 and 2 of a request, before anything goes upstream: route (route table, session, cluster) and pick (host and pool), each refusal a local reply.

use engine::route::{route_request_in, RequestView};
use engine::{ClusterSnapshot, HostId, HttpConnectionManager, Route, Snapshot};
use h2wire::message::HeaderList;
use http::header::{HeaderName, HeaderValue};

use super::pool::PoolRef;
use super::WireShard;
use crate::local_reply::LocalReply;
use crate::session::RequestSession;
use crate::shard::Shard;

/// Lets the engine's matcher read a request head without copying it.
pub(super) struct HeadView<'a>(pub &'a HeaderList);

/// A field's value as text, if it is UTF-8.
pub(super) fn text(v: Option<&[u8]>) -> Option<&str> {
    v.and_then(|v| std::str::from_utf8(v).ok())
}

impl RequestView for HeadView<'_> {
    fn authority(&self) -> &str {
        text(self.0.get(b":authority").or_else(|| self.0.get(b"host"))).unwrap_or("")
    }
    fn path(&self) -> &str {
        text(self.0.get(b":path")).unwrap_or("/")
    }
    fn method(&self) -> &str {
        text(self.0.get(b":method")).unwrap_or("")
    }
    fn header(&self, name: &str) -> Option<&str> {
        text(self.0.get(name.as_bytes()))
    }
}

/// Where phase 1 sends a request.
pub(super) struct Routed<'a> {
    pub route: &'a Route,
    pub cluster: &'a ClusterSnapshot,
    /// The stateful session the request carried, if its route has one.
    pub session: Option<RequestSession<'a>>,
}

/// Phase 1, route: the virtual host and route by `:authority` and path in
/// the connection manager's route table, the route's stateful session,
/// then its cluster (a weighted pick, or the session's cluster). Counts
/// what it refuses.
pub(super) fn route<'a>(
    shard: &Shard,
    hcm: &'a HttpConnectionManager,
    snap: &'a Snapshot,
    head: &HeaderList,
) -> Result<Routed<'a>, LocalReply> {
    let Some((vhost, route)) = route_request_in(&hcm.route_config, &HeadView(head)) else {
        shard.stats.downstream.rq_no_route.inc();
        return Err(LocalReply::NoRoute);
    };
    let session = RequestSession::for_route(hcm, vhost, route, head, &shard.stats.session);
    let cluster_name = shard.choose_cluster(route, session.as_ref(), snap);
    let Some(cluster) = snap.cluster(cluster_name) else {
        shard.stats.rq_unknown_cluster.inc();
        return Err(LocalReply::UnknownCluster);
    };
    Ok(Routed {
        route,
        cluster,
        session,
    })
}

/// What phase 2 chose for a request.
pub(super) struct Picked {
    pub host: HostId,
    /// The host's pool on this shard, with the request counted in flight.
    pub pool: PoolRef,
    /// The session header the response carries when the host is not the
    /// session's (Envoy sets it on error replies too).
    pub session_header: Option<Box<(HeaderName, HeaderValue)>>,
}

/// Phase 2, pick: the session's host when it is usable, else one by the
/// cluster's policy (least request reads each host's in-flight count from
/// its pool), skipping ejected hosts; then the host's pool, where the
/// request now counts as in flight.
pub(super) fn pick(wire: &WireShard, routed: &Routed<'_>) -> Result<Picked, LocalReply> {
    let shard = &*wire.shard;
    let session = routed.session.as_ref();
    let host = shard.choose_host(routed.cluster, session, |id| wire.in_flight(id))?;
    let session_header = session
        .and_then(|s| s.response_header(host.address, shard.cookie_format))
        .map(Box::new);
    let host_stats = shard.stats.hosts.host(host.id);
    host_stats.rq_total.inc();
    host_stats.rq_active.inc();
    let pool = wire.pool(host, routed.cluster);
    pool.borrow_mut().in_flight += 1;
    Ok(Picked {
        host: host.id,
        pool,
        session_header,
    })
}
