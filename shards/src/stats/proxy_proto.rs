//! The PROXY protocol listener filter's counters (Envoy's `proxy_proto.[<stat_prefix>.]*`), one block per `stat_prefix` on each shard.

use proxywire::Version;

use super::Counter;

/// One `stat_prefix`'s counters.
#[derive(Debug, Default)]
pub struct ProxyProtoStats {
    /// No PROXY header, let through (`allow_requests_without_proxy_protocol`).
    pub not_found_allowed: Counter,
    /// No PROXY header: closed.
    pub not_found_disallowed: Counter,
    pub v1: VersionStats,
    pub v2: VersionStats,
}

/// What headers of one version came to.
#[derive(Debug, Default)]
pub struct VersionStats {
    /// Read and used.
    pub found: Counter,
    /// Of a version in `disallowed_versions`: closed.
    pub disallowed: Counter,
    /// Malformed: closed.
    pub error: Counter,
}

impl ProxyProtoStats {
    pub fn version(&self, v: Version) -> &VersionStats {
        match v {
            Version::V1 => &self.v1,
            Version::V2 => &self.v2,
        }
    }
}
