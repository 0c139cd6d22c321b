//! The compressor and decompressor filters: Envoy's gzip example (JSON compressed, text not, a gzip upload decoded), `accept-encoding` negotiated among gzip, brotli and zstd compressors, the response's fields (`vary`, `etag`, `content-length`), what is never compressed, streamed bodies, and a compression bomb through the decompressor, bounded and counted. Expected answers are Envoy 1.40's to the same bootstrap and requests (recorded 2026-11-28).

mod support;

use std::net::SocketAddr;

use compression::{Coding, Decoder, DecoderParams, Encoder, EncoderParams, GzipParams};
use support::h1_backend::{H1Answer, H1Backend, H1Request};
use support::h1_client::*;
use support::*;

/// A JSON body of `n` bytes that compresses well.
fn json(n: usize) -> Vec<u8> {
    let mut out = b"[".to_vec();
    let mut i = 0;
    while out.len() < n - 40 {
        out.extend_from_slice(format!("{{\"id\":{i},\"name\":\"item{i}\"}},").as_bytes());
        i += 1;
    }
    out.resize(n - 1, b' ');
    out.push(b']');
    out
}

fn decode(coding: Coding, body: &[u8]) -> Vec<u8> {
    let mut params = DecoderParams::new(coding);
    params.max_inflate_ratio = 1 << 20;
    let mut d = Decoder::new(&params).unwrap();
    let mut out = Vec::new();
    d.write(body, &mut out).unwrap();
    d.finish().unwrap();
    out
}

fn gzip(body: &[u8]) -> Vec<u8> {
    let mut e = Encoder::new(&EncoderParams::Gzip(GzipParams {
        window_bits: 15,
        ..GzipParams::default()
    }))
    .unwrap();
    let mut out = Vec::new();
    e.finish(body, &mut out).unwrap();
    out
}

/// The backend of the cases below, by path.
fn answer(r: &H1Request) -> H1Answer {
    let path = r.target.split('?').next().unwrap_or("");
    let with = |ct: &str, extra: &str, body: &[u8]| {
        let mut head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: {ct}\r\ncontent-length: {}\r\nx-seen-ae: {}\r\n{extra}\r\n",
            body.len(),
            r.field("accept-encoding").unwrap_or("-")
        )
        .into_bytes();
        head.extend_from_slice(body);
        H1Answer::raw(head)
    };
    let body = json(10_000);
    match path {
        "/file.json" => with("application/json", "", &body),
        "/file.txt" => with("text/plain", "", &body),
        "/small" => with("text/plain", "", b"tiny"),
        "/etag" => with("text/plain", "etag: \"v1\"\r\n", &body),
        "/weak" => with("text/plain", "etag: W/\"v1\"\r\n", &body),
        "/vary" => with("text/plain", "vary: Origin\r\n", &body),
        "/encoded" => with("text/plain", "content-encoding: identity\r\n", &body),
        "/no-transform" => with(
            "text/plain",
            "cache-control: public, no-transform\r\n",
            &body,
        ),
        "/png" => with("image/png", "", &body),
        "/chunked" => {
            let mut raw =
                b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ntransfer-encoding: chunked\r\n\r\n"
                    .to_vec();
            for part in body.chunks(3000) {
                raw.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
                raw.extend_from_slice(part);
                raw.extend_from_slice(b"\r\n");
            }
            raw.extend_from_slice(b"0\r\n\r\n");
            H1Answer::raw(raw)
        }
        "/upload" => with(
            "text/plain",
            &format!(
                "decompressed-size: {}\r\nx-seen-ce: {}\r\n",
                r.body.len(),
                r.field("content-encoding").unwrap_or("-")
            ),
            b"",
        ),
        "/bomb" => {
            let bomb = gzip(&vec![0u8; 10 << 20]);
            with(
                "application/octet-stream",
                "content-encoding: gzip\r\n",
                &bomb,
            )
        }
        "/corrupt" => {
            let mut g = gzip(&body);
            let n = g.len();
            g[n / 2..].iter_mut().for_each(|b| *b ^= 0x55);
            with("text/plain", "content-encoding: gzip\r\n", &g)
        }
        _ => with("text/plain", "", &body),
    }
}

