//! The gateway's own replies, sent as responses through the response phases, and `local_reply_config` on them (no route, upstream failures and timeouts, direct responses, redirects, filters' refusals; never a backend's response): the first mapper whose filter takes the reply rewrites its status, headers and body, then the body format (the mapper's, else the config's) makes its body, as Envoy 1.40 does.

use std::time::SystemTime;

use bytes::Bytes;
use engine::access_log::filter::FilterInput;
use engine::access_log::LogRecord;
use engine::headers::http_to_grpc_status;
use engine::HeaderMutation;
use smallvec::SmallVec;

use engine::outlier::CallResult;
use h2wire::ErrorCode;

use super::{reply, ConnCx, Streams};
use crate::http_filter::chain;
use crate::http_filter::header_mutation::{self, FormatInput, Head};
use crate::http_filter::{HeaderEdits, Reply, ResponseHead};
use crate::local_reply::LocalReply;
use crate::wire::dstream::DStream;
use crate::wire::logging::LogState;
use h2wire::message::HeaderList;

impl Streams {
    /// Ends a stream with `reply`: a local reply if no response head went
    /// out yet (the response filters run on it), else a reset.
    pub(super) fn fail_with(&mut self, stream: u32, reply: Reply, failed: Option<CallResult>) {
        self.end_with(stream, reply, failed, true);
    }

    /// [`Self::fail_with`]; `local`: the reply is the gateway's own, which
    /// `local_reply_config` shapes (a backend's answer passed on as one,
    /// an upgrade's refusal, is not).
    pub(super) fn end_with(
        &mut self,
        stream: u32,
        reply: Reply,
        failed: Option<CallResult>,
        local: bool,
    ) {
        let Some(mut s) = self.table.remove(&stream) else {
            return;
        };
        s.failed = failed;
        if s.resp_started {
            s.flag = reply.flag;
            if let Some(l) = s.log.as_mut() {
                l.flags = reply.flag;
            }
            self.conn.reset(stream, ErrorCode::INTERNAL_ERROR);
            self.table.insert(stream, s);
            return self.finish(stream);
        }
        // The host's counters see the reply in its place, unless the host
        // answered and a filter refused that answer (counted as it came).
        if let (Some(t), None, false) = (&s.target, s.served, s.between_attempts()) {
            let hosts = &self.cx.wire.shard.stats.hosts;
            hosts.host(t.host).responses.record(reply.status);
        }
        self.reply(stream, &mut s, reply, local);
        self.table.insert(stream, s);
        self.finish(stream);
    }

    /// The HTTP/1.1 codec refused a request it could not take (400, 408,
    /// 413, 431, …): its answer, through `local_reply_config` as Envoy's
    /// codec errors go, written by the codec, which then closes.
    pub(crate) fn answer_refusal(&mut self) {
        let Some(status) = self.conn.pending_refusal() else {
            return;
        };
        let body = match status {
            // The only 408 the codec makes: a head that came too slowly.
            408 => "request header timeout",
            _ => h1wire::encode::reason(status),
        };
        let reply = Reply::new(status, body, "");
        let snap = self.cx.wire.shard.snapshot();
        let shaped = self.cx.hcm(&snap).is_some_and(|h| h.local_reply.is_some());
        // No request came: a stream with nothing of one to read.
        let reply = match shaped {
            true => {
                let s = DStream::new(snap, false, true, self.now);
                self.cx.local_reply(&s, reply)
            }
            false => reply,
        };
        let typed = reply.fields.get(b"content-type", None).is_some();
        let fields = (!typed && !reply.body.is_empty())
            .then_some((&b"content-type"[..], &b"text/plain"[..]))
            .into_iter()
            .chain(reply.fields.added());
        self.conn.write_refusal(reply.status, fields, &reply.body);
        if !self.cx.logs.is_empty() {
            // Logged as Envoy logs its codec's errors: no request fields,
            // `DPE` (none for the head timeout).
            let no_head = HeaderList::pooled();
            let mut l = LogState::new(&self.cx.logs, &no_head, self.now, None);
            l.on_response(&self.cx.logs, reply.status, None);
            l.flags = if status == 408 { "" } else { "DPE" };
            l.bytes_sent = reply.body.len() as u64;
            self.cx.log(&l, None, None);
            self.cx.wire.flush_logs();
        }
    }

