//! Immutable config snapshots, built on the control shard and shared with
//! every data shard as an `Arc`.
//!
//! A data shard swaps one pointer to adopt a new snapshot; each stream keeps
//! a borrow of the snapshot it started with, so an update never changes a
//! request mid-flight. Unchanged clusters are shared between versions
//! (`Arc<ClusterSnapshot>`), which keeps a rebuild proportional to what
//! changed.

use std::net::SocketAddr;
use std::sync::Arc;

use ahash::AHashMap;

use crate::active_health::{combined_status, ActiveCheck, ActiveHealth, ClusterVerdicts};
use crate::config::LbPolicy;
use crate::config::Listener;
use crate::config::{Bootstrap, Cluster, HealthStatus, Node, Runtime};
use crate::host::{HostId, HostRegistry};
use crate::lb::hash::{HashTable, PrebuiltTable};

/// One host of a cluster as the data path sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    pub id: HostId,
    pub address: SocketAddr,
    pub weight: u32,
    /// What the policies go by: the endpoint's own status combined with
    /// active checking's verdict.
    pub health: HealthStatus,
    /// The endpoint's own status (the config's or EDS's), for `/clusters`.
    pub eds_health: HealthStatus,
    /// Active checking's part, for `/clusters`.
    pub active: ActiveCheck,
    /// Its endpoint's priority and locality.
    pub placement: crate::config::Placement,
    /// Gone from its EDS or DNS cluster but kept while its checks pass
    /// (Envoy's `PENDING_DYNAMIC_REMOVAL`); it serves as before.
    pub pending_removal: bool,
    /// Its endpoint's `hostname` (a DNS cluster's: the name it was found
    /// by), for `auto_host_rewrite`.
    pub hostname: Option<Box<str>>,
}

impl Host {
    /// Left out of balancing altogether (its priority's health, panic
    /// mode, the tables): `DRAINING`, or failed through
    /// `x-envoy-immediate-health-check-fail` and not passed since.
    pub fn excluded(&self) -> bool {
        self.health == HealthStatus::Draining || self.active.excluded()
    }
}

/// A cluster with its hosts and the address → host map.
#[derive(Debug)]
pub struct ClusterSnapshot {
    /// Unique to this build (never 0): what shard-local balancers compare
    /// to know they were built for this snapshot. Not its address: a new
    /// snapshot may be allocated where a dropped one was, with the same
    /// config and host count and only a health verdict changed.
    pub generation: u64,
    pub config: Arc<Cluster>,
    pub hosts: Vec<Host>,
    /// Indexes into `hosts` of the hosts a policy may pick.
    pub routable: Vec<u32>,
    /// Whether routable hosts have unequal weights (weighted round robin).
    pub weighted: bool,
    /// Address → index into `hosts`; read lock-free by every shard
    /// (override-host lookups are O(1)).
    pub host_map: AHashMap<SocketAddr, u32>,
    /// The `ClusterVerdicts::version` its hosts' health was built from
    /// (0: the cluster is not actively checked).
    pub checks_version: u64,
    /// `RING_HASH` / `MAGLEV`: each priority's table over its healthy
    /// hosts, built here (on the control shard) so that data shards do not
    /// stall building it; a shard whose candidates differ (ejections,
    /// panic) builds its own.
    pub hash_tables: Vec<PrebuiltTable>,
}

impl ClusterSnapshot {
    /// A cluster whose hosts show their EDS status (active checking's
    /// verdicts, if any, are left out).
    pub fn build(config: Arc<Cluster>, registry: &mut HostRegistry) -> Self {
        Self::build_checked(config, registry, None)
    }

    /// A cluster whose hosts show their EDS status combined with what
    /// active health checking found (`checks`; a checked host with no
    /// verdict yet is unhealthy, as in Envoy).
    pub fn build_checked(
        config: Arc<Cluster>,
        registry: &mut HostRegistry,
        checks: Option<&ClusterVerdicts>,
    ) -> Self {
        Self::build_keeping(config, registry, checks, Vec::new())
    }

