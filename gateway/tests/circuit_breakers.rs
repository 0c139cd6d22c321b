//! Circuit breakers (`circuit_breakers.thresholds`): requests past
//! `max_requests`, or past `max_pending_requests` while `max_connections`
//! holds them back, get Envoy's 503 with `x-envoy-overloaded`, and what
//! they held comes back when they end.

mod support;

use std::net::SocketAddr;

use support::*;

/// Listener `ingress` → cluster `web` (HTTP/2) at `backend`, with `extra`
/// cluster fields.
fn bootstrap(backend: SocketAddr, extra: &str) -> engine::Bootstrap {
    let ep = yaml::endpoint(&backend.ip().to_string(), backend.port(), "");
    yaml::web_bootstrap(
        "",
        &format!("{extra}\n    load_assignment: {{ cluster_name: web, endpoints: [{{ lb_endpoints: [{ep}] }}] }}\n"),
    )
}

/// `n` slow requests at once on one connection: each status and whether
/// it said `x-envoy-overloaded`, in order of sending.
fn burst(addr: SocketAddr, n: usize) -> Vec<(u16, bool)> {
    client(move || async move {
        let c = connect(addr).await;
        let tasks: Vec<_> = (0..n)
            .map(|_| {
                let c = c.clone();
                glommio::spawn_local(async move {
                    let r = get(&c, "/", &[("x-delay-ms", "400")]).await.expect("reply");
                    (
                        r.status.as_u16(),
                        r.header("x-envoy-overloaded") == Some("true"),
                    )
                })
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await);
        }
        out
    })
}

fn sorted(mut v: Vec<(u16, bool)>) -> Vec<(u16, bool)> {
    v.sort();
    v
}

/// HTTP/2 upstreams, one stream per connection.
fn h2() -> String {
    yaml::h2_options("max_concurrent_streams: 1")
}

#[test]
fn max_requests_overflow_with_x_envoy_overloaded() {
    let b = backend("b1");
    let extra = format!(
        "    circuit_breakers: {{ thresholds: [{{ max_requests: 2 }}] }}\n{}",
        h2()
    );
    let gw = start(bootstrap(b.addr(), &extra), 1);
    let admin = gw.admin_addr.unwrap();
    let addr = gw.listener("ingress").unwrap();
    // max_concurrent_streams 1: each request takes its own connection, and
    // max_connections (1024) has room for them.
    assert_eq!(
        sorted(burst(addr, 3)),
        [(200, false), (200, false), (503, true)]
    );
    let overflow = format!(
        "gateway_upstream_rq_pending_overflow{{cluster=\"web\",host=\"{}\"}}",
        b.addr()
    );
    assert_eq!(metric(admin, &overflow), 1.0);
    // What they held came back.
    assert_eq!(sorted(burst(addr, 2)), [(200, false), (200, false)]);
    gw.shutdown();
}

#[test]
fn max_connections_holds_requests_pending_up_to_max_pending_requests() {
    let b = backend("b1");
    let extra = format!(
        "    circuit_breakers: {{ thresholds: [{{ max_connections: 1, max_pending_requests: 1 }}] }}\n{}",
        h2()
    );
    let gw = start(bootstrap(b.addr(), &extra), 1);
    let admin = gw.admin_addr.unwrap();
    let addr = gw.listener("ingress").unwrap();
    // One connection carrying one stream: the second waits for it, the
    // third finds the wait full.
    assert_eq!(
        sorted(burst(addr, 3)),
        [(200, false), (200, false), (503, true)]
    );
    let host = b.addr();
    let cx_overflow = format!("gateway_upstream_cx_overflow{{cluster=\"web\",host=\"{host}\"}}");
    assert!(metric(admin, &cx_overflow) >= 1.0);
    assert_eq!(b.requests(), 2);
    assert_eq!(sorted(burst(addr, 2)), [(200, false), (200, false)]);
    gw.shutdown();
}

#[test]
fn thresholds_are_shared_out_between_shards() {
    // 2 shards, max_requests 3: each shard may hold 2 (3 ÷ 2, rounded up).
    let b = backend("b1");
    let extra = format!(
        "    circuit_breakers: {{ thresholds: [{{ max_requests: 3 }}] }}\n{}",
        h2()
    );
    let gw = start(bootstrap(b.addr(), &extra), 2);
    let addr = gw.listener("ingress").unwrap();
    // One client connection lands on one shard.
    let got = sorted(burst(addr, 3));
    assert_eq!(got, [(200, false), (200, false), (503, true)]);
    gw.shutdown();
}
