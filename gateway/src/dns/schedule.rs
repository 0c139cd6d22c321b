//! When each name of each DNS cluster is looked up next and what its lookups found, as Envoy's DNS clusters keep it: pure, driven by the caller's clock.
//!
//! Every name (every `lb_endpoints` entry) has its own timer, as in
//! Envoy's `STRICT_DNS`: looked up at once, then every `dns_refresh_rate`
//! (or at the answer's lowest TTL with `respect_dns_ttl`); after a failure
//! at Envoy's jittered exponential backoff from `dns_failure_refresh_rate`
//! (or at the refresh rate when it is unset). A failure keeps what the name
//! resolved to before; an answer with no address (NXDOMAIN, NODATA) is a
//! success with no hosts, as Envoy takes it. A cluster's hosts are known
//! once each of its names has been looked up once, whatever came of it: a
//! DNS cluster is then warm, as Envoy's initializes.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::{Dns, DnsKind, Endpoint};

/// What looking up one name gave: its addresses in the order taken, and
/// the answer's lowest TTL (`None`: nothing to respect, e.g. an IP
/// address or `/etc/hosts`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolution {
    pub addrs: Vec<IpAddr>,
    pub ttl: Option<Duration>,
}

/// One lookup to start: cluster `cluster`'s name number `target`, under
/// its DNS config `dns`.
#[derive(Debug, Clone)]
pub struct Lookup {
    pub cluster: String,
    pub target: usize,
    pub dns: Arc<Dns>,
}

/// A cluster's lookups so far, for the admin server (Envoy's
/// `update_attempt`, `update_success`, `update_failure`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    pub attempts: u64,
    pub successes: u64,
    pub failures: u64,
    /// Hosts the cluster has now.
    pub hosts: usize,
    /// Why the latest failed lookup failed.
    pub last_error: Option<String>,
}

struct Target {
    dns: Arc<Dns>,
    next: Instant,
    in_flight: bool,
    /// The next failure backoff's ceiling; back to the base on success.
    backoff: Duration,
    /// `None` until the first lookup ends, either way.
    found: Option<Vec<IpAddr>>,
}

/// The lookups of every DNS cluster.
pub struct Schedule {
    targets: BTreeMap<(String, usize), Target>,
    counts: BTreeMap<String, Counts>,
    /// xorshift64 state for the backoff jitter.
    rng: u64,
}

fn same(a: &Arc<Dns>, b: &Arc<Dns>) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

impl Schedule {
    pub fn new(seed: u64) -> Schedule {
        Schedule {
            targets: BTreeMap::new(),
            counts: BTreeMap::new(),
            rng: seed | 1,
        }
    }

    /// Follows the DNS clusters now held: a new cluster, or one whose DNS
    /// config changed, has its names looked up at once (and what they
    /// resolved to under the old config forgotten); a cluster gone is
    /// forgotten.
    pub fn sync(&mut self, clusters: &[(String, Arc<Dns>)], now: Instant) {
        self.targets
            .retain(|(name, _), t| clusters.iter().any(|(n, d)| n == name && same(d, &t.dns)));
        self.counts
            .retain(|name, _| clusters.iter().any(|(n, _)| n == name));
        for (name, dns) in clusters {
            for i in 0..dns.targets.len() {
                self.targets
                    .entry((name.clone(), i))
                    .or_insert_with(|| Target {
                        dns: Arc::clone(dns),
                        next: now,
                        in_flight: false,
                        backoff: first_backoff(dns),
                        found: None,
                    });
            }
            self.counts.entry(name.clone()).or_default();
        }
    }

    /// The lookups due at `now`, marked in flight (none is started twice).
    pub fn due(&mut self, now: Instant) -> Vec<Lookup> {
        let mut out = Vec::new();
        for ((cluster, target), t) in &mut self.targets {
            if !t.in_flight && t.next <= now {
                t.in_flight = true;
                out.push(Lookup {
                    cluster: cluster.clone(),
                    target: *target,
                    dns: Arc::clone(&t.dns),
                });
                if let Some(c) = self.counts.get_mut(cluster) {
                    c.attempts += 1;
                }
            }
        }
        out
    }

    /// When the next lookup is due (none while every one is in flight).
    pub fn next_due(&self) -> Option<Instant> {
        self.targets
            .values()
            .filter(|t| !t.in_flight)
            .map(|t| t.next)
            .min()
    }

