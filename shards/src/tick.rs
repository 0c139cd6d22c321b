//! A shard-wide coarse clock tick, so that short-lived streams never touch
//! the reactor's timer tree.
//!
//! Every stream needs a watchdog (route timeout, stream idle timeout), but
//! almost every stream ends within milliseconds. Arming a precise glommio
//! timer per stream costs a tree insert and remove each time; instead a
//! stream first waits for the shard's next [`TICK`] (a slab insert), and only
//! a stream still alive after that arms a precise timer.

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use slab::Slab;

/// Granularity of the coarse tick.
pub const TICK: Duration = Duration::from_millis(20);

#[derive(Default)]
struct Inner {
    generation: Cell<u64>,
    waiters: RefCell<Slab<Waker>>,
    /// Wakes the ticking task when the first waiter arrives.
    idle_waker: RefCell<Option<Waker>>,
}

/// Cheap to clone; lives on one shard.
#[derive(Clone, Default)]
pub struct Ticker(Rc<Inner>);

impl Ticker {
    pub fn new() -> Self {
        Self::default()
    }

    /// The task that drives the ticks; runs until the executor stops. It
    /// sleeps while nobody waits, so an idle shard does not wake up.
    pub async fn run(self) {
        loop {
            poll_fn(|cx| {
                if self.0.waiters.borrow().is_empty() {
                    *self.0.idle_waker.borrow_mut() = Some(cx.waker().clone());
                    Poll::Pending
                } else {
                    Poll::Ready(())
                }
            })
            .await;
            glommio::timer::sleep(TICK).await;
            self.0.generation.set(self.0.generation.get() + 1);
            let waiters = std::mem::take(&mut *self.0.waiters.borrow_mut());
            for (_, w) in waiters {
                w.wake();
            }
        }
    }

    /// Resolves at the next tick: between 0 and [`TICK`] from now.
    pub fn next(&self) -> NextTick<'_> {
        NextTick {
            ticker: self,
            generation: self.0.generation.get(),
            slot: None,
        }
    }
}

/// Future of [`Ticker::next`]; leaves no waker behind when dropped early.
pub struct NextTick<'a> {
    ticker: &'a Ticker,
    /// The tick generation this wait started in.
    generation: u64,
    /// Our key in the waiter slab of that generation.
    slot: Option<usize>,
}

impl Future for NextTick<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let inner = &self.ticker.0;
        if inner.generation.get() != self.generation {
            self.slot = None; // the tick emptied the slab
            return Poll::Ready(());
        }
        let mut waiters = inner.waiters.borrow_mut();
        match self.slot {
            Some(k) => waiters[k].clone_from(cx.waker()),
            None => {
                let k = waiters.insert(cx.waker().clone());
                drop(waiters);
                self.slot = Some(k);
                if let Some(w) = inner.idle_waker.borrow_mut().take() {
                    w.wake();
                }
            }
        }
        Poll::Pending
    }
}

impl Drop for NextTick<'_> {
    fn drop(&mut self) {
        // Our key is only ours while the generation has not moved on.
        if let Some(k) = self.slot {
            if self.ticker.0.generation.get() == self.generation {
                self.ticker.0.waiters.borrow_mut().remove(k);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn run<F: Future<Output = ()> + 'static>(f: impl FnOnce() -> F + Send + 'static) {
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .io_memory(1 << 20)
            .spawn(f)
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn waits_one_tick_and_leaves_nothing_behind() {
        run(|| async {
            let t = Ticker::new();
            let _task = glommio::spawn_local(t.clone().run());
            // A waiter that goes away early removes its waker.
            {
                let mut early = Box::pin(t.next());
                assert!(futures_lite::future::poll_once(&mut early).await.is_none());
                assert_eq!(t.0.waiters.borrow().len(), 1);
            }
            assert!(t.0.waiters.borrow().is_empty());
            let start = Instant::now();
            t.next().await;
            t.next().await;
            let took = start.elapsed();
            assert!(took >= TICK && took < TICK * 10, "two ticks took {took:?}");
            assert!(t.0.waiters.borrow().is_empty());
        });
    }

    #[test]
    fn many_waiters_all_wake_on_one_tick() {
        run(|| async {
            let t = Ticker::new();
            let _task = glommio::spawn_local(t.clone().run());
            let tasks: Vec<_> = (0..100)
                .map(|_| {
                    let t = t.clone();
                    glommio::spawn_local(async move { t.next().await })
                })
                .collect();
            for task in tasks {
                task.await;
            }
            assert!(t.0.waiters.borrow().is_empty());
        });
    }
}
