//! The shard's side requests, the ones no client stream carries upstream: request copies (`request_mirror_policies`, fed by the streams they copy in `streams::mirror`) and filters' calls (`call`), in one table, sent by one task per shard on their cluster's pools.
//!
//! A copy is fire and forget: its answer is read and dropped, its end
//! counted. A call's answer (head, bounded body, trailers) goes to the
//! filter that made it.
//!
//! A copy streams as Envoy's does: its head leaves with the request's,
//! its body chunk by chunk (shared `Bytes`, not copied). Unlike Envoy's,
//! it never holds the request back: a copy whose unsent body passes its
//! bound (a mirror slower than the client; `streams::mirror` sets it) is
//! abandoned, not waited for. Bounds: at most [`MAX_SHADOWS`] copies and
//! [`MAX_SHADOW_BYTES`] of unsent body per shard; a copy lives at most
//! its route's timeout (or [`SHADOW_TIMEOUT_CAP`]) from the request's end.

use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::rc::Rc;
use std::task::Poll;
use std::time::{Duration, Instant};

use ahash::AHashMap;
use engine::outlier::CallResult;
use engine::HostId;
use glommio::timer::Timer;
use h2wire::conn::ClientEvent;

use super::body::{drain, Gone, Item, ItemQueue};
use super::inbox::{Delivered, Deliveries};
use super::pool::{Acquire, Pool, PoolRef, UpRef};
use super::WireShard;
use crate::http_filter::call::CallFailure;

mod call;
use call::Call;

/// Copies in flight on one shard, at most.
pub const MAX_SHADOWS: usize = 1024;
/// Unsent body bytes those copies hold, at most.
pub const MAX_SHADOW_BYTES: usize = 64 << 20;
/// How long a copy may take after its request's end when its route has
/// no timeout.
pub const SHADOW_TIMEOUT_CAP: Duration = Duration::from_secs(60);

/// How long a copy may take once its request ended: its route's
/// timeout, at most [`SHADOW_TIMEOUT_CAP`].
fn shadow_timeout(route: Option<Duration>) -> Duration {
    route.unwrap_or(SHADOW_TIMEOUT_CAP).min(SHADOW_TIMEOUT_CAP)
}

/// A field of a copy's head: name, value, never indexed (HPACK).
pub(crate) type SideField = (Box<[u8]>, Box<[u8]>, bool);

/// A request head as it goes to the primary, owned, with the copy's host.
pub(crate) struct SideHead {
    pub method: Box<[u8]>,
    pub authority: Box<[u8]>,
    pub path: Box<[u8]>,
    pub fields: Vec<SideField>,
    pub bodyless: bool,
}

/// How a side request ended.
enum Ended {
    /// Its answer came whole (whatever its status).
    Answered,
    Failed(CallResult),
    /// The cluster's circuit breakers refused it: not the host's doing.
    Refused,
    TimedOut,
    /// Its request's stream ended before the request did, or the copy
    /// fell behind past its bound, or the call's caller cancelled it.
    Abandoned,
    /// A call's answer body passed its bound.
    TooLarge,
}

/// Where a copy is.
enum Stage {
    /// Handed over; the task picks its host and opens its stream.
    New { cluster: Box<str> },
    /// Waiting for room in its host's pool, or open there.
    Sent {
        pool: PoolRef,
        host: HostId,
        up: Option<UpRef>,
    },
}

/// One copy.
struct SideRequest {
    stage: Stage,
    /// Its head, until it goes out.
    head: Option<SideHead>,
    /// Its body (and trailers) not yet sent, and their bytes.
    body: ItemQueue,
    unsent: usize,
    /// The most `unsent` may be.
    limit: usize,
    /// Its route's timeout, which runs from the request's end.
    timeout: Option<Duration>,
    /// Set when the request ended.
    deadline: Option<Instant>,
    /// Its answer's status, once its head came.
    status: Option<u16>,
    /// In the task's `due` list.
    due: bool,
    /// To end at the task's next turn, and why.
    ending: Option<Ended>,
    /// A call's answer so far and its caller (`None`: a copy).
    call: Option<Box<Call>>,
}

