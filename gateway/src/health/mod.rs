//! Active health checking on the control shard, never on a data shard: one
//! task per checked host per gateway ([`probe`] runs each check, the pure
//! `engine::active_health` judges), reporting only what changes a host's
//! verdict. Verdicts reach the data shards as snapshot updates, like EDS;
//! host ids stay.
//!
//! ```text
//!  host task: sleep ─▶ probe ─▶ HostHealth::on_outcome ─▶ (changed?) Event::Health
//!  control:   Event::Health ─▶ HealthCheckers::on_report ─▶ verdicts ─▶ Snapshot::build_checked
//! ```

mod h2check;
pub mod probe;

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ahash::AHashMap;
use engine::active_health::{ActiveHealth, HostHealth, Outcome, Transition, Verdict};
use engine::tls::UpstreamTls;
use engine::{
    Bootstrap, Cluster, ClusterSnapshot, EjectedSet, EndpointCheck, HealthCheck, HostId, Snapshot,
};
use glommio::channels::local_channel::LocalSender;
use shards::stats::{Counter, ShardStats};

use crate::events::Event;

/// A host's verdict changed (or its first check ended), from its task.
#[derive(Debug)]
pub struct Report {
    pub cluster: Rc<str>,
    pub address: SocketAddr,
    /// The task's generation: a report from a task since replaced is
    /// dropped.
    pub gen: u64,
    pub verdict: Verdict,
    /// The check passed, the host's checks pass, and the host was
    /// outlier-ejected in a cluster that un-ejects on a passing check
    /// (`successful_active_health_check_uneject_host`).
    pub passed_while_ejected: bool,
}

/// One cluster's checking, as the admin server shows it (Envoy's
/// `health_check.*` stats).
#[derive(Debug, Clone)]
pub struct Counts {
    /// Written by the host tasks as checks end: always current.
    pub checks: Arc<Counters>,
    /// Hosts checked, and of them those passing and those degraded, at
    /// the last change.
    pub hosts: u64,
    pub healthy: u64,
    pub degraded: u64,
    /// Verdicts that changed.
    pub changes: u64,
}

/// Checks ended, by outcome: written by the control shard's host tasks,
/// read by the admin server's thread.
#[derive(Debug, Default)]
pub struct Counters {
    pub attempt: Counter,
    pub success: Counter,
    /// Every failed check (network failures included, as Envoy counts).
    pub failure: Counter,
    /// No answer: refused, reset or timed out.
    pub network_failure: Counter,
    /// Responses through the data path that carried
    /// `x-envoy-immediate-health-check-fail` (Envoy's passive failures).
    pub passive_failure: Counter,
}

/// Whether a cluster has carried traffic (any upstream connection by any
/// shard): until it has, hosts are checked at `no_traffic_interval`.
struct TrafficWatch {
    shards: Vec<Arc<ShardStats>>,
    /// The cluster's hosts as of the last snapshot (updated in place: every
    /// host task holds this one watch).
    ids: RefCell<Vec<HostId>>,
    used: Cell<bool>,
    looked_at: Cell<Option<Instant>>,
}

impl TrafficWatch {
    fn used(&self) -> bool {
        if self.used.get() {
            return true;
        }
        // A scan reads every host's counter on every shard: at most one a
        // second, however many hosts ask.
        let now = Instant::now();
        if self
            .looked_at
            .get()
            .is_some_and(|at| now.duration_since(at) < Duration::from_secs(1))
        {
            return false;
        }
        self.looked_at.set(Some(now));
        let used = self.ids.borrow().iter().any(|id| {
            self.shards
                .iter()
                .any(|s| s.hosts.get(*id).is_some_and(|h| h.cx_total.get() > 0))
        });
        self.used.set(used);
        used
    }
}

