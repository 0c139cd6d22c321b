//! `upgrade_configs` of a connection manager and of a route → `engine::UpgradeConfig`: the types forwarded as tunnels (WebSocket and the like), each named once; upgrade filters and `CONNECT` refused by name.

use std::collections::HashSet;

use engine::UpgradeConfig;

use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::route::v3 as route;
use crate::pb::envoy::extensions::filters::network::http_connection_manager::v3 as hcm;

/// One entry's type, checked: not empty, not repeated, not `CONNECT`
/// (CONNECT tunnels are not implemented).
fn upgrade_type(t: &str, seen: &mut HashSet<String>, path: &Path) -> Result<String> {
    let tpath = path.field("upgrade_type");
    if t.is_empty() {
        return Err(Error::invalid(tpath, "required"));
    }
    if t.eq_ignore_ascii_case("CONNECT") {
        return Err(Error::unsupported_msg(
            tpath,
            "CONNECT is not supported (HTTP/1.1 Upgrade types such as websocket are)",
        ));
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
            if u.connect_config.is_some() {
                return Err(Error::unsupported(p.field("connect_config")));
            }
            Ok(UpgradeConfig {
                upgrade_type: upgrade_type(&u.upgrade_type, &mut seen, &p)?,
                enabled: u.enabled.unwrap_or(true),
            })
        })
        .collect()
}
