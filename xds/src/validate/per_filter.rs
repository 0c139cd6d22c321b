//! A virtual host's or route's `typed_per_filter_config` (and the legacy `cors` field) → `engine::PerFilterConfig`: each entry recognised by its config's type, validated by its filter's module.

use std::collections::HashMap;
use std::sync::Arc;

use engine::{CorsPolicies, PerFilterConfig, PerRoute};
use prost::Name;

use super::compressor::compressor_per_route;
use super::cors::{cors_policy, legacy_cors_policy};
use super::csrf::csrf_policy;
use super::ext_authz::ext_authz_per_route;
use super::fault::fault;
use super::local_rate_limit::local_rate_limit;
use super::rbac::http_rbac_per_route;
use super::session::stateful_session_per_route;
use crate::decode::{any_type_name, any_type_url, unpack};
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::route::v3 as pb;
use crate::pb::envoy::extensions::filters::http::compressor::v3::CompressorPerRoute as PbCompressorPerRoute;
use crate::pb::envoy::extensions::filters::http::cors::v3::CorsPolicy as PbCorsPolicy;
use crate::pb::envoy::extensions::filters::http::csrf::v3::CsrfPolicy as PbCsrfPolicy;
use crate::pb::envoy::extensions::filters::http::ext_authz::v3::ExtAuthzPerRoute as PbExtAuthzPerRoute;
use crate::pb::envoy::extensions::filters::http::fault::v3::HttpFault as PbHttpFault;
use crate::pb::envoy::extensions::filters::http::local_ratelimit::v3::LocalRateLimit as PbLocalRateLimit;
use crate::pb::envoy::extensions::filters::http::rbac::v3::RbacPerRoute as PbRbacPerRoute;
use crate::pb::envoy::extensions::filters::http::stateful_session::v3::StatefulSessionPerRoute as PbSessionPerRoute;

/// Where a `typed_per_filter_config` sits: CORS reads its levels together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    RouteConfig,
    VirtualHost,
    Route,
}

/// The filters that take a per-route config, by the names Envoy registers
/// them under: a `FilterConfig { disabled: true }` under one of these keys
/// disables that filter whatever its `config`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    StatefulSession,
    Cors,
    Csrf,
    Compressor,
    Fault,
    LocalRateLimit,
    Rbac,
    ExtAuthz,
}

impl Kind {
    fn of_key(key: &str) -> Option<Self> {
        match key {
            "envoy.filters.http.stateful_session" => Some(Self::StatefulSession),
            "envoy.filters.http.cors" => Some(Self::Cors),
            "envoy.filters.http.csrf" => Some(Self::Csrf),
            "envoy.filters.http.compressor" => Some(Self::Compressor),
            "envoy.filters.http.fault" => Some(Self::Fault),
            "envoy.filters.http.local_ratelimit" => Some(Self::LocalRateLimit),
            "envoy.filters.http.rbac" => Some(Self::Rbac),
            "envoy.filters.http.ext_authz" => Some(Self::ExtAuthz),
            _ => None,
        }
    }

    fn of_type(name: &str) -> Option<Self> {
        if name == PbSessionPerRoute::full_name() {
            Some(Self::StatefulSession)
        } else if name == PbCorsPolicy::full_name() {
            Some(Self::Cors)
        } else if name == PbCsrfPolicy::full_name() {
            Some(Self::Csrf)
        } else if name == PbCompressorPerRoute::full_name() {
            Some(Self::Compressor)
        } else if name == PbHttpFault::full_name() {
            Some(Self::Fault)
        } else if name == PbLocalRateLimit::full_name() {
            Some(Self::LocalRateLimit)
        } else if name == PbRbacPerRoute::full_name() {
            Some(Self::Rbac)
        } else if name == PbExtAuthzPerRoute::full_name() {
            Some(Self::ExtAuthz)
        } else {
            None
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::StatefulSession => "stateful session",
            Self::Cors => "CORS",
            Self::Csrf => "CSRF",
            Self::Compressor => "compressor",
            Self::Fault => "fault",
            Self::LocalRateLimit => "local rate limit",
            Self::Rbac => "RBAC",
            Self::ExtAuthz => "external authorization",
        }
    }
}

