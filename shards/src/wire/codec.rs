//! A downstream connection's codec, HTTP/2 (`h2wire`) or HTTP/1.1 (`h1wire`), behind the one set of calls the request phases make; HTTP/1.1 requests become the same header lists and events as HTTP/2's.
//!
//! The phases (route, pick, open upstream, forward, finish) are written
//! once, against HTTP/2's model: streams with ids, a request head as a
//! header list with pseudo-headers, body pieces released once taken. An
//! HTTP/1.1 connection fits it as a connection whose client opens one
//! stream at a time (1, 3, 5, …): its head becomes `:method`, `:scheme`,
//! `:authority` (from `Host`, or an absolute-form target), `:path` and
//! the fields in lowercase; its responses are encoded by `h1wire` in
//! order. Dispatch is a `match` per call, not a trait object: two known
//! codecs, no allocation, no generic tower above them.

use bytes::{Bytes, BytesMut};
use engine::{CodecType, HeadersWithUnderscoresAction, Http1Options, HttpConnectionManager};
use h2wire::conn::{Event, Flood, SendError, ServerConn, ServerCounts};
use h2wire::message::HeaderList;
use h2wire::ErrorCode;

use crate::stats::DownstreamStats;

/// The HTTP/2 client preface (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The client preface and a SETTINGS frame header (9 bytes): an HTTP/2
/// client's handshake.
const HANDSHAKE_BYTES: usize = PREFACE.len() + 9;

/// Which codec a new connection gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Proto {
    H2,
    H1,
}

/// The codec for a connection that started with `first` bytes under
/// `codec_type`; `None`: too few bytes to tell yet. AUTO picks HTTP/2 on
/// its preface and HTTP/1.1 on anything else (Envoy's rule), so one
/// listener serves both curl and gRPC clients.
pub(crate) fn choose(codec_type: CodecType, first: &[u8]) -> Option<Proto> {
    match codec_type {
        CodecType::Http2 => Some(Proto::H2),
        CodecType::Http1 => Some(Proto::H1),
        CodecType::Auto => {
            let n = first.len().min(PREFACE.len());
            if first[..n] != PREFACE[..n] {
                Some(Proto::H1)
            } else if n == PREFACE.len() {
                Some(Proto::H2)
            } else {
                None
            }
        }
    }
}

/// What the HTTP/1.1 side needs beyond `h1wire`'s connection: how to turn
/// its heads into header lists.
pub(crate) struct H1Conn {
    conn: h1wire::conn::ServerConn,
    opts: Http1Options,
    underscores: HeadersWithUnderscoresAction,
    counts: ServerCounts,
    /// CONNECT requests refused since the last count.
    upgrades_refused: u32,
    /// The current request's `Upgrade` value, when it asks for one (the
    /// 101 that may answer it says it back).
    upgrade: Option<Box<[u8]>>,
    /// The event being converted, for `poll_event`.
    pending: Option<Event>,
}

/// A downstream connection's codec.
// One per connection, inline in its task's state: boxing the HTTP/2 side
// would add a pointer chase to every codec call on the hot path to save
// the HTTP/1.1 connections some bytes.
#[allow(clippy::large_enum_variant)]
pub(crate) enum DownCodec {
    /// Both boxed: an HTTP/2 codec is 920 B, an HTTP/1.1 one 288 B, and
    /// each connection's record holds one. Inline, every HTTP/1.1
    /// connection (slow readers' among them) carried 632 B it never used;
    /// boxing one of the two would cost the other's connections instead.
    H2(Box<ServerConn>),
    H1(Box<H1Conn>),
}

impl DownCodec {
    /// An HTTP/1.1 codec under the connection manager's settings, holding
    /// at most `body_window` request body bytes not yet released.
    pub fn h1(hcm: &HttpConnectionManager, body_window: u32) -> Self {
        let limits = h1wire::Limits {
            max_head_bytes: hcm.max_header_list_size as usize,
            max_headers: hcm.max_headers_count as usize,
        };
        Self::h1_with(
            &hcm.http1,
            hcm.headers_with_underscores_action,
            limits,
            body_window,
        )
    }

