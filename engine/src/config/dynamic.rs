//! `dynamic_resources`: where listeners and clusters come from besides the
//! static bootstrap (ADS or files).

use std::time::Duration;

/// `dynamic_resources`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DynamicResources {
    /// `ads_config`: the ADS server, needed by any `ads: {}` source.
    pub ads: Option<AdsConfig>,
    /// `lds_config`; `None`: no dynamic listeners.
    pub lds: Option<ConfigSource>,
    /// `cds_config`; `None`: no dynamic clusters.
    pub cds: Option<ConfigSource>,
}

/// `ads_config` (`api_type: GRPC`, V3, one `envoy_grpc` service).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdsConfig {
    /// `grpc_services[0].envoy_grpc.cluster_name`: a static cluster.
    pub cluster: String,
    /// `grpc_services[0].envoy_grpc.authority` (default: the cluster name).
    pub authority: String,
    pub set_node_on_first_message_only: bool,
    /// `api_type: DELTA_GRPC` (or `AGGREGATED_DELTA_GRPC`): incremental
    /// xDS (`DeltaAggregatedResources`).
    pub delta: bool,
}

/// Where one resource type comes from (`ConfigSource`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// `ads: {}` with its `initial_fetch_timeout` (Envoy's default 15 s;
    /// `None` when set to 0: wait forever).
    Ads {
        initial_fetch_timeout: Option<Duration>,
    },
    /// `path_config_source.path` (or the older `path`): a file holding a
    /// `DiscoveryResponse`, re-read when it changes.
    Path(std::path::PathBuf),
}

/// Envoy's default `initial_fetch_timeout`.
pub const DEFAULT_INITIAL_FETCH_TIMEOUT: Duration = Duration::from_secs(15);
