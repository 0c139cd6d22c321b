//! `Cluster` / `ClusterLoadAssignment` → `engine::Cluster`: STATIC and EDS
//! clusters of IP endpoints, DNS clusters of names (`dns`) (protocol and TLS: `upstream`), round robin / least request
//! / random picking (`lb_policy` or `load_balancing_policy`), outlier
//! detection and `common_lb_config`.

use std::time::Duration;

use ahash::AHashSet;

use engine::{Cluster, CommonLb, Eds, Endpoint, HealthStatus, LbPolicy, LoadAssignment};

use super::common::{duration, reject_set, socket_address_at, u32_in};
use super::lb::{common_lb_config, least_request_lb_config, load_balancing_policy};
use super::listener::buffer_limit;
use super::outlier::outlier_detection;
use super::source::Allowed;
use super::upstream::upstream_options;
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::cluster::v3 as pb;
use crate::pb::envoy::config::endpoint::v3 as ep;

/// Validates a cluster (its name is not checked for uniqueness here).
pub fn cluster(c: &pb::Cluster, path: &Path) -> Result<Cluster> {
    reject_set!(
        path,
        c,
        cleanup_interval,
        upstream_bind_config,
        lb_subset_config,
        alt_stat_name,
        upstream_connection_options,
        filters,
        lrs_server,
        transport_socket_matches,
        upstream_http_protocol_options,
        upstream_config,
        preconnect_policy,
        connection_pool_per_downstream_connection,
        wait_for_warm_on_init,
    );
    super::common::metadata(c.metadata.as_ref(), || path.clone())?;
    if c.name.is_empty() {
        return Err(Error::invalid(path.field("name"), "required"));
    }
    // Order matters: of several errors, the first one checked is reported.
    let discovery = discovery(c, path)?;
    let is_eds = discovery == Discovery::Eds;
    let connect_timeout = connect_timeout(c, path)?;
    let lb_policy = lb_policy(c, path)?;
    let eds = eds(c, is_eds, path)?;
    let dns = match discovery {
        Discovery::Dns(kind) => Some(std::sync::Arc::new(super::dns::dns(c, kind, path)?)),
        _ => None,
    };
    let assignment = match &c.load_assignment {
        Some(_) if is_eds => {
            return Err(Error::invalid(
                path.field("load_assignment"),
                "not allowed with type EDS (endpoints come from EDS)",
            ))
        }
        // A DNS cluster's hosts are what its names resolve to; its
        // assignment's policy still holds.
        Some(la) if dns.is_some() => LoadAssignment {
            endpoints: Vec::new(),
            overprovisioning_factor: assignment_policy(la, &path.field("load_assignment"))?,
        },
        Some(la) => cluster_load_assignment(la, &path.field("load_assignment"))?,
        None => LoadAssignment {
            endpoints: Vec::new(),
            overprovisioning_factor: engine::DEFAULT_OVERPROVISIONING_FACTOR,
        },
    };
    let outlier_detection = match &c.outlier_detection {
        Some(o) => Some(outlier_detection(o, &path.field("outlier_detection"))?),
        None => None,
    };
    let mut common_lb = match &c.common_lb_config {
        Some(cl) => common_lb_config(cl, &path.field("common_lb_config"))?,
        None => CommonLb::default(),
    };
    common_lb.overprovisioning_factor = assignment.overprovisioning_factor;
    if common_lb.locality_weighted
        && matches!(lb_policy, LbPolicy::RingHash(_) | LbPolicy::Maglev(_))
    {
        return Err(Error::unsupported_msg(
            path.field("common_lb_config")
                .field("locality_weighted_lb_config"),
            "not supported with RING_HASH or MAGLEV yet",
        ));
    }
    let per_endpoint_stats = match &c.track_cluster_stats {
        Some(t) => {
            let tpath = path.field("track_cluster_stats");
            reject_set!(tpath, t, timeout_budgets, request_response_sizes);
            t.per_endpoint_stats
        }
        None => false,
    };
    let (http2, upstream) = upstream_options(c, path)?;
    let health_check =
        super::health_check::health_checks(&c.health_checks, &path.field("health_checks"))?.map(
            |mut hc| {
                hc.ignore_health_on_host_removal = c.ignore_health_on_host_removal;
                hc.close_connections_on_failure = c.close_connections_on_host_health_failure;
                std::sync::Arc::new(hc)
            },
        );
    if let Some(hc) = &health_check {
        let hpath = path.field("health_checks").index(0);
        if matches!(hc.checker, engine::Checker::Grpc(_))
            && upstream.protocol != engine::UpstreamProtocol::Http2
        {
            return Err(Error::invalid(
                hpath.field("grpc_health_check"),
                format!(
                    "cluster {:?} must support HTTP/2 for gRPC health checking (as Envoy requires)",
                    c.name
                ),
            ));
        }
    }
    Ok(Cluster {
        per_endpoint_stats,
        name: c.name.clone(),
        connect_timeout,
        lb_policy,
        endpoints: assignment.endpoints,
        eds,
        dns,
        http2,
        upstream,
        outlier_detection,
        common_lb,
        per_connection_buffer_limit_bytes: buffer_limit(
            c.per_connection_buffer_limit_bytes,
            &path.field("per_connection_buffer_limit_bytes"),
        )?,
        health_check,
        circuit_breakers: super::circuit_breakers::circuit_breakers(
            c.circuit_breakers.as_ref(),
            &path.field("circuit_breakers"),
        )?,
    })
}

