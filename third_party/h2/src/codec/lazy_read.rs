//! PATCH(lazy-read-buffer): stands in for tokio-util's `FramedRead` under
//! h2's frame decoder. Same framing (the `LengthDelimitedCodec` h2
//! configures), but the read buffer is allocated when a read is attempted
//! and can be released (`release_if_empty`) when no partial frame is held:
//! h2's connection does that once it has no streams left. tokio-util's
//! keeps 8 KiB per connection forever, which is most of what an idle HTTP/2
//! connection costs.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::BytesMut;
use futures_core::Stream;
use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::codec::{Decoder, LengthDelimitedCodec};

/// Room reserved for a read when the buffer is full or absent (what
/// tokio-util starts with).
const READ_CAPACITY: usize = 8 * 1024;

/// Frame types whose payload is an HPACK header block.
const HEADERS: u8 = 0x1;
const PUSH_PROMISE: u8 = 0x5;
const CONTINUATION: u8 = 0x9;

/// Header block frames get an allocation of their own. HPACK decoding hands
/// out header values that borrow the frame's bytes, and the ones the peer
/// indexes live on in the connection's dynamic table; borrowing from the
/// read buffer, each would pin a whole 8 KiB buffer for as long as it stays
/// in the table (measured: 83 KB per idle connection after 20 requests).
/// Copying a header block (a few hundred bytes) costs far less than that.
/// DATA frames stay zero-copy: they are forwarded and dropped.
fn own_header_block(frame: BytesMut) -> BytesMut {
    match frame.get(3) {
        Some(&(HEADERS | PUSH_PROMISE | CONTINUATION)) => BytesMut::from(&frame[..]),
        _ => frame,
    }
}

#[derive(Debug)]
pub struct LazyFramedRead<T> {
    inner: T,
    codec: LengthDelimitedCodec,
    buf: BytesMut,
    /// How many bytes at the start of `buf`'s spare capacity are known to be
    /// initialized: the read adapter (tokio's `ReadBuf`) zeroes the rest
    /// before every read, which would otherwise be 8 KiB per attempt.
    init_spare: usize,
    eof: bool,
    /// After an error (or end of stream) the stream only yields `None`.
    done: bool,
}

impl<T> LazyFramedRead<T> {
    pub fn new(inner: T, codec: LengthDelimitedCodec) -> Self {
        LazyFramedRead {
            inner,
            codec,
            buf: BytesMut::new(),
            init_spare: 0,
            eof: false,
            done: false,
        }
    }

    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    pub fn get_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// Frees the read buffer unless it holds part of a frame.
    pub fn release_if_empty(&mut self) {
        if self.buf.is_empty() && self.buf.capacity() > 0 {
            self.buf = BytesMut::new();
            self.init_spare = 0;
        }
    }

    pub fn decoder(&self) -> &LengthDelimitedCodec {
        &self.codec
    }

    pub fn decoder_mut(&mut self) -> &mut LengthDelimitedCodec {
        &mut self.codec
    }
}

impl<T: AsyncRead + Unpin> Stream for LazyFramedRead<T> {
    type Item = io::Result<BytesMut>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            if !this.buf.is_empty() {
                let spare = this.buf.capacity() - this.buf.len();
                let decoded = this.codec.decode(&mut this.buf);
                // Splitting a frame off the front keeps the spare capacity;
                // only a reserve (reallocation) changes it.
                if this.buf.capacity() - this.buf.len() != spare {
                    this.init_spare = 0;
                }
                match decoded {
                    Ok(Some(frame)) => return Poll::Ready(Some(Ok(own_header_block(frame)))),
                    Ok(None) => {}
                    Err(e) => {
                        this.done = true;
                        return Poll::Ready(Some(Err(e)));
                    }
                }
            }
            if this.eof {
                this.done = true;
                if this.buf.is_empty() {
                    return Poll::Ready(None);
                }
                // As tokio-util's `decode_eof`: a truncated frame.
                return Poll::Ready(Some(Err(io::Error::new(
                    io::ErrorKind::Other,
                    "bytes remaining on stream",
                ))));
            }
            if this.buf.capacity() == 0 {
                // Zeroed once here rather than by every read.
                this.buf = BytesMut::zeroed(READ_CAPACITY);
                this.buf.clear();
                this.init_spare = READ_CAPACITY;
            } else if this.buf.capacity() == this.buf.len() {
                this.buf.reserve(READ_CAPACITY);
                this.init_spare = 0;
            }
            let n = {
                let mut dst = ReadBuf::uninit(this.buf.spare_capacity_mut());
                // SAFETY: `init_spare` counts initialized bytes of the spare
                // capacity (see its invariant above).
                unsafe { dst.assume_init(this.init_spare) };
                match Pin::new(&mut this.inner).poll_read(cx, &mut dst) {
                    Poll::Ready(Ok(())) => {
                        let n = dst.filled().len();
                        this.init_spare = dst.initialized().len() - n;
                        n
                    }
                    Poll::Ready(Err(e)) => {
                        this.done = true;
                        return Poll::Ready(Some(Err(e)));
                    }
                    Poll::Pending => {
                        this.init_spare = dst.initialized().len();
                        return Poll::Pending;
                    }
                }
            };
            // SAFETY: `ReadBuf` guarantees its first `n` bytes were filled
            // (initialized) by the read, and they start at the old length.
            unsafe { this.buf.set_len(this.buf.len() + n) };
            if n == 0 {
                this.eof = true;
            }
        }
    }
}
