//! Access log formats as an Envoy config writes them: text with `%COMMAND%` operators, or JSON whose values are such texts; parsed once at load (unknown operators refused by name) and rendered per request from a [`LogRecord`].
//!
//! Rendering allocates nothing but the output line. The request and
//! response fields a format names (`REQ(X)`, `RESP(X)`) are listed by
//! [`LogFormat::req_fields`] / [`LogFormat::resp_fields`], so the data
//! path copies only those values, while it still has the headers.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

/// Envoy's default text format (used when a logger has no `log_format`).
pub const DEFAULT_FORMAT: &str = "[%START_TIME%] \"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%\" %RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% \"%REQ(X-FORWARDED-FOR)%\" \"%REQ(USER-AGENT)%\" \"%REQ(X-REQUEST-ID)%\" \"%REQ(:AUTHORITY)%\" \"%UPSTREAM_HOST%\"\n";

/// One `%…%` operator.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    StartTime,
    /// `REQ(A?B)`: index into [`LogRecord::req`] of A, then of B.
    Req(usize, Option<usize>),
    Resp(usize, Option<usize>),
    Protocol,
    ResponseCode,
    ResponseFlags,
    BytesReceived,
    BytesSent,
    Duration,
    UpstreamHost,
    UpstreamCluster,
    DownstreamRemoteAddress,
    DownstreamRemoteAddressWithoutPort,
    DownstreamDirectRemoteAddress,
    DownstreamDirectRemoteAddressWithoutPort,
    RequestedServerName,
    /// The body of the gateway's own reply (`local_reply_config` formats).
    LocalReplyBody,
}

/// A piece of a text format.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Literal(String),
    Op { op: Op, max_len: Option<usize> },
}

/// A parsed text format.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Text(Vec<Piece>);

/// A parsed `log_format`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFormat {
    shape: Shape,
    /// Lowercased request field names `REQ()` reads, in index order.
    req: Vec<String>,
    resp: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Shape {
    Text(Text),
    /// `json_format`: keys (sorted, as Envoy writes them) and their texts.
    Json(Vec<(String, Text)>),
}

/// Why a format was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("unknown command operator %{0}%")]
    UnknownOperator(String),
    #[error("%{0}% takes no argument here")]
    Argument(String),
    #[error("unterminated command operator at byte {0}")]
    Unterminated(usize),
    #[error("%{0}% needs an argument, e.g. %{0}(:PATH)%")]
    MissingArgument(String),
}

/// What the data path knows of a finished request.
#[derive(Debug, Default)]
pub struct LogRecord<'a> {
    pub start: Option<SystemTime>,
    pub duration: Option<Duration>,
    pub protocol: &'a str,
    pub status: Option<u16>,
    /// Envoy's response flags (`UF`, `UT`, `NR`, …), comma-separated.
    pub flags: &'a str,
    pub bytes_received: u64,
    pub bytes_sent: u64,
    pub upstream_host: Option<SocketAddr>,
    pub upstream_cluster: Option<&'a str>,
    /// The client: the connection's peer, or the address a trusted
    /// `x-forwarded-for` entry names (port 0).
    pub downstream: Option<SocketAddr>,
    /// The connection's peer.
    pub downstream_direct: Option<SocketAddr>,
    pub sni: Option<&'a str>,
    /// The gateway's own reply's body, while `local_reply_config` formats
    /// it.
    pub local_reply_body: Option<&'a [u8]>,
    /// Values of [`LogFormat::req_fields`], in order.
    pub req: &'a [Option<&'a [u8]>],
    pub resp: &'a [Option<&'a [u8]>],
}

impl LogFormat {
    pub fn text(format: &str) -> Result<Self, FormatError> {
        let mut f = Self {
            shape: Shape::Text(Text(Vec::new())),
            req: Vec::new(),
            resp: Vec::new(),
        };
        let text = f.parse(format)?;
        f.shape = Shape::Text(text);
        Ok(f)
    }

