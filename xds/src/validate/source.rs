//! `ConfigSource` and `dynamic_resources`: where xDS resources come from.

use std::time::Duration;

use engine::{AdsConfig, ConfigSource, DynamicResources, DEFAULT_INITIAL_FETCH_TIMEOUT};

use super::common::reject_set;
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::bootstrap::v3::bootstrap::DynamicResources as PbDynamic;
use crate::pb::envoy::config::core::v3::{
    self as core, api_config_source::ApiType, config_source::ConfigSourceSpecifier,
    grpc_service::TargetSpecifier, ApiVersion,
};

/// Which kinds of source a field accepts: LDS and CDS may also come from a
/// file; RDS and EDS only over ADS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allowed {
    AdsOrPath,
    AdsOnly,
}

/// Validates a `ConfigSource`.
pub fn config_source(
    c: &core::ConfigSource,
    path: &Path,
    allowed: Allowed,
) -> Result<ConfigSource> {
    reject_set!(path, c, authorities);
    match ApiVersion::try_from(c.resource_api_version) {
        Ok(ApiVersion::Auto | ApiVersion::V3) => {}
        _ => {
            return Err(Error::unsupported_msg(
                path.field("resource_api_version"),
                "only V3 is supported",
            ))
        }
    }
    let initial_fetch_timeout = super::common::timeout_or(
        c.initial_fetch_timeout.as_ref(),
        DEFAULT_INITIAL_FETCH_TIMEOUT,
        &path.field("initial_fetch_timeout"),
    )?;
    let file = |p: &str, fpath: Path| -> Result<ConfigSource> {
        if allowed == Allowed::AdsOnly {
            return Err(Error::unsupported_msg(
                fpath,
                "only `ads: {}` is supported here",
            ));
        }
        if p.is_empty() {
            return Err(Error::invalid(fpath, "required"));
        }
        Ok(ConfigSource::Path(p.into()))
    };
    match &c.config_source_specifier {
        Some(ConfigSourceSpecifier::Ads(_)) => Ok(ConfigSource::Ads {
            initial_fetch_timeout,
        }),
        Some(ConfigSourceSpecifier::Path(p)) => file(p, path.field("path")),
        Some(ConfigSourceSpecifier::PathConfigSource(pcs)) => {
            let ppath = path.field("path_config_source");
            super::sds::watched_directory(pcs.watched_directory.as_ref(), &ppath)?;
            file(&pcs.path, ppath.field("path"))
        }
        Some(ConfigSourceSpecifier::ApiConfigSource(_)) => Err(Error::unsupported_msg(
            path.field("api_config_source"),
            "only `ads: {}` (with dynamic_resources.ads_config) is supported",
        )),
        Some(ConfigSourceSpecifier::Self_(_)) => Err(Error::unsupported_msg(
            path.field("self"),
            "only `ads: {}` (with dynamic_resources.ads_config) is supported",
        )),
        None => Err(Error::invalid(
            path.field("ads"),
            "a config source is required",
        )),
    }
}

/// Validates `ads_config`: gRPC, transport V3, one `envoy_grpc` service.
pub fn ads_config(a: &core::ApiConfigSource, path: &Path) -> Result<AdsConfig> {
    reject_set!(
        path,
        a,
        cluster_names,
        refresh_delay,
        rate_limit_settings,
        config_validators
    );
    let delta = match ApiType::try_from(a.api_type) {
        Ok(ApiType::Grpc | ApiType::AggregatedGrpc) => false,
        Ok(ApiType::DeltaGrpc | ApiType::AggregatedDeltaGrpc) => true,
        Ok(other) => {
            return Err(Error::unsupported_value(
                path.field("api_type"),
                other.as_str_name(),
            ))
        }
        Err(_) => {
            return Err(Error::invalid(
                path.field("api_type"),
                format!("unknown value {}", a.api_type),
            ))
        }
    };
    if ApiVersion::try_from(a.transport_api_version) != Ok(ApiVersion::V3) {
        return Err(Error::invalid(
            path.field("transport_api_version"),
            "must be V3",
        ));
    }
    let gpath = path.field("grpc_services");
    let service = match a.grpc_services.as_slice() {
        [one] => one,
        [] => return Err(Error::invalid(gpath, "exactly one is required")),
        _ => {
            return Err(Error::unsupported_msg(
                gpath.index(1),
                "only one grpc service is supported",
            ))
        }
    };
    let spath = gpath.index(0);
    reject_set!(spath, service, initial_metadata, retry_policy);
    // `timeout` bounds unary calls only; Envoy ignores it for the ADS stream.
    let envoy_grpc = match &service.target_specifier {
        Some(TargetSpecifier::EnvoyGrpc(g)) => g,
        Some(TargetSpecifier::GoogleGrpc(_)) => {
            return Err(Error::unsupported_msg(
                spath.field("google_grpc"),
                "use envoy_grpc with a static cluster",
            ))
        }
        None => return Err(Error::invalid(spath.field("envoy_grpc"), "required")),
    };
    let epath = spath.field("envoy_grpc");
    reject_set!(epath, envoy_grpc, retry_policy, max_receive_message_length);
    if envoy_grpc.cluster_name.is_empty() {
        return Err(Error::invalid(epath.field("cluster_name"), "required"));
    }
    Ok(AdsConfig {
        cluster: envoy_grpc.cluster_name.clone(),
        authority: if envoy_grpc.authority.is_empty() {
            envoy_grpc.cluster_name.clone()
        } else {
            envoy_grpc.authority.clone()
        },
        set_node_on_first_message_only: a.set_node_on_first_message_only,
        delta,
    })
}

/// Validates `dynamic_resources` (the static cluster check for ADS is done
/// by the caller, which knows the clusters).
pub fn dynamic_resources(d: &PbDynamic, path: &Path) -> Result<DynamicResources> {
    reject_set!(path, d, lds_resources_locator, cds_resources_locator);
    let ads = d
        .ads_config
        .as_ref()
        .map(|a| ads_config(a, &path.field("ads_config")))
        .transpose()?;
    let source = |c: &Option<core::ConfigSource>, name: &str| -> Result<Option<ConfigSource>> {
        let Some(c) = c else { return Ok(None) };
        let spath = path.field(name);
        let s = config_source(c, &spath, Allowed::AdsOrPath)?;
        if matches!(s, ConfigSource::Ads { .. }) && ads.is_none() {
            return Err(Error::invalid(
                spath.field("ads"),
                "needs dynamic_resources.ads_config",
            ));
        }
        Ok(Some(s))
    };
    Ok(DynamicResources {
        lds: source(&d.lds_config, "lds_config")?,
        cds: source(&d.cds_config, "cds_config")?,
        ads,
    })
}

/// The initial fetch timeout a source implies (`None` for files, which are
/// read synchronously).
pub fn initial_fetch_timeout(s: &ConfigSource) -> Option<Duration> {
    match s {
        ConfigSource::Ads {
            initial_fetch_timeout,
        } => *initial_fetch_timeout,
        ConfigSource::Path(_) => None,
    }
}