/// How a cluster finds its hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Discovery {
    Static,
    Eds,
    Dns(engine::DnsKind),
}

/// The discovery `type` (STATIC by default); ORIGINAL_DST and
/// `cluster_type` extensions are refused.
fn discovery(c: &pb::Cluster, path: &Path) -> Result<Discovery> {
    use pb::cluster::{ClusterDiscoveryType, DiscoveryType};
    match &c.cluster_discovery_type {
        None => Ok(Discovery::Static),
        Some(ClusterDiscoveryType::Type(t)) => match DiscoveryType::try_from(*t) {
            Ok(DiscoveryType::Static) => Ok(Discovery::Static),
            Ok(DiscoveryType::Eds) => Ok(Discovery::Eds),
            Ok(DiscoveryType::StrictDns) => Ok(Discovery::Dns(engine::DnsKind::Strict)),
            Ok(DiscoveryType::LogicalDns) => Ok(Discovery::Dns(engine::DnsKind::Logical)),
            Ok(other) => Err(Error::unsupported_value(
                path.field("type"),
                other.as_str_name(),
            )),
            Err(_) => Err(Error::invalid(
                path.field("type"),
                format!("unknown value {t}"),
            )),
        },
        Some(ClusterDiscoveryType::ClusterType(_)) => {
            Err(Error::unsupported(path.field("cluster_type")))
        }
    }
}

/// `connect_timeout`: Envoy's default when unset, never 0.
fn connect_timeout(c: &pb::Cluster, path: &Path) -> Result<Duration> {
    Ok(match &c.connect_timeout {
        None => engine::DEFAULT_CONNECT_TIMEOUT,
        Some(d) => {
            let d = duration(d, &path.field("connect_timeout"))?;
            if d.is_zero() {
                return Err(Error::invalid(
                    path.field("connect_timeout"),
                    "must be greater than 0",
                ));
            }
            d
        }
    })
}

