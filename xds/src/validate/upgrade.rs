//! `upgrade_configs` of a connection manager and of a route → `engine::UpgradeConfig`: the types forwarded as tunnels (WebSocket and the like) and CONNECT terminated here (`connect_config`), each named once; upgrade filters refused by name.

use std::collections::HashSet;

use engine::UpgradeConfig;

use super::common::reject_set;
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::route::v3 as route;
use crate::pb::envoy::extensions::filters::network::http_connection_manager::v3 as hcm;

/// One entry's type, checked: not empty, not repeated.
fn upgrade_type(t: &str, seen: &mut HashSet<String>, path: &Path) -> Result<String> {
    let tpath = path.field("upgrade_type");
    if t.is_empty() {
        return Err(Error::invalid(tpath, "required"));
    }
    if t.bytes().any(|b| b.is_ascii_control()) {
        return Err(Error::invalid(
            tpath,
            format!("{t:?} is not a header value"),
        ));
    }
    if !seen.insert(t.to_ascii_lowercase()) {
        return Err(Error::invalid(tpath, format!("{t:?} is configured twice")));
    }
    Ok(t.to_owned())
}

/// A connection manager's `upgrade_configs`.
pub(super) fn manager_upgrades(
    list: &[hcm::http_connection_manager::UpgradeConfig],
    path: &Path,
) -> Result<Vec<UpgradeConfig>> {
    let mut seen = HashSet::new();
    list.iter()
        .enumerate()
        .map(|(i, u)| {
            let p = path.index(i);
            if !u.filters.is_empty() {
                return Err(Error::unsupported(p.field("filters")));
            }
            Ok(UpgradeConfig {
                upgrade_type: upgrade_type(&u.upgrade_type, &mut seen, &p)?,
                enabled: u.enabled.unwrap_or(true),
                terminate_connect: false,
            })
        })
        .collect()
}

/// A route's `upgrade_configs`.
pub(super) fn route_upgrades(
    list: &[route::route_action::UpgradeConfig],
    path: &Path,
) -> Result<Vec<UpgradeConfig>> {
    let mut seen = HashSet::new();
    list.iter()
        .enumerate()
        .map(|(i, u)| {
            let p = path.index(i);
            let upgrade_type = upgrade_type(&u.upgrade_type, &mut seen, &p)?;
            if let Some(c) = &u.connect_config {
                let cpath = p.field("connect_config");
                reject_set!(cpath, c, proxy_protocol_config, allow_post);
                if !upgrade_type.eq_ignore_ascii_case("CONNECT") {
                    return Err(Error::invalid(cpath, "only for upgrade_type CONNECT"));
                }
            }
            Ok(UpgradeConfig {
                upgrade_type,
                enabled: u.enabled.unwrap_or(true),
                terminate_connect: u.connect_config.is_some(),
            })
        })
        .collect()
}
