//! An upgrade's stream (WebSocket, CONNECT over HTTP/1.1): its request written for a connection of its own, the backend's answer through the response phases (a 101, or the gateway's 200 to a CONNECT, makes the client's connection a tunnel; anything else is its response), and the stream's end when the tunnel closes.
//!
//! The connection's task drives it (`wire::upgrade`): once the router
//! chose a host for a stream whose route forwards its `Upgrade`, the
//! stream is not opened on the host's pool (whose connections go back to
//! it) but waits in `upgrading` for the task to connect.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use engine::{Cluster, HostId};
use h2wire::conn::ClientEvent;
use h2wire::message::HeaderList;

use super::upstream::{write_request, HeadSink};
use super::{ConnCx, Streams};
use crate::http_filter::{HeaderEdits, Reply};
use crate::local_reply::LocalReply;
use crate::wire::dstream::DStream;
use crate::wire::tunnel::Moved;
use crate::wire::upcodec::UpCodec;

/// Response body bytes of a backend that refuses an upgrade taken into
/// its answer; past them the stream fails.
pub(crate) const REFUSAL_BODY_LIMIT: u32 = 64 * 1024;

/// An upgrade's request, ready for its own connection to the host.
pub(crate) struct UpgradeRequest {
    pub stream: u32,
    /// The request head, written in it; none for a CONNECT, which the
    /// gateway answers itself.
    pub codec: Option<UpCodec>,
    /// The stream it went on (HTTP/2's; HTTP/1.1 has the one).
    pub up_stream: u32,
    pub addr: SocketAddr,
    pub host: HostId,
    pub cluster: Arc<Cluster>,
    /// The stream's idle timeout (`stream_idle_timeout`): the backend's
    /// answer and then the tunnel's quiet are bounded by it.
    pub idle: Option<Duration>,
    /// When `max_stream_duration` ends it.
    pub ends_at: Option<Instant>,
}

/// An upgrade's own connection to its host: HTTP/1.1's upgrade or
/// CONNECT, or (to an HTTP/2 cluster) an extended CONNECT (RFC 8441) or
/// CONNECT stream, as Envoy sends them.
struct Upgrading<'c> {
    codec: &'c mut UpCodec,
    upgrade: &'c [u8],
    scheme: &'static [u8],
}

impl HeadSink for Upgrading<'_> {
    type Out = u32;

    fn send<'a>(
        self,
        method: &'a [u8],
        authority: &'a [u8],
        path: &'a [u8],
        fields: impl Iterator<Item = (&'a [u8], &'a [u8], bool)>,
        _bodyless: bool,
    ) -> Option<u32> {
        let h2 = self.codec.is_h2();
        match self.upgrade {
            // On HTTP/2 a stream whose DATA is the tunnel.
            b"CONNECT" => self.codec.send_connect(authority, fields, h2),
            upgrade if h2 => {
                let method = (method, self.scheme);
                self.codec
                    .send_upgrade_stream(method, authority, path, fields, upgrade)
            }
            upgrade => self
                .codec
                .send_upgrade(method, authority, path, fields, upgrade),
        }
        .ok()
    }
}

/// An upgrade (or CONNECT) answered otherwise (refused, a direct
/// response, a filter's reply): no answer to it switches the connection,
/// which ends after it, as in Envoy: what the client sends next was meant
/// for the other protocol. An HTTP/2 extended CONNECT is one stream of
/// many, whose refusal ends only itself (Envoy also sends GOAWAY there,
/// sending the client's next requests to a new connection).
pub(super) fn keep_to_http(conn: &mut crate::wire::codec::DownCodec) {
    if conn.is_h1() {
        conn.forget_upgrade();
        conn.go_away(h2wire::ErrorCode::NO_ERROR);
    }
}

impl Streams {
    /// The request of the stream waiting to upgrade, written for its own
    /// connection to the host the router chose (`None`: it is gone, or
    /// its head could not be written, in which case it failed).
    pub(crate) fn upgrade_request(&mut self) -> Option<UpgradeRequest> {
        let stream = self.upgrading.take()?;
        let s = self.table.get_mut(&stream)?;
        let t = s.target.as_ref()?;
        let (addr, host, cluster) = {
            let p = t.pool.borrow();
            (p.addr, p.host, p.cluster())
        };
        s.attempts = s.attempts.saturating_add(1);
        let (idle, ends_at, terminate) = (s.idle, s.ends_at, s.terminate);
        self.cx.wire.shard.stats.downstream.rq_upgrades_total.inc();
        // A CONNECT its route terminates is answered here: no request
        // goes to the host, only the client's bytes. An HTTP/2 cluster's
        // connection is made for this stream alone too.
        let h2 = cluster.upstream.protocol == engine::UpstreamProtocol::Http2;
        let (codec, up_stream) = match terminate {
            true => (None, 1),
            false => {
                let (codec, id) = self.write_upgrade(stream, h2)?;
                (Some(codec), id)
            }
        };
        Some(UpgradeRequest {
            stream,
            codec,
            up_stream,
            addr,
            host,
            cluster,
            idle,
            ends_at,
        })
    }

