//! One HTTP/1.1 client connection (the gateway's upstream side) as a state machine: a request encoded, its response decoded, then the next exchange.
//!
//! One exchange at a time, no pipelining: a request is sent only on an
//! idle connection, which is idle again once both its request and its
//! response are complete and the server keeps the connection (RFC 9112
//! §9.3). A pipelined request would be lost with the connection whenever
//! an earlier response closes it, and a proxy cannot know whether the
//! server had begun acting on it; one at a time costs only a connection
//! per concurrent exchange, which the caller's pool provides.
//!
//! Whatever leaves the connection's state in doubt closes it instead of
//! reusing it: `Connection: close`, a body that runs to the close, a
//! response framed both ways, a response complete before its request was
//! all sent, bytes after a response, an exchange the caller abandoned, any
//! error. A closing connection finishes its exchange but takes no other.
//!
//! The response body is held to a window like an HTTP/2 stream's: once
//! the caller holds `body_window` (plus [grants](ClientConn::grant)) bytes
//! not yet released, no more are decoded and
//! [`ClientConn::wants_input`] says not to read, so a slow reader
//! downstream leaves the rest in the server's socket and TCP slows it.

use std::collections::VecDeque;

use bytes::{BufMut, Bytes, BytesMut};

use crate::body::BodyDecoder;
use crate::encode::{self, skipped_in_request, RequestFraming};
use crate::error::Error;
use crate::head::{BodyFraming, Limits};

mod response;

/// How a response's body is delimited ([`ResponseHead::framing`]).
pub use crate::encode::ResponseFraming;
pub use crate::error::SendError;
use response::decode_body;
pub use response::{ClientEvent, ResponseHead};

/// A connection's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientConfig {
    /// Bounds on a response head (and on a trailer section).
    pub limits: Limits,
    /// Response body bytes handed out and not yet released beyond which no
    /// more are decoded (0 is taken as 1: nothing would ever flow).
    pub body_window: u32,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            body_window: 64 * 1024,
        }
    }
}

/// Where the request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sending {
    /// No exchange in progress.
    Idle,
    /// Body bytes still to come under a `Content-Length`: this many.
    Length(u64),
    Chunked,
    /// An upgrade's tunnel (`send_upgrade_tunnel`): bytes go as they are,
    /// and the end shuts the write side.
    Raw,
    Done,
}

/// Which answer switches the exchange in progress to a tunnel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Switch {
    No,
    /// An upgrade's 101.
    Upgrade,
    /// A CONNECT's 2xx (RFC 9110 §9.3.6).
    Connect,
}

/// Where the response of the exchange in progress stands.
#[derive(Debug)]
enum Receiving {
    Head,
    Body(BodyDecoder),
    UntilClose,
    /// The server switched protocols (101 to an upgrade request): what
    /// follows is no longer HTTP, and stays in the buffer for the caller.
    Upgraded,
    Done,
}

/// Framing fields are never sent as trailers (RFC 9110 §6.5.1), nor
/// those of one hop.
fn skipped_in_trailers(name: &[u8]) -> bool {
    skipped_in_request(name) || name.eq_ignore_ascii_case(b"content-length")
}

/// Data below this size is copied next to its framing instead of being
/// queued as a buffer of its own: a write per small buffer costs more
/// than the copy.
const COPY_BELOW: usize = 1024;

/// The client side of one HTTP/1.1 connection.
#[derive(Debug)]
pub struct ClientConn {
    cfg: ClientConfig,
    sending: Sending,
    receiving: Receiving,
    /// The exchange in progress is for a HEAD request.
    head_request: bool,
    /// What answer would switch the exchange to a tunnel.
    asked: Switch,
    /// The upgrade's bytes are the caller's as data (`send_upgrade_tunnel`).
    tunnel: bool,
    /// A tunnel's sender ended: once its bytes are written, the socket's
    /// write side is to be shut.
    write_shut: bool,
    /// A 101 or a CONNECT's 2xx came (or the tunnel is raw): the
    /// exchange is a tunnel now.
    switched: bool,
    /// No exchange after the current one.
    closing: bool,
    /// Failed or aborted: nothing more is sent or received.
    broken: bool,
    /// Body bytes of this exchange handed out and not yet released.
    unreleased: u64,
    /// The exchange's window: `body_window` plus grants.
    window: u64,
    /// The last `recv` stopped at the window with bytes left in the buffer.
    stalled: bool,
    /// Bytes followed a response on a kept connection: the next `recv`
    /// with any fails.
    trailing: bool,
    events: VecDeque<ClientEvent>,
    /// Output in order: `queue`, then `out` (heads, framing, small data).
    queue: VecDeque<Bytes>,
    out: BytesMut,
}

