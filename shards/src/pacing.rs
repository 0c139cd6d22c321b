//! I/O batching of a busy data shard (`--io-batch-us`, `--io-batch-min-streams`): under load the shard polls its sockets at most every interval, so each poll carries more work.
//!
//! glommio polls the ring once per executor loop. A shard that keeps up
//! with its load loops often and finds little each time: under `-c16 -m32`
//! a loop carried about 7 proxied requests, one small read from the
//! backend and a `sendto` toward a client for every 3 responses. Kernel
//! work per socket operation (and on loopback, the peer's receive path)
//! then costs more than our own code does per request.
//!
//! This is the interrupt moderation of a network card, in user space:
//! while at least `min_streams` streams are in flight, the executor sleeps
//! out the rest of `interval` after a loop before it polls again (the
//! `poll-pacer` patch of `third_party/glommio`). Bytes wait in the socket
//! buffers meanwhile, so the next loop reads more per read and writes more
//! responses per write, and the clients and backend answer in larger
//! batches in turn. A shard whose loops take `interval` or longer (a
//! saturated core) never sleeps, and a quiet shard (fewer streams) wakes
//! at the first completion as before. The price is latency: up to
//! `interval` on each of a request's two socket reads in the proxy, while
//! at least `min_streams` streams are already queued.

use std::sync::Arc;
use std::time::Duration;

use crate::stats::ShardStats;

/// When a data shard batches its I/O polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacing {
    /// The least time between two polls while busy; zero turns batching
    /// off.
    pub interval: Duration,
    /// Downstream streams in flight on the shard from which it counts as
    /// busy.
    pub min_streams: u64,
}

impl Default for Pacing {
    fn default() -> Self {
        Self {
            interval: Duration::from_micros(200),
            min_streams: 64,
        }
    }
}

impl Pacing {
    /// The interval to keep between polls with `active` streams in flight.
    pub fn interval_for(&self, active: u64) -> Option<Duration> {
        (!self.interval.is_zero() && active >= self.min_streams).then_some(self.interval)
    }

    /// Installs the pacer on the calling thread's executor, reading the
    /// shard's streams in flight from `stats`.
    pub fn install(self, stats: Arc<ShardStats>) {
        if self.interval.is_zero() {
            glommio::executor().set_poll_pacer(None);
            return;
        }
        // The default timer slack (50 µs) would stretch every sleep by up
        // to half the default interval.
        // SAFETY: PR_SET_TIMERSLACK takes an integer and changes only the
        // calling thread's slack.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1_000 as libc::c_ulong);
        }
        glommio::executor().set_poll_pacer(Some(Box::new(move || {
            self.interval_for(stats.downstream.rq_active.get())
        })));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    #[test]
    fn busy_only_from_min_streams() {
        let p = Pacing {
            interval: Duration::from_micros(100),
            min_streams: 64,
        };
        assert_eq!(p.interval_for(0), None);
        assert_eq!(p.interval_for(63), None);
        assert_eq!(p.interval_for(64), Some(Duration::from_micros(100)));
        let zero = Pacing {
            interval: Duration::ZERO,
            min_streams: 0,
        };
        assert_eq!(zero.interval_for(1000), None);
    }

    /// Runs `polls` timer wake-ups on an executor paced by `pacing` with
    /// `active` streams counted in flight; returns how long they took.
    fn timed_wakeups(pacing: Pacing, active: u64, polls: u32) -> Duration {
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .io_memory(1 << 20)
            .spawn(move || async move {
                let stats = Arc::new(ShardStats::default());
                stats.downstream.rq_active.add(active);
                pacing.install(stats);
                let start = Instant::now();
                for _ in 0..polls {
                    // Each wake-up needs an I/O poll (timers fire there);
                    // 1 ms is long enough not to expire within the loop
                    // that armed it.
                    glommio::timer::sleep(Duration::from_millis(1)).await;
                }
                start.elapsed()
            })
            .expect("executor")
            .join()
            .expect("join")
    }

    /// The glommio patch at work: a busy executor waits out the interval
    /// before each poll; below `min_streams` it does not. Only lower
    /// bounds are timed (a sleep never ends early); the quiet case must
    /// merely finish well under what pacing would take.
    #[test]
    fn a_busy_executor_polls_at_most_once_per_interval() {
        let pacing = Pacing {
            interval: Duration::from_millis(20),
            min_streams: 10,
        };
        let busy = timed_wakeups(pacing, 10, 5);
        assert!(busy >= Duration::from_millis(90), "paced: {busy:?}");
        let quiet = timed_wakeups(pacing, 9, 5);
        assert!(quiet < busy, "unpaced {quiet:?} vs paced {busy:?}");
    }
}
