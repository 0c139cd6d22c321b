//! An upstream connection's codec, HTTP/2 (`h2wire`) or HTTP/1.1 (`h1wire`), behind the calls the pool and the request phases make; an HTTP/1.1 exchange becomes the same stream and events as an HTTP/2 one.
//!
//! The request phases speak HTTP/2's model (streams, header lists with
//! pseudo-headers, body pieces released once taken, windows granted). An
//! HTTP/1.1 connection fits it as a connection that carries one stream at
//! a time (1, 3, 5, …), reused once both its request and its response are
//! complete. Its response body is held to a window like an HTTP/2 stream's:
//! past it the codec decodes nothing more and the pool stops reading the
//! socket, so a client that reads slowly holds back its own backend
//! connection and nothing else. Dispatch is a `match` per call, as for
//! the downstream codec.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use h2wire::conn::{ClientConfig, ClientConn, ClientEvent, SendError};
use h2wire::message::HeaderList;
use h2wire::ErrorCode;

use super::codec::{connection_named, push_lowercase};

/// HTTP/1.1's side: `h1wire`'s connection and the stream it carries now.
pub(crate) struct H1Up {
    conn: h1wire::client::ClientConn,
    /// The stream of the exchange in progress or last done (0: none yet).
    stream: u32,
    /// Response trailers are passed on (`enable_trailers`); else dropped,
    /// as Envoy does, and the response ends with its body.
    trailers: bool,
    events: VecDeque<ClientEvent>,
}

/// An upstream connection's codec.
// One per connection, in its pool slot; HTTP/2's is the larger, and the
// common case, so neither side is boxed.
#[allow(clippy::large_enum_variant)]
pub(crate) enum UpCodec {
    H2(ClientConn),
    H1(H1Up),
}

impl UpCodec {
    pub fn h2(cfg: ClientConfig) -> Self {
        UpCodec::H2(ClientConn::new(cfg))
    }

    /// An HTTP/1.1 codec holding at most `window` response body bytes not
    /// yet released (grants raise it per exchange, as for an HTTP/2
    /// stream), passing on response trailers when `trailers`.
    pub fn h1(window: u32, trailers: bool) -> Self {
        let cfg = h1wire::client::ClientConfig {
            body_window: window,
            ..Default::default()
        };
        UpCodec::H1(H1Up {
            conn: h1wire::client::ClientConn::new(cfg),
            stream: 0,
            trailers,
            events: VecDeque::new(),
        })
    }