struct ClusterCheckers {
    config: Arc<HealthCheck>,
    /// The cluster's TLS as configured (a change restarts its tasks) and
    /// as checks use it (with `tls_options.alpn_protocols`).
    cluster_tls: Option<Arc<UpstreamTls>>,
    tls: Option<Arc<UpstreamTls>>,
    /// The cluster snapshot last followed: an unchanged one (the same
    /// `Arc`) needs no walk over its hosts.
    seen: Option<Arc<ClusterSnapshot>>,
    name: Rc<str>,
    hosts: AHashMap<SocketAddr, HostTask>,
    counters: Arc<Counters>,
    traffic: Rc<TrafficWatch>,
    changes: u64,
}

impl ClusterCheckers {
    /// Tells each host task whether its host is ejected in `set` (and the
    /// cluster un-ejects on a passing check).
    fn mark_ejected(&self, set: &EjectedSet) {
        let Some(snap) = &self.seen else { return };
        let unejects = unejects_on_check(snap);
        for h in &snap.hosts {
            if let Some(task) = self.hosts.get(&h.address) {
                task.ejected.set(unejects && set.contains(h.id));
            }
        }
    }
}

struct HostTask {
    gen: u64,
    check: EndpointCheck,
    /// Set when a proxied response said `x-envoy-immediate-health-check-fail`:
    /// the task fails the host's state before its next check.
    failed_by_response: Rc<Cell<bool>>,
    /// Whether the host is outlier-ejected in a cluster that un-ejects on
    /// a passing check: the task then reports its next pass even when the
    /// verdict stays.
    ejected: Rc<Cell<bool>>,
    _task: glommio::Task<()>,
}

/// How often the control shard looks for proxied responses that carried
/// `x-envoy-immediate-health-check-fail` (one counter per shard; the hosts
/// only when one moved). Envoy acts on the response itself; a tenth of a
/// second later is the price of keeping data shards out of checking.
const IMMEDIATE_FAIL_POLL: Duration = Duration::from_millis(100);

/// Every checked cluster's host tasks and the verdicts they reported.
pub struct HealthCheckers {
    clusters: AHashMap<String, ClusterCheckers>,
    verdicts: ActiveHealth,
    shards: Vec<Arc<ShardStats>>,
    seed: u64,
    gen: u64,
    /// Each shard's `immediate_hc_fail` as last polled.
    immediate_seen: Vec<u64>,
    /// Each checked host's `rq_immediate_hc_fail` (summed over shards) as
    /// last polled, or when its task started.
    host_immediate_seen: AHashMap<HostId, u64>,
    poll_at: Option<Instant>,
    /// The outlier-ejected set last followed (new tasks start from it).
    ejected: Arc<EjectedSet>,
}

impl HealthCheckers {
    pub fn new(seed: u64, shards: Vec<Arc<ShardStats>>) -> Self {
        Self {
            clusters: AHashMap::new(),
            verdicts: ActiveHealth::default(),
            shards,
            seed: seed | 1,
            gen: 0,
            immediate_seen: Vec::new(),
            host_immediate_seen: AHashMap::new(),
            poll_at: None,
            ejected: Arc::default(),
        }
    }

    /// Follows a new outlier-ejected set: the tasks of ejected hosts in
    /// clusters that un-eject on a passing check
    /// (`successful_active_health_check_uneject_host`) report their next
    /// pass. Walks the checked hosts; ejected sets change rarely.
    pub fn follow_ejections(&mut self, set: &Arc<EjectedSet>) {
        self.ejected = Arc::clone(set);
        for c in self.clusters.values() {
            c.mark_ejected(set);
        }
    }

    /// When [`HealthCheckers::poll_immediate_failures`] is next due: never
    /// while no cluster is checked.
    pub fn next_poll(&self) -> Option<Instant> {
        self.poll_at.filter(|_| !self.clusters.is_empty())
    }