    /// Lookup `l` ended with `result` at `now`. The cluster's hosts when
    /// this lookup may have changed them and each of its names has been
    /// looked up; `None` otherwise (or when the lookup was for a config
    /// the cluster no longer has).
    pub fn on_result(
        &mut self,
        l: &Lookup,
        result: Result<Resolution, String>,
        now: Instant,
    ) -> Option<Vec<Endpoint>> {
        let key = (l.cluster.clone(), l.target);
        let t = self
            .targets
            .get_mut(&key)
            .filter(|t| same(&t.dns, &l.dns))?;
        t.in_flight = false;
        let counts = self.counts.entry(l.cluster.clone()).or_default();
        match result {
            Ok(r) => {
                counts.successes += 1;
                t.backoff = first_backoff(&t.dns);
                let wait = match r.ttl {
                    Some(ttl) if t.dns.respect_ttl && !ttl.is_zero() => ttl,
                    _ => t.dns.refresh_rate,
                };
                t.next = now + wait;
                t.found = Some(match t.dns.kind {
                    DnsKind::Strict => dedup(r.addrs),
                    // A logical host keeps its address when an answer has
                    // none, as Envoy's does.
                    DnsKind::Logical => match r.addrs.first() {
                        Some(a) => vec![*a],
                        None => t.found.take().unwrap_or_default(),
                    },
                });
            }
            Err(e) => {
                counts.failures += 1;
                counts.last_error = Some(e);
                let wait = match t.dns.failure_refresh {
                    None => t.dns.refresh_rate,
                    Some((_, max)) => {
                        let ceiling = t.backoff;
                        t.backoff = (t.backoff * 2).min(max);
                        jitter(&mut self.rng, ceiling)
                    }
                };
                t.next = now + wait;
                // The first failure still ends the wait for the cluster.
                t.found.get_or_insert_with(Vec::new);
            }
        }
        let endpoints = self.endpoints(&l.cluster, &l.dns)?;
        if let Some(c) = self.counts.get_mut(&l.cluster) {
            c.hosts = endpoints.len();
        }
        Some(endpoints)
    }

    /// The cluster's hosts: each name's addresses with its port, weight
    /// and health, in the names' order, an address only once; `None` while
    /// a name has not been looked up yet.
    fn endpoints(&self, cluster: &str, dns: &Dns) -> Option<Vec<Endpoint>> {
        let mut out: Vec<Endpoint> = Vec::new();
        for (i, target) in dns.targets.iter().enumerate() {
            let found = self.targets.get(&(cluster.to_owned(), i))?.found.as_ref()?;
            for ip in found {
                let address = SocketAddr::new(*ip, target.port);
                if out.iter().all(|e| e.address != address) {
                    out.push(Endpoint {
                        address,
                        weight: target.weight,
                        health: target.health,
                        // Envoy names a DNS cluster's hosts by the name
                        // they were found by.
                        hostname: if target.hostname.is_empty() {
                            target.host.clone()
                        } else {
                            target.hostname.clone()
                        },
                        check: target.check.clone(),
                        placement: target.placement,
                    });
                }
            }
        }
        Some(out)
    }

    /// Every DNS cluster's counts, by name.
    pub fn counts(&self) -> &BTreeMap<String, Counts> {
        &self.counts
    }
}

/// A name's first failure backoff ceiling: `dns_failure_refresh_rate`'s
/// base (unused without one).
fn first_backoff(dns: &Dns) -> Duration {
    dns.failure_refresh
        .map_or(dns.refresh_rate, |(base, _)| base)
}

/// A draw below `ceiling`, as Envoy's jittered exponential backoff draws
/// (at least a millisecond, so that a name failing at once is not asked
/// again in a loop).
fn jitter(state: &mut u64, ceiling: Duration) -> Duration {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    let draw = state.wrapping_mul(0x2545_F491_4F6C_DD1D);
    let ms = ceiling.as_millis().max(1) as u64;
    Duration::from_millis((draw % ms).max(1))
}

/// `addrs` without repeats, in order.
fn dedup(addrs: Vec<IpAddr>) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = Vec::with_capacity(addrs.len());
    for a in addrs {
        if !out.contains(&a) {
            out.push(a);
        }
    }
    out
}

#[cfg(test)]
mod tests;