/// The shard's copies, and the task that sends them.
#[derive(Default)]
pub(crate) struct SideRequests {
    live: AHashMap<u32, SideRequest>,
    /// Copies with something for the task to do: new, ending, fed.
    due: VecDeque<u32>,
    next: u32,
    /// Copies' unsent body bytes.
    bytes: usize,
    /// Calls' unsent body bytes and the answer bytes they keep.
    call_bytes: usize,
    /// How many of `live` are copies (the rest are calls).
    copies: usize,
    /// The task's inbox, while it runs.
    inbox: Option<usize>,
}

impl SideRequests {
    /// Takes `id` out of the table, with its bytes and count.
    fn remove(&mut self, id: u32) -> Option<SideRequest> {
        let s = self.live.remove(&id)?;
        match &s.call {
            Some(call) => self.call_bytes -= s.unsent + call.kept(),
            None => {
                self.bytes -= s.unsent;
                self.copies -= 1;
            }
        }
        Some(s)
    }

    /// A number no live request has.
    fn next_id(&mut self) -> u32 {
        loop {
            let id = self.next;
            self.next = self.next.wrapping_add(1);
            if !self.live.contains_key(&id) {
                return id;
            }
        }
    }
}

impl WireShard {
    /// A new copy of a request whose head is `head`, to `cluster`; its
    /// number, for its body to follow, or `None` past the shard's bounds.
    pub(crate) fn mirror_open(
        self: &Rc<Self>,
        cluster: &str,
        head: SideHead,
        limit: usize,
        timeout: Option<Duration>,
    ) -> Option<u32> {
        let mut m = self.side.borrow_mut();
        if m.copies >= MAX_SHADOWS {
            self.shard.stats.mirror.overflow.inc();
            return None;
        }
        let id = m.next_id();
        m.copies += 1;
        // A request without a body is whole already: its timeout runs.
        let deadline = head
            .bodyless
            .then(|| Instant::now() + shadow_timeout(timeout));
        m.live.insert(
            id,
            SideRequest {
                stage: Stage::New {
                    cluster: cluster.into(),
                },
                head: Some(head),
                body: ItemQueue::default(),
                unsent: 0,
                limit,
                timeout,
                deadline,
                status: None,
                due: false,
                ending: None,
                call: None,
            },
        );
        drop(m);
        self.side_due(id);
        Some(id)
    }

    /// More of copy `id`'s body (`end`: the request is whole); a copy that
    /// falls behind past its bound, or the shard's, is abandoned.
    pub(crate) fn mirror_feed(self: &Rc<Self>, id: u32, item: Item, end: bool) {
        let mut m = self.side.borrow_mut();
        let bytes = m.bytes;
        let Some(s) = m.live.get_mut(&id).filter(|s| s.ending.is_none()) else {
            return;
        };
        let len = match &item {
            Item::Data { data, .. } => data.len(),
            Item::Trailers(_) => 0,
        };
        if s.unsent + len > s.limit || bytes + len > MAX_SHADOW_BYTES {
            s.ending = Some(Ended::Abandoned);
            self.shard.stats.mirror.backlog_overflow.inc();
        } else {
            s.unsent += len;
            s.body.push_back(item);
            if end {
                s.deadline = Some(Instant::now() + shadow_timeout(s.timeout));
            }
            m.bytes += len;
        }
        drop(m);
        self.side_due(id);
    }

    /// Copy `id`'s request will not end: its stream is gone.
    pub(crate) fn mirror_abandon(self: &Rc<Self>, id: u32) {
        let mut m = self.side.borrow_mut();
        let Some(s) = m.live.get_mut(&id).filter(|s| s.ending.is_none()) else {
            return;
        };
        s.ending = Some(Ended::Abandoned);
        drop(m);
        self.shard.stats.mirror.abandoned.inc();
        self.side_due(id);
    }

    /// Side request `id` has something for the task to do: the task is
    /// woken, or started.
    fn side_due(self: &Rc<Self>, id: u32) {
        let mut m = self.side.borrow_mut();
        match m.live.get_mut(&id) {
            Some(s) if !s.due => s.due = true,
            _ => return,
        }
        m.due.push_back(id);
        match m.inbox {
            Some(inbox) => {
                drop(m);
                self.inboxes.wake_each([inbox]);
            }
            None => {
                let inbox = self.inboxes.open();
                m.inbox = Some(inbox);
                drop(m);
                glommio::spawn_local(run(Rc::clone(self), inbox)).detach();
            }
        }
    }
}

