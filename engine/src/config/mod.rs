//! The validated configuration model: what an Envoy v3 bootstrap (or, later,
//! xDS resources) turns into once the `xds` crate has decoded and checked it.
//!
//! Every value here is already valid: the data path never re-checks config.
//! Field names follow Envoy's so `docs/configuration.md` maps one to one.
//!
//! One file per resource (cluster, route, connection manager, …); every
//! item is re-exported here so `engine::config::X` names it wherever it
//! lives.

mod access_log;
mod circuit_breakers;
mod cluster;
mod compressor;
mod cors;
mod csrf;
mod dynamic;
mod ext_authz;
mod fault;
mod header_mutation;
mod health;
mod health_check;
mod health_check_filter;
mod http_connection_manager;
mod http_filter;
mod lb;
mod listener;
mod local_rate_limit;
mod local_reply;
mod mirror;
mod outlier;
mod rbac_filter;
mod retry;
mod route;
mod session;
mod tcp_proxy;
mod tracing;
mod upgrade;
mod upstream;

pub use access_log::*;
pub use circuit_breakers::*;
pub use cluster::*;
pub use compressor::*;
pub use cors::*;
pub use csrf::*;
pub use dynamic::*;
pub use ext_authz::*;
pub use fault::*;
pub use header_mutation::*;
pub use health::*;
pub use health_check::*;
pub use health_check_filter::*;
pub use http_connection_manager::*;
pub use http_filter::*;
pub use lb::*;
pub use listener::*;
pub use local_rate_limit::*;
pub use local_reply::*;
pub use mirror::*;
pub use outlier::*;
pub use rbac_filter::*;
pub use retry::*;
pub use route::*;
pub use session::*;
pub use tcp_proxy::*;
pub use tracing::*;
pub use upgrade::*;
pub use upstream::*;

use std::net::SocketAddr;
use std::sync::Arc;

/// Envoy's default `per_connection_buffer_limit_bytes` (1 MiB), for
/// listeners and clusters.
pub const DEFAULT_PER_CONNECTION_BUFFER_LIMIT: u32 = 1024 * 1024;

/// The whole static configuration of one gateway process.
#[derive(Debug, Clone)]
pub struct Bootstrap {
    pub node: Node,
    /// `admin.address`; no admin server when absent.
    pub admin: Option<SocketAddr>,
    pub listeners: Vec<Arc<Listener>>,
    pub clusters: Vec<Arc<Cluster>>,
    /// `dynamic_resources`: listeners and clusters from xDS or files, on
    /// top of the static ones above.
    pub dynamic: Option<DynamicResources>,
    /// `layered_runtime`: the runtime keys we implement, from its static
    /// layers.
    pub runtime: Runtime,
    /// `overload_manager`.
    pub overload: Option<Arc<crate::overload::OverloadConfig>>,
    /// `static_resources.secrets`: what TLS contexts name without an
    /// `sds_config`.
    pub secrets: Arc<crate::tls::SecretMap>,
}

/// The runtime keys we implement, as the bootstrap's `layered_runtime`
/// static layers set them (later layers override earlier ones, as in
/// Envoy). Applies to every listener by name, static or from LDS.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Runtime {
    /// `envoy.resource_limits.listener.<name>.connection_limit` by listener
    /// name: the listener's open connections for the whole process (each
    /// of N data shards takes `ceil(limit / N)`).
    pub listener_connection_limits: std::collections::BTreeMap<String, u64>,
}

impl Runtime {
    /// `envoy.resource_limits.listener.<listener>.connection_limit`.
    pub fn connection_limit(&self, listener: &str) -> Option<u64> {
        self.listener_connection_limits.get(listener).copied()
    }
}

/// `node`: who we are to a control plane.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    pub id: String,
    pub cluster: String,
    /// The bootstrap's `node` as protobuf bytes (`envoy.config.core.v3.Node`
    /// with our user agent filled in), sent as-is to control planes; the
    /// engine does not interpret it.
    pub proto: Vec<u8>,
}

/// A TLS context that reads files or secrets, and what it belongs to
/// (`listeners[name]`, `clusters[name]`): what the control shard reads
/// again when they change.
pub struct SourcedTls {
    pub owner: String,
    pub tls: Arc<dyn crate::tls::Reloadable>,
}

/// Every TLS context of `listeners` and `clusters` that reads files or
/// secrets, each once (chains may share one).
pub fn sourced_tls<'a>(
    listeners: impl Iterator<Item = &'a Arc<Listener>>,
    clusters: impl Iterator<Item = &'a Arc<Cluster>>,
) -> Vec<SourcedTls> {
    let mut out: Vec<SourcedTls> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut push = |owner: &dyn Fn() -> String, tls: Arc<dyn crate::tls::Reloadable>| {
        let sourced = !tls.secrets().is_empty() || !tls.files().is_empty();
        if sourced && seen.insert(Arc::as_ptr(&tls) as *const ()) {
            out.push(SourcedTls {
                owner: owner(),
                tls,
            });
        }
    };
    for l in listeners {
        for t in l.chains().filter_map(|c| c.tls.as_ref()) {
            push(&|| format!("listeners[{}]", l.name), Arc::clone(t) as _);
        }
    }
    for c in clusters {
        if let Some(t) = &c.upstream.tls {
            push(&|| format!("clusters[{}]", c.name), Arc::clone(t) as _);
        }
    }
    out
}
