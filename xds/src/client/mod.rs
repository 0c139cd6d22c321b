//! The xDS client's protocol state (State of the World over ADS, and file
//! sources), free of I/O: the control shard feeds it responses and the
//! clock, and sends the requests it returns.
//!
//! ```text
//!  stream opened ──▶ on_stream_open() ──▶ requests (CDS, EDS, LDS, RDS with held versions)
//!  response      ──▶ on_response()    ──▶ ACK or NACK (+ new RDS/EDS subscriptions)
//!  file changed  ──▶ on_file()        ──▶ (subscriptions)
//!  timer         ──▶ poll(now)        ──▶ initial fetch timeouts expire
//!  any change    ──▶ compose()        ──▶ engine::Bootstrap for the next Snapshot
//! ```
//!
//! A rejected response changes nothing: resources are replaced only when
//! every one of them validates.

mod compose;
mod delta;
#[cfg(test)]
mod delta_tests;
mod resources;
mod secrets;
#[cfg(test)]
mod secrets_tests;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::{Bootstrap, Cluster, ConfigSource, Endpoint, Listener, LoadAssignment, RouteConfig};
use prost::Message;

use crate::pb::envoy::config::core::v3::Node;
use crate::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use crate::pb::google::rpc::Status;

pub use delta::DeltaOutcome;
pub use resources::{decode, Decoded, ResourceType};

/// gRPC `INVALID_ARGUMENT`, the code Envoy puts in a NACK's `error_detail`.
pub const NACK_CODE: i32 = 3;

/// What `/config_dump` and `/stats` show per resource type.
#[derive(Debug, Clone, Default)]
pub struct TypeStatus {
    /// Last accepted `version_info` (empty before the first).
    pub version: String,
    pub last_update: Option<Instant>,
    /// The last rejection, until a later response is accepted.
    pub last_error: Option<Rejection>,
    pub accepted: u64,
    pub rejected: u64,
    /// Delta xDS: removals of names that were not held (ignored).
    pub unknown_removals: u64,
}

#[derive(Debug, Clone)]
pub struct Rejection {
    /// The `version_info` that was rejected.
    pub version: String,
    pub message: String,
    pub at: Instant,
}

/// What a response or file update led to.
#[derive(Debug, Default)]
pub struct Outcome {
    /// To send on the ADS stream, in order (ACK/NACK first).
    pub requests: Vec<DiscoveryRequest>,
    /// Whether the composed config may have changed.
    pub changed: bool,
    /// Why the update was rejected, if it was.
    pub rejected: Option<String>,
    /// How many times in a row before this one the same version was
    /// rejected with the same error (a control plane that resends a bad
    /// version at once, as go-control-plane does, loops with us).
    pub repeated: u32,
    /// Hold `requests` back this long: 0, then doubling from 100 ms to 10 s
    /// while the same rejection repeats, so such a loop costs little.
    pub delay: Duration,
}

/// First and longest wait before re-sending a repeated NACK.
const NACK_DELAY_MIN: Duration = Duration::from_millis(100);
const NACK_DELAY_MAX: Duration = Duration::from_secs(10);

/// The wait before a NACK that repeats the previous one `repeated` times.
fn nack_delay(repeated: u32) -> Duration {
    match repeated {
        0 => Duration::ZERO,
        n => NACK_DELAY_MIN
            .saturating_mul(1 << (n - 1).min(16))
            .min(NACK_DELAY_MAX),
    }
}

#[derive(Debug, Default)]
struct TypeState {
    /// Last response nonce on the current stream.
    nonce: String,
    /// Subscribed names (RDS, EDS and SDS only).
    names: BTreeSet<String>,
    /// Whether a request for this type went out on the current stream.
    requested: bool,
    /// Identical rejections in a row (see `Outcome::repeated`).
    reject_streak: u32,
    status: TypeStatus,
}

