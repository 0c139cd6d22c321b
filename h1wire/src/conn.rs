//! One HTTP/1.1 server connection as a state machine: bytes in, one request's head and body out at a time; its response encoded, then the next request.
//!
//! HTTP/1.1 has one exchange at a time on a connection: responses must
//! leave in the order the requests came (RFC 9112 §9.3.2). A pipelining
//! client's next request therefore waits, unparsed, in the caller's
//! buffer until the current response is complete, as in Envoy; the caller
//! stops reading once that buffer holds [`ServerConn::wants_input`]'s
//! bound, so a client cannot queue unbounded requests.
//!
//! Request bodies have no window of their own: the connection hands out
//! at most `body_window` bytes the caller has not yet
//! [released](ServerConn::release), and the rest waits in the socket. That
//! is how a slow upstream slows an HTTP/1.1 uploader, as HTTP/2's windows
//! do.
//!
//! Streams are numbered 1, 3, 5, … like a client's HTTP/2 streams, so the
//! caller can keep one table for both protocols.

use std::collections::VecDeque;

use bytes::{BufMut, Bytes, BytesMut};

use crate::body::{BodyDecoder, BodyEvent};
use crate::encode::{self, ResponseFraming};
use crate::error::Error;
use crate::head::Version;
use crate::head::{parse_request_head, BodyFraming, Limits, RequestHead};

/// Unparsed request bytes a connection holds at most before it stops
/// reading its socket (a pipelining client's queue): the default head
/// limit plus a little.
pub const MAX_BUFFERED_INPUT: usize = 64 * 1024;

/// A connection's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerConfig {
    pub limits: Limits,
    /// Request body bytes handed out and not yet released beyond which no
    /// more are decoded.
    pub body_window: u32,
    /// Serve HTTP/1.0 requests (Envoy's `accept_http_10`); otherwise they
    /// are answered 426.
    pub accept_http_10: bool,
    /// The connection's own refusals (400, 408, 413, 431, …) are left to
    /// the caller to write ([`ServerConn::pending_refusal`],
    /// [`ServerConn::write_refusal`]), which may shape them; otherwise
    /// they are written as they happen.
    pub caller_writes_refusals: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            body_window: 64 * 1024,
            accept_http_10: false,
            caller_writes_refusals: false,
        }
    }
}

/// What the connection received, in order.
#[derive(Debug)]
pub enum Event {
    /// A new request; `end_stream`: it has no body.
    Request {
        stream: u32,
        head: RequestHead,
        end_stream: bool,
    },
    /// Request body bytes (`end_stream`: the last of them; the data may
    /// then be empty). Hand their count to [`ServerConn::release`] once
    /// consumed.
    Data {
        stream: u32,
        data: Bytes,
        end_stream: bool,
    },
    /// The trailer section of a chunked request body (raw field lines; see
    /// [`crate::trailer_fields`]); it ends the request.
    Trailers { stream: u32, raw: Bytes },
}

/// A response command the exchange's state does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    #[error("no request is waiting for a response on this stream")]
    UnknownStream,
    #[error("response head already sent")]
    HeadersSent,
    #[error("response head not sent yet")]
    NoHeaders,
    #[error("response already complete")]
    Ended,
}

/// Where the request side stands.
#[derive(Debug)]
enum Reading {
    /// Waiting for the next request head (none in progress).
    Head,
    Body(BodyDecoder),
    /// The request is complete; the next waits for its response.
    Done,
    /// No more requests on this connection.
    Closed,
}

/// Where the response of the current exchange stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Writing {
    Head,
    Body(ResponseFraming),
    Done,
}

/// The current exchange.
#[derive(Debug, Clone, Copy)]
struct Exchange {
    stream: u32,
    version: Version,
    head_request: bool,
    /// The request allows another after it (and we have not decided to
    /// close).
    keep_alive: bool,
    writing: Writing,
}

/// The server side of one HTTP/1.1 connection.
#[derive(Debug)]
pub struct ServerConn {
    cfg: ServerConfig,
    reading: Reading,
    exchange: Option<Exchange>,
    last_stream: u32,
    /// Body bytes handed out and not yet released.
    unreleased: u64,
    /// Stop after the current exchange (drain, idle timeout, errors).
    going_away: bool,
    events: VecDeque<Event>,
    out: BytesMut,
    /// Requests parsed, for the caller's counters.
    requests: u64,
    /// A 101 answered the current request (`send_switching`).
    upgraded: bool,
    /// The status of the refusal written since the caller last asked.
    refused: Option<u16>,
    /// A refusal the caller is to write (`caller_writes_refusals`), and
    /// the version to write it in.
    pending_refusal: Option<(u16, Version)>,
    /// The version of the last request taken.
    version: Version,
}

