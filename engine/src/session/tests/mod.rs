//! Unit tests of the session codec, and the helpers they share.

mod decode;
mod headers;
mod round_trip;

use super::*;
use crate::config::{SessionHeader, SessionState};

const NOW: u64 = 1_699_999_000;

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("test address")
}

fn valid(s: &str) -> SessionValue {
    SessionValue::Valid {
        address: addr(s),
        cluster: None,
    }
}

fn encode(address: &str, ttl: u64, format: CookieFormat) -> String {
    let mut out = String::new();
    encode_cookie_value(
        addr(address),
        Duration::from_secs(ttl),
        NOW,
        format,
        &mut out,
    );
    out
}

fn b64(bytes: &[u8]) -> String {
    let mut out = String::new();
    base64_encode(bytes, &mut out);
    out
}

/// Hand-built `envoy.Cookie` bytes, independent of the encoder.
fn proto(address: &[u8], expires: Option<&[u8]>) -> Vec<u8> {
    let mut p = vec![TAG_ADDRESS, address.len() as u8];
    p.extend_from_slice(address);
    if let Some(varint) = expires {
        p.push(TAG_EXPIRES);
        p.extend_from_slice(varint);
    }
    p
}