/// The protocol state of one gateway's xDS client.
#[derive(Debug)]
pub struct XdsClient {
    node: Node,
    node_on_first_only: bool,
    /// The bootstrap's own listeners and clusters (never removed by xDS).
    statics: Bootstrap,
    lds: Option<ConfigSource>,
    cds: Option<ConfigSource>,
    types: [TypeState; 5],
    listeners: BTreeMap<String, Arc<Listener>>,
    clusters: BTreeMap<String, Arc<Cluster>>,
    routes: BTreeMap<String, Arc<RouteConfig>>,
    endpoints: BTreeMap<String, Arc<LoadAssignment>>,
    /// SDS secrets received over ADS, by name.
    secrets: engine::tls::SecretMap,
    /// What DNS clusters' names last resolved to, by cluster name.
    resolved: BTreeMap<String, compose::Resolved>,
    /// Initial fetch deadlines of subscribed RDS/EDS names not yet received.
    deadlines: HashMap<(ResourceType, String), Instant>,
    /// Names whose initial fetch timed out: used as empty until they arrive.
    timed_out: HashSet<(ResourceType, String)>,
    stream_open: bool,
    node_sent: bool,
    warm: compose::Warm,
    /// When the first LDS/CDS fetch over ADS stops holding readiness back.
    init_deadline: Option<Instant>,
    /// `ads_config.api_type: DELTA_GRPC`: the stream is incremental.
    delta_mode: bool,
    /// Delta xDS: each type's resources as sent, by name.
    delta: [delta::DeltaType; 5],
}

impl XdsClient {
    /// A client for `bootstrap`'s `dynamic_resources` (none: static only).
    pub fn new(bootstrap: &Bootstrap, now: Instant) -> Self {
        let dynamic = bootstrap.dynamic.clone().unwrap_or_default();
        let node = Node::decode(bootstrap.node.proto.as_slice()).unwrap_or_else(|_| Node {
            id: bootstrap.node.id.clone(),
            cluster: bootstrap.node.cluster.clone(),
            ..Node::default()
        });
        let mut c = Self {
            node,
            node_on_first_only: dynamic
                .ads
                .as_ref()
                .is_some_and(|a| a.set_node_on_first_message_only),
            statics: bootstrap.clone(),
            lds: dynamic.lds.clone(),
            cds: dynamic.cds.clone(),
            types: Default::default(),
            listeners: BTreeMap::new(),
            clusters: BTreeMap::new(),
            routes: BTreeMap::new(),
            endpoints: BTreeMap::new(),
            secrets: BTreeMap::new(),
            resolved: BTreeMap::new(),
            deadlines: HashMap::new(),
            timed_out: HashSet::new(),
            stream_open: false,
            node_sent: false,
            warm: compose::Warm::default(),
            init_deadline: None,
            delta_mode: dynamic.ads.as_ref().is_some_and(|a| a.delta),
            delta: Default::default(),
        };
        let timeouts = [&dynamic.lds, &dynamic.cds]
            .into_iter()
            .flatten()
            .filter_map(crate::validate::initial_fetch_timeout);
        c.init_deadline = timeouts.min().map(|t| now + t);
        c.resubscribe(now);
        c
    }

    /// Replaces the bootstrap's static resources (a reload that kept
    /// `dynamic_resources` as they were); returns subscription requests.
    pub fn set_statics(&mut self, bootstrap: &Bootstrap, now: Instant) -> Vec<DiscoveryRequest> {
        self.statics = bootstrap.clone();
        // Their ADS secrets, held already, are read now; the bootstrap's
        // own were read when it was loaded.
        let statics = (&bootstrap.listeners, &bootstrap.clusters);
        if let Err(e) = self.resolve_new(statics.0.iter(), statics.1.iter()) {
            tracing::warn!("static TLS contexts: {e}");
        }
        self.resubscribe(now)
    }

    /// The bootstrap this client composes on top of.
    pub fn statics(&self) -> &Bootstrap {
        &self.statics
    }

    /// The config the data shards should serve now: static resources plus
    /// every warm dynamic one (or its previous version while it warms).
    pub fn compose(&mut self) -> Bootstrap {
        let warm = std::mem::take(&mut self.warm);
        let (warm, bootstrap) = warm.compose(&self.held());
        self.warm = warm;
        bootstrap
    }

    /// Names of listeners and clusters that are held but not serving yet.
    pub fn warming(&self) -> (Vec<&str>, Vec<&str>) {
        self.warm.warming(&self.held())
    }

