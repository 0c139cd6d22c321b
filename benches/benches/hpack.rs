//! HPACK, per header block: `h2wire` (ours) against the `h2` crate's codec
//! (what the gateway runs today), on the same blocks.
//!
//! * `decode/request`: 16 browser-like request blocks as a client's encoder
//!   sends them on one connection (the first mostly literals, the rest mostly
//!   indexed, a fresh `x-request-id` each), decoded by a fresh decoder. Ours
//!   copies every field into a reused header list (what a proxy must keep);
//!   h2 builds its `HeaderName`/`HeaderValue` per field, as it does for the
//!   gateway.
//! * `encode/response`: 16 response blocks (`:status`, `content-type`,
//!   `content-length`, `date`, `server`, `x-backend`) by one encoder.
//!
//! Both sides get their input in their own native form, prepared outside the
//! measured loop.

use std::hint::black_box;
use std::io::Cursor;
use std::ops::ControlFlow;

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use h2::hpack as theirs;
use http::header::HeaderName;

#[path = "hpack_fixtures/mod.rs"]
mod fixtures;
use fixtures::{encoded_requests, h2_header, request, response, BLOCKS};

/// A proxy's per-stream header list: one byte arena and the field bounds.
#[derive(Default)]
struct HeaderList {
    bytes: Vec<u8>,
    fields: Vec<(u32, u32, u32)>,
}

fn bench(c: &mut Criterion) {
    let blocks = encoded_requests(BLOCKS);
    let mut g = c.benchmark_group("hpack");
    g.sample_size(50)
        .throughput(Throughput::Elements(BLOCKS as u64));

    // Both decoders must see the same fields before anything is timed.
    {
        let mut ours = h2wire::hpack::Decoder::new(4096);
        for (i, block) in blocks.iter().enumerate() {
            let mut got = Vec::new();
            ours.decode(block, 64 * 1024, |f| {
                got.push((f.name.to_vec(), f.value.to_vec()))
            })
            .unwrap();
            let want: Vec<_> = request(i)
                .into_iter()
                .map(|(n, v)| (n.as_bytes().to_vec(), v.into_bytes()))
                .collect();
            assert_eq!(got, want, "block {i}");
        }
    }

    let mut list = HeaderList::default();
    g.bench_function("decode/request/h2wire", |b| {
        b.iter(|| {
            let mut dec = h2wire::hpack::Decoder::new(4096);
            for block in &blocks {
                list.bytes.clear();
                list.fields.clear();
                dec.decode(black_box(block), 64 * 1024, |f| {
                    let at = list.bytes.len() as u32;
                    list.bytes.extend_from_slice(f.name);
                    list.bytes.extend_from_slice(f.value);
                    list.fields
                        .push((at, f.name.len() as u32, f.value.len() as u32));
                })
                .unwrap();
            }
            list.fields.len()
        })
    });
    g.bench_function("decode/request/h2", |b| {
        b.iter(|| {
            let mut dec = theirs::Decoder::new(4096);
            let mut n = 0;
            for block in &blocks {
                // h2 decodes from (and splits) a BytesMut it owns.
                let mut src = block.clone();
                dec.decode(&mut Cursor::new(&mut src), |h| {
                    n += 1;
                    black_box(h);
                    ControlFlow::Continue(())
                })
                .unwrap();
            }
            n
        })
    });

    let responses: Vec<Vec<(&'static str, String)>> = (0..BLOCKS).map(response).collect();
    let h2_responses: Vec<Vec<theirs::Header<Option<HeaderName>>>> = responses
        .iter()
        .map(|r| r.iter().map(|(n, v)| h2_header(n, v)).collect())
        .collect();
    let mut dst = BytesMut::with_capacity(16 * 1024);
    g.bench_function("encode/response/h2wire", |b| {
        b.iter(|| {
            let mut enc = h2wire::hpack::Encoder::new();
            dst.clear();
            for r in &responses {
                enc.begin_block(&mut dst);
                for (n, v) in r {
                    enc.encode_field(n.as_bytes(), v.as_bytes(), false, &mut dst);
                }
            }
            dst.len()
        })
    });
    g.bench_function("encode/response/h2", |b| {
        b.iter(|| {
            let mut enc = theirs::Encoder::new(4096, 0);
            dst.clear();
            for r in &h2_responses {
                // h2 consumes its headers; the gateway builds them per
                // response too.
                enc.encode(r.iter().cloned(), &mut dst);
            }
            dst.len()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