    /// The upgrade's request for its connection to the host, HTTP/2's
    /// (`h2`: an extended CONNECT or a CONNECT stream) or HTTP/1.1's, and
    /// the stream it went on; `None` (the stream failed) if its head could
    /// not be written. Made again for HTTP/2 when an `auto_config`
    /// cluster's ALPN picks it.
    pub(crate) fn write_upgrade(&mut self, stream: u32, h2: bool) -> Option<(UpCodec, u32)> {
        let upgrade: Box<[u8]> = self.conn.upgrade_asked()?.into();
        let s = self.table.get_mut(&stream)?;
        let t = s.target.as_ref()?;
        let (hostname, scheme, mut codec) = {
            let p = t.pool.borrow();
            // The body window holds a refusal's body, not a tunnel's bytes
            // (HTTP/2's stream window is the tunnel's).
            let codec = match h2 {
                true => p.codec(Some(crate::wire::codec::Proto::H2)).0,
                false => UpCodec::h1(REFUSAL_BODY_LIMIT, false),
            };
            (p.hostname.clone(), p.scheme(), codec)
        };
        let sink = Upgrading {
            codec: &mut codec,
            upgrade: &upgrade,
            scheme,
        };
        let auto = s.auto_host.then_some(hostname).flatten();
        match write_request(s, auto.as_deref(), sink) {
            Some(id) => Some((codec, id)),
            None => {
                self.fail(stream, LocalReply::BadRequest);
                None
            }
        }
    }

    /// The backend switched protocols: its 101 (`head`; for a CONNECT,
    /// the gateway's own 200) goes through the response phases. Whether
    /// the client's connection is a tunnel now (a response filter may
    /// have answered in its place).
    pub(crate) fn upgraded(&mut self, stream: u32, head: HeaderList) -> bool {
        let ev = ClientEvent::Response {
            stream,
            head,
            informational: false,
            end_stream: false,
        };
        self.on_upstream(stream, ev);
        self.conn.is_upgraded() && self.table.contains_key(&stream)
    }

    /// The backend answered the upgrade with `head` and `body` (all of
    /// it) instead: that is the client's answer, after which the
    /// connection closes.
    pub(crate) fn upgrade_answered(&mut self, stream: u32, head: &HeaderList, body: Bytes) {
        let status = super::reply::status_of(head);
        let mut fields = HeaderEdits::default();
        for (name, value, _) in head.iter() {
            if name.first() != Some(&b':') && name != b"content-length" {
                let _ = fields.append(name, value);
            }
        }
        if let Some(s) = self.table.get_mut(&stream) {
            s.served = Some((status, None));
        }
        let reply = Reply {
            status,
            fields,
            body,
            flag: "",
            grpc_status: None,
        };
        // `connection: close`: the client's next bytes were meant for the
        // protocol it asked for.
        self.conn.go_away(h2wire::ErrorCode::NO_ERROR);
        // The backend's answer: not the gateway's, for `local_reply_config`.
        self.end_with(stream, reply, None, false);
    }

    /// The upgrade's connection failed before an answer came: the client
    /// gets `reply` (never a retry: the connection's task has left its
    /// streams' turns to run the upgrade).
    pub(crate) fn upgrade_failed(&mut self, stream: u32, reply: LocalReply) {
        self.conn.go_away(h2wire::ErrorCode::NO_ERROR);
        self.fail_with(
            stream,
            Reply::from(reply),
            super::local_reply::host_result(reply),
        );
    }

    /// The connection becomes the tunnel of `stream`: it leaves the
    /// table with what its end needs (`ConnCx::tunnel_closed`), and the
    /// rest of the connection (codec, table, buffers) can go: an open
    /// WebSocket holds none of it.
    pub(crate) fn into_tunnel(mut self, stream: u32) -> Option<(ConnCx, DStream)> {
        let mut s = self.table.remove(&stream);
        if let Some(s) = s.as_mut() {
            // Its inbox closes (and its number may serve another
            // connection): out of the overload manager's classes now.
            let key = (self.cx.inbox, stream);
            self.cx.wire.accounts.forget(key, &mut s.account);
        }
        // Anything else (nothing, on HTTP/1.1) ends as at a close; the
        // inbox closes.
        self.close();
        let Streams { cx, .. } = self;
        Some((cx, s?))
    }

    /// The tunnel closed before it began (its 101 could not be written):
    /// the stream ends with what it moved.
    pub(crate) fn tunnel_closed(&mut self, stream: u32, moved: Moved) {
        if let Some(l) = self.table.get_mut(&stream).and_then(|s| s.log.as_mut()) {
            l.bytes_received += moved.received;
            l.bytes_sent += moved.sent;
        }
        self.finish(stream);
    }
}

impl ConnCx {
    /// An upgraded stream's tunnel closed: the stream ends (its access log
    /// line, counters, outlier outcome) with what the tunnel moved.
    pub(crate) fn tunnel_closed(
        &self,
        stream: u32,
        mut s: DStream,
        moved: Moved,
        read_before: u64,
    ) {
        if let Some(l) = s.log.as_mut() {
            l.bytes_received += moved.received;
            l.bytes_sent += moved.sent;
        }
        // The tunnel's bytes are its connection's too (Envoy's
        // `downstream_cx_rx/tx_bytes_total` count them).
        // (less what was read before it, counted then).
        if let Some(h) = &self.http {
            let received = moved.received.saturating_sub(read_before);
            h.stats.downstream_cx_rx_bytes_total.add(received);
            h.stats.downstream_cx_tx_bytes_total.add(moved.sent);
        }
        self.settle(stream, s, std::time::Instant::now(), |_| {});
        self.wire.flush_logs();
    }
}