    fn h1_with(
        opts: &Http1Options,
        underscores: HeadersWithUnderscoresAction,
        limits: h1wire::Limits,
        body_window: u32,
    ) -> Self {
        let cfg = h1wire::conn::ServerConfig {
            limits,
            body_window,
            accept_http_10: opts.accept_http_10,
            // Written by the streams, through `local_reply_config`.
            caller_writes_refusals: true,
        };
        DownCodec::H1(Box::new(H1Conn {
            conn: h1wire::conn::ServerConn::new(cfg),
            opts: opts.clone(),
            underscores,
            counts: ServerCounts::default(),
            upgrades_refused: 0,
            upgrade: None,
            pending: None,
        }))
    }

    /// Takes what it can of `buf` (`read`: bytes just read into it). An
    /// HTTP/1.1 connection also looks again at bytes it left there (a
    /// pipelined request, body held back by its window).
    pub fn recv(&mut self, buf: &mut BytesMut, read: usize) -> Result<(), Option<Flood>> {
        match self {
            DownCodec::H2(c) if read > 0 => c.recv(buf).map_err(|_| c.flood()),
            DownCodec::H2(_) => Ok(()),
            DownCodec::H1(_) if buf.is_empty() => Ok(()),
            DownCodec::H1(c) => c.conn.recv(buf).map_err(|e| {
                if e.status() == 431 {
                    c.counts.header_overflow += 1;
                }
                None
            }),
        }
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        match self {
            DownCodec::H2(c) => match c.poll_event()? {
                Event::Request {
                    stream,
                    head,
                    end_stream,
                } if head.pseudo(b":method") == Some(b"CONNECT")
                    && head.pseudo(b":protocol").is_some() =>
                {
                    let head = as_upgrade(head);
                    Some(Event::Request {
                        stream,
                        head,
                        end_stream,
                    })
                }
                ev => Some(ev),
            },
            DownCodec::H1(c) => c.poll_event(),
        }
    }

    /// Adds to `stats` what the codec refused or dropped by itself since
    /// the last call.
    pub fn count(&mut self, stats: &DownstreamStats) {
        match self {
            DownCodec::H2(c) => stats.add_codec(c.take_counts()),
            DownCodec::H1(c) => {
                stats.add_codec(std::mem::take(&mut c.counts));
                if let Some(status) = c.conn.take_refusal() {
                    stats.responses.record(status);
                }
                if c.upgrades_refused > 0 {
                    stats
                        .rq_upgrade_refused
                        .add(u64::from(std::mem::take(&mut c.upgrades_refused)));
                }
            }
        }
    }

