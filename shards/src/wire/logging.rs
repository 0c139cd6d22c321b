//! Phase 5 (finish), the access log: what a stream's log lines need, captured while the phases still hold it (request fields at the head, response fields at the response head, body bytes as they move), then rendered and queued to the writer when the stream ends.
//!
//! Nothing here runs for a listener without `access_log`: a stream's
//! [`LogState`] is made only when its connection has log targets.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use engine::access_log::filter::FilterInput;
use engine::access_log::{LogFormat, LogRecord};
use engine::LogRule;
use h2wire::message::HeaderList;
use smallvec::SmallVec;

/// A connection's access logs: each sink's number, its format and its
/// `filter`.
pub(crate) type LogTargets = Vec<(u32, Arc<LogFormat>, Option<Arc<LogRule>>)>;

/// What one stream has gathered for its log lines.
pub(crate) struct LogState {
    start: SystemTime,
    started: Instant,
    /// The captured field values, back to back, and where each is: for
    /// each target in order, its format's request fields and its filter's,
    /// then (once the response head came) its format's response fields. Two allocations per
    /// stream rather than one per field.
    bytes: Vec<u8>,
    req: Vec<Option<(u32, u32)>>,
    resp: Vec<Option<(u32, u32)>>,
    pub bytes_received: u64,
    pub bytes_sent: u64,
    pub status: Option<u16>,
    /// Envoy's response flag for how the stream failed, if it did.
    pub flags: &'static str,
    /// The `grpc-status` of a gRPC request's local reply (its HTTP status
    /// is 200), for `grpc_status_filter`.
    pub grpc_status: Option<u32>,
    /// The client, when a trusted `x-forwarded-for` entry names another
    /// than the connection's peer (`%DOWNSTREAM_REMOTE_ADDRESS%`).
    remote: Option<SocketAddr>,
}

/// A field's value; `host` stands in for a missing `:authority`.
fn field<'a>(head: &'a HeaderList, name: &str) -> Option<&'a [u8]> {
    head.get(name.as_bytes())
        .or_else(|| (name == ":authority").then(|| head.get(b"host")).flatten())
}

impl LogState {
    /// When the request began, and how long ago.
    pub(crate) fn began(&self) -> (SystemTime, std::time::Duration) {
        (self.start, self.started.elapsed())
    }

    /// Starts a stream's record from its request head.
    pub fn new(
        targets: &LogTargets,
        head: &HeaderList,
        now: Instant,
        remote: Option<SocketAddr>,
    ) -> Box<Self> {
        let mut s = Self::counting(now);
        s.remote = remote;
        for (_, f, rule) in targets {
            let filtered = rule.iter().flat_map(|r| &r.fields);
            for n in f.req_fields().iter().chain(filtered) {
                let span = s.keep(field(head, n));
                s.req.push(span);
            }
        }
        s
    }

    /// A record for no log: the stream's body sizes only (a filter asked
    /// for them).
    pub fn counting(now: Instant) -> Box<Self> {
        Box::new(Self {
            start: SystemTime::now(),
            started: now,
            bytes: Vec::new(),
            req: Vec::new(),
            resp: Vec::new(),
            bytes_received: 0,
            bytes_sent: 0,
            status: None,
            flags: "",
            grpc_status: None,
            remote: None,
        })
    }

    fn keep(&mut self, v: Option<&[u8]>) -> Option<(u32, u32)> {
        let v = v?;
        let start = self.bytes.len() as u32;
        self.bytes.extend_from_slice(v);
        Some((start, self.bytes.len() as u32))
    }

    /// The response head came (from upstream, or made locally).
    pub fn on_response(&mut self, targets: &LogTargets, status: u16, head: Option<&HeaderList>) {
        self.status = Some(status);
        if let Some(head) = head {
            for (_, f, _) in targets {
                for n in f.resp_fields() {
                    let span = self.keep(head.get(n.as_bytes()));
                    self.resp.push(span);
                }
            }
        }
    }

    /// Renders the line of each target whose filter takes the request
    /// into the shard's batch for this turn; `grpc_status`: the
    /// response's, if it had one.
    #[allow(clippy::too_many_arguments)]
    pub fn emit(
        &self,
        targets: &LogTargets,
        wire: &super::WireShard,
        protocol: &str,
        upstream: Option<(SocketAddr, &str)>,
        (downstream, downstream_direct): (SocketAddr, SocketAddr),
        sni: Option<&str>,
        grpc_status: Option<u32>,
    ) {
        // Values of one target's fields, on the stack for the usual few.
        let values = |spans: &[Option<(u32, u32)>], from: usize, n: usize| {
            let mut v: SmallVec<[Option<&[u8]>; 8]> = SmallVec::new();
            for i in from..from + n {
                v.push(
                    spans
                        .get(i)
                        .copied()
                        .flatten()
                        .map(|(a, b)| &self.bytes[a as usize..b as usize]),
                );
            }
            v
        };
        let (mut req_at, mut resp_at) = (0, 0);
        let duration = self.started.elapsed();
        for (sink, format, rule) in targets {
            let (nq, np) = (format.req_fields().len(), format.resp_fields().len());
            let nf = rule.as_ref().map_or(0, |r| r.fields.len());
            let req = values(&self.req, req_at, nq);
            let filtered = values(&self.req, req_at + nq, nf);
            let resp = values(&self.resp, resp_at, np);
            req_at += nq + nf;
            resp_at += np;
            if let Some(rule) = rule {
                let lookup = field_of(&rule.fields, &filtered);
                let grpc_status = grpc_status.or(self.grpc_status);
                let outcome = (self.status, duration, self.flags, grpc_status);
                if !takes(rule, outcome, &lookup, wire.shard.random_u64()) {
                    continue;
                }
            }
            let record = LogRecord {
                start: Some(self.start),
                duration: Some(duration),
                protocol,
                status: self.status,
                flags: self.flags,
                bytes_received: self.bytes_received,
                bytes_sent: self.bytes_sent,
                upstream_host: upstream.map(|(a, _)| a),
                upstream_cluster: upstream.map(|(_, c)| c),
                downstream: Some(self.remote.unwrap_or(downstream)),
                downstream_direct: Some(downstream_direct),
                sni,
                local_reply_body: None,
                req: &req,
                resp: &resp,
            };
            wire.log_line(*sink, |lines| format.render(&record, lines));
        }
    }
}

/// Whether an access log's `filter` takes a request that ended so
/// (`outcome`: its status, none for a TCP proxy's connection; how long it
/// took; its response flags; its response's gRPC status), `field` giving
/// its request's fields and `random` a uniform value for sampling.
pub(crate) fn takes<'r>(
    rule: &LogRule,
    (status, duration, flags, grpc_status): (Option<u16>, std::time::Duration, &str, Option<u32>),
    field: &dyn Fn(&str) -> Option<&'r str>,
    random: u64,
) -> bool {
    let status = status.unwrap_or(0);
    let input = FilterInput {
        status,
        duration,
        flags,
        request: field,
        // Envoy's: the response's, else from its HTTP status.
        grpc_status: grpc_status.or_else(|| Some(engine::headers::http_to_grpc_status(status))),
        random,
    };
    rule.filter.matches(&input)
}

/// A request field's value among `values`, the captured values of
/// `fields`.
fn field_of<'v>(
    fields: &'v [String],
    values: &'v [Option<&'v [u8]>],
) -> impl Fn(&str) -> Option<&'v str> + 'v {
    move |name| {
        let at = fields.iter().position(|f| f == name)?;
        values
            .get(at)
            .copied()
            .flatten()
            .and_then(|v| std::str::from_utf8(v).ok())
    }
}
