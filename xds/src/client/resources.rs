//! One SotW response's resources → validated engine values, with the same
//! validators the bootstrap uses. Any error rejects the whole response.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use engine::{Cluster, Listener, LoadAssignment, RouteConfig};
use prost::{Message, Name};

use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::cluster::v3::Cluster as PbCluster;
use crate::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use crate::pb::envoy::config::listener::v3::Listener as PbListener;
use crate::pb::envoy::config::route::v3::RouteConfiguration;
use crate::validate;

/// The resource types of ADS, in the order Envoy subscribes to them
/// (clusters before the listeners that route to them; secrets when a TLS
/// context names them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceType {
    Cluster,
    Endpoint,
    Listener,
    Route,
    Secret,
}

impl ResourceType {
    pub const ALL: [ResourceType; 5] = [
        Self::Cluster,
        Self::Endpoint,
        Self::Listener,
        Self::Route,
        Self::Secret,
    ];

    pub fn type_url(self) -> &'static str {
        match self {
            Self::Cluster => "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            Self::Endpoint => "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
            Self::Listener => "type.googleapis.com/envoy.config.listener.v3.Listener",
            Self::Route => "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
            Self::Secret => "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret",
        }
    }

    /// Accepts any host part, as the Any spec allows (`type.googleapis.com/` in practice).
    pub fn from_type_url(url: &str) -> Option<Self> {
        let name = url.rsplit('/').next()?;
        Self::ALL
            .into_iter()
            .find(|t| t.type_url().rsplit('/').next() == Some(name))
    }

    /// Short name used in error paths, stats and `/config_dump`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Cluster => "clusters",
            Self::Endpoint => "endpoints",
            Self::Listener => "listeners",
            Self::Route => "routes",
            Self::Secret => "secrets",
        }
    }

    /// LDS and CDS subscribe to everything; RDS, EDS and SDS by name.
    pub fn is_wildcard(self) -> bool {
        matches!(self, Self::Listener | Self::Cluster)
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// A response's resources, validated, by name.
#[derive(Debug)]
pub enum Decoded {
    Listeners(BTreeMap<String, Arc<Listener>>),
    Clusters(BTreeMap<String, Arc<Cluster>>),
    Routes(BTreeMap<String, Arc<RouteConfig>>),
    Endpoints(BTreeMap<String, Arc<LoadAssignment>>),
    /// Encoded `Secret`s: their contents are checked where a TLS context
    /// reads them.
    Secrets(BTreeMap<String, Vec<u8>>),
}

/// Decodes and validates every resource of a response of type `kind`.
/// `known_clusters` are the static and CDS clusters (inline route tables
/// are checked against them, as Envoy's `validate_clusters` default does).
pub fn decode(
    kind: ResourceType,
    resources: &[prost_types::Any],
    known_clusters: &HashSet<String>,
) -> Result<Decoded> {
    let base = Path::root().field(kind.name());
    let mut seen = HashSet::new();
    let mut out = match kind {
        ResourceType::Listener => Decoded::Listeners(BTreeMap::new()),
        ResourceType::Cluster => Decoded::Clusters(BTreeMap::new()),
        ResourceType::Route => Decoded::Routes(BTreeMap::new()),
        ResourceType::Endpoint => Decoded::Endpoints(BTreeMap::new()),
        ResourceType::Secret => Decoded::Secrets(BTreeMap::new()),
    };
    for (i, any) in resources.iter().enumerate() {
        if ResourceType::from_type_url(&any.type_url) != Some(kind) {
            return Err(Error::invalid(
                base.index(i),
                format!(
                    "type_url {:?} in a {} response",
                    any.type_url,
                    kind.type_url()
                ),
            ));
        }
        let bytes = any.value.as_slice();
        let name = match &mut out {
            Decoded::Listeners(m) => {
                let pb: PbListener = message(bytes, &base.index(i))?;
                let path = base.named(&pb.name);
                let l = validate::listener(&pb, &path, known_clusters)?;
                m.insert(l.name.clone(), Arc::new(l));
                pb.name
            }
            Decoded::Clusters(m) => {
                let pb: PbCluster = message(bytes, &base.index(i))?;
                let path = base.named(&pb.name);
                let c = validate::cluster(&pb, &path)?;
                m.insert(c.name.clone(), Arc::new(c));
                pb.name
            }
            Decoded::Routes(m) => {
                let pb: RouteConfiguration = message(bytes, &base.index(i))?;
                let path = base.named(&pb.name);
                if pb.name.is_empty() {
                    return Err(Error::invalid(base.index(i).field("name"), "required"));
                }
                // Over RDS, unknown clusters are not an error (503 at request
                // time), as Envoy's `validate_clusters` defaults to false here.
                let rc = validate::route_config(&pb, &path, known_clusters, false)?;
                m.insert(pb.name.clone(), Arc::new(rc));
                pb.name
            }
            Decoded::Endpoints(m) => {
                let pb: ClusterLoadAssignment = message(bytes, &base.index(i))?;
                let path = base.named(&pb.cluster_name);
                if pb.cluster_name.is_empty() {
                    return Err(Error::invalid(
                        base.index(i).field("cluster_name"),
                        "required",
                    ));
                }
                let eps = validate::cluster_load_assignment(&pb, &path)?;
                m.insert(pb.cluster_name.clone(), Arc::new(eps));
                pb.cluster_name
            }
            Decoded::Secrets(m) => {
                let pb = validate::decode_secret(any, &base.index(i))?;
                validate::check_secret(&pb, &base.named(&pb.name))?;
                m.insert(pb.name.clone(), pb.encode_to_vec());
                pb.name
            }
        };
        if !seen.insert(name.clone()) {
            return Err(Error::invalid(
                base.named(&name),
                "given twice in one response",
            ));
        }
    }
    Ok(out)
}

fn message<M: Message + Name + Default>(bytes: &[u8], path: &Path) -> Result<M> {
    M::decode(bytes)
        .map_err(|e| Error::invalid(path.clone(), format!("invalid {}: {e}", M::full_name())))
}