    /// Fails at once every checked host whose proxied responses carried
    /// `x-envoy-immediate-health-check-fail` since the last poll, as
    /// Envoy's router does: whether the verdicts changed (a snapshot is
    /// due). Its next checks must pass `healthy_threshold` times again.
    pub fn poll_immediate_failures(&mut self, now: Instant) -> bool {
        self.poll_at = Some(now + IMMEDIATE_FAIL_POLL);
        let totals: Vec<u64> = self
            .shards
            .iter()
            .map(|s| s.immediate_hc_fail.get())
            .collect();
        if totals == self.immediate_seen {
            return false;
        }
        self.immediate_seen = totals;
        let mut changed = false;
        for (name, c) in &mut self.clusters {
            let Some(snap) = &c.seen else { continue };
            for h in &snap.hosts {
                let Some(task) = c.hosts.get(&h.address) else {
                    continue;
                };
                let n = immediate_fails(&self.shards, h.id);
                let mut last = self.host_immediate_seen.insert(h.id, n).unwrap_or(0);
                if n < last {
                    // A recycled host id: its counters started again.
                    last = 0;
                }
                if n <= last {
                    continue;
                }
                c.counters.passive_failure.add(n - last);
                task.failed_by_response.set(true);
                let failed = Verdict {
                    healthy: false,
                    degraded: false,
                    excluded: true,
                };
                let v = self.verdicts.entry(name.clone()).or_default();
                if v.hosts.insert(h.address, failed) != Some(failed) {
                    v.version += 1;
                    c.changes += 1;
                    changed = true;
                    tracing::warn!(cluster = %name, host = %h.address,
                        "a response carried x-envoy-immediate-health-check-fail, host unhealthy");
                }
            }
        }
        changed
    }

    /// What snapshots are built with.
    pub fn verdicts(&self) -> &ActiveHealth {
        &self.verdicts
    }

    /// Checks every host of `boot`'s checked clusters once and waits for
    /// all: Envoy initializes a checked cluster only after each host's
    /// first check, so the first snapshot already tells good hosts from
    /// bad. Each wait is bounded by its check's timeout.
    pub async fn first_round(&mut self, boot: &Bootstrap) {
        let mut tasks = Vec::new();
        for c in boot.clusters.iter().filter(|c| c.health_check.is_some()) {
            let Some(hc) = c.health_check.clone() else {
                continue;
            };
            let tls = check_tls(c, &hc);
            for ep in c.endpoints.iter().filter(|e| !e.check.disabled) {
                let target = target_of(c, &hc, tls.clone(), ep.address, &ep.check);
                let hc = Arc::clone(&hc);
                let (name, address) = (c.name.clone(), ep.address);
                tasks.push(glommio::spawn_local(async move {
                    let mut timer = glommio::timer::Timer::new(hc.timeout);
                    let (outcome, why) = probe::check(&hc, &target, &mut None, &mut timer).await;
                    let mut h = HostHealth::new();
                    h.on_outcome(outcome, &hc);
                    log_result(&name, address, &hc, outcome, Transition::Changed, &why);
                    (name, address, h.verdict())
                }));
            }
        }
        for t in tasks {
            let (name, address, verdict) = t.await;
            let v = self.verdicts.entry(name).or_default();
            v.version = 1;
            v.hosts.insert(address, verdict);
        }
    }

