//! Joining a HEADERS (or PUSH_PROMISE) fragment and its CONTINUATIONs into one header block (RFC 9113 §4.3, §6.2, §6.10).
//!
//! One [`HeaderBlockAssembler`] per connection: a block must arrive as an
//! unbroken run of frames on one stream, so there is never more than one
//! open. A block that fits in one frame — nearly all of them — is handed
//! back as the frame's own `Bytes`, without a copy; only a block split over
//! CONTINUATIONs is copied into a buffer, which goes out with the block so
//! that an idle connection holds nothing here.
//!
//! Two bounds keep a peer from turning this into a memory or CPU sink:
//!
//! - `max_block_len` caps the *compressed* block. It is not the header list
//!   limit (SETTINGS_MAX_HEADER_LIST_SIZE): that one counts decoded bytes
//!   and is enforced by [`hpack::Decoder::decode`](crate::hpack::Decoder::decode),
//!   whose `HeaderListTooLarge` leaves the connection usable (the gateway
//!   answers 431). So pick `max_block_len` well above anything a list under
//!   that limit compresses to, and [`BlockError::TooLarge`] only fires on a
//!   peer that is not playing fair: a field sent as a plain literal takes a
//!   few bytes more than its name and value, less than the 32 the list size
//!   adds, so a list never compresses to more than its listed size unless
//!   the encoder pads the block (size updates) or Huffman-codes strings it
//!   makes longer. Twice the list limit plus 16 KiB leaves room for that.
//! - `max_fragments` caps the CONTINUATION frames in one block: empty
//!   CONTINUATIONs cost the sender nothing and grow no buffer, so without a
//!   count they keep a connection busy forever (the CVE-2024-27316 family).

use bytes::Bytes;

use crate::{ErrorCode, FrameError};

/// Assembles header blocks for one connection.
#[derive(Debug)]
pub struct HeaderBlockAssembler {
    max_block_len: usize,
    max_fragments: usize,
    open: Option<Open>,
    /// The fragments so far of a block split across frames. Empty, with no
    /// capacity, whenever no such block is open.
    buf: Vec<u8>,
}

/// The block whose END_HEADERS has not arrived yet.
#[derive(Debug, Clone, Copy)]
struct Open {
    stream: u32,
    end_stream: bool,
    continuations: usize,
}

/// What a HEADERS or CONTINUATION frame made of the block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assembled {
    /// END_HEADERS arrived: `block` is ready for HPACK decoding.
    /// `end_stream` is the END_STREAM flag of the block's first frame
    /// (CONTINUATION has none of its own).
    Complete {
        stream: u32,
        end_stream: bool,
        block: Bytes,
    },
    /// More CONTINUATION frames are needed; only CONTINUATION may come next.
    Partial,
}

/// Why a frame could not be added to a header block. Every case is a
/// connection error: after one the assembler is empty again, but the
/// connection must end with GOAWAY.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlockError {
    /// Frames out of order (PROTOCOL_ERROR) or a CONTINUATION flood
    /// (ENHANCE_YOUR_CALM).
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The compressed block grew past `max_block_len`. It is reported as
    /// soon as that happens, not at END_HEADERS: the block will never be
    /// decoded, so the HPACK table is out of step with the peer from here on
    /// and the connection cannot continue — waiting for the rest would only
    /// let the peer keep us busy. See [`to_frame_error`](Self::to_frame_error).
    #[error("header block on stream {stream} larger than the compressed-size bound")]
    TooLarge { stream: u32 },
}

impl BlockError {
    /// The connection error to answer with. `TooLarge` is a
    /// COMPRESSION_ERROR because §4.3 requires exactly that of a receiver
    /// that does not decompress a field block (ENHANCE_YOUR_CALM would be
    /// the natural word for it, but the RFC names the code).
    pub fn to_frame_error(&self) -> FrameError {
        match self {
            Self::Frame(e) => e.clone(),
            Self::TooLarge { .. } => FrameError::conn(
                ErrorCode::COMPRESSION_ERROR,
                "header block larger than we are willing to decode",
            ),
        }
    }

