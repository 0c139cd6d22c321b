//! Warming and composition: which version of each listener and cluster the
//! data shards get.
//!
//! A cluster is *warm* once its endpoints arrived (EDS) or its initial
//! fetch timed out; a listener once its route table arrived (RDS) or timed
//! out, and every CDS cluster its routes name is warm. Either waits too
//! for the SDS secrets its TLS contexts name. Until then the
//! previous version keeps serving, or the resource is left out if new.
//! Outputs are cached by the `Arc`s they were built from, so an unchanged
//! resource keeps its `Arc` and the snapshot build reuses it in O(1).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use engine::tls::Reloadable;
use engine::{Bootstrap, Cluster, ClusterTarget, Dns, Listener, LoadAssignment, RouteConfig};

use super::resources::ResourceType;

/// What composing reads from the client: the bootstrap's own resources,
/// every held dynamic one, and the names whose initial fetch timed out.
pub(super) struct Held<'a> {
    pub(super) statics: &'a Bootstrap,
    pub(super) listeners: &'a BTreeMap<String, Arc<Listener>>,
    pub(super) clusters: &'a BTreeMap<String, Arc<Cluster>>,
    pub(super) routes: &'a BTreeMap<String, Arc<RouteConfig>>,
    pub(super) endpoints: &'a BTreeMap<String, Arc<LoadAssignment>>,
    /// What each DNS cluster's names last resolved to, under which config.
    pub(super) resolved: &'a BTreeMap<String, Resolved>,
    pub(super) timed_out: &'a HashSet<(ResourceType, String)>,
}

/// A DNS cluster's hosts as its last lookup found them.
#[derive(Debug, Clone)]
pub(super) struct Resolved {
    /// The DNS config looked up (a later config waits for its own).
    pub(super) dns: Arc<Dns>,
    /// The hosts found; its factor is not used (the cluster's config has
    /// the current one).
    pub(super) endpoints: Arc<LoadAssignment>,
}

impl Held<'_> {
    fn is_timed_out(&self, kind: ResourceType, name: &str) -> bool {
        self.timed_out.contains(&(kind, name.to_owned()))
    }

    /// The endpoints `c` is served with: its own (`Some(None)`), EDS's
    /// assignment or its DNS names' addresses; `None` while it is not warm
    /// (no assignment and no timeout yet; no lookup of its names yet, as
    /// Envoy's DNS clusters wait for their first resolution).
    fn endpoints_of(&self, c: &Cluster) -> Option<Option<Arc<LoadAssignment>>> {
        if let Some(eds) = &c.eds {
            return match self.endpoints.get(&eds.service_name) {
                Some(e) => Some(Some(Arc::clone(e))),
                None if self.is_timed_out(ResourceType::Endpoint, &eds.service_name) => {
                    Some(Some(Arc::new(LoadAssignment {
                        endpoints: Vec::new(),
                        overprovisioning_factor: c.common_lb.overprovisioning_factor,
                    })))
                }
                None => None,
            };
        }
        if let Some(dns) = &c.dns {
            return self
                .resolved
                .get(&c.name)
                .filter(|r| Arc::ptr_eq(&r.dns, dns) || r.dns == *dns)
                .map(|r| Some(Arc::clone(&r.endpoints)));
        }
        Some(None)
    }
}

/// The version of each listener and cluster the data shards get.
#[derive(Debug, Default)]
pub(super) struct Warm {
    clusters: BTreeMap<String, ActiveCluster>,
    listeners: BTreeMap<String, ActiveListener>,
}

#[derive(Debug)]
struct ActiveCluster {
    config: Arc<Cluster>,
    endpoints: Option<Arc<LoadAssignment>>,
    merged: Arc<Cluster>,
}

#[derive(Debug)]
struct ActiveListener {
    config: Arc<Listener>,
    /// RDS's table for each chain (`Listener::chains` order); `None`
    /// for a chain with an inline table.
    routes: Vec<Option<Arc<RouteConfig>>>,
    merged: Arc<Listener>,
}