/// The task's state between turns.
struct Task {
    wire: Rc<WireShard>,
    inbox: usize,
    /// Copies ended this turn whose events may still come: their
    /// response windows are given back, a pool's room passed on.
    ended: Vec<(u32, PoolRef, Option<UpRef>)>,
    /// Upstream connections given output this turn.
    touched: Vec<(PoolRef, usize)>,
}

/// The task: starts, feeds and ends copies as they come due, follows
/// their deliveries and deadlines; ends when no copy is left (the next
/// one starts it again).
async fn run(wire: Rc<WireShard>, inbox: usize) {
    let mut t = Task {
        wire: Rc::clone(&wire),
        inbox,
        ended: Vec::new(),
        touched: Vec::new(),
    };
    let mut batch = Deliveries::new();
    let mut timer: Option<(Instant, Pin<Box<Timer>>)> = None;
    loop {
        loop {
            let next = wire.side.borrow_mut().due.pop_front();
            match next {
                Some(id) => t.visit(id),
                None => break,
            }
        }
        wire.inboxes.swap_items(inbox, &mut batch);
        for (id, what) in batch.drain(..) {
            t.on_delivery(id, what);
        }
        t.ended.clear();
        t.expire(Instant::now());
        // A wake with nothing delivered may be a connection's window or
        // write buffer opening again: every body held back tries again.
        t.send_held();
        t.flush();
        let (idle, due) = {
            let m = wire.side.borrow();
            if !m.due.is_empty() {
                continue;
            }
            let due = m.live.values().filter_map(|s| s.deadline).min();
            (m.live.is_empty(), due)
        };
        if idle {
            // Nothing is routed to the inbox any more: what is left in it
            // (nothing) is given back as any delivery is.
            wire.side.borrow_mut().inbox = None;
            if let Some(mut left) = wire.inboxes.close(inbox) {
                for (id, what) in left.drain(..) {
                    t.on_delivery(id, what);
                }
            }
            return;
        }
        if timer.as_ref().map(|(at, _)| *at) != due {
            let now = Instant::now();
            timer = due.map(|at| (at, Box::pin(Timer::new(at.saturating_duration_since(now)))));
        }
        // Polled again after parking: something woke the task, with or
        // without a delivery (a connection's window or write buffer
        // opening again wakes with none), and the turn runs.
        let mut parked = false;
        poll_fn(|cx| {
            if parked || !wire.side.borrow().due.is_empty() {
                return Poll::Ready(());
            }
            if wire.inboxes.poll(inbox, cx).is_ready() {
                return Poll::Ready(());
            }
            let fired = timer
                .as_mut()
                .is_some_and(|(_, tm)| tm.as_mut().poll(cx).is_ready());
            if fired {
                timer = None;
                return Poll::Ready(());
            }
            parked = true;
            Poll::Pending
        })
        .await;
    }
}

impl Task {
    /// A copy came due: it ends, starts, or sends what body it has.
    fn visit(&mut self, id: u32) {
        let (ending, new) = {
            let mut m = self.wire.side.borrow_mut();
            let Some(s) = m.live.get_mut(&id) else { return };
            s.due = false;
            (s.ending.take(), matches!(s.stage, Stage::New { .. }))
        };
        if let Some(how) = ending {
            return self.end(id, how);
        }
        if new {
            self.start(id);
        }
        self.send_body(id);
    }

