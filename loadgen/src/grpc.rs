//! gRPC unary over h2: message framing, request headers, grpc-status parsing.

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE, TE};
use http::HeaderMap;

/// Length-prefixed message header: 1 byte compressed flag + 4 bytes length.
pub const FRAME_HEADER: usize = 5;

const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");

/// One uncompressed gRPC message frame carrying `len` payload bytes.
/// The payload is zeros: a gateway forwards it opaquely, and a zero-filled
/// buffer is a valid (empty-field) protobuf for many message types.
pub fn frame(len: usize) -> Bytes {
    let mut buf = BytesMut::with_capacity(FRAME_HEADER + len);
    buf.put_u8(0);
    buf.put_u32(u32::try_from(len).expect("gRPC message larger than 4 GiB"));
    buf.put_bytes(0, len);
    buf.freeze()
}

/// Headers a gRPC client must send besides the pseudo headers.
pub fn request_headers() -> [(HeaderName, HeaderValue); 2] {
    [
        (CONTENT_TYPE, HeaderValue::from_static("application/grpc")),
        // Required by gRPC over HTTP/2 to detect trailer-stripping proxies.
        (TE, HeaderValue::from_static("trailers")),
    ]
}

/// The `grpc-status` code in `headers`, if present and numeric.
pub fn status(headers: &HeaderMap) -> Option<u32> {
    let v = headers.get(GRPC_STATUS)?;
    std::str::from_utf8(v.as_bytes()).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing() {
        let f = frame(3);
        assert_eq!(&f[..], &[0, 0, 0, 0, 3, 0, 0, 0]);
        assert_eq!(frame(0).len(), FRAME_HEADER);
    }

    #[test]
    fn status_parse() {
        let mut h = HeaderMap::new();
        assert_eq!(status(&h), None);
        h.insert(GRPC_STATUS, HeaderValue::from_static("14"));
        assert_eq!(status(&h), Some(14));
    }
}
