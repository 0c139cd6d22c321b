//! [`ReadBuf`]: a socket's receive buffer that zeroes a read's room only when it must.

use std::mem::MaybeUninit;

use bytes::BytesMut;

/// A receive buffer that a socket reads into at its tail, and that the
/// HTTP/2 codec consumes from its head (frames are split off it).
///
/// glommio reads into an initialised `&mut [u8]`, so the tail must be
/// initialised before each read; zeroing a whole read's room every time
/// was 3–5 % of a proxy's profile. The bytes past `len` that a short read
/// left untouched stay initialised in the allocation, so this remembers
/// how many there are and zeroes only the rest.
#[derive(Default)]
pub struct ReadBuf {
    pub buf: BytesMut,
    /// Where the last [`room`](Self::room) began.
    room_start: usize,
    /// Bytes right after `buf.len()` known to be initialised.
    spare_init: usize,
}

impl ReadBuf {
    /// Room for a read of `len` bytes at the tail, initialised.
    pub fn room(&mut self, len: usize) -> &mut [u8] {
        let start = self.buf.len();
        self.room_start = start;
        if self.buf.capacity() - start < len {
            // Moved (reclaimed) or grown: nothing past `len` is known.
            self.buf.reserve(len);
            self.spare_init = 0;
        }
        if self.spare_init < len {
            // Only the part a previous read did not leave initialised
            // (after a read of n bytes: those n).
            self.buf.spare_capacity_mut()[self.spare_init..len].fill(MaybeUninit::new(0));
            self.spare_init = len;
        }
        // SAFETY: the `len` bytes after `start` lie within the capacity
        // (reserved above) and are initialised: zeroed just now, or by an
        // earlier call and only truncated away since (the codec only
        // splits bytes off the head, which leaves the tail where it is).
        unsafe { self.buf.set_len(start + len) };
        &mut self.buf[start..]
    }

    /// After a read into [`room`](Self::room): its first `n` bytes are
    /// data, the rest is spare again.
    pub fn filled(&mut self, n: usize) {
        let data_end = self.room_start + n;
        self.spare_init = self.buf.len() - data_end;
        self.buf.truncate(data_end);
    }

    /// Gives the allocation back when nothing is buffered (an idle
    /// connection keeps no read buffer).
    pub fn release_if_empty(&mut self) {
        if self.buf.is_empty() {
            self.buf = BytesMut::new();
            self.spare_init = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_survives_and_spare_is_reused() {
        let mut rb = ReadBuf::default();
        let room = rb.room(16);
        room[..3].copy_from_slice(b"abc");
        rb.filled(3);
        assert_eq!(&rb.buf[..], b"abc");
        // The codec consumes the head, as `recv` does.
        let _ = rb.buf.split_to(2);
        let room = rb.room(8);
        assert_eq!(room.len(), 8);
        room[..2].copy_from_slice(b"de");
        rb.filled(2);
        assert_eq!(&rb.buf[..], b"cde");
    }

    #[test]
    fn growing_past_capacity_starts_afresh() {
        let mut rb = ReadBuf::default();
        rb.room(4)[..4].copy_from_slice(b"wxyz");
        rb.filled(4);
        let room = rb.room(64 * 1024);
        assert!(room.iter().all(|&b| b == 0));
        rb.filled(0);
        assert_eq!(&rb.buf[..], b"wxyz");
        let _ = rb.buf.split_to(4);
        rb.release_if_empty();
        assert_eq!(rb.buf.capacity(), 0);
    }
}
