//! One downstream connection's streams: the table of streams in flight and what their phases share (the codec, the output, the upstream connections touched this turn), owned by the connection's task.
//!
//! The files below are layered, each calling only those after it:
//! `dispatch` (codec events and inbox deliveries, deadlines) → `phases`
//! (the request phases, in order) → `forward` (bodies) and the stream's
//! record (`dstream`) and body queues (`body`) beside this module.

mod dispatch;
mod forward;
mod phases;

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ahash::AHashMap;
use engine::Listener;

use super::codec::DownCodec;
use super::dstream::DStream;
use super::logging::LogTargets;
use super::outbuf::OutBuf;
use super::pool::{PoolRef, UpRef};
use super::WireShard;

/// Reset-flood window and thresholds: a connection is cut off when, within
/// one window, it reset at least `FLOOD_MIN_RESETS` streams and those were at
/// least half of the streams it opened. Ordinary cancellation (deadlines) is
/// far below that ratio; a rapid-reset attack is at 100 %.
const FLOOD_WINDOW: Duration = Duration::from_secs(10);
pub(super) const FLOOD_MIN_RESETS: u32 = 100;

/// Client resets per window, for the flood cut-off.
pub(super) struct FloodCount {
    window_start: Instant,
    pub(super) streams: u32,
    pub(super) resets: u32,
}

impl FloodCount {
    pub(super) fn roll(&mut self, now: Instant) {
        if now.duration_since(self.window_start) >= FLOOD_WINDOW {
            *self = Self {
                window_start: now,
                streams: 0,
                resets: 0,
            };
        }
    }
}

/// One downstream connection's streams and what their phases share, owned
/// by the connection's task.
pub(crate) struct Streams {
    /// The routing context (`wire.shard`), inboxes and pools this
    /// connection shares with the shard's other tasks.
    pub wire: Rc<WireShard>,
    /// This connection's inbox.
    pub inbox: usize,
    pub conn: DownCodec,
    /// The streams in flight, by downstream stream id.
    pub table: AHashMap<u32, DStream>,
    pub peer: SocketAddr,
    /// The config the connection was accepted under: streams fall back to
    /// it when a reload removed the listener while the connection drains.
    pub listener: Arc<Listener>,
    /// The id of the filter chain serving it (in `listener`, and in later
    /// snapshots of the listener while the chain is unchanged).
    pub chain: u64,
    /// Where that chain was among the listener's chains.
    pub chain_hint: usize,
    /// Upstream connections given output this turn: (pool, slot).
    pub touched: Vec<(PoolRef, usize)>,
    /// Streams finished this turn whose upstream events may still sit in
    /// the inbox: their windows must still be released.
    pub graveyard: Vec<(u32, PoolRef, UpRef)>,
    /// Streams with body items queued either way, for `forward`.
    pub queued: Vec<u32>,
    /// New requests of this read, opened upstream once its events are
    /// all in (`open_deferred`).
    pub to_open: Vec<u32>,
    pub(super) flood: FloodCount,
    pub(super) flooded: bool,
    /// Output not yet written, and its cap.
    pub out: OutBuf,
    /// Response window granted upstream beyond the initial windows, over
    /// this connection's streams: at most `out`'s limit.
    pub granted: u32,
    /// The loop's clock, read once per turn: what stream activity and
    /// deadlines are measured with.
    pub now: Instant,
    /// Requests the connection has taken (for `max_requests_per_connection`).
    pub requests: u32,
    /// The listener's access logs (empty: nothing is logged).
    pub logs: LogTargets,
    /// The TLS server name the client asked for.
    pub sni: Option<Box<str>>,
}

impl Streams {
    /// Notes that `slot` of `pool` has output to write.
    pub fn touch(&mut self, pool: &PoolRef, slot: usize) {
        if !self
            .touched
            .iter()
            .any(|(p, s)| *s == slot && Rc::ptr_eq(p, pool))
        {
            self.touched.push((Rc::clone(pool), slot));
        }
    }

    /// Wakes the upstream tasks that were given output.
    pub(super) fn flush_upstreams(&mut self) {
        for (pool, slot) in self.touched.drain(..) {
            pool.borrow_mut().flush(slot);
        }
    }

    /// Streams are in flight.
    pub fn is_busy(&self) -> bool {
        !self.table.is_empty()
    }

    /// The client reset streams past the flood cut-off.
    pub fn flooded(&self) -> bool {
        self.flooded
    }

    /// The streams of a connection just opened under `listener`'s chain at
    /// `chain` (its position), served by `conn`.
    pub fn new(
        wire: &Rc<WireShard>,
        conn: DownCodec,
        peer: SocketAddr,
        listener: &Arc<Listener>,
        chain: usize,
        sni: Option<Box<str>>,
    ) -> Self {
        let (chain_id, logs) = match listener.chains().nth(chain) {
            Some(c) => (c.id, wire.log_targets(&c.http)),
            None => (0, Vec::new()),
        };
        Self {
            wire: Rc::clone(wire),
            inbox: wire.inboxes.open(),
            conn,
            table: AHashMap::default(),
            peer,
            listener: Arc::clone(listener),
            chain: chain_id,
            chain_hint: chain,
            touched: Vec::new(),
            graveyard: Vec::new(),
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
            logs,
            sni,
        }
    }
}

/// Notes that `s` (stream `id`) has body items to move: `forward` visits it.
fn enqueue(queued: &mut Vec<u32>, s: &mut DStream, id: u32) {
    if !s.queued {
        s.queued = true;
        queued.push(id);
    }
}
