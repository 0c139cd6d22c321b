//! Stateful-session override-host lookup, read by 2 threads while a writer
//! applies EDS updates: the gateway's design against a shared
//! `RwLock<HashMap>`.
//!
//! * `snapshot` (ours): each reader thread owns an `Arc<ClusterSnapshot>`,
//!   as a data shard owns its snapshot. The writer (the control shard) builds
//!   a new `ClusterSnapshot` per update and sends an `Arc` of it to every
//!   reader over that reader's `std::sync::mpsc` channel; a reader drains its
//!   channel (`try_recv`, keeping the newest) every [`POLL_EVERY`] lookups.
//!   Each lookup is `engine::override_host::lookup`: one probe of the
//!   immutable `host_map`, the `override_host_status` check, one bit test in
//!   the reader's own `EjectedSet`. The timed loop therefore includes the
//!   channel polls, the adoption of new snapshots and, for the reader that
//!   drops the last reference, freeing the old one.
//! * `rwlock` (baseline): one `RwLock<HashMap<SocketAddr, (HealthStatus,
//!   HostId)>>` shared by both readers; `read()` per lookup, then the same
//!   two checks (status set, the reader's `EjectedSet`). The map uses the
//!   same hasher as `host_map` (ahash), so the difference is the sharing,
//!   not the hash function.
//!
//! The writer ("xDS rate"). Each update flips the health (HEALTHY <->
//! UNHEALTHY) of the next 1% of the hosts (at least one). Ours always
//! rebuilds the whole `ClusterSnapshot` off the readers' path (O(hosts))
//! and publishes it; the baseline applies it in one of two ways:
//!
//! * `2r_1pct_10ms`: an update every 10 ms (100 EDS updates a second);
//!   the baseline takes `write()` and updates those entries in place (its
//!   cheapest possible update: the lock is held for 1% of the hosts).
//! * `2r_full_100ms`: an update every 100 ms, delivered to the baseline as a
//!   full EDS replacement: the writer builds a new map outside the lock,
//!   swaps it in under `write()` and frees the old one after unlocking.
//!
//! The writer's mean wall time per update (for the baseline including the
//! wait for `write()`, for both any preemption) and mean thread CPU time per
//! update are printed to stderr when a benchmark ends.
//!
//! Other variants: `2r_idle` (2 readers, no writer: the cost of sharing
//! alone), `1r_idle` (one reader, no writer: the bare lookup). Keys:
//! per-reader pseudo-random sequences over the hosts, ~1.5% of them absent
//! from the cluster; ~1% of hosts are ejected.
//!
//! Timing (`iter_custom`): the reader threads live for the whole benchmark;
//! for each sample they start together (barrier), each times its own `iters`
//! lookups, and the reported time is the mean of the readers' elapsed times,
//! so criterion's figure is the time of one lookup on one reader while the
//! other reader (and the writer) run.
//!
//! With fewer cores than readers + writer the threads are oversubscribed and
//! the writer's CPU time (and any preemption) lands in the readers' figures.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::hint::black_box;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Barrier, RwLock};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use engine::override_host;
use engine::{
    Cluster, ClusterSnapshot, EjectedSet, Endpoint, HealthStatus, HealthStatusSet, HostId,
    HostRegistry, LbPolicy, UpstreamHttp2,
};

/// Readers drain their snapshot channel every this many lookups.
const POLL_EVERY: u64 = 64;
/// How (and how often) the writer updates; see the module docs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Writer {
    Idle,
    /// 1% of hosts every 10 ms, in place for the baseline.
    Incremental,
    /// 1% of hosts every 100 ms, a full map replacement for the baseline.
    Full,
}

impl Writer {
    fn period(self) -> Duration {
        match self {
            Writer::Idle | Writer::Incremental => Duration::from_millis(10),
            Writer::Full => Duration::from_millis(100),
        }
    }
}
/// Keys per reader (a power of two).
const KEYS: usize = 4096;

