//! `upgrade_configs` of a connection manager and of a route: which `Upgrade` requests (WebSocket) are forwarded as tunnels.

/// One `upgrade_configs` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpgradeConfig {
    /// `upgrade_type`, compared with a request's `Upgrade` value without
    /// regard to case (`websocket`).
    pub upgrade_type: String,
    /// `enabled` (default true).
    pub enabled: bool,
    /// A route's `connect_config` (CONNECT only): the gateway answers the
    /// CONNECT itself and tunnels its bytes to the cluster's host.
    pub terminate_connect: bool,
}

impl UpgradeConfig {
    /// An entry enabling `upgrade_type`.
    pub fn enabling(upgrade_type: &str) -> Self {
        Self {
            upgrade_type: upgrade_type.to_owned(),
            enabled: true,
            terminate_connect: false,
        }
    }
}

/// Whether `route` (a route's `upgrade_configs`) terminates CONNECT.
pub fn terminates_connect(route: &[UpgradeConfig]) -> bool {
    route
        .iter()
        .any(|u| u.enabled && u.terminate_connect && u.upgrade_type.eq_ignore_ascii_case("CONNECT"))
}

/// Whether a request asking to upgrade to `token` is forwarded: the
/// route's entry for that type decides, else the connection manager's
/// (Envoy's order: a route may enable what its manager does not list, or
/// disable what it does); listed nowhere, it is refused.
pub fn upgrade_allowed(
    manager: &[UpgradeConfig],
    route: Option<&[UpgradeConfig]>,
    token: &[u8],
) -> bool {
    let find = |list: &[UpgradeConfig]| {
        list.iter()
            .find(|u| u.upgrade_type.as_bytes().eq_ignore_ascii_case(token))
            .map(|u| u.enabled)
    };
    route
        .and_then(find)
        .or_else(|| find(manager))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws(enabled: bool) -> Vec<UpgradeConfig> {
        vec![UpgradeConfig {
            enabled,
            ..UpgradeConfig::enabling("websocket")
        }]
    }

    #[test]
    fn the_route_decides_first_then_the_manager() {
        assert!(upgrade_allowed(&ws(true), None, b"WebSocket"));
        assert!(upgrade_allowed(&ws(true), Some(&[]), b"websocket"));
        assert!(!upgrade_allowed(&ws(true), Some(&ws(false)), b"websocket"));
        assert!(upgrade_allowed(&[], Some(&ws(true)), b"websocket"));
        assert!(upgrade_allowed(&ws(false), Some(&ws(true)), b"websocket"));
        assert!(!upgrade_allowed(&ws(false), None, b"websocket"));
        assert!(!upgrade_allowed(&[], None, b"websocket"));
        assert!(!upgrade_allowed(&ws(true), None, b"h2c"));
    }
}