/// The policy: `load_balancing_policy` when set, else `lb_policy` with
/// `least_request_lb_config`.
fn lb_policy(c: &pb::Cluster, path: &Path) -> Result<LbPolicy> {
    use pb::cluster::{LbConfig, LbPolicy as PbLb};
    let lrpath = path.field("least_request_lb_config");
    let lr_config = match &c.lb_config {
        None => None,
        Some(LbConfig::LeastRequestLbConfig(l)) => Some(l),
        Some(LbConfig::RingHashLbConfig(_)) | Some(LbConfig::MaglevLbConfig(_)) => None,
        Some(LbConfig::OriginalDstLbConfig(_)) => {
            return Err(Error::unsupported(path.field("original_dst_lb_config")))
        }
        Some(LbConfig::RoundRobinLbConfig(_)) => {
            return Err(Error::unsupported(path.field("round_robin_lb_config")))
        }
    };
    let legacy = PbLb::try_from(c.lb_policy).map_err(|_| {
        Error::invalid(
            path.field("lb_policy"),
            format!("unknown value {}", c.lb_policy),
        )
    })?;
    match &c.load_balancing_policy {
        // As in Envoy, load_balancing_policy wins: lb_policy and
        // least_request_lb_config are then not used (the latter must still
        // be valid).
        Some(p) => {
            if lr_config.is_some() {
                least_request_lb_config(lr_config, &lrpath)?;
            }
            load_balancing_policy(p, &path.field("load_balancing_policy"))
        }
        None => {
            let policy = legacy_lb_policy(legacy, lr_config, &lrpath, path)?;
            super::lb::hash_lb_config(policy, c.lb_config.as_ref(), path)
        }
    }
}

/// `lb_policy` (`legacy`) with its `least_request_lb_config`
/// (`lr_config`, at `lrpath`), which only LEAST_REQUEST may have.
fn legacy_lb_policy(
    legacy: pb::cluster::LbPolicy,
    lr_config: Option<&pb::cluster::LeastRequestLbConfig>,
    lrpath: &Path,
    path: &Path,
) -> Result<LbPolicy> {
    use pb::cluster::LbPolicy as PbLb;
    let lb_policy = match legacy {
        PbLb::RoundRobin => LbPolicy::RoundRobin,
        PbLb::Random => LbPolicy::Random,
        PbLb::LeastRequest => LbPolicy::LeastRequest(least_request_lb_config(lr_config, lrpath)?),
        // Their configs are read by `lb::hash_lb_config`.
        PbLb::RingHash => LbPolicy::RingHash(Default::default()),
        PbLb::Maglev => LbPolicy::Maglev(Default::default()),
        PbLb::LoadBalancingPolicyConfig => {
            return Err(Error::invalid(
                path.field("lb_policy"),
                "LOAD_BALANCING_POLICY_CONFIG requires load_balancing_policy",
            ))
        }
        other => {
            return Err(Error::unsupported_value(
                path.field("lb_policy"),
                other.as_str_name(),
            ))
        }
    };
    if lr_config.is_some() && !matches!(lb_policy, LbPolicy::LeastRequest(_)) {
        return Err(Error::invalid(
            lrpath.clone(),
            "only allowed with lb_policy LEAST_REQUEST",
        ));
    }
    Ok(lb_policy)
}

/// `eds_cluster_config`: required with type EDS, and only allowed with it.
fn eds(c: &pb::Cluster, is_eds: bool, path: &Path) -> Result<Option<Eds>> {
    match (&c.eds_cluster_config, is_eds) {
        (Some(e), true) => {
            let epath = path.field("eds_cluster_config");
            let source = match &e.eds_config {
                Some(s) => {
                    super::source::config_source(s, &epath.field("eds_config"), Allowed::AdsOnly)?
                }
                None => return Err(Error::invalid(epath.field("eds_config"), "required")),
            };
            Ok(Some(Eds {
                service_name: if e.service_name.is_empty() {
                    c.name.clone()
                } else {
                    e.service_name.clone()
                },
                initial_fetch_timeout: super::source::initial_fetch_timeout(&source),
            }))
        }
        (None, true) => Err(Error::invalid(
            path.field("eds_cluster_config"),
            "required with type EDS",
        )),
        (Some(_), false) => Err(Error::invalid(
            path.field("eds_cluster_config"),
            "only allowed with type EDS",
        )),
        (None, false) => Ok(None),
    }
}

