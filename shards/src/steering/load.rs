//! A data shard's side of steering: its connections counted in its slot of the load map, and the task that forgets picks that never became connections.

use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Duration;

use super::{bpf, Steering};

/// One data shard's slot in the load map. Used on that shard's thread
/// only: its open count has a single writer, so it is written with a
/// plain store, not a locked add.
#[derive(Clone)]
pub struct ShardLoad {
    steering: Arc<Steering>,
    shard: usize,
}

thread_local! {
    /// Whether this shard accepted a connection since [`forget_pending`]
    /// last looked, and the task waiting for one.
    static ACCEPTED: (Cell<bool>, RefCell<Option<Waker>>) =
        const { (Cell::new(false), RefCell::new(None)) };
}

impl ShardLoad {
    pub(super) fn new(steering: Arc<Steering>, shard: usize) -> Self {
        Self { steering, shard }
    }

    /// A connection was accepted: one more open, one fewer pending. Pair
    /// each with one [`Self::closed`].
    pub fn accepted(&self) {
        let load = &self.steering.load;
        let open = load.slot(self.shard, bpf::OPEN);
        open.store(open.load(Relaxed) + 1, Relaxed);
        // The program adds to `pending` from any CPU; take one away unless
        // none is left (a connection the kernel's hash picked).
        let _ = load
            .slot(self.shard, bpf::PICKED)
            .fetch_update(Relaxed, Relaxed, |p| p.checked_sub(1));
        ACCEPTED.with(|(seen, waiting)| {
            if !seen.replace(true) {
                if let Some(w) = waiting.borrow_mut().take() {
                    w.wake();
                }
            }
        });
    }

    /// A connection counted by [`Self::accepted`] closed.
    pub fn closed(&self) {
        let open = self.steering.load.slot(self.shard, bpf::OPEN);
        open.store(open.load(Relaxed).saturating_sub(1), Relaxed);
    }
}

/// Once a second while its shard accepts connections: forgets the shard's
/// pending picks, and tries again its sockets that wait to join their
/// group. Runs as a task of the shard for its life.
///
/// A SYN the program picked that never became a connection (a backlog
/// overflow, a SYN flood, a SYN cookie's ACK picked a second time) would
/// otherwise count against its shard for ever; a real one still pending
/// is counted again when accepted, as open. A shard that accepts nothing
/// does not wake up for this (an idle gateway does not wake at all): its
/// lost picks wait for its next connection, which comes once the others
/// have caught up with its score.
pub async fn forget_pending(load: ShardLoad) {
    loop {
        std::future::poll_fn(|cx| {
            ACCEPTED.with(|(seen, waiting)| {
                if seen.replace(false) {
                    Poll::Ready(())
                } else {
                    *waiting.borrow_mut() = Some(cx.waker().clone());
                    Poll::Pending
                }
            })
        })
        .await;
        glommio::timer::sleep(Duration::from_secs(1)).await;
        let steering = &load.steering;
        steering
            .load
            .slot(load.shard, bpf::PICKED)
            .store(0, Relaxed);
        steering.retry_waiting(load.shard);
    }
}
