//! Shard-local load balancing: every [`LbPolicy`] over one cluster's hosts,
//! with Envoy's host classes and panic mode.
//!
//! Each data shard keeps one [`ClusterLb`] per cluster, so a pick never
//! touches memory another core writes. The state caches the hosts a policy
//! may choose for one cluster snapshot and one outlier-ejection epoch, and
//! is rebuilt lazily by the first pick after either changes.
//!
//! # Host classes
//!
//! * **Excluded** ([`Host::excluded`]): `DRAINING` hosts, and hosts failed
//!   through `x-envoy-immediate-health-check-fail` until a check passes.
//!   Never chosen by any policy, not even in panic, and left out of the
//!   panic math (Envoy excludes both).
//! * **Healthy**: health `UNKNOWN`, `HEALTHY` or `DEGRADED`
//!   ([`is_routable`](crate::config::HealthStatus::is_routable)) and not in
//!   the shard's [`EjectedSet`].
//!   Unlike Envoy, `DEGRADED` hosts are not kept in reserve for when healthy
//!   ones run short: they count as healthy.
//! * Everything else (`UNHEALTHY`, `TIMEOUT`, or ejected) is used only in
//!   panic.
//!
//! # Panic (Envoy `isHostSetInPanic`)
//!
//! With `t = common_lb.healthy_panic_threshold` (percent, capped at 100;
//! 0 disables panic), `total` = hosts that are not excluded and `healthy` as
//! above, the cluster is in panic when `t > 0 && 100 * healthy < t * total`.
//! In panic a policy balances across all `total` hosts, healthy or not, and
//! [`Pick::panic`] is set; otherwise it balances across the healthy hosts
//! only. No candidate at all (every host draining, or threshold 0 and every
//! host unhealthy or ejected) → no pick.
//!
//! # Policies
//!
//! "Weighted" below means the candidates' weights are not all equal (Envoy
//! checks the host list it balances over, so an ejection can switch it).
//!
//! * `ROUND_ROBIN`, equal weights: a cursor over the candidates, started at
//!   a random position on the first build (Envoy seeds each worker's index)
//!   and kept across rebuilds. O(1).
//! * `ROUND_ROBIN`, weighted: Envoy's EDF scheduler (see `lb/edf.rs`), each host
//!   due every `1 / weight`; rebuilt schedules first skip a random number
//!   (`< candidates`) of picks, as Envoy's `createWithPicks`, so shards do
//!   not all start on the same host. O(log n).
//! * `RANDOM`: uniform over the candidates; weights are ignored, as in
//!   Envoy. O(1).
//! * `LEAST_REQUEST`, equal weights (gRFC A48, Envoy unweighted): sample
//!   `choice_count` (clamped to `1..=MAX_LEAST_REQUEST_CHOICES`) distinct
//!   candidates, i.e. **without replacement**, by a partial Fisher–Yates
//!   shuffle of a persistent permutation; the fewest `active` wins, ties go
//!   to the first sampled. O(choice_count). When `choice_count >=
//!   candidates`, every candidate is compared instead: the scan starts at a
//!   random position and wraps, and the first minimum in scan order wins,
//!   so ties spread evenly instead of always going to the first host.
//! * `LEAST_REQUEST`, weighted (Envoy weighted least request): the EDF
//!   scheduler with effective weight `weight / (active + 1) ^
//!   active_request_bias` (bias 0: plain weighted round robin; 1.0, the
//!   default, exact integer math; other biases `powf`). Initial deadlines use
//!   each host's `active` at rebuild, and a picked host is re-queued with
//!   the weight recomputed from its current `active`, as in Envoy. O(log n).
//!
//! A single candidate is returned without touching any state. `rng` is
//! mapped to `0..n` by multiply-shift (`(r * n) >> 64`), not modulo.

mod edf;
pub mod hash;
pub mod hash_policy;
mod priority;
#[cfg(test)]
mod tests;
pub mod xxhash;

use std::sync::Arc;

use crate::config::{LbPolicy, MAX_LEAST_REQUEST_CHOICES};
use crate::ejected::EjectedSet;
use crate::host::HostId;
use crate::snapshot::{ClusterSnapshot, Host};