    /// The code for GOAWAY.
    pub fn code(&self) -> ErrorCode {
        self.to_frame_error().code()
    }
}

impl HeaderBlockAssembler {
    /// An assembler accepting blocks up to `max_block_len` compressed bytes
    /// split over at most `max_fragments` CONTINUATION frames. Allocates
    /// nothing.
    ///
    /// For `max_fragments`, a peer that fills its frames needs
    /// `max_block_len / 16 KiB` of them; allow generously more (32 or 64)
    /// for peers that split blocks small, since only a flood is the target.
    pub fn new(max_block_len: usize, max_fragments: usize) -> Self {
        Self {
            max_block_len,
            max_fragments,
            open: None,
            buf: Vec::new(),
        }
    }

    /// A HEADERS frame arrived on `stream`, its padding and priority already
    /// stripped. For a PUSH_PROMISE pass the frame's own stream (its
    /// CONTINUATIONs carry that one, not the promised one) and
    /// `end_stream = false`; the promised stream is the caller's to keep.
    ///
    /// With END_HEADERS the fragment is the whole block and comes back as
    /// is, without a copy. Otherwise it is copied and the block waits for
    /// CONTINUATION.
    pub fn headers(
        &mut self,
        stream: u32,
        end_stream: bool,
        end_headers: bool,
        fragment: Bytes,
    ) -> Result<Assembled, BlockError> {
        if self.open.is_some() {
            self.reset();
            return Err(interleaved().into());
        }
        if fragment.len() > self.max_block_len {
            return Err(BlockError::TooLarge { stream });
        }
        if end_headers {
            return Ok(Assembled::Complete {
                stream,
                end_stream,
                block: fragment,
            });
        }
        self.open = Some(Open {
            stream,
            end_stream,
            continuations: 0,
        });
        self.append(&fragment);
        Ok(Assembled::Partial)
    }

    /// A CONTINUATION frame arrived on `stream`.
    pub fn continuation(
        &mut self,
        stream: u32,
        end_headers: bool,
        fragment: Bytes,
    ) -> Result<Assembled, BlockError> {
        let Some(open) = self.open.as_mut() else {
            return Err(FrameError::conn(
                ErrorCode::PROTOCOL_ERROR,
                "CONTINUATION without a header block to continue",
            )
            .into());
        };
        if open.stream != stream {
            self.reset();
            return Err(FrameError::conn(
                ErrorCode::PROTOCOL_ERROR,
                "CONTINUATION on another stream than its header block",
            )
            .into());
        }
        open.continuations += 1;
        let Open {
            stream,
            end_stream,
            continuations,
        } = *open;
        if continuations > self.max_fragments {
            self.reset();
            return Err(FrameError::conn(
                ErrorCode::ENHANCE_YOUR_CALM,
                "too many CONTINUATION frames in one header block",
            )
            .into());
        }
        if self.buf.len() + fragment.len() > self.max_block_len {
            self.reset();
            return Err(BlockError::TooLarge { stream });
        }
        self.append(&fragment);
        if !end_headers {
            return Ok(Assembled::Partial);
        }
        self.open = None;
        // The buffer leaves with the block: nothing stays behind between
        // blocks, and the `Bytes` takes the allocation over without a copy.
        let block = Bytes::from(std::mem::take(&mut self.buf));
        Ok(Assembled::Complete {
            stream,
            end_stream,
            block,
        })
    }

    /// Any frame other than HEADERS, PUSH_PROMISE or CONTINUATION arrived
    /// (unknown extension types included): with a block open that is a
    /// connection PROTOCOL_ERROR (§4.3, §6.10).
    pub fn check_interleave(&self) -> Result<(), FrameError> {
        match self.open {
            Some(_) => Err(interleaved()),
            None => Ok(()),
        }
    }

    /// The stream whose block is waiting for CONTINUATION, if any.
    pub fn in_progress(&self) -> Option<u32> {
        self.open.map(|o| o.stream)
    }

    /// Heap bytes held: zero except while a split block is being gathered.
    pub fn memory_bytes(&self) -> usize {
        self.buf.capacity()
    }

