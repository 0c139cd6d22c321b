//! Load-balancing settings of a cluster: `least_request_lb_config`
//! (gRFC A48), `load_balancing_policy` (Envoy's extensible policies, of
//! which we support round robin, least request and random) and
//! `common_lb_config` (Envoy; `override_host_status` is gRFC A55's).

use engine::{
    CommonLb, HealthStatus, HealthStatusSet, LbPolicy, LeastRequest, MAX_LEAST_REQUEST_CHOICES,
};
use prost::Name;

use super::common::reject_set;
use crate::decode::{any_type_name, unpack};
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::cluster::v3 as pb;
use crate::pb::envoy::config::core::v3 as core;
use crate::pb::envoy::extensions::load_balancing_policies::least_request::v3 as lr_pb;
use crate::pb::envoy::extensions::load_balancing_policies::random::v3::Random;
use crate::pb::envoy::extensions::load_balancing_policies::round_robin::v3::RoundRobin;

/// Validates `least_request_lb_config` (at `path`; `None` when unset) for
/// `lb_policy: LEAST_REQUEST`. `choice_count` defaults to 2 and must be at
/// least 2 (Envoy, A48); values above [`MAX_LEAST_REQUEST_CHOICES`] are
/// lowered to it, as gRFC A48 does. `active_request_bias.default_value`
/// (default 1.0) must be finite and `>= 0`; its `runtime_key` is ignored
/// (we have no runtime). `slow_start_config` is not supported.
pub fn least_request_lb_config(
    l: Option<&pb::cluster::LeastRequestLbConfig>,
    path: &Path,
) -> Result<LeastRequest> {
    let Some(l) = l else {
        return Ok(LeastRequest::default());
    };
    reject_set!(path, l, slow_start_config);
    Ok(LeastRequest {
        choice_count: choice_count(l.choice_count, &path.field("choice_count"))?,
        active_request_bias: active_request_bias(
            l.active_request_bias.as_ref(),
            &path.field("active_request_bias"),
        )?,
    })
}

/// `choice_count` of least request: default 2, at least 2, capped at
/// [`MAX_LEAST_REQUEST_CHOICES`] (gRFC A48).
fn choice_count(v: Option<u32>, path: &Path) -> Result<u32> {
    match v {
        None => Ok(LeastRequest::default().choice_count),
        Some(n) if n < 2 => Err(Error::invalid(path.clone(), "must be >= 2")),
        Some(n) => Ok(n.min(MAX_LEAST_REQUEST_CHOICES)),
    }
}

/// `active_request_bias` (a `RuntimeDouble`): its `default_value`, which
/// must be finite and `>= 0` (Envoy requires `>= 0`). The `runtime_key` is
/// ignored: there is no runtime to look it up in.
fn active_request_bias(b: Option<&core::RuntimeDouble>, path: &Path) -> Result<f64> {
    let Some(b) = b else {
        return Ok(LeastRequest::default().active_request_bias);
    };
    let v = b.default_value;
    if !v.is_finite() || v < 0.0 {
        return Err(Error::invalid(
            path.field("default_value"),
            format!("{v} is not a finite number >= 0"),
        ));
    }
    Ok(v)
}

