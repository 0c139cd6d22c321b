//! The data path on our own HTTP/2 codec (`h2wire`): no task, lock or reference count per stream.
//!
//! The shape (docs/h2-codec.md, layer 4):
//!
//! - [`accept`] spawns a task per accepted connection;
//! - one task per downstream connection ([`downstream`]) owns its socket
//!   and its `ServerConn`, and runs the request phases for its streams
//!   ([`stream`]) as events arrive;
//! - one task per upstream connection ([`pool`]) owns its socket and its
//!   `ClientConn`; the connections of one host form a shard-local
//!   [`pool::Pool`] that downstream tasks open streams on directly;
//! - an upstream task routes what its connection received into the
//!   [`Inbox`] of the downstream connection owning the stream, and wakes
//!   it; a downstream task that gave an upstream connection output wakes
//!   that connection's task. glommio runs every ready task before it polls
//!   the ring again, so one send carries all the requests the clients made
//!   in a turn.
//!

pub mod accept;
pub mod downstream;
pub mod forward;
mod outbuf;
pub mod pool;
mod readbuf;
mod stream;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::task::{Context, Waker};

use h2wire::conn::ClientEvent;
use slab::Slab;

pub use readbuf::ReadBuf;

/// What an upstream connection hands a downstream connection, for one of
/// its streams.
pub(crate) enum Delivered {
    /// An event of the upstream stream.
    Event(ClientEvent),
    /// The pool has room again: try to open the upstream stream now.
    Retry,
    /// The connection the stream was opened on could not be established.
    ConnectFailed,
    /// The connection the stream was on closed or failed before the
    /// stream ended.
    ConnectionLost,
}

/// Deliveries for one downstream connection, and its parked task.
#[derive(Default)]
pub(crate) struct Inbox {
    /// (downstream stream id, what came).
    pub items: VecDeque<(u32, Delivered)>,
    pub waker: Option<Waker>,
}

/// What the wire tasks of one shard share.
#[derive(Default)]
pub struct WireShard {
    pub(crate) inboxes: RefCell<Slab<Inbox>>,
    /// Upstream pools indexed by `HostId`.
    pub(crate) pools: RefCell<Vec<Option<pool::PoolRef>>>,
}

impl WireShard {
    /// Streams in flight to the host of `index` (least request, A48).
    pub fn in_flight(&self, index: usize) -> u32 {
        self.pools
            .borrow()
            .get(index)
            .and_then(Option::as_ref)
            .map_or(0, |p| p.borrow().in_flight)
    }

    /// Hands `what` to stream `stream` of the downstream connection whose
    /// inbox is `inbox`, and wakes its task. False if that connection is
    /// gone (the caller gives back what `what` holds).
    pub(crate) fn deliver(
        &self,
        inbox: usize,
        stream: u32,
        what: Delivered,
    ) -> Result<(), Delivered> {
        let mut inboxes = self.inboxes.borrow_mut();
        match inboxes.get_mut(inbox) {
            Some(b) => {
                b.items.push_back((stream, what));
                wake(&mut b.waker);
                Ok(())
            }
            None => Err(what),
        }
    }

    /// Drops the pools of hosts that left (their connections close once
    /// their streams end).
    pub fn drop_pool(&self, index: usize) {
        if let Some(slot) = self.pools.borrow_mut().get_mut(index) {
            if let Some(p) = slot.take() {
                p.borrow_mut().retire();
            }
        }
    }
}

/// Stores `cx`'s waker unless the one there already wakes the same task
/// (a clone is a reference count).
pub(crate) fn park(slot: &mut Option<Waker>, cx: &Context<'_>) {
    match slot {
        Some(w) if w.will_wake(cx.waker()) => {}
        _ => *slot = Some(cx.waker().clone()),
    }
}

pub(crate) fn wake(slot: &mut Option<Waker>) {
    if let Some(w) = slot.take() {
        w.wake();
    }
}

/// Keeps an `Rc` type name short where pools are passed around.
pub(crate) type Shared<T> = Rc<RefCell<T>>;
