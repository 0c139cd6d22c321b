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
            registered: RefCell::new(None),
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
    /// The waker in the signal's map for this subscription: a connection
    /// polls its subscriptions at every wake-up, and the same task's poll
    /// needs no map lookup. The entry leaves the map only when the signal
    /// fires (then every poll answers `Ready` first) or on drop.
    registered: RefCell<Option<Waker>>,
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
        let mut registered = self.registered.borrow_mut();
        if registered.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            return Poll::Pending;
        }
        // A first poll, or another task's: the map's entry follows.
        *registered = Some(cx.waker().clone());
        inner
            .wakers
            .borrow_mut()
            .insert(self.id, cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.signal.0.wakers.borrow_mut().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn counting() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        (count.clone(), Waker::from(count))
    }

    #[test]
    fn firing_wakes_the_waker_of_the_latest_poll() {
        let signal = Signal::new();
        let sub = signal.subscribe();
        let (first, w1) = counting();
        let (second, w2) = counting();
        for _ in 0..3 {
            assert!(sub.poll_fired(&mut Context::from_waker(&w1)).is_pending());
        }
        // Polled by another task now: that one is woken, not the first.
        assert!(sub.poll_fired(&mut Context::from_waker(&w2)).is_pending());
        signal.fire();
        assert_eq!(first.0.load(Ordering::Relaxed), 0);
        assert_eq!(second.0.load(Ordering::Relaxed), 1);
        assert!(sub.poll_fired(&mut Context::from_waker(&w2)).is_ready());
        assert!(signal
            .subscribe()
            .poll_fired(&mut Context::from_waker(&w1))
            .is_ready());
    }

    #[test]
    fn a_dropped_subscription_leaves_no_waker() {
        let signal = Signal::new();
        let (count, w) = counting();
        let kept = signal.subscribe();
        let dropped = signal.subscribe();
        assert!(kept.poll_fired(&mut Context::from_waker(&w)).is_pending());
        assert!(dropped
            .poll_fired(&mut Context::from_waker(&w))
            .is_pending());
        drop(dropped);
        assert_eq!(signal.0.wakers.borrow().len(), 1);
        signal.fire();
        assert_eq!(count.0.load(Ordering::Relaxed), 1);
    }
}