    /// A local reply for a stream not in the table (it never reached the
    /// router, or a filter answered it), which then ends.
    pub(super) fn reply_new(&mut self, stream: u32, mut s: DStream, reply: Reply) {
        self.reply(stream, &mut s, reply, true);
        self.forget(stream, s);
    }

    /// The local reply itself: logged, run through the response filters
    /// in reverse, sent (`streams/reply.rs`).
    fn reply(&mut self, stream: u32, s: &mut DStream, reply: Reply, local: bool) {
        let now = self.now;
        // `local_reply_config` first: the log, the filters and the wire
        // see the reply as it rewrites it.
        let mut reply = match local {
            true => self.cx.local_reply(s, reply),
            false => reply,
        };
        let head_only = s.head.as_ref().is_some_and(reply::is_head);
        s.flag = reply.flag;
        if let Some(l) = s.log.as_mut() {
            l.flags = reply.flag;
            let status = if s.grpc { 200 } else { reply.status };
            l.on_response(&self.cx.logs, status, None);
            l.grpc_status = s.grpc.then(|| {
                reply
                    .grpc_status
                    .unwrap_or_else(|| http_to_grpc_status(reply.status))
            });
        }
        let mut edits = HeaderEdits::default();
        self.cx
            .route_response_edits(s, None, reply.status, &mut edits);
        let (status, end_stream) = (reply.status, head_only || reply.body.is_empty());
        self.cx.filters(s, stream, now, false, |f, cx| {
            let mut rh = ResponseHead {
                status,
                list: None,
                edits: &mut edits,
                end_stream,
                local_body: Some(&mut reply.body),
            };
            // A local reply is the last answer: a filter that refuses it
            // too is not asked again (no loop of replies).
            let _ = chain::response_headers(f, cx, &mut rh);
        });
        if let Some(l) = s.log.as_mut().filter(|_| !s.grpc && !head_only) {
            // As a filter left it.
            l.bytes_sent += reply.body.len() as u64;
        }
        self.cx
            .stamp
            .response(None, &mut edits, s.request_id.as_deref());
        let stats = &self.cx.wire.shard.stats.downstream;
        let sent = reply::send(&mut self.conn, stream, &reply, &edits, s.grpc, head_only);
        stats.responses.record(sent);
        s.status = Some(sent);
    }
}

