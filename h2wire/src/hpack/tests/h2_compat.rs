//! Wire compatibility with the `h2` crate's HPACK, both ways, over random
//! but realistic header lists and table size changes, with each side's
//! context kept across blocks so dynamic tables fill, evict and resize.

use std::io::Cursor;
use std::ops::ControlFlow;

use bytes::{Bytes, BytesMut};
use h2::hpack::{Decoder as H2Decoder, Encoder as H2Encoder, Header};
use http::HeaderName;

use super::{decode, decode_limited, encode, Owned};
use crate::hpack::{DecodeError, Decoder, Encoder};
use crate::testing::Rng;

const BLOCKS: usize = 200;

const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const HEX: &[u8] = b"0123456789abcdef";

fn field(name: &str, value: impl Into<Vec<u8>>) -> Owned {
    let sensitive = matches!(name, "authorization" | "proxy-authorization" | "x-api-key");
    (name.as_bytes().to_vec(), value.into(), sensitive)
}

fn request(rng: &mut Rng, out: &mut Vec<Owned>) {
    out.push(field(
        ":method",
        rng.pick(&[
            "GET", "GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH",
        ]),
    ));
    out.push(field(":scheme", rng.pick(&["https", "https", "http"])));
    let mut path = rng
        .pick(&[
            "/",
            "/index.html",
            "/api/v1/users",
            "/static/app.js",
            "/img/logo.png",
        ])
        .as_bytes()
        .to_vec();
    if rng.chance(40) {
        path.extend_from_slice(b"?q=");
        let n = rng.below(40);
        path.extend(rng.text(n, ALNUM));
    }
    out.push(field(":path", path));
    out.push(field(
        ":authority",
        rng.pick(&["www.example.com", "api.example.com", "cdn.example.net:8443"]),
    ));
    for _ in 0..rng.below(12) {
        let f = match rng.below(16) {
            0 => field(
                "user-agent",
                rng.pick(&[
                    "curl/8.5.0",
                    "Mozilla/5.0 (X11; Linux x86_64) Gecko/20100101 Firefox/121.0",
                ]),
            ),
            1 => field(
                "accept",
                rng.pick(&["*/*", "text/html,application/xhtml+xml", "application/json"]),
            ),
            2 => field(
                "accept-encoding",
                rng.pick(&["gzip, deflate", "gzip, deflate, br", "identity"]),
            ),
            3 => field("accept-language", "en-US,en;q=0.9"),
            4 => field("cache-control", rng.pick(&["no-cache", "max-age=0"])),
            5 => {
                let n = 20 + rng.below(100);
                let mut v = b"session=".to_vec();
                v.extend(rng.text(n, ALNUM));
                field("cookie", v)
            }
            6 => field("x-request-id", rng.text(32, HEX)),
            7 => field(
                "x-forwarded-for",
                format!(
                    "10.{}.{}.{}",
                    rng.below(256),
                    rng.below(256),
                    rng.below(256)
                ),
            ),
            8 => {
                let mut v = b"Bearer ".to_vec();
                v.extend(rng.text(40, ALNUM));
                field("authorization", v)
            }
            9 => field(
                rng.pick(&["x-api-key", "proxy-authorization"]),
                rng.text(24, ALNUM),
            ),
            10 => {
                let n = rng.below(60);
                field(
                    rng.pick(&["x-custom-a", "x-custom-b", "x-custom-c"]),
                    rng.wide(n),
                )
            }
            11 => {
                let n = 500 + rng.below(4500);
                field("x-long", rng.wide(n))
            }
            12 => field("content-length", rng.below(100_000).to_string()),
            13 => field(
                "content-type",
                rng.pick(&["application/json", "text/plain; charset=utf-8"]),
            ),
            14 => field("te", "trailers"),
            _ => field(rng.pick(&["x-empty", "accept-charset"]), ""),
        };
        out.push(f);
    }
}

fn response(rng: &mut Rng, out: &mut Vec<Owned>) {
    out.push(field(
        ":status",
        rng.pick(&[
            "200", "200", "204", "206", "304", "400", "404", "500", "301", "302", "503",
        ]),
    ));
    for _ in 0..rng.below(10) {
        let f = match rng.below(10) {
            0 => field(
                "content-type",
                rng.pick(&["text/html; charset=utf-8", "application/json", "image/png"]),
            ),
            1 => field("content-length", rng.below(1_000_000).to_string()),
            2 => field(
                "date",
                format!("Mon, 21 Oct 2013 20:13:{:02} GMT", rng.below(60)),
            ),
            3 => field("server", rng.pick(&["gateway", "nginx"])),
            4 => {
                let n = 10 + rng.below(200);
                let mut v = b"id=".to_vec();
                v.extend(rng.text(n, ALNUM));
                v.extend_from_slice(b"; Path=/; HttpOnly");
                field("set-cookie", v)
            }
            5 => field(
                "etag",
                format!("\"{}\"", String::from_utf8(rng.text(16, HEX)).unwrap()),
            ),
            6 => field("vary", rng.pick(&["accept-encoding", "origin"])),
            7 => field(
                "location",
                rng.pick(&["https://www.example.com/", "/login"]),
            ),
            8 => field(
                "cache-control",
                rng.pick(&["private", "public, max-age=3600", "no-store"]),
            ),
            _ => {
                let n = 1000 + rng.below(3000);
                field("x-long", rng.wide(n))
            }
        };
        out.push(f);
    }
}