    pub fn send_headers<'a>(
        &mut self,
        stream: u32,
        status: u16,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        end_stream: bool,
    ) -> Result<(), SendError> {
        match self {
            // An extended CONNECT is answered 200 where HTTP/1.1 switched
            // protocols (RFC 8441 §5).
            DownCodec::H2(c) if status == 101 => c.send_headers(stream, 200, fields, end_stream),
            DownCodec::H2(c) => c.send_headers(stream, status, fields, end_stream),
            // A 101 answers an upgrade, a 2xx a CONNECT: the connection
            // becomes a tunnel.
            DownCodec::H1(c) if c.switches(status) => {
                let upgrade = c.upgrade.take().unwrap_or_default();
                let upgrade = (status == 101).then_some(&*upgrade);
                c.conn
                    .send_switching(stream, status, fields, upgrade)
                    .map_err(h1_send_error)
            }
            DownCodec::H1(_) if status == 101 => Err(SendError::UnknownStream),
            DownCodec::H1(c) => c
                .conn
                .send_headers(stream, status, fields, end_stream)
                .map_err(h1_send_error),
        }
    }

    /// The `Upgrade` value of the request just taken, when it asks for an
    /// upgrade (HTTP/1.1 only: HTTP/2 has none).
    pub fn upgrade_asked(&self) -> Option<&[u8]> {
        match self {
            DownCodec::H2(_) => None,
            DownCodec::H1(c) => c.upgrade.as_deref(),
        }
    }

    /// The request's upgrade is not taken (refused, answered otherwise): no
    /// response to it switches the connection.
    pub fn forget_upgrade(&mut self) {
        if let DownCodec::H1(c) = self {
            c.upgrade = None;
        }
    }

    /// A 101 went: the connection is a tunnel now, its codec done.
    pub fn is_upgraded(&self) -> bool {
        match self {
            DownCodec::H2(_) => false,
            DownCodec::H1(c) => c.conn.is_upgraded(),
        }
    }

    pub fn send_data(
        &mut self,
        stream: u32,
        data: &mut Bytes,
        end_stream: bool,
    ) -> Result<usize, SendError> {
        match self {
            DownCodec::H2(c) => c.send_data(stream, data, end_stream),
            DownCodec::H1(c) => c
                .conn
                .send_data(stream, data, end_stream)
                .map_err(h1_send_error),
        }
    }

    pub fn send_trailers<'a>(
        &mut self,
        stream: u32,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) -> Result<(), SendError> {
        match self {
            DownCodec::H2(c) => c.send_trailers(stream, fields),
            // Without `enable_trailers` Envoy drops them: the chunked body
            // just ends.
            DownCodec::H1(c) if !c.opts.enable_trailers => c
                .conn
                .send_trailers(stream, std::iter::empty())
                .map_err(h1_send_error),
            DownCodec::H1(c) => c.conn.send_trailers(stream, fields).map_err(h1_send_error),
        }
    }

    /// Gives up on a stream whose response began: RST_STREAM on HTTP/2;
    /// on HTTP/1.1 the connection closes (there is nothing else to say).
    pub fn reset(&mut self, stream: u32, code: ErrorCode) {
        match self {
            DownCodec::H2(c) => c.reset(stream, code),
            DownCodec::H1(c) => c.conn.reset(stream),
        }
    }

    pub fn release(&mut self, stream: u32, n: u32) {
        match self {
            DownCodec::H2(c) => c.release(stream, n),
            DownCodec::H1(c) => c.conn.release(n),
        }
    }

    /// Gives back a header list the connection handed out.
    pub fn recycle(&mut self, list: HeaderList) {
        match self {
            DownCodec::H2(c) => c.recycle(list),
            DownCodec::H1(_) => list.recycle(),
        }
    }

    /// Takes no new requests: GOAWAY on HTTP/2; `connection: close` on
    /// the current HTTP/1.1 response, or closing at once when idle.
    pub fn go_away(&mut self, code: ErrorCode) {
        match self {
            DownCodec::H2(c) => c.go_away(code),
            DownCodec::H1(c) => c.conn.go_away(),
        }
    }

    /// HTTP/2's first GOAWAY of a graceful drain (2^31−1): no new streams
    /// from the client, those on their way still taken. HTTP/1.1 has no
    /// such notice; its drain says `Connection: close` instead.
    pub fn shutdown_notice(&mut self) {
        if let DownCodec::H2(c) = self {
            c.shutdown_notice();
        }
    }

    pub fn check_outbound(&mut self, unwritten: usize) -> Result<(), Flood> {
        match self {
            DownCodec::H2(c) => c.check_outbound(unwritten),
            DownCodec::H1(_) => Ok(()),
        }
    }

    pub fn shrink(&mut self) {
        match self {
            DownCodec::H2(c) => c.shrink(),
            DownCodec::H1(c) => c.conn.shrink(),
        }
    }

    pub fn poll_output(&mut self) -> Option<Bytes> {
        match self {
            DownCodec::H2(c) => c.poll_output(),
            DownCodec::H1(c) => c.conn.poll_output(),
        }
    }

    /// An HTTP/1.1 connection that takes nothing more (its client asked
    /// to close, a response could not complete, an error was answered):
    /// close once the output is written. HTTP/2 closes through its
    /// drain instead.
    pub fn is_closed(&self) -> bool {
        match self {
            DownCodec::H2(_) => false,
            DownCodec::H1(c) => c.conn.is_closed(),
        }
    }

    /// Whether an HTTP/1.1 connection would take some of the `buffered`
    /// bytes it left unparsed (see `h1wire`'s `can_take`). HTTP/2 takes
    /// everything it is given.
    pub fn can_take(&self, buffered: usize) -> bool {
        match self {
            DownCodec::H2(_) => false,
            DownCodec::H1(c) => buffered > 0 && c.conn.can_take(),
        }
    }

    /// Whether to read the socket while `buffered` bytes wait unparsed.
    pub fn wants_input(&self, buffered: usize) -> bool {
        match self {
            DownCodec::H2(_) => true,
            DownCodec::H1(c) => c.conn.wants_input(buffered),
        }
    }

    /// The connection has received what makes it a client of ours: the
    /// HTTP/2 preface and SETTINGS (`received` bytes), or an HTTP/1.1
    /// request head. Until then it is held to the handshake timeout.
    pub fn handshaken(&self, received: usize) -> bool {
        match self {
            DownCodec::H2(_) => received >= HANDSHAKE_BYTES,
            DownCodec::H1(c) => c.conn.requests() > 0,
        }
    }

    /// The protocol as access logs name it (`%PROTOCOL%`).
    pub fn protocol(&self) -> &'static str {
        match self {
            DownCodec::H2(_) => "HTTP/2",
            DownCodec::H1(c) => match c.conn.version() {
                h1wire::Version::Http10 => "HTTP/1.0",
                h1wire::Version::Http11 => "HTTP/1.1",
            },
        }
    }

    pub fn is_h1(&self) -> bool {
        matches!(self, DownCodec::H1(_))
    }

    /// The status of the HTTP/1.1 codec's own refusal of a request (a
    /// malformed or oversized head, a head timeout), for the streams to
    /// answer ([`Self::write_refusal`]).
    pub fn pending_refusal(&self) -> Option<u16> {
        match self {
            DownCodec::H1(c) => c.conn.pending_refusal(),
            DownCodec::H2(_) => None,
        }
    }

    /// Writes the pending refusal's answer; the connection then closes.
    pub fn write_refusal<'a>(
        &mut self,
        status: u16,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        body: &[u8],
    ) {
        if let DownCodec::H1(c) = self {
            c.conn.write_refusal(status, fields, body);
        }
    }

    /// Answers an HTTP/1.1 connection's unfinished request `status` and
    /// closes it; HTTP/2 has no such answer.
    pub fn refuse(&mut self, status: u16) {
        if let DownCodec::H1(c) = self {
            c.refuse(status);
        }
    }
}