use edf::{Bias, Edf};
pub use priority::{priority_loads, ClusterLb};

/// Shard-local balancing state of one cluster (each data shard keeps one per
/// cluster name). Holds the derived host lists for the cluster snapshot and
/// ejection epoch it was built for, the round-robin cursor / EDF schedule,
/// and nothing shared with other cores.
///
/// Staleness: the lists are rebuilt when the snapshot changes (its
/// `generation`, unique to each build) or when `ejected.epoch`
/// changes (the set's contents are not compared). A rebuild is O(hosts) (plus
/// O(n log n) for a fresh weighted schedule) and reuses the buffers. An
/// ejection change that leaves this cluster's candidates as they were keeps
/// the cursor and the schedule running.
#[derive(Debug, Default)]
pub(crate) struct HostSetLb {
    /// The priority whose hosts this set balances over.
    priority: u32,
    /// With locality-weighted balancing: the one locality it balances over.
    locality: Option<u32>,
    /// `generation` of the snapshot the lists were built for (0: none yet).
    generation: u64,
    epoch: u64,
    /// Indexes into `hosts` of the hosts the policy chooses from, in host
    /// order: the healthy ones, or in panic every non-draining one.
    candidates: Vec<u32>,
    /// Rebuild buffer, swapped with `candidates`.
    scratch: Vec<u32>,
    panic: bool,
    mode: Mode,
    /// Round-robin position in `candidates` (always `< candidates.len()`
    /// in `Mode::Cursor`).
    cursor: u32,
    /// Whether `cursor` got its random start.
    seeded: bool,
    edf: Edf,
    /// A permutation of `0..candidates.len()` that least request samples
    /// from (partial Fisher–Yates; any permutation keeps samples uniform).
    sample: Vec<u32>,
    /// `RING_HASH`'s ring or `MAGLEV`'s table over the candidates (slots
    /// into `candidates`): the snapshot's prebuilt one when the candidates
    /// match, else built here.
    table: Option<Arc<hash::HashTable>>,
}

/// How the current candidates are picked from (fixed at rebuild).
#[derive(Debug, Default, Clone, Copy)]
enum Mode {
    #[default]
    Empty,
    Single,
    /// Round robin, equal weights.
    Cursor,
    /// Weighted round robin or weighted least request.
    Edf(Bias),
    Random,
    /// Least request, equal weights, `choice_count` < candidates.
    Sample(u32),
    /// Least request, equal weights, `choice_count` >= candidates.
    Scan,
    /// `RING_HASH` or `MAGLEV`: the request's hash looked up in `table`.
    Hash,
}

/// The result of a pick.
#[derive(Debug, Clone, Copy)]
pub struct Pick<'a> {
    pub host: &'a Host,
    /// The cluster was in panic mode (too few healthy hosts) and the policy
    /// balanced across all hosts.
    pub panic: bool,
}

impl HostSetLb {
    /// A set of one priority's hosts (of one locality, if given).
    pub(crate) fn new(priority: u32, locality: Option<u32>) -> Self {
        Self {
            priority,
            locality,
            ..Self::default()
        }
    }

    pub(crate) fn locality(&self) -> Option<u32> {
        self.locality
    }

    pub(crate) fn priority(&self) -> u32 {
        self.priority
    }

