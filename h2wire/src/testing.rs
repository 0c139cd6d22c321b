//! Helpers the unit tests share: deterministic random generators, so a failure replays from its seed.

/// xorshift64: deterministic, so a failure replays from its seed.
pub(crate) struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }

    pub fn text(&mut self, len: usize, alphabet: &[u8]) -> Vec<u8> {
        (0..len)
            .map(|_| alphabet[self.below(alphabet.len())])
            .collect()
    }

    /// Visible ASCII, the rare punctuation with long Huffman codes, and
    /// bytes above 0x7f (valid in field values, 19–27-bit codes).
    pub fn wide(&mut self, len: usize) -> Vec<u8> {
        (0..len)
            .map(|_| match self.below(10) {
                0 => b"\\{}^~<>`|[]@$#"[self.below(14)],
                1 => 0x80 + self.below(0x80) as u8,
                _ => 0x20 + self.below(0x5f) as u8,
            })
            .collect()
    }
}

/// xorshift64*, the generator `conn`'s arbitrary-frames test was written
/// with: kept beside [`Rng`] so that its seeds still give the same frames.
pub(crate) struct StarRng(pub u64);

impl StarRng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
