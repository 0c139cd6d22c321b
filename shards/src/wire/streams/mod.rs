//! One downstream connection's streams: the table of streams in flight and what their phases share (the codec, the output, the upstream connections touched this turn), owned by the connection's task.
//!
//! The files below are layered, each calling only those after it:
//! `dispatch` (codec events, inbox deliveries, stream deadlines) →
//! `phases` (the request phases in order, with the HTTP filters) →
//! `upstream` (the stream's upstream side), `reply` (responses on the
//! wire) and `outcome` (what a finished stream leaves: log lines, outlier
//! counts) → this module (the table, and what a filter sees); `forward`
//! (bodies) is called by `dispatch` and returns what ended.

mod attempt_spans;
mod dispatch;
mod forward;
mod hedge;
mod held;
mod local_reply;
mod mirror;
mod outcome;
mod overload;
mod paused;
mod phases;
mod replay;
mod reply;
mod retry;
mod setup;
mod stamp;
mod upgrade;

pub(crate) use mirror::MirrorTap;
pub(crate) use replay::Replay;
pub(crate) use reply::status_of;
pub(crate) use stamp::ClientClass;
use stamp::ResponseStamp;
pub(crate) use upgrade::{UpgradeRequest, REFUSAL_BODY_LIMIT};
mod upstream;

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ahash::AHashMap;
use engine::{HttpConnectionManager, Listener, Snapshot};

use super::codec::DownCodec;
use super::dstream::DStream;
use super::logging::LogTargets;
use super::outbuf::OutBuf;
use super::pool::{PoolRef, UpRef};
use super::WireShard;
use crate::http_filter::header_mutation::{self, FormatInput, Head};
use crate::http_filter::{ConnInfo, FilterCx, HeaderEdits};
use crate::stats::envoy::{HttpStats, OpenConnection};
use crate::stats::filters::{instance_name, FilterBlock};
use h2wire::message::HeaderList;

/// Reset-flood window and thresholds: a connection is cut off when, within
/// one window, it reset at least `FLOOD_MIN_RESETS` streams and those were at
/// least half of the streams it opened. Ordinary cancellation (deadlines) is
/// far below that ratio; a rapid-reset attack is at 100 %.
const FLOOD_WINDOW: Duration = Duration::from_secs(10);
const FLOOD_MIN_RESETS: u32 = 100;

/// Client resets per window, for the flood cut-off.
struct FloodCount {
    window_start: Instant,
    streams: u32,
    resets: u32,
}

impl FloodCount {
    fn roll(&mut self, now: Instant) {
        if now.duration_since(self.window_start) >= FLOOD_WINDOW {
            *self = Self {
                window_start: now,
                streams: 0,
                resets: 0,
            };
        }
    }
}

/// What a connection's streams share that stays as it is while the
/// connection lives.
pub(crate) struct ConnCx {
    /// The routing context (`wire.shard`), inboxes and pools this
    /// connection shares with the shard's other tasks.
    pub wire: Rc<WireShard>,
    /// This connection's inbox.
    pub inbox: usize,
    /// The client: a PROXY header's source, else the socket's peer.
    pub peer: SocketAddr,
    /// The socket's peer (the proxy that sent a PROXY header, if any):
    /// `%DOWNSTREAM_DIRECT_REMOTE_ADDRESS%`.
    pub direct_peer: SocketAddr,
    /// The PROXY header's TLVs its listener's filter kept (for an
    /// upstream PROXY header).
    pub tlvs: Box<[proxywire::Tlv]>,
    /// The address the client connected to (a PROXY header's
    /// destination, if any; its port serves `strip_matching_host_port`).
    pub local: SocketAddr,
    /// The config the connection was accepted under: streams fall back to
    /// it when a reload removed the listener while the connection drains.
    pub listener: Arc<Listener>,
    /// The id of the filter chain serving it (in `listener`, and in later
    /// snapshots of the listener while the chain is unchanged).
    pub chain: u64,
    /// Where that chain was among the listener's chains.
    pub chain_hint: usize,
    /// The listener's access logs (empty: nothing is logged).
    pub logs: LogTargets,
    /// The TLS server name the client asked for.
    pub sni: Option<Box<str>>,
    /// Who the client's certificate names (mTLS), if it presented one.
    pub peer_identity: Option<Arc<engine::rbac::PeerIdentity>>,
    /// `HTTP/1.1` or `HTTP/2`.
    pub protocol: &'static str,
    /// `https` over TLS, else `http`: what `x-forwarded-proto` says.
    pub scheme: &'static [u8],
    /// What the connection manager puts on every response head.
    pub stamp: ResponseStamp,
    /// The filters' per-connection state, by their position in the chain
    /// (empty until a filter keeps some).
    pub conn_states: std::cell::RefCell<crate::http_filter::FilterStates>,
    /// Its connection manager's Envoy series (`http.<stat_prefix>.*`),
    /// where it is counted open.
    pub http: Option<OpenConnection<HttpStats>>,
    /// Its filters' blocks, by their position in the chain.
    pub filter_blocks: Box<[FilterBlock]>,
}

