//! One stream of an HTTP/2 connection made for it alone, as a byte pipe: an HTTP/1.1 client's upgrade (or CONNECT) sent to an HTTP/2 host as an extended CONNECT (RFC 8441) becomes a tunnel whose backend side is the stream's DATA, under its flow control.
//!
//! [`H2Stream`] is the backend side [`tunnel`](super::tunnel) moves bytes
//! to and from, as it does a plain connection: a read gives the stream's
//! DATA (its window given back as the tunnel takes it), a write sends
//! DATA within the stream's window (a write waits for the host's
//! WINDOW_UPDATE as a socket write waits for room), a close sends
//! END_STREAM. The connection's own frames (SETTINGS, PING, WINDOW_UPDATE)
//! are answered as they come, whichever way bytes move.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures_lite::{AsyncRead, AsyncWrite};
use h2wire::conn::ClientEvent;

use super::readbuf::ReadBuf;
use super::tls::Transport;
use super::upcodec::UpCodec;

/// Bytes asked of the connection per read.
const READ_SIZE: usize = 16 * 1024;
/// What the stream's window grows by once it opens, beyond the pool's
/// initial one (sized for requests' answers): the host's bytes in flight,
/// bounded, and enough for a tunnel's throughput.
const TUNNEL_WINDOW: u32 = 64 * 1024;

/// An HTTP/2 stream as a tunnel's backend side.
pub(super) struct H2Stream<'t> {
    io: &'t mut Transport,
    codec: UpCodec,
    stream: u32,
    /// Read from the connection, not yet taken by the codec.
    input: ReadBuf,
    /// The codec's output being written.
    output: Option<Bytes>,
    /// The stream's DATA not yet read by the tunnel.
    data: Bytes,
    /// The host ended its side (END_STREAM, or the connection closed
    /// and the stream's last DATA was read).
    eof: bool,
    /// The connection closed.
    gone: bool,
    /// END_STREAM went.
    closed: bool,
    /// A write waits for the host's WINDOW_UPDATE: a read that takes one
    /// in wakes it (the two directions share the connection's reads).
    window_wait: bool,
}

impl<'t> H2Stream<'t> {
    /// `stream` of `codec` over `io`, once its answer came; `input`: bytes
    /// read after that answer, for the codec (the stream's first DATA may
    /// be in them, or already in the codec's events).
    pub fn new(io: &'t mut Transport, mut codec: UpCodec, stream: u32, input: BytesMut) -> Self {
        // Sent with the first output.
        codec.grant(stream, TUNNEL_WINDOW);
        Self {
            io,
            codec,
            stream,
            input: {
                let mut rb = ReadBuf::default();
                rb.buf = input;
                rb
            },
            output: None,
            data: Bytes::new(),
            eof: false,
            gone: false,
            closed: false,
            window_wait: false,
        }
    }