impl ClientConn {
    pub fn new(cfg: ClientConfig) -> Self {
        let cfg = ClientConfig {
            body_window: cfg.body_window.max(1),
            ..cfg
        };
        Self {
            cfg,
            sending: Sending::Idle,
            receiving: Receiving::Head,
            head_request: false,
            asked: Switch::No,
            tunnel: false,
            write_shut: false,
            switched: false,
            closing: false,
            broken: false,
            unreleased: 0,
            window: u64::from(cfg.body_window),
            stalled: false,
            trailing: false,
            events: VecDeque::new(),
            queue: VecDeque::new(),
            out: BytesMut::new(),
        }
    }

    /// Whether a request may be sent now: no exchange in progress, and the
    /// connection neither closing nor failed.
    pub fn is_idle(&self) -> bool {
        self.sending == Sending::Idle && !self.closing
    }

    /// The connection will carry no other exchange: close it once the
    /// current one (if any) is over.
    pub fn is_closing(&self) -> bool {
        self.closing
    }

    /// The request of the exchange in progress is all sent (or there is
    /// none).
    pub fn request_done(&self) -> bool {
        matches!(self.sending, Sending::Idle | Sending::Done)
    }

    /// The response of the exchange in progress is complete (or there is
    /// none).
    pub fn response_done(&self) -> bool {
        self.sending == Sending::Idle || matches!(self.receiving, Receiving::Done)
    }

