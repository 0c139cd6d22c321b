//! Exponential backoff with jitter for reconnects (the ADS stream), with
//! the randomness passed in so tests are deterministic.

use std::time::Duration;

/// Each failure doubles the ceiling up to `max`; each wait is drawn from
/// the upper half of the ceiling, so a fleet of gateways that lost the same
/// control plane does not reconnect in lockstep, yet none retries much
/// sooner than planned.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    ceiling: Duration,
}

impl Backoff {
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max: max.max(base),
            ceiling: base,
        }
    }

    /// The wait before the next attempt; `random` is any uniformly random u64.
    pub fn next_wait(&mut self, random: u64) -> Duration {
        let ceiling = self.ceiling;
        self.ceiling = (ceiling * 2).min(self.max);
        let half = ceiling / 2;
        let span = (ceiling - half).as_nanos().max(1) as u64;
        half + Duration::from_nanos(random % span)
    }

    /// After a success: start again from `base`.
    pub fn reset(&mut self) {
        self.ceiling = self.base;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_the_cap_with_jitter_in_the_upper_half() {
        let mut b = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
        let ceilings = [500u64, 1000, 2000, 4000, 8000, 16000, 30000, 30000];
        for c in ceilings {
            let lo = b.clone().next_wait(0);
            let hi = b.clone().next_wait(u64::MAX - 1);
            assert_eq!(lo, Duration::from_millis(c / 2));
            assert!(hi < Duration::from_millis(c) && hi >= Duration::from_millis(c / 2));
            b.next_wait(7);
        }
        b.reset();
        assert_eq!(b.next_wait(0), Duration::from_millis(250));
    }
}
