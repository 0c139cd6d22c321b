//! RBAC (`envoy.config.rbac.v3.RBAC`) for the HTTP filter (`envoy.filters.http.rbac`, `RBACPerRoute`) and the network filter (`envoy.filters.network.rbac`) → `engine::rbac::Rbac`, `engine::RbacFilter`, `engine::NetworkRbac`.

use engine::rbac::{Permission, Principal, Rbac, RbacAction, RbacPolicy};
use engine::{NetworkRbac, RbacFilter};

use super::common::{reject_set, strict_duration};
use super::filter_chain::ranges;
use super::route_match::{header_matcher, string_matcher};
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::core::v3 as core;
use crate::pb::envoy::config::rbac::v3 as pb;
use crate::pb::envoy::extensions::filters::http::rbac::v3 as http;
use crate::pb::envoy::extensions::filters::network::rbac::v3 as network;
use crate::pb::envoy::r#type::matcher::v3::PathMatcher;

/// Nested sets deeper than this are refused: the evaluation recurses.
const MAX_DEPTH: usize = 32;

/// The HTTP filter's config (at `path`).
pub(super) fn http_rbac(r: &http::Rbac, path: &Path) -> Result<RbacFilter> {
    reject_set!(path, r, matcher, shadow_matcher, track_per_rule_stats);
    Ok(RbacFilter {
        rules_stat_prefix: r.rules_stat_prefix.clone(),
        shadow_rules_stat_prefix: r.shadow_rules_stat_prefix.clone(),
        ..filter(r.rules.as_ref(), r.shadow_rules.as_ref(), path)?
    })
}

/// A route's `RBACPerRoute` (at `path`): its `rbac` replaces the filter's
/// (unset: none, every request allowed).
pub(super) fn http_rbac_per_route(r: &http::RbacPerRoute, path: &Path) -> Result<RbacFilter> {
    match &r.rbac {
        Some(rbac) => http_rbac(rbac, &path.field("rbac")),
        None => Ok(RbacFilter::default()),
    }
}

/// The network filter's config (at `path`).
pub(super) fn network_rbac(r: &network::Rbac, path: &Path) -> Result<NetworkRbac> {
    reject_set!(path, r, matcher, shadow_matcher);
    if r.stat_prefix.is_empty() {
        return Err(Error::invalid(path.field("stat_prefix"), "required"));
    }
    if network::rbac::EnforcementType::try_from(r.enforcement_type).is_err() {
        return Err(Error::invalid(
            path.field("enforcement_type"),
            format!("unknown value {}", r.enforcement_type),
        ));
    }
    Ok(NetworkRbac {
        stat_prefix: r.stat_prefix.clone(),
        filter: filter(r.rules.as_ref(), r.shadow_rules.as_ref(), path)?,
        delay_deny: match &r.delay_deny {
            Some(d) => {
                Some(strict_duration(d, &path.field("delay_deny"))?).filter(|d| !d.is_zero())
            }
            None => None,
        },
    })
}

fn filter(rules: Option<&pb::Rbac>, shadow: Option<&pb::Rbac>, path: &Path) -> Result<RbacFilter> {
    Ok(RbacFilter {
        rules: rules.map(|r| rbac(r, &path.field("rules"))).transpose()?,
        shadow: shadow
            .map(|r| rbac(r, &path.field("shadow_rules")))
            .transpose()?,
        ..RbacFilter::default()
    })
}

