//! A one-shot, shard-local broadcast ("drain now"). No locks: it never
//! leaves its shard.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use ahash::AHashMap;

#[derive(Default)]
struct Inner {
    fired: Cell<bool>,
    next_id: Cell<u64>,
    /// One slot per live [`Subscription`], so waiters that go away (closed
    /// connections) leave nothing behind.
    wakers: RefCell<AHashMap<u64, Waker>>,
}

/// Fires once; every subscriber then sees it fired.
#[derive(Clone, Default)]
pub struct Signal(Rc<Inner>);

impl Signal {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn fire(&self) {
        if !self.0.fired.replace(true) {
            let wakers = std::mem::take(&mut *self.0.wakers.borrow_mut());
            for (_, w) in wakers {
                w.wake();
            }
        }
    }

    pub fn is_fired(&self) -> bool {
        self.0.fired.get()
    }

    pub fn subscribe(&self) -> Subscription {
        let id = self.0.next_id.get();
        self.0.next_id.set(id + 1);
        Subscription {
            signal: self.clone(),
            id,
        }
    }

    pub async fn fired(&self) {
        let sub = self.subscribe();
        poll_fn(|cx| sub.poll_fired(cx)).await
    }
}

/// A waiter's registration; dropping it removes its waker.
pub struct Subscription {
    signal: Signal,
    id: u64,
}

impl Subscription {
    pub fn is_fired(&self) -> bool {
        self.signal.is_fired()
    }

    /// `Ready` once fired; otherwise remembers `cx`'s waker.
    pub fn poll_fired(&self, cx: &mut Context<'_>) -> Poll<()> {
        let inner = &self.signal.0;
        if inner.fired.get() {
            return Poll::Ready(());
        }
        let mut wakers = inner.wakers.borrow_mut();
        match wakers.get_mut(&self.id) {
            Some(w) if w.will_wake(cx.waker()) => {}
            Some(w) => *w = cx.waker().clone(),
            None => {
                wakers.insert(self.id, cx.waker().clone());
            }
        }
        Poll::Pending
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.signal.0.wakers.borrow_mut().remove(&self.id);
    }
}
