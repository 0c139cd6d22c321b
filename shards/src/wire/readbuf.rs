//! [`ReadBuf`]: a socket's receive buffer that zeroes a read's room only when it must.

use std::cell::RefCell;
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::BytesMut;
use futures_lite::AsyncRead;

/// A receive buffer that a socket reads into at its tail, and that the
/// HTTP/2 codec consumes from its head (frames are split off it).
///
/// glommio reads into an initialised `&mut [u8]`, so the tail must be
/// initialised before each read; zeroing a whole read's room every time
/// was 3–5 % of a proxy's profile. The bytes past `len` that a short read
/// left untouched stay initialised in the allocation, so this remembers
/// how many there are and zeroes only the rest. It also remembers how far
/// the allocation itself was ever initialised: when the codec has consumed
/// the head and `reserve` moves the data back to the front of the same
/// allocation, the room after it was initialised by earlier reads (that
/// was another 2 % of the profile, zeroing 32 KiB per upstream refill).
/// Bytes asked per read while a connection is quiet (and while it opens):
/// an idle client holds no 8 KiB of read room.
pub(crate) const IDLE_READ_SIZE: usize = 512;

#[derive(Default)]
pub struct ReadBuf {
    pub buf: BytesMut,
    /// Where the last [`room`](Self::room) began.
    room_start: usize,
    /// Bytes right after `buf.len()` known to be initialised.
    spare_init: usize,
    /// Address range of the current allocation known to be initialised:
    /// from its start to `init_end` (0, 0 before the first allocation).
    alloc_start: usize,
    init_end: usize,
}

impl ReadBuf {
    /// Room for a read of up to `len` bytes at the tail, initialised: at
    /// least `len / 2`. A read takes what room is left while that is half
    /// a read or more, so the buffer is not moved back to its front (a
    /// copy, and with an exact size, a `reserve` per read) after every
    /// short read.
    pub fn room(&mut self, len: usize) -> &mut [u8] {
        let start = self.buf.len();
        self.room_start = start;
        if self.buf.capacity() - start < len.div_ceil(2) {
            self.buf.reserve(len);
            let at = self.buf.as_ptr() as usize;
            if self.alloc_start != 0 && (self.alloc_start..=self.init_end).contains(&at) {
                // The same allocation: the data moved to its front (or
                // it grew in place); what lay below `init_end` still
                // holds what earlier reads and zeroing wrote there.
                self.spare_init = self.init_end.saturating_sub(at + start);
            } else {
                // A new allocation (it cannot overlap the old one while
                // the data is copied over): only the data is known.
                self.alloc_start = at;
                self.init_end = at + start;
                self.spare_init = 0;
            }
        }
        let len = len.min(self.buf.capacity() - start);
        if self.spare_init < len {
            // Only the part a previous read did not leave initialised
            // (after a read of n bytes: those n).
            self.buf.spare_capacity_mut()[self.spare_init..len].fill(MaybeUninit::new(0));
            self.spare_init = len;
        }
        self.init_end = self.init_end.max(self.buf.as_ptr() as usize + start + len);
        // SAFETY: the `len` bytes after `start` lie within the capacity
        // (reserved above, or bounded by it just before) and are initialised: zeroed just now, or by an
        // earlier call and only truncated away since (the codec only
        // splits bytes off the head, which leaves the tail where it is).
        unsafe { self.buf.set_len(start + len) };
        &mut self.buf[start..]
    }

    /// After a read into [`room`](Self::room): its first `n` bytes are
    /// data, the rest is spare again.
    pub fn filled(&mut self, n: usize) {
        let data_end = self.room_start + n;
        // Saturating: a room of nothing past a buffer the codec has since
        // consumed is no room, and knows nothing initialised.
        self.spare_init = self.buf.len().saturating_sub(data_end);
        self.buf.truncate(data_end);
    }

    /// Appends bytes read elsewhere (the scratch) and leaves the buffer
    /// as a read of them into [`room`](Self::room) would:
    /// [`filled`](Self::filled) with their length follows.
    fn append(&mut self, data: &[u8]) {
        self.room_start = self.buf.len();
        self.buf.extend_from_slice(data);
        let at = self.buf.as_ptr() as usize;
        let end = at + self.buf.len();
        if self.alloc_start != 0 && (self.alloc_start..=self.init_end).contains(&at) {
            // The same allocation (written in place, or the data moved
            // to its front, or grown in place): what was initialised
            // still is, and the data now too.
            self.init_end = self.init_end.max(end);
        } else {
            // A new allocation (it cannot overlap the old one while the
            // data is copied over), or the first: only the data is known.
            self.alloc_start = at;
            self.init_end = end;
        }
        self.spare_init = self.init_end - end;
    }

