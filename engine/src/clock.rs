//! Injected time: algorithms take a [`Clock`] so tests control it.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// A monotonic clock. The data path passes the real one; tests pass
/// [`ManualClock`].
pub trait Clock {
    fn now(&self) -> Instant;
}

/// The process's monotonic clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that only moves when told to.
#[derive(Debug)]
pub struct ManualClock {
    now: Cell<Instant>,
}

impl Default for ManualClock {
    fn default() -> Self {
        Self {
            now: Cell::new(Instant::now()),
        }
    }
}

impl ManualClock {
    pub fn advance(&self, by: Duration) {
        self.now.set(self.now.get() + by);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.now.get()
    }
}
