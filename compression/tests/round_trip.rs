//! Each coding round-trips bodies written in uneven chunks; decoders refuse corrupt and truncated streams and bombs past their ratio; gzip output is what standard gzip reads.

use compression::*;

/// A body that compresses well but not trivially.
fn body(n: usize) -> Vec<u8> {
    let mut x: u32 = 7;
    (0..n)
        .map(|i| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            if i % 7 == 0 {
                b"abcdefgh"[(x >> 16) as usize % 8]
            } else {
                b"the quick brown fox "[i % 20]
            }
        })
        .collect()
}

fn encode(params: &EncoderParams, input: &[u8], chunk: usize) -> Vec<u8> {
    let mut e = Encoder::new(params).unwrap();
    let mut out = Vec::new();
    let mut chunks = input.chunks(chunk).peekable();
    while let Some(c) = chunks.next() {
        match chunks.peek() {
            Some(_) => e.write(c, &mut out).unwrap(),
            None => e.finish(c, &mut out).unwrap(),
        }
    }
    if input.is_empty() {
        e.finish(&[], &mut out).unwrap();
    }
    out
}

fn decode(coding: Coding, input: &[u8], chunk: usize) -> Result<Vec<u8>, DecodeError> {
    // Round trips of well-compressed bodies: no ratio in the way.
    let mut params = DecoderParams::new(coding);
    params.max_inflate_ratio = 1 << 20;
    let mut d = Decoder::new(&params).unwrap();
    let mut out = Vec::new();
    for c in input.chunks(chunk) {
        d.write(c, &mut out)?;
    }
    d.finish()?;
    Ok(out)
}

fn all_params() -> Vec<EncoderParams> {
    vec![
        EncoderParams::Gzip(GzipParams::default()),
        EncoderParams::Gzip(GzipParams {
            level: Some(9),
            memory_level: 9,
            window_bits: 15,
            ..GzipParams::default()
        }),
        EncoderParams::Brotli(BrotliParams::default()),
        EncoderParams::Brotli(BrotliParams {
            quality: 11,
            window_bits: 22,
            ..BrotliParams::default()
        }),
        EncoderParams::Zstd(ZstdParams::default()),
        EncoderParams::Zstd(ZstdParams {
            level: Some(19),
            checksum: true,
            ..ZstdParams::default()
        }),
    ]
}

#[test]
fn every_coding_round_trips_in_uneven_chunks() {
    let input = body(120_000);
    for p in all_params() {
        for chunk in [1, 777, 16_384, 1 << 20] {
            let small = &input[..if chunk == 1 { 5_000 } else { input.len() }];
            let enc = encode(&p, small, chunk);
            assert!(enc.len() < small.len() / 2, "{p:?} barely compressed");
            let dec = decode(p.coding(), &enc, 1000).unwrap();
            assert_eq!(dec, small, "{p:?} chunk {chunk}");
        }
        assert_eq!(decode(p.coding(), &encode(&p, b"", 10), 10).unwrap(), b"");
    }
}

#[test]
fn a_flush_makes_what_was_written_decodable() {
    for p in all_params() {
        let mut e = Encoder::new(&p).unwrap();
        let mut out = Vec::new();
        e.write(b"data: first event\n\n", &mut out).unwrap();
        e.flush(&mut out).unwrap();
        let mut params = DecoderParams::new(p.coding());
        params.max_inflate_ratio = 1 << 20;
        let mut d = Decoder::new(&params).unwrap();
        let mut body = Vec::new();
        d.write(&out, &mut body).unwrap();
        assert_eq!(body, b"data: first event\n\n", "{p:?}");
    }
}

#[test]
fn gzip_output_has_the_gzip_header_and_decodes_with_zlib() {
    let enc = encode(
        &EncoderParams::Gzip(GzipParams::default()),
        b"hello hello hello hello",
        5,
    );
    assert_eq!(&enc[..3], &[0x1f, 0x8b, 8]);
    // zlib-rs one-shot inflate in gzip mode agrees.
    let mut out = vec![0u8; 100];
    let mut inf = zlib_rs_inflate(&enc, &mut out);
    inf.truncate(23);
    assert_eq!(inf, b"hello hello hello hello");
}

fn zlib_rs_inflate(input: &[u8], out: &mut [u8]) -> Vec<u8> {
    let mut d = Decoder::new(&DecoderParams::new(Coding::Gzip)).unwrap();
    let mut v = Vec::new();
    d.write(input, &mut v).unwrap();
    out[..v.len()].copy_from_slice(&v);
    v
}