/// Validates a virtual host's or route's `typed_per_filter_config` (at
/// `path`), with the level's legacy `cors` policy (`legacy_cors`, its
/// path).
///
/// Each value is either a filter's per-route config or an
/// `envoy.config.route.v3.FilterConfig` wrapping one (with `is_optional`
/// and `disabled`). Entries are recognised by the config's type (Envoy too
/// picks the parser by type). Envoy applies an entry to the HTTP filter
/// whose `name` is the key; we do not match keys to filter names (a
/// connection manager has at most one filter of each of these kinds, and
/// route tables are validated apart from listeners), so any key works,
/// and at most one entry per filter kind is allowed:
/// - `StatefulSessionPerRoute`, `cors.v3.CorsPolicy`, `csrf.v3.CsrfPolicy`,
///   `CompressorPerRoute`, `fault.v3.HTTPFault`, `LocalRateLimit`,
///   `RBACPerRoute`, `ExtAuthzPerRoute` are validated by their filter;
/// - a `FilterConfig` with `disabled: true` disables its filter, named by
///   the key (Envoy's registered name) or by `config`'s type; `config` is
///   not otherwise looked at (as in Envoy). One that names no filter we
///   run changes nothing;
/// - any other type is an error unless it is wrapped in a `FilterConfig`
///   with `is_optional: true`, in which case it is ignored (gRFC A39).
///
/// The legacy `cors` is kept apart: it applies only where no level has a
/// typed `CorsPolicy` (`engine::CorsPolicies`).
pub fn typed_per_filter_config(
    map: &HashMap<String, prost_types::Any>,
    path: &Path,
    level: Level,
    legacy_cors: Option<(&pb::CorsPolicy, Path)>,
) -> Result<PerFilterConfig> {
    // Sorted, so that which entry an error names does not depend on the
    // map's iteration order.
    let mut entries: Vec<_> = map.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let mut out = PerFilterConfig::default();
    let mut seen: Vec<(Kind, &str)> = Vec::new();
    let mut cors = None;
    for (key, any) in entries {
        let kpath = path.key(key);
        let Some((kind, entry)) = entry(key, any, &kpath)? else {
            continue;
        };
        if let Some((_, first)) = seen.iter().find(|(k, _)| *k == kind) {
            return Err(Error::invalid(
                kpath,
                format!(
                    "only one {} per-route config is allowed (another is under {first:?})",
                    kind.name()
                ),
            ));
        }
        seen.push((kind, key));
        match entry {
            Entry::Disabled => match kind {
                Kind::StatefulSession => {
                    out.stateful_session = Some(engine::StatefulSessionPerRoute::Disabled)
                }
                Kind::Cors => cors = Some(PerRoute::Disabled),
                Kind::Csrf => out.csrf = Some(PerRoute::Disabled),
                Kind::Compressor => out.compressor = Some(PerRoute::Disabled),
                Kind::Fault => out.fault = Some(PerRoute::Disabled),
                Kind::LocalRateLimit => out.local_rate_limit = Some(PerRoute::Disabled),
                Kind::Rbac => out.rbac = Some(PerRoute::Disabled),
                Kind::ExtAuthz => out.ext_authz = Some(PerRoute::Disabled),
            },
            Entry::Session(s) => out.stateful_session = Some(s),
            Entry::Cors(p) => cors = Some(PerRoute::Override(Arc::new(p))),
            Entry::Csrf(p) => out.csrf = Some(PerRoute::Override(Arc::new(p))),
            Entry::Fault(f) => out.fault = Some(PerRoute::Override(Arc::new(f))),
            Entry::Rbac(r) => out.rbac = Some(PerRoute::Override(Arc::new(r))),
            Entry::LocalRateLimit(l) => {
                out.local_rate_limit = Some(PerRoute::Override(Arc::new(l)))
            }
            Entry::ExtAuthz(PerRoute::Disabled) => out.ext_authz = Some(PerRoute::Disabled),
            Entry::ExtAuthz(PerRoute::Override(c)) => {
                out.ext_authz = Some(PerRoute::Override(Arc::new(c)))
            }
            Entry::Compressor(PerRoute::Disabled) => out.compressor = Some(PerRoute::Disabled),
            Entry::Compressor(PerRoute::Override(o)) => {
                out.compressor = Some(PerRoute::Override(Arc::new(o)))
            }
        }
    }
    let legacy = match legacy_cors {
        Some((legacy, lpath)) => Some(Arc::new(legacy_cors_policy(legacy, &lpath)?)),
        None => None,
    };
    out.cors = match level {
        Level::RouteConfig => CorsPolicies {
            route_config: cors,
            ..CorsPolicies::default()
        },
        Level::VirtualHost => CorsPolicies {
            virtual_host: cors,
            legacy_virtual_host: legacy,
            ..CorsPolicies::default()
        },
        Level::Route => CorsPolicies {
            route: cors,
            legacy_route: legacy,
            ..CorsPolicies::default()
        },
    };
    Ok(out)
}

