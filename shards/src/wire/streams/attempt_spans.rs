//! Where the stream's phases tell its upstream spans (`spawn_upstream_span`) what its attempts do: one starts (its context goes in the head written upstream), hears an answer or a failure, passes a per-try timeout, is left.
//!
//! Each is a no-op for a stream without upstream spans: one branch per
//! attempt event.

use super::Streams;
use crate::http_filter::AttemptFailure;
use crate::wire::inbox::Delivered;
use crate::wire::pool::PoolRef;
use h2wire::conn::ClientEvent;
use h2wire::ErrorCode;

impl Streams {
    /// The next attempt of `stream` goes now on `pool`'s connection `slot`
    /// (`None`: no connection could be had for it).
    pub(super) fn span_begin(&mut self, stream: u32, pool: &PoolRef, slot: Option<usize>) {
        let Some(s) = self.table.get_mut(&stream) else {
            return;
        };
        let key = s.key(stream);
        let Some(spans) = s.upstream_spans.as_deref_mut() else {
            return;
        };
        let (cluster, addr, h2) = {
            let mut p = pool.borrow_mut();
            let h2 = slot.and_then(|slot| p.conn_at(slot)).map(|c| c.is_h2());
            (p.cluster_name().to_owned(), p.addr, h2)
        };
        let protocol = match h2 {
            Some(true) => "HTTP/2",
            Some(false) => "HTTP/1.1",
            None => "-",
        };
        let shard = &self.cx.wire.shard;
        let span_id = loop {
            match shard.random_u64() {
                0 => continue,
                id => break id,
            }
        };
        let edits = s.edits.get_or_insert_with(Box::default);
        spans.begin(key, &cluster, addr, protocol, span_id, self.now, edits);
    }

    /// What came for the attempt of `stream` keyed `key`, as its span
    /// records it.
    pub(super) fn span_heard(&mut self, stream: u32, key: u32, what: &Delivered) {
        let Some(spans) = self
            .table
            .get_mut(&stream)
            .and_then(|s| s.upstream_spans.as_deref_mut())
        else {
            return;
        };
        let failure = match what {
            Delivered::ConnectFailed => AttemptFailure::ConnectFailure,
            Delivered::ConnectionLost => AttemptFailure::ConnectionTermination,
            Delivered::Event(ev) => match ev {
                ClientEvent::Response {
                    head,
                    informational: false,
                    end_stream,
                    ..
                } => {
                    spans.answered(key, super::reply::status_of(head));
                    if *end_stream {
                        spans.completed(key);
                    }
                    return;
                }
                ClientEvent::Data {
                    end_stream: true, ..
                }
                | ClientEvent::Trailers { .. } => return spans.completed(key),
                ClientEvent::Reset { code, .. } if *code == ErrorCode::REFUSED_STREAM => {
                    AttemptFailure::RemoteRefusedStream
                }
                // Envoy's `RemoteResetNoError` is no error of the span's.
                ClientEvent::Reset { code, .. } if *code == ErrorCode::NO_ERROR => return,
                ClientEvent::Reset { .. } => AttemptFailure::RemoteReset,
                ClientEvent::TooLarge { .. } | ClientEvent::Broken { .. } => {
                    AttemptFailure::ProtocolError
                }
                _ => return,
            },
            Delivered::Retry | Delivered::Resume(_) | Delivered::OverloadReset => return,
        };
        spans.failed(key, failure);
    }

    /// No connection could be had for the attempt of `stream` now.
    pub(super) fn span_refused(&mut self, stream: u32, pool: &PoolRef, failure: AttemptFailure) {
        self.span_begin(stream, pool, None);
        if let Some(s) = self.table.get_mut(&stream) {
            let key = s.key(stream);
            if let Some(spans) = s.upstream_spans.as_deref_mut() {
                spans.failed(key, failure);
            }
        }
    }

    /// The attempt of `stream` keyed `key` passed its per-try timeout
    /// (`idle`: its per-try idle timeout).
    pub(super) fn span_timed_out(&mut self, stream: u32, idle: bool) {
        if let Some(s) = self.table.get_mut(&stream) {
            let key = s.key(stream);
            if let Some(spans) = s.upstream_spans.as_deref_mut() {
                spans.timed_out(key, idle);
            }
        }
    }
}