fn addr(i: usize) -> SocketAddr {
    SocketAddr::from(([10, (i >> 16) as u8, (i >> 8) as u8, i as u8], 8080))
}

/// An address no host has.
fn absent(i: usize) -> SocketAddr {
    SocketAddr::from(([10, (i >> 16) as u8, (i >> 8) as u8, i as u8], 9090))
}

fn endpoints(n: usize) -> Vec<Endpoint> {
    (0..n)
        .map(|i| Endpoint {
            address: addr(i),
            weight: 1,
            health: HealthStatus::Healthy,
            hostname: String::new(),
            check: Default::default(),
            placement: Default::default(),
        })
        .collect()
}

fn cluster(endpoints: Vec<Endpoint>) -> Arc<Cluster> {
    Arc::new(Cluster {
        name: "svc".into(),
        connect_timeout: Duration::from_secs(1),
        lb_policy: LbPolicy::RoundRobin,
        endpoints,
        eds: None,
        dns: None,
        http2: UpstreamHttp2::default(),
        upstream: Default::default(),
        outlier_detection: None,
        per_connection_buffer_limit_bytes: engine::DEFAULT_PER_CONNECTION_BUFFER_LIMIT,
        common_lb: Default::default(),
        health_check: None,
        circuit_breakers: Default::default(),
        per_endpoint_stats: false,
    })
}

fn build(endpoints: &[Endpoint], registry: &mut HostRegistry) -> ClusterSnapshot {
    registry.begin();
    let snap = ClusterSnapshot::build(cluster(endpoints.to_vec()), registry);
    registry.finish();
    snap
}

/// Flips the health of the `tick`-th window of 1% of the hosts.
fn window(n: usize, tick: usize) -> impl Iterator<Item = usize> {
    let k = n.div_ceil(100);
    (0..k).map(move |j| (tick * k + j) % n)
}

fn flip(h: HealthStatus) -> HealthStatus {
    if h == HealthStatus::Healthy {
        HealthStatus::Unhealthy
    } else {
        HealthStatus::Healthy
    }
}

/// Ejected: every 97th host.
fn ejected(snap: &ClusterSnapshot) -> EjectedSet {
    EjectedSet::new(
        1,
        snap.hosts
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 97 == 0)
            .map(|(_, h)| h.id),
    )
}

/// Reader `r`'s key sequence: uniform over the hosts plus ~1.5% absent.
fn keys(n: usize, r: usize) -> Vec<SocketAddr> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (r as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let span = n + n.div_ceil(64);
    (0..KEYS)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let i =
                ((u128::from(x.wrapping_mul(0x2545_F491_4F6C_DD1D)) * span as u128) >> 64) as usize;
            if i < n {
                addr(i)
            } else {
                absent(i)
            }
        })
        .collect()
}

/// A reader's timed body: `iters` lookups, returning the hit count.
type Body = Box<dyn FnMut(u64) -> u64 + Send>;
/// The writer's update, called every `Writer::period`.
type Update = Box<dyn FnMut() + Send>;

/// Reader threads (and an optional writer) alive for one benchmark.
struct Harness {
    label: String,
    cmds: Vec<Sender<u64>>,
    done: Receiver<Duration>,
    readers: Vec<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    writer: Option<JoinHandle<WriterStats>>,
}

#[derive(Default)]
struct WriterStats {
    updates: u32,
    wall: Duration,
    cpu: Duration,
}

/// This thread's CPU time.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; the clock id is a constant Linux knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