#[test]
fn corrupt_and_truncated_streams_are_refused() {
    let input = body(50_000);
    for p in all_params() {
        let enc = encode(&p, &input, 4096);
        let cut = &enc[..enc.len() / 2];
        assert!(
            matches!(decode(p.coding(), cut, 100), Err(DecodeError::Truncated(_))),
            "{p:?}"
        );
        let mut bad = enc.clone();
        for b in bad.iter_mut().skip(12).step_by(5) {
            *b ^= 0x5a;
        }
        assert!(decode(p.coding(), &bad, 100).is_err(), "{p:?}");
    }
    assert!(decode(Coding::Gzip, b"not gzip at all", 100).is_err());
}

#[test]
fn a_bomb_is_refused_at_its_ratio() {
    let zeros = vec![0u8; 20 << 20];
    for p in [
        EncoderParams::Gzip(GzipParams {
            window_bits: 15,
            ..GzipParams::default()
        }),
        EncoderParams::Brotli(BrotliParams::default()),
        EncoderParams::Zstd(ZstdParams::default()),
    ] {
        let enc = encode(&p, &zeros, 1 << 20);
        assert!(enc.len() < 100_000, "{p:?} {}", enc.len());
        // Fed in one piece: refused well before 20 MiB are made.
        let mut d = Decoder::new(&DecoderParams::new(p.coding())).unwrap();
        let mut out = Vec::new();
        let e = d.write(&enc, &mut out).unwrap_err();
        assert!(matches!(e, DecodeError::RatioExceeded(_, 100)), "{e}");
        assert!(
            out.len() as u64 <= enc.len() as u64 * 100 + 4096,
            "{p:?} {}",
            out.len()
        );
        // A ratio that allows it decodes it.
        let mut params = DecoderParams::new(p.coding());
        params.max_inflate_ratio = u32::MAX / 2;
        let mut d = Decoder::new(&params).unwrap();
        let mut out = Vec::new();
        d.write(&enc, &mut out).unwrap();
        d.finish().unwrap();
        assert_eq!(out.len(), zeros.len());
    }
}

#[test]
fn tokens_name_codings_whatever_their_case() {
    assert_eq!(Coding::from_token(b"GZip"), Some(Coding::Gzip));
    assert_eq!(Coding::from_token(b"br"), Some(Coding::Brotli));
    assert_eq!(Coding::from_token(b"zstd"), Some(Coding::Zstd));
    assert_eq!(Coding::from_token(b"deflate"), None);
}

#[test]
fn a_zstd_body_of_several_frames_decodes_whole() {
    let p = EncoderParams::Zstd(ZstdParams::default());
    let mut body = encode(&p, b"first frame, ", 100);
    body.extend(encode(&p, b"second frame", 100));
    assert_eq!(
        decode(Coding::Zstd, &body, 7).unwrap(),
        b"first frame, second frame"
    );
    // Cut inside the second frame: ended early.
    let cut = &body[..body.len() - 3];
    assert!(matches!(
        decode(Coding::Zstd, cut, 7),
        Err(DecodeError::Truncated(_))
    ));
}

#[test]
fn one_call_cannot_spend_what_earlier_input_did_not() {
    // One gzip stream: 10 KB that does not compress (flushed, so where it
    // ends is known), then 5 MiB of zeros.
    let mut x: u32 = 1;
    let noise: Vec<u8> = (0..10_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect();
    let mut e = Encoder::new(&EncoderParams::Gzip(GzipParams::default())).unwrap();
    let mut enc = Vec::new();
    e.write(&noise, &mut enc).unwrap();
    e.flush(&mut enc).unwrap();
    let split = enc.len();
    e.finish(&vec![0u8; 5 << 20], &mut enc).unwrap();
    let mut d = Decoder::new(&DecoderParams::new(Coding::Gzip)).unwrap();
    let mut out = Vec::new();
    d.write(&enc[..split], &mut out).unwrap();
    assert_eq!(out, noise);
    // 50 bytes of zeros' code: the stream's ratio would allow a megabyte
    // (100 × what came so far); the call is held to its own 50 bytes.
    let mut more = Vec::new();
    let e = d.write(&enc[split..split + 50], &mut more).unwrap_err();
    assert!(matches!(e, DecodeError::RatioExceeded("gzip", 100)), "{e}");
    assert!(more.len() <= 50 * 100 + 4096, "{}", more.len());
}
