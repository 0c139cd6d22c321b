//! Priorities: a cluster's second priority takes the traffic its first
//! cannot (here: the first's host fails its active health check), and
//! gives it back when the first recovers.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

use support::*;

/// An HTTP/1.1 health endpoint answering every request with `status`.
fn health_endpoint(status: Arc<AtomicU16>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut conn in l.incoming().flatten() {
            let status = Arc::clone(&status);
            std::thread::spawn(move || {
                let mut buf = [0u8; 2048];
                while let Ok(n) = conn.read(&mut buf) {
                    if n == 0 {
                        return;
                    }
                    let s = status.load(Ordering::Relaxed);
                    let resp = format!("HTTP/1.1 {s} X\r\ncontent-length: 0\r\n\r\n");
                    if conn.write_all(resp.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

#[test]
fn the_next_priority_takes_what_the_first_cannot() {
    let (b1, b2) = (backend("b1"), backend("b2"));
    let status = Arc::new(AtomicU16::new(200));
    let hc = health_endpoint(Arc::clone(&status));
    let ep = |b: SocketAddr, check: &str| yaml::endpoint(&b.ip().to_string(), b.port(), check);
    let p0 = ep(
        b1.addr(),
        &format!(", health_check_config: {{ port_value: {} }}", hc.port()),
    );
    let p1 = ep(
        b2.addr(),
        ", health_check_config: { disable_active_health_check: true }",
    );
    let boot = yaml::web_bootstrap(
        "",
        &format!(
            r#"    health_checks:
    - {{ timeout: 0.3s, interval: 0.05s, no_traffic_interval: 0.05s, unhealthy_threshold: 1, healthy_threshold: 1, http_health_check: {{ path: /hc }} }}
{}    load_assignment:
      cluster_name: web
      endpoints:
      - {{ locality: {{ zone: a }}, lb_endpoints: [{p0}] }}
      - {{ locality: {{ zone: b }}, priority: 1, lb_endpoints: [{p1}] }}
"#,
            yaml::h2_options("")
        ),
    );
    let gw = start(boot, 1);
    let addr = gw.listener("ingress").unwrap();
    assert_eq!(answering(addr, 8), ["b1"], "P0 healthy: P1 idles");
    status.store(503, Ordering::Relaxed);
    wait_answering(addr, &["b2"]);
    status.store(200, Ordering::Relaxed);
    wait_answering(addr, &["b1"]);
    gw.shutdown();
}
