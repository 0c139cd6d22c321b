//! Envoy's earliest-deadline-first scheduler (`EdfScheduler`), used by
//! round robin and least request when the candidates' weights differ.
//!
//! Every slot (a position in the candidate list) has a deadline in virtual
//! time; a pick takes the slot with the earliest deadline (ties: the lowest
//! slot, so the order is deterministic) and re-queues it at `deadline +
//! step`, where `step = EDF_SCALE / effective_weight`, computed as
//! `(EDF_SCALE / weight) * (active + 1) ^ bias` with the first factor
//! precomputed per slot, so a pick divides nothing. Over many picks each
//! slot is chosen in proportion to its weight, interleaved rather than in
//! bursts. Deadlines are scaled integers (not Envoy's `f64`), so schedules
//! are exact and reproducible.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Virtual time one pick of a weight-1 host advances its deadline by; a host
/// of effective weight `w` advances by `EDF_SCALE / w`.
pub(super) const EDF_SCALE: u128 = 1 << 40;

/// Largest step: a weight-1 host with `u32::MAX` active requests at bias 1.
/// Clamping keeps a huge `active_request_bias` from parking a host at the
/// end of time; u128 deadlines then last 2^56 picks.
const MAX_STEP: u128 = EDF_SCALE << 32;

/// How a host's effective weight depends on its active requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Bias {
    /// `weight` (round robin, or least request with bias 0).
    Static,
    /// `weight / (active + 1)`: least request's default bias 1.0, computed
    /// exactly in integers.
    One,
    /// `weight / (active + 1) ^ bias` (`powf`), any other positive bias.
    Pow(f64),
}

impl Bias {
    /// The bias of least request's `active_request_bias`; 0 (or anything not
    /// positive, which validation rejects) makes it plain weighted round
    /// robin, as in Envoy.
    pub(super) fn least_request(active_request_bias: f64) -> Self {
        if active_request_bias > 0.0 {
            if active_request_bias == 1.0 {
                Self::One
            } else {
                Self::Pow(active_request_bias)
            }
        } else {
            Self::Static
        }
    }

    /// Deadline step of a host whose static step is `base` (`EDF_SCALE /
    /// weight`): `EDF_SCALE / effective weight`. `active` is read only when
    /// the bias needs it.
    #[inline]
    pub(super) fn step(self, base: u64, active: impl FnOnce() -> u32) -> u128 {
        let step = match self {
            Self::Static => u128::from(base),
            Self::One => u128::from(base) * (u128::from(active()) + 1),
            Self::Pow(bias) => {
                let load = (f64::from(active()) + 1.0).powf(bias);
                // `as` saturates (and maps NaN to 0); clamped below.
                (base as f64 * load) as u128
            }
        };
        step.clamp(1, MAX_STEP)
    }
}

/// The schedule over slots `0..n`: `(deadline, slot)`, the smallest first.
#[derive(Debug, Default)]
pub(super) struct Edf {
    heap: BinaryHeap<Reverse<(u128, u32)>>,
    /// `EDF_SCALE / weight` per slot, so a pick divides nothing.
    base: Vec<u64>,
}

impl Edf {
    /// Restarts the schedule over slots with `weights`, slot `i` due at
    /// `step(i, base_i)` (as if every slot had just been picked at time 0).
    /// O(n), reusing the buffers.
    pub(super) fn rebuild(
        &mut self,
        weights: impl Iterator<Item = u32>,
        step: impl Fn(u32, u64) -> u128,
    ) {
        self.base.clear();
        self.base
            .extend(weights.map(|w| (EDF_SCALE / u128::from(w.max(1))) as u64));
        let mut entries = std::mem::take(&mut self.heap).into_vec();
        entries.clear();
        entries.extend(
            self.base
                .iter()
                .enumerate()
                .map(|(slot, base)| Reverse((step(slot as u32, *base), slot as u32))),
        );
        self.heap = BinaryHeap::from(entries);
    }

    /// Restarts the schedule at a random point: each slot is first due at
    /// a random time within its first step (`rand` draws), so the first
    /// picks after a restart spread over the slots roughly by weight
    /// instead of always going to the heaviest, and schedules made at the
    /// same moment (shards, gateways) do not move in step.
    pub(super) fn randomize(&mut self, mut rand: impl FnMut() -> u64) {
        let entries: Vec<_> = self
            .base
            .iter()
            .enumerate()
            .map(|(slot, base)| Reverse((u128::from(1 + rand() % (*base).max(1)), slot as u32)))
            .collect();
        self.heap = BinaryHeap::from(entries);
    }

    /// Takes the slot due first and re-queues it `step(slot, base)` later
    /// (Envoy recomputes the weight on re-queue, which is how least request
    /// sees the host's current load). O(log n): one sift, no allocation.
    #[inline]
    pub(super) fn next(&mut self, step: impl FnOnce(u32, u64) -> u128) -> Option<u32> {
        let mut top = self.heap.peek_mut()?;
        let Reverse((deadline, slot)) = *top;
        let base = self.base[slot as usize];
        *top = Reverse((deadline.saturating_add(step(slot, base)), slot));
        Some(slot)
    }
}
