//! Session mode end to end against a small cookie-setting h2c server: cookies
//! go back with every later request of their session, and backend changes
//! are counted as affinity breaks.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use glommio::net::TcpListener;
use glommio::{ExecutorJoinHandle, LocalExecutorBuilder, Placement};
use http::header::{HeaderValue, COOKIE, SET_COOKIE};
use http::{HeaderMap, Response};
use loadgen::{Args, SessionStats};
use tokio_util::compat::FuturesAsyncReadCompatExt;

/// What the server saw.
#[derive(Default)]
struct Seen {
    /// Requests without a `sid` cookie: each got a new one.
    new_sids: AtomicU64,
    /// Requests with `sid` whose other cookies were not all as set.
    bad_cookies: AtomicU64,
    requests: AtomicU64,
}

struct Server {
    addr: SocketAddr,
    seen: Arc<Seen>,
    stop: Arc<AtomicBool>,
    join: Option<ExecutorJoinHandle<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

/// All `cookie` fields of a request, as `(name, value)` pairs.
fn cookies(h: &HeaderMap) -> Vec<(String, String)> {
    h.get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split("; "))
        .filter_map(|c| c.split_once('='))
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

/// A request without a `sid` cookie gets `sid=N` (N counting up), a quoted
/// cookie, an attribute-laden one, an expired one and a malformed one, from
/// backend `first`; a request with `sid` is answered by backend `second` and
/// checked to carry exactly the cookies set (and the one from `-H`).
fn answer(req: &http::Request<h2::RecvStream>, seen: &Seen) -> Response<()> {
    seen.requests.fetch_add(1, Ordering::Relaxed);
    let got = cookies(req.headers());
    let mut resp = Response::new(());
    let h = resp.headers_mut();
    if got.iter().any(|(n, _)| n == "sid") {
        let want: Vec<(String, String)> = [
            ("fixed", "1"),
            ("sid", ""),
            ("q", "\"a b\""),
            ("attr", "x=y"),
        ]
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
        let ok = got.len() == want.len()
            && got
                .iter()
                .zip(&want)
                .all(|(g, w)| g.0 == w.0 && (w.0 == "sid" || g.1 == w.1));
        if !ok {
            seen.bad_cookies.fetch_add(1, Ordering::Relaxed);
        }
        h.insert("x-backend", HeaderValue::from_static("second"));
    } else {
        let n = seen.new_sids.fetch_add(1, Ordering::Relaxed);
        h.append(SET_COOKIE, format!("sid={n}").parse().unwrap());
        h.append(SET_COOKIE, HeaderValue::from_static("q=\"a b\"; Secure"));
        h.append(
            SET_COOKIE,
            HeaderValue::from_static("attr=x=y; Path=/; Max-Age=3600; HttpOnly"),
        );
        h.append(SET_COOKIE, HeaderValue::from_static("gone=1; Max-Age=0"));
        h.append(SET_COOKIE, HeaderValue::from_static("malformed"));
        h.insert("x-backend", HeaderValue::from_static("first"));
    }
    resp
}

fn server() -> Server {
    let seen = Arc::new(Seen::default());
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let (s2, stop2) = (seen.clone(), stop.clone());
    let join = LocalExecutorBuilder::new(Placement::Unbound)
        .name("cookie-server")
        .io_memory(1 << 20)
        .spawn(move || async move {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            let seen = s2;
            let accept = async {
                while let Ok(tcp) = listener.accept().await {
                    let seen = seen.clone();
                    glommio::spawn_local(async move {
                        let Ok(mut conn) = h2::server::handshake(tcp.compat()).await else {
                            return;
                        };
                        while let Some(Ok((req, mut send))) = conn.accept().await {
                            let resp = answer(&req, &seen);
                            let _ = send.send_response(resp, true);
                        }
                    })
                    .detach();
                }
            };
            let stopped = async {
                while !stop2.load(Ordering::Relaxed) {
                    glommio::timer::sleep(Duration::from_millis(10)).await;
                }
            };
            futures_lite::future::or(accept, stopped).await;
        })
        .unwrap();
    Server {
        addr: rx.recv().unwrap(),
        seen,
        stop,
        join: Some(join),
    }
}

#[test]
fn cookies_round_trip_and_breaks_are_counted() {
    let s = server();
    let mut a = Args::for_url(&format!("http://{}/", s.addr));
    a.connections = 2;
    a.streams = 4;
    a.threads = Some(2);
    a.sessions = Some(12);
    // A user cookie of our own goes along with the jar's.
    a.headers = vec!["cookie: fixed=1".into()];
    a.duration = Duration::from_millis(500);
    // Every response counts: each session's second response breaks once.
    a.warmup = Duration::ZERO;
    a.quiet = true;
    let r = loadgen::run(&a).unwrap();
    assert_eq!(r.errors.total(), 0, "{r}");
    assert!(r.requests >= 10 * 12, "{r}");
    // Each session got its sid on its first response and sent it back on
    // every later request, with all the other cookies set.
    assert_eq!(s.seen.new_sids.load(Ordering::Relaxed), 12);
    assert_eq!(s.seen.bad_cookies.load(Ordering::Relaxed), 0);
    assert!(s.seen.requests.load(Ordering::Relaxed) >= r.requests);
    assert_eq!(
        r.sessions.unwrap(),
        SessionStats {
            sessions: 12,
            broken: 12,
            breaks: 12,
            no_header: 0,
        },
        "{r}"
    );
    assert!(
        r.to_string()
            .contains("sessions: 12, broken: 12 (100.00 %), breaks: 12, no x-backend: 0"),
        "{r}"
    );
}