    /// Opens a stream with a request head (see `h2wire`'s
    /// `ClientConn::send_request`). HTTP/1.1 writes `:authority` as
    /// `Host` and leaves out `:scheme` (the request line's target is the
    /// path); it refuses a second stream while one is open.
    pub fn send_request<'a>(
        &mut self,
        method: &[u8],
        scheme: &[u8],
        authority: &[u8],
        path: &[u8],
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8], bool)>,
        end_stream: bool,
    ) -> Result<u32, SendError> {
        match self {
            UpCodec::H2(c) => c.send_request(method, scheme, authority, path, fields, end_stream),
            UpCodec::H1(c) => {
                if !c.conn.is_idle() {
                    return Err(SendError::TooManyStreams);
                }
                c.conn
                    .send_request(method, path, authority, h1_fields(fields), end_stream)
                    .map_err(|_| SendError::GoingAway)?;
                Ok(c.next_stream())
            }
        }
    }

    /// Opens the one stream of an upgrade (WebSocket): an HTTP/1.1
    /// request asking to switch to `upgrade`, with no body. A 101 answers
    /// it with a response head that does not end; after it the
    /// connection is a tunnel (`is_upgraded`). HTTP/2 has no upgrades.
    pub fn send_upgrade<'a>(
        &mut self,
        method: &[u8],
        authority: &[u8],
        path: &[u8],
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8], bool)>,
        upgrade: &[u8],
    ) -> Result<u32, SendError> {
        let UpCodec::H1(c) = self else {
            return Err(SendError::GoingAway);
        };
        let fields = h1_fields(fields);
        c.conn
            .send_upgrade(method, path, authority, fields, upgrade)
            .map_err(|_| SendError::GoingAway)?;
        c.stream = 1;
        Ok(1)
    }

    /// Opens a stream whose body is an upgrade's tunnel (WebSocket over
    /// HTTP/2 from the client, RFC 8441): on HTTP/1.1 the upgrade request,
    /// the stream's data written as they are, a 101's bytes as its
    /// response body until the server closes; the connection then closes
    /// (it never goes back to the pool). On HTTP/2 an extended CONNECT
    /// (`:protocol` the upgrade), whose 200 opens the stream's tunnel on a
    /// connection shared as ever.
    pub fn send_upgrade_stream<'a>(
        &mut self,
        (method, scheme): (&[u8], &[u8]),
        authority: &[u8],
        path: &[u8],
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8], bool)>,
        upgrade: &[u8],
    ) -> Result<u32, SendError> {
        let c = match self {
            UpCodec::H2(c) => {
                return c.send_connect(authority, Some((upgrade, scheme, path)), fields);
            }
            UpCodec::H1(c) => c,
        };
        if !c.conn.is_idle() {
            return Err(SendError::TooManyStreams);
        }
        let fields = h1_fields(fields);
        c.conn
            .send_upgrade_tunnel(method, path, authority, fields, upgrade)
            .map_err(|_| SendError::GoingAway)?;
        Ok(c.next_stream())
    }

    /// Opens the one stream of a CONNECT to `authority`, sent on to the
    /// host (Envoy's CONNECT without `connect_config`): a 2xx answers it
    /// and the connection is a tunnel, as after an upgrade's 101.
    /// `tunnel`: its bytes are the stream's body (an HTTP/2 client's
    /// CONNECT), as for [`Self::send_upgrade_stream`]; else the caller
    /// takes the connection over (`is_upgraded`).
    pub fn send_connect<'a>(
        &mut self,
        authority: &[u8],
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8], bool)>,
        tunnel: bool,
    ) -> Result<u32, SendError> {
        let c = match self {
            // A stream of the connection, its DATA the tunnel's.
            UpCodec::H2(c) if tunnel => return c.send_connect(authority, None, fields),
            UpCodec::H2(_) => return Err(SendError::GoingAway),
            UpCodec::H1(c) => c,
        };
        if !c.conn.is_idle() {
            return Err(SendError::TooManyStreams);
        }
        let fields = h1_fields(fields);
        c.conn
            .send_connect(authority, fields, tunnel)
            .map_err(|_| SendError::GoingAway)?;
        Ok(c.next_stream())
    }

    /// Opens a stream that is a tunnel of raw bytes to the host, with no
    /// request (a CONNECT its route terminates, from an HTTP/2 client):
    /// its response is the gateway's own 200, given once the connection
    /// runs (after its connect, so a host down answers 503 instead).
    pub fn open_raw(&mut self) -> Result<u32, SendError> {
        let UpCodec::H1(c) = self else {
            return Err(SendError::GoingAway);
        };
        c.conn.open_raw().map_err(|_| SendError::TooManyStreams)?;
        let stream = c.next_stream();
        let mut head = HeaderList::pooled();
        head.push(b":status", b"200", false);
        c.events.push_back(ClientEvent::Response {
            stream,
            head,
            informational: false,
            end_stream: false,
        });
        Ok(stream)
    }

    /// Whether it speaks HTTP/2.
    pub fn is_h2(&self) -> bool {
        matches!(self, UpCodec::H2(_))
    }

    /// Events made without input wait (a raw tunnel's 200): the
    /// connection's task routes them without a read.
    pub fn has_events(&self) -> bool {
        match self {
            UpCodec::H2(_) => false,
            UpCodec::H1(c) => !c.events.is_empty(),
        }
    }

    /// A tunnel's sender ended and its bytes are out: the socket's write
    /// side is to be shut.
    pub fn wants_write_shut(&self) -> bool {
        match self {
            UpCodec::H2(_) => false,
            UpCodec::H1(c) => c.conn.wants_write_shut(),
        }
    }

    /// A 101 answered this connection's upgrade: it is a tunnel now.
    pub fn is_upgraded(&self) -> bool {
        match self {
            UpCodec::H2(_) => false,
            UpCodec::H1(c) => c.conn.is_upgraded(),
        }
    }

    pub fn send_data(
        &mut self,
        stream: u32,
        data: &mut Bytes,
        end_stream: bool,
    ) -> Result<usize, SendError> {
        match self {
            UpCodec::H2(c) => c.send_data(stream, data, end_stream),
            UpCodec::H1(c) if stream == c.stream => c
                .conn
                .send_data(data, end_stream)
                .map_err(|_| SendError::Ended),
            UpCodec::H1(_) => Err(SendError::UnknownStream),
        }
    }

    /// Ends the request with trailers; without `enable_trailers` an
    /// HTTP/1.1 request ends without them (Envoy drops them too).
    pub fn send_trailers<'a>(
        &mut self,
        stream: u32,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) -> Result<(), SendError> {
        match self {
            UpCodec::H2(c) => c.send_trailers(stream, fields),
            UpCodec::H1(c) if stream == c.stream => {
                let r = if c.trailers {
                    c.conn.send_trailers(fields)
                } else {
                    c.conn.send_data(&mut Bytes::new(), true).map(|_| ())
                };
                r.map_err(|_| SendError::Ended)
            }
            UpCodec::H1(_) => Err(SendError::UnknownStream),
        }
    }

    /// Cancels a stream. HTTP/1.1 cannot cancel an exchange but by closing
    /// the connection: it takes no more requests and closes once the pool
    /// sees it has no streams. False: nothing was sent to the server (an
    /// HTTP/1.1 cancel costs the server nothing that counts against us).
    pub fn reset(&mut self, stream: u32, code: ErrorCode) -> bool {
        match self {
            UpCodec::H2(c) => c.reset(stream, code),
            UpCodec::H1(c) => {
                if stream == c.stream && !c.conn.is_idle() {
                    c.conn.abort();
                }
                false
            }
        }
    }

    /// `n` response body bytes of `stream` were taken. Bytes of an earlier
    /// HTTP/1.1 exchange no longer count against this one's window.
    pub fn release(&mut self, stream: u32, n: u32) {
        match self {
            UpCodec::H2(c) => c.release(stream, n),
            UpCodec::H1(c) if stream == c.stream => c.conn.release(n),
            UpCodec::H1(_) => {}
        }
    }

    /// Lets `stream`'s response have `n` more bytes in flight.
    pub fn grant(&mut self, stream: u32, n: u32) -> bool {
        match self {
            UpCodec::H2(c) => c.grant(stream, n),
            UpCodec::H1(c) if stream == c.stream && !c.conn.response_done() => {
                c.conn.grant(n);
                true
            }
            UpCodec::H1(_) => false,
        }
    }

    /// Gives a header list from an event back for the next response.
    pub fn recycle(&mut self, list: HeaderList) {
        match self {
            UpCodec::H2(c) => c.recycle(list),
            UpCodec::H1(_) => list.recycle(),
        }
    }

    /// Takes what it can of `buf`; an error breaks the connection (HTTP/2
    /// has queued its GOAWAY; an HTTP/1.1 stream has been told with a
    /// reset).
    pub fn recv(&mut self, buf: &mut BytesMut) -> Result<(), ()> {
        match self {
            UpCodec::H2(c) => c.recv(buf).map_err(drop),
            UpCodec::H1(c) => {
                let r = c.conn.recv(buf);
                c.convert();
                r.map_err(|e| {
                    tracing::debug!(stream = c.stream, "malformed HTTP/1.1 response: {e}");
                    c.broken(e.status() == 431)
                })
            }
        }
    }

    /// The server closed the connection: an HTTP/1.1 body that runs to
    /// the close ends here. `Err`: an exchange was cut short (its stream
    /// learns it as a lost connection).
    pub fn recv_eof(&mut self) -> Result<(), ()> {
        match self {
            UpCodec::H2(_) => Err(()),
            UpCodec::H1(c) => {
                let r = c.conn.recv_eof();
                c.convert();
                r.map_err(drop)
            }
        }
    }

    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        match self {
            UpCodec::H2(c) => c.poll_event(),
            UpCodec::H1(c) => c.events.pop_front(),
        }
    }

    pub fn poll_output(&mut self) -> Option<Bytes> {
        match self {
            UpCodec::H2(c) => c.poll_output(),
            UpCodec::H1(c) => c.conn.poll_output(),
        }
    }

    pub fn has_output(&self) -> bool {
        match self {
            UpCodec::H2(c) => c.has_output(),
            UpCodec::H1(c) => c.conn.has_output(),
        }
    }

    pub fn open_streams(&self) -> usize {
        match self {
            UpCodec::H2(c) => c.open_streams(),
            UpCodec::H1(c) => usize::from(!c.conn.is_idle() && !c.conn.is_closing()),
        }
    }

    pub fn can_open_stream(&self) -> bool {
        match self {
            UpCodec::H2(c) => c.can_open_stream(),
            UpCodec::H1(c) => c.conn.is_idle(),
        }
    }

    /// Whether to read the socket: an HTTP/1.1 response whose window is
    /// full waits in the socket.
    pub fn wants_input(&self) -> bool {
        match self {
            UpCodec::H2(_) => true,
            UpCodec::H1(c) => c.conn.wants_input(),
        }
    }

    /// Whether bytes already read (`buf`) can be decoded now, without a
    /// read: an HTTP/1.1 window that opened again.
    pub fn has_pending_input(&self, buf: &BytesMut) -> bool {
        match self {
            UpCodec::H2(_) => false,
            UpCodec::H1(c) => c.conn.has_pending_input(buf),
        }
    }

    /// The connection takes no new stream and closes once its streams end:
    /// an HTTP/1.1 server said `Connection: close`, a body ran to the
    /// close, or an exchange was cancelled.
    pub fn is_closing(&self) -> bool {
        match self {
            UpCodec::H2(_) => false,
            UpCodec::H1(c) => c.conn.is_closing(),
        }
    }
}