    /// Gives the allocation back when nothing is buffered (an idle
    /// connection keeps no read buffer).
    pub fn release_if_empty(&mut self) {
        if self.buf.is_empty() {
            self.buf = BytesMut::new();
            self.room_start = 0;
            self.spare_init = 0;
            self.alloc_start = 0;
            self.init_end = 0;
        }
    }
}

/// Bytes a read may take through the thread's scratch (a busy
/// connection's read size).
pub(crate) const SCRATCH_SIZE: usize = 8 * 1024;

thread_local! {
    /// Where reads into an empty buffer land first, one per thread (a
    /// shard's connections read one at a time): zeroed once, so a read
    /// costs the copy of what came and nothing more.
    static SCRATCH: RefCell<Box<[u8]>> = RefCell::new(vec![0; SCRATCH_SIZE].into_boxed_slice());
}

/// Where a wait's read lands.
///
/// A connection with nothing buffered holds no read room while it waits:
/// glommio reads by readiness (a `recv`, then an io_uring poll when the
/// socket had nothing), so no buffer waits in the kernel, and the read
/// goes to the thread's scratch, from which only what came is copied into
/// the buffer. An idle connection is the common case at the edge
/// (thousands held open by browsers and gRPC clients), and so is a stream
/// that waits (a slow upload, a long poll, a gRPC stream): each held a
/// read room for as long as it lasted (512 B quiet, 8 KiB busy) before.
pub(crate) enum Landing<'a> {
    /// Room at the buffer's tail ([`ReadBuf::room`]), after bytes it
    /// holds.
    Room(&'a mut [u8]),
    /// Nothing buffered: up to this many bytes land in the scratch first.
    Scratch(&'a mut ReadBuf, usize),
}

impl<'a> Landing<'a> {
    /// [`Landing::Scratch`] when `rb` is empty, else `size` bytes of room
    /// in `rb`.
    pub fn new(rb: &'a mut ReadBuf, size: usize) -> Self {
        if rb.buf.is_empty() && size <= SCRATCH_SIZE {
            // A few bytes read while quiet (the opening's, a PING's) left
            // an allocation of their size: given back. A busy read's room
            // is kept for the next request until the deadline scan gives
            // it back (`lifecycle`).
            if rb.buf.capacity() <= IDLE_READ_SIZE {
                rb.release_if_empty();
            }
            // A room of nothing at the tail: a wake-up without bytes (a
            // timer, the inbox) ends with `filled(0)` as after a room.
            rb.room_start = rb.buf.len();
            Landing::Scratch(rb, size)
        } else {
            Landing::Room(rb.room(size))
        }
    }

    /// Polls `r` for bytes into the landing. Once it is ready (bytes, the
    /// end, an error), the buffer is as after [`ReadBuf::room`], so the
    /// caller's [`ReadBuf::filled`] takes what came either way.
    pub fn poll_read<R: AsyncRead + ?Sized>(
        &mut self,
        r: Pin<&mut R>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<usize>> {
        match self {
            Landing::Room(room) => r.poll_read(cx, room),
            Landing::Scratch(rb, size) => SCRATCH.with_borrow_mut(|scratch| {
                let read = std::task::ready!(r.poll_read(cx, &mut scratch[..*size]));
                let n = *read.as_ref().unwrap_or(&0);
                rb.append(&scratch[..n]);
                Poll::Ready(read)
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader handing out fixed chunks, then the end.
    struct Chunks(Vec<&'static [u8]>);

    impl AsyncRead for Chunks {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut [u8],
        ) -> Poll<io::Result<usize>> {
            if self.0.is_empty() {
                return Poll::Ready(Ok(0));
            }
            let chunk = self.0.remove(0);
            buf[..chunk.len()].copy_from_slice(chunk);
            Poll::Ready(Ok(chunk.len()))
        }
    }

    fn land(rb: &mut ReadBuf, r: &mut Chunks, size: usize) -> usize {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut landing = Landing::new(rb, size);
        let Poll::Ready(Ok(n)) = landing.poll_read(Pin::new(r), &mut cx) else {
            panic!("a chunk is always ready");
        };
        rb.filled(n);
        n
    }

    #[test]
    fn a_quiet_read_holds_no_buffer_until_bytes_come() {
        let mut rb = ReadBuf::default();
        assert!(matches!(
            Landing::new(&mut rb, IDLE_READ_SIZE),
            Landing::Scratch(..)
        ));
        assert_eq!(rb.buf.capacity(), 0, "nothing allocated to wait");
        let mut r = Chunks(vec![b"PRI *", b" HTTP/2.0", b""]);
        assert_eq!(land(&mut rb, &mut r, IDLE_READ_SIZE), 5);
        assert_eq!(&rb.buf[..], b"PRI *");
        // Bytes buffered: the next read goes to room after them.
        assert!(matches!(
            Landing::new(&mut rb, IDLE_READ_SIZE),
            Landing::Room(_)
        ));
        rb.filled(0);
        assert_eq!(land(&mut rb, &mut r, IDLE_READ_SIZE), 9);
        assert_eq!(&rb.buf[..], b"PRI * HTTP/2.0");
        // The codec took it all; the end reads as 0 and leaves it empty.
        rb.buf.clear();
        assert_eq!(land(&mut rb, &mut r, IDLE_READ_SIZE), 0);
        assert!(rb.buf.is_empty());
        rb.release_if_empty();
        assert_eq!(rb.buf.capacity(), 0);
    }

    #[test]
    fn a_quiet_wait_woken_without_bytes_leaves_the_buffer_as_it_was() {
        let mut rb = ReadBuf::default();
        // A read of 100 bytes after 10 buffered, then the codec takes all.
        rb.room(16)[..10].fill(b'a');
        rb.filled(10);
        rb.room(8 * 1024)[..100].fill(b'b');
        rb.filled(100);
        rb.buf.clear();
        // A quiet wait woken by a timer: no room was taken, none is filled.
        let landing = Landing::new(&mut rb, IDLE_READ_SIZE);
        assert!(matches!(landing, Landing::Scratch(..)), "nothing buffered");
        rb.filled(0);
        assert!(rb.buf.is_empty());
        // Room asked for afterwards is zeroed, not taken as initialised.
        rb.release_if_empty();
        let room = rb.room(64);
        assert!(room.iter().all(|&b| b == 0));
    }

    #[test]
    fn a_busy_read_into_an_empty_buffer_allocates_only_what_came() {
        let mut rb = ReadBuf::default();
        let mut r = Chunks(vec![b"twenty bytes of body"]);
        assert_eq!(land(&mut rb, &mut r, SCRATCH_SIZE), 20);
        assert_eq!(&rb.buf[..], b"twenty bytes of body");
        assert!(
            rb.buf.capacity() < IDLE_READ_SIZE,
            "no 8 KiB room for 20 bytes"
        );
    }

    #[test]
    fn a_busy_read_after_a_quiet_one_sees_only_initialised_room() {
        let mut rb = ReadBuf::default();
        let mut r = Chunks(vec![b"abc"]);
        land(&mut rb, &mut r, IDLE_READ_SIZE);
        // Room beyond what was appended is zeroed, not taken as written.
        let room = rb.room(8 * 1024);
        assert!(room.iter().all(|&b| b == 0));
        rb.filled(0);
        assert_eq!(&rb.buf[..], b"abc");
    }

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
    fn a_reclaimed_allocation_is_not_zeroed_again() {
        let mut rb = ReadBuf::default();
        rb.room(64).fill(b'a');
        rb.filled(64);
        // The codec consumed every byte and nothing holds them any more:
        // `reserve` takes the whole allocation back (documented BytesMut
        // behaviour), and the old bytes are still there, initialised.
        drop(rb.buf.split_to(64));
        let room = rb.room(64);
        assert_eq!(room, &[b'a'; 64][..], "reclaimed in place, not zeroed");
        room[..3].copy_from_slice(b"xyz");
        rb.filled(3);
        assert_eq!(&rb.buf[..], b"xyz");
    }

    #[test]
    fn a_new_allocation_is_zeroed() {
        let mut rb = ReadBuf::default();
        rb.room(64).fill(b'a');
        rb.filled(64);
        // A frame split off the head still lives: the allocation cannot be
        // reclaimed, so the room is a new allocation's, zeroed after the
        // data that was copied over.
        let held = rb.buf.split_to(60).freeze();
        let room = rb.room(64);
        assert_eq!(room, &[0u8; 64][..]);
        rb.filled(0);
        assert_eq!(&rb.buf[..], b"aaaa");
        assert_eq!(held.len(), 60);
    }

    #[test]
    fn a_read_takes_the_room_left_while_it_is_half_a_read() {
        let mut rb = ReadBuf::default();
        rb.room(64);
        rb.filled(20);
        let cap = rb.buf.capacity();
        // 44 bytes left of a 64-byte read: enough, and nothing moves.
        let at = rb.buf.as_ptr();
        assert_eq!(rb.room(64).len(), cap - 20);
        rb.filled(20);
        assert_eq!(rb.buf.as_ptr(), at);
        drop(rb.buf.split_to(40));
        // 24 bytes left, under half a read: the buffer is reclaimed.
        assert!(rb.buf.capacity() < 32);
        assert_eq!(rb.room(64).len(), 64);
        rb.filled(0);
        assert!(rb.buf.is_empty());
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