    /// Picks among this priority's hosts; `allow_panic`: whether the set
    /// may enter panic (Envoy: only while the priorities together are
    /// below full availability).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn pick_by<'a, A, R>(
        &mut self,
        cluster: &'a ClusterSnapshot,
        policy: LbPolicy,
        ejected: &EjectedSet,
        active: &A,
        rng: &mut R,
        hash: Option<u64>,
        allow_panic: bool,
    ) -> Option<Pick<'a>>
    where
        A: Fn(HostId) -> u32,
        R: FnMut() -> u64,
    {
        if !(self.built_for(cluster) && self.epoch == ejected.epoch) {
            self.rebuild(cluster, policy, ejected, active, rng, allow_panic);
        }
        let hosts = &cluster.hosts;
        let n = self.candidates.len();
        let slot = match self.mode {
            Mode::Empty => return None,
            Mode::Single => 0,
            Mode::Cursor => {
                let i = self.cursor as usize;
                self.cursor = if i + 1 >= n { 0 } else { i as u32 + 1 };
                i
            }
            Mode::Random => below(rng(), n),
            Mode::Edf(bias) => {
                let candidates = &self.candidates;
                self.edf.next(|slot, base| {
                    bias.step(base, || {
                        active(hosts[candidates[slot as usize] as usize].id)
                    })
                })? as usize
            }
            Mode::Sample(choices) => self.sample_least(hosts, choices as usize, active, rng),
            Mode::Scan => self.scan_least(hosts, active, rng),
            Mode::Hash => self.table.as_ref()?.pick(hash.unwrap_or_else(&mut *rng))? as usize,
        };
        Some(Pick {
            host: &hosts[self.candidates[slot] as usize],
            panic: self.panic,
        })
    }

    fn built_for(&self, cluster: &ClusterSnapshot) -> bool {
        self.generation == cluster.generation
    }

    /// Re-derives the candidates (see "Host classes" and "Panic"); restarts
    /// the policy state unless only the epoch changed and the candidates
    /// did not.
    fn rebuild<A, R>(
        &mut self,
        cluster: &ClusterSnapshot,
        policy: LbPolicy,
        ejected: &EjectedSet,
        active: &A,
        rng: &mut R,
        allow_panic: bool,
    ) where
        A: Fn(HostId) -> u32,
        R: FnMut() -> u64,
    {
        let same_snapshot = self.built_for(cluster);
        self.epoch = ejected.epoch;
        let hosts = &cluster.hosts;
        let (priority, locality) = (self.priority, self.locality);
        let excluded = |h: &Host| {
            h.excluded()
                || h.placement.priority != priority
                || locality.is_some_and(|l| h.placement.locality != l)
        };
        let mut total = 0u64;
        self.scratch.clear();
        for (i, h) in hosts.iter().enumerate() {
            if excluded(h) {
                continue;
            }
            total += 1;
            if h.health.is_routable() && !ejected.contains(h.id) {
                self.scratch.push(i as u32);
            }
        }
        let threshold = u64::from(cluster.config.common_lb.healthy_panic_threshold.min(100));
        let panic =
            allow_panic && threshold > 0 && 100 * (self.scratch.len() as u64) < threshold * total;
        if panic {
            self.scratch.clear();
            self.scratch.extend(
                hosts
                    .iter()
                    .enumerate()
                    .filter(|(_, h)| !excluded(h))
                    .map(|(i, _)| i as u32),
            );
        }
        if same_snapshot && panic == self.panic && self.scratch == self.candidates {
            return;
        }
        std::mem::swap(&mut self.scratch, &mut self.candidates);
        self.panic = panic;
        self.generation = cluster.generation;
        self.restart(hosts, &cluster.hash_tables, policy, active, rng);
    }

    /// Chooses the mode for the new candidates and resets its state.
    fn restart<A, R>(
        &mut self,
        hosts: &[Host],
        prebuilt: &[hash::PrebuiltTable],
        policy: LbPolicy,
        active: &A,
        rng: &mut R,
    ) where
        A: Fn(HostId) -> u32,
        R: FnMut() -> u64,
    {
        let candidates = &self.candidates;
        let n = candidates.len();
        let weighted = candidates
            .windows(2)
            .any(|w| hosts[w[0] as usize].weight != hosts[w[1] as usize].weight);
        self.mode = match policy {
            _ if n == 0 => Mode::Empty,
            _ if n == 1 => Mode::Single,
            LbPolicy::RoundRobin if weighted => Mode::Edf(Bias::Static),
            LbPolicy::RoundRobin => Mode::Cursor,
            LbPolicy::Random => Mode::Random,
            LbPolicy::LeastRequest(lr) if weighted => {
                Mode::Edf(Bias::least_request(lr.active_request_bias))
            }
            LbPolicy::LeastRequest(lr) => {
                let choices = lr.choice_count.clamp(1, MAX_LEAST_REQUEST_CHOICES);
                if choices as usize >= n {
                    Mode::Scan
                } else {
                    Mode::Sample(choices)
                }
            }
            LbPolicy::RingHash(_) | LbPolicy::Maglev(_) => Mode::Hash,
        };
        match self.mode {
            Mode::Cursor if !self.seeded => {
                self.seeded = true;
                self.cursor = below(rng(), n) as u32;
            }
            Mode::Cursor => self.cursor %= n as u32,
            Mode::Edf(bias) => {
                let step = |slot: u32, base: u64| {
                    bias.step(base, || {
                        active(hosts[candidates[slot as usize] as usize].id)
                    })
                };
                let weights = candidates.iter().map(|i| hosts[*i as usize].weight);
                self.edf.rebuild(weights, step);
                for _ in 0..below(rng(), n) {
                    self.edf.next(step);
                }
            }
            Mode::Sample(_) => {
                self.sample.clear();
                self.sample.extend(0..n as u32);
            }
            Mode::Hash => {
                // The control shard's table when the candidates are the
                // ones it built for (no ejection, no panic): no build
                // here, on the data path.
                self.table = match prebuilt
                    .iter()
                    .find(|t| t.priority == self.priority && t.candidates == *candidates)
                {
                    Some(t) => Some(Arc::clone(&t.table)),
                    None => hash::HashTable::build(policy, hosts, candidates).map(Arc::new),
                };
            }
            Mode::Empty | Mode::Single | Mode::Random | Mode::Scan => {}
        }
    }

    /// Least of `choices` distinct random candidates (partial Fisher–Yates
    /// over `sample`); ties go to the first sampled.
    fn sample_least<A, R>(
        &mut self,
        hosts: &[Host],
        choices: usize,
        active: &A,
        rng: &mut R,
    ) -> usize
    where
        A: Fn(HostId) -> u32,
        R: FnMut() -> u64,
    {
        let n = self.sample.len();
        let (mut best, mut fewest) = (0, u32::MAX);
        for i in 0..choices {
            let j = i + below(rng(), n - i);
            self.sample.swap(i, j);
            let slot = self.sample[i] as usize;
            let a = active(hosts[self.candidates[slot] as usize].id);
            if i == 0 || a < fewest {
                (best, fewest) = (slot, a);
            }
        }
        best
    }

    /// Least of all candidates, scanning from a random start and wrapping;
    /// the first minimum in scan order wins.
    fn scan_least<A, R>(&self, hosts: &[Host], active: &A, rng: &mut R) -> usize
    where
        A: Fn(HostId) -> u32,
        R: FnMut() -> u64,
    {
        let n = self.candidates.len();
        let start = below(rng(), n);
        let (mut best, mut fewest) = (start, u32::MAX);
        for i in 0..n {
            let slot = if start + i >= n {
                start + i - n
            } else {
                start + i
            };
            let a = active(hosts[self.candidates[slot] as usize].id);
            if i == 0 || a < fewest {
                (best, fewest) = (slot, a);
            }
        }
        best
    }
}

/// Maps a uniform u64 to `0..n` (Lemire's multiply-shift: no division).
#[inline]
fn below(r: u64, n: usize) -> usize {
    ((u128::from(r) * n as u128) >> 64) as usize
}

/// Round-robin state kept for callers of [`pick_round_robin`] (the
/// `round_robin_pick` bench); new code uses [`ClusterLb`].
#[derive(Debug, Default)]
pub struct RoundRobinState(ClusterLb);

/// Round robin over `cluster` whatever its configured policy: a
/// [`ClusterLb`] pick with `ROUND_ROBIN`, no ejected hosts and a constant
/// rng (the cursor starts at the first candidate and weighted schedules
/// skip no initial picks). Host classes and panic are as in [`ClusterLb`].
/// Returns `None` when the cluster has no candidate host.
pub fn pick_round_robin<'a>(
    cluster: &'a ClusterSnapshot,
    state: &mut RoundRobinState,
) -> Option<&'a Host> {
    state
        .0
        .pick_by(
            cluster,
            LbPolicy::RoundRobin,
            &EjectedSet::default(),
            &|_| 0,
            &mut || 0,
            None,
        )
        .map(|pick| pick.host)
}