    /// `json_format`: each value a text format; the line is a JSON object
    /// (keys sorted) and a newline.
    pub fn json(fields: &[(String, String)]) -> Result<Self, FormatError> {
        let mut f = Self {
            shape: Shape::Json(Vec::new()),
            req: Vec::new(),
            resp: Vec::new(),
        };
        let mut out = Vec::with_capacity(fields.len());
        for (k, v) in fields {
            out.push((k.clone(), f.parse(v)?));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        f.shape = Shape::Json(out);
        Ok(f)
    }

    /// Request fields the format reads (lowercase): copy their values
    /// into [`LogRecord::req`] in this order.
    pub fn req_fields(&self) -> &[String] {
        &self.req
    }

    pub fn resp_fields(&self) -> &[String] {
        &self.resp
    }

    fn index(list: &mut Vec<String>, name: &str) -> usize {
        let name = name.to_ascii_lowercase();
        match list.iter().position(|n| *n == name) {
            Some(i) => i,
            None => {
                list.push(name);
                list.len() - 1
            }
        }
    }

    fn parse(&mut self, s: &str) -> Result<Text, FormatError> {
        let mut pieces = Vec::new();
        let mut lit = String::new();
        let mut rest = s;
        let mut at = 0;
        while let Some(i) = rest.find('%') {
            lit.push_str(&rest[..i]);
            let after = &rest[i + 1..];
            // `%%` is a literal percent sign.
            if let Some(tail) = after.strip_prefix('%') {
                lit.push('%');
                at += i + 2;
                rest = tail;
                continue;
            }
            let end = operator_end(after).ok_or(FormatError::Unterminated(at + i))?;
            let spec = &after[..end];
            if !lit.is_empty() {
                pieces.push(Piece::Literal(std::mem::take(&mut lit)));
            }
            pieces.push(self.operator(spec)?);
            at += i + 1 + end + 1;
            rest = &after[end + 1..];
        }
        lit.push_str(rest);
        if !lit.is_empty() {
            pieces.push(Piece::Literal(lit));
        }
        Ok(Text(pieces))
    }

    /// `NAME`, `NAME(ARG)`, either with `:MAXLEN`.
    fn operator(&mut self, spec: &str) -> Result<Piece, FormatError> {
        let (body, max_len) = match spec.rfind(':') {
            Some(c)
                if spec[c + 1..].chars().all(|ch| ch.is_ascii_digit()) && c + 1 < spec.len() =>
            {
                let close = spec.rfind(')');
                if close.is_none_or(|p| p < c) {
                    (&spec[..c], spec[c + 1..].parse().ok())
                } else {
                    (spec, None)
                }
            }
            _ => (spec, None),
        };
        let (name, arg) = match body.find('(') {
            Some(p) if body.ends_with(')') => (&body[..p], Some(&body[p + 1..body.len() - 1])),
            _ => (body, None),
        };
        let simple = |op: Op| match arg {
            None => Ok(op),
            Some(_) if name == "START_TIME" => Err(FormatError::Argument(format!(
                "{name} with a custom time format"
            ))),
            Some(_) => Err(FormatError::Argument(name.to_string())),
        };
        let op = match name {
            "START_TIME" => simple(Op::StartTime)?,
            "PROTOCOL" => simple(Op::Protocol)?,
            "RESPONSE_CODE" => simple(Op::ResponseCode)?,
            "RESPONSE_FLAGS" => simple(Op::ResponseFlags)?,
            "BYTES_RECEIVED" => simple(Op::BytesReceived)?,
            "BYTES_SENT" => simple(Op::BytesSent)?,
            "DURATION" => simple(Op::Duration)?,
            "UPSTREAM_HOST" => simple(Op::UpstreamHost)?,
            "UPSTREAM_CLUSTER" => simple(Op::UpstreamCluster)?,
            "DOWNSTREAM_REMOTE_ADDRESS" => simple(Op::DownstreamRemoteAddress)?,
            "DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT" => {
                simple(Op::DownstreamRemoteAddressWithoutPort)?
            }
            "DOWNSTREAM_DIRECT_REMOTE_ADDRESS" => simple(Op::DownstreamDirectRemoteAddress)?,
            "DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT" => {
                simple(Op::DownstreamDirectRemoteAddressWithoutPort)?
            }
            "REQUESTED_SERVER_NAME" => simple(Op::RequestedServerName)?,
            "LOCAL_REPLY_BODY" => simple(Op::LocalReplyBody)?,
            "REQ" | "RESP" => {
                let arg = arg
                    .filter(|a| !a.is_empty())
                    .ok_or_else(|| FormatError::MissingArgument(name.to_string()))?;
                let (a, b) = match arg.split_once('?') {
                    Some((a, b)) => (a, Some(b)),
                    None => (arg, None),
                };
                let list = if name == "REQ" {
                    &mut self.req
                } else {
                    &mut self.resp
                };
                let (a, b) = (Self::index(list, a), b.map(|b| Self::index(list, b)));
                if name == "REQ" {
                    Op::Req(a, b)
                } else {
                    Op::Resp(a, b)
                }
            }
            other => return Err(FormatError::UnknownOperator(other.to_string())),
        };
        Ok(Piece::Op { op, max_len })
    }

    /// A `json_format`.
    pub fn is_json(&self) -> bool {
        matches!(self.shape, Shape::Json(_))
    }

    /// The text of a format without operators (`100%%` is `100%`).
    pub fn literal(&self) -> Option<&str> {
        match &self.shape {
            Shape::Text(t) => match &t.0[..] {
                [] => Some(""),
                [Piece::Literal(l)] => Some(l),
                _ => None,
            },
            Shape::Json(_) => None,
        }
    }

    /// Appends a text format's value for `r` to `out`, as a header value:
    /// an operator without a value writes nothing (a log line writes `-`).
    pub fn render_value(&self, r: &LogRecord<'_>, out: &mut Vec<u8>) {
        let Shape::Text(t) = &self.shape else {
            return self.render(r, out);
        };
        for p in &t.0 {
            match p {
                Piece::Literal(l) => out.extend_from_slice(l.as_bytes()),
                Piece::Op { op, max_len } => {
                    let start = out.len();
                    if !write_op(op, r, out) {
                        out.truncate(start);
                    }
                    truncate(out, start, *max_len);
                }
            }
        }
    }

    /// Appends the line for `r` to `out`.
    pub fn render(&self, r: &LogRecord<'_>, out: &mut Vec<u8>) {
        match &self.shape {
            Shape::Text(t) => {
                for p in &t.0 {
                    match p {
                        Piece::Literal(l) => out.extend_from_slice(l.as_bytes()),
                        Piece::Op { op, max_len } => {
                            let start = out.len();
                            if !write_op(op, r, out) {
                                out.push(b'-');
                            }
                            truncate(out, start, *max_len);
                        }
                    }
                }
            }
            Shape::Json(fields) => {
                out.push(b'{');
                for (i, (k, t)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    json_string(out, k.as_bytes());
                    out.push(b':');
                    render_json_value(t, r, out);
                }
                out.extend_from_slice(b"}\n");
            }
        }
    }
}

/// Where an operator's `%` closes: parentheses may hold colons and `%`
/// (`REQ(:PATH)`, `START_TIME(%s)`).
fn operator_end(s: &str) -> Option<usize> {
    let mut depth = 0u32;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            '%' if depth == 0 => return Some(i),
            _ => {}
        }
    }
    None
}