impl ServerConn {
    pub fn new(cfg: ServerConfig) -> Self {
        Self {
            cfg,
            reading: Reading::Head,
            exchange: None,
            last_stream: 0,
            unreleased: 0,
            going_away: false,
            events: VecDeque::new(),
            out: BytesMut::new(),
            requests: 0,
            upgraded: false,
            refused: None,
            pending_refusal: None,
            version: Version::Http11,
        }
    }

    /// Takes what it can from the front of `buf`: the next request head
    /// (once the previous exchange is over) and body bytes (within the
    /// body window). Bytes it cannot take yet stay in `buf`; call again
    /// with them when the response completes or bytes are released, also
    /// when nothing new was read. On an error the answer (4xx/5xx,
    /// `connection: close`) is queued in the output when no response had
    /// started, and the connection is closed: write the output, then close.
    pub fn recv(&mut self, buf: &mut BytesMut) -> Result<(), Error> {
        let r = self.take(buf);
        if let Err(e) = &r {
            self.refuse(e.status());
        }
        r
    }

    fn take(&mut self, buf: &mut BytesMut) -> Result<(), Error> {
        loop {
            match &mut self.reading {
                Reading::Closed | Reading::Done => return Ok(()),
                Reading::Head => {
                    if self.exchange.is_some() || self.going_away {
                        return Ok(());
                    }
                    let Some(head) = parse_request_head(buf, &self.cfg.limits)? else {
                        return Ok(());
                    };
                    self.start(head)?;
                }
                Reading::Body(decoder) => {
                    if self.unreleased >= u64::from(self.cfg.body_window) {
                        return Ok(());
                    }
                    let stream = self.last_stream;
                    let Some(first) = decoder.decode(buf, &self.cfg.limits)? else {
                        return Ok(());
                    };
                    let ended = match first {
                        BodyEvent::Data(data) => {
                            self.unreleased += data.len() as u64;
                            // A body that ends right here ends with its last
                            // bytes, not with an empty piece after them.
                            let next = decoder.decode(buf, &self.cfg.limits)?;
                            let end_stream = next == Some(BodyEvent::End);
                            self.events.push_back(Event::Data {
                                stream,
                                data,
                                end_stream,
                            });
                            match next {
                                Some(BodyEvent::Data(more)) => {
                                    self.unreleased += more.len() as u64;
                                    self.events.push_back(Event::Data {
                                        stream,
                                        data: more,
                                        end_stream: false,
                                    });
                                    false
                                }
                                Some(BodyEvent::Trailers(raw)) => {
                                    self.events.push_back(Event::Trailers { stream, raw });
                                    ends_after_trailers(decoder, buf, &self.cfg.limits)?
                                }
                                Some(BodyEvent::End) => true,
                                None => false,
                            }
                        }
                        BodyEvent::Trailers(raw) => {
                            self.events.push_back(Event::Trailers { stream, raw });
                            ends_after_trailers(decoder, buf, &self.cfg.limits)?
                        }
                        BodyEvent::End => {
                            self.events.push_back(Event::Data {
                                stream,
                                data: Bytes::new(),
                                end_stream: true,
                            });
                            true
                        }
                    };
                    if ended {
                        self.request_done();
                    }
                }
            }
        }
    }

    /// A request head arrived: the exchange begins.
    fn start(&mut self, head: RequestHead) -> Result<(), Error> {
        if head.version == Version::Http10 && !self.cfg.accept_http_10 {
            return Err(Error::Http10NotAccepted);
        }
        self.requests += 1;
        self.version = head.version;
        self.last_stream = next_stream_id(self.last_stream);
        let stream = self.last_stream;
        let bodyless = matches!(head.framing, BodyFraming::None | BodyFraming::Length(0));
        if head.expect_continue && !bodyless {
            // The client waits for this before sending its body; we are
            // about to read it, so say so now (Envoy answers 100 itself
            // unless `proxy_100_continue` is set).
            encode::continue_100(&mut self.out);
        }
        self.exchange = Some(Exchange {
            stream,
            version: head.version,
            head_request: head.method() == b"HEAD",
            keep_alive: head.keep_alive,
            writing: Writing::Head,
        });
        self.reading = if bodyless {
            Reading::Done
        } else {
            Reading::Body(BodyDecoder::new(head.framing))
        };
        self.events.push_back(Event::Request {
            stream,
            head,
            end_stream: bodyless,
        });
        Ok(())
    }