fn h1_send_error(e: h1wire::conn::SendError) -> SendError {
    use h1wire::conn::SendError as E;
    match e {
        E::UnknownStream => SendError::UnknownStream,
        E::HeadersSent => SendError::HeadersSent,
        E::NoHeaders => SendError::NoHeaders,
        E::Ended => SendError::Ended,
    }
}

/// Fields an HTTP/1.1 request carries for its own hop, answered or
/// replaced here: not forwarded (the rest of RFC 9110 §7.6.1's list is
/// dropped where any request's fields go upstream).
fn h1_only(name: &[u8]) -> bool {
    matches!(name, b"host" | b"expect" | b"http2-settings")
}

impl H1Conn {
    /// Whether a response of `status` turns the connection into a tunnel:
    /// a 101 to an upgrade, a 2xx to a CONNECT.
    fn switches(&self, status: u16) -> bool {
        match self.upgrade.as_deref() {
            Some(b"CONNECT") => (200..300).contains(&status),
            Some(_) => status == 101,
            None => false,
        }
    }

    fn poll_event(&mut self) -> Option<Event> {
        loop {
            if let Some(ev) = self.pending.take() {
                return Some(ev);
            }
            let ev = self.conn.poll_event()?;
            self.pending = match ev {
                h1wire::conn::Event::Request {
                    stream,
                    head,
                    end_stream,
                } => self.request(&head).map(|head| Event::Request {
                    stream,
                    head,
                    end_stream,
                }),
                h1wire::conn::Event::Data {
                    stream,
                    data,
                    end_stream,
                } => Some(Event::Data {
                    stream,
                    data,
                    end_stream,
                }),
                h1wire::conn::Event::Trailers { stream, raw } => {
                    let mut fields = HeaderList::pooled();
                    if self.opts.enable_trailers {
                        for (name, value) in h1wire::trailer_fields(&raw) {
                            push_lowercase(&mut fields, name, value);
                        }
                    }
                    Some(Event::Trailers { stream, fields })
                }
            };
        }
    }

    /// Answers the current request `status` and closes.
    fn refuse(&mut self, status: u16) {
        self.conn.reject(status);
    }

