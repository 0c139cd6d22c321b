//! The bootstrap's `node`: who we are to a control plane.

use crate::error::{Path, Result};
use crate::pb;

/// What we send as `node.user_agent_name` when the bootstrap leaves it empty.
pub const USER_AGENT_NAME: &str = "edge-gateway";

/// `node` → `engine::Node`. Metadata, locality and user agent are accepted
/// (they describe us to a control plane) but not otherwise used.
pub fn node(pb: &pb::envoy::config::core::v3::Node, _path: &Path) -> Result<engine::Node> {
    use pb::envoy::config::core::v3::node::UserAgentVersionType;
    use prost::Message;
    // As Envoy, we name ourselves unless the bootstrap already did.
    let mut sent = pb.clone();
    if sent.user_agent_name.is_empty() {
        sent.user_agent_name = USER_AGENT_NAME.into();
    }
    if sent.user_agent_version_type.is_none() {
        sent.user_agent_version_type = Some(UserAgentVersionType::UserAgentVersion(
            env!("CARGO_PKG_VERSION").into(),
        ));
    }
    Ok(engine::Node {
        id: pb.id.clone(),
        cluster: pb.cluster.clone(),
        proto: sent.encode_to_vec(),
    })
}