fn start_with(
    filters: &str,
    backend: SocketAddr,
) -> (gateway::GatewayHandle, SocketAddr, SocketAddr) {
    let bootstrap = support::yaml::filters_bootstrap(
        "",
        filters,
        &support::yaml::one_route("service", ""),
        &support::yaml::h1_cluster("service", backend),
    )
    .expect("bootstrap");
    let gw = start(bootstrap, 1);
    let addr = gw.listener("ingress").expect("listener");
    let admin = gw.admin_addr.expect("admin");
    (gw, addr, admin)
}

/// The filters of Envoy's gzip example (envoyproxy/examples gzip/envoy.yaml).
const GZIP_EXAMPLE: &str = r#"          - name: envoy.filters.http.compressor
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.compressor.v3.Compressor
              response_direction_config:
                common_config:
                  min_content_length: 100
                  content_type: [application/json]
                disable_on_etag_header: true
              compressor_library:
                name: text_optimized
                typed_config:
                  "@type": type.googleapis.com/envoy.extensions.compression.gzip.compressor.v3.Gzip
                  memory_level: 3
                  window_bits: 10
          - name: envoy.filters.http.decompressor
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.decompressor.v3.Decompressor
              decompressor_library:
                name: upload
                typed_config:
                  "@type": "type.googleapis.com/envoy.extensions.compression.gzip.decompressor.v3.Gzip"
                  window_bits: 9
                  chunk_size: 8192
                  max_inflate_ratio: 1000
              response_direction_config:
                common_config:
                  enabled: { default_value: false, runtime_key: response_decompressor_enabled }"#;

#[test]
fn the_gzip_example_answers_as_envoy() {
    let be = H1Backend::start(answer);
    let (_gw, addr, admin) = start_with(GZIP_EXAMPLE, be.addr());
    let gz = "Accept-Encoding: gzip\r\n";

    let j = h1_get(addr, "x", "/file.json", gz);
    assert_eq!(j.status, 200);
    assert_eq!(j.header("content-encoding"), Some("gzip"));
    assert_eq!(j.header("vary"), Some("Accept-Encoding"));
    assert_eq!(j.header("content-length"), None);
    assert_eq!(j.header("transfer-encoding"), Some("chunked"));
    assert!(j.body.len() < 2_000, "{}", j.body.len());
    assert_eq!(decode(Coding::Gzip, &j.body), json(10_000));
    // The client's accept-encoding goes upstream unchanged.
    assert_eq!(j.header("x-seen-ae"), Some("gzip"));

    // A request with a body: judged by its accept-encoding all the same.
    let posted = h1_post(addr, "x", "/file.json", gz, &[b'x'; 70_000]);
    assert_eq!(posted.header("content-encoding"), Some("gzip"));
    assert_eq!(decode(Coding::Gzip, &posted.body), json(10_000));

    let t = h1_get(addr, "x", "/file.txt", gz);
    assert_eq!(t.header("content-encoding"), None);
    assert_eq!(t.header("vary"), None);
    assert_eq!(t.body, json(10_000));

    // An upload in gzip reaches the backend decoded.
    let compressed = gzip(&json(1 << 20));
    let up = h1_post(
        addr,
        "x",
        "/upload",
        "Content-Encoding: gzip\r\n",
        &compressed,
    );
    assert_eq!(up.header("decompressed-size"), Some("1048576"));
    assert_eq!(up.header("x-seen-ce"), Some("-"));

    let (_, stats) = admin_get(admin, "/stats");
    for line in [
        "gateway_compressor_total{outcome=\"compressed\"} 2\n",
        "gateway_compressor_total{outcome=\"header_compressor_used\"} 2\n",
        "gateway_decompressor_total{outcome=\"request_decompressed\"} 1\n",
    ] {
        assert!(stats.contains(line), "{line}: {stats}");
    }
    // Under Envoy's names: the library's name and coding in the metric's.
    let hcm = "{envoy_http_conn_manager_prefix=\"ingress\"}";
    for (series, v) in [
        ("envoy_http_compressor_text_optimized_gzip_compressed", 2.0),
        (
            "envoy_http_compressor_text_optimized_gzip_header_compressor_used",
            2.0,
        ),
        (
            "envoy_http_compressor_text_optimized_gzip_request_compressed",
            0.0,
        ),
        (
            "envoy_http_decompressor_upload_gzip_request_decompressed",
            1.0,
        ),
        (
            "envoy_http_decompressor_upload_gzip_request_total_compressed_bytes",
            compressed.len() as f64,
        ),
        (
            "envoy_http_decompressor_upload_gzip_request_total_uncompressed_bytes",
            1048576.0,
        ),
        (
            "envoy_http_decompressor_upload_gzip_response_decompressed",
            0.0,
        ),
    ] {
        assert_eq!(
            envoy_metric(admin, &format!("{series}{hcm}")),
            v,
            "{series}"
        );
    }
}

