//! A connection's unwritten output, written without blocking the connection's task, and for a downstream connection its cap (`per_connection_buffer_limit_bytes`).
//!
//! Why not `write_all` the codec's output: a client whose windows are open
//! but whose socket does not drain would park the task inside the write,
//! so its streams would neither time out nor stop taking response bytes,
//! and every upstream delivery for it would pile up in its inbox. Here the
//! task writes what the socket takes and goes on; past the cap the
//! connection's streams stop forwarding response data (their upstream
//! windows then stay shut) and the client's socket is not read, and below
//! half of it they resume.
//!
//! An upstream connection uses it the same way, without a cap (what it
//! writes is bounded by the backend's windows): a backend that stops
//! reading its socket must not stop the task from reading the responses
//! of the other streams on that connection.

use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use super::codec::DownCodec;
use bytes::{Buf, Bytes};
use futures_lite::AsyncWrite;
use glommio::timer::Timer;

/// Output taken from the codec, oldest first, and its size.
pub(crate) struct OutBuf {
    chunks: VecDeque<Bytes>,
    bytes: usize,
    /// Response bytes given to the codec this turn, not yet taken: counted
    /// against the limit without splitting the codec's output per stream
    /// (which made a send per stream instead of one per turn).
    in_codec: usize,
    /// `per_connection_buffer_limit_bytes`: at or past it the connection
    /// takes no more response data.
    limit: usize,
    /// Response data was refused since the output last fell below half the
    /// limit: the connection's streams wait for [`OutBuf::resumed`].
    paused: bool,
    /// Bytes went to the writer since it was last flushed: a TLS stream
    /// holds records it could not write yet until flushed (a plain socket
    /// holds nothing, and its flush is a no-op).
    unflushed: bool,
    /// Bytes the writer took since [`OutBuf::take_written`] (Envoy's
    /// `*_cx_tx_bytes_total`: over TLS, before encryption, as Envoy's).
    written: u64,
}

impl OutBuf {
    pub fn new(limit: u32) -> Self {
        Self {
            chunks: VecDeque::new(),
            bytes: 0,
            in_codec: 0,
            limit: (limit as usize).max(1),
            paused: false,
            unflushed: false,
            written: 0,
        }
    }

    /// Bytes written since the last call.
    pub fn take_written(&mut self) -> u64 {
        std::mem::take(&mut self.written)
    }

    /// Moves what the codec has to write here.
    pub fn take_from(&mut self, conn: &mut DownCodec) {
        self.in_codec = 0;
        self.take(|| conn.poll_output());
    }

    /// Moves the chunks `next` hands out here, until it has none.
    pub fn take(&mut self, mut next: impl FnMut() -> Option<Bytes>) {
        while let Some(chunk) = next() {
            self.bytes += chunk.len();
            self.chunks.push_back(chunk);
        }
    }

    /// Whether response data may go to the codec now. False pauses the
    /// connection's response data until the output falls below half the
    /// limit; the first refusal of a pause returns `Full(true)` so the
    /// caller counts it once.
    pub fn admit(&mut self) -> Admit {
        if self.bytes + self.in_codec < self.limit && !self.paused {
            return Admit::Room;
        }
        let first = !self.paused;
        self.paused = true;
        Admit::Full(first)
    }

    /// Whether to read from the client: not while the output is at the
    /// limit, so a client that sends but does not read (a PING or request
    /// flood) is held back by its own socket (Envoy disables reading at
    /// the same mark).
    pub fn takes_input(&self) -> bool {
        self.bytes < self.limit
    }

    /// True once after a pause ended: the caller forwards what waited.
    pub fn resumed(&mut self) -> bool {
        if self.paused && self.bytes < self.limit / 2 {
            self.paused = false;
            return true;
        }
        false
    }

    /// `per_connection_buffer_limit_bytes`.
    pub fn limit(&self) -> u32 {
        self.limit as u32
    }

    /// Bytes not yet written.
    pub fn bytes(&self) -> usize {
        self.bytes + self.in_codec
    }