    fn request_done(&mut self) {
        self.reading = Reading::Done;
        if self.exchange.is_some_and(|x| x.writing == Writing::Done) {
            self.exchange_done();
        }
    }

    /// Both sides of the exchange are complete: ready for the next request,
    /// or closed.
    fn exchange_done(&mut self) {
        let keep = self.exchange.take().is_some_and(|x| x.keep_alive);
        self.reading = if keep && !self.going_away {
            Reading::Head
        } else {
            Reading::Closed
        };
    }

    /// The response ended.
    fn response_done(&mut self) {
        let Some(x) = self.exchange.as_mut() else {
            return;
        };
        x.writing = Writing::Done;
        match self.reading {
            Reading::Done => self.exchange_done(),
            // The answer came before the whole request (a local reply, an
            // upstream that answered early): the rest of the body would be
            // read as the next request, so the connection ends here.
            Reading::Body(_) => self.reading = Reading::Closed,
            Reading::Head | Reading::Closed => {}
        }
    }

    /// Answers `status` ourselves (a request refused before or instead of
    /// its response) and closes. Nothing is written when a response has
    /// already begun: the connection just closes.
    fn refuse(&mut self, status: u16) {
        let started = self.exchange.is_some_and(|x| x.writing != Writing::Head);
        if !started {
            let version = self.exchange.map_or(Version::Http11, |x| x.version);
            match self.cfg.caller_writes_refusals {
                true => self.pending_refusal = Some((status, version)),
                false => {
                    let body = encode::reason(status).as_bytes();
                    let fields = [(&b"content-type"[..], &b"text/plain"[..])];
                    self.write_refusal_in(version, status, fields, body);
                }
            }
            self.refused = Some(status);
        }
        self.exchange = None;
        self.reading = Reading::Closed;
    }