impl ConnCx {
    /// The PROXY header `cluster` sends ahead of a connection for this
    /// client, if it sends one.
    pub fn proxy_header(&self, cluster: &engine::Cluster) -> Option<Vec<u8>> {
        let p = cluster.upstream.proxy_protocol.as_ref()?;
        Some(crate::wire::tls::proxy_header(
            p,
            (self.peer, self.local),
            &self.tlvs,
        ))
    }

    /// The connection manager of this connection's chain in `snap` (RDS may
    /// have changed its routes), else as the connection opened under it.
    pub fn hcm<'a>(&'a self, snap: &'a Snapshot) -> Option<&'a HttpConnectionManager> {
        snap.listener(&self.listener.name)
            .and_then(|l| l.chain_at(self.chain_hint, self.chain))
            .or_else(|| self.listener.chain_at(self.chain_hint, self.chain))
            .map(|c| &c.http)
    }

    /// Runs `hooks` with stream `s`'s connection manager's filters and a
    /// filter context over it; `None` when the manager has no filter but
    /// the router and `all` is false (past the request headers there is
    /// then nothing to run).
    fn filters<R>(
        &self,
        s: &mut DStream,
        stream: u32,
        now: Instant,
        all: bool,
        hooks: impl FnOnce(&[engine::HttpFilter], &mut FilterCx<'_>) -> R,
    ) -> Option<R> {
        // Most connection managers run the router alone, which has
        // nothing to do past the request headers: no lookup per response
        // or body chunk for them.
        if !all && !s.filtered {
            return None;
        }
        let snap = Rc::clone(s.snap.as_ref()?);
        let hcm = self.hcm(&snap)?;
        let route = s
            .route
            .and_then(|at| at.get(&hcm.route_config))
            .map(|(_, r)| r);
        let served = s.served_by();
        let wire = &*self.wire;
        let in_flight = |id| wire.in_flight(id);
        let mut cx = FilterCx {
            shard: &wire.shard,
            snapshot: &snap,
            route,
            request: s.head.as_ref(),
            conn: ConnInfo {
                peer: self.peer,
                direct_peer: self.direct_peer,
                local: self.local,
                sni: self.sni.as_deref(),
                peer_identity: self.peer_identity.as_deref(),
                protocol: self.protocol,
                scheme: self.scheme,
                forwarded_proto: s.xfp,
            },
            stream,
            grpc: s.grpc,
            now,
            override_host: &mut s.override_host,
            served,
            in_flight: &in_flight,
            pick: None,
            resumer: &wire.resume,
            inbox: self.inbox,
            calls: &self.wire,
            states: &mut s.states,
            at: 0,
            paused: None,
            gather: None,
            hold: false,
            count_sizes: false,
            held: s.held.as_deref_mut(),
            before_trailers: None,
            flag: &mut s.flag,
            health_check: &mut s.health_check,
            upstream_spans: &mut s.upstream_spans,
            filter_blocks: &self.filter_blocks,
            conn_states: &self.conn_states,
        };
        Some(hooks(&hcm.http_filters, &mut cx))
    }
}

impl ConnCx {
    /// Phase 4's first step: the route's response header edits (its own,
    /// its virtual host's, its table's) over a response head, the
    /// upstream's (`list`) or a reply the gateway made (`None`), before
    /// the response filters see it (Envoy's router finalizes the head
    /// before its encoder filters run).
    fn route_response_edits(
        &self,
        s: &DStream,
        list: Option<&HeaderList>,
        status: u16,
        edits: &mut HeaderEdits,
    ) {
        if !s.route_edits {
            return;
        }
        let Some(snap) = s.snap.as_ref() else {
            return;
        };
        let Some((_, route)) = self
            .hcm(snap)
            .and_then(|hcm| s.route?.get(&hcm.route_config))
        else {
            return;
        };
        let input = FormatInput {
            peer: self.peer,
            upstream: s.served_by(),
            protocol: self.protocol,
            // A reply the gateway made reads 0, as Envoy's.
            status: list.map(|_| status),
            sni: self.sni.as_deref(),
        };
        let head = Head::Response {
            list,
            request: s.head.as_ref(),
        };
        let refused = header_mutation::apply(&route.headers.response, head, edits, &input);
        if refused > 0 {
            let stats = &self.wire.shard.stats.downstream;
            stats.header_values_refused.add(refused.into());
        }
    }
}

/// One downstream connection's streams and what their phases share, owned
/// by the connection's task.
pub(crate) struct Streams {
    pub cx: ConnCx,
    pub conn: DownCodec,
    /// The streams in flight, by downstream stream id.
    pub table: AHashMap<u32, DStream>,
    /// Upstream connections given output this turn: (pool, slot).
    touched: Vec<(PoolRef, usize)>,
    /// Attempts left this turn (by key: stream and attempt bit) whose
    /// upstream events may still sit in the inbox: their windows must
    /// still be released.
    graveyard: Vec<(u32, PoolRef, UpRef)>,
    /// The keys of hedged streams' attempts other than their ids
    /// ([`ALIAS_BIT`](crate::wire::dstream::ALIAS_BIT) keys) → the
    /// stream, and the next one to give out.
    aliases: AHashMap<u32, u32>,
    next_alias: u32,
    /// Streams with body items queued either way, for `forward`.
    queued: Vec<u32>,
    /// New requests of this read, opened upstream once its events are
    /// all in (`open_deferred`).
    to_open: Vec<u32>,
    flood: FloodCount,
    flooded: bool,
    /// Output not yet written, and its cap.
    pub out: OutBuf,
    /// Response window granted upstream beyond the initial windows, over
    /// this connection's streams: at most `out`'s limit.
    granted: u32,
    /// The loop's clock, read once per turn: what stream activity and
    /// deadlines are measured with.
    pub now: Instant,
    /// Requests the connection has taken (for `max_requests_per_connection`).
    pub requests: u32,
    /// The overload manager's `disable_http_keepalive` took a request:
    /// the connection ends after its response, as when served out.
    pub overload_close: bool,
    /// Edits of the response head in hand, reused from head to head.
    head_edits: HeaderEdits,
    /// A stream routed to upgrade (WebSocket), for the connection's task
    /// to connect (`upgrade_request`).
    pub upgrading: Option<u32>,
}

impl Streams {
    /// The streams of a connection just opened under `listener`'s chain at
    /// `chain` (its position), served by `conn`.
    pub fn new(
        wire: &Rc<WireShard>,
        conn: DownCodec,
        (peer, direct_peer, local, tlvs): (
            SocketAddr,
            SocketAddr,
            SocketAddr,
            Box<[proxywire::Tlv]>,
        ),
        listener: &Arc<Listener>,
        chain: usize,
        (sni, peer_identity): (Option<Box<str>>, Option<Arc<engine::rbac::PeerIdentity>>),
    ) -> Self {
        let (chain_id, logs, tls, stamp, prefix) = match listener.chains().nth(chain) {
            Some(c) => (
                c.id,
                wire.log_targets(&c.http.access_log),
                c.tls.is_some(),
                ResponseStamp::of(&c.http),
                Some(c.http.stat_prefix.as_str()),
            ),
            None => (0, Vec::new(), false, ResponseStamp::default(), None),
        };
        // The filters' blocks, found once here, by position in the chain
        // (which a connection keeps): none when no filter has series.
        let filter_blocks: Box<[FilterBlock]> = match (listener.chains().nth(chain), prefix) {
            (Some(c), Some(p))
                if c.http
                    .http_filters
                    .iter()
                    .any(|f| instance_name(&f.config, p).is_some()) =>
            {
                let regs = &wire.shard.stats.envoy.filters;
                c.http
                    .http_filters
                    .iter()
                    .map(|f| regs.block(&f.config, p))
                    .collect()
            }
            _ => Box::default(),
        };
        let protocol = conn.protocol();
        let http = prefix.map(|p| {
            let name = crate::stats::envoy::http_block_name(&listener.name, p);
            let stats = wire.shard.stats.envoy.http.get(&name);
            use crate::stats::envoy::{HTTP1, HTTP2, SSL};
            let protocol = match conn.is_h1() {
                true => {
                    stats.downstream_cx_http1_total.inc();
                    HTTP1
                }
                false => {
                    stats.downstream_cx_http2_total.inc();
                    HTTP2
                }
            };
            if tls {
                stats.downstream_cx_ssl_total.inc();
            }
            let mut open = OpenConnection::new(stats, Instant::now());
            open.tag(protocol | if tls { SSL } else { 0 });
            open
        });
        Self {
            cx: ConnCx {
                wire: Rc::clone(wire),
                inbox: wire.inboxes.open(),
                peer,
                direct_peer,
                tlvs,
                local,
                listener: Arc::clone(listener),
                chain: chain_id,
                chain_hint: chain,
                logs,
                sni,
                peer_identity,
                protocol,
                scheme: if tls { b"https" } else { b"http" },
                stamp,
                conn_states: std::cell::RefCell::default(),
                http,
                filter_blocks,
            },
            conn,
            table: AHashMap::default(),
            touched: Vec::new(),
            graveyard: Vec::new(),
            aliases: AHashMap::default(),
            next_alias: 0,
            queued: Vec::new(),
            to_open: Vec::new(),
            flood: FloodCount {
                window_start: Instant::now(),
                streams: 0,
                resets: 0,
            },
            flooded: false,
            out: OutBuf::new(listener.per_connection_buffer_limit_bytes),
            granted: 0,
            now: Instant::now(),
            requests: 0,
            overload_close: false,
            head_edits: HeaderEdits::default(),
            upgrading: None,
        }
    }

