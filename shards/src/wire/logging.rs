//! Phase 5 (finish), the access log: what a stream's log lines need, captured while the phases still hold it (request fields at the head, response fields at the response head, body bytes as they move), then rendered and queued to the writer when the stream ends.
//!
//! Nothing here runs for a listener without `access_log`: a stream's
//! [`LogState`] is made only when its connection has log targets.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use engine::access_log::{LogFormat, LogRecord};
use h2wire::message::HeaderList;

use crate::local_reply::LocalReply;
use crate::stats::DownstreamStats;

/// A connection's access logs: each sink's number and its format.
pub(crate) type LogTargets = Vec<(u32, Arc<LogFormat>)>;

/// What one stream has gathered for its log lines.
pub(crate) struct LogState {
    start: SystemTime,
    started: Instant,
    /// Per target, the values of its format's request fields.
    req: Vec<Vec<Option<Box<[u8]>>>>,
    resp: Vec<Vec<Option<Box<[u8]>>>>,
    pub bytes_received: u64,
    pub bytes_sent: u64,
    pub status: Option<u16>,
    /// Envoy's response flag for how the stream failed, if it did.
    pub flags: &'static str,
}

fn capture(targets: &LogTargets, head: &HeaderList, req: bool) -> Vec<Vec<Option<Box<[u8]>>>> {
    targets
        .iter()
        .map(|(_, f)| {
            let names = if req { f.req_fields() } else { f.resp_fields() };
            names
                .iter()
                .map(|n| field(head, n).map(Box::from))
                .collect()
        })
        .collect()
}

/// A field's value; `host` stands in for a missing `:authority`, and
/// `:path` is what HTTP/1.1 requests carry too (the codec made them).
fn field<'a>(head: &'a HeaderList, name: &str) -> Option<&'a [u8]> {
    head.get(name.as_bytes())
        .or_else(|| (name == ":authority").then(|| head.get(b"host")).flatten())
}

impl LogState {
    /// Starts a stream's record from its request head.
    pub fn new(targets: &LogTargets, head: &HeaderList, now: Instant) -> Box<Self> {
        Box::new(Self {
            start: SystemTime::now(),
            started: now,
            req: capture(targets, head, true),
            resp: Vec::new(),
            bytes_received: 0,
            bytes_sent: 0,
            status: None,
            flags: "",
        })
    }

    /// The response head came (from upstream, or made locally).
    pub fn on_response(&mut self, targets: &LogTargets, status: u16, head: Option<&HeaderList>) {
        self.status = Some(status);
        if let Some(head) = head {
            self.resp = capture(targets, head, false);
        }
    }

    /// Renders each target's line and queues it; a full queue drops it
    /// (counted).
    #[allow(clippy::too_many_arguments)]
    pub fn emit(
        &self,
        targets: &LogTargets,
        writer: &crate::access_log::LogWriter,
        stats: &DownstreamStats,
        protocol: &str,
        upstream: Option<(SocketAddr, &str)>,
        downstream: SocketAddr,
        sni: Option<&str>,
    ) {
        fn values(v: &[Option<Box<[u8]>>]) -> Vec<Option<&[u8]>> {
            v.iter().map(|x| x.as_deref()).collect()
        }
        for (i, (sink, format)) in targets.iter().enumerate() {
            let req = self.req.get(i).map(|v| values(v)).unwrap_or_default();
            let resp = self.resp.get(i).map(|v| values(v)).unwrap_or_default();
            let record = LogRecord {
                start: Some(self.start),
                duration: Some(self.started.elapsed()),
                protocol,
                status: self.status,
                flags: self.flags,
                bytes_received: self.bytes_received,
                bytes_sent: self.bytes_sent,
                upstream_host: upstream.map(|(a, _)| a),
                upstream_cluster: upstream.map(|(_, c)| c),
                downstream: Some(downstream),
                sni,
                req: &req,
                resp: &resp,
            };
            let mut line = Vec::with_capacity(256);
            format.render(&record, &mut line);
            if !writer.send(*sink, line) {
                stats.access_log_dropped.inc();
            }
        }
    }
}

/// Envoy's response flag for a local reply.
pub(crate) fn flag_of(reply: LocalReply) -> &'static str {
    match reply {
        LocalReply::NoRoute => "NR",
        LocalReply::UnknownCluster => "NC",
        LocalReply::NoHealthyUpstream | LocalReply::SessionHostUnavailable(_) => "UH",
        LocalReply::ConnectFailure => "UF",
        LocalReply::UpstreamReset => "UR",
        LocalReply::UpstreamTimeout => "UT",
        LocalReply::StreamIdleTimeout => "SI",
        LocalReply::MaxDurationTimeout => "DT",
        LocalReply::BadRequest => "DPE",
    }
}