impl H1Up {
    /// The next exchange's stream id (1, 3, 5, …), now the current one.
    fn next_stream(&mut self) -> u32 {
        self.stream = if self.stream == 0 { 1 } else { self.stream + 2 };
        self.stream
    }

    /// Turns what `h1wire` decoded into HTTP/2's events.
    fn convert(&mut self) {
        use h1wire::client::ClientEvent as E;
        let stream = self.stream;
        while let Some(ev) = self.conn.poll_event() {
            let ev = match ev {
                E::Response {
                    head,
                    informational,
                    end_stream,
                } => ClientEvent::Response {
                    stream,
                    head: response_list(&head),
                    informational,
                    end_stream,
                },
                E::Data { data, end_stream } => ClientEvent::Data {
                    stream,
                    data,
                    end_stream,
                },
                E::Trailers { raw } if self.trailers => {
                    let mut fields = HeaderList::pooled();
                    for (name, value) in h1wire::trailer_fields(&raw) {
                        push_lowercase(&mut fields, name, value);
                    }
                    ClientEvent::Trailers { stream, fields }
                }
                E::Trailers { .. } => ClientEvent::Data {
                    stream,
                    data: Bytes::new(),
                    end_stream: true,
                },
            };
            self.events.push_back(ev);
        }
    }

