//! gRPC message framing (`compressed flag, u32 length, bytes`) for the ADS
//! stream, with a bound on message size.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Largest DiscoveryResponse we accept. Big EDS pushes (10,000 endpoints)
/// are about 0.5 MiB; anything near this bound is a broken peer.
pub const MAX_MESSAGE: usize = 64 << 20;

/// Frames one message.
pub fn encode(msg: &impl prost::Message) -> Bytes {
    let len = msg.encoded_len();
    let mut buf = BytesMut::with_capacity(5 + len);
    buf.put_u8(0);
    buf.put_u32(len as u32);
    // Cannot fail: the buffer has the capacity `encoded_len` asked for.
    let _ = msg.encode(&mut buf);
    buf.freeze()
}

/// Reassembles messages from DATA frames of any size.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: BytesMut,
}

impl Decoder {
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The next complete message, if any.
    pub fn next_message(&mut self) -> Result<Option<Bytes>, String> {
        if self.buf.len() < 5 {
            return Ok(None);
        }
        if self.buf[0] != 0 {
            return Err("compressed gRPC messages are not supported".into());
        }
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
        if len > MAX_MESSAGE {
            return Err(format!("gRPC message of {len} bytes exceeds {MAX_MESSAGE}"));
        }
        if self.buf.len() < 5 + len {
            self.buf.reserve(5 + len - self.buf.len());
            return Ok(None);
        }
        self.buf.advance(5);
        Ok(Some(self.buf.split_to(len).freeze()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use xds::pb::envoy::service::discovery::v3::DiscoveryRequest;

    #[test]
    fn messages_split_and_joined_across_frames() {
        let a = DiscoveryRequest {
            type_url: "a".repeat(300),
            ..Default::default()
        };
        let b = DiscoveryRequest {
            version_info: "v2".into(),
            ..Default::default()
        };
        let mut wire = encode(&a).to_vec();
        wire.extend_from_slice(&encode(&b));
        let mut d = Decoder::default();
        let mut got = Vec::new();
        for chunk in wire.chunks(7) {
            d.push(chunk);
            while let Some(m) = d.next_message().unwrap() {
                got.push(DiscoveryRequest::decode(m).unwrap());
            }
        }
        assert_eq!(got, [a, b]);
    }

    #[test]
    fn oversized_and_compressed_messages_are_errors() {
        let mut d = Decoder::default();
        d.push(&[0, 0xff, 0xff, 0xff, 0xff]);
        assert!(d.next_message().is_err());
        let mut d = Decoder::default();
        d.push(&[1, 0, 0, 0, 1, 0]);
        assert!(d.next_message().is_err());
    }
}