    /// Follows a new snapshot: tasks for new checked hosts, none for hosts
    /// or clusters gone, all restarted (verdicts kept) for a cluster whose
    /// check changed. Warming clusters are checked like serving ones: their
    /// first round is what ends their warming.
    pub fn sync(&mut self, snap: &Snapshot, events: &Weak<LocalSender<Event>>) {
        if self.poll_at.is_none() {
            self.poll_at = Some(Instant::now() + IMMEDIATE_FAIL_POLL);
        }
        // Tasks of a cluster whose check changed all restart; what each
        // host was checked with is carried over for hosts that left the
        // config but stay while passing (their endpoint is gone).
        let mut carried: AHashMap<(String, SocketAddr), EndpointCheck> = AHashMap::new();
        self.clusters.retain(|name, c| {
            let keep = snap.any_cluster(name).is_some_and(|s| {
                s.config.health_check.as_ref() == Some(&c.config)
                    && s.config.upstream.tls == c.cluster_tls
            });
            if !keep {
                for (addr, t) in &c.hosts {
                    carried.insert((name.clone(), *addr), t.check.clone());
                }
            }
            keep
        });
        self.verdicts.retain(|name, _| {
            snap.any_cluster(name)
                .is_some_and(|s| s.config.health_check.is_some())
        });
        for (name, cs) in snap.all_clusters() {
            let Some(hc) = &cs.config.health_check else {
                continue;
            };
            let shards = &self.shards;
            let entry = self
                .clusters
                .entry(name.clone())
                .or_insert_with(|| ClusterCheckers {
                    config: Arc::clone(hc),
                    cluster_tls: cs.config.upstream.tls.clone(),
                    tls: check_tls(&cs.config, hc),
                    seen: None,
                    name: Rc::from(name.as_str()),
                    hosts: AHashMap::new(),
                    counters: Arc::default(),
                    traffic: Rc::new(TrafficWatch {
                        shards: shards.clone(),
                        ids: RefCell::default(),
                        used: Cell::new(false),
                        looked_at: Cell::new(None),
                    }),
                    changes: 0,
                });
            if entry.seen.as_ref().is_some_and(|s| Arc::ptr_eq(s, cs)) {
                continue;
            }
            entry.seen = Some(Arc::clone(cs));
            *entry.traffic.ids.borrow_mut() = cs.hosts.iter().map(|h| h.id).collect();
            let wanted: AHashMap<SocketAddr, &EndpointCheck> = cs
                .config
                .endpoints
                .iter()
                .filter(|e| !e.check.disabled)
                .map(|e| (e.address, &e.check))
                .collect();
            // A host gone from the config but kept while it passes
            // (`pending_removal`) keeps its task: a failed check lets it go.
            let leaving =
                |addr: &SocketAddr| cs.host_by_addr(addr).is_some_and(|h| h.pending_removal);
            entry.hosts.retain(|addr, t| match wanted.get(addr) {
                Some(c) => **c == t.check,
                None => leaving(addr),
            });
            let verdicts = self.verdicts.entry(name.clone()).or_default();
            verdicts
                .hosts
                .retain(|addr, _| wanted.contains_key(addr) || leaving(addr));
            // A leaving host whose task went with a changed check is still
            // checked, as its endpoint said, until it fails: else it would
            // never go.
            let default_check = EndpointCheck::default();
            let orphans: Vec<(SocketAddr, &EndpointCheck)> = cs
                .hosts
                .iter()
                .filter(|h| h.pending_removal && !entry.hosts.contains_key(&h.address))
                .map(|h| {
                    let check = carried.get(&(name.clone(), h.address));
                    (h.address, check.unwrap_or(&default_check))
                })
                .collect();
            for (addr, check) in wanted.into_iter().chain(orphans) {
                if entry.hosts.contains_key(&addr) {
                    continue;
                }
                self.gen += 1;
                self.seed = next_seed(self.seed);
                let state = match verdicts.hosts.get(&addr) {
                    Some(v) => HostHealth::resumed(*v),
                    None => HostHealth::new(),
                };
                if let Some(h) = cs.host_by_addr(&addr) {
                    // Only responses from now on count.
                    let n = immediate_fails(&self.shards, h.id);
                    self.host_immediate_seen.insert(h.id, n);
                }
                let failed_by_response = Rc::new(Cell::new(false));
                let ejected = Rc::new(Cell::new(false));
                let task = spawn_host(
                    entry,
                    &cs.config,
                    HostSpawn {
                        address: addr,
                        check,
                        state,
                        gen: self.gen,
                        seed: self.seed,
                        failed_by_response: Rc::clone(&failed_by_response),
                        ejected: Rc::clone(&ejected),
                    },
                    events.clone(),
                );
                entry.hosts.insert(
                    addr,
                    HostTask {
                        gen: self.gen,
                        check: check.clone(),
                        failed_by_response,
                        ejected,
                        _task: task,
                    },
                );
            }
            // New tasks, and old ones whose cluster's outlier settings may
            // have changed, follow the ejected set.
            entry.mark_ejected(&self.ejected);
        }
    }