    /// The response was malformed: its stream is reset (a head over the
    /// limit as HTTP/2's `TooLarge`), and the connection is done.
    fn broken(&mut self, too_large: bool) {
        let stream = self.stream;
        if stream == 0 {
            return;
        }
        self.events.push_back(if too_large {
            ClientEvent::TooLarge { stream }
        } else {
            ClientEvent::Broken {
                stream,
                code: ErrorCode::PROTOCOL_ERROR,
            }
        });
    }
}

/// A request's fields as HTTP/1.1 writes them: without `te`, HTTP/2's
/// way of saying trailers are understood (on HTTP/1.1 it is hop-by-hop),
/// and without HPACK's never-index flag.
fn h1_fields<'a>(
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8], bool)>,
) -> impl Iterator<Item = (&'a [u8], &'a [u8])> {
    fields
        .into_iter()
        .filter(|(n, _, _)| *n != b"te")
        .map(|(n, v, _)| (n, v))
}

/// A response head as HTTP/2 would have it: `:status`, then the fields in
/// lowercase, without those for this hop alone: the fixed hop-by-hop list
/// (stripped where responses go downstream) and those `Connection` names.
fn response_list(head: &h1wire::client::ResponseHead) -> HeaderList {
    let mut list = HeaderList::pooled();
    list.push(b":status", &status_digits(head.status()), false);
    let named = connection_named(head.fields());
    // A length that does not frame the body (chunked, or with the
    // close) would be wrong downstream: left out.
    let length_frames = !matches!(
        head.framing,
        h1wire::client::ResponseFraming::Chunked | h1wire::client::ResponseFraming::UntilClose
    );
    for (name, value) in head.fields() {
        if named.iter().any(|t| t.eq_ignore_ascii_case(name))
            || (!length_frames && name.eq_ignore_ascii_case(b"content-length"))
        {
            continue;
        }
        push_lowercase(&mut list, name, value);
    }
    list
}

/// A status code's three digits.
fn status_digits(status: u16) -> [u8; 3] {
    let s = status.min(999);
    [
        b'0' + (s / 100) as u8,
        b'0' + (s / 10 % 10) as u8,
        b'0' + (s % 10) as u8,
    ]
}
