//! Rapid-reset floods (CVE-2023-44487 style) through the gateway: an
//! attacker that reconnects without limit from the victim's own address
//! must not make the backend's own defences fire, nor fail one of the
//! victim's requests on the upstream connections they share.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::time::Duration;

use demo_backend::BackendOptions;
use support::*;

const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const END_STREAM_HEADERS: u8 = 0x5;
const CANCEL: u32 = 0x8;

fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

/// A GET of `/flood` to authority `x` as an HPACK block: static-table
/// `:method GET`, `:scheme http`, `:path /`… then `:authority` literal.
fn get_block() -> Vec<u8> {
    vec![0x82, 0x86, 0x84, 0x01, 0x01, b'x']
}

/// One attacker connection: the preface, then `n` streams each opened and
/// reset at once. `split`: the resets follow in a second write after a
/// pause, so their HEADERS may already have gone upstream. Returns
/// whether the gateway closed the connection on us.
fn attack(addr: SocketAddr, n: u32, split: bool) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return true;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(300)));
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    frame(&mut out, SETTINGS, 0, 0, &[]);
    let block = get_block();
    let mut resets = Vec::new();
    for i in 0..n {
        let id = 1 + 2 * i;
        frame(&mut out, HEADERS, END_STREAM_HEADERS, id, &block);
        let rst = if split { &mut resets } else { &mut out };
        frame(rst, RST_STREAM, 0, id, &CANCEL.to_be_bytes());
    }
    if s.write_all(&out).is_err() {
        return true;
    }
    if split {
        std::thread::sleep(Duration::from_millis(2));
        if s.write_all(&resets).is_err() {
            return true;
        }
    }
    // Read until the gateway closes or goes quiet.
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return false,
            Err(_) => return true,
        }
    }
}

#[test]
fn reconnecting_reset_flood_never_reaches_the_backend_or_the_victim() {
    let opts = BackendOptions::new("b");
    let calm = opts.calm_goaways.clone();
    let b = backend_with(opts);
    let (gw, addr) = gateway_for(&[b.addr()], 1);
    let admin = gw.admin_addr.unwrap();

    // Victim: slow requests in flight on the shared upstream connections
    // the whole time, from the same address as the attacker.
    let victim = std::thread::spawn(move || {
        client(move || async move {
            let c = connect(addr).await;
            let mut failed = Vec::new();
            let mut ok = 0;
            for round in 0..40 {
                let mut inflight = Vec::new();
                for _ in 0..8 {
                    let c = c.clone();
                    inflight.push(glommio::spawn_local(async move {
                        get(&c, "/victim", &[("x-delay-ms", "20")]).await
                    }));
                }
                for t in inflight {
                    match t.await {
                        Ok(r) if r.status == 200 => ok += 1,
                        Ok(r) => failed.push(format!("round {round}: {} {:?}", r.status, r.body)),
                        Err(e) => failed.push(format!("round {round}: {e}")),
                    }
                }
            }
            (ok, failed)
        })
    });

    // Attacker: 60 connections of 150 streams each, alternating streams
    // reset in the same write as their HEADERS and in a later one.
    let mut cut = 0;
    for i in 0..60 {
        if attack(addr, 150, i % 2 == 1) {
            cut += 1;
        }
    }
    let (ok, failed) = victim.join().unwrap();
    let host = |name: &str| {
        metric(
            admin,
            &format!("{name}{{cluster=\"c\",host=\"{}\"}}", b.addr()),
        )
    };
    eprintln!(
        "calm goaways {}, drained for the reset budget {}, retried on lost connections {}",
        calm.load(Ordering::Relaxed),
        host("gateway_upstream_cx_reset_budget"),
        host("gateway_upstream_rq_retry_conn_lost"),
    );
    assert!(
        failed.is_empty(),
        "{} victim requests failed, first: {:?}",
        failed.len(),
        &failed[..failed.len().min(3)]
    );
    assert_eq!(ok, 320);
    assert_eq!(
        calm.load(Ordering::Relaxed),
        0,
        "the backend's rapid-reset defence fired (GOAWAY ENHANCE_YOUR_CALM)"
    );
    assert!(cut > 0, "no flooding connection was cut off");
    assert!(
        host("gateway_upstream_cx_reset_budget") > 0.0,
        "no upstream connection spent its reset budget"
    );
    assert!(
        metric(admin, "gateway_downstream_rq_reset_before_upstream") > 0.0,
        "no stream was dropped before going upstream"
    );
    gw.shutdown();
}