    /// A task's report: whether the verdicts changed (a snapshot is due).
    pub fn on_report(&mut self, r: Report) -> bool {
        let Some(c) = self.clusters.get_mut(&*r.cluster) else {
            return false;
        };
        // A report made before the task saw a proxied response's failure
        // must not undo it.
        if c.hosts
            .get(&r.address)
            .is_none_or(|t| t.gen != r.gen || t.failed_by_response.get())
        {
            return false;
        }
        let v = self.verdicts.entry(r.cluster.to_string()).or_default();
        if v.hosts.get(&r.address) == Some(&r.verdict) {
            return false;
        }
        v.hosts.insert(r.address, r.verdict);
        v.version += 1;
        c.changes += 1;
        true
    }

    /// Per cluster, for the admin server.
    pub fn counts(&self) -> BTreeMap<String, Counts> {
        self.clusters
            .iter()
            .map(|(name, c)| {
                let verdicts = self.verdicts.get(name);
                let count = |f: fn(&Verdict) -> bool| {
                    verdicts.map_or(0, |v| v.hosts.values().filter(|v| f(v)).count() as u64)
                };
                let (healthy, degraded) = (count(|v| v.healthy), count(|v| v.degraded));
                (
                    name.clone(),
                    Counts {
                        checks: Arc::clone(&c.counters),
                        hosts: c.hosts.len() as u64,
                        healthy,
                        degraded,
                        changes: c.changes,
                    },
                )
            })
            .collect()
    }
}

/// Whether a passing check ends an ejection in this cluster.
fn unejects_on_check(c: &ClusterSnapshot) -> bool {
    c.config
        .outlier_detection
        .as_ref()
        .is_some_and(|o| o.uneject_on_active_check && o.has_detector())
}

/// `rq_immediate_hc_fail` of host `id`, summed over the shards.
fn immediate_fails(shards: &[Arc<ShardStats>], id: HostId) -> u64 {
    shards
        .iter()
        .filter_map(|s| s.hosts.get(id))
        .map(|h| h.rq_immediate_hc_fail.get())
        .sum()
}

/// The next of a sequence of per-task seeds (an LCG step).
fn next_seed(seed: u64) -> u64 {
    seed.wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407)
}

/// The TLS a cluster's checks go over: the cluster's, offering in ALPN
/// the check's `tls_options.alpn_protocols`, else the context's own
/// `alpn_protocols`, else nothing, as Envoy's checks do (never the
/// protocols filled in for the pools: an HTTP/1.1 check on an HTTP/2
/// cluster would get `h2` chosen and fail).
fn check_tls(c: &Cluster, hc: &HealthCheck) -> Option<Arc<UpstreamTls>> {
    c.upstream.tls.as_ref().map(|t| {
        let alpn = if hc.tls_alpn.is_empty() {
            &t.check_alpn
        } else {
            &hc.tls_alpn
        };
        t.with_alpn(alpn)
    })
}

/// Where, as whom and over what a host is checked.
fn target_of(
    c: &Cluster,
    hc: &HealthCheck,
    tls: Option<Arc<UpstreamTls>>,
    address: SocketAddr,
    check: &EndpointCheck,
) -> probe::Target {
    let configured = match &hc.checker {
        engine::Checker::Http(h) => h.host.as_str(),
        engine::Checker::Grpc(g) => g.authority.as_str(),
        engine::Checker::Tcp(_) => "",
    };
    let authority = [check.hostname.as_str(), configured, c.name.as_str()]
        .into_iter()
        .find(|s| !s.is_empty())
        .unwrap_or_default()
        .to_owned();
    let (fields, grpc_body) = probe::Target::request_parts(hc);
    let http1_head = probe::Target::http1_head(hc, &authority, &fields);
    probe::Target {
        address: check.target(address),
        authority,
        connect_timeout: c.connect_timeout,
        tls,
        proxy_protocol: c.upstream.proxy_protocol.clone(),
        fields,
        grpc_body,
        http1_head,
    }
}

