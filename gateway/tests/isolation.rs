//! One client must never hurt another: each test runs an abusive client
//! (reset flood, non-reading client, stream hog, oversized headers) next to
//! a victim client on its own connection, through the same gateway shard and
//! the same upstream host, and checks the victim is served promptly.

mod support;

use std::rc::Rc;
use std::time::{Duration, Instant};

use demo_backend::BackendOptions;
use http::{Request, StatusCode};
use support::*;

fn one_backend_gateway(
    opts: BackendOptions,
) -> (gateway::GatewayHandle, demo_backend::BackendHandle) {
    let b = backend_with(opts);
    let (gw, _) = gateway_for(&[b.addr()], 1);
    (gw, b)
}

/// Victim loop: `n` sequential GETs; returns (successes, slowest).
async fn victim(
    addr: std::net::SocketAddr,
    n: usize,
    headers: &'static [(&'static str, &'static str)],
) -> (usize, Duration) {
    let c = connect(addr).await;
    let mut ok = 0;
    let mut slowest = Duration::ZERO;
    for _ in 0..n {
        let t0 = Instant::now();
        match get(&c, "/victim", headers).await {
            Ok(r) if r.status == StatusCode::OK => ok += 1,
            Ok(r) => eprintln!("victim got {} {:?}", r.status, r.body),
            Err(e) => eprintln!("victim error: {e}"),
        }
        slowest = slowest.max(t0.elapsed());
        glommio::timer::sleep(Duration::from_millis(5)).await;
    }
    (ok, slowest)
}

#[test]
fn reset_flood_is_cut_off_and_victims_are_unharmed() {
    let (gw, _b) = one_backend_gateway(BackendOptions::new("b"));
    let addr = gw.listener("ingress").unwrap();
    let (victim_ok, attacker_cut) = client(move || async move {
        let v = glommio::spawn_local(victim(addr, 200, &[]));
        // Attacker: open streams that wait upstream, then cancel them all,
        // over and over.
        let a = connect(addr).await;
        let mut cut = false;
        'flood: for _ in 0..20 {
            let mut pending = Vec::new();
            for _ in 0..100 {
                let req = Request::get("http://x/attack")
                    .header("x-delay-ms", "500")
                    .body(())
                    .unwrap();
                let mut s = match a.clone().ready().await {
                    Ok(s) => s,
                    Err(_) => {
                        cut = true;
                        break 'flood;
                    }
                };
                match s.send_request(req, true) {
                    Ok((resp, _)) => pending.push(resp),
                    Err(_) => {
                        cut = true;
                        break 'flood;
                    }
                }
            }
            glommio::timer::sleep(Duration::from_millis(20)).await;
            drop(pending); // RST_STREAM(CANCEL) for each
            glommio::timer::sleep(Duration::from_millis(10)).await;
        }
        let (ok, _) = v.await;
        (ok, cut)
    });
    assert_eq!(
        victim_ok, 200,
        "victim requests failed during a reset flood"
    );
    assert!(attacker_cut, "the flooding connection was never cut off");
    let (_, stats) = admin_get(gw.admin_addr.unwrap(), "/stats");
    assert!(
        stats.contains("gateway_downstream_cx_reset_flood 1"),
        "{stats}"
    );
    gw.shutdown();
}

#[test]
fn non_reading_client_does_not_stall_others() {
    let (gw, _b) = one_backend_gateway(BackendOptions::new("b"));
    let addr = gw.listener("ingress").unwrap();
    let (ok, slowest) = client(move || async move {
        // Attacker: 100 streams each asking for 8 MiB, never reading a byte:
        // 100 full upstream stream windows (256 KiB) exceed one upstream
        // connection window (16 MiB) unless the pool caps streams per conn.
        let a = connect_with(addr, 65_535).await;
        let mut held = Vec::new();
        for _ in 0..100 {
            let req = Request::get("http://x/big")
                .header("x-response-size", "8388608")
                .body(())
                .unwrap();
            let mut s = a.clone().ready().await.unwrap();
            let (resp, _) = s.send_request(req, true).unwrap();
            held.push(glommio::spawn_local(async move {
                // Take the headers, then sit on the body.
                let r = resp.await;
                glommio::timer::sleep(Duration::from_secs(30)).await;
                drop(r);
            }));
        }
        glommio::timer::sleep(Duration::from_millis(300)).await;
        let out = victim(addr, 50, &[("x-response-size", "262144")]).await;
        drop(held);
        out
    });
    assert_eq!(ok, 50, "victim failed next to a non-reading client");
    assert!(
        slowest < Duration::from_secs(2),
        "victim stalled: slowest {slowest:?}"
    );
    gw.shutdown();
}

