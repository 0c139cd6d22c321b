//! Log-linear latency histogram (two significant decimal digits per bucket, as Envoy's circllhist).
//!
//! Over integer values (the caller records µs): 0..=99 get one bucket each; above, a bucket spans
//! one step of the second significant digit, so it is at most 10 % wide whatever the magnitude.

/// Values up to 10^10 − 1 (about 2.8 h in µs) get their own bucket; beyond,
/// they share the last one.
pub const BUCKETS: usize = EXACT as usize + MAX_EXP * 90;

/// Below this, a bucket holds exactly one integer value.
const EXACT: u64 = 100;
/// Largest decimal exponent e of a bucket `m · 10^e` (m in 10..=99).
const MAX_EXP: usize = 8;
// A table, not pow(): bucket_of runs per request.
const POW10: [u64; MAX_EXP + 1] = [
    1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000,
];

/// Envoy's default histogram bucket bounds (`le`, milliseconds).
pub const ENVOY_DEFAULT_BUCKETS_MS: [f64; 19] = [
    0.5, 1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 30000.0,
    60000.0, 300000.0, 600000.0, 1800000.0, 3600000.0,
];

/// The bucket holding `value`; values past the covered range clamp to the last.
pub fn bucket_of(value: u64) -> usize {
    if value < EXACT {
        return value as usize;
    }
    // value ≥ 100 has ≥ 3 digits, so e = digits − 2 = ilog10 − 1 ≥ 1.
    let e = value.ilog10() as usize - 1;
    if e > MAX_EXP {
        return BUCKETS - 1;
    }
    let m = (value / POW10[e]) as usize;
    EXACT as usize + (e - 1) * 90 + (m - 10)
}

/// Smallest value of `bucket` (indices past the end read as the last bucket).
pub fn lower_bound(bucket: usize) -> u64 {
    let b = bucket.min(BUCKETS - 1);
    if b < EXACT as usize {
        return b as u64;
    }
    let k = b - EXACT as usize;
    (k % 90 + 10) as u64 * POW10[k / 90 + 1]
}

/// Exclusive upper bound of `bucket`: the next bucket's lower bound, or
/// `u64::MAX` for the last one, which also holds every clamped value.
pub fn upper_bound(bucket: usize) -> u64 {
    if bucket >= BUCKETS - 1 {
        return u64::MAX;
    }
    lower_bound(bucket + 1)
}

/// Bucket counts added up over shards: what a scrape reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    counts: Vec<u64>,
    sum: u64,
    count: u64,
}

impl Default for Merged {
    fn default() -> Self {
        Self::new()
    }
}

impl Merged {
    pub fn new() -> Self {
        Self {
            counts: vec![0; BUCKETS],
            sum: 0,
            count: 0,
        }
    }

    /// Adds `n` samples to `bucket` (past the end: the last bucket).
    /// Counters saturate rather than wrap, so a scrape never sees them go back.
    pub fn add(&mut self, bucket: usize, n: u64) {
        let slot = &mut self.counts[bucket.min(BUCKETS - 1)];
        *slot = slot.saturating_add(n);
        self.count = self.count.saturating_add(n);
    }

    /// Adds to the sum of recorded values (kept apart: buckets lose precision).
    pub fn add_sum(&mut self, sum: u64) {
        self.sum = self.sum.saturating_add(sum);
    }

    pub fn merge(&mut self, other: &Merged) {
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine = mine.saturating_add(*theirs);
        }
        self.sum = self.sum.saturating_add(other.sum);
        self.count = self.count.saturating_add(other.count);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn sum(&self) -> u64 {
        self.sum
    }

    /// Per-bucket counts, indexed like `bucket_of`; `BUCKETS` long.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Samples in buckets lying wholly below `bound`, i.e. values `< bound`.
    /// Exact when `bound` is a bucket lower bound (every integer < 100 and
    /// every two-significant-digit number is); otherwise the bucket straddling
    /// `bound` is left out.
    pub fn cumulative_below(&self, bound: u64) -> u64 {
        // Buckets before bucket_of(bound) end at or below bound; that one doesn't.
        self.counts[..bucket_of(bound)]
            .iter()
            .fold(0u64, |acc, &n| acc.saturating_add(n))
    }