    /// A refusal's answer, `connection: close` and framed by its length.
    fn write_refusal_in<'a>(
        &mut self,
        version: Version,
        status: u16,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        body: &[u8],
    ) {
        encode::response_head(
            &mut self.out,
            version,
            status,
            fields,
            ResponseFraming::Length(body.len() as u64),
            false,
        );
        self.out.put_slice(body);
    }

    /// The refusal the caller is to write (`caller_writes_refusals`): its
    /// status, once.
    pub fn pending_refusal(&self) -> Option<u16> {
        self.pending_refusal.map(|(status, _)| status)
    }

    /// Writes the pending refusal as `status` with `fields` (their own
    /// framing fields skipped) and `body`, then the connection is closed.
    /// A no-op when none is pending.
    pub fn write_refusal<'a>(
        &mut self,
        status: u16,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        body: &[u8],
    ) {
        if let Some((_, version)) = self.pending_refusal.take() {
            self.write_refusal_in(version, status, fields, body);
        }
    }

    /// Refuses the current request with `status` (and closes), as
    /// [`Self::recv`] does for the requests it cannot parse: for checks
    /// the caller makes on a head it was given.
    pub fn reject(&mut self, status: u16) {
        self.refuse(status);
    }

    fn exchange_for(&mut self, stream: u32) -> Result<&mut Exchange, SendError> {
        match self.exchange.as_mut() {
            Some(x) if x.stream == stream => Ok(x),
            _ => Err(SendError::UnknownStream),
        }
    }

    /// Writes the response head. `fields` are the response's own (names in
    /// lowercase); hop-by-hop ones are skipped and the framing is chosen
    /// here: the upstream's `content-length` when it gave one, else chunked
    /// (HTTP/1.1) or until close (HTTP/1.0). A 1xx status is written as an
    /// interim response to an HTTP/1.1 request (none to HTTP/1.0).
    pub fn send_headers<'a>(
        &mut self,
        stream: u32,
        status: u16,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        end_stream: bool,
    ) -> Result<(), SendError> {
        let going_away = self.going_away;
        let request_done = matches!(self.reading, Reading::Done);
        let mut x = *self.exchange_for(stream)?;
        if x.writing != Writing::Head {
            return Err(SendError::HeadersSent);
        }
        let out = &mut self.out;
        if status < 200 {
            if x.version == Version::Http11 && status != 101 {
                encode::status_line(out, Version::Http11, status);
                encode::fields(out, fields);
                out.put_slice(b"\r\n");
            }
            return Ok(());
        }
        // A response that may end before the request does closes the
        // connection: say so while it is still possible.
        x.keep_alive &= !going_away && (request_done || !end_stream);
        encode::status_line(out, x.version, status);
        let length = encode::fields(out, fields);
        let framing = if end_stream && length.is_none() {
            ResponseFraming::choose(x.version, x.head_request, status, Some(0))
        } else {
            ResponseFraming::choose(x.version, x.head_request, status, length)
        };
        if framing == ResponseFraming::NoBody {
            // HEAD and 304 announce the length of what GET would send.
            if let Some(n) = length.filter(|_| status != 204) {
                encode::content_length(out, n);
            }
        }
        x.keep_alive &= framing.allows_keep_alive();
        encode::framing_fields(out, x.version, framing, x.keep_alive);
        x.writing = Writing::Body(framing);
        self.exchange = Some(x);
        if end_stream {
            self.end_body(framing);
        }
        Ok(())
    }

    /// Answers the current request with a switch to a tunnel: 101
    /// Switching Protocols to `upgrade` (RFC 9110 §15.2.2), or a 2xx to a
    /// CONNECT (`upgrade` none; §9.3.6: no framing fields, the tunnel's
    /// bytes follow). `fields` (hop-by-hop ones skipped) go in the head,
    /// then for a 101 `connection: upgrade` and `upgrade`. The connection
    /// is then the caller's: it takes and writes nothing more, and the
    /// bytes after the request's head are left in the caller's buffer.
    pub fn send_switching<'a>(
        &mut self,
        stream: u32,
        status: u16,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        upgrade: Option<&[u8]>,
    ) -> Result<(), SendError> {
        let x = *self.exchange_for(stream)?;
        if x.writing != Writing::Head {
            return Err(SendError::HeadersSent);
        }
        encode::status_line(&mut self.out, Version::Http11, status);
        encode::fields(&mut self.out, fields);
        if let Some(upgrade) = upgrade {
            self.out.put_slice(b"connection: upgrade\r\nupgrade: ");
            self.out.put_slice(upgrade);
            self.out.put_slice(b"\r\n");
        }
        self.out.put_slice(b"\r\n");
        self.exchange = None;
        self.reading = Reading::Closed;
        self.upgraded = true;
        Ok(())
    }

    /// A 101 (or a CONNECT's 2xx) went: the connection is a tunnel now.
    pub fn is_upgraded(&self) -> bool {
        self.upgraded
    }

    /// Writes body bytes: all of `data` is taken (HTTP/1.1 has no window;
    /// the caller bounds what it has unwritten). Returns the count.
    pub fn send_data(
        &mut self,
        stream: u32,
        data: &mut Bytes,
        end_stream: bool,
    ) -> Result<usize, SendError> {
        let framing = self.body_framing(stream)?;
        let data = std::mem::take(data);
        match framing {
            ResponseFraming::Chunked => encode::chunk(&mut self.out, &data),
            ResponseFraming::Length(_) | ResponseFraming::UntilClose => {
                self.out.extend_from_slice(&data)
            }
            ResponseFraming::NoBody => {}
        }
        if end_stream {
            self.end_body(framing);
        }
        Ok(data.len())
    }

    /// Ends the response with trailer fields (sent only in a chunked body;
    /// other framings have no place for them).
    pub fn send_trailers<'a>(
        &mut self,
        stream: u32,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) -> Result<(), SendError> {
        let framing = self.body_framing(stream)?;
        if framing == ResponseFraming::Chunked {
            encode::last_chunk(&mut self.out, fields);
            self.response_done();
        } else {
            self.end_body(framing);
        }
        Ok(())
    }

    fn body_framing(&mut self, stream: u32) -> Result<ResponseFraming, SendError> {
        match self.exchange_for(stream)?.writing {
            Writing::Head => Err(SendError::NoHeaders),
            Writing::Body(f) => Ok(f),
            Writing::Done => Err(SendError::Ended),
        }
    }

    fn end_body(&mut self, framing: ResponseFraming) {
        if framing == ResponseFraming::Chunked {
            encode::last_chunk(&mut self.out, []);
        }
        self.response_done();
    }

    /// The response cannot be completed (its upstream failed midway):
    /// HTTP/1.1 has no stream reset, so the connection closes, and the
    /// client sees a truncated body.
    pub fn reset(&mut self, stream: u32) {
        if self.exchange.is_some_and(|x| x.stream == stream) {
            self.exchange = None;
            self.reading = Reading::Closed;
        }
    }

    /// Gives back `n` body bytes handed out in [`Event::Data`].
    pub fn release(&mut self, n: u32) {
        self.unreleased = self.unreleased.saturating_sub(u64::from(n));
    }

    /// Takes no request after the current one (drain, idle timeout):
    /// its response says `connection: close` if not yet begun. With no
    /// request in progress the connection is over at once.
    pub fn go_away(&mut self) {
        self.going_away = true;
        match self.exchange.as_mut() {
            Some(x) => x.keep_alive = false,
            None => self.reading = Reading::Closed,
        }
    }

    /// The connection takes nothing more: close it once the output is
    /// written.
    pub fn is_closed(&self) -> bool {
        matches!(self.reading, Reading::Closed)
    }

    /// Whether the caller should read more from the socket, holding
    /// `buffered` unparsed bytes: yes while they are below the bound, or
    /// while the request body is flowing; not when the connection is
    /// closed.
    pub fn wants_input(&self, buffered: usize) -> bool {
        // Never below what a head (or trailer section) may take, or one
        // larger than the bound would wait for bytes never read.
        let bound = MAX_BUFFERED_INPUT.max(self.cfg.limits.max_head_bytes + 1);
        match &self.reading {
            Reading::Closed => false,
            Reading::Body(_) => {
                buffered < bound || self.unreleased < u64::from(self.cfg.body_window)
            }
            Reading::Head | Reading::Done => buffered < bound,
        }
    }

    /// The status of the refusal answered since the last call (by
    /// [`Self::recv`] or [`Self::reject`]), if one was written: a refusal
    /// after a response began writes nothing.
    pub fn take_refusal(&mut self) -> Option<u16> {
        self.refused.take()
    }

    /// Whether [`Self::recv`] would take bytes now: a next request head
    /// (no exchange in progress), or body bytes within the window. The
    /// caller calls it again with what it holds when this turns true
    /// without a read (a response completed, body bytes released).
    pub fn can_take(&self) -> bool {
        match &self.reading {
            Reading::Head => self.exchange.is_none() && !self.going_away,
            Reading::Body(_) => self.unreleased < u64::from(self.cfg.body_window),
            Reading::Done | Reading::Closed => false,
        }
    }

    /// The HTTP version of the last request taken (HTTP/1.1 before any).
    pub fn version(&self) -> Version {
        self.version
    }

    /// Requests parsed so far.
    pub fn requests(&self) -> u64 {
        self.requests
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// What to write to the socket, if anything.
    pub fn poll_output(&mut self) -> Option<Bytes> {
        (!self.out.is_empty()).then(|| self.out.split().freeze())
    }

    /// Gives back buffers a burst grew.
    pub fn shrink(&mut self) {
        if self.out.is_empty() {
            self.out = BytesMut::new();
        }
        self.events.shrink_to_fit();
    }
}

/// The end that follows a trailer section: the decoder gives trailers
/// only once the section's empty line is in the buffer, so it is there
/// (taken now, so that no empty data piece follows the trailers later).
fn ends_after_trailers(
    decoder: &mut BodyDecoder,
    buf: &mut BytesMut,
    limits: &Limits,
) -> Result<bool, Error> {
    Ok(decoder.decode(buf, limits)? == Some(BodyEvent::End))
}

/// The id after `last` for an exchange: odd, as HTTP/2's client streams,
/// and below 2^31 as they are (a proxy keys other things above), wrapping
/// to 1 there.
fn next_stream_id(last: u32) -> u32 {
    match last.checked_add(2) {
        Some(next) if last != 0 && next < 1 << 31 => next,
        _ => 1,
    }
}

#[cfg(test)]
mod tests;