    /// [`ClusterSnapshot::build_checked`] keeping `leaving`, hosts of the
    /// previous snapshot gone from the config, after the config's own (as
    /// `pending_removal`, their ids kept).
    fn build_keeping(
        config: Arc<Cluster>,
        registry: &mut HostRegistry,
        checks: Option<&ClusterVerdicts>,
        leaving: Vec<Host>,
    ) -> Self {
        let checked = config.health_check.is_some();
        let ids = registry.assign_cluster(
            &config.name,
            config
                .endpoints
                .iter()
                .map(|e| e.address)
                .chain(leaving.iter().map(|h| h.address)),
        );
        let mut ids = ids.into_iter();
        let mut hosts = Vec::with_capacity(config.endpoints.len());
        let mut host_map = AHashMap::with_capacity(config.endpoints.len());
        for (ep, id) in config.endpoints.iter().zip(ids.by_ref()) {
            if host_map.contains_key(&ep.address) {
                // Duplicate endpoints are rejected by validation; keep the first.
                continue;
            }
            host_map.insert(ep.address, hosts.len() as u32);
            let (health, active) = if checked && !ep.check.disabled {
                let verdict = checks.and_then(|c| c.hosts.get(&ep.address)).copied();
                (
                    combined_status(ep.health, verdict),
                    match verdict {
                        Some(v) => ActiveCheck::Done(v),
                        None if config.common_lb.ignore_new_hosts_until_first_hc => {
                            ActiveCheck::PendingExcluded
                        }
                        None => ActiveCheck::Pending,
                    },
                )
            } else {
                (ep.health, ActiveCheck::Off)
            };
            hosts.push(Host {
                id,
                address: ep.address,
                weight: ep.weight.max(1),
                health,
                eds_health: ep.health,
                active,
                placement: ep.placement,
                pending_removal: false,
                hostname: (!ep.hostname.is_empty()).then(|| ep.hostname.as_str().into()),
            });
        }
        for (host, id) in leaving.into_iter().zip(ids) {
            let Some(verdict) = checks.and_then(|c| c.hosts.get(&host.address)).copied() else {
                continue;
            };
            if host_map.contains_key(&host.address) {
                continue;
            }
            host_map.insert(host.address, hosts.len() as u32);
            hosts.push(Host {
                id,
                health: combined_status(host.eds_health, Some(verdict)),
                active: ActiveCheck::Done(verdict),
                pending_removal: true,
                ..host
            });
        }
        let routable = hosts
            .iter()
            .enumerate()
            .filter(|(_, h)| h.health.is_routable())
            .map(|(i, _)| i as u32)
            .collect::<Vec<u32>>();
        let weighted = routable
            .windows(2)
            .any(|w| hosts[w[0] as usize].weight != hosts[w[1] as usize].weight);
        let hash_tables = prebuilt_tables(&config, &hosts);
        static GENERATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Self {
            generation: GENERATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            config,
            hosts,
            routable,
            weighted,
            host_map,
            hash_tables,
            checks_version: if checked {
                checks.map_or(0, |c| c.version)
            } else {
                0
            },
        }
    }

    pub fn host_by_addr(&self, addr: &SocketAddr) -> Option<&Host> {
        self.host_map.get(addr).map(|i| &self.hosts[*i as usize])
    }

    /// Whether a checked host has had no check judged yet (a new cluster
    /// with one warms until none has).
    pub fn first_checks_pending(&self) -> bool {
        self.hosts.iter().any(|h| h.active.pending())
    }
}