/// What one host's task starts from.
struct HostSpawn<'a> {
    address: SocketAddr,
    check: &'a EndpointCheck,
    state: HostHealth,
    gen: u64,
    seed: u64,
    failed_by_response: Rc<Cell<bool>>,
    ejected: Rc<Cell<bool>>,
}

fn spawn_host(
    c: &ClusterCheckers,
    cluster: &Cluster,
    spawn: HostSpawn<'_>,
    events: Weak<LocalSender<Event>>,
) -> glommio::Task<()> {
    let HostSpawn {
        address,
        check,
        mut state,
        gen,
        mut seed,
        failed_by_response,
        ejected,
    } = spawn;
    let hc = Arc::clone(&c.config);
    let target = target_of(cluster, &hc, c.tls.clone(), address, check);
    let (name, counters, traffic) = (
        Rc::clone(&c.name),
        Arc::clone(&c.counters),
        Rc::clone(&c.traffic),
    );
    glommio::spawn_local(async move {
        let mut rng = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut wait = if state.is_first() {
            HostHealth::initial_delay(&hc, &mut rng)
        } else {
            let passed = state.verdict().healthy;
            HostHealth::next_interval(&hc, passed, Transition::Unchanged, traffic.used(), &mut rng)
        };
        let mut conn = None;
        // One timer for the task's life: the wait for the next check, then
        // that check's timeout (two timers made and dropped per check were
        // a measurable part of checking 10,000 hosts).
        let mut timer = glommio::timer::Timer::new(wait);
        loop {
            timer.reset(wait);
            (&mut timer).await;
            // A proxied response failed the host (the control shard
            // published it and drops this task's reports until now): the
            // task's own state follows, and says so if it changed.
            let forced = failed_by_response.take()
                && state.on_outcome(Outcome::ImmediateFail, &hc) == Transition::Changed;
            counters.attempt.inc();
            let first = state.is_first();
            let (outcome, why) = probe::check(&hc, &target, &mut conn, &mut timer).await;
            let passed = matches!(outcome, Outcome::Passed { .. });
            if passed {
                counters.success.inc();
            } else {
                // As Envoy: `failure` counts every failure.
                counters.failure.inc();
                if outcome == Outcome::Network {
                    counters.network_failure.inc();
                }
            }
            let transition = state.on_outcome(outcome, &hc);
            log_result(&name, address, &hc, outcome, transition, &why);
            // Envoy un-ejects on a pass that leaves the host passing, not
            // on one still short of `healthy_threshold`. Said once: the
            // control shard sets the flag again if the host stays ejected.
            let passed_while_ejected = passed && state.verdict().healthy && ejected.take();
            if transition == Transition::Changed || first || forced || passed_while_ejected {
                let Some(events) = events.upgrade() else {
                    return;
                };
                let report = Report {
                    cluster: Rc::clone(&name),
                    address,
                    gen,
                    verdict: state.verdict(),
                    passed_while_ejected,
                };
                if events.send(Event::Health(report)).await.is_err() {
                    return;
                }
            }
            wait = HostHealth::next_interval(&hc, passed, transition, traffic.used(), &mut rng);
        }
    })
}

/// Logs as Envoy's event log would: a host going unhealthy or healthy,
/// and every failure or success when asked to.
fn log_result(
    cluster: &str,
    address: SocketAddr,
    hc: &HealthCheck,
    outcome: Outcome,
    transition: Transition,
    why: &str,
) {
    let passed = matches!(outcome, Outcome::Passed { .. });
    let kind = hc.checker.kind();
    match (passed, transition) {
        (false, Transition::Changed) => {
            tracing::warn!(cluster, host = %address, "{kind} health check failed, host unhealthy: {why}")
        }
        (true, Transition::Changed) => {
            tracing::info!(cluster, host = %address, "{kind} health check passed, host healthy")
        }
        (false, _) if hc.always_log_failures => {
            tracing::warn!(cluster, host = %address, "{kind} health check failed: {why}")
        }
        (true, _) if hc.always_log_success => {
            tracing::info!(cluster, host = %address, "{kind} health check passed")
        }
        _ => {}
    }
}