impl ConnCx {
    /// `reply` as the connection manager's `local_reply_config` makes it
    /// (as it is without one).
    pub(super) fn local_reply(&self, s: &DStream, mut reply: Reply) -> Reply {
        // The stream's config, else (only the router ran, and the stream
        // let its config go) the shard's.
        let current;
        let snap = match s.snap.as_ref() {
            Some(snap) => snap,
            None => {
                current = self.wire.shard.snapshot();
                &current
            }
        };
        let Some(config) = self.hcm(snap).and_then(|h| h.local_reply.as_deref()) else {
            return reply;
        };
        let head = s.head.as_ref();
        let field = |name: &str| {
            head?
                .get(name.as_bytes())
                .and_then(|v| std::str::from_utf8(v).ok())
        };
        let (start, age) = match s.log.as_ref() {
            Some(l) => l.began(),
            None => {
                let age = s.started.elapsed();
                (SystemTime::now() - age, age)
            }
        };
        let input = FilterInput {
            status: reply.status,
            duration: age,
            flags: reply.flag,
            request: &field,
            // Envoy's: a reply's gRPC status, from its HTTP status for any
            // request.
            grpc_status: Some(http_to_grpc_status(reply.status)),
            random: self.wire.shard.random_u64(),
        };
        let mapper = config.mapper(&input);
        if let Some(m) = mapper {
            reply.status = m.status.unwrap_or(reply.status);
            if let Some(body) = &m.body {
                reply.body = Bytes::copy_from_slice(body);
            }
            self.reply_headers(s, &m.headers, &mut reply);
        }
        let Some(format) = config.body_format(mapper) else {
            return reply;
        };
        let fields = format.format.req_fields();
        let req: SmallVec<[Option<&[u8]>; 4]> = fields
            .iter()
            .map(|n| head.and_then(|h| h.get(n.as_bytes())))
            .collect();
        let resp: SmallVec<[Option<&[u8]>; 4]> =
            format.format.resp_fields().iter().map(|_| None).collect();
        let record = LogRecord {
            start: Some(start),
            duration: Some(age),
            protocol: self.protocol,
            status: Some(reply.status),
            flags: reply.flag,
            upstream_host: s.served_by(),
            downstream: Some(s.remote.unwrap_or(self.peer)),
            downstream_direct: Some(self.direct_peer),
            sni: self.sni.as_deref(),
            local_reply_body: Some(&reply.body),
            req: &req,
            resp: &resp,
            ..Default::default()
        };
        let mut body = Vec::new();
        format.format.render(&record, &mut body);
        if s.grpc && format.format.is_json() && body.ends_with(b"\n") {
            // Envoy's gRPC message from a JSON format has no newline.
            body.pop();
        }
        reply.body = Bytes::from(body);
        let _ = reply
            .fields
            .set(b"content-type", format.content_type.as_bytes());
        reply
    }

    /// A mapper's `headers_to_add` on the reply's own fields.
    fn reply_headers(&self, s: &DStream, headers: &HeaderMutation, reply: &mut Reply) {
        if headers.is_empty() {
            return;
        }
        let input = FormatInput {
            peer: self.peer,
            upstream: s.served_by(),
            protocol: self.protocol,
            // A reply the gateway made reads 0, as Envoy's.
            status: None,
            sni: self.sni.as_deref(),
        };
        let head = Head::Response {
            list: None,
            request: s.head.as_ref(),
        };
        let levels = std::slice::from_ref(headers);
        let refused = header_mutation::apply(levels, head, &mut reply.fields, &input);
        if refused > 0 {
            let stats = &self.wire.shard.stats.downstream;
            stats.header_values_refused.add(refused.into());
        }
    }
}

/// The reply for an attempt's failure (`reply`); after retries, Envoy's
/// body says the latest attempt's reason
/// (`…before headers. retried and the latest reset reason: …`), and its
/// flag `URX` when they ran out (`spent`).
pub(super) fn after_retries(reply: LocalReply, retried: bool, spent: bool) -> Reply {
    let mut r = Reply::from(reply);
    if spent {
        r.flag = reply.flag_after_retries();
    }
    const BEFORE: &str = "before headers. ";
    let body = reply.body();
    if let (true, Some(at)) = (retried, body.find(BEFORE)) {
        let at = at + BEFORE.len();
        let text = format!("{}retried and the latest {}", &body[..at], &body[at..]);
        r.body = Bytes::from(text);
    }
    r
}

/// What a failure of the gateway's own kind counts against the host, for
/// outlier detection.
pub(super) fn host_result(reply: LocalReply) -> Option<CallResult> {
    match reply {
        LocalReply::UpstreamTimeout => Some(CallResult::Timeout),
        LocalReply::UpstreamReset
        | LocalReply::UpstreamRefusedStream
        | LocalReply::UpstreamConnectionTermination
        | LocalReply::UpstreamProtocolError => Some(CallResult::Reset),
        LocalReply::ConnectFailure => Some(CallResult::ConnectFailure),
        _ => None,
    }
}