    /// What composing reads: statics, held resources, timed-out names.
    fn held(&self) -> compose::Held<'_> {
        compose::Held {
            statics: &self.statics,
            listeners: &self.listeners,
            clusters: &self.clusters,
            routes: &self.routes,
            endpoints: &self.endpoints,
            resolved: &self.resolved,
            timed_out: &self.timed_out,
        }
    }

    /// Every DNS cluster held (static or from CDS), with its DNS config:
    /// what the control shard looks up. What was resolved for clusters that
    /// are gone, or whose DNS config changed, is forgotten.
    pub fn dns_clusters(&mut self) -> Vec<(String, Arc<engine::Dns>)> {
        let list: Vec<(String, Arc<engine::Dns>)> = self
            .statics
            .clusters
            .iter()
            .chain(self.clusters.values())
            .filter_map(|c| Some((c.name.clone(), Arc::clone(c.dns.as_ref()?))))
            .collect();
        self.resolved.retain(|name, r| {
            list.iter()
                .any(|(n, d)| n == name && (Arc::ptr_eq(d, &r.dns) || *d == r.dns))
        });
        list
    }

    /// DNS cluster `cluster`'s names, looked up under `dns`, gave
    /// `endpoints`. Whether that changes what the data shards should get
    /// (`compose` then makes the new config); a lookup under a DNS config
    /// the cluster no longer has changes nothing.
    pub fn on_dns(
        &mut self,
        cluster: &str,
        dns: &Arc<engine::Dns>,
        endpoints: Vec<Endpoint>,
    ) -> bool {
        let current = self
            .statics
            .clusters
            .iter()
            .chain(self.clusters.values())
            .find(|c| c.name == cluster);
        let Some(current) = current.filter(|c| {
            c.dns
                .as_ref()
                .is_some_and(|d| Arc::ptr_eq(d, dns) || d == dns)
        }) else {
            return false;
        };
        if self.resolved.get(cluster).is_some_and(|r| {
            r.endpoints.endpoints == endpoints && (Arc::ptr_eq(&r.dns, dns) || r.dns == *dns)
        }) {
            return false;
        }
        let overprovisioning_factor = current.common_lb.overprovisioning_factor;
        self.resolved.insert(
            cluster.to_owned(),
            compose::Resolved {
                dns: Arc::clone(dns),
                endpoints: Arc::new(LoadAssignment {
                    endpoints,
                    overprovisioning_factor,
                }),
            },
        );
        true
    }

    /// Whether the first fetch of every ADS wildcard type is done (or timed
    /// out), as Envoy's init manager waits before the server is ready.
    /// When the wait for the first resources ends at the latest (the
    /// smallest initial fetch timeout), if one is set.
    pub fn init_deadline(&self) -> Option<Instant> {
        self.init_deadline
    }

    pub fn initialized(&self, now: Instant) -> bool {
        if self.init_deadline.is_some_and(|d| now >= d) {
            return true;
        }
        [ResourceType::Cluster, ResourceType::Listener]
            .into_iter()
            .filter(|k| self.wants(*k))
            .all(|k| {
                let st = &self.types[k.index()].status;
                // A rejected first response ends the wait too, as in Envoy.
                st.accepted + st.rejected > 0
            })
    }

    /// Where listeners (`Listener`) or clusters (`Cluster`) come from.
    pub fn source(&self, kind: ResourceType) -> Option<&ConfigSource> {
        match kind {
            ResourceType::Listener => self.lds.as_ref(),
            ResourceType::Cluster => self.cds.as_ref(),
            _ => None,
        }
    }

    pub fn status(&self, kind: ResourceType) -> &TypeStatus {
        &self.types[kind.index()].status
    }

    /// Whether the ADS stream is Delta xDS (`DELTA_GRPC`).
    pub fn is_delta(&self) -> bool {
        self.delta_mode
    }

    /// Subscribed names of an RDS/EDS type.
    pub fn subscribed(&self, kind: ResourceType) -> impl Iterator<Item = &str> {
        self.types[kind.index()].names.iter().map(String::as_str)
    }

    /// A new ADS stream is up: (re-)request every type with the versions
    /// already held, so the server can skip what we have.
    pub fn on_stream_open(&mut self) -> Vec<DiscoveryRequest> {
        self.stream_open = true;
        self.node_sent = false;
        for t in &mut self.types {
            t.nonce.clear();
            t.requested = false;
        }
        let wanted: Vec<ResourceType> = ResourceType::ALL
            .into_iter()
            .filter(|k| self.wants(*k))
            .collect();
        wanted.into_iter().map(|k| self.request(k, None)).collect()
    }

    pub fn on_stream_closed(&mut self) {
        self.stream_open = false;
    }

    /// Whether `kind` is requested over ADS at all right now.
    fn wants(&self, kind: ResourceType) -> bool {
        let ads = |s: &Option<ConfigSource>| matches!(s, Some(ConfigSource::Ads { .. }));
        match kind {
            ResourceType::Listener => ads(&self.lds),
            ResourceType::Cluster => ads(&self.cds),
            _ => !self.types[kind.index()].names.is_empty(),
        }
    }

    /// A request for `kind`: ACK (error `None`) or NACK of the last nonce.
    fn request(&mut self, kind: ResourceType, error: Option<String>) -> DiscoveryRequest {
        let node = if self.node_sent && self.node_on_first_only {
            None
        } else {
            Some(self.node.clone())
        };
        self.node_sent = true;
        let t = &mut self.types[kind.index()];
        t.requested = true;
        DiscoveryRequest {
            version_info: t.status.version.clone(),
            node,
            resource_names: t.names.iter().cloned().collect(),
            type_url: kind.type_url().to_owned(),
            response_nonce: t.nonce.clone(),
            error_detail: error.map(|message| Status {
                code: NACK_CODE,
                message,
                details: Vec::new(),
            }),
        }
    }

    /// Handles one `DiscoveryResponse` from the ADS stream.
    pub fn on_response(&mut self, resp: DiscoveryResponse, now: Instant) -> Outcome {
        let Some(kind) = ResourceType::from_type_url(&resp.type_url) else {
            // Nothing we asked for; Envoy ignores these too.
            return Outcome {
                rejected: Some(format!(
                    "ignored response of unknown type {:?}",
                    resp.type_url
                )),
                ..Outcome::default()
            };
        };
        self.types[kind.index()].nonce = resp.nonce.clone();
        match self.apply(kind, &resp.version_info, &resp.resources, now) {
            Ok(mut more) => {
                let mut requests = vec![self.request(kind, None)];
                requests.append(&mut more);
                Outcome {
                    requests,
                    changed: true,
                    ..Outcome::default()
                }
            }
            Err(message) => {
                let repeated = self.types[kind.index()].reject_streak;
                Outcome {
                    requests: vec![self.request(kind, Some(message.clone()))],
                    changed: false,
                    rejected: Some(message),
                    repeated,
                    delay: nack_delay(repeated),
                }
            }
        }
    }

    /// Handles a file source's new contents (a `DiscoveryResponse` decoded
    /// from YAML/JSON). Returns subscription requests for the ADS stream.
    pub fn on_file(
        &mut self,
        kind: ResourceType,
        resp: &DiscoveryResponse,
        now: Instant,
    ) -> Outcome {
        if !resp.type_url.is_empty() && ResourceType::from_type_url(&resp.type_url) != Some(kind) {
            let message = format!(
                "type_url: {:?} in a file for {}",
                resp.type_url,
                kind.type_url()
            );
            self.reject(kind, &resp.version_info, &message, now);
            return Outcome {
                rejected: Some(message),
                ..Outcome::default()
            };
        }
        match self.apply(kind, &resp.version_info, &resp.resources, now) {
            Ok(requests) => Outcome {
                requests,
                changed: true,
                ..Outcome::default()
            },
            Err(message) => Outcome {
                rejected: Some(message),
                ..Outcome::default()
            },
        }
    }

    /// Records an update that failed before it could be parsed (an
    /// unreadable file, say), for `/config_dump`.
    pub fn note_rejection(
        &mut self,
        kind: ResourceType,
        version: &str,
        message: &str,
        now: Instant,
    ) {
        self.reject(kind, version, message, now);
    }

    fn reject(&mut self, kind: ResourceType, version: &str, message: &str, now: Instant) {
        let t = &mut self.types[kind.index()];
        let same = t
            .status
            .last_error
            .as_ref()
            .is_some_and(|e| e.version == version && e.message == message);
        t.reject_streak = if same { t.reject_streak + 1 } else { 0 };
        let st = &mut t.status;
        st.rejected += 1;
        st.last_error = Some(Rejection {
            version: version.to_owned(),
            message: message.to_owned(),
            at: now,
        });
    }

    /// Validates and stores one update; on success returns the requests
    /// its subscription changes need.
    fn apply(
        &mut self,
        kind: ResourceType,
        version: &str,
        resources: &[prost_types::Any],
        now: Instant,
    ) -> Result<Vec<DiscoveryRequest>, String> {
        let known: HashSet<String> = self
            .statics
            .clusters
            .iter()
            .map(|c| c.name.clone())
            .chain(self.clusters.keys().cloned())
            .collect();
        let decoded = decode(kind, resources, &known)
            .and_then(|d| self.check_conflicts(d))
            .map_err(|e| e.to_string());
        let decoded = match decoded {
            Ok(d) => d,
            Err(message) => {
                self.reject(kind, version, &message, now);
                return Err(message);
            }
        };
        match decoded {
            Decoded::Listeners(m) => {
                if let Err(message) = self.resolve_new(m.values(), std::iter::empty()) {
                    self.reject(kind, version, &message, now);
                    return Err(message);
                }
                self.listeners = m
            }
            Decoded::Clusters(mut m) => {
                self.keep_upstream_tls(&mut m);
                if let Err(message) = self.resolve_new(std::iter::empty(), m.values()) {
                    self.reject(kind, version, &message, now);
                    return Err(message);
                }
                self.clusters = m
            }
            Decoded::Secrets(m) => {
                if let Err(message) = self.apply_secrets(m, version) {
                    self.reject(kind, version, &message, now);
                    return Err(message);
                }
            }
            Decoded::Routes(m) => {
                let names = &self.types[kind.index()].names;
                for (name, rc) in m.into_iter().filter(|(n, _)| names.contains(n)) {
                    self.deadlines.remove(&(kind, name.clone()));
                    self.timed_out.remove(&(kind, name.clone()));
                    self.routes.insert(name, rc);
                }
            }
            Decoded::Endpoints(m) => {
                let names = &self.types[kind.index()].names;
                for (name, eps) in m.into_iter().filter(|(n, _)| names.contains(n)) {
                    self.deadlines.remove(&(kind, name.clone()));
                    self.timed_out.remove(&(kind, name.clone()));
                    self.endpoints.insert(name, eps);
                }
            }
        }
        self.types[kind.index()].reject_streak = 0;
        let st = &mut self.types[kind.index()].status;
        st.version = version.to_owned();
        st.last_update = Some(now);
        st.last_error = None;
        st.accepted += 1;
        Ok(self.resubscribe(now))
    }

    /// Rules that span resources: static names and addresses are ours.
    fn check_conflicts(&self, d: Decoded) -> crate::Result<Decoded> {
        use crate::error::{Error, Path};
        match &d {
            Decoded::Listeners(m) => {
                let mut addrs = HashMap::new();
                for s in &self.statics.listeners {
                    addrs.insert(s.address, s.name.clone());
                }
                for (name, l) in m {
                    let path = Path::root().field("listeners").named(name);
                    if self.statics.listeners.iter().any(|s| &s.name == name) {
                        return Err(Error::invalid(
                            path.field("name"),
                            "a static listener has this name",
                        ));
                    }
                    if l.address.port() != 0 {
                        if let Some(other) = addrs.insert(l.address, name.clone()) {
                            return Err(Error::invalid(
                                path.field("address"),
                                format!("{} is already used by listener {other:?}", l.address),
                            ));
                        }
                    }
                }
            }
            Decoded::Clusters(m) => {
                for name in m.keys() {
                    if self.statics.clusters.iter().any(|s| &s.name == name) {
                        let path = Path::root().field("clusters").named(name);
                        return Err(Error::invalid(
                            path.field("name"),
                            "a static cluster has this name",
                        ));
                    }
                }
            }
            Decoded::Routes(_) | Decoded::Endpoints(_) | Decoded::Secrets(_) => {}
        }
        Ok(d)
    }

    /// Recomputes RDS/EDS names from the listeners and clusters held;
    /// returns the requests that tell the server (when a stream is open).
    fn resubscribe(&mut self, now: Instant) -> Vec<DiscoveryRequest> {
        let routes: BTreeSet<String> = self
            .statics
            .listeners
            .iter()
            .chain(self.listeners.values())
            .flat_map(|l| l.chains())
            .filter_map(|c| c.http.rds.as_ref().map(|r| r.route_config_name.clone()))
            .collect();
        let endpoints: BTreeSet<String> = self
            .statics
            .clusters
            .iter()
            .chain(self.clusters.values())
            .filter_map(|c| c.eds.as_ref().map(|e| e.service_name.clone()))
            .collect();
        let secrets = self.secret_names();
        let timeouts = self.fetch_timeouts();
        let mut requests = Vec::new();
        for (kind, names) in [
            (ResourceType::Endpoint, endpoints),
            (ResourceType::Route, routes),
            (ResourceType::Secret, secrets),
        ] {
            let old = &self.types[kind.index()].names;
            if *old == names {
                continue;
            }
            for added in names.difference(old) {
                let key = (kind, added.clone());
                if let Some(Some(timeout)) = timeouts.get(&key) {
                    self.deadlines.insert(key, now + *timeout);
                }
            }
            match kind {
                ResourceType::Route => self.routes.retain(|n, _| names.contains(n)),
                ResourceType::Secret => self.secrets.retain(|n, _| names.contains(n)),
                _ => self.endpoints.retain(|n, _| names.contains(n)),
            }
            self.deadlines
                .retain(|(k, n), _| *k != kind || names.contains(n));
            self.timed_out
                .retain(|(k, n)| *k != kind || names.contains(n));
            let t = &mut self.types[kind.index()];
            t.names = names;
            // Unsubscribing from the last name still tells the server (an
            // empty list), but only once it has heard of the type.
            if self.stream_open && (t.requested || !t.names.is_empty()) {
                requests.push(self.request(kind, None));
            }
        }
        requests
    }

    /// Initial fetch timeout of every RDS/EDS name referenced (the
    /// shortest, when several resources name it).
    fn fetch_timeouts(&self) -> HashMap<(ResourceType, String), Option<Duration>> {
        let mut out: HashMap<(ResourceType, String), Option<Duration>> = HashMap::new();
        let mut put = |key, t: Option<Duration>| {
            let e = out.entry(key).or_insert(t);
            *e = match (*e, t) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        };
        let chains = self
            .statics
            .listeners
            .iter()
            .chain(self.listeners.values())
            .flat_map(|l| l.chains());
        for c in chains {
            if let Some(r) = &c.http.rds {
                put(
                    (ResourceType::Route, r.route_config_name.clone()),
                    r.initial_fetch_timeout,
                );
            }
        }
        for c in self.statics.clusters.iter().chain(self.clusters.values()) {
            if let Some(e) = &c.eds {
                put(
                    (ResourceType::Endpoint, e.service_name.clone()),
                    e.initial_fetch_timeout,
                );
            }
        }
        out
    }

    /// Expires initial fetch timeouts; true if any did (compose again).
    pub fn poll(&mut self, now: Instant) -> bool {
        let expired: Vec<_> = self
            .deadlines
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for key in &expired {
            self.deadlines.remove(key);
            self.timed_out.insert(key.clone());
        }
        !expired.is_empty()
    }

    /// The next initial fetch deadline, for the caller's timer.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.values().min().copied()
    }

    /// Dynamic resources held (validated, before warming).
    pub fn listeners(&self) -> &BTreeMap<String, Arc<Listener>> {
        &self.listeners
    }

    pub fn clusters(&self) -> &BTreeMap<String, Arc<Cluster>> {
        &self.clusters
    }

    pub fn routes(&self) -> &BTreeMap<String, Arc<RouteConfig>> {
        &self.routes
    }

    pub fn endpoints(&self) -> &BTreeMap<String, Arc<LoadAssignment>> {
        &self.endpoints
    }
}
