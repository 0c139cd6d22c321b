//! A client that walks away from a streaming response frees everything it
//! held at once — not when the upstream next sends a byte.

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use support::*;

/// An h2c server that answers with headers and one chunk, then goes quiet
/// for a minute before the next one (a server-streaming RPC, a watch).
fn quiet_streaming_backend() -> SocketAddr {
    support::h2c_server::h2c_server(|_, mut conn| async move {
        while let Some(Ok((_req, mut respond))) = conn.accept().await {
            glommio::spawn_local(async move {
                let mut send = respond.send_response(Response::new(()), false).unwrap();
                let _ = send.send_data(Bytes::from_static(b"first\n"), false);
                glommio::timer::sleep(Duration::from_secs(60)).await;
                let _ = send.send_data(Bytes::from_static(b"late\n"), true);
            })
            .detach();
        }
    })
}

fn gauge(stats: &str, name: &str) -> u64 {
    stats
        .lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or(u64::MAX)
}

#[test]
fn reset_after_response_headers_frees_the_stream_now() {
    let backend = quiet_streaming_backend();
    let (gw, addr) = gateway_for(&[backend], 1);
    let admin = gw.admin_addr.unwrap();
    client(move || async move {
        let c = connect(addr).await;
        for _ in 0..20 {
            let mut s = c.clone().ready().await.unwrap();
            let (resp, _) = s
                .send_request(Request::get("http://x/watch").body(()).unwrap(), true)
                .unwrap();
            let mut body = resp.await.unwrap().into_body();
            let first = body.data().await.unwrap().unwrap();
            assert_eq!(&first[..], b"first\n");
            drop(body); // RST_STREAM(CANCEL) mid-response
        }
    });
    let t0 = Instant::now();
    loop {
        let (_, stats) = admin_get(admin, "/stats");
        let active = gauge(&stats, "gateway_downstream_rq_active ");
        if active == 0 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "{active} abandoned streams still held after 2 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    gw.shutdown();
}