    /// Streams are in flight.
    pub fn is_busy(&self) -> bool {
        !self.table.is_empty()
    }

    /// Gives back what a burst left: the stream table (a stream's record
    /// is large, and a table that held one keeps room for three more: 3.4
    /// KB per connection idle after one request), the turn's lists and
    /// the codec's spare. For when the connection goes quiet.
    pub fn shrink(&mut self) {
        if self.table.is_empty() {
            self.table = AHashMap::default();
        }
        if self.aliases.is_empty() {
            self.aliases = AHashMap::default();
        }
        for list in [&mut self.queued, &mut self.to_open] {
            if list.is_empty() {
                *list = Vec::new();
            }
        }
        if self.touched.is_empty() {
            self.touched = Vec::new();
        }
        if self.graveyard.is_empty() {
            self.graveyard = Vec::new();
        }
        self.conn.shrink();
    }

    /// The client reset streams past the flood cut-off.
    pub fn flooded(&self) -> bool {
        self.flooded
    }

    /// Notes that `slot` of `pool` has output to write.
    fn touch(&mut self, pool: &PoolRef, slot: usize) {
        touch(&mut self.touched, pool, slot);
    }

    /// Wakes the upstream tasks that were given output.
    fn flush_upstreams(&mut self) {
        for (pool, slot) in self.touched.drain(..) {
            pool.borrow_mut().flush(slot);
        }
    }
}

/// Notes in `touched` that `slot` of `pool` has output to write.
pub(in crate::wire) fn touch(touched: &mut Vec<(PoolRef, usize)>, pool: &PoolRef, slot: usize) {
    if !touched
        .iter()
        .any(|(p, s)| *s == slot && Rc::ptr_eq(p, pool))
    {
        touched.push((Rc::clone(pool), slot));
    }
}

/// Notes that `s` (stream `id`) has body items to move: `forward` visits it.
fn enqueue(queued: &mut Vec<u32>, s: &mut DStream, id: u32) {
    if !s.queued {
        s.queued = true;
        queued.push(id);
    }
}