    /// The header list of a request head, or `None` when the request is
    /// refused here (answered, and the connection closes).
    fn request(&mut self, head: &h1wire::RequestHead) -> Option<HeaderList> {
        let method = head.method();
        let target = head.target();
        // A CONNECT (authority-form target) and an upgrade keep what they
        // ask for, for the route to decide on (`upgrade_configs`); `h2c`,
        // and any upgrade of HTTP/1.0 (RFC 9110 §7.8), is ignored.
        let connect = method == b"CONNECT";
        let upgrade = !connect
            && head.upgrade
            && head.version == h1wire::Version::Http11
            && !is_h2c_upgrade(head);
        self.upgrade = if connect {
            Some(Box::from(&b"CONNECT"[..]))
        } else {
            upgrade
                .then(|| {
                    head.fields()
                        .find(|(n, _)| n.eq_ignore_ascii_case(b"upgrade"))
                })
                .flatten()
                .map(|(_, v)| Box::from(v))
        };
        let (authority, path) = match split_target(target) {
            // Only the authority-form (`host:port`, RFC 9112 §3.2.3), and
            // nothing after its head but the tunnel's bytes: Envoy answers
            // anything else 400 before routing.
            _ if connect => {
                let bodyless = matches!(
                    head.framing,
                    h1wire::BodyFraming::None | h1wire::BodyFraming::Length(0)
                );
                if !authority_form(target) || !bodyless {
                    self.refuse(400);
                    return None;
                }
                (Some(target), None)
            }
            Target::Origin => (head.host(), Some(target)),
            Target::Absolute { authority, path } if self.opts.allow_absolute_url => {
                (Some(authority), Some(path))
            }
            Target::Asterisk if method == b"OPTIONS" => (head.host(), Some(target)),
            Target::Absolute { .. } | Target::Asterisk | Target::Invalid => {
                self.refuse(400);
                return None;
            }
        };
        // Only HTTP/1.0 may come without `Host` (h1wire checks): then the
        // configured default, or 400 as Envoy answers.
        let Some(authority) = authority.or_else(|| {
            self.opts
                .default_host_for_http_10
                .as_deref()
                .map(str::as_bytes)
        }) else {
            self.refuse(400);
            return None;
        };
        let mut list = HeaderList::pooled();
        list.push(b":method", method, false);
        // A CONNECT has neither scheme nor path (RFC 9113 §8.5).
        if let Some(path) = path {
            list.push(b":scheme", b"http", false);
            list.push(b":authority", authority, false);
            list.push(b":path", path, false);
        } else {
            list.push(b":authority", authority, false);
        }
        // Fields the client named in `Connection` are for this hop only
        // (RFC 9110 §7.6.1), like the fixed hop-by-hop list dropped later.
        // Collected once (browsers send `Connection: keep-alive` with
        // every request), on the stack for the usual few tokens.
        let named = connection_named(head.fields());
        for (name, value) in head.fields() {
            if this_hop_only(&named, name, upgrade) {
                continue;
            }
            if name.contains(&b'_') {
                match self.underscores {
                    HeadersWithUnderscoresAction::Allow => {}
                    HeadersWithUnderscoresAction::DropHeader => {
                        self.counts.dropped_headers_with_underscores += 1;
                        continue;
                    }
                    HeadersWithUnderscoresAction::RejectRequest => {
                        self.counts.rejected_with_underscores += 1;
                        list.recycle();
                        self.refuse(400);
                        return None;
                    }
                }
            }
            push_lowercase(&mut list, name, value);
        }
        Some(list)
    }
}

/// An extended CONNECT (RFC 8441: `:method CONNECT` with a `:protocol`,
/// which h2wire takes only once `allow_connect` announced it) as the
/// HTTP/1.1 upgrade it stands for, as Envoy routes it: `:method GET`,
/// `connection: upgrade` and `upgrade: <protocol>`, its other fields as
/// they came but `content-length` (the tunnel's bytes are no body; h2wire
/// still holds the stream to it). `:protocol` stays among the
/// pseudo-headers, which are never forwarded: it marks the stream a
/// tunnel for a look at the list's first few fields.
fn as_upgrade(head: HeaderList) -> HeaderList {
    let mut list = HeaderList::pooled();
    let mut protocol: &[u8] = b"";
    for (name, value, never) in head.iter() {
        match name {
            b":method" => list.push(name, b"GET", false),
            b":protocol" => {
                protocol = value;
                list.push(name, value, never);
            }
            b"content-length" => {}
            _ => list.push(name, value, never),
        }
    }
    list.push(b"connection", b"upgrade", false);
    list.push(b"upgrade", protocol, false);
    head.recycle();
    list
}

