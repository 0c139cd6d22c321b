//! CONNECT over HTTP/1.1, terminated by the gateway (`connect_matcher` routes with `upgrade_configs: [{ upgrade_type: CONNECT, connect_config: {} }]`): its 200 through the response phases, then a tunnel to the cluster's host with the client's early bytes; refused with 404 where nothing enables it, 503 when the host is down; other requests on the same listener untouched.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use support::raw::{echo_backend, read_head, read_to_end};
use support::*;

fn cluster(name: &str, addr: SocketAddr) -> String {
    format!(
        "  - name: {name}\n    type: STATIC\n    connect_timeout: 1s\n    load_assignment:\n      cluster_name: {name}\n      endpoints:\n      - lb_endpoints: [{}]\n",
        yaml::endpoint(&addr.ip().to_string(), addr.port(), "")
    )
}

const ROUTES: &str = r#"            virtual_hosts:
            - name: all
              domains: ["*"]
              response_headers_to_add: [{ header: { key: x-added, value: "yes" } }]
              routes:
              - match: { connect_matcher: {} }
                route: { cluster: tunnel, upgrade_configs: [{ upgrade_type: CONNECT, connect_config: {} }] }
              - match: { prefix: "/" }
                direct_response: { status: 200, body: { inline_string: "plain" } }
"#;

fn gateway(hcm_fields: &str, target: SocketAddr) -> (gateway::GatewayHandle, SocketAddr) {
    gateway_with(hcm_fields, ROUTES, target)
}

fn gateway_with(
    hcm_fields: &str,
    routes: &str,
    target: SocketAddr,
) -> (gateway::GatewayHandle, SocketAddr) {
    let b = yaml::hcm_bootstrap(hcm_fields, routes, &cluster("tunnel", target))
        .unwrap_or_else(|e| panic!("bootstrap refused: {e}"));
    let gw = start(b, 1);
    let addr = gw.listener("ingress").unwrap();
    (gw, addr)
}

fn connect(addr: SocketAddr, early: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "CONNECT db.internal:5432 HTTP/1.1\r\nHost: db.internal:5432\r\n\r\n{early}"
    )
    .unwrap();
    s
}

#[test]
fn a_connect_is_answered_here_then_tunnelled_to_the_cluster() {
    // The route's `upgrade_configs` enable CONNECT: the manager need not.
    let (gw, addr) = gateway("", echo_backend("", ""));
    let mut c = connect(addr, "early");
    let (head, rest) = read_head(&mut c);
    let lines: Vec<&str> = head.lines().collect();
    assert_eq!(lines[0], "HTTP/1.1 200 OK", "{head}");
    assert!(
        lines.contains(&"x-added: yes") && lines.contains(&"server: envoy"),
        "{head}"
    );
    // A tunnel: no framing.
    assert!(
        !head.contains("content-length") && !head.contains("transfer-encoding"),
        "{head}"
    );
    let mut got = rest;
    while got.len() < 5 {
        let mut b = [0u8; 5];
        let n = c.read(&mut b).unwrap();
        got.extend_from_slice(&b[..n]);
    }
    assert_eq!(&got[..], b"early");
    c.write_all(b"query").unwrap();
    let mut b = [0u8; 5];
    c.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"query");
    drop(c);
    // The listener's other requests are served as ever.
    let plain = h1_client::h1_get(addr, "example", "/", "");
    assert_eq!((plain.status, &plain.body[..]), (200, &b"plain"[..]));
    gw.shutdown();
}

#[test]
fn a_connect_nothing_enables_gets_404_and_a_host_down_503() {
    // No connect_matcher route: nothing takes a CONNECT (the route's
    // own `upgrade_configs` enable it where there is one).
    let no_connect = ROUTES.replace(
        "              - match: { connect_matcher: {} }\n                route: { cluster: tunnel, upgrade_configs: [{ upgrade_type: CONNECT, connect_config: {} }] }\n",
        "",
    );
    assert_ne!(no_connect, ROUTES);
    let (gw, addr) = gateway_with("", &no_connect, echo_backend("", ""));
    let mut c = connect(addr, "");
    let answer = read_to_end(&mut c);
    assert!(answer.starts_with("HTTP/1.1 404 Not Found\r\n"), "{answer}");
    assert!(answer.contains("\r\nconnection: close\r\n"), "{answer}");
    let (_, stats) = admin_get(gw.admin_addr.unwrap(), "/stats");
    assert!(
        stats.contains("gateway_downstream_rq_upgrade_refused 1"),
        "{stats}"
    );
    gw.shutdown();

    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let (gw, addr) = gateway("", dead);
    let mut c = connect(addr, "lost");
    let answer = read_to_end(&mut c);
    assert!(
        answer.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
        "{answer}"
    );
    assert!(answer.contains("\r\nconnection: close\r\n"), "{answer}");
    gw.shutdown();
}
