//! The overload manager's actions on a new request: `stop_accepting_requests` refuses it, `disable_http_keepalive` ends its connection after it.

use super::Streams;
use crate::http_filter::Reply;
use crate::local_reply::LocalReply;
use crate::overload::Act;

impl Streams {
    /// The overload manager on a new request: `stop_accepting_requests`
    /// answers it 503 (Envoy's "envoy overloaded", flag `OM`);
    /// `disable_http_keepalive` ends its connection after its response.
    pub(super) fn overloaded(&mut self) -> Option<Reply> {
        let shard = &self.cx.wire.shard;
        let overload = &shard.overload;
        if overload.hits(Act::StopAcceptingRequests, || shard.unit()) {
            shard.stats.downstream.rq_overload_close.inc();
            if let Some(h) = &self.cx.http {
                h.stats.downstream_rq_overload_close.inc();
            }
            return Some(LocalReply::Overloaded.into());
        }
        if !self.overload_close && overload.hits(Act::DisableHttpKeepalive, || shard.unit()) {
            self.overload_close = true;
            shard.stats.downstream.cx_overload_disable_keepalive.inc();
            if let Some(h) = &self.cx.http {
                h.stats.downstream_cx_overload_disable_keepalive.inc();
            }
        }
        None
    }
}
