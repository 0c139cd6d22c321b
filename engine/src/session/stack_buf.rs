//! A fixed-size stack buffer the session encoders write into without allocating.

/// A fixed stack buffer for the encoders: 128 bytes hold the longest
/// `SocketAddr` text ("[" + 45-char IPv6 + "%" + 10-digit scope + "]:" +
/// 5-digit port = 65) plus the proto framing (2 + 1 + 10 bytes).
pub(super) struct StackBuf {
    buf: [u8; 128],
    len: usize,
}

impl StackBuf {
    pub(super) fn new() -> Self {
        StackBuf {
            buf: [0; 128],
            len: 0,
        }
    }

    pub(super) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Appends all of `bytes`, or nothing when they do not fit.
    pub(super) fn extend(&mut self, bytes: &[u8]) -> bool {
        let end = self.len + bytes.len();
        let Some(dst) = self.buf.get_mut(self.len..end) else {
            debug_assert!(false, "StackBuf overflow");
            return false;
        };
        dst.copy_from_slice(bytes);
        self.len = end;
        true
    }

    pub(super) fn push(&mut self, byte: u8) {
        self.extend(&[byte]);
    }

    pub(super) fn push_varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.push((value as u8 & 0x7F) | 0x80);
            value >>= 7;
        }
        self.push(value as u8);
    }
}

impl std::fmt::Write for StackBuf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.extend(s.as_bytes()) {
            Ok(())
        } else {
            Err(std::fmt::Error)
        }
    }
}
