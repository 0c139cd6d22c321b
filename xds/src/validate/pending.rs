//! Config that validates but that the data path does not implement yet.
//!
//! Outlier detection (gRFC A50), least request (gRFC A48), the
//! `common_lb_config` fields and the stateful session filter (gRFC A55) are
//! checked in full by their own validators (ranges, defaults, engine types),
//! so a bad value is NACKed with its precise message. This module is the one
//! place that then refuses a *valid* use of them with
//! `PATH: not supported yet`: one check per feature, which the change that
//! implements the feature deletes.

use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::cluster::v3 as pb;

/// The message of every rejection made here.
pub const NOT_IMPLEMENTED_YET: &str = "not supported yet";

/// `PATH: not supported yet`.
pub(crate) fn not_implemented_yet(path: Path) -> Error {
    Error::unsupported_msg(path, NOT_IMPLEMENTED_YET)
}

/// Refuses the cluster features that validated but are not implemented.
/// Called once the whole cluster has validated.
pub(crate) fn cluster_features(c: &pb::Cluster, path: &Path) -> Result<()> {
    // gRFC A50: passive outlier detection (ejection).
    if c.outlier_detection.is_some() {
        return Err(not_implemented_yet(path.field("outlier_detection")));
    }
    // gRFC A48: least-request picking.
    if c.lb_policy == pb::cluster::LbPolicy::LeastRequest as i32 {
        return Err(Error::unsupported_msg(
            path.field("lb_policy"),
            format!("LEAST_REQUEST is {NOT_IMPLEMENTED_YET}"),
        ));
    }
    if let Some(common) = &c.common_lb_config {
        let cpath = path.field("common_lb_config");
        // Envoy's panic mode (routing to all hosts when too few are healthy).
        if common.healthy_panic_threshold.is_some() {
            return Err(not_implemented_yet(cpath.field("healthy_panic_threshold")));
        }
        // gRFC A55: which hosts a session's host override may pick.
        if common.override_host_status.is_some() {
            return Err(not_implemented_yet(cpath.field("override_host_status")));
        }
    }
    Ok(())
}

/// gRFC A55: a valid stateful session filter. Returns `Ok(true)` (skip it)
/// when it is `is_optional`, as for any HTTP filter we do not implement
/// (gRFC A39); otherwise it is refused.
pub(crate) fn skip_stateful_session_filter(is_optional: bool, path: &Path) -> Result<bool> {
    if is_optional {
        Ok(true)
    } else {
        Err(not_implemented_yet(path.clone()))
    }
}
