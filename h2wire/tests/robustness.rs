//! Hostile input never panics: random and mutated bytes through the frame
//! reader and the HPACK decoder, as a peer could send them. Deterministic
//! (a fixed-seed xorshift), so a failure reproduces.

use bytes::{BufMut, BytesMut};
use h2wire::frame::{self, decode_frame};
use h2wire::hpack::{Decoder, Encoder};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Reads frames until the buffer runs dry or the reader reports an error;
/// returns how many frames it produced.
fn drain(buf: &mut BytesMut, max_frame_size: u32) -> usize {
    let mut n = 0;
    while let Ok(Some(_)) = decode_frame(buf, max_frame_size) {
        n += 1;
    }
    n
}

#[test]
fn random_bytes_through_the_frame_reader() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..5_000 {
        let len = rng.below(200);
        let mut buf = BytesMut::from(&rng.bytes(len)[..]);
        drain(&mut buf, frame::DEFAULT_MAX_FRAME_SIZE);
    }
}

#[test]
fn random_frame_headers_with_plausible_lengths() {
    // Random type, flags and stream id, with a length that fits the payload
    // that follows: this reaches every frame type's payload parser.
    let mut rng = Rng(42);
    let mut parsed = 0;
    for _ in 0..20_000 {
        let len = rng.below(40);
        let mut buf = BytesMut::new();
        buf.put_uint(len as u64, 3);
        buf.put_u8(rng.below(11) as u8);
        buf.put_u8(rng.next() as u8);
        buf.put_u32(if rng.below(4) == 0 {
            0
        } else {
            rng.next() as u32
        });
        buf.extend_from_slice(&rng.bytes(len));
        parsed += drain(&mut buf, frame::DEFAULT_MAX_FRAME_SIZE);
    }
    // Not all rejected: the generator reaches the success paths too.
    assert!(parsed > 1_000, "only {parsed} frames parsed");
}

#[test]
fn random_bytes_through_the_hpack_decoder() {
    let mut rng = Rng(7);
    let mut dec = Decoder::new(4096);
    for _ in 0..20_000 {
        let len = rng.below(64);
        let block = rng.bytes(len);
        // One decoder for all blocks: an error may leave it in any state,
        // which must still not panic on the next block.
        let _ = dec.decode(&block, 16 * 1024, |_| {});
    }
}

#[test]
fn mutated_valid_blocks_through_the_hpack_decoder() {
    let mut rng = Rng(99);
    let mut enc = Encoder::new();
    let fields: [(&[u8], &[u8]); 6] = [
        (b":method", b"POST"),
        (b":path", b"/svc.Echo/Call"),
        (b":authority", b"backend.internal:8443"),
        (b"content-type", b"application/grpc"),
        (b"te", b"trailers"),
        (
            b"x-trace",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ),
    ];
    for round in 0..2_000 {
        let mut block = BytesMut::new();
        enc.begin_block(&mut block);
        for (n, v) in fields.iter().take(1 + round % fields.len()) {
            enc.encode_field(n, v, round % 7 == 0, &mut block);
        }
        let mut block = block.to_vec();
        for _ in 0..1 + rng.below(3) {
            let i = rng.below(block.len());
            block[i] ^= 1 << rng.below(8);
        }
        block.truncate(block.len() - rng.below(block.len().min(4)));
        let mut dec = Decoder::new(4096);
        let _ = dec.decode(&block, 16 * 1024, |_| {});
    }
}