fn header_list(rng: &mut Rng) -> Vec<Owned> {
    let mut out = Vec::new();
    if rng.chance(65) {
        request(rng, &mut out);
    } else {
        response(rng, &mut out);
    }
    out
}

/// SETTINGS_HEADER_TABLE_SIZE changes before some blocks: none mostly, one,
/// or down then up.
fn size_changes(rng: &mut Rng) -> Vec<usize> {
    const SIZES: [usize; 8] = [4096, 0, 256, 1024, 100, 8192, 2048, 4096];
    match rng.below(20) {
        0 | 1 => vec![SIZES[rng.below(SIZES.len())]],
        2 => vec![SIZES[1 + rng.below(4)], 4096],
        _ => vec![],
    }
}

fn to_h2((name, value, sensitive): &Owned) -> Header<Option<HeaderName>> {
    let h = Header::<HeaderName>::new(Bytes::copy_from_slice(name), Bytes::copy_from_slice(value))
        .expect("valid header");
    match h {
        Header::Field { name, mut value } => {
            value.set_sensitive(*sensitive);
            Header::Field {
                name: Some(name),
                value,
            }
        }
        other => other.into(),
    }
}

fn h2_decode(d: &mut H2Decoder, block: &BytesMut) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut buf = block.clone();
    let mut out = Vec::new();
    d.decode(&mut Cursor::new(&mut buf), |h| {
        out.push((h.name().as_slice().to_vec(), h.value_slice().to_vec()));
        ControlFlow::Continue(())
    })
    .expect("h2 decodes our block");
    out
}

#[test]
fn h2_encoded_blocks_decode_with_ours() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut theirs = H2Encoder::new(4096, 0);
    let mut ours = Decoder::new(4096);
    let mut max_seen = 0;
    for i in 0..BLOCKS {
        for n in size_changes(&mut rng) {
            theirs.update_max_size(n);
            ours.set_max_table_size(n);
        }
        let list = header_list(&mut rng);
        let mut block = BytesMut::new();
        theirs.encode(list.iter().map(to_h2), &mut block);
        // Sensitive fields come back flagged never-indexed.
        assert_eq!(decode(&mut ours, &block).unwrap(), list, "block {i}");
        max_seen = max_seen.max(ours.table_size());
    }
    assert!(
        max_seen > 3000,
        "the dynamic table was exercised: {max_seen}"
    );
}

#[test]
fn our_blocks_decode_with_h2() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut ours = Encoder::new();
    let mut theirs = H2Decoder::new(4096);
    let mut indexed = 0;
    for i in 0..BLOCKS {
        for n in size_changes(&mut rng) {
            ours.set_max_table_size(n);
            theirs.queue_size_update(n);
        }
        let list = header_list(&mut rng);
        let block = encode(&mut ours, &list);
        let want: Vec<_> = list
            .iter()
            .map(|(n, v, _)| (n.clone(), v.clone()))
            .collect();
        assert_eq!(h2_decode(&mut theirs, &block), want, "block {i}");
        indexed += block.iter().filter(|&&b| b >= 0xbe).count();
    }
    assert!(indexed > 100, "dynamic entries were referenced");
}

#[test]
fn every_value_byte_both_ways() {
    let value: Vec<u8> = (0x20..=0x7e).chain(0x80..=0xff).chain([b'\t']).collect();
    // Sensitive first: h2 would send the second as an index to the first.
    let list = vec![
        (b"x-bytes".to_vec(), value.clone(), true),
        (b"x-bytes".to_vec(), value, false),
    ];
    let block = encode(&mut Encoder::new(), &list);
    let want: Vec<_> = list
        .iter()
        .map(|(n, v, _)| (n.clone(), v.clone()))
        .collect();
    assert_eq!(h2_decode(&mut H2Decoder::new(4096), &block), want);
    let mut block = BytesMut::new();
    H2Encoder::new(4096, 0).encode(list.iter().map(to_h2), &mut block);
    assert_eq!(decode(&mut Decoder::new(4096), &block).unwrap(), list);
}

#[test]
fn ours_with_list_limits_stays_in_step() {
    // Random list size limits refuse some blocks part-way; the tables must
    // stay in step regardless.
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let mut e = Encoder::new();
    let mut d = Decoder::new(4096);
    let mut refused = 0;
    for i in 0..BLOCKS {
        for n in size_changes(&mut rng) {
            e.set_max_table_size(n);
            d.set_max_table_size(n);
        }
        let list = header_list(&mut rng);
        let total: usize = list.iter().map(|(n, v, _)| 32 + n.len() + v.len()).sum();
        let limit = if rng.chance(30) {
            rng.below(total + 1)
        } else {
            usize::MAX
        };
        let block = encode(&mut e, &list);
        let mut got = Vec::new();
        let res = d.decode(&block, limit, |f| {
            got.push((f.name.to_vec(), f.value.to_vec(), f.never_index))
        });
        if total > limit {
            assert_eq!(res, Err(DecodeError::HeaderListTooLarge), "block {i}");
            assert!(
                got.len() < list.len() && list.starts_with(&got),
                "block {i}"
            );
            refused += 1;
        } else {
            res.unwrap();
            assert_eq!(got, list, "block {i}");
        }
        assert_eq!(d.table_size(), e.table().size(), "block {i}");
        // Indexing what was just sent proves the entries match too.
        let again = encode(&mut e, &list);
        assert_eq!(
            decode_limited(&mut d, &again, usize::MAX).unwrap(),
            list,
            "block {i} again"
        );
    }
    assert!(refused > 20, "{refused}");
}