impl Harness {
    fn start(label: String, bodies: Vec<Body>, update: Option<(Update, Duration)>) -> Self {
        let barrier = Arc::new(Barrier::new(bodies.len()));
        let (done_tx, done) = mpsc::channel();
        let mut cmds = Vec::new();
        let readers = bodies
            .into_iter()
            .map(|mut body| {
                let (tx, rx) = mpsc::channel::<u64>();
                cmds.push(tx);
                let (barrier, done_tx) = (Arc::clone(&barrier), done_tx.clone());
                thread::spawn(move || {
                    for iters in rx {
                        barrier.wait();
                        let t = Instant::now();
                        black_box(body(iters));
                        let _ = done_tx.send(t.elapsed());
                    }
                })
            })
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let writer = update.map(|(mut update, period)| {
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                let mut stats = WriterStats::default();
                let mut next = Instant::now() + period;
                while !stop.load(Ordering::Relaxed) {
                    if let Some(wait) = next.checked_duration_since(Instant::now()) {
                        thread::sleep(wait);
                    }
                    next += period;
                    let (t, cpu) = (Instant::now(), thread_cpu());
                    update();
                    stats.wall += t.elapsed();
                    stats.cpu += thread_cpu() - cpu;
                    stats.updates += 1;
                }
                stats
            })
        });
        Self {
            label,
            cmds,
            done,
            readers,
            stop,
            writer,
        }
    }

    /// Runs `iters` lookups on every reader at once; the mean elapsed time.
    fn run(&self, iters: u64) -> Duration {
        for tx in &self.cmds {
            tx.send(iters).unwrap();
        }
        let total: Duration = self.cmds.iter().map(|_| self.done.recv().unwrap()).sum();
        total / self.cmds.len() as u32
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.cmds.clear();
        for r in self.readers.drain(..) {
            r.join().unwrap();
        }
        self.stop.store(true, Ordering::Relaxed);
        if let Some(w) = self.writer.take().map(|w| w.join().unwrap()) {
            let mean = |d: Duration| d.as_secs_f64() * 1e6 / f64::from(w.updates.max(1));
            eprintln!(
                "{}: writer applied {} updates, mean {:.1} µs wall, {:.1} µs CPU each",
                self.label,
                w.updates,
                mean(w.wall),
                mean(w.cpu),
            );
        }
    }
}

/// Ours: owned snapshots, published over per-reader channels.
fn snapshot_harness(label: String, n: usize, readers: usize, writer: Writer) -> Harness {
    let mut eps = endpoints(n);
    let mut registry = HostRegistry::new();
    let first = Arc::new(build(&eps, &mut registry));
    let ejected = ejected(&first);
    let mut txs = Vec::new();
    let bodies = (0..readers)
        .map(|r| {
            let (tx, rx) = mpsc::channel::<Arc<ClusterSnapshot>>();
            txs.push(tx);
            let mut snap = Arc::clone(&first);
            let (keys, ejected) = (keys(n, r), ejected.clone());
            Box::new(move |iters: u64| {
                let mut hits = 0u64;
                for i in 0..iters {
                    if i % POLL_EVERY == 0 {
                        while let Ok(newer) = rx.try_recv() {
                            snap = newer;
                        }
                    }
                    let key = &keys[i as usize & (KEYS - 1)];
                    hits += u64::from(override_host::lookup(&snap, key, &ejected).is_ok());
                }
                hits
            }) as Body
        })
        .collect();
    let update = (writer != Writer::Idle).then(|| {
        let mut tick = 0;
        let update = Box::new(move || {
            for i in window(n, tick) {
                eps[i].health = flip(eps[i].health);
            }
            tick += 1;
            // Only the readers keep it: the last one to move on frees it.
            let snap = Arc::new(build(&eps, &mut registry));
            for tx in &txs {
                let _ = tx.send(Arc::clone(&snap));
            }
        }) as Update;
        (update, writer.period())
    });
    Harness::start(label, bodies, update)
}

