//! How upstream connections hand downstream connections what came for their streams: one inbox per downstream connection, and the wakers of parked tasks.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::task::{Context, Poll, Waker};

use h2wire::conn::ClientEvent;
use slab::Slab;

use crate::http_filter::{ResumeSink, Resumed};

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
    /// A filter that paused the stream is done (`http_filter::Resume`):
    /// the pause's ticket and how it ended (boxed: rare).
    Resume(Box<(u64, Resumed)>),
    /// The overload manager's `reset_high_memory_stream` picked the stream
    /// (`accounts`): it is reset. Keyed by the downstream id.
    OverloadReset,
}

/// Deliveries in arrival order: (downstream stream id, what came).
pub(crate) type Deliveries = VecDeque<(u32, Delivered)>;

/// Deliveries for one downstream connection, and its parked task.
#[derive(Default)]
struct Inbox {
    items: Deliveries,
    waker: Option<Waker>,
}

/// The inboxes of one shard's downstream connections, by the number each
/// got when its connection opened it.
#[derive(Default)]
pub(crate) struct Inboxes {
    slab: RefCell<Slab<Inbox>>,
    /// The last pause ticket handed out on this shard.
    tickets: Cell<u64>,
}

impl Inboxes {
    /// A new, empty inbox: its number.
    pub fn open(&self) -> usize {
        self.slab.borrow_mut().insert(Inbox::default())
    }

    /// Removes inbox `inbox` (its connection is over) and returns what was
    /// still in it, for the caller to give back.
    pub fn close(&self, inbox: usize) -> Option<Deliveries> {
        self.slab.borrow_mut().try_remove(inbox).map(|b| b.items)
    }

    /// Swaps what came for `inbox` with `batch` (empty): both keep their
    /// allocations from turn to turn.
    pub fn swap_items(&self, inbox: usize, batch: &mut Deliveries) {
        if let Some(b) = self.slab.borrow_mut().get_mut(inbox) {
            std::mem::swap(&mut b.items, batch);
        }
    }

    /// `Ready(true)` when deliveries wait in `inbox`; else parks the task
    /// of `cx` there. `Ready(false)`: the inbox is gone.
    pub fn poll(&self, inbox: usize, cx: &Context<'_>) -> Poll<bool> {
        match self.slab.borrow_mut().get_mut(inbox) {
            Some(b) if !b.items.is_empty() => Poll::Ready(true),
            Some(b) => {
                park(&mut b.waker, cx);
                Poll::Pending
            }
            None => Poll::Ready(false),
        }
    }

    /// Hands `what` to stream `stream` of the downstream connection whose
    /// inbox is `inbox`, and wakes its task. `Err` if that connection is
    /// gone (the caller gives back what `what` holds).
    pub fn deliver(&self, inbox: usize, stream: u32, what: Delivered) -> Result<(), Delivered> {
        match self.slab.borrow_mut().get_mut(inbox) {
            Some(b) => {
                b.items.push_back((stream, what));
                wake(&mut b.waker);
                Ok(())
            }
            None => Err(what),
        }
    }

    /// Wakes the tasks of `inboxes`, with nothing delivered (an upstream
    /// connection window opened: their streams may send again).
    pub fn wake_each(&self, inboxes: impl IntoIterator<Item = usize>) {
        let mut slab = self.slab.borrow_mut();
        for inbox in inboxes {
            if let Some(b) = slab.get_mut(inbox) {
                wake(&mut b.waker);
            }
        }
    }
}

/// A paused stream's resume arrives through its connection's inbox, like
/// an upstream delivery: the connection's task runs the rest of the
/// stream's filters.
impl ResumeSink for Inboxes {
    fn ticket(&self) -> u64 {
        self.tickets.set(self.tickets.get() + 1);
        self.tickets.get()
    }

    fn resume(&self, inbox: usize, stream: u32, ticket: u64, outcome: Resumed) {
        let _ = self.deliver(
            inbox,
            stream,
            Delivered::Resume(Box::new((ticket, outcome))),
        );
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