fn rbac(r: &pb::Rbac, path: &Path) -> Result<Rbac> {
    reject_set!(path, r, audit_logging_options);
    let action = match pb::rbac::Action::try_from(r.action) {
        Ok(pb::rbac::Action::Allow) => RbacAction::Allow,
        Ok(pb::rbac::Action::Deny) => RbacAction::Deny,
        Ok(pb::rbac::Action::Log) => RbacAction::Log,
        Err(_) => {
            return Err(Error::invalid(
                path.field("action"),
                format!("unknown value {}", r.action),
            ))
        }
    };
    // Envoy keeps policies in name order; the first that matches is named.
    let mut names: Vec<&String> = r.policies.keys().collect();
    names.sort();
    let ppath = path.field("policies");
    let policies = names
        .into_iter()
        .map(|name| {
            let p = &r.policies[name];
            let at = ppath.key(name);
            reject_set!(at, p, condition, checked_condition, cel_config);
            if p.permissions.is_empty() {
                return Err(Error::invalid(
                    at.field("permissions"),
                    "at least one is required",
                ));
            }
            if p.principals.is_empty() {
                return Err(Error::invalid(
                    at.field("principals"),
                    "at least one is required",
                ));
            }
            let perm = at.field("permissions");
            let prin = at.field("principals");
            Ok((
                name.clone(),
                RbacPolicy {
                    permissions: p
                        .permissions
                        .iter()
                        .enumerate()
                        .map(|(i, x)| permission(x, &perm.index(i), 0))
                        .collect::<Result<_>>()?,
                    principals: p
                        .principals
                        .iter()
                        .enumerate()
                        .map(|(i, x)| principal(x, &prin.index(i), 0))
                        .collect::<Result<_>>()?,
                },
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Rbac { action, policies })
}

fn deep(depth: usize, path: &Path) -> Result<()> {
    match depth > MAX_DEPTH {
        true => Err(Error::invalid(
            path.clone(),
            format!("nested deeper than {MAX_DEPTH}"),
        )),
        false => Ok(()),
    }
}

fn one_range(r: &core::CidrRange, path: &Path) -> Result<engine::filter_chain::CidrRange> {
    let mut v = ranges(std::slice::from_ref(r), path)?;
    // `ranges` names its entries by index; one entry, one range.
    v.pop()
        .ok_or_else(|| Error::invalid(path.clone(), "a range is required"))
}

fn url_path(m: &PathMatcher, path: &Path) -> Result<engine::matcher::HeaderMatchKind> {
    use crate::pb::envoy::r#type::matcher::v3::path_matcher::Rule;
    match &m.rule {
        Some(Rule::Path(s)) => string_matcher(s, &path.field("path")),
        None => Err(Error::invalid(path.field("path"), "required")),
    }
}

fn permission(p: &pb::Permission, path: &Path, depth: usize) -> Result<Permission> {
    use pb::permission::Rule as R;
    deep(depth, path)?;
    let set = |s: &pb::permission::Set, field: &str| -> Result<Vec<Permission>> {
        let at = path.field(field).field("rules");
        if s.rules.is_empty() {
            return Err(Error::invalid(at, "at least one is required"));
        }
        s.rules
            .iter()
            .enumerate()
            .map(|(i, r)| permission(r, &at.index(i), depth + 1))
            .collect()
    };
    Ok(match &p.rule {
        Some(R::AndRules(s)) => Permission::And(set(s, "and_rules")?),
        Some(R::OrRules(s)) => Permission::Or(set(s, "or_rules")?),
        Some(R::Any(true)) => Permission::Any,
        Some(R::Any(false)) => return Err(Error::invalid(path.field("any"), "must be true")),
        Some(R::Header(h)) => Permission::Header(header_matcher(h, &path.field("header"))?),
        Some(R::UrlPath(m)) => Permission::UrlPath(url_path(m, &path.field("url_path"))?),
        Some(R::DestinationIp(c)) => {
            Permission::DestinationIp(one_range(c, &path.field("destination_ip"))?)
        }
        Some(R::DestinationPort(port)) => match u16::try_from(*port) {
            Ok(port) => Permission::DestinationPort(port),
            Err(_) => {
                return Err(Error::invalid(
                    path.field("destination_port"),
                    format!("{port} is above 65535"),
                ))
            }
        },
        Some(R::DestinationPortRange(r)) => Permission::DestinationPortRange(r.start, r.end),
        Some(R::NotRule(inner)) => Permission::Not(Box::new(permission(
            inner,
            &path.field("not_rule"),
            depth + 1,
        )?)),
        Some(R::RequestedServerName(m)) => Permission::RequestedServerName(string_matcher(
            m,
            &path.field("requested_server_name"),
        )?),
        Some(R::Metadata(_)) => return Err(Error::unsupported(path.field("metadata"))),
        Some(R::Matcher(_)) => return Err(Error::unsupported(path.field("matcher"))),
        Some(R::UriTemplate(_)) => return Err(Error::unsupported(path.field("uri_template"))),
        Some(R::SourcedMetadata(_)) => {
            return Err(Error::unsupported(path.field("sourced_metadata")))
        }
        None => return Err(Error::invalid(path.clone(), "a rule is required")),
    })
}

fn principal(p: &pb::Principal, path: &Path, depth: usize) -> Result<Principal> {
    use pb::principal::Identifier as I;
    deep(depth, path)?;
    let set = |s: &pb::principal::Set, field: &str| -> Result<Vec<Principal>> {
        let at = path.field(field).field("ids");
        if s.ids.is_empty() {
            return Err(Error::invalid(at, "at least one is required"));
        }
        s.ids
            .iter()
            .enumerate()
            .map(|(i, r)| principal(r, &at.index(i), depth + 1))
            .collect()
    };
    Ok(match &p.identifier {
        Some(I::AndIds(s)) => Principal::And(set(s, "and_ids")?),
        Some(I::OrIds(s)) => Principal::Or(set(s, "or_ids")?),
        Some(I::Any(true)) => Principal::Any,
        Some(I::Any(false)) => return Err(Error::invalid(path.field("any"), "must be true")),
        Some(I::Authenticated(a)) => Principal::Authenticated(match &a.principal_name {
            Some(m) => Some(string_matcher(
                m,
                &path.field("authenticated").field("principal_name"),
            )?),
            None => None,
        }),
        Some(I::SourceIp(c)) => Principal::DirectRemoteIp(one_range(c, &path.field("source_ip"))?),
        Some(I::DirectRemoteIp(c)) => {
            Principal::DirectRemoteIp(one_range(c, &path.field("direct_remote_ip"))?)
        }
        Some(I::RemoteIp(c)) => Principal::RemoteIp(one_range(c, &path.field("remote_ip"))?),
        Some(I::Header(h)) => Principal::Header(header_matcher(h, &path.field("header"))?),
        Some(I::UrlPath(m)) => Principal::UrlPath(url_path(m, &path.field("url_path"))?),
        Some(I::NotId(inner)) => Principal::Not(Box::new(principal(
            inner,
            &path.field("not_id"),
            depth + 1,
        )?)),
        Some(I::Metadata(_)) => return Err(Error::unsupported(path.field("metadata"))),
        Some(I::FilterState(_)) => return Err(Error::unsupported(path.field("filter_state"))),
        Some(I::SourcedMetadata(_)) => {
            return Err(Error::unsupported(path.field("sourced_metadata")))
        }
        Some(I::Custom(_)) => return Err(Error::unsupported(path.field("custom"))),
        None => return Err(Error::invalid(path.clone(), "an identifier is required")),
    })
}