/// Validates `load_balancing_policy` (at `path`) into the policy it selects.
///
/// As in Envoy, the first entry of `policies` whose `typed_config` type we
/// support is used and the entries before it are skipped; none supported
/// is an error naming the types seen. Every entry needs a `name` and a
/// `typed_config` (Envoy's field rules). Supported:
/// - `envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin`;
/// - `...least_request.v3.LeastRequest`: `choice_count` and
///   `active_request_bias` as in `least_request_lb_config`;
///   `enable_full_scan` is accepted and ignored (deprecated and unused in
///   Envoy; a pick already looks at every host when `choice_count` is at
///   least the number of hosts); `selection_method` only `N_CHOICES`;
/// - `...random.v3.Random`.
///
/// `slow_start_config` and `locality_lb_config` are not supported.
pub fn load_balancing_policy(p: &pb::LoadBalancingPolicy, path: &Path) -> Result<LbPolicy> {
    let mut chosen = None;
    let mut seen = Vec::new();
    for (i, policy) in p.policies.iter().enumerate() {
        let ppath = path.field("policies").index(i);
        let tpath = ppath.field("typed_extension_config");
        let Some(tec) = &policy.typed_extension_config else {
            return Err(Error::invalid(tpath, "required"));
        };
        if tec.name.is_empty() {
            return Err(Error::invalid(tpath.field("name"), "required"));
        }
        let cpath = tpath.field("typed_config");
        let Some(any) = &tec.typed_config else {
            return Err(Error::invalid(cpath, "required"));
        };
        if chosen.is_some() {
            continue; // Envoy does not look past the policy it uses.
        }
        let type_name = any_type_name(any, &cpath)?;
        if type_name == RoundRobin::full_name() {
            let (rr, rpath) = unpack::<RoundRobin>(any, &cpath)?;
            reject_set!(rpath, rr, slow_start_config, locality_lb_config);
            chosen = Some(LbPolicy::RoundRobin);
        } else if type_name == lr_pb::LeastRequest::full_name() {
            let (lr, lpath) = unpack::<lr_pb::LeastRequest>(any, &cpath)?;
            chosen = Some(LbPolicy::LeastRequest(least_request_policy(&lr, &lpath)?));
        } else if type_name == Random::full_name() {
            let (r, rpath) = unpack::<Random>(any, &cpath)?;
            reject_set!(rpath, r, locality_lb_config);
            chosen = Some(LbPolicy::Random);
        } else {
            seen.push(type_name);
        }
    }
    chosen.ok_or_else(|| {
        Error::unsupported_msg(
            path.clone(),
            format!(
                "no supported policy in [{}] (supported: {}, {}, {})",
                seen.join(", "),
                RoundRobin::full_name(),
                lr_pb::LeastRequest::full_name(),
                Random::full_name(),
            ),
        )
    })
}

/// The `LeastRequest` load balancing policy (at `path`).
fn least_request_policy(l: &lr_pb::LeastRequest, path: &Path) -> Result<LeastRequest> {
    use lr_pb::least_request::SelectionMethod;
    // `enable_full_scan` is deprecated and unused in Envoy: accepted as is.
    reject_set!(path, l, slow_start_config, locality_lb_config);
    match SelectionMethod::try_from(l.selection_method) {
        Ok(SelectionMethod::NChoices) => {}
        Ok(other) => {
            return Err(Error::unsupported_value(
                path.field("selection_method"),
                other.as_str_name(),
            ))
        }
        Err(_) => {
            return Err(Error::invalid(
                path.field("selection_method"),
                format!("unknown value {}", l.selection_method),
            ))
        }
    }
    Ok(LeastRequest {
        choice_count: choice_count(l.choice_count, &path.field("choice_count"))?,
        active_request_bias: active_request_bias(
            l.active_request_bias.as_ref(),
            &path.field("active_request_bias"),
        )?,
    })
}

/// Validates `common_lb_config` (at `path`) into Envoy's defaults overlaid
/// with what is set:
/// - `healthy_panic_threshold.value` in `[0, 100]` (Envoy), rounded to a
///   whole percent as Envoy does;
/// - `override_host_status.statuses`: known `HealthStatus` values (Envoy);
///   an empty list is an empty set (host overrides disabled).
///
/// - `locality_weighted_lb_config`: locality-weighted balancing.
///
/// - `ignore_new_hosts_until_first_hc`.
///
/// The zone-aware and consistent-hashing settings, `update_merge_window`
/// and `close_connections_on_host_set_change` are not supported.
pub fn common_lb_config(c: &pb::cluster::CommonLbConfig, path: &Path) -> Result<CommonLb> {
    use pb::cluster::common_lb_config::LocalityConfigSpecifier as L;
    match &c.locality_config_specifier {
        Some(L::ZoneAwareLbConfig(_)) => {
            return Err(Error::unsupported(path.field("zone_aware_lb_config")))
        }
        Some(L::LocalityWeightedLbConfig(_)) | None => {}
    }
    reject_set!(
        path,
        c,
        update_merge_window,
        close_connections_on_host_set_change,
        consistent_hashing_lb_config,
    );
    let mut out = CommonLb::default();
    if let Some(p) = &c.healthy_panic_threshold {
        if !(0.0..=100.0).contains(&p.value) {
            return Err(Error::invalid(
                path.field("healthy_panic_threshold").field("value"),
                format!("{} is out of range [0, 100]", p.value),
            ));
        }
        out.healthy_panic_threshold = p.value.round() as u32;
    }
    if let Some(set) = &c.override_host_status {
        let spath = path.field("override_host_status").field("statuses");
        out.override_host_status = set
            .statuses
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                HealthStatus::from_i32(v)
                    .ok_or_else(|| Error::invalid(spath.index(i), format!("unknown value {v}")))
            })
            .collect::<Result<HealthStatusSet>>()?;
    }
    out.ignore_new_hosts_until_first_hc = c.ignore_new_hosts_until_first_hc;
    out.locality_weighted = matches!(
        c.locality_config_specifier,
        Some(L::LocalityWeightedLbConfig(_))
    );
    Ok(out)
}

