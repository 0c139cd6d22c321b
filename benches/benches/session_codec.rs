//! Stateful-session cookie codec (engine/src/session.rs), per request:
//!
//! * `find_cookie`: the session cookie among 5 cookies split over 2 `cookie`
//!   fields (as HTTP/2 clients send them), the session cookie last;
//! * `decode_cookie_value`: its value in Envoy's format (base64 of the
//!   `envoy.Cookie` proto with an address and an expiry), quoted;
//! * `find_and_decode`: both, as shards/src/session.rs does;
//! * `set_cookie`: the `set-cookie` value written for a new session (Envoy
//!   format, `Max-Age` and `Path`), and the same in the plain format.

use std::hint::black_box;
use std::net::SocketAddr;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use engine::session::{
    decode_cookie_value, encode_cookie_value, find_cookie, set_cookie, CookieFormat, SessionValue,
};
use engine::SessionCookie;

const NOW: u64 = 1_750_000_000;
const NAME: &str = "global-session-cookie";

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("session_codec");
    g.sample_size(50).throughput(Throughput::Elements(1));
    let address: SocketAddr = "10.1.2.3:8080".parse().unwrap();
    let cookie = SessionCookie {
        name: NAME.into(),
        ttl: Duration::from_secs(120),
        path: Some("/api".into()),
    };

    let mut value = String::new();
    encode_cookie_value(address, cookie.ttl, NOW, CookieFormat::Envoy, &mut value);
    let field1 = b"_ga=GA1.2.1234567890.1700000000; theme=dark; lang=en-US".to_vec();
    let field2 = format!("csrftoken=q8Zx3vN2pL7kR0tY; {NAME}=\"{value}\"").into_bytes();
    let fields: [&[u8]; 2] = [&field1, &field2];
    let raw = find_cookie(fields, NAME).unwrap();
    let valid = SessionValue::Valid {
        address,
        cluster: None,
    };
    assert_eq!(decode_cookie_value(raw, NOW), valid);

    g.bench_function("find_cookie", |b| {
        b.iter(|| find_cookie(black_box(fields), black_box(NAME)))
    });
    g.bench_function("decode_cookie_value/envoy", |b| {
        b.iter(|| decode_cookie_value(black_box(raw), black_box(NOW)))
    });
    g.bench_function("find_and_decode/envoy", |b| {
        b.iter(|| {
            find_cookie(black_box(fields), black_box(NAME))
                .map(|raw| decode_cookie_value(raw, black_box(NOW)))
        })
    });
    for (label, format) in [
        ("set_cookie/envoy", CookieFormat::Envoy),
        ("set_cookie/plain", CookieFormat::Plain),
    ] {
        g.bench_function(label, |b| {
            b.iter(|| {
                set_cookie(
                    black_box(&cookie),
                    black_box(address),
                    black_box(NOW),
                    format,
                )
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