/// gzip, brotli and zstd compressors, Envoy's defaults.
const THREE: &str = r#"          - name: gzip
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.compressor.v3.Compressor
              compressor_library:
                name: gzip
                typed_config: { "@type": type.googleapis.com/envoy.extensions.compression.gzip.compressor.v3.Gzip }
          - name: br
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.compressor.v3.Compressor
              compressor_library:
                name: br
                typed_config: { "@type": type.googleapis.com/envoy.extensions.compression.brotli.compressor.v3.Brotli }
          - name: zstd
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.compressor.v3.Compressor
              compressor_library:
                name: zstd
                typed_config: { "@type": type.googleapis.com/envoy.extensions.compression.zstd.compressor.v3.Zstd }"#;

#[test]
fn three_compressors_negotiate_as_envoy() {
    let be = H1Backend::start(answer);
    let (_gw, addr, _) = start_with(THREE, be.addr());
    let body = json(10_000);
    for (accept, want) in [
        ("gzip", Some(Coding::Gzip)),
        ("br", Some(Coding::Brotli)),
        ("zstd", Some(Coding::Zstd)),
        ("gzip, br", Some(Coding::Gzip)),
        ("br, gzip", Some(Coding::Brotli)),
        ("br;q=0.5, gzip", Some(Coding::Gzip)),
        ("*", Some(Coding::Gzip)),
        ("*, gzip;q=0", Some(Coding::Brotli)),
        ("identity, br", None),
        ("BR", None),
        ("gzip;q=abc", None),
        (",,;;;q=,", None),
    ] {
        let r = h1_get(
            addr,
            "x",
            "/file.txt",
            &format!("Accept-Encoding: {accept}\r\n"),
        );
        assert_eq!(r.header("vary"), Some("Accept-Encoding"), "{accept}");
        match want {
            Some(c) => {
                assert_eq!(r.header("content-encoding"), Some(c.token()), "{accept}");
                assert_eq!(decode(c, &r.body), body, "{accept}");
            }
            None => {
                assert_eq!(r.header("content-encoding"), None, "{accept}");
                assert_eq!(r.header("content-length"), Some("10000"), "{accept}");
                assert_eq!(r.body, body, "{accept}");
            }
        }
    }
}