fn truncate(out: &mut Vec<u8>, start: usize, max: Option<usize>) {
    if let Some(max) = max {
        if out.len() - start > max {
            out.truncate(start + max);
        }
    }
}

/// Writes the operator's value; false when it has none (written as `-`).
/// Straight into `out`: no allocation per operator.
fn write_op(op: &Op, r: &LogRecord<'_>, out: &mut Vec<u8>) -> bool {
    let mut w = SliceWriter(out);
    match op {
        Op::StartTime => match r.start {
            Some(t) => rfc3339_millis(t, &mut w),
            None => return false,
        },
        Op::Req(a, b) | Op::Resp(a, b) => {
            let vals = if matches!(op, Op::Req(..)) {
                r.req
            } else {
                r.resp
            };
            let v = vals
                .get(*a)
                .copied()
                .flatten()
                .or_else(|| b.and_then(|b| vals.get(b).copied().flatten()));
            match v {
                Some(v) => w.0.extend_from_slice(v),
                None => return false,
            }
        }
        Op::Protocol if r.protocol.is_empty() => return false,
        Op::Protocol => w.0.extend_from_slice(r.protocol.as_bytes()),
        Op::ResponseCode => {
            let _ = write!(w, "{}", r.status.unwrap_or(0));
        }
        Op::ResponseFlags if r.flags.is_empty() => return false,
        Op::ResponseFlags => w.0.extend_from_slice(r.flags.as_bytes()),
        Op::BytesReceived => {
            let _ = write!(w, "{}", r.bytes_received);
        }
        Op::BytesSent => {
            let _ = write!(w, "{}", r.bytes_sent);
        }
        Op::Duration => match r.duration {
            Some(d) => {
                let _ = write!(w, "{}", d.as_millis());
            }
            None => return false,
        },
        Op::UpstreamHost => match r.upstream_host {
            Some(a) => {
                let _ = write!(w, "{a}");
            }
            None => return false,
        },
        Op::UpstreamCluster => match r.upstream_cluster {
            Some(c) => w.0.extend_from_slice(c.as_bytes()),
            None => return false,
        },
        Op::DownstreamRemoteAddress | Op::DownstreamDirectRemoteAddress => {
            let addr = match op {
                Op::DownstreamRemoteAddress => r.downstream,
                _ => r.downstream_direct,
            };
            match addr {
                Some(a) => {
                    let _ = write!(w, "{a}");
                }
                None => return false,
            }
        }
        Op::DownstreamRemoteAddressWithoutPort | Op::DownstreamDirectRemoteAddressWithoutPort => {
            let addr = match op {
                Op::DownstreamRemoteAddressWithoutPort => r.downstream,
                _ => r.downstream_direct,
            };
            match addr {
                Some(a) => {
                    let _ = write!(w, "{}", a.ip());
                }
                None => return false,
            }
        }
        Op::RequestedServerName => match r.sni {
            Some(n) => w.0.extend_from_slice(n.as_bytes()),
            None => return false,
        },
        Op::LocalReplyBody => match r.local_reply_body {
            Some(b) => w.0.extend_from_slice(b),
            None => return false,
        },
    }
    true
}

