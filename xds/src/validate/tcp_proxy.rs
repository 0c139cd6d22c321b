//! `envoy.filters.network.tcp_proxy` (`TcpProxy`) → `engine::TcpProxy`: the cluster or weighted clusters, timeouts, connect attempts and access logs; every other set field refused by name.

use engine::{TcpProxy, TcpTarget, WeightedClusters, DEFAULT_TCP_IDLE_TIMEOUT};

use super::common::{duration, reject_set, timeout_or, u32_in};
use crate::error::{Error, Path, Result};
use crate::pb::envoy::extensions::filters::network::tcp_proxy::v3 as pb;

/// Validates a chain's `tcp_proxy`. Its clusters are not checked against
/// the known ones: as in Envoy, a connection to a cluster that is not
/// there (yet) is closed and counted, the config stands.
pub(super) fn tcp_proxy(t: &pb::TcpProxy, path: &Path) -> Result<TcpProxy> {
    reject_set!(
        path,
        t,
        on_demand,
        downstream_idle_timeout,
        upstream_idle_timeout,
        backoff_options,
        hash_policy,
        tunneling_config,
        max_downstream_connection_duration_jitter_percentage,
        access_log_flush_interval,
        flush_access_log_on_connected,
        access_log_options,
        proxy_protocol_tlvs,
        max_early_data_bytes,
    );
    super::common::metadata(t.metadata_match.as_ref(), || path.field("metadata_match"))?;
    if t.metadata_match.is_some() {
        return Err(Error::unsupported(path.field("metadata_match")));
    }
    if t.upstream_connect_mode != pb::UpstreamConnectMode::Immediate as i32 {
        let mode = pb::UpstreamConnectMode::try_from(t.upstream_connect_mode).map_or_else(
            |_| t.upstream_connect_mode.to_string(),
            |m| m.as_str_name().to_owned(),
        );
        return Err(Error::unsupported_value(
            path.field("upstream_connect_mode"),
            mode,
        ));
    }
    if t.stat_prefix.is_empty() {
        return Err(Error::invalid(path.field("stat_prefix"), "required"));
    }
    use pb::tcp_proxy::ClusterSpecifier;
    let target = match &t.cluster_specifier {
        Some(ClusterSpecifier::Cluster(c)) if !c.is_empty() => TcpTarget::Cluster(c.clone()),
        Some(ClusterSpecifier::Cluster(_)) => {
            return Err(Error::invalid(path.field("cluster"), "must not be empty"))
        }
        Some(ClusterSpecifier::WeightedClusters(w)) => {
            TcpTarget::Weighted(weighted(w, &path.field("weighted_clusters"))?)
        }
        None => {
            return Err(Error::invalid(
                path.clone(),
                "one of cluster or weighted_clusters is required",
            ))
        }
    };
    let max_duration = match &t.max_downstream_connection_duration {
        Some(d) => {
            let dpath = path.field("max_downstream_connection_duration");
            let d = duration(d, &dpath)?;
            if d < std::time::Duration::from_millis(1) {
                return Err(Error::invalid(dpath, "must be at least 1ms"));
            }
            Some(d)
        }
        None => None,
    };
    Ok(TcpProxy {
        stat_prefix: t.stat_prefix.clone(),
        target,
        idle_timeout: timeout_or(
            t.idle_timeout.as_ref(),
            DEFAULT_TCP_IDLE_TIMEOUT,
            &path.field("idle_timeout"),
        )?,
        max_connect_attempts: u32_in(
            t.max_connect_attempts,
            1..=u32::MAX,
            1,
            &path.field("max_connect_attempts"),
        )?,
        max_downstream_connection_duration: max_duration,
        access_log: super::access_log::access_logs(&t.access_log, &path.field("access_log"))?,
    })
}

/// `weighted_clusters`: names required, weights at least 1 (Envoy's
/// rules), one cluster per connection drawn by weight.
fn weighted(w: &pb::tcp_proxy::WeightedCluster, path: &Path) -> Result<WeightedClusters> {
    let cpath = path.field("clusters");
    if w.clusters.is_empty() {
        return Err(Error::invalid(cpath, "at least one cluster is required"));
    }
    let mut entries = Vec::with_capacity(w.clusters.len());
    for (i, c) in w.clusters.iter().enumerate() {
        let p = cpath.index(i);
        if c.name.is_empty() {
            return Err(Error::invalid(p.field("name"), "required"));
        }
        if c.weight == 0 {
            return Err(Error::invalid(p.field("weight"), "must be at least 1"));
        }
        if c.metadata_match.is_some() {
            return Err(Error::unsupported(p.field("metadata_match")));
        }
        entries.push((c.name.clone(), c.weight));
    }
    WeightedClusters::new(entries)
        .ok_or_else(|| Error::invalid(cpath, "total weight must be at most 4294967295"))
}
