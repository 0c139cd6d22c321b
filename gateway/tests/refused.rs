//! Streams an upstream refuses before processing them (RST_STREAM
//! REFUSED_STREAM) are resent, so the client never sees the refusal.

mod support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use h2::Reason;
use http::{Response, StatusCode};
use support::*;

/// An h2c server that refuses every other stream it sees.
fn refusing_backend() -> (SocketAddr, Arc<AtomicU64>) {
    let refused = Arc::new(AtomicU64::new(0));
    let count = Arc::clone(&refused);
    let addr = support::h2c_server::h2c_server(move |_, mut conn| {
        let count = Arc::clone(&count);
        async move {
            let mut n = 0u64;
            while let Some(Ok((_req, mut respond))) = conn.accept().await {
                n += 1;
                if n % 2 == 1 {
                    count.fetch_add(1, Ordering::Relaxed);
                    respond.send_reset(Reason::REFUSED_STREAM);
                } else {
                    let _ = respond.send_response(Response::new(()), true);
                }
            }
        }
    });
    (addr, refused)
}

#[test]
fn refused_streams_are_resent() {
    let (backend, refused) = refusing_backend();
    let (gw, addr) = gateway_for(&[backend], 1);
    let statuses = client(move || async move {
        let c = connect(addr).await;
        let mut out = Vec::new();
        for _ in 0..20 {
            out.push(get(&c, "/", &[]).await.map(|r| r.status).ok());
        }
        out
    });
    assert!(
        statuses.iter().all(|s| *s == Some(StatusCode::OK)),
        "{statuses:?}"
    );
    assert!(
        refused.load(Ordering::Relaxed) >= 20,
        "the backend did refuse"
    );
    let (_, stats) = admin_get(gw.admin_addr.unwrap(), "/stats");
    let line = format!("gateway_upstream_rq_retry_refused{{cluster=\"c\",host=\"{backend}\"}} 20");
    assert!(stats.contains(&line), "{stats}");
    gw.shutdown();
}

/// An h2c server whose first connection takes `drop_after` streams and
/// then closes without answering any; later connections answer 200.
fn dropping_backend(drop_after: usize) -> SocketAddr {
    support::h2c_server::h2c_server(move |n, mut conn| async move {
        let mut held = Vec::new();
        while let Some(Ok((req, mut respond))) = conn.accept().await {
            if n == 0 {
                held.push((req, respond));
                if held.len() == drop_after {
                    return; // drops the connection unanswered
                }
            } else {
                let _ = respond.send_response(Response::new(()), true);
            }
        }
    })
}

/// A shared upstream connection that dies under its streams: idempotent
/// bodiless requests are retried once on another connection (and
/// counted), within the cluster's `max_retries` (raised here above
/// Envoy's 3 to let all four retry); a POST is not, and fails as an
/// upstream reset.
#[test]
fn idempotent_requests_survive_a_dying_upstream_connection() {
    let backend = dropping_backend(5);
    let mut c = (*cluster("c", &[backend])).clone();
    c.circuit_breakers.default.max_retries = 4;
    let gw = start(
        bootstrap(
            listener(vec![prefix_route("/", "c", None)]),
            vec![Arc::new(c)],
        ),
        1,
    );
    let addr = gw.listener("ingress").expect("listener bound");
    let statuses = client(move || async move {
        let c = connect(addr).await;
        let mut tasks = Vec::new();
        for method in ["GET", "HEAD", "DELETE", "GET", "POST"] {
            let c = c.clone();
            tasks.push(glommio::spawn_local(async move {
                let body = (method == "POST").then(|| bytes::Bytes::from_static(b"x"));
                let r = request(&c, method, "/", &[], body, None).await;
                (method, r.map(|r| r.status.as_u16()).ok())
            }));
        }
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await);
        }
        out
    });
    for (method, status) in &statuses {
        // The POST is not sent again: Envoy's 503 for a connection that
        // ended before the answer (`connection termination`, UC).
        let want = if *method == "POST" { 503 } else { 200 };
        assert_eq!(*status, Some(want), "{method}: {statuses:?}");
    }
    let (_, stats) = admin_get(gw.admin_addr.unwrap(), "/stats");
    let line = format!("gateway_upstream_rq_retry_conn_lost{{cluster=\"c\",host=\"{backend}\"}} 4");
    assert!(stats.contains(&line), "{stats}");
    gw.shutdown();
}
