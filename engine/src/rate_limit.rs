//! Token buckets shared by the shards, as one lock-free atomic each: the generic cell rate algorithm (GCRA), which is a token bucket with continuous refill (Envoy's local rate limit) kept as the time the bucket would next be full, so taking a token is one compare-and-swap however many shards take them.
//!
//! A bucket of `max` tokens refilled at `rate` tokens per second holds,
//! at time `now`, `max − (tat − now) × rate` tokens, where `tat` (the
//! "theoretical arrival time") is stored; taking a token moves `tat` one
//! emission interval (`1 / rate`) later. Time is nanoseconds since the
//! bucket's birth, passed in: tests drive it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A bucket's shape (`envoy.type.v3.TokenBucket`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketShape {
    pub max_tokens: u32,
    pub tokens_per_fill: u32,
    pub fill_interval: Duration,
}

impl BucketShape {
    /// Nanoseconds per token.
    fn interval_ns(&self) -> u64 {
        (self.fill_interval.as_nanos() / u128::from(self.tokens_per_fill.max(1))).max(1) as u64
    }

    /// Nanoseconds from empty to full.
    fn burst_ns(&self) -> u64 {
        self.interval_ns()
            .saturating_mul(u64::from(self.max_tokens))
    }
}

/// What one take found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Take {
    pub allowed: bool,
    /// Whole tokens left after it.
    pub remaining: u32,
    /// Seconds until a token is there again (0: one is there now).
    pub reset_secs: u64,
}

/// One bucket, shared by every shard.
#[derive(Debug)]
pub struct SharedBucket {
    pub shape: BucketShape,
    /// Nanoseconds since birth at which the bucket is full again; at or
    /// before `now`: full.
    tat: AtomicU64,
}

impl SharedBucket {
    /// A full bucket.
    pub fn new(shape: BucketShape) -> Self {
        Self {
            shape,
            tat: AtomicU64::new(0),
        }
    }

    /// Empties it back to full (a slot reused by another client).
    pub fn refill(&self) {
        self.tat.store(0, Ordering::Relaxed);
    }

    /// Takes a token at `now_ns` (since birth) if one is there.
    pub fn take(&self, now_ns: u64) -> Take {
        let t = self.shape.interval_ns();
        let burst = self.shape.burst_ns();
        let mut current = self.tat.load(Ordering::Relaxed);
        loop {
            let tat = current.max(now_ns);
            // What is owed beyond now: (tat − now) of the burst is used.
            let used = tat - now_ns;
            if used + t > burst {
                return Take {
                    allowed: false,
                    remaining: 0,
                    reset_secs: self.reset(used),
                };
            }
            let next = tat + t;
            match self.tat.compare_exchange_weak(
                current,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    let used = next - now_ns;
                    let remaining = ((burst - used) / t) as u32;
                    return Take {
                        allowed: true,
                        remaining,
                        reset_secs: match remaining {
                            0 => self.reset(used),
                            _ => 0,
                        },
                    };
                }
                Err(seen) => current = seen,
            }
        }
    }

    /// Whole tokens there at `now_ns`, taking none.
    pub fn tokens(&self, now_ns: u64) -> u32 {
        let used = self.tat.load(Ordering::Relaxed).max(now_ns) - now_ns;
        (self.shape.burst_ns().saturating_sub(used) / self.shape.interval_ns()) as u32
    }

    /// Seconds until a whole token is there, with `used` of the burst
    /// owed (rounded up, as Envoy's `x-ratelimit-reset`).
    fn reset(&self, used: u64) -> u64 {
        let wait = (used + self.shape.interval_ns()).saturating_sub(self.shape.burst_ns());
        wait.div_ceil(1_000_000_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn bucket(max: u32, per_fill: u32, secs: u64) -> SharedBucket {
        SharedBucket::new(BucketShape {
            max_tokens: max,
            tokens_per_fill: per_fill,
            fill_interval: Duration::from_secs(secs),
        })
    }

    /// Envoy 1.40's answers for 3 tokens / 30 s (recorded 2026-11-28): the
    /// bucket starts full, and the third take leaves it empty with a
    /// token back in 10 s.
    #[test]
    fn starts_full_and_refills_continuously() {
        let b = bucket(3, 3, 30);
        let t0 = 5 * S;
        let takes: Vec<Take> = (0..4).map(|_| b.take(t0)).collect();
        assert_eq!(
            takes,
            [
                Take {
                    allowed: true,
                    remaining: 2,
                    reset_secs: 0
                },
                Take {
                    allowed: true,
                    remaining: 1,
                    reset_secs: 0
                },
                Take {
                    allowed: true,
                    remaining: 0,
                    reset_secs: 10
                },
                Take {
                    allowed: false,
                    remaining: 0,
                    reset_secs: 10
                },
            ]
        );
        // 1 s later the token is 9 s away; 10 s later it is there.
        assert_eq!(b.take(t0 + S).reset_secs, 9);
        assert!(b.take(t0 + 10 * S).allowed);
        assert!(!b.take(t0 + 10 * S).allowed);
        // Long idle: full, never more than max.
        assert_eq!(b.tokens(t0 + 1000 * S), 3);
    }

    #[test]
    fn admits_the_rate_over_time() {
        // 100 tokens per second, burst 10: over 10 s of steady demand at
        // 1000/s, 10 + 1000 are admitted.
        let b = bucket(10, 100, 1);
        let admitted = (0..10_000u64)
            .filter(|i| b.take(i * S / 1000).allowed)
            .count();
        assert!((1005..=1011).contains(&admitted), "{admitted}");
    }

    #[test]
    fn shards_share_one_bucket() {
        use std::sync::Arc;
        let b = Arc::new(bucket(1000, 1, 3600));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let b = Arc::clone(&b);
                std::thread::spawn(move || (0..1000).filter(|_| b.take(S).allowed).count())
            })
            .collect();
        let total: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(total, 1000);
    }
}