    /// Appends a fragment the caller has checked against `max_block_len`.
    /// Growth doubles as usual but never past the bound, so a block at the
    /// limit does not hold twice the limit.
    fn append(&mut self, fragment: &[u8]) {
        let need = self.buf.len() + fragment.len();
        if need > self.buf.capacity() {
            let target = need.max(self.buf.capacity() * 2).min(self.max_block_len);
            self.buf.reserve_exact(target - self.buf.len());
        }
        self.buf.extend_from_slice(fragment);
    }

    /// Forgets the open block after an error; the connection is ending.
    fn reset(&mut self) {
        self.open = None;
        self.buf = Vec::new();
    }
}

fn interleaved() -> FrameError {
    FrameError::conn(
        ErrorCode::PROTOCOL_ERROR,
        "frame interleaved with a header block",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 1024;
    const FRAGMENTS: usize = 8;

    fn assembler() -> HeaderBlockAssembler {
        HeaderBlockAssembler::new(MAX, FRAGMENTS)
    }

    fn conn_error(r: Result<Assembled, BlockError>, code: ErrorCode) -> bool {
        matches!(r, Err(BlockError::Frame(FrameError::Connection { code: c, .. })) if c == code)
    }

    #[test]
    fn single_frame_block_is_the_fragment_itself() {
        let mut a = assembler();
        let fragment = Bytes::from_static(b"\x82\x86\x84");
        let r = a.headers(1, true, true, fragment.clone()).unwrap();
        let Assembled::Complete {
            stream,
            end_stream,
            block,
        } = r
        else {
            panic!("not complete: {r:?}");
        };
        assert_eq!((stream, end_stream), (1, true));
        assert_eq!(block.as_ptr(), fragment.as_ptr(), "copied");
        assert_eq!(block.len(), fragment.len());
        assert_eq!(a.memory_bytes(), 0);
        assert_eq!(a.in_progress(), None);
    }

    #[test]
    fn three_fragments_are_joined_in_order() {
        let mut a = assembler();
        let r = a.headers(3, true, false, Bytes::from_static(b"abc"));
        assert_eq!(r, Ok(Assembled::Partial));
        assert_eq!(a.in_progress(), Some(3));
        let r = a.continuation(3, false, Bytes::from_static(b"def"));
        assert_eq!(r, Ok(Assembled::Partial));
        let r = a.continuation(3, true, Bytes::from_static(b"gh"));
        assert_eq!(
            r,
            Ok(Assembled::Complete {
                stream: 3,
                end_stream: true,
                block: Bytes::from_static(b"abcdefgh"),
            })
        );
        assert_eq!(a.in_progress(), None);
        assert_eq!(a.check_interleave(), Ok(()));
    }

    #[test]
    fn push_promise_block_keeps_end_stream_clear() {
        let mut a = assembler();
        a.headers(2, false, false, Bytes::from_static(b"p"))
            .unwrap();
        let r = a.continuation(2, true, Bytes::new()).unwrap();
        assert!(matches!(
            r,
            Assembled::Complete {
                stream: 2,
                end_stream: false,
                ..
            }
        ));
    }

    #[test]
    fn other_frames_inside_a_block_are_connection_errors() {
        let mut a = assembler();
        assert_eq!(a.check_interleave(), Ok(()));
        a.headers(1, false, false, Bytes::from_static(b"x"))
            .unwrap();
        assert!(matches!(
            a.check_interleave(),
            Err(FrameError::Connection {
                code: ErrorCode::PROTOCOL_ERROR,
                ..
            })
        ));
        // A second HEADERS, even on the same stream, is interleaving too.
        let r = a.headers(1, false, true, Bytes::from_static(b"y"));
        assert!(conn_error(r, ErrorCode::PROTOCOL_ERROR));
        assert_eq!(a.in_progress(), None);
        assert_eq!(a.memory_bytes(), 0);
    }

    #[test]
    fn continuation_on_another_stream_is_a_connection_error() {
        let mut a = assembler();
        a.headers(1, false, false, Bytes::from_static(b"x"))
            .unwrap();
        let r = a.continuation(3, true, Bytes::from_static(b"y"));
        assert!(conn_error(r, ErrorCode::PROTOCOL_ERROR));
    }

    #[test]
    fn stray_continuation_is_a_connection_error() {
        let mut a = assembler();
        let r = a.continuation(1, true, Bytes::from_static(b"y"));
        assert!(conn_error(r, ErrorCode::PROTOCOL_ERROR));
        // Also right after a block that was complete in one frame.
        a.headers(1, false, true, Bytes::from_static(b"x")).unwrap();
        let r = a.continuation(1, true, Bytes::new());
        assert!(conn_error(r, ErrorCode::PROTOCOL_ERROR));
    }

    #[test]
    fn block_past_the_bound_is_too_large_at_once() {
        let mut a = assembler();
        let half = Bytes::from(vec![b'a'; MAX / 2]);
        a.headers(5, false, false, half.clone()).unwrap();
        a.continuation(5, false, half.clone()).unwrap();
        assert!(a.memory_bytes() <= MAX, "buffer grew past the bound");
        // Exactly at the bound is fine; one byte more is not, and is
        // reported now rather than at END_HEADERS.
        let r = a.continuation(5, false, Bytes::from_static(b"b"));
        assert_eq!(r, Err(BlockError::TooLarge { stream: 5 }));
        assert_eq!(r.unwrap_err().code(), ErrorCode::COMPRESSION_ERROR);
        assert_eq!(a.memory_bytes(), 0);
        assert_eq!(a.in_progress(), None);
        // A single frame over the bound too.
        let r = a.headers(7, false, true, Bytes::from(vec![0; MAX + 1]));
        assert_eq!(r, Err(BlockError::TooLarge { stream: 7 }));
    }

    #[test]
    fn block_exactly_at_the_bound_completes() {
        let mut a = assembler();
        let half = Bytes::from(vec![b'a'; MAX / 2]);
        a.headers(5, false, false, half.clone()).unwrap();
        let r = a.continuation(5, true, half).unwrap();
        assert!(matches!(r, Assembled::Complete { block, .. } if block.len() == MAX));
    }

    #[test]
    fn empty_continuation_flood_is_enhance_your_calm() {
        let mut a = assembler();
        a.headers(1, false, false, Bytes::new()).unwrap();
        for _ in 0..FRAGMENTS {
            assert_eq!(
                a.continuation(1, false, Bytes::new()),
                Ok(Assembled::Partial)
            );
        }
        let r = a.continuation(1, false, Bytes::new());
        assert!(conn_error(r, ErrorCode::ENHANCE_YOUR_CALM));
        assert_eq!(a.in_progress(), None);
    }

    #[test]
    fn fragment_count_is_per_block() {
        let mut a = assembler();
        for stream in [1, 3, 5] {
            a.headers(stream, false, false, Bytes::new()).unwrap();
            for _ in 1..FRAGMENTS {
                a.continuation(stream, false, Bytes::new()).unwrap();
            }
            let r = a.continuation(stream, true, Bytes::new()).unwrap();
            assert!(matches!(r, Assembled::Complete { .. }));
        }
    }

    #[test]
    fn buffer_is_freed_after_each_block() {
        let mut a = assembler();
        a.headers(1, false, false, Bytes::from(vec![1; 300]))
            .unwrap();
        assert!(a.memory_bytes() >= 300);
        let r = a.continuation(1, true, Bytes::from(vec![2; 300])).unwrap();
        assert_eq!(a.memory_bytes(), 0);
        let Assembled::Complete { block, .. } = r else {
            panic!("not complete");
        };
        assert_eq!(block.len(), 600);
        assert_eq!(&block[299..301], &[1, 2]);
    }

    #[test]
    fn errors_convert_to_the_frame_error_to_send() {
        let e = BlockError::TooLarge { stream: 9 }.to_frame_error();
        assert!(matches!(
            e,
            FrameError::Connection {
                code: ErrorCode::COMPRESSION_ERROR,
                ..
            }
        ));
        let inner = interleaved();
        assert_eq!(BlockError::from(inner.clone()).to_frame_error(), inner);
    }
}
