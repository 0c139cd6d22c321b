//! The overload manager's actions on a connection's streams: `stop_accepting_requests` refuses a new request, `disable_http_keepalive` ends its connection after it, `reduce_timeouts` shortens their idle timeout, `reset_high_memory_stream` charges streams their buffered bytes and resets those its pass picked.

use engine::overload::{ScaledTimer, Timer};
use h2wire::ErrorCode;

use super::{ConnCx, Streams};
use crate::http_filter::Reply;
use crate::local_reply::LocalReply;
use crate::overload::Act;
use crate::wire::accounts::UNTRACKED;
use crate::wire::dstream::DStream;

impl ConnCx {
    /// `timer` of the overload manager's `reduce_timeouts` and the action's
    /// level, while it acts on that timer; `None` otherwise (one atomic
    /// load when it does not act).
    pub(super) fn scaled_timer(&self, timer: Timer) -> Option<(ScaledTimer, f64)> {
        let shard = &self.wire.shard;
        let level = shard.overload.level(Act::ReduceTimeouts);
        if level == 0.0 {
            return None;
        }
        let t = *shard.snapshot().overload.as_ref()?.scaled_timer(timer)?;
        Some((t, level))
    }

    /// Charges stream `s` (`stream`) the body bytes it buffers now, while
    /// `reset_high_memory_stream` tracks them (`wire::accounts`); else
    /// nothing is counted.
    #[inline]
    pub(super) fn charge(&self, stream: u32, s: &mut DStream) {
        let accounts = &self.wire.accounts;
        if accounts.tracking() {
            let bytes = s.buffered();
            accounts.charge((self.inbox, stream), &mut s.account, bytes);
        }
    }
}

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

    /// `reset_high_memory_stream` picked the stream: reset as Envoy resets
    /// it, whether or not its response began (RST_STREAM NO_ERROR on
    /// HTTP/2, the connection closed on HTTP/1.1, where a stream cannot be
    /// reset alone; no local reply), its upstream side cancelled, logged
    /// with flag `OM`. A stream that drained below the tracked minimum
    /// since it was picked is left alone.
    pub(super) fn overload_reset(&mut self, stream: u32) {
        let Some(s) = self.table.get_mut(&stream) else {
            return;
        };
        if s.account == UNTRACKED {
            return;
        }
        s.flag = "OM";
        if let Some(l) = s.log.as_mut() {
            l.flags = "OM";
        }
        let stats = &self.cx.wire.shard.stats.downstream;
        stats.rq_overload_reset.inc();
        self.conn.reset(stream, ErrorCode::NO_ERROR);
        self.finish(stream);
    }
}