/// The hash tables of a `RING_HASH` / `MAGLEV` cluster, one per priority,
/// over the hosts a data shard takes as candidates when nothing is ejected
/// and no priority is in panic: routable, not draining, in host order.
fn prebuilt_tables(config: &Cluster, hosts: &[Host]) -> Vec<PrebuiltTable> {
    if !matches!(
        config.lb_policy,
        LbPolicy::RingHash(_) | LbPolicy::Maglev(_)
    ) {
        return Vec::new();
    }
    let mut priorities: Vec<u32> = hosts.iter().map(|h| h.placement.priority).collect();
    priorities.sort_unstable();
    priorities.dedup();
    priorities
        .into_iter()
        .filter_map(|priority| {
            let candidates: Vec<u32> = hosts
                .iter()
                .enumerate()
                .filter(|(_, h)| {
                    h.placement.priority == priority && !h.excluded() && h.health.is_routable()
                })
                .map(|(i, _)| i as u32)
                .collect();
            // One host or none: shards pick without a table.
            if candidates.len() < 2 {
                return None;
            }
            let table = HashTable::build(config.lb_policy, hosts, &candidates)?;
            Some(PrebuiltTable {
                priority,
                candidates,
                table: Arc::new(table),
            })
        })
        .collect()
}

/// Everything a data shard needs to serve, at one config version.
#[derive(Debug)]
pub struct Snapshot {
    pub version: u64,
    pub listeners: Vec<Arc<Listener>>,
    pub clusters: AHashMap<String, Arc<ClusterSnapshot>>,
    /// Clusters *warming*, as Envoy's: added with an active health check
    /// whose first round has not judged every checked host yet. Not
    /// routable (a route to one answers as to an unknown cluster) until a
    /// snapshot built after that round moves them to `clusters`; only the
    /// health checkers look at them.
    pub warming: AHashMap<String, Arc<ClusterSnapshot>>,
    /// Length shard-local per-host vectors must have for this snapshot.
    pub host_capacity: usize,
    /// The bootstrap's runtime keys (per-listener connection limits).
    pub runtime: Runtime,
    /// The bootstrap's `node` (what `add_user_agent` writes).
    pub node: Node,
    /// The bootstrap's `overload_manager`.
    pub overload: Option<Arc<crate::overload::OverloadConfig>>,
}

impl Snapshot {
    /// Builds version `version` from a bootstrap, reusing the cluster
    /// snapshots of `previous` whose config did not change.
    pub fn build(
        version: u64,
        bootstrap: &Bootstrap,
        previous: Option<&Snapshot>,
        registry: &mut HostRegistry,
    ) -> Self {
        Self::build_checked(
            version,
            bootstrap,
            previous,
            registry,
            &ActiveHealth::default(),
        )
    }

    /// [`Snapshot::build`] with active health checking's verdicts: a
    /// cluster is also rebuilt when its verdicts changed.
    pub fn build_checked(
        version: u64,
        bootstrap: &Bootstrap,
        previous: Option<&Snapshot>,
        registry: &mut HostRegistry,
        health: &ActiveHealth,
    ) -> Self {
        registry.begin();
        let mut clusters = AHashMap::with_capacity(bootstrap.clusters.len());
        let mut warming = AHashMap::new();
        for c in &bootstrap.clusters {
            let checks = c.health_check.as_ref().and_then(|_| health.get(&c.name));
            let checks_version = checks.map_or(0, |v| v.version);
            let serving = previous.is_some_and(|p| p.clusters.contains_key(&c.name));
            let reused = previous
                .and_then(|p| p.any_cluster(&c.name))
                .filter(|old| old.checks_version == checks_version)
                .filter(|old| Arc::ptr_eq(&old.config, c) || cluster_eq(&old.config, c));
            let snap = match reused {
                Some(old) => {
                    registry.keep_cluster(&c.name);
                    Arc::clone(old)
                }
                None => Arc::new(ClusterSnapshot::build_keeping(
                    Arc::clone(c),
                    registry,
                    checks,
                    leaving(c, previous.and_then(|p| p.any_cluster(&c.name)), checks),
                )),
            };
            if !serving && snap.first_checks_pending() {
                warming.insert(c.name.clone(), snap);
            } else {
                clusters.insert(c.name.clone(), snap);
            }
        }
        registry.finish();
        Self {
            version,
            listeners: bootstrap.listeners.clone(),
            clusters,
            warming,
            host_capacity: registry.capacity(),
            runtime: bootstrap.runtime.clone(),
            node: bootstrap.node.clone(),
            overload: bootstrap.overload.clone(),
        }
    }