impl Warm {
    /// The config the data shards should serve now from `held`, and the
    /// warm set that replaces this one.
    pub(super) fn compose(self, held: &Held) -> (Warm, Bootstrap) {
        let mut warm = self;
        let mut next = Warm::default();

        let all_clusters: Vec<Arc<Cluster>> = held
            .statics
            .clusters
            .iter()
            .chain(held.clusters.values())
            .cloned()
            .collect();
        let mut clusters = Vec::with_capacity(all_clusters.len());
        for c in all_clusters {
            // A TLS context waits for the SDS secrets it names.
            let tls_ready = c.upstream.tls.as_ref().is_none_or(|t| t.is_ready());
            let Some(endpoints) = held.endpoints_of(&c).filter(|_| tls_ready) else {
                // Not warm: keep serving the previous version.
                if let Some(prev) = warm.clusters.remove(&c.name) {
                    clusters.push(Arc::clone(&prev.merged));
                    next.clusters.insert(c.name.clone(), prev);
                }
                continue;
            };
            let active = match warm.clusters.remove(&c.name) {
                Some(prev)
                    if Arc::ptr_eq(&prev.config, &c) && opt_ptr_eq(&prev.endpoints, &endpoints) =>
                {
                    prev
                }
                _ => {
                    let merged = match &endpoints {
                        None => Arc::clone(&c),
                        Some(e) => {
                            let mut m = (*c).clone();
                            m.endpoints = e.endpoints.clone();
                            // EDS brings its own policy; a DNS cluster's
                            // is its config's (already in `m`, and current
                            // when only the config changed).
                            if c.eds.is_some() {
                                m.common_lb.overprovisioning_factor = e.overprovisioning_factor;
                            }
                            Arc::new(m)
                        }
                    };
                    ActiveCluster {
                        config: c,
                        endpoints,
                        merged,
                    }
                }
            };
            clusters.push(Arc::clone(&active.merged));
            next.clusters.insert(active.config.name.clone(), active);
        }

        let warm_clusters: HashSet<&str> = next.clusters.keys().map(String::as_str).collect();
        let cds: HashSet<&str> = held
            .statics
            .clusters
            .iter()
            .chain(held.clusters.values())
            .map(|c| c.name.as_str())
            .collect();
        let mut listeners = Vec::new();
        for l in held.statics.listeners.iter().chain(held.listeners.values()) {
            // Ready once every chain's RDS table came (or timed out), its
            // TLS secrets came, and the clusters its table sends to are
            // warm.
            let mut ready = true;
            let mut routes = Vec::new();
            for chain in l.chains() {
                // A TLS context waits for the SDS secrets it names.
                ready &= chain.tls.as_ref().is_none_or(|t| t.is_ready());
                let rds_table = match &chain.http.rds {
                    None => None,
                    Some(rds) => match held.routes.get(&rds.route_config_name) {
                        Some(r) => Some(Arc::clone(r)),
                        None if held.is_timed_out(ResourceType::Route, &rds.route_config_name) => {
                            Some(Arc::new(RouteConfig {
                                name: rds.route_config_name.clone(),
                                virtual_hosts: Vec::new(),
                            }))
                        }
                        None => {
                            ready = false;
                            None
                        }
                    },
                };
                let table = rds_table.as_deref().unwrap_or(&chain.http.route_config);
                ready &= referenced_clusters(table)
                    .all(|c| !cds.contains(c) || warm_clusters.contains(c));
                routes.push(rds_table);
            }
            let prev = warm.listeners.remove(&l.name);
            let active = match prev {
                Some(prev) if !ready => prev,
                None if !ready => continue,
                Some(prev)
                    // Both route lists come from this listener's chains.
                    if Arc::ptr_eq(&prev.config, l)
                        && prev
                            .routes
                            .iter()
                            .zip(&routes)
                            .all(|(a, b)| opt_ptr_eq(a, b)) =>
                {
                    prev
                }
                _ => {
                    let merged = if routes.iter().all(Option::is_none) {
                        Arc::clone(l)
                    } else {
                        let mut m = (**l).clone();
                        for (chain, r) in m.chains_mut().zip(&routes) {
                            if let Some(r) = r {
                                chain.http.route_config = Arc::clone(r);
                            }
                        }
                        Arc::new(m)
                    };
                    ActiveListener {
                        config: Arc::clone(l),
                        routes,
                        merged,
                    }
                }
            };
            listeners.push(Arc::clone(&active.merged));
            next.listeners.insert(l.name.clone(), active);
        }
        let bootstrap = Bootstrap {
            node: held.statics.node.clone(),
            admin: held.statics.admin,
            listeners,
            clusters,
            dynamic: held.statics.dynamic.clone(),
            runtime: held.statics.runtime.clone(),
            overload: held.statics.overload.clone(),
            secrets: Arc::clone(&held.statics.secrets),
        };
        (next, bootstrap)
    }

    /// Names of listeners and clusters in `held` that are not serving yet.
    pub(super) fn warming<'a>(&self, held: &Held<'a>) -> (Vec<&'a str>, Vec<&'a str>) {
        let l = held
            .statics
            .listeners
            .iter()
            .chain(held.listeners.values())
            .filter(|l| {
                self.listeners
                    .get(&l.name)
                    .is_none_or(|a| !Arc::ptr_eq(&a.config, l))
            })
            .map(|l| l.name.as_str())
            .collect();
        let c = held
            .statics
            .clusters
            .iter()
            .chain(held.clusters.values())
            .filter(|c| {
                self.clusters
                    .get(&c.name)
                    .is_none_or(|a| !Arc::ptr_eq(&a.config, c))
            })
            .map(|c| c.name.as_str())
            .collect();
        (l, c)
    }
}

fn opt_ptr_eq<T>(a: &Option<Arc<T>>, b: &Option<Arc<T>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        _ => false,
    }
}

/// Every cluster a route table can send to.
pub(crate) fn referenced_clusters(rc: &RouteConfig) -> impl Iterator<Item = &str> {
    rc.virtual_hosts
        .iter()
        .flat_map(|v| v.routes.iter())
        .filter_map(|r| r.action.forward())
        .flat_map(|a| match &a.target {
            ClusterTarget::Cluster(c) => vec![c.as_str()],
            ClusterTarget::Weighted(w) => w.clusters.iter().map(|(c, _)| c.as_str()).collect(),
            // Named per request: none known ahead.
            ClusterTarget::Header(_) => Vec::new(),
        })
}
