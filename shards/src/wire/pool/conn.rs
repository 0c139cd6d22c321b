//! One upstream connection as its pool keeps it, and a stream's place on
//! one.

use std::task::Waker;
use std::time::Instant;

use ahash::AHashMap;

use crate::wire::upcodec::UpCodec;

/// A stream's place in a pool: the connection's slot and generation (a
/// slot is reused once its connection is gone), and the stream id on it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UpRef {
    pub slot: usize,
    pub gen: u32,
    pub stream: u32,
}

/// One upstream connection.
pub(crate) struct UpConn {
    pub(super) gen: u32,
    pub conn: UpCodec,
    /// Opened in a pool whose `auto_config` protocol is not known yet: it
    /// takes no stream until its handshake chose one.
    pub(super) alpn_pending: bool,
    /// Its transport is up: a stream opened on it now is an attempt on
    /// a connection (Envoy's `upstream_rq_total`); those opened while it
    /// connected are counted when it is up.
    pub(super) connected: bool,
    /// Streams opened on it, for `max_requests_per_connection`.
    pub(super) requests: u32,
    /// Upstream stream → (inbox of its downstream connection, downstream
    /// stream). Removed by the downstream side when it is done with the
    /// stream, or when the connection fails.
    pub(super) routes: AHashMap<u32, (usize, u32)>,
    /// The connection's task, parked until bytes arrive or there is output.
    pub(super) waker: Option<Waker>,
    /// Failed or closed: takes no streams; the slot may be reused once
    /// its task is gone.
    pub(super) dead: bool,
    /// The server sent GOAWAY, or the connection spent its reset budget:
    /// no new streams; closes once its streams end.
    pub(super) draining: bool,
    /// Streams reset before their response head (see [`RESET_BUDGET`](super::RESET_BUDGET)).
    pub(super) early_resets: u32,
    pub(super) task_done: bool,
    /// Our cap on its streams (module docs).
    pub(super) cap: u32,
    /// Bytes its task holds unwritten (the backend's socket is not taking
    /// them), as of the task's last turn, plus the request bytes given to
    /// its codec since.
    pub(super) unwritten: usize,
    /// Request data was refused for `unwritten`: the task wakes the
    /// connection's streams once it falls below half the limit.
    pub(super) backed_up: bool,
    /// When its last stream left it (none routed since): the cluster's
    /// `idle_timeout` runs from here. Stamped where a route is removed,
    /// not by the task, which may sleep through it.
    pub(super) idle_since: Option<Instant>,
}

impl UpConn {
    /// Nothing more will happen on it: it takes no new stream (its pool
    /// is retired, it failed, drains, or its codec closes) and carries
    /// none.
    pub(super) fn is_over(&self, retired: bool) -> bool {
        (retired || self.dead || self.draining || self.conn.is_closing()) && self.routes.is_empty()
    }

    /// The stream no longer routes here; its last one leaving starts the
    /// idle time.
    pub(super) fn forget(&mut self, stream: u32) {
        if self.routes.remove(&stream).is_some() && self.routes.is_empty() {
            self.idle_since = Some(Instant::now());
        }
    }
}