    /// Writes the codec's output; `Pending` while the socket takes no
    /// more.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            let Some(out) = self.output.take().or_else(|| self.codec.poll_output()) else {
                return Poll::Ready(Ok(()));
            };
            match Pin::new(&mut *self.io).poll_write(cx, &out) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) if n < out.len() => self.output = Some(out.slice(n..)),
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {
                    self.output = Some(out);
                    return Poll::Pending;
                }
            }
        }
    }

    /// Takes the codec's events: the stream's DATA for the reader, its
    /// end; a reset, a connection error or a refusal fails the tunnel.
    fn take_events(&mut self) -> io::Result<()> {
        while self.data.is_empty() && !self.eof {
            let Some(ev) = self.codec.poll_event() else {
                return Ok(());
            };
            match ev {
                ClientEvent::Data {
                    stream,
                    data,
                    end_stream,
                } if stream == self.stream => {
                    self.data = data;
                    self.eof = end_stream;
                }
                ClientEvent::Trailers { stream, .. } if stream == self.stream => self.eof = true,
                ClientEvent::Reset { stream, .. }
                | ClientEvent::Broken { stream, .. }
                | ClientEvent::TooLarge { stream }
                    if stream == self.stream =>
                {
                    return Err(io::ErrorKind::ConnectionReset.into());
                }
                ClientEvent::GoAway { last_stream, .. } if last_stream < self.stream => {
                    return Err(io::ErrorKind::ConnectionAborted.into());
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Reads from the connection into the codec: `Ready` once something
    /// came (or the connection ended), `Pending` when nothing is there.
    fn poll_input(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let room = self.input.room(READ_SIZE);
        let n = match Pin::new(&mut *self.io).poll_read(cx, room) {
            Poll::Ready(Ok(n)) => n,
            Poll::Ready(Err(e)) => {
                self.input.filled(0);
                return Poll::Ready(Err(e));
            }
            Poll::Pending => {
                self.input.filled(0);
                return Poll::Pending;
            }
        };
        self.input.filled(n);
        let buf = &mut self.input.buf;
        let fed = match n {
            0 => {
                self.gone = true;
                self.codec.recv(buf).and_then(|()| self.codec.recv_eof())
            }
            _ => self.codec.recv(buf),
        };
        match fed {
            Ok(()) => Poll::Ready(Ok(())),
            Err(()) => Poll::Ready(Err(io::ErrorKind::InvalidData.into())),
        }
    }
}

impl AsyncRead for H2Stream<'_> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            this.take_events()?;
            if !this.data.is_empty() {
                let n = this.data.len().min(buf.len());
                buf[..n].copy_from_slice(&this.data[..n]);
                let _ = this.data.split_to(n);
                // Taken: its window goes back (a WINDOW_UPDATE, sent now
                // or with the next output).
                this.codec.release(this.stream, n as u32);
                if let Poll::Ready(Err(e)) = this.poll_send(cx) {
                    return Poll::Ready(Err(e));
                }
                return Poll::Ready(Ok(n));
            }
            // Its events all taken: a connection that closed ends it.
            this.eof |= this.gone;
            if this.eof {
                return Poll::Ready(Ok(0));
            }
            // The connection's own frames are answered while waiting.
            if let Poll::Ready(Err(e)) = this.poll_send(cx) {
                return Poll::Ready(Err(e));
            }
            match this.poll_input(cx) {
                Poll::Ready(Ok(())) => {
                    if std::mem::take(&mut this.window_wait) {
                        cx.waker().wake_by_ref();
                    }
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl AsyncWrite for H2Stream<'_> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.closed {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        loop {
            // What was framed goes out first: a host that reads slowly
            // slows the client.
            match this.poll_send(cx) {
                Poll::Ready(Ok(())) => {}
                other => return other.map(|r| r.map(|()| 0)),
            }
            let mut data = Bytes::copy_from_slice(buf);
            let sent = this
                .codec
                .send_data(this.stream, &mut data, false)
                .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?;
            if sent > 0 {
                // Sent now if the socket takes it; else with the next write
                // or flush.
                let _ = this.poll_send(cx);
                return Poll::Ready(Ok(sent));
            }
            // No window: the host's WINDOW_UPDATE is read for. What else
            // comes (its DATA) waits in the codec for the reader, which is
            // woken to take it.
            this.window_wait = true;
            match this.poll_input(cx) {
                Poll::Ready(Ok(())) => {
                    cx.waker().wake_by_ref();
                    if this.gone {
                        return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
                    }
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match this.poll_send(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut *this.io).poll_flush(cx),
            other => other,
        }
    }

    /// The client ended its side: END_STREAM (RFC 8441 §4: a TCP FIN).
    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.closed {
            this.closed = true;
            let _ = this.codec.send_data(this.stream, &mut Bytes::new(), true);
        }
        match this.poll_send(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut *this.io).poll_flush(cx),
            other => other,
        }
    }
}