    /// `n` response bytes went to the codec (taken at the next
    /// [`take_from`](Self::take_from)).
    pub fn note_sent(&mut self, n: u32) {
        self.in_codec += n as usize;
    }

    /// Nothing left to write or flush.
    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty() && !self.unflushed
    }

    /// Writes what is held until it is all written, the write fails, or
    /// `limit` passes: a connection's last words (GOAWAY, resets) to a
    /// peer that may not be reading.
    pub async fn flush_within<W: AsyncWrite + Unpin>(&mut self, io: &mut W, limit: Duration) {
        let mut timer = Box::pin(Timer::new(limit));
        poll_fn(|cx| {
            if self.poll_write(&mut *io, cx).is_ready() {
                return Poll::Ready(());
            }
            timer.as_mut().poll(cx).map(|_| ())
        })
        .await;
    }

    /// Writes until everything went (`Ready(Ok)`), the socket is full
    /// (`Pending`, with `cx` woken when it has room) or the write failed.
    pub fn poll_write<W: AsyncWrite + Unpin>(
        &mut self,
        io: &mut W,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        while let Some(front) = self.chunks.front_mut() {
            match Pin::new(&mut *io).poll_write(cx, front) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => {
                    self.unflushed = true;
                    self.bytes -= n;
                    self.written += n as u64;
                    if n == front.len() {
                        self.chunks.pop_front();
                    } else {
                        front.advance(n);
                    }
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        if self.unflushed {
            match Pin::new(&mut *io).poll_flush(cx) {
                Poll::Ready(Ok(())) => self.unflushed = false,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// What [`OutBuf::admit`] answers.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admit {
    Room,
    /// Past the limit; true on the refusal that started this pause.
    Full(bool),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A socket that takes `room` bytes, then is full.
    struct Sink {
        room: usize,
        got: Vec<u8>,
    }

    impl AsyncWrite for Sink {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let n = buf.len().min(self.room);
            if n == 0 {
                return Poll::Pending;
            }
            self.room -= n;
            self.got.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    fn noop_waker() -> std::task::Waker {
        struct Noop;
        impl std::task::Wake for Noop {
            fn wake(self: std::sync::Arc<Self>) {}
        }
        std::task::Waker::from(std::sync::Arc::new(Noop))
    }

    fn push(out: &mut OutBuf, data: &'static [u8]) {
        out.bytes += data.len();
        out.chunks.push_back(Bytes::from_static(data));
    }

    #[test]
    fn writes_what_the_socket_takes_and_keeps_the_rest_in_order() {
        let mut out = OutBuf::new(100);
        push(&mut out, b"hello ");
        push(&mut out, b"world");
        let mut sink = Sink {
            room: 8,
            got: Vec::new(),
        };
        let waker = noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(out.poll_write(&mut sink, &mut cx).is_pending());
        assert_eq!(sink.got, b"hello wo");
        assert_eq!(out.bytes, 3);
        sink.room = 100;
        assert!(matches!(
            out.poll_write(&mut sink, &mut cx),
            Poll::Ready(Ok(()))
        ));
        assert_eq!(sink.got, b"hello world");
        assert!(out.is_empty());
        assert_eq!(out.bytes, 0);
    }

    #[test]
    fn a_pause_starts_at_the_limit_counts_once_and_ends_below_half() {
        let mut out = OutBuf::new(10);
        assert_eq!(out.admit(), Admit::Room);
        push(&mut out, b"0123456789");
        assert_eq!(out.admit(), Admit::Full(true));
        assert_eq!(out.admit(), Admit::Full(false));
        let mut sink = Sink {
            room: 5,
            got: Vec::new(),
        };
        let waker = noop_waker();
        let mut cx = Context::from_waker(&waker);
        let _ = out.poll_write(&mut sink, &mut cx);
        // 5 left: not below half yet, still paused.
        assert!(!out.resumed());
        assert_eq!(out.admit(), Admit::Full(false));
        sink.room = 1;
        let _ = out.poll_write(&mut sink, &mut cx);
        assert!(out.resumed());
        assert!(!out.resumed(), "once per pause");
        assert_eq!(out.admit(), Admit::Room);
    }
}