    /// Writes a request head: `METHOD target HTTP/1.1`, `host` first (left
    /// out when empty), then `fields` (names in lowercase, names and values
    /// already checked) less those the codec writes itself or that belong
    /// to one hop. A `content-length` among them frames the body;
    /// otherwise a body goes chunked, and `end_stream` means none
    /// (announced with `content-length: 0` for POST, PUT and PATCH, whose
    /// servers may otherwise answer 411).
    pub fn send_request<'a>(
        &mut self,
        method: &[u8],
        target: &[u8],
        host: &[u8],
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        end_stream: bool,
    ) -> Result<(), SendError> {
        if !self.is_idle() {
            return Err(SendError::Busy);
        }
        // Anything refused below is taken back out: nothing was sent.
        let mark = self.out.len();
        let r = encode::request_head(&mut self.out, method, target, host, fields, end_stream);
        match r {
            Ok(framing) => {
                self.sending = match framing {
                    RequestFraming::None => Sending::Done,
                    RequestFraming::Length(n) => Sending::Length(n),
                    RequestFraming::Chunked => Sending::Chunked,
                };
                self.receiving = Receiving::Head;
                self.head_request = method == b"HEAD";
                self.asked = Switch::No;
                self.switched = false;
                self.tunnel = false;
                // The window is the exchange's, as an HTTP/2 stream's:
                // a slow reader of the last response (its bytes are the
                // caller's now) does not hold this one back.
                self.unreleased = 0;
                self.window = u64::from(self.cfg.body_window);
                self.stalled = false;
                Ok(())
            }
            Err(e) => {
                self.out.truncate(mark);
                Err(e)
            }
        }
    }

    /// Writes the head of a request that asks to switch protocols
    /// (`Connection: upgrade`, `Upgrade: <upgrade>`; RFC 9110 §7.8), with
    /// no body: as [`Self::send_request`] otherwise. A 101 then answers it
    /// (a [`ClientEvent::Response`] that does not end), after which the
    /// connection takes nothing more: the bytes after the 101's head stay
    /// in the buffer, and the connection is the caller's to tunnel. Any
    /// other answer is an ordinary response, and the connection closes
    /// after it.
    pub fn send_upgrade<'a>(
        &mut self,
        method: &[u8],
        target: &[u8],
        host: &[u8],
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        upgrade: &[u8],
    ) -> Result<(), SendError> {
        let mark = self.out.len();
        self.send_request(method, target, host, fields, true)?;
        if upgrade.is_empty() || upgrade.iter().any(|b| matches!(b, b'\r' | b'\n' | 0)) {
            self.out.truncate(mark);
            self.sending = Sending::Idle;
            return Err(SendError::InvalidUpgrade);
        }
        // The head ends with its blank line: the upgrade's two fields go
        // before it.
        self.out.truncate(self.out.len() - 2);
        self.out.put_slice(b"connection: upgrade\r\nupgrade: ");
        self.out.put_slice(upgrade);
        self.out.put_slice(b"\r\n\r\n");
        self.asked = Switch::Upgrade;
        self.closing = true;
        Ok(())
    }

    /// [`Self::send_upgrade`] for a caller that carries the tunnel as the
    /// exchange's body: once a 101 came, [`Self::send_data`] writes its
    /// bytes as they are (before it, or after a refusal, they are dropped:
    /// the server would read them as HTTP), and its end asks for the write
    /// side to be shut ([`Self::wants_write_shut`]); after the 101 the
    /// server's bytes come as [`ClientEvent::Data`] within the window,
    /// ending with its close. WebSocket over HTTP/2 (RFC 8441) to an
    /// HTTP/1.1 server.
    pub fn send_upgrade_tunnel<'a>(
        &mut self,
        method: &[u8],
        target: &[u8],
        host: &[u8],
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        upgrade: &[u8],
    ) -> Result<(), SendError> {
        self.send_upgrade(method, target, host, fields, upgrade)?;
        self.carry_tunnel();
        Ok(())
    }

    /// Writes a CONNECT to `authority` (its target, RFC 9112 §3.2.3, and
    /// `host`) with `fields`: a 2xx then answers it as a 101 answers an
    /// upgrade (a [`ClientEvent::Response`] that does not end, whatever
    /// framing it claims), after which the connection is a tunnel; any
    /// other answer is an ordinary response, and the connection closes.
    /// `tunnel`: the caller carries the tunnel as the exchange's body, as
    /// with [`Self::send_upgrade_tunnel`]; else the bytes after the 2xx
    /// are left in the buffer for the caller, as after a 101.
    pub fn send_connect<'a>(
        &mut self,
        authority: &[u8],
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        tunnel: bool,
    ) -> Result<(), SendError> {
        self.send_request(b"CONNECT", authority, authority, fields, true)?;
        self.asked = Switch::Connect;
        self.closing = true;
        if tunnel {
            self.carry_tunnel();
        }
        Ok(())
    }

    /// The caller carries the tunnel as the exchange's body: raw bytes
    /// out, and after the switch the server's as data.
    fn carry_tunnel(&mut self) {
        self.tunnel = true;
        self.sending = Sending::Raw;
    }

    /// Takes the idle connection for a tunnel with no request at all (a
    /// CONNECT the caller answered itself): bytes go as they are and come
    /// back as [`ClientEvent::Data`] within the window until the server
    /// closes, as after [`Self::send_connect`]'s 2xx with `tunnel`. The
    /// connection closes with it.
    pub fn open_raw(&mut self) -> Result<(), SendError> {
        if !self.is_idle() {
            return Err(SendError::Busy);
        }
        self.carry_tunnel();
        self.receiving = Receiving::UntilClose;
        self.head_request = false;
        self.asked = Switch::No;
        self.switched = true;
        self.closing = true;
        self.unreleased = 0;
        self.window = u64::from(self.cfg.body_window);
        self.stalled = false;
        Ok(())
    }

    /// A tunnel's sender ended and its bytes are all handed out
    /// ([`Self::poll_output`]): shut the socket's write side (the server
    /// reads its end; its own direction goes on).
    pub fn wants_write_shut(&self) -> bool {
        self.write_shut && !self.has_output()
    }

    /// Request body bytes: all of `data` is taken (HTTP/1.1 has no window;
    /// the caller bounds what it has not written yet), one chunk per call
    /// when chunked. Returns the count. Bytes past the `Content-Length`,
    /// or an end short of it, fail (`data` left as it was) and break the
    /// connection. Once the response is complete (an early response) the
    /// rest of the body is not wanted: its bytes are taken and dropped, so
    /// the caller's request can end as usual.
    pub fn send_data(&mut self, data: &mut Bytes, end_stream: bool) -> Result<usize, SendError> {
        self.check_sending()?;
        let n = data.len();
        if matches!(self.receiving, Receiving::Done) {
            data.clear();
        } else {
            match self.sending {
                Sending::Length(left) => {
                    if n as u64 > left || (end_stream && n as u64 != left) {
                        self.fail();
                        return Err(SendError::LengthMismatch);
                    }
                    self.sending = Sending::Length(left - n as u64);
                    self.push_data(std::mem::take(data));
                }
                Sending::Chunked => {
                    if n > 0 {
                        encode::chunk_head(&mut self.out, n);
                        self.push_data(std::mem::take(data));
                        self.out.put_slice(b"\r\n");
                    }
                    if end_stream {
                        encode::last_chunk(&mut self.out, []);
                    }
                }
                // Only into a tunnel the 101 opened: before it, or after a
                // refusal, the server would read them as HTTP (a request
                // smuggled past the caller). Dropped.
                Sending::Raw
                    if !self.switched || !matches!(self.receiving, Receiving::UntilClose) =>
                {
                    data.clear()
                }
                Sending::Raw => {
                    if n > 0 {
                        self.push_data(std::mem::take(data));
                    }
                }
                // Excluded by `check_sending`.
                Sending::Idle | Sending::Done => {}
            }
        }
        if end_stream {
            self.write_shut |= self.sending == Sending::Raw;
            self.request_sent();
        }
        Ok(n)
    }

    /// Ends the request with a trailer section. Only a chunked body can
    /// carry one: under a `Content-Length` the fields are dropped and the
    /// request just ends (it must have had all its bytes). Framing fields
    /// are never sent as trailers (RFC 9110 §6.5.1).
    pub fn send_trailers<'a>(
        &mut self,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) -> Result<(), SendError> {
        self.check_sending()?;
        if !matches!(self.receiving, Receiving::Done) {
            match self.sending {
                Sending::Length(0) => {}
                Sending::Length(_) => {
                    self.fail();
                    return Err(SendError::LengthMismatch);
                }
                Sending::Chunked => {
                    let fields = fields.into_iter().filter(|(n, _)| !skipped_in_trailers(n));
                    encode::last_chunk(&mut self.out, fields);
                }
                // A tunnel has no trailers: they end it.
                Sending::Raw => self.write_shut = true,
                // Excluded by `check_sending`.
                Sending::Idle | Sending::Done => {}
            }
        }
        self.request_sent();
        Ok(())
    }

    /// Whether request body may be sent now.
    fn check_sending(&self) -> Result<(), SendError> {
        match self.sending {
            _ if self.broken => Err(SendError::Broken),
            Sending::Idle => Err(SendError::NoRequest),
            Sending::Done => Err(SendError::RequestComplete),
            Sending::Length(_) | Sending::Chunked | Sending::Raw => Ok(()),
        }
    }

    /// The next bytes to write, in order.
    pub fn poll_output(&mut self) -> Option<Bytes> {
        if let Some(b) = self.queue.pop_front() {
            return Some(b);
        }
        (!self.out.is_empty()).then(|| self.out.split().freeze())
    }

    pub fn has_output(&self) -> bool {
        !self.queue.is_empty() || !self.out.is_empty()
    }

    /// Takes what it can from the front of `buf`: response heads, then
    /// body bytes while the window has room; the rest stays in `buf` (call
    /// again when [`Self::has_pending_input`] says so). An error (a
    /// malformed response, bytes nobody asked for) breaks the connection:
    /// close it, and answer the request 502 whatever [`Error::status`]
    /// says. A failed or aborted connection takes nothing.
    ///
    /// Bytes after a complete response on a kept connection are
    /// unsolicited: when they came with the response, it stands, the
    /// connection becomes closing and the next call fails. On a connection
    /// already closing (the response said so, or came early) they can
    /// never be taken for a response, and are dropped.
    pub fn recv(&mut self, buf: &mut BytesMut) -> Result<(), Error> {
        if self.broken {
            return Ok(());
        }
        let r = self.take(buf);
        if r.is_err() {
            self.fail();
        }
        r
    }

    fn take(&mut self, buf: &mut BytesMut) -> Result<(), Error> {
        self.stalled = false;
        if self.trailing && !buf.is_empty() {
            return Err(Error::UnsolicitedResponse);
        }
        let mut completed = false;
        loop {
            let limits = self.cfg.limits;
            if matches!(self.receiving, Receiving::Upgraded) {
                return Ok(());
            }
            if self.sending == Sending::Idle || matches!(self.receiving, Receiving::Done) {
                if buf.is_empty() {
                    return Ok(());
                }
                if completed && !self.closing {
                    // What follows a response is no answer to anything: a
                    // server out of step with us, or one splitting
                    // responses. This one stands (it came whole before
                    // them, as it would have in a read of its own); the
                    // bytes fail the next call, and nothing is sent
                    // meanwhile.
                    self.trailing = true;
                    self.closing = true;
                    return Ok(());
                }
                if self.closing {
                    buf.clear();
                    return Ok(());
                }
                return Err(Error::UnsolicitedResponse);
            }
            let room = self.window.saturating_sub(self.unreleased);
            let room = usize::try_from(room).unwrap_or(usize::MAX);
            match &mut self.receiving {
                Receiving::Head => {
                    match response::parse_response_head(buf, &limits, self.head_request)? {
                        Some(head) => completed = self.on_head(head)?,
                        None => return Ok(()),
                    }
                }
                Receiving::UntilClose => {
                    if buf.is_empty() {
                        return Ok(());
                    }
                    if room == 0 {
                        self.stalled = true;
                        return Ok(());
                    }
                    let data = buf.split_to(room.min(buf.len())).freeze();
                    self.unreleased += data.len() as u64;
                    self.events.push_back(ClientEvent::Data {
                        data,
                        end_stream: false,
                    });
                }
                Receiving::Body(decoder) => {
                    let ended = decode_body(
                        decoder,
                        buf,
                        &limits,
                        room,
                        &mut self.unreleased,
                        &mut self.events,
                    )?;
                    if !ended {
                        let room = self.window.saturating_sub(self.unreleased);
                        self.stalled = room == 0 && !buf.is_empty();
                        return Ok(());
                    }
                    self.response_received();
                    completed = true;
                }
                // Handled above.
                Receiving::Done | Receiving::Upgraded => return Ok(()),
            }
        }
    }

    /// A response head arrived; true if it completes the response.
    fn on_head(&mut self, head: ResponseHead) -> Result<bool, Error> {
        let status = head.status;
        let switched = match status {
            101 => self.asked == Switch::Upgrade,
            200..=299 => self.asked == Switch::Connect,
            _ => false,
        };
        if switched {
            self.switched = true;
            // What follows is the tunnel's, whatever framing the head
            // claims (RFC 9110 §9.3.6): none is passed on.
            let mut head = head;
            head.framing = ResponseFraming::UntilClose;
            self.events.push_back(ClientEvent::Response {
                head,
                informational: false,
                end_stream: false,
            });
            // A tunnel carried as the exchange's body: the server's bytes
            // run to its close, within the window, as a body would.
            self.receiving = match self.tunnel {
                true => Receiving::UntilClose,
                false => Receiving::Upgraded,
            };
            return Ok(false);
        }
        if status == 101 {
            // Not asked for (the caller's `upgrade` and `connection`
            // fields are dropped from ordinary requests): the server is
            // out of step.
            return Err(Error::BadResponse(
                "101 Switching Protocols to a request without Upgrade",
            ));
        }
        if status < 200 {
            self.events.push_back(ClientEvent::Response {
                head,
                informational: true,
                end_stream: false,
            });
            return Ok(false);
        }
        self.closing |= !head.keep_alive;
        let framing = head.framing;
        let end_stream = matches!(
            framing,
            ResponseFraming::NoBody | ResponseFraming::Length(0)
        );
        self.events.push_back(ClientEvent::Response {
            head,
            informational: false,
            end_stream,
        });
        self.receiving = match framing {
            ResponseFraming::NoBody | ResponseFraming::Length(0) => {
                self.response_received();
                return Ok(true);
            }
            ResponseFraming::Length(n) => Receiving::Body(BodyDecoder::new(BodyFraming::Length(n))),
            ResponseFraming::Chunked => Receiving::Body(BodyDecoder::new(BodyFraming::Chunked)),
            ResponseFraming::UntilClose => Receiving::UntilClose,
        };
        Ok(false)
    }

    /// The server closed its side. A body that runs to the close ends here
    /// (call [`Self::recv`] with what the buffer still holds first); a
    /// response cut short is an error. The connection is closed either way.
    pub fn recv_eof(&mut self) -> Result<(), Error> {
        self.closing = true;
        if self.broken || self.response_done() {
            return Ok(());
        }
        if matches!(self.receiving, Receiving::UntilClose) && !self.stalled {
            self.events.push_back(ClientEvent::Data {
                data: Bytes::new(),
                end_stream: true,
            });
            self.response_received();
            return Ok(());
        }
        // A head or a framed body not complete, or one running to the
        // close whose last bytes the caller has not handed us.
        self.fail();
        Err(Error::ResponseTruncated)
    }

    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// `n` body bytes of the exchange in progress, handed out in
    /// [`ClientEvent::Data`], were consumed. Those of an earlier exchange
    /// no longer count once the next request is sent: drop their releases.
    pub fn release(&mut self, n: u32) {
        self.unreleased = self.unreleased.saturating_sub(u64::from(n));
    }

    /// Lets the exchange in progress have `n` more body bytes unreleased
    /// (as an HTTP/2 stream's window update would); the next exchange
    /// starts again from `body_window`.
    pub fn grant(&mut self, n: u32) {
        self.window = self.window.saturating_add(u64::from(n));
    }

    /// Whether to read the socket: a response still to come with room in
    /// its window and nothing left waiting in the buffer for that room,
    /// or an idle connection (so as to see the server close it, or fail on
    /// bytes nobody asked for).
    pub fn wants_input(&self) -> bool {
        if self.broken {
            return false;
        }
        match (&self.sending, &self.receiving) {
            (Sending::Idle, _) => !self.closing,
            (_, Receiving::Head) => true,
            (_, Receiving::Body(_) | Receiving::UntilClose) => {
                !self.stalled && self.unreleased < self.window
            }
            (_, Receiving::Done | Receiving::Upgraded) => false,
        }
    }

    /// Whether body bytes left in `buf` by the last [`Self::recv`] for
    /// want of window can be decoded now that the window opened: call
    /// `recv` again without reading.
    pub fn has_pending_input(&self, buf: &BytesMut) -> bool {
        self.stalled && !self.broken && !buf.is_empty() && self.unreleased < self.window
    }

    /// A 101 answered the upgrade this connection asked for: it is a
    /// tunnel now.
    pub fn is_upgraded(&self) -> bool {
        matches!(self.receiving, Receiving::Upgraded)
    }

    /// The caller gave up on the exchange (its client went away): HTTP/1.1
    /// cannot cancel one but by closing, so the connection takes nothing
    /// more.
    pub fn abort(&mut self) {
        self.fail();
    }

    fn fail(&mut self) {
        self.closing = true;
        self.broken = true;
        self.stalled = false;
    }

    fn push_data(&mut self, data: Bytes) {
        if data.len() < COPY_BELOW {
            self.out.put_slice(&data);
            return;
        }
        if !self.out.is_empty() {
            let before = self.out.split().freeze();
            self.queue.push_back(before);
        }
        self.queue.push_back(data);
    }

    fn request_sent(&mut self) {
        self.sending = Sending::Done;
        self.finish_if_done();
    }

    fn response_received(&mut self) {
        self.receiving = Receiving::Done;
        self.stalled = false;
        // An early response: the server may not read the rest of the
        // request, or may take it for the next one; the connection is in
        // an unknown state. A body whose bytes are all written (only its
        // end not yet told) is not early.
        if !matches!(self.sending, Sending::Done | Sending::Length(0)) {
            self.closing = true;
        }
        self.finish_if_done();
    }

    /// Both directions complete: the connection is idle again (or closing).
    fn finish_if_done(&mut self) {
        if self.sending == Sending::Done && matches!(self.receiving, Receiving::Done) {
            self.sending = Sending::Idle;
            self.receiving = Receiving::Head;
        }
    }
}

#[cfg(test)]
mod tests;
