//! What the connection has to write, in order: control frames and header blocks in one buffer, DATA payloads as their own chunks.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

use crate::frame::{self, encode_data, encode_data_head};

/// DATA payloads up to this size are copied next to their frame header:
/// cheaper than one more iovec and one more reference count.
const COPY_MAX: usize = 256;
/// Buffer capacity kept once everything is written; more (after a burst of
/// large header blocks) is given back on an idle connection.
pub(super) const BUF_KEEP: usize = 4 << 10;
/// Chunk queue slots kept once it is empty.
const QUEUE_KEEP: usize = 16;

#[derive(Debug, Default)]
pub(super) struct Output {
    /// Frames being written, not yet handed out. Encoders append here.
    pub buf: BytesMut,
    /// Chunks ready to hand out, before `buf`.
    queue: VecDeque<Bytes>,
    /// Frames not yet written out, for the outbound flood limits; `None`
    /// (no counting) unless the server enables them.
    pub ledger: Option<Box<FrameLedger>>,
}

impl Output {
    /// Output that counts its frames until the driver reports them written.
    pub fn counted() -> Self {
        Self {
            ledger: Some(Box::default()),
            ..Self::default()
        }
    }

    /// Queues a DATA frame; large payloads go out as the caller's `Bytes`.
    pub fn data(&mut self, stream: u32, payload: Bytes, end_stream: bool) {
        if payload.len() <= COPY_MAX {
            encode_data(&mut self.buf, stream, &payload, end_stream);
            return;
        }
        // `payload.len()` is at most the peer's MAX_FRAME_SIZE (24 bits).
        encode_data_head(&mut self.buf, stream, payload.len() as u32, end_stream);
        // `split` hands out what was written and keeps the rest of the
        // allocation for what comes next: no copy, no new buffer.
        let head = self.buf.split().freeze();
        if let Some(l) = &mut self.ledger {
            l.made(&head);
            l.payload(payload.len());
        }
        self.queue.push_back(head);
        self.queue.push_back(payload);
    }

    pub fn poll(&mut self) -> Option<Bytes> {
        let chunk = self.poll_chunk()?;
        if let Some(l) = &mut self.ledger {
            l.handed += chunk.len() as u64;
        }
        Some(chunk)
    }

    fn poll_chunk(&mut self) -> Option<Bytes> {
        if let Some(chunk) = self.queue.pop_front() {
            if self.queue.is_empty() && self.queue.capacity() > QUEUE_KEEP {
                self.queue = VecDeque::new();
            }
            return Some(chunk);
        }
        if self.buf.is_empty() {
            // Everything was handed out; once the driver has dropped what
            // it wrote, the buffer's whole allocation is ours again:
            // reclaim it (no copy, no allocation) so that `capacity` tells
            // its real size, and give it back if a burst made it big.
            let _ = self.buf.try_reclaim(self.buf.capacity() + 1);
            if self.buf.capacity() > BUF_KEEP {
                self.buf = BytesMut::new();
            }
            return None;
        }
        let chunk = self.buf.split().freeze();
        if let Some(l) = &mut self.ledger {
            l.made(&chunk);
        }
        Some(chunk)
    }

    /// Drops the spare buffer and queue capacity, if nothing is pending.
    pub fn shrink(&mut self) {
        if self.has_output() {
            return;
        }
        self.buf = BytesMut::new();
        self.queue = VecDeque::new();
        if let Some(l) = &mut self.ledger {
            if l.pending.is_empty() {
                l.pending = VecDeque::new();
            }
        }
    }

    pub fn has_output(&self) -> bool {
        !self.queue.is_empty() || !self.buf.is_empty()
    }

    pub fn memory_bytes(&self) -> usize {
        self.buf.capacity()
            + self.queue.capacity() * std::mem::size_of::<Bytes>()
            + self.ledger.as_ref().map_or(0, |l| l.memory_bytes())
    }
}

/// The frames of the output that are not written to the socket yet, as
/// Envoy counts them for `max_outbound_frames` and
/// `max_outbound_control_frames`. Frames are counted when their chunk is
/// made (a walk over the frame headers, which are in cache then), and each
/// stays counted until the driver has written its last byte (for a DATA
/// frame, the last byte of its payload).
#[derive(Debug, Default)]
pub(super) struct FrameLedger {
    /// The control frames among those not yet written (all of them are
    /// `pending`).
    pub control: u32,
    /// Bytes of the chunks made so far, and of those handed out.
    made: u64,
    handed: u64,
    /// Per frame not yet written: where it ends (in `made` bytes), with
    /// [`CONTROL`] set for a control frame.
    pending: VecDeque<u64>,
}

/// Ledger entries kept once it is empty.
const LEDGER_KEEP: usize = 64;
/// The bit of a ledger entry that marks a control frame (offsets never
/// reach it).
const CONTROL: u64 = 1 << 63;

impl FrameLedger {
    /// Frames not yet written.
    pub fn frames(&self) -> u32 {
        self.pending.len() as u32
    }

    /// A chunk of whole frames, the last of which may be a DATA frame
    /// header whose payload is the next chunk (its end is past the chunk).
    /// Envoy's control frames: RST_STREAM, and PING and SETTINGS
    /// acknowledgements.
    fn made(&mut self, chunk: &[u8]) {
        let mut at = 0;
        while let Some(head) = chunk.get(at..at + 9) {
            let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
            let (kind, flags) = (head[3], head[4]);
            let ack = flags & frame::flags::ACK != 0;
            let control = kind == frame::kind::RST_STREAM
                || (ack && (kind == frame::kind::PING || kind == frame::kind::SETTINGS));
            at += 9 + len;
            let end = self.made + at as u64;
            if control {
                self.control += 1;
                self.pending.push_back(end | CONTROL);
            } else {
                self.pending.push_back(end);
            }
        }
        self.made += chunk.len() as u64;
    }

    /// The payload of the DATA frame that ends the last chunk (its entry
    /// already ends after it).
    fn payload(&mut self, len: usize) {
        self.made += len as u64;
    }

    /// The driver holds `unwritten` bytes of what was handed out: forget
    /// the frames written in full.
    pub fn written(&mut self, unwritten: usize) {
        let written = self.handed.saturating_sub(unwritten as u64);
        while let Some(&entry) = self.pending.front() {
            if entry & !CONTROL > written {
                break;
            }
            self.pending.pop_front();
            if entry & CONTROL != 0 {
                self.control -= 1;
            }
        }
        if self.pending.is_empty() && self.pending.capacity() > LEDGER_KEEP {
            self.pending = VecDeque::new();
        }
    }

    fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.pending.capacity() * std::mem::size_of::<u64>()
    }
}