/// Validates a `ClusterLoadAssignment` (a cluster's inline
/// `load_assignment` or an EDS resource): its endpoints with their
/// priorities and localities, and its `policy`.
pub fn cluster_load_assignment(
    la: &ep::ClusterLoadAssignment,
    path: &Path,
) -> Result<LoadAssignment> {
    reject_set!(path, la, named_endpoints);
    let overprovisioning_factor = assignment_policy(la, path)?;
    let mut out: Vec<Endpoint> = Vec::new();
    // Sized up front: growing it was a tenth of a 10,000-endpoint update.
    let total: usize = la.endpoints.iter().map(|l| l.lb_endpoints.len()).sum();
    let mut seen = AHashSet::with_capacity(total);
    out.reserve(total);
    // Paths are built only on error (closures): on the success path of a
    // 10,000-endpoint EDS update, formatting them was most of the work.
    for (i, lle) in la.endpoints.iter().enumerate() {
        let lpath = || path.field("endpoints").index(i);
        reject_set!(lpath(), lle, proximity, lb_config);
        super::common::metadata(lle.metadata.as_ref(), lpath)?;
        for (j, lbe) in lle.lb_endpoints.iter().enumerate() {
            let epath = || lpath().field("lb_endpoints").index(j);
            let placement = engine::Placement {
                priority: lle.priority,
                locality: i as u32,
                locality_weight: lle.load_balancing_weight.unwrap_or(0),
            };
            let e = lb_endpoint(lbe, placement, &epath)?;
            if !seen.insert(e.address) {
                return Err(Error::invalid(
                    epath().field("endpoint").field("address"),
                    format!("duplicate endpoint {}", e.address),
                ));
            }
            out.push(e);
        }
    }
    Ok(LoadAssignment {
        endpoints: out,
        overprovisioning_factor,
    })
}

/// A load assignment's `policy`: its `overprovisioning_factor` (Envoy's
/// range: above 0; default 140). Drop overloads, staleness and
/// weight-scaled priority health are refused.
pub(super) fn assignment_policy(la: &ep::ClusterLoadAssignment, path: &Path) -> Result<u32> {
    let Some(p) = &la.policy else {
        return Ok(engine::DEFAULT_OVERPROVISIONING_FACTOR);
    };
    let path = path.field("policy");
    reject_set!(
        path,
        p,
        drop_overloads,
        endpoint_stale_after,
        weighted_priority_health
    );
    u32_in(
        p.overprovisioning_factor,
        1..=u32::MAX,
        engine::DEFAULT_OVERPROVISIONING_FACTOR,
        &path.field("overprovisioning_factor"),
    )
}

fn lb_endpoint(
    lbe: &ep::LbEndpoint,
    placement: engine::Placement,
    path: &dyn Fn() -> Path,
) -> Result<Endpoint> {
    use ep::lb_endpoint::HostIdentifier;
    super::common::metadata(lbe.metadata.as_ref(), path)?;
    let endpoint = match &lbe.host_identifier {
        Some(HostIdentifier::Endpoint(e)) => e,
        Some(HostIdentifier::EndpointName(_)) => {
            return Err(Error::unsupported(path().field("endpoint_name")))
        }
        None => return Err(Error::invalid(path().field("endpoint"), "required")),
    };
    let epath = || path().field("endpoint");
    reject_set!(epath(), endpoint, additional_addresses);
    let check =
        super::health_check::endpoint_check(endpoint.health_check_config.as_ref(), &|| {
            epath().field("health_check_config")
        })?;
    let address = socket_address_at(
        endpoint.address.as_ref(),
        &|| epath().field("address"),
        false,
    )?;
    let (health, weight) = status_and_weight(lbe, path)?;
    Ok(Endpoint {
        address,
        weight,
        health,
        hostname: endpoint.hostname.clone(),
        check,
        placement,
    })
}

/// An `LbEndpoint`'s `health_status` and `load_balancing_weight` (1 by
/// default; 0 is refused).
pub(super) fn status_and_weight(
    lbe: &ep::LbEndpoint,
    path: &dyn Fn() -> Path,
) -> Result<(HealthStatus, u32)> {
    let health = HealthStatus::from_i32(lbe.health_status).ok_or_else(|| {
        Error::invalid(
            path().field("health_status"),
            format!("unknown value {}", lbe.health_status),
        )
    })?;
    let weight = match lbe.load_balancing_weight {
        None => 1,
        Some(w) if w >= 1 => w,
        Some(_) => u32_in(
            Some(0),
            1..=u32::MAX,
            1,
            &path().field("load_balancing_weight"),
        )?,
    };
    Ok((health, weight))
}
