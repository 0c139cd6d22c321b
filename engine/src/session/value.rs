//! What a session value decodes to, and the most bytes a decoded value
//! may hold.

use std::net::SocketAddr;

/// What a session cookie/header value decodes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionValue {
    /// A usable override host; `cluster` is set for gRPC's `ip:port;cluster` dialect.
    Valid {
        address: SocketAddr,
        cluster: Option<String>,
    },
    /// Undecodable (bad base64, bad protobuf, not an ip:port, empty).
    Invalid,
    /// Envoy format with `expires` != 0 and now > expires.
    Expired,
}

/// Largest decoded value accepted: far above any real address (an IPv6
/// socket address with scope id is < 64 bytes) plus a cluster name, and small
/// enough to live on the stack.
pub(super) const MAX_DECODED: usize = 512;
