//! End-to-end: loadgen's library entry against the demo backend on loopback.

use std::time::Duration;

use demo_backend::{spawn_thread, BackendHandle, BackendOptions};
use loadgen::{Args, SessionStats};

fn backend() -> BackendHandle {
    spawn_thread(
        "127.0.0.1:0".parse().unwrap(),
        BackendOptions::new("lg"),
        None,
    )
    .expect("backend starts")
}

fn args(b: &BackendHandle) -> Args {
    let mut a = Args::for_url(&format!("http://{}/", b.addr()));
    a.connections = 2;
    a.streams = 4;
    a.threads = Some(1);
    a.duration = Duration::from_millis(1000);
    a.warmup = Duration::from_millis(200);
    a.quiet = true;
    a
}

#[test]
fn closed_loop_get() {
    let b = backend();
    let r = loadgen::run(&args(&b)).unwrap();
    assert!(r.requests > 0, "{r}");
    assert_eq!(r.errors.total(), 0, "{r}");
    assert_eq!(r.succeeded, r.requests);
    assert_eq!(r.status.class(2), r.requests);
    // Warm-up and in-flight requests make the backend see a few more.
    assert!(b.requests() >= r.requests);
    assert!(r.latency.p50 > 0 && r.latency.p50 <= r.latency.max);
    let j = r.to_json();
    assert_eq!(j["requests"], r.requests);
    assert!(j["intended_rps"].is_null());
}

#[test]
fn open_loop_rate() {
    let b = backend();
    let mut a = args(&b);
    a.rate = Some(500.0);
    let r = loadgen::run(&a).unwrap();
    assert_eq!(r.errors.total(), 0, "{r}");
    assert_eq!(r.intended_rps, Some(500.0));
    // 500 req/s for 1 s; allow for scheduling slack at the edges.
    assert!((350..=550).contains(&r.requests), "{r}");
    assert_eq!(r.to_json()["intended_rps"], 500.0);
}

#[test]
fn post_body_and_grpc() {
    let b = backend();
    let mut a = args(&b);
    a.body_size = 4096;
    a.duration = Duration::from_millis(500);
    let r = loadgen::run(&a).unwrap();
    assert!(r.requests > 0, "{r}");
    assert_eq!(r.errors.total(), 0, "{r}");

    let mut a = args(&b);
    a.grpc = true;
    a.body_size = 100;
    a.duration = Duration::from_millis(500);
    let r = loadgen::run(&a).unwrap();
    assert!(r.requests > 0, "{r}");
    assert_eq!(r.errors.total(), 0, "{r}");

    // A non-zero grpc-status is an error even with HTTP 200.
    a.headers = vec!["x-grpc-status: 5".into()];
    let r = loadgen::run(&a).unwrap();
    assert!(r.requests > 0);
    assert_eq!(r.errors.grpc_status, r.requests, "{r}");
    assert_eq!(r.succeeded, 0);
}

#[test]
fn errors_are_classified() {
    let b = backend();
    let mut a = args(&b);
    a.duration = Duration::from_millis(300);
    a.warmup = Duration::ZERO;
    a.headers = vec!["x-status: 503".into()];
    let r = loadgen::run(&a).unwrap();
    assert!(r.requests > 0);
    assert_eq!(r.errors.non_2xx, r.requests, "{r}");
    assert_eq!(r.status.class(5), r.requests);

    a.headers = vec!["x-reset: 1".into()];
    let r = loadgen::run(&a).unwrap();
    assert!(r.errors.reset > 0, "{r}");
    assert_eq!(r.requests, 0);

    a.headers = vec!["x-delay-ms: 1000".into()];
    a.timeout = Duration::from_millis(100);
    let r = loadgen::run(&a).unwrap();
    assert!(r.errors.timeout > 0, "{r}");
}

#[test]
fn connect_errors_when_nothing_listens() {
    // Bind then drop to get a port with (very likely) no listener.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut a = Args::for_url(&format!("http://127.0.0.1:{port}/"));
    a.connections = 1;
    a.threads = Some(1);
    a.duration = Duration::from_millis(300);
    a.warmup = Duration::ZERO;
    a.quiet = true;
    let r = loadgen::run(&a).unwrap();
    assert_eq!(r.requests, 0);
    assert!(r.errors.connect > 0, "{r}");
}

#[test]
fn sessions_keep_affinity_with_one_backend() {
    let b = backend();
    let mut a = args(&b);
    a.threads = Some(2);
    a.sessions = Some(10);
    a.duration = Duration::from_millis(500);
    a.warmup = Duration::from_millis(100);
    let r = loadgen::run(&a).unwrap();
    assert!(r.requests > 0, "{r}");
    assert_eq!(r.errors.total(), 0, "{r}");
    let s = r.sessions.unwrap();
    assert_eq!(
        s,
        SessionStats {
            sessions: 10,
            broken: 0,
            breaks: 0,
            no_header: 0,
        },
        "{r}"
    );
    assert!(r
        .to_string()
        .contains("sessions: 10, broken: 0 (0.00 %), breaks: 0, no x-backend: 0"));
    let j = r.to_json();
    assert_eq!(j["sessions"]["sessions"], 10);
    assert_eq!(j["sessions"]["breaks"], 0);

    // Fewer sessions (3) than stream slots (2 x 4): slots wait for an idle
    // session. Open loop, gRPC.
    let mut a = args(&b);
    a.sessions = Some(3);
    a.rate = Some(400.0);
    a.grpc = true;
    a.body_size = 10;
    a.duration = Duration::from_millis(500);
    a.warmup = Duration::from_millis(100);
    let r = loadgen::run(&a).unwrap();
    assert!(r.requests > 100, "{r}");
    assert_eq!(r.errors.total(), 0, "{r}");
    let s = r.sessions.unwrap();
    assert_eq!((s.sessions, s.broken, s.breaks, s.no_header), (3, 0, 0, 0));

    // A header the backend does not send: every response is counted as
    // lacking it, none as a break.
    let mut a = args(&b);
    a.sessions = Some(4);
    a.backend_header = "X-Upstream".into();
    a.duration = Duration::from_millis(300);
    a.warmup = Duration::ZERO;
    let r = loadgen::run(&a).unwrap();
    let s = r.sessions.unwrap();
    assert_eq!((s.sessions, s.broken, s.breaks), (4, 0, 0));
    assert!(r.requests > 0);
    assert_eq!(s.no_header, r.requests, "{r}");
    assert!(r.to_string().contains("no x-upstream: "), "{r}");
}