    pub fn cluster(&self, name: &str) -> Option<&ClusterSnapshot> {
        self.clusters.get(name).map(|c| &**c)
    }

    /// Every cluster of the config: those serving, then those warming.
    pub fn all_clusters(&self) -> impl Iterator<Item = (&String, &Arc<ClusterSnapshot>)> {
        self.clusters.iter().chain(self.warming.iter())
    }

    /// A cluster of the config, serving or warming.
    pub fn any_cluster(&self, name: &str) -> Option<&Arc<ClusterSnapshot>> {
        self.clusters.get(name).or_else(|| self.warming.get(name))
    }

    pub fn listener(&self, name: &str) -> Option<&Arc<Listener>> {
        self.listeners.iter().find(|l| l.name == name)
    }
}

/// The hosts of `old` that left `c`'s endpoints but stay, as Envoy keeps
/// them (`PENDING_DYNAMIC_REMOVAL`): in an EDS or DNS cluster with a check
/// and without `ignore_health_on_host_removal`, a checked host whose
/// checks pass. One that fails a check is let go at the next build.
fn leaving(
    c: &Cluster,
    old: Option<&Arc<ClusterSnapshot>>,
    checks: Option<&ClusterVerdicts>,
) -> Vec<Host> {
    let (Some(old), Some(hc), Some(checks)) = (old, &c.health_check, checks) else {
        return Vec::new();
    };
    // Envoy's dynamic host lists: EDS and STRICT_DNS (a LOGICAL_DNS
    // cluster's one host is replaced, not removed).
    let dynamic = c.eds.is_some()
        || c.dns
            .as_ref()
            .is_some_and(|d| d.kind == crate::config::DnsKind::Strict);
    if hc.ignore_health_on_host_removal || !dynamic {
        return Vec::new();
    }
    if old.hosts.len() <= c.endpoints.len()
        && old
            .hosts
            .iter()
            .zip(&c.endpoints)
            .all(|(h, e)| h.address == e.address)
    {
        // The usual update: nothing left (hosts in config order, first).
        return Vec::new();
    }
    let present: ahash::AHashSet<SocketAddr> = c.endpoints.iter().map(|e| e.address).collect();
    old.hosts
        .iter()
        .filter(|h| !present.contains(&h.address))
        .filter(|h| matches!(h.active, ActiveCheck::Done(_)))
        .filter(|h| checks.hosts.get(&h.address).is_some_and(|v| v.healthy))
        .cloned()
        .collect()
}