/// A JSON value: a number for a lone numeric operator (as Envoy types
/// them), `null` for a lone operator without a value, else a string.
fn render_json_value(t: &Text, r: &LogRecord<'_>, out: &mut Vec<u8>) {
    if let [Piece::Op { op, max_len: None }] = t.0.as_slice() {
        let numeric = matches!(
            op,
            Op::ResponseCode | Op::BytesReceived | Op::BytesSent | Op::Duration
        );
        let mut v = Vec::new();
        if !write_op(op, r, &mut v) {
            out.extend_from_slice(b"null");
        } else if numeric {
            out.extend_from_slice(&v);
        } else {
            json_string(out, &v);
        }
        return;
    }
    let mut v = Vec::new();
    for p in &t.0 {
        match p {
            Piece::Literal(l) => v.extend_from_slice(l.as_bytes()),
            Piece::Op { op, max_len } => {
                let start = v.len();
                if !write_op(op, r, &mut v) {
                    v.push(b'-');
                }
                truncate(&mut v, start, *max_len);
            }
        }
    }
    json_string(out, &v);
}

fn json_string(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &b in String::from_utf8_lossy(s).as_bytes() {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            c if c < 0x20 => {
                let _ = write!(SliceWriter(out), "\\u{:04x}", c);
            }
            c => out.push(c),
        }
    }
    out.push(b'"');
}

struct SliceWriter<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for SliceWriter<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// `2016-04-15T20:17:00.310Z`, Envoy's default START_TIME.
fn rfc3339_millis(t: SystemTime, out: &mut impl std::fmt::Write) {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let _ = write!(
        out,
        "{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{:03}Z",
        d.subsec_millis()
    );
}

pub mod filter;

#[cfg(test)]
mod tests;