    /// Prometheus `le` in ms over values recorded in µs: the samples `v ≤ le_ms · 1000`.
    ///
    /// A value equal to the bound sits in the bucket starting at the bound, which also holds
    /// larger values. Below 100 µs buckets are single integers, so that bucket is counted: exact.
    /// From 100 µs up (every Envoy default) only values `< bound` are: samples at exactly the
    /// bound µs show up in the next `le`, an under-count of at most those. A bound that is no
    /// bucket's lower bound also leaves out the bucket straddling it. NaN or < 0: 0; +∞: all.
    pub fn cumulative_le_ms(&self, le_ms: f64) -> u64 {
        let us = le_ms * 1000.0;
        if us.is_nan() || us < 0.0 {
            return 0;
        }
        if us >= u64::MAX as f64 {
            return self.count;
        }
        // Integer v ≤ x ⇔ v ≤ ⌊x⌋; the nudge is for ms·1000 landing a hair
        // below an integer (0.001 is not exact in binary).
        let le = (us + 1e-6).floor() as u64;
        self.cumulative_below(if le < EXACT { le + 1 } else { le })
    }

    /// The q-quantile (q in 0..=1) in the recorded unit, interpolated
    /// linearly inside its bucket; None when empty or q is out of range.
    /// The last bucket is open-ended (clamped values), so there the answer
    /// is its lower bound.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 || !(0.0..=1.0).contains(&q) {
            return None;
        }
        let target = q * self.count as f64;
        let mut below = 0u64;
        for (b, &n) in self.counts.iter().enumerate() {
            let through = below.saturating_add(n);
            // Skipping empty buckets makes q=0 land on the first occupied one.
            if n > 0 && through as f64 >= target {
                let lo = lower_bound(b) as f64;
                if b == BUCKETS - 1 {
                    return Some(lo);
                }
                let hi = upper_bound(b) as f64;
                let frac = ((target - below as f64) / n as f64).clamp(0.0, 1.0);
                return Some(lo + frac * (hi - lo));
            }
            below = through;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(m: &mut Merged, v: u64) {
        m.add(bucket_of(v), 1);
        m.add_sum(v);
    }

    fn contains(v: u64) -> bool {
        let b = bucket_of(v);
        b < BUCKETS && lower_bound(b) <= v && v < upper_bound(b)
    }

    #[test]
    fn every_value_lands_in_a_bucket_containing_it_monotonically() {
        let mut prev = 0;
        for v in (0..=1000).chain((1000..=1_000_000).step_by(7)) {
            assert!(contains(v) && bucket_of(v) >= prev, "{v}");
            prev = bucket_of(v);
        }
        for p in (1..=10).map(|e| 10u64.pow(e)) {
            assert!(contains(p - 1) && contains(p) && contains(p + 1), "{p}");
        }
    }

    #[test]
    fn consecutive_buckets_meet() {
        assert_eq!(BUCKETS, 820);
        for b in 0..BUCKETS {
            assert_eq!(bucket_of(lower_bound(b)), b);
            assert!(lower_bound(b) < upper_bound(b));
            if b + 1 < BUCKETS {
                assert_eq!(upper_bound(b), lower_bound(b + 1));
                assert_eq!(bucket_of(upper_bound(b) - 1), b);
            }
        }
        assert_eq!(
            [lower_bound(99), upper_bound(99), upper_bound(100)],
            [99, 100, 110]
        );
    }

    #[test]
    fn values_past_the_range_clamp_to_the_last_bucket() {
        let beyond = [9_999_999_999, 10_000_000_000, u64::MAX];
        assert_eq!(beyond.map(bucket_of), [BUCKETS - 1; 3]);
        assert_eq!(lower_bound(BUCKETS - 1), 9_900_000_000);
        assert_eq!(upper_bound(BUCKETS - 1), u64::MAX);
        assert_eq!(lower_bound(BUCKETS + 5), 9_900_000_000);
        let mut m = Merged::new();
        m.add(BUCKETS + 5, 2);
        assert_eq!(m.counts()[BUCKETS - 1], 2);
        record(&mut m, 1_000_000_000_000);
        assert_eq!(m.quantile(1.0), Some(9_900_000_000.0));
    }

    #[test]
    fn envoy_default_bounds_are_bucket_lower_bounds() {
        for ms in ENVOY_DEFAULT_BUCKETS_MS {
            let us = (ms * 1000.0) as u64;
            assert_eq!(lower_bound(bucket_of(us)), us, "{ms} ms");
        }
    }

    #[test]
    fn cumulative_le_ms_counts_values_up_to_the_bound() {
        let mut m = Merged::new();
        let values = [0, 50, 51, 499, 500, 501, 24_999, 25_000, 25_001];
        values.into_iter().for_each(|v| record(&mut m, v));
        // Below 100 µs exact, the value at the bound included.
        let les = [0.0, 0.0005, 0.05, 0.051, 0.099, 0.1];
        assert_eq!(les.map(|le| m.cumulative_le_ms(le)), [1, 1, 2, 3, 3, 3]);
        // From 100 µs up, the sample at exactly 500 µs / 25 ms counts in the next le.
        let les = [0.5, 1.0, 25.0, 50.0, f64::INFINITY, -1.0, f64::NAN];
        assert_eq!(les.map(|le| m.cumulative_le_ms(le)), [4, 6, 7, 9, 9, 0, 0]);
        let les = ENVOY_DEFAULT_BUCKETS_MS.map(|le| m.cumulative_le_ms(le));
        assert!(les.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(m.cumulative_below(100), 3);
        assert_eq!(m.cumulative_below(0), 0);
    }

    #[test]
    fn quantiles_of_a_uniform_set_are_within_bucket_precision() {
        let mut m = Merged::new();
        (1..=100_000).for_each(|v| record(&mut m, v));
        for q in [0.01, 0.1, 0.25, 0.5, 0.9, 0.99, 0.999] {
            let exact = q * 100_000.0;
            let err = m.quantile(q).map(|got| (got - exact).abs() / exact);
            assert!(err.is_some_and(|e| e <= 0.1), "q={q}: {err:?}");
        }
        assert_eq!(m.quantile(0.0), Some(1.0));
        assert_eq!(m.quantile(1.0), Some(110_000.0));
        assert_eq!(m.quantile(1.5), None);
        assert_eq!(m.quantile(f64::NAN), None);
    }

    #[test]
    fn merge_adds_counts_and_sums() {
        let (mut a, mut b) = (Merged::new(), Merged::new());
        [7, 1234].into_iter().for_each(|v| record(&mut a, v));
        [1234, 99_000].into_iter().for_each(|v| record(&mut b, v));
        a.merge(&b);
        assert_eq!((a.count(), a.sum()), (4, 7 + 1234 + 1234 + 99_000));
        let per_value = [7, 1234, 99_000].map(|v| a.counts()[bucket_of(v)]);
        assert_eq!(per_value, [1, 2, 1]);
        assert_eq!(a.counts().iter().sum::<u64>(), a.count());
    }

    #[test]
    fn empty_histogram() {
        let mut m = Merged::default();
        assert!(m.is_empty());
        assert_eq!((m.count(), m.sum()), (0, 0));
        assert_eq!(m.quantile(0.5), None);
        assert_eq!(m.cumulative_le_ms(f64::INFINITY), 0);
        assert_eq!(m.cumulative_below(u64::MAX), 0);
        m.merge(&Merged::new());
        assert!(m.is_empty());
        assert_eq!(m.counts().len(), BUCKETS);
    }
}