/// Baseline: one map behind a `RwLock`, shared by the readers and the writer.
fn rwlock_harness(label: String, n: usize, readers: usize, writer: Writer) -> Harness {
    let snap = build(&endpoints(n), &mut HostRegistry::new());
    // The writer's own copy (what it builds replacements from).
    let mut hosts: Vec<(SocketAddr, (HealthStatus, HostId))> = snap
        .hosts
        .iter()
        .map(|h| (h.address, (h.health, h.id)))
        .collect();
    let ejected = ejected(&snap);
    let status: HealthStatusSet = snap.config.common_lb.override_host_status;
    let hasher = snap.host_map.hasher().clone();
    let map = Arc::new(RwLock::new(baseline_map(&hosts, hasher.clone())));
    let bodies = (0..readers)
        .map(|r| {
            let map = Arc::clone(&map);
            let (keys, ejected) = (keys(n, r), ejected.clone());
            Box::new(move |iters: u64| {
                let mut hits = 0u64;
                for i in 0..iters {
                    let key = &keys[i as usize & (KEYS - 1)];
                    let found = map.read().unwrap().get(key).copied();
                    let ok = found.is_some_and(|(health, id)| {
                        status.contains(health) && !ejected.contains(id)
                    });
                    hits += u64::from(ok);
                }
                hits
            }) as Body
        })
        .collect();
    let update = (writer != Writer::Idle).then(|| {
        let mut tick = 0;
        let update = Box::new(move || {
            match writer {
                Writer::Idle => {}
                Writer::Incremental => {
                    let mut map = map.write().unwrap();
                    for i in window(n, tick) {
                        if let Some((health, _)) = map.get_mut(&addr(i)) {
                            *health = flip(*health);
                        }
                    }
                }
                Writer::Full => {
                    for i in window(n, tick) {
                        hosts[i].1 .0 = flip(hosts[i].1 .0);
                    }
                    let new = baseline_map(&hosts, hasher.clone());
                    let old = std::mem::replace(&mut *map.write().unwrap(), new);
                    drop(old);
                }
            }
            tick += 1;
        }) as Update;
        (update, writer.period())
    });
    Harness::start(label, bodies, update)
}

/// The baseline's map of `hosts`, with `hasher` (`host_map`'s: ahash).
fn baseline_map<S: BuildHasher>(
    hosts: &[(SocketAddr, (HealthStatus, HostId))],
    hasher: S,
) -> HashMap<SocketAddr, (HealthStatus, HostId), S> {
    let mut map = HashMap::with_capacity_and_hasher(hosts.len(), hasher);
    map.extend(hosts.iter().copied());
    map
}

/// Both implementations accept exactly the same keys (some, not all).
fn cross_check(n: usize) {
    let snap = build(&endpoints(n), &mut HostRegistry::new());
    let ejected = ejected(&snap);
    let status = snap.config.common_lb.override_host_status;
    let hosts: Vec<_> = snap
        .hosts
        .iter()
        .map(|h| (h.address, (h.health, h.id)))
        .collect();
    let map = baseline_map(&hosts, snap.host_map.hasher().clone());
    let keys = keys(n, 0);
    let ours: Vec<bool> = keys
        .iter()
        .map(|k| override_host::lookup(&snap, k, &ejected).is_ok())
        .collect();
    let baseline: Vec<bool> = keys
        .iter()
        .map(|k| {
            map.get(k)
                .is_some_and(|&(h, id)| status.contains(h) && !ejected.contains(id))
        })
        .collect();
    assert_eq!(ours, baseline);
    let hits = ours.iter().filter(|&&ok| ok).count();
    assert!(hits > 0 && hits < KEYS, "{hits}");
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("override_host");
    g.sample_size(50).throughput(Throughput::Elements(1));
    for n in [100usize, 10_000] {
        cross_check(n);
        for (variant, readers, writer) in [
            ("2r_1pct_10ms", 2, Writer::Incremental),
            ("2r_full_100ms", 2, Writer::Full),
            ("2r_idle", 2, Writer::Idle),
            ("1r_idle", 1, Writer::Idle),
        ] {
            type Start = fn(String, usize, usize, Writer) -> Harness;
            let impls: [(&str, Start); 2] =
                [("snapshot", snapshot_harness), ("rwlock", rwlock_harness)];
            for (name, start) in impls {
                let label = format!("{name}/{variant}");
                let harness = start(format!("override_host/{label}/{n}"), n, readers, writer);
                let id = BenchmarkId::new(label, n);
                g.bench_function(id, |b| b.iter_custom(|iters| harness.run(iters)));
            }
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