/// A CONNECT's target as RFC 9112 §3.2.3 has it: a host, `:`, a port.
fn authority_form(target: &[u8]) -> bool {
    let Some(colon) = target.iter().rposition(|&b| b == b':') else {
        return false;
    };
    let (host, port) = (&target[..colon], &target[colon + 1..]);
    !host.is_empty()
        && !host.contains(&b'/')
        && !port.is_empty()
        && port.len() <= 5
        && port.iter().all(u8::is_ascii_digit)
}

/// Whether `name` is a field the client's `Connection` named (`named`):
/// for this hop only, unless it is `Connection` itself or the `Upgrade`
/// of a request that upgrades.
fn this_hop_only(named: &[&[u8]], name: &[u8], upgrade: bool) -> bool {
    if named.is_empty() || name.eq_ignore_ascii_case(b"connection") {
        return false;
    }
    if upgrade && name.eq_ignore_ascii_case(b"upgrade") {
        return false;
    }
    named.iter().any(|t| t.eq_ignore_ascii_case(name))
}

/// `Upgrade: h2c` (RFC 7540 §3.2, withdrawn by RFC 9113): served as the
/// HTTP/1.1 request it also is, its upgrade ignored.
fn is_h2c_upgrade(head: &h1wire::RequestHead) -> bool {
    head.fields()
        .filter(|(n, _)| n.eq_ignore_ascii_case(b"upgrade"))
        .all(|(_, v)| v.eq_ignore_ascii_case(b"h2c"))
}

/// Pushes a field with its name in lowercase (HTTP/1.1 names are
/// case-insensitive; HTTP/2's and our matchers' are lowercase).
/// The field names an HTTP/1.1 message's `Connection` fields list: for
/// its hop only (RFC 9110 §7.6.1), like the fixed hop-by-hop list.
/// Collected once per message, on the stack for the usual few tokens.
pub(super) fn connection_named<'a>(
    fields: impl Iterator<Item = (&'a [u8], &'a [u8])>,
) -> smallvec::SmallVec<[&'a [u8]; 4]> {
    fields
        .filter(|(n, _)| n.eq_ignore_ascii_case(b"connection"))
        .flat_map(|(_, v)| v.split(|&b| b == b','))
        .map(<[u8]>::trim_ascii)
        .filter(|t| !t.is_empty())
        .collect()
}

pub(super) fn push_lowercase(list: &mut HeaderList, name: &[u8], value: &[u8]) {
    let mut lower = [0u8; 64];
    if name.len() <= lower.len() {
        let lower = &mut lower[..name.len()];
        lower.copy_from_slice(name);
        lower.make_ascii_lowercase();
        if !h1_only(lower) {
            list.push(lower, value, false);
        }
    } else {
        let lower = name.to_ascii_lowercase();
        list.push(&lower, value, false);
    }
}

/// The forms of a request target (RFC 9112 §3.2).
#[derive(Debug, PartialEq, Eq)]
enum Target<'a> {
    /// `/path?query`.
    Origin,
    /// `http://authority/path?query`: the path is `/` when empty.
    Absolute {
        authority: &'a [u8],
        path: &'a [u8],
    },
    /// `*` (OPTIONS only).
    Asterisk,
    Invalid,
}

fn split_target(target: &[u8]) -> Target<'_> {
    if target.first() == Some(&b'/') {
        return Target::Origin;
    }
    if target == b"*" {
        return Target::Asterisk;
    }
    let rest = [&b"http://"[..], b"https://"]
        .iter()
        .find(|s| target.len() > s.len() && target[..s.len()].eq_ignore_ascii_case(s))
        .map(|s| &target[s.len()..]);
    let Some(rest) = rest else {
        return Target::Invalid;
    };
    let end = rest
        .iter()
        .position(|&b| b == b'/' || b == b'?')
        .unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    if authority.is_empty() || authority.contains(&b'@') {
        return Target::Invalid;
    }
    let path: &[u8] = match path.first() {
        None => b"/",
        // `http://a?q` has an empty path: `/?q` (RFC 9112 §3.2.1).
        Some(b'?') => return Target::Invalid,
        Some(_) => path,
    };
    Target::Absolute { authority, path }
}

#[cfg(test)]
mod tests;