/// `ring_hash_lb_config` / `maglev_lb_config` into a `RING_HASH` /
/// `MAGLEV` `policy`, with Envoy's ranges (ring sizes at most 8M, minimum
/// not above maximum; a prime table of at most 5,000,011); either config
/// with another policy is refused.
pub fn hash_lb_config(
    policy: LbPolicy,
    config: Option<&pb::cluster::LbConfig>,
    path: &Path,
) -> Result<LbPolicy> {
    use pb::cluster::LbConfig;
    match (policy, config) {
        (LbPolicy::RingHash(_), Some(LbConfig::RingHashLbConfig(r))) => {
            let rpath = path.field("ring_hash_lb_config");
            if r.hash_function != pb::ring_hash_lb_config::HashFunction::XxHash as i32 {
                return Err(Error::unsupported_value(
                    rpath.field("hash_function"),
                    "MURMUR_HASH_2",
                ));
            }
            const MAX: u64 = engine::DEFAULT_MAX_RING_SIZE;
            let size = |v: Option<u64>, default: u64, name: &str| -> Result<u64> {
                match v {
                    None => Ok(default),
                    Some(v) if (1..=MAX).contains(&v) => Ok(v),
                    Some(v) => Err(Error::invalid(
                        rpath.field(name),
                        format!("{v} is out of range 1..={MAX}"),
                    )),
                }
            };
            let ring = engine::RingHash {
                minimum_ring_size: size(
                    r.minimum_ring_size,
                    engine::DEFAULT_MIN_RING_SIZE,
                    "minimum_ring_size",
                )?,
                maximum_ring_size: size(r.maximum_ring_size, MAX, "maximum_ring_size")?,
            };
            if ring.minimum_ring_size > ring.maximum_ring_size {
                return Err(Error::invalid(
                    rpath.field("minimum_ring_size"),
                    format!(
                        "{} is above maximum_ring_size ({})",
                        ring.minimum_ring_size, ring.maximum_ring_size
                    ),
                ));
            }
            Ok(LbPolicy::RingHash(ring))
        }
        (LbPolicy::Maglev(_), Some(LbConfig::MaglevLbConfig(m))) => {
            let table_size = match m.table_size {
                None => engine::DEFAULT_MAGLEV_TABLE_SIZE,
                Some(t) if t <= 5_000_011 && is_prime(t) => t,
                Some(t) => {
                    return Err(Error::invalid(
                        path.field("maglev_lb_config").field("table_size"),
                        format!("{t} is not a prime of at most 5000011"),
                    ))
                }
            };
            Ok(LbPolicy::Maglev(engine::Maglev { table_size }))
        }
        (_, Some(LbConfig::RingHashLbConfig(_))) => Err(Error::invalid(
            path.field("ring_hash_lb_config"),
            "only allowed with lb_policy RING_HASH",
        )),
        (_, Some(LbConfig::MaglevLbConfig(_))) => Err(Error::invalid(
            path.field("maglev_lb_config"),
            "only allowed with lb_policy MAGLEV",
        )),
        (policy, _) => Ok(policy),
    }
}

fn is_prime(n: u64) -> bool {
    n >= 2
        && (2..)
            .take_while(|d| d * d <= n)
            .all(|d| !n.is_multiple_of(d))
}
