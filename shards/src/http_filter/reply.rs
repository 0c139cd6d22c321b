//! A response a filter (or the gateway) makes itself: status, fields, body, and the access log's response flag.

use bytes::Bytes;

use super::edits::HeaderEdits;
use crate::local_reply::LocalReply;

/// A response a filter makes itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    /// Fields of the reply (`content-length` and, for a body, a
    /// `content-type: text/plain` are added unless given).
    pub fields: HeaderEdits,
    pub body: Bytes,
    /// The access log's response flag for it (Envoy's, e.g. `RL`, `UAEX`).
    pub flag: &'static str,
    /// The `grpc-status` a gRPC request gets (unset: the status's, by
    /// Envoy's mapping).
    pub grpc_status: Option<u32>,
}

impl Reply {
    /// A reply with a plain-text body (may be empty).
    pub fn new(status: u16, body: &'static str, flag: &'static str) -> Self {
        Self {
            status,
            fields: HeaderEdits::default(),
            body: Bytes::from_static(body.as_bytes()),
            flag,
            grpc_status: None,
        }
    }
}

impl From<LocalReply> for Reply {
    /// The gateway's own replies, shaped as Envoy shapes them.
    fn from(r: LocalReply) -> Self {
        let mut reply = Self::new(r.status().as_u16(), r.body(), r.flag());
        if r == LocalReply::Overflow {
            // Envoy's mark of a reply its circuit breakers made.
            let _ = reply.fields.set(b"x-envoy-overloaded", b"true");
        }
        reply
    }
}
