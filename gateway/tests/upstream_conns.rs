//! How client streams are placed on a host's upstream connections: a client
//! connection's streams share one upstream connection while it has room
//! (their responses then come back, and go out, together), and spill to
//! another when it is full.

mod support;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use demo_backend::BackendOptions;
use h2::client::SendRequest;
use http::StatusCode;
use support::*;

/// Streams the backend allows per connection.
const PER_CONN: usize = 4;

/// `PER_CONN` concurrent slow GETs on `c`; the `x-peer` of each reply (the
/// gateway's upstream connection it went over).
async fn burst(c: &SendRequest<bytes::Bytes>) -> Vec<String> {
    let tasks: Vec<_> = (0..PER_CONN)
        .map(|_| {
            let c = c.clone();
            glommio::spawn_local(async move {
                let r = get(&c, "/", &[("x-echo-peer", "1"), ("x-delay-ms", "300")])
                    .await
                    .expect("reply");
                assert_eq!(r.status, StatusCode::OK);
                r.header("x-peer").expect("x-peer").to_string()
            })
        })
        .collect();
    let mut peers = Vec::new();
    for t in tasks {
        peers.push(t.await);
    }
    peers
}

/// Bursts from clients `a` then `b` (b's starting once a's are in flight);
/// the upstream connections each used.
async fn two_bursts(
    a: &SendRequest<bytes::Bytes>,
    b: &SendRequest<bytes::Bytes>,
) -> (BTreeSet<String>, BTreeSet<String>) {
    let a = a.clone();
    let first = glommio::spawn_local(async move { burst(&a).await });
    glommio::timer::sleep(Duration::from_millis(100)).await;
    let second = burst(b).await;
    let first = first.await;
    (first.into_iter().collect(), second.into_iter().collect())
}

#[test]
fn a_clients_streams_share_one_upstream_connection_while_it_has_room() {
    let mut opts = BackendOptions::new("b");
    opts.max_concurrent_streams = PER_CONN as u32;
    let backend = backend_with(opts);
    let (gw, addr): (_, SocketAddr) = gateway_for(&[backend.addr()], 1);
    let (warm, spread) = client(move || async move {
        let a = connect(addr).await;
        let b = connect(addr).await;
        // The first burst fills one connection, the second opens another.
        let warm = two_bursts(&a, &b).await;
        // Both connections are open and idle now: each client's next
        // burst fits in one of them.
        let spread = two_bursts(&a, &b).await;
        (warm, spread)
    });
    let ups: BTreeSet<_> = warm.0.union(&warm.1).cloned().collect();
    assert_eq!(ups.len(), 2, "two upstream connections opened: {warm:?}");
    let (a, b) = spread;
    assert_eq!(a.len(), 1, "client a's burst spread over {a:?}");
    assert_eq!(b.len(), 1, "client b's burst spread over {b:?}");
    assert_ne!(a, b, "the second client spilled to the other connection");
    gw.shutdown();
}