#[test]
fn stream_hog_does_not_starve_others() {
    // The backend allows only 10 streams per connection: the hog's 100
    // streams would fill ten upstream connections' worth.
    let mut opts = BackendOptions::new("b");
    opts.max_concurrent_streams = 10;
    let (gw, _b) = one_backend_gateway(opts);
    let addr = gw.listener("ingress").unwrap();
    let (ok, slowest) = client(move || async move {
        let a = Rc::new(connect(addr).await);
        let mut hog = Vec::new();
        for _ in 0..100 {
            let a = Rc::clone(&a);
            hog.push(glommio::spawn_local(async move {
                let _ = get(&a, "/hog", &[("x-delay-ms", "3000")]).await;
            }));
        }
        glommio::timer::sleep(Duration::from_millis(300)).await;
        let out = victim(addr, 30, &[]).await;
        drop(hog);
        out
    });
    assert_eq!(ok, 30);
    assert!(
        slowest < Duration::from_secs(1),
        "victim starved: slowest {slowest:?}"
    );
    gw.shutdown();
}

#[test]
fn downstream_limits_are_advertised_and_enforced() {
    let (gw, _b) = one_backend_gateway(BackendOptions::new("b"));
    let addr = gw.listener("ingress").unwrap();
    client(move || async move {
        let c = connect(addr).await;
        // Let SETTINGS arrive.
        assert_eq!(get(&c, "/", &[]).await.unwrap().status, StatusCode::OK);
        assert_eq!(
            c.current_max_send_streams(),
            100,
            "max_concurrent_streams default"
        );

        // A 70 KiB header list is over the 60 KiB limit: the stream is
        // refused, the connection and its other streams carry on.
        let big = "x".repeat(70 * 1024);
        let big: &'static str = Box::leak(big.into_boxed_str());
        let r = get(&c, "/", &[("x-big", big)]).await;
        match r {
            Ok(r) => assert_eq!(r.status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE),
            Err(e) => assert!(e.reason().is_some(), "stream-level refusal expected: {e}"),
        }
        assert_eq!(get(&c, "/", &[]).await.unwrap().status, StatusCode::OK);
    });
    gw.shutdown();
}

/// A client that connects and never sends the connection preface holds
/// its connection only until the handshake deadline: the idle timeout when
/// it is shorter than the 10 s handshake limit. A victim on another
/// connection is served meanwhile.
#[test]
fn silent_client_is_closed_at_the_handshake_deadline() {
    let b = backend("b");
    let mut l = (*listener(vec![prefix_route("/", "c", None)])).clone();
    l.filter_chains[0].http.idle_timeout = Some(Duration::from_millis(300));
    let gw = start(
        bootstrap(std::sync::Arc::new(l), vec![cluster("c", &[b.addr()])]),
        1,
    );
    let addr = gw.listener("ingress").unwrap();
    let t0 = Instant::now();
    let mut silent = std::net::TcpStream::connect(addr).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let (ok, _) = client(move || victim(addr, 3, &[]));
    assert_eq!(ok, 3, "the victim is served");
    // Our SETTINGS may come first (a server need not wait for the
    // client's preface); then the connection closes.
    let mut buf = [0u8; 256];
    loop {
        let n = std::io::Read::read(&mut silent, &mut buf).expect("closed, not timed out");
        if n == 0 {
            break;
        }
    }
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_secs(3),
        "closed after {waited:?}"
    );
    let admin = gw.admin_addr.unwrap();
    wait_until(Duration::from_secs(2), "protocol error counted", || {
        metric(admin, "gateway_downstream_cx_protocol_error") >= 1.0
    });
    gw.shutdown();
}