#[test]
fn the_response_fields_and_what_is_never_compressed() {
    let be = H1Backend::start(answer);
    let (_gw, addr, admin) = start_with(THREE, be.addr());
    let gz = "Accept-Encoding: gzip\r\n";
    // A strong etag no longer names the bytes: dropped; a weak one stays.
    let strong = h1_get(addr, "x", "/etag", gz);
    assert_eq!(strong.header("content-encoding"), Some("gzip"));
    assert_eq!(strong.header("etag"), None);
    let weak = h1_get(addr, "x", "/weak", gz);
    assert_eq!(weak.header("etag"), Some("W/\"v1\""));
    // vary is merged.
    let vary = h1_get(addr, "x", "/vary", gz);
    assert_eq!(vary.header("vary"), Some("Origin, Accept-Encoding"));
    // Streamed (chunked) bodies are compressed as they come.
    let chunked = h1_get(addr, "x", "/chunked", "Accept-Encoding: br\r\n");
    assert_eq!(chunked.header("content-encoding"), Some("br"));
    assert_eq!(decode(Coding::Brotli, &chunked.body), json(10_000));
    // Never: already encoded, no-transform, not a compressed type, too
    // short, HEAD.
    for path in ["/encoded", "/no-transform", "/png", "/small"] {
        let r = h1_get(addr, "x", path, gz);
        assert_eq!(
            r.header("content-encoding").filter(|e| *e == "gzip"),
            None,
            "{path}"
        );
        assert_eq!(r.header("vary"), None, "{path}");
    }
    let (mut s, mut rd) = open(addr);
    use std::io::Write;
    s.write_all(b"HEAD /file.txt HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
        .unwrap();
    let head = read_response(&mut rd, true);
    assert_eq!(head.header("content-encoding"), None);
    assert_eq!(head.header("content-length"), Some("10000"));
    assert_eq!(head.header("vary"), Some("Accept-Encoding"));

    let (_, stats) = admin_get(admin, "/stats");
    assert!(
        stats.contains("gateway_compressor_total{outcome=\"content_length_too_small\"} 3\n"),
        "{stats}"
    );
}

/// A response decompressor: a bomb is cut at its ratio, a corrupt body
/// ends early; both answered 200 as Envoy does, and counted.
#[test]
fn bombs_and_corrupt_bodies_are_bounded_and_counted() {
    let be = H1Backend::start(answer);
    let filters = r#"          - name: envoy.filters.http.decompressor
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.decompressor.v3.Decompressor
              decompressor_library:
                name: gzipd
                typed_config: { "@type": "type.googleapis.com/envoy.extensions.compression.gzip.decompressor.v3.Gzip" }"#;
    let (_gw, addr, admin) = start_with(filters, be.addr());
    let bomb = h1_get(addr, "x", "/bomb", "");
    assert_eq!(bomb.status, 200);
    assert_eq!(bomb.header("content-encoding"), None);
    // 10 MiB of zeros behind ~10 KB of gzip: cut at 100 × what came in
    // so far (plus the chunk that crossed the line).
    let compressed = gzip(&vec![0u8; 10 << 20]).len();
    assert!(
        bomb.body.len() <= compressed * 100 + 4096,
        "{}",
        bomb.body.len()
    );
    assert!(bomb.body.len() >= 100_000, "{}", bomb.body.len());
    assert!(bomb.body.iter().all(|&b| b == 0));

    let corrupt = h1_get(addr, "x", "/corrupt", "");
    assert_eq!(corrupt.status, 200);
    assert!(corrupt.body.len() < 10_000);
    assert_eq!(&corrupt.body[..], &json(10_000)[..corrupt.body.len()]);

    // The gateway still serves the next request on that connection.
    let after = h1_get(addr, "x", "/file.txt", "");
    assert_eq!(after.body, json(10_000));
    // The decompressor said it takes gzip.
    assert_eq!(after.header("x-seen-ae"), Some("gzip"));

    let (_, stats) = admin_get(admin, "/stats");
    for line in [
        "gateway_decompressor_total{outcome=\"ratio_exceeded\"} 1\n",
        "gateway_decompressor_total{outcome=\"decode_errors\"} 1\n",
        "gateway_decompressor_total{outcome=\"response_decompressed\"} 2\n",
    ] {
        assert!(stats.contains(line), "{line}: {stats}");
    }
}

#[test]
fn bad_compressor_configs_are_refused_by_name() {
    let bad = |library: &str| {
        let filters = format!(
            r#"          - name: c
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.compressor.v3.Compressor
              compressor_library:
                name: lib
                typed_config: {library}"#
        );
        support::yaml::filters_bootstrap(
            "",
            &filters,
            &support::yaml::one_route("s", ""),
            &support::yaml::h1_cluster("s", "127.0.0.1:1".parse().unwrap()),
        )
        .expect_err("refused")
        .to_string()
    };
    let e = bad(
        r#"{ "@type": type.googleapis.com/envoy.extensions.compression.gzip.compressor.v3.Gzip, memory_level: 0 }"#,
    );
    assert!(e.contains("memory_level: 0 is out of range 1..=9"), "{e}");
    let e = bad(
        r#"{ "@type": type.googleapis.com/envoy.extensions.compression.gzip.compressor.v3.Gzip, window_bits: 16 }"#,
    );
    assert!(e.contains("window_bits"), "{e}");
    let e = bad(
        r#"{ "@type": type.googleapis.com/envoy.extensions.compression.brotli.compressor.v3.Brotli, quality: 12 }"#,
    );
    assert!(e.contains("quality"), "{e}");
    let e = bad(
        r#"{ "@type": type.googleapis.com/envoy.extensions.compression.gzip.decompressor.v3.Gzip }"#,
    );
    assert!(e.contains("not supported"), "{e}");
}