fn cluster_eq(a: &Cluster, b: &Cluster) -> bool {
    a.name == b.name
        && a.same_connections(b)
        && a.lb_policy == b.lb_policy
        && a.endpoints == b.endpoints
        && a.eds == b.eds
        && a.dns == b.dns
        && a.outlier_detection == b.outlier_detection
        && a.common_lb == b.common_lb
        && a.health_check == b.health_check
        && a.circuit_breakers == b.circuit_breakers
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::*;
    use std::time::Duration;

    fn cluster(name: &str, ports: &[u16]) -> Arc<Cluster> {
        Arc::new(Cluster {
            name: name.into(),
            connect_timeout: Duration::from_secs(1),
            lb_policy: LbPolicy::RoundRobin,
            endpoints: ports
                .iter()
                .map(|p| Endpoint {
                    address: SocketAddr::from(([127, 0, 0, 1], *p)),
                    weight: 1,
                    health: HealthStatus::Unknown,
                    hostname: String::new(),
                    check: Default::default(),
                    placement: Default::default(),
                })
                .collect(),
            eds: None,
            dns: None,
            http2: UpstreamHttp2::default(),
            upstream: Default::default(),
            outlier_detection: None,
            common_lb: Default::default(),
            per_connection_buffer_limit_bytes: DEFAULT_PER_CONNECTION_BUFFER_LIMIT,
            health_check: None,
            circuit_breakers: Default::default(),
            per_endpoint_stats: false,
        })
    }

    fn boot(clusters: Vec<Arc<Cluster>>) -> Bootstrap {
        Bootstrap {
            node: Node::default(),
            admin: None,
            listeners: vec![],
            clusters,
            dynamic: None,
            runtime: Runtime::default(),
            overload: None,
            secrets: Default::default(),
        }
    }

    #[test]
    fn unchanged_clusters_are_shared_and_hosts_keep_ids() {
        let mut reg = HostRegistry::new();
        let s1 = Snapshot::build(
            1,
            &boot(vec![cluster("a", &[1, 2]), cluster("b", &[3])]),
            None,
            &mut reg,
        );
        let s2 = Snapshot::build(
            2,
            &boot(vec![cluster("a", &[1, 2]), cluster("b", &[3, 4])]),
            Some(&s1),
            &mut reg,
        );
        assert!(Arc::ptr_eq(&s1.clusters["a"], &s2.clusters["a"]));
        assert!(!Arc::ptr_eq(&s1.clusters["b"], &s2.clusters["b"]));
        let id3 = |s: &Snapshot| s.cluster("b").unwrap().hosts[0].id;
        assert_eq!(id3(&s1), id3(&s2));
        assert_eq!(s2.host_capacity, 4);
        let a = s2.cluster("a").unwrap();
        let addr = SocketAddr::from(([127, 0, 0, 1], 2));
        assert_eq!(a.host_by_addr(&addr).unwrap().address, addr);
    }

    #[test]
    fn draining_hosts_stay_in_map_but_are_not_routable() {
        let mut reg = HostRegistry::new();
        let mut c = (*cluster("a", &[1, 2])).clone();
        c.endpoints[0].health = HealthStatus::Draining;
        let s = Snapshot::build(1, &boot(vec![Arc::new(c)]), None, &mut reg);
        let a = s.cluster("a").unwrap();
        assert_eq!(a.hosts.len(), 2);
        assert_eq!(a.routable, vec![1]);
    }

    #[test]
    fn a_new_checked_cluster_warms_until_each_host_was_judged() {
        use crate::active_health::{ActiveHealth, ClusterVerdicts, Verdict};
        let mut reg = HostRegistry::new();
        let mut c = (*cluster("a", &[1, 2])).clone();
        c.health_check = Some(Arc::new(crate::active_health::tests::hc()));
        let c = Arc::new(c);
        let judged = |ports: &[u16], version| {
            let hosts = ports
                .iter()
                .map(|p| {
                    let v = Verdict {
                        healthy: true,
                        degraded: false,
                        excluded: false,
                    };
                    (SocketAddr::from(([127, 0, 0, 1], *p)), v)
                })
                .collect();
            ActiveHealth::from_iter([("a".to_string(), ClusterVerdicts { version, hosts })])
        };
        let build = |version, clusters: Vec<Arc<Cluster>>, prev, reg: &mut _, h: &_| {
            Snapshot::build_checked(version, &boot(clusters), prev, reg, h)
        };
        // One host judged of two: warming, not routable; ids assigned.
        let s1 = build(1, vec![Arc::clone(&c)], None, &mut reg, &judged(&[1], 1));
        assert!(s1.cluster("a").is_none());
        assert_eq!(s1.all_clusters().count(), 1);
        assert_eq!(s1.any_cluster("a").unwrap().hosts.len(), 2);
        assert_eq!(s1.host_capacity, 2);
        // Both: serving.
        let s2 = build(
            2,
            vec![Arc::clone(&c)],
            Some(&s1),
            &mut reg,
            &judged(&[1, 2], 2),
        );
        assert!(s2.warming.is_empty() && s2.cluster("a").is_some());
        let id = |s: &Snapshot| s.any_cluster("a").unwrap().hosts[1].id;
        assert_eq!(id(&s1), id(&s2));
        // A host added to a serving cluster does not make it warm again
        // (it is unhealthy until its first check passes, as in Envoy).
        let mut grown = (*c).clone();
        grown
            .endpoints
            .push(cluster("x", &[3]).endpoints[0].clone());
        let s3 = build(
            3,
            vec![Arc::new(grown)],
            Some(&s2),
            &mut reg,
            &judged(&[1, 2], 2),
        );
        assert!(s3.warming.is_empty());
        assert!(!s3.cluster("a").unwrap().hosts[2].health.is_routable());
        // Unchecked clusters never warm; gone, a cluster warms again.
        let s4 = build(
            4,
            vec![cluster("b", &[4])],
            Some(&s3),
            &mut reg,
            &ActiveHealth::default(),
        );
        assert!(s4.warming.is_empty() && s4.cluster("b").is_some());
        let s5 = build(
            5,
            vec![Arc::clone(&c)],
            Some(&s4),
            &mut reg,
            &ActiveHealth::default(),
        );
        assert!(s5.cluster("a").is_none() && s5.warming.contains_key("a"));
    }

    #[test]
    fn hosts_leaving_eds_while_passing_stay_until_a_check_fails() {
        use crate::active_health::{ActiveHealth, ClusterVerdicts, Verdict};
        let checked = |ports: &[u16], ignore: bool, eds: bool| {
            let mut c = (*cluster("a", ports)).clone();
            let mut hc = crate::active_health::tests::hc();
            hc.ignore_health_on_host_removal = ignore;
            c.health_check = Some(Arc::new(hc));
            c.eds = eds.then(|| Eds {
                service_name: "a".into(),
                initial_fetch_timeout: None,
            });
            Arc::new(c)
        };
        let verdicts = |healthy: &[(u16, bool)], version| {
            let hosts = healthy
                .iter()
                .map(|&(p, healthy)| {
                    let v = Verdict {
                        healthy,
                        degraded: false,
                        excluded: false,
                    };
                    (SocketAddr::from(([127, 0, 0, 1], p)), v)
                })
                .collect();
            ActiveHealth::from_iter([("a".to_string(), ClusterVerdicts { version, hosts })])
        };
        let ports = |s: &Snapshot| -> Vec<(u16, bool)> {
            let c = s.cluster("a").unwrap();
            c.hosts
                .iter()
                .map(|h| (h.address.port(), h.pending_removal))
                .collect()
        };
        for (ignore, eds, kept) in [
            (false, true, true),
            (true, true, false),
            (false, false, false),
        ] {
            let mut reg = HostRegistry::new();
            let both = verdicts(&[(1, true), (2, true)], 1);
            let b = |c| boot(vec![c]);
            let s1 = Snapshot::build_checked(
                1,
                &b(checked(&[1, 2], ignore, eds)),
                None,
                &mut reg,
                &both,
            );
            let id2 = s1.cluster("a").unwrap().hosts[1].id;
            // Host 2 leaves the assignment while passing.
            let s2 = Snapshot::build_checked(
                2,
                &b(checked(&[1], ignore, eds)),
                Some(&s1),
                &mut reg,
                &both,
            );
            if !kept {
                assert_eq!(ports(&s2), [(1, false)], "ignore {ignore}, eds {eds}");
                continue;
            }
            assert_eq!(ports(&s2), [(1, false), (2, true)]);
            let c2 = s2.cluster("a").unwrap();
            assert_eq!(c2.hosts[1].id, id2);
            assert_eq!(c2.routable, [0, 1], "it serves as before");
            assert_eq!(
                c2.hosts[1]
                    .active
                    .envoy_flags(c2.hosts[1].eds_health, false, true),
                "/pending_dynamic_removal"
            );
            // Its check fails: it goes.
            let failed = verdicts(&[(1, true), (2, false)], 2);
            let s3 = Snapshot::build_checked(
                3,
                &b(checked(&[1], ignore, eds)),
                Some(&s2),
                &mut reg,
                &failed,
            );
            assert_eq!(ports(&s3), [(1, false)]);
        }
    }
}
