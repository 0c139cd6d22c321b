//! What the connection has to write, in order: control frames and header blocks in one buffer, DATA payloads as their own chunks.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

use crate::frame::{encode_data, encode_data_head};

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
}

impl Output {
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
        self.queue.push_back(self.buf.split().freeze());
        self.queue.push_back(payload);
    }

    pub fn poll(&mut self) -> Option<Bytes> {
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
        Some(self.buf.split().freeze())
    }

    /// Drops the spare buffer and queue capacity, if nothing is pending.
    pub fn shrink(&mut self) {
        if self.has_output() {
            return;
        }
        self.buf = BytesMut::new();
        self.queue = VecDeque::new();
    }

    pub fn has_output(&self) -> bool {
        !self.queue.is_empty() || !self.buf.is_empty()
    }

    pub fn memory_bytes(&self) -> usize {
        self.buf.capacity() + self.queue.capacity() * std::mem::size_of::<Bytes>()
    }
}