    /// A new copy or call: its host (the cluster's policy, as the
    /// snapshot is now), within the cluster's circuit breakers, then its
    /// stream.
    fn start(&mut self, id: u32) {
        let wire = Rc::clone(&self.wire);
        let shard = &wire.shard;
        let (cluster_name, copy) = match wire.side.borrow().live.get(&id) {
            Some(SideRequest {
                stage: Stage::New { cluster },
                call,
                ..
            }) => (cluster.clone(), call.is_none()),
            _ => return,
        };
        // A copy's ends are the mirror's stats; a call's, its filter's.
        let stats = copy.then_some(&shard.stats.mirror);
        let snap = shard.snapshot();
        let Some(cluster) = snap.cluster(&cluster_name) else {
            if let Some(stats) = stats {
                stats.unknown_cluster.inc();
            }
            return self.forget(id, CallFailure::UnknownCluster);
        };
        let in_flight = |h| wire.in_flight(h);
        let Ok(host) = shard.choose_host(cluster, None, in_flight, || None) else {
            if let Some(stats) = stats {
                stats.failed.inc();
            }
            return self.forget(id, CallFailure::NoHealthyHost);
        };
        let pool = match wire.pool(host, cluster) {
            Some(pool) if pool.borrow().budget.try_request() => pool,
            _ => {
                shard.stats.hosts.host(host.id).rq_pending_overflow.inc();
                if let Some(stats) = stats {
                    stats.overflow.inc();
                }
                return self.forget(id, CallFailure::Overflow);
            }
        };
        pool.borrow_mut().in_flight += 1;
        let host_stats = shard.stats.hosts.host(host.id);
        host_stats.rq_total.inc();
        host_stats.rq_active.inc();
        if let Some(stats) = stats {
            stats.rq_total.inc();
            stats.active.inc();
        }
        if let Some(s) = wire.side.borrow_mut().live.get_mut(&id) {
            s.stage = Stage::Sent {
                pool,
                host: host.id,
                up: None,
            };
        }
        self.open(id);
    }

    /// Opens the copy's stream on its pool, or waits for room there.
    fn open(&mut self, id: u32) {
        let (pool, head) = {
            let mut m = self.wire.side.borrow_mut();
            let Some(s) = m.live.get_mut(&id) else { return };
            let Stage::Sent { pool, up: None, .. } = &s.stage else {
                return;
            };
            (Rc::clone(pool), s.head.take())
        };
        let Some(head) = head else { return };
        let slot = match Pool::acquire(&pool, self.inbox, id) {
            Acquire::Ready(slot) => slot,
            Acquire::Wait => {
                self.put_back(id, head);
                return;
            }
            Acquire::Failed => return self.end(id, Ended::Failed(CallResult::ConnectFailure)),
            Acquire::Overflow => {
                if self.is_copy(id) {
                    self.wire.shard.stats.mirror.overflow.inc();
                }
                return self.end(id, Ended::Refused);
            }
        };
        let up = {
            let mut p = pool.borrow_mut();
            let scheme = p.scheme();
            let fields = head
                .fields
                .iter()
                .map(|(n, v, never)| (&n[..], &v[..], *never));
            let sent = p.conn_at(slot).and_then(|conn| {
                let (method, path) = (&head.method, &head.path);
                conn.send_request(method, scheme, &head.authority, path, fields, head.bodyless)
                    .ok()
            });
            sent.map(|stream| p.route(slot, stream, self.inbox, id))
        };
        let Some(up) = up else {
            return self.end(id, Ended::Failed(CallResult::ConnectFailure));
        };
        if let Some(Stage::Sent { up: at, .. }) = self
            .wire
            .side
            .borrow_mut()
            .live
            .get_mut(&id)
            .map(|s| &mut s.stage)
        {
            *at = Some(up);
        }
        super::streams::touch(&mut self.touched, &pool, slot);
    }

    /// A head that waits for room in its pool.
    fn put_back(&self, id: u32, head: SideHead) {
        if let Some(s) = self.wire.side.borrow_mut().live.get_mut(&id) {
            s.head = Some(head);
        }
    }

    /// Sends what body the copy's windows and connection take.
    fn send_body(&mut self, id: u32) {
        let mut m = self.wire.side.borrow_mut();
        let SideRequests {
            live,
            bytes,
            call_bytes,
            ..
        } = &mut *m;
        let Some(s) = live.get_mut(&id) else { return };
        let Stage::Sent {
            pool, up: Some(up), ..
        } = &s.stage
        else {
            return;
        };
        if s.body.is_empty() {
            return;
        }
        let (pool, up) = (Rc::clone(pool), *up);
        let mut p = pool.borrow_mut();
        if !p.takes_request_data(up) {
            return;
        }
        let Some(conn) = p.conn(up) else { return };
        let d = drain(&mut s.body, conn, up.stream, &mut Gone, 0);
        p.sent_request_data(up, d.moved);
        drop(p);
        s.unsent -= d.moved as usize;
        match s.call.is_some() {
            true => *call_bytes -= d.moved as usize,
            false => *bytes -= d.moved as usize,
        }
        drop(m);
        if d.moved > 0 || d.ended {
            super::streams::touch(&mut self.touched, &pool, up.slot);
        }
    }

