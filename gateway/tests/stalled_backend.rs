//! A backend whose socket stops draining (its HTTP/2 windows wide open, its
//! reads stalled) while it still answers: the upstream connection's task
//! must keep reading, so the other streams on that connection are served,
//! and what waits for the backend's socket stays under the cluster's
//! `per_connection_buffer_limit_bytes`.

mod support;

use std::future::poll_fn;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Request;
use support::*;

const TICKS: usize = 100;
/// The upload the backend never reads.
const UPLOAD: usize = 64 << 20;
const TICK: &[u8] = b"tick\n";

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Flags shared with the backend.
#[derive(Default)]
struct Flags {
    /// The backend saw the second request and reads no more.
    stalled: AtomicBool,
    /// The first request's body may start.
    go: AtomicBool,
}

/// A hand-made HTTP/2 backend: it opens every window as wide as HTTP/2
/// allows, answers the first request of a connection with its head at once
/// and, once `go`, a body of [`TICKS`] small DATA frames 20 ms apart; it
/// stops reading its socket for good at the second request.
fn stalling_backend() -> (SocketAddr, Arc<Flags>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let flags = Arc::new(Flags::default());
    let shared = Arc::clone(&flags);
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            let flags = Arc::clone(&shared);
            std::thread::spawn(move || serve(s, &flags));
        }
    });
    (addr, flags)
}

fn serve(mut s: TcpStream, flags: &Arc<Flags>) {
    let w = Arc::new(Mutex::new(s.try_clone().unwrap()));
    let send = |bytes: &[u8]| w.lock().unwrap().write_all(bytes).is_ok();
    let mut preface = [0u8; 24];
    if s.read_exact(&mut preface).is_err() {
        return;
    }
    // SETTINGS_INITIAL_WINDOW_SIZE 2^31-1, SETTINGS_MAX_CONCURRENT_STREAMS
    // 100, and the connection window to 2^31-1.
    let mut settings = vec![0, 4];
    settings.extend_from_slice(&0x7fff_ffffu32.to_be_bytes());
    settings.extend_from_slice(&[0, 3, 0, 0, 0, 100]);
    let mut opening = frame(4, 0, 0, &settings);
    opening.extend(frame(8, 0, 0, &(0x7fff_ffffu32 - 65_535).to_be_bytes()));
    send(&opening);
    let mut requests = 0;
    loop {
        let mut head = [0u8; 9];
        if s.read_exact(&mut head).is_err() {
            return;
        }
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let (kind, frame_flags) = (head[3], head[4]);
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let mut payload = vec![0u8; len];
        if s.read_exact(&mut payload).is_err() {
            return;
        }
        match kind {
            // SETTINGS (not an ACK): acknowledge.
            4 if frame_flags & 1 == 0 => {
                send(&frame(4, 1, 0, &[]));
            }
            // HEADERS: the first request gets the slow body, the second
            // stops our reads.
            1 => {
                requests += 1;
                if requests > 1 {
                    flags.stalled.store(true, Ordering::SeqCst);
                    // Never read again; the ticker still writes.
                    std::thread::sleep(Duration::from_secs(60));
                    return;
                }
                let w = Arc::clone(&w);
                let flags = Arc::clone(flags);
                std::thread::spawn(move || {
                    // :status 200 (HPACK static index 8), END_HEADERS.
                    if w.lock()
                        .unwrap()
                        .write_all(&frame(1, 4, stream, &[0x88]))
                        .is_err()
                    {
                        return;
                    }
                    let until = Instant::now() + Duration::from_secs(60);
                    while !flags.go.load(Ordering::SeqCst) && Instant::now() < until {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    let mut out = Vec::new();
                    for i in 0..TICKS {
                        let end = if i + 1 == TICKS { 1 } else { 0 };
                        out.extend(frame(0, end, stream, TICK));
                        if w.lock().unwrap().write_all(&out).is_err() {
                            return;
                        }
                        out.clear();
                        std::thread::sleep(Duration::from_millis(20));
                    }
                });
            }
            _ => {}
        }
    }
}

#[test]
fn a_backend_that_stops_reading_does_not_stall_the_other_streams_on_its_connection() {
    let (backend, flags) = stalling_backend();
    let b = bootstrap(
        listener(vec![prefix_route("/", "c", None)]),
        vec![cluster("c", &[backend])],
    );
    let gw = start(b, 1);
    let addr = gw.listener("ingress").expect("listener bound");
    let admin = gw.admin_addr.expect("admin");

    // The victim's request goes first: its response head comes back at
    // once, its body waits for `go`...
    let (tx, victim) = mpsc::channel();
    std::thread::spawn(move || {
        let reply = client(move || async move {
            let c = connect(addr).await;
            get(&c, "/slow", &[]).await
        });
        let _ = tx.send(reply);
    });
    std::thread::sleep(Duration::from_millis(200));
    // ...then, on the same upstream connection, an upload of 64 MiB that
    // the backend never reads: far more than the sockets' buffers hold.
    let sent = Arc::new(AtomicUsize::new(0));
    let uploaded = Arc::clone(&sent);
    std::thread::spawn(move || {
        client(move || async move {
            let c = connect(addr).await;
            let req = Request::post("http://test.local/upload").body(()).unwrap();
            let Ok(mut sender) = c.ready().await else {
                return;
            };
            let Ok((_resp, mut body)) = sender.send_request(req, false) else {
                return;
            };
            let chunk = Bytes::from(vec![b'x'; 1 << 20]);
            while uploaded.load(Ordering::SeqCst) < UPLOAD {
                body.reserve_capacity(chunk.len());
                let Some(Ok(n)) = poll_fn(|cx| body.poll_capacity(cx)).await else {
                    return;
                };
                if body
                    .send_data(chunk.slice(..n.min(chunk.len())), false)
                    .is_err()
                {
                    return;
                }
                uploaded.fetch_add(n, Ordering::SeqCst);
            }
        })
    });
    // The backend's socket is full and the upload waits at the cluster's
    // buffer limit, unreleased: nothing more can leave the gateway on this
    // connection from now on.
    let series = format!(
        "gateway_upstream_flow_control_backed_up_total{{cluster=\"c\",host=\"{backend}\"}}"
    );
    wait_until(Duration::from_secs(30), "request data paused", || {
        metric(admin, &series) >= 1.0
    });
    assert!(
        flags.stalled.load(Ordering::SeqCst),
        "the upload reached the backend"
    );

    // Only now does the victim's body start: it arrives only if the
    // upstream connection's task reads while its writes are stuck.
    flags.go.store(true, Ordering::SeqCst);
    let reply = victim
        .recv_timeout(Duration::from_secs(30))
        .expect("the victim's response finished")
        .expect("victim served");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body.len(), TICKS * TICK.len());
    // What the client could send is what the sockets hold (a few MB on
    // loopback) plus the cluster's limit plus its stream window: with
    // the codec's pending output uncounted the gateway took it all.
    let sent = sent.load(Ordering::SeqCst);
    assert!(
        (1 << 20..UPLOAD / 2).contains(&sent),
        "{sent} bytes of the upload left the client"
    );
    gw.shutdown();
}
