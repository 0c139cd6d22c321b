//! The admin endpoints that change state, `POST` only as in Envoy: `/healthcheck/fail`, `/healthcheck/ok`, `/drain_listeners[?graceful]`; each becomes an [`AdminAction`] for the control shard.

use super::server::Shared;
use crate::events::AdminAction;

/// Answers an action endpoint (`None`: `path` is not one): Envoy's 405
/// for anything but `POST`, else the action is recorded and queued, and
/// the answer is `OK`.
pub(super) fn answer(
    method: &str,
    path: &str,
    query: &str,
    shared: &Shared,
) -> Option<(u16, &'static str, String)> {
    let drain = match path {
        "/healthcheck/fail" | "/healthcheck/ok" => false,
        "/drain_listeners" => true,
        _ => return None,
    };
    if method != "POST" {
        return Some((
            405,
            "text/plain",
            format!("Method {method} not allowed, POST required.\n"),
        ));
    }
    let action = if drain {
        let params: Vec<&str> = query.split('&').filter(|p| !p.is_empty()).collect();
        if let Some(p) = params.iter().find(|p| **p != "graceful") {
            return Some((
                400,
                "text/plain",
                format!("unsupported parameter {p:?} (only graceful is)\n"),
            ));
        }
        AdminAction::DrainListeners {
            graceful: params.contains(&"graceful"),
        }
    } else {
        AdminAction::HealthCheckFailed(path == "/healthcheck/fail")
    };
    Some(queue(action, shared))
}

/// Queues `action` for the control shard and records what `/ready` and
/// `/listeners` say at once.
fn queue(action: AdminAction, shared: &Shared) -> (u16, &'static str, String) {
    if !shared.act(action) {
        return (
            503,
            "text/plain",
            "the control shard is not running\n".into(),
        );
    }
    // What `/ready` and `/listeners` say follows at once.
    let flags = &shared.view().flags;
    match action {
        AdminAction::HealthCheckFailed(failed) => flags.set_health_failed(failed),
        AdminAction::DrainListeners { .. } => flags.set_listeners_drained(),
    }
    (200, "text/plain", "OK\n".into())
}