    /// What the copy's upstream connection delivered.
    fn on_delivery(&mut self, id: u32, what: Delivered) {
        let sent = match self.wire.side.borrow().live.get(&id).map(|s| &s.stage) {
            Some(Stage::Sent { pool, host, up }) => Some((Rc::clone(pool), *host, *up)),
            _ => None,
        };
        let Some((pool, host, up)) = sent else {
            return self.give_back(id, what);
        };
        match what {
            Delivered::Retry => {
                self.open(id);
                self.send_body(id);
            }
            Delivered::ConnectFailed => self.end(id, Ended::Failed(CallResult::ConnectFailure)),
            Delivered::ConnectionLost => self.end(id, Ended::Failed(CallResult::Reset)),
            Delivered::Resume(_) | Delivered::OverloadReset => {}
            Delivered::Event(ev) => {
                if let Some(up) = up {
                    self.on_event(id, (pool, host, up), ev);
                }
            }
        }
    }

    fn on_event(&mut self, id: u32, (pool, host, up): (PoolRef, HostId, UpRef), ev: ClientEvent) {
        let end = match ev {
            ClientEvent::Response {
                head,
                informational,
                end_stream,
                ..
            } => {
                if !informational {
                    let status = head
                        .get(b":status")
                        .and_then(|v| std::str::from_utf8(v).ok()?.parse::<u16>().ok())
                        .unwrap_or(0);
                    let stats = &self.wire.shard.stats;
                    stats.hosts.host(host).responses.record(status);
                    if let Some(s) = self.wire.side.borrow_mut().live.get_mut(&id) {
                        s.status = Some(status);
                    }
                }
                // A call keeps its answer's head; a copy's is dropped.
                let head = match self.call_of(id) {
                    Some(mut call) if !informational => call.keep_head(head),
                    _ => Some(head),
                };
                if let (Some(head), Some(conn)) = (head, pool.borrow_mut().conn(up)) {
                    conn.recycle(head);
                }
                end_stream.then_some(Ended::Answered)
            }
            ClientEvent::Data {
                data, end_stream, ..
            } => {
                if let Some(conn) = pool.borrow_mut().conn(up) {
                    conn.release(up.stream, data.len() as u32);
                }
                super::streams::touch(&mut self.touched, &pool, up.slot);
                let kept = self.keep_call_body(id, &data);
                match (kept, end_stream) {
                    (false, _) => Some(Ended::TooLarge),
                    (true, end) => end.then_some(Ended::Answered),
                }
            }
            ClientEvent::Trailers { fields, .. } => {
                let fields = match self.call_of(id) {
                    Some(mut call) => call.keep_trailers(fields),
                    None => Some(fields),
                };
                if let (Some(fields), Some(conn)) = (fields, pool.borrow_mut().conn(up)) {
                    conn.recycle(fields);
                }
                Some(Ended::Answered)
            }
            // After its answer's head, a reset only cuts what is left of
            // an answer nobody reads (`end` counts the answer).
            ClientEvent::Reset { .. }
            | ClientEvent::Broken { .. }
            | ClientEvent::TooLarge { .. } => Some(Ended::Failed(CallResult::Reset)),
            ClientEvent::WindowOpen { .. } => {
                self.send_body(id);
                None
            }
            _ => None,
        };
        if let Some(end) = end {
            self.end(id, end);
        }
    }

    /// Every copy whose body waits on an open stream tries to send it.
    fn send_held(&mut self) {
        let held: Vec<u32> = self
            .wire
            .side
            .borrow()
            .live
            .iter()
            .filter(|(_, s)| {
                !s.body.is_empty() && matches!(s.stage, Stage::Sent { up: Some(_), .. })
            })
            .map(|(&id, _)| id)
            .collect();
        for id in held {
            self.send_body(id);
        }
    }