/// One entry, validated.
enum Entry {
    Disabled,
    Session(engine::StatefulSessionPerRoute),
    Cors(engine::CorsPolicy),
    Csrf(engine::CsrfPolicy),
    Compressor(PerRoute<engine::CompressorOverrides>),
    Fault(engine::Fault),
    LocalRateLimit(engine::LocalRateLimit),
    Rbac(engine::RbacFilter),
    ExtAuthz(PerRoute<engine::CheckSettings>),
}

/// One `typed_per_filter_config` entry: `None` when it is ignored.
fn entry(key: &str, any: &prost_types::Any, path: &Path) -> Result<Option<(Kind, Entry)>> {
    if any_type_name(any, path)? != pb::FilterConfig::full_name() {
        return config(key, any, path, false);
    }
    let (fc, fpath) = unpack::<pb::FilterConfig>(any, path)?;
    let cpath = fpath.field("config");
    if fc.disabled {
        let kind = match Kind::of_key(key) {
            Some(k) => Some(k),
            None => match &fc.config {
                Some(config) => Kind::of_type(&any_type_name(config, &cpath)?),
                None => None,
            },
        };
        return Ok(kind.map(|k| (k, Entry::Disabled)));
    }
    match &fc.config {
        Some(c) => config(key, c, &cpath, fc.is_optional),
        None => Err(Error::invalid(cpath, "required unless disabled is true")),
    }
}

/// A filter's per-route config (at `path`), directly in the map or inside a
/// `FilterConfig` (whose `is_optional` is `optional`).
fn config(
    key: &str,
    any: &prost_types::Any,
    path: &Path,
    optional: bool,
) -> Result<Option<(Kind, Entry)>> {
    let name = any_type_name(any, path)?;
    match Kind::of_type(&name) {
        Some(Kind::StatefulSession) => {
            let (s, spath) = unpack::<PbSessionPerRoute>(any, path)?;
            let s = stateful_session_per_route(&s, &spath)?;
            Ok(Some((Kind::StatefulSession, Entry::Session(s))))
        }
        Some(Kind::Cors) => {
            let (p, ppath) = unpack::<PbCorsPolicy>(any, path)?;
            Ok(Some((Kind::Cors, Entry::Cors(cors_policy(&p, &ppath)?))))
        }
        Some(Kind::Csrf) => {
            let (p, ppath) = unpack::<PbCsrfPolicy>(any, path)?;
            Ok(Some((Kind::Csrf, Entry::Csrf(csrf_policy(&p, &ppath)?))))
        }
        Some(Kind::Compressor) => {
            let (p, ppath) = unpack::<PbCompressorPerRoute>(any, path)?;
            let c = compressor_per_route(&p, &ppath)?;
            Ok(Some((Kind::Compressor, Entry::Compressor(c))))
        }
        Some(Kind::Rbac) => {
            let (r, rpath) = unpack::<PbRbacPerRoute>(any, path)?;
            Ok(Some((Kind::Rbac, Entry::Rbac(http_rbac_per_route(&r, &rpath)?))))
        }
        Some(Kind::LocalRateLimit) => {
            let (l, lpath) = unpack::<PbLocalRateLimit>(any, path)?;
            let l = local_rate_limit(&l, &lpath)?;
            if l.bucket.is_none() {
                // Envoy: a route's config has its own default bucket.
                return Err(Error::invalid(lpath.field("token_bucket"), "required in a per-route config"));
            }
            Ok(Some((Kind::LocalRateLimit, Entry::LocalRateLimit(l))))
        }
        Some(Kind::ExtAuthz) => {
            let (r, rpath) = unpack::<PbExtAuthzPerRoute>(any, path)?;
            let r = ext_authz_per_route(&r, &rpath)?;
            Ok(Some((Kind::ExtAuthz, Entry::ExtAuthz(r))))
        }
        Some(Kind::Fault) => {
            let (f, fpath) = unpack::<PbHttpFault>(any, path)?;
            Ok(Some((Kind::Fault, Entry::Fault(fault(&f, &fpath)?))))
        }
        None if optional => Ok(None),
        None => Err(Error::unsupported_msg(
            path.clone(),
            format!(
                "per-route config for {key:?} ({}) is not supported (wrap it in a {} with is_optional: true to skip it)",
                any_type_url(any, path)?,
                pb::FilterConfig::type_url(),
            ),
        )),
    }
}
