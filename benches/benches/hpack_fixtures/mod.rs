//! Header blocks shared by the `hpack` and `hpack_memory` benches: what a
//! browser sends on one connection, and what a backend answers.

// Each bench including this module uses a part of it.
#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use h2::hpack as theirs;
use http::header::{HeaderName, HeaderValue};

pub const BLOCKS: usize = 16;

pub fn request(i: usize) -> Vec<(&'static str, String)> {
    vec![
        (":method", "GET".into()),
        (":scheme", "https".into()),
        (":authority", "shop.example.com".into()),
        (":path", format!("/api/v1/items?page={}", i % 4)),
        (
            "user-agent",
            "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0".into(),
        ),
        ("accept", "application/json, text/plain, */*".into()),
        ("accept-language", "en-US,en;q=0.5".into()),
        ("accept-encoding", "gzip, deflate, br, zstd".into()),
        ("referer", "https://shop.example.com/cart".into()),
        (
            "cookie",
            "_ga=GA1.2.1234567890.1700000000; theme=dark; lang=en-US".into(),
        ),
        (
            "x-request-id",
            format!("6f1c2a4e-9b7d-4c3a-8e21-{:012x}", 0x5eed_0000 + i),
        ),
    ]
}

pub fn response(i: usize) -> Vec<(&'static str, String)> {
    vec![
        (":status", "200".into()),
        ("content-type", "application/json".into()),
        ("content-length", format!("{}", 1000 + i * 37)),
        (
            "date",
            format!("Sun, 22 Nov 2026 20:{:02}:{:02} GMT", i / 60, i % 60),
        ),
        ("server", "demo-backend".into()),
        ("x-backend", "backend-2".into()),
    ]
}

pub fn h2_header(name: &str, value: &str) -> theirs::Header<Option<HeaderName>> {
    let v = |s: &str| theirs::BytesStr::try_from(Bytes::copy_from_slice(s.as_bytes())).unwrap();
    match name {
        ":method" => theirs::Header::Method(value.parse().unwrap()),
        ":scheme" => theirs::Header::Scheme(v(value)),
        ":authority" => theirs::Header::Authority(v(value)),
        ":path" => theirs::Header::Path(v(value)),
        ":status" => theirs::Header::Status(value.parse().unwrap()),
        _ => theirs::Header::Field {
            name: Some(HeaderName::from_bytes(name.as_bytes()).unwrap()),
            value: HeaderValue::from_str(value).unwrap(),
        },
    }
}

/// `n` request blocks, encoded once by h2's encoder as a client sends them
/// on one connection.
pub fn encoded_requests(n: usize) -> Vec<BytesMut> {
    let mut enc = theirs::Encoder::new(4096, 0);
    (0..n)
        .map(|i| {
            let mut dst = BytesMut::new();
            enc.encode(request(i).iter().map(|(n, v)| h2_header(n, v)), &mut dst);
            dst
        })
        .collect()
}