    /// A delivery for a copy already ended: a body's window goes back, a
    /// pool's room goes to its next waiter.
    fn give_back(&mut self, id: u32, what: Delivered) {
        let Some((pool, up)) = self
            .ended
            .iter()
            .find(|(e, _, _)| *e == id)
            .map(|(_, p, up)| (Rc::clone(p), *up))
        else {
            return;
        };
        match (what, up) {
            (Delivered::Event(ClientEvent::Data { data, .. }), Some(up)) => {
                if let Some(conn) = pool.borrow_mut().conn(up) {
                    conn.release(up.stream, data.len() as u32);
                }
                super::streams::touch(&mut self.touched, &pool, up.slot);
            }
            (Delivered::Retry, None) => pool.borrow_mut().pass_room(),
            _ => {}
        }
    }

    /// Ends copies past their deadline.
    fn expire(&mut self, now: Instant) {
        let due: Vec<u32> = self
            .wire
            .side
            .borrow()
            .live
            .iter()
            .filter(|(_, s)| s.deadline.is_some_and(|d| now >= d))
            .map(|(&id, _)| id)
            .collect();
        for id in due {
            self.end(id, Ended::TimedOut);
        }
    }

    /// Whether `id` is a copy (not a call).
    fn is_copy(&self, id: u32) -> bool {
        let m = self.wire.side.borrow();
        m.live.get(&id).is_some_and(|s| s.call.is_none())
    }

    /// Forgets a copy or call that never got a host; a call's caller
    /// learns `why`.
    fn forget(&mut self, id: u32, why: CallFailure) {
        let s = self.wire.side.borrow_mut().remove(id);
        if let Some(call) = s.and_then(|s| s.call) {
            call.fail(why);
        }
    }

    /// Ends a copy: its stream left (cancelled unless it ended whole),
    /// what it held given back, its end counted, and one outcome for its
    /// host's outlier detection: its answer's status if one came, else
    /// its failure.
    fn end(&mut self, id: u32, how: Ended) {
        let Some(mut s) = self.wire.side.borrow_mut().remove(id) else {
            return;
        };
        let call = s.call.take();
        let stats = &self.wire.shard.stats;
        let Stage::Sent { pool, host, up } = s.stage else {
            if let Some(call) = call {
                call.end(how, None);
            }
            return;
        };
        {
            let mut p = pool.borrow_mut();
            match up {
                Some(up) => {
                    // Its request went out whole (its deadline is set once
                    // the request's end was fed; the body queue then empty
                    // means the end was sent).
                    let whole =
                        matches!(how, Ended::Answered) && s.deadline.is_some() && s.body.is_empty();
                    if !whole {
                        p.cancel(up, s.status.is_some(), 0);
                    }
                    p.unroute(up);
                }
                None => p.cancel_wait(self.inbox, id),
            }
            p.in_flight = p.in_flight.saturating_sub(1);
            p.budget.end_request();
        }
        self.ended.push((id, Rc::clone(&pool), up));
        if let Some(up) = up {
            super::streams::touch(&mut self.touched, &pool, up.slot);
        }
        let host_stats = stats.hosts.host(host);
        host_stats.rq_active.dec();
        let copy = call.is_none().then_some(&stats.mirror);
        if let Some(copy) = copy {
            copy.active.dec();
        }
        let failure = match how {
            // Counted where abandoned or refused.
            Ended::Answered | Ended::Abandoned | Ended::Refused => None,
            Ended::Failed(result) => {
                if let (Some(copy), None) = (copy, s.status) {
                    copy.failed.inc();
                }
                Some(result)
            }
            // The host answered: too much, which is not its failure.
            Ended::TooLarge => None,
            Ended::TimedOut => {
                if let Some(copy) = copy {
                    copy.timeout.inc();
                }
                host_stats.rq_timeout.inc();
                Some(CallResult::Timeout)
            }
        };
        let outcome = match (s.status, failure) {
            (Some(status), _) => Some(CallResult::Status(status)),
            (None, failure) => failure,
        };
        if let Some(result) = outcome {
            self.wire.record_outlier(&pool, result);
        }
        // Last: the caller may make another call at once.
        if let Some(call) = call {
            call.end(how, s.status);
        }
    }

    /// Wakes the upstream tasks given output.
    fn flush(&mut self) {
        for (pool, slot) in self.touched.drain(..) {
            pool.borrow_mut().flush(slot);
        }
    }
}
