//! Demo backend behaviour seen by a real h2 client over loopback.

use std::future::{poll_fn, Future};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use demo_backend::{spawn_thread, BackendHandle, BackendOptions};
use glommio::net::TcpStream;
use glommio::LocalExecutorBuilder;
use h2::client::SendRequest;
use http::{HeaderMap, HeaderValue, Request, StatusCode};
use tokio_util::compat::FuturesAsyncReadCompatExt;

fn start(name: &str) -> BackendHandle {
    spawn_thread(
        "127.0.0.1:0".parse().unwrap(),
        BackendOptions::new(name),
        None,
    )
    .expect("backend starts")
}

/// Runs a client future on a fresh glommio executor (small io_memory: the
/// machine's memlock limit is low).
fn client<F, T>(f: impl FnOnce() -> F + Send + 'static) -> T
where
    F: Future<Output = T> + 'static,
    T: Send + 'static,
{
    LocalExecutorBuilder::default()
        .io_memory(1 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

async fn connect(b: std::net::SocketAddr) -> SendRequest<Bytes> {
    let tcp = TcpStream::connect(b).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let (sender, conn) = h2::client::Builder::new()
        .initial_max_send_streams(100)
        .initial_window_size(1 << 20)
        .handshake::<_, Bytes>(tcp.compat())
        .await
        .unwrap();
    glommio::spawn_local(async move {
        let _ = conn.await;
    })
    .detach();
    sender
}

fn request(addr: std::net::SocketAddr, method: &str, headers: &[(&str, &str)]) -> Request<()> {
    let mut b = Request::builder()
        .method(method)
        .uri(format!("http://{addr}/some/path"));
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(()).unwrap()
}

/// Reads a whole response body, releasing capacity; returns body and trailers.
async fn read_all(mut body: h2::RecvStream) -> Result<(Bytes, Option<HeaderMap>), h2::Error> {
    let mut out = BytesMut::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        body.flow_control().release_capacity(chunk.len())?;
        out.extend_from_slice(&chunk);
    }
    let trailers = body.trailers().await?;
    Ok((out.freeze(), trailers))
}

#[test]
fn get_hello_and_counter() {
    let b = start("alpha");
    let addr = b.addr();
    assert_ne!(addr.port(), 0);
    let (status, backend, ct, body) = client(move || async move {
        let mut s = connect(addr).await;
        let (resp, _) = s.send_request(request(addr, "GET", &[]), true).unwrap();
        let resp = resp.await.unwrap();
        let status = resp.status();
        let backend = resp.headers()["x-backend"].clone();
        let ct = resp.headers()["content-type"].clone();
        let (body, _) = read_all(resp.into_body()).await.unwrap();
        (status, backend, ct, body)
    });
    assert_eq!(status, StatusCode::OK);
    assert_eq!(backend, "alpha");
    assert_eq!(ct, "text/plain");
    assert_eq!(&body[..], b"hello from alpha\n");
    assert_eq!(b.requests(), 1);
    b.stop();
}

#[test]
fn post_echo_one_mib() {
    let b = start("echo");
    let addr = b.addr();
    let payload: Bytes = (0..(1u32 << 20)).map(|i| (i % 251) as u8).collect();
    let sent = payload.clone();
    let (status, body) = client(move || async move {
        let mut s = connect(addr).await;
        let (resp, mut send) = s.send_request(request(addr, "POST", &[]), false).unwrap();
        // Several DATA frames, END_STREAM on the last one.
        let mut rest = sent;
        while !rest.is_empty() {
            let chunk = rest.split_to(rest.len().min(100_000));
            send.send_data(chunk, rest.is_empty()).unwrap();
        }
        let resp = resp.await.unwrap();
        let status = resp.status();
        let (body, trailers) = read_all(resp.into_body()).await.unwrap();
        assert!(trailers.is_none());
        (status, body)
    });
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body.len(), payload.len());
    assert!(body == payload, "echoed body differs");
}

#[test]
fn trailers_are_echoed() {
    let b = start("tr");
    let addr = b.addr();
    let (body, trailers) = client(move || async move {
        let mut s = connect(addr).await;
        let (resp, mut send) = s.send_request(request(addr, "POST", &[]), false).unwrap();
        send.send_data(Bytes::from_static(b"abc"), false).unwrap();
        let mut t = HeaderMap::new();
        t.insert("x-checksum", HeaderValue::from_static("42"));
        send.send_trailers(t).unwrap();
        let resp = resp.await.unwrap();
        read_all(resp.into_body()).await.unwrap()
    });
    assert_eq!(&body[..], b"abc");
    assert_eq!(trailers.expect("trailers")["x-checksum"], "42");
}

#[test]
fn grpc_status_and_echo() {
    let b = start("grpc");
    let addr = b.addr();
    let msg = Bytes::from_static(&[0, 0, 0, 0, 2, 8, 1]);
    let m = msg.clone();
    let results = client(move || async move {
        let mut s = connect(addr).await;
        let mut out = Vec::new();
        for extra in [
            vec![],
            vec![("x-grpc-status", "7"), ("x-grpc-message", "nope")],
        ] {
            let mut h = vec![("content-type", "application/grpc"), ("te", "trailers")];
            h.extend(extra);
            let (resp, mut send) = s.send_request(request(addr, "POST", &h), false).unwrap();
            send.send_data(m.clone(), true).unwrap();
            let resp = resp.await.unwrap();
            let status = resp.status();
            let ct = resp.headers()["content-type"].clone();
            let (body, trailers) = read_all(resp.into_body()).await.unwrap();
            out.push((status, ct, body, trailers.expect("grpc trailers")));
        }
        out
    });
    let (status, ct, body, trailers) = &results[0];
    assert_eq!(*status, StatusCode::OK);
    assert_eq!(ct, "application/grpc");
    assert_eq!(body, &msg);
    assert_eq!(trailers["grpc-status"], "0");
    let (_, _, _, trailers) = &results[1];
    assert_eq!(trailers["grpc-status"], "7");
    assert_eq!(trailers["grpc-message"], "nope");
    assert_eq!(b.requests(), 2);
}

#[test]
fn delay_status_size_and_reset() {
    let b = start("ctl");
    let addr = b.addr();
    let (elapsed, status, size, reset) = client(move || async move {
        let mut s = connect(addr).await;
        let t0 = Instant::now();
        let (resp, _) = s
            .send_request(request(addr, "GET", &[("x-delay-ms", "200")]), true)
            .unwrap();
        let resp = resp.await.unwrap();
        read_all(resp.into_body()).await.unwrap();
        let elapsed = t0.elapsed();

        let h = [("x-status", "503"), ("x-response-size", "100000")];
        let (resp, _) = s.send_request(request(addr, "GET", &h), true).unwrap();
        let resp = resp.await.unwrap();
        let status = resp.status();
        let (body, _) = read_all(resp.into_body()).await.unwrap();

        let (resp, _) = s
            .send_request(request(addr, "GET", &[("x-reset", "1")]), true)
            .unwrap();
        let err = resp.await.expect_err("stream must be reset");
        let reset = err.reason();
        (elapsed, status, body.len(), reset)
    });
    assert!(elapsed >= Duration::from_millis(200), "{elapsed:?}");
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(size, 100_000);
    assert_eq!(reset, Some(h2::Reason::INTERNAL_ERROR));
}

#[test]
fn many_concurrent_streams() {
    let b = start("conc");
    let addr = b.addr();
    let ok = client(move || async move {
        let s = connect(addr).await;
        let tasks: Vec<_> = (0..64)
            .map(|_| {
                let mut s = s.clone();
                glommio::spawn_local(async move {
                    poll_fn(|cx| s.poll_ready(cx)).await.unwrap();
                    let (resp, _) = s
                        .send_request(request(addr, "GET", &[("x-delay-ms", "20")]), true)
                        .unwrap();
                    resp.await.unwrap().status() == StatusCode::OK
                })
            })
            .collect();
        let mut ok = 0;
        for t in tasks {
            ok += u32::from(t.await);
        }
        ok
    });
    assert_eq!(ok, 64);
    assert_eq!(b.requests(), 64);
}

#[test]
fn stop_closes_listener_and_connections() {
    let b = start("stop");
    let addr = b.addr();
    let mut b = Some(b);
    let second = client(move || async move {
        let mut s = connect(addr).await;
        let (resp, _) = s.send_request(request(addr, "GET", &[]), true).unwrap();
        assert_eq!(resp.await.unwrap().status(), StatusCode::OK);
        // Blocks this executor while the backend thread stops; fine here.
        b.take().unwrap().stop();
        glommio::timer::sleep(Duration::from_millis(50)).await;
        match s.send_request(request(addr, "GET", &[]), true) {
            Ok((resp, _)) => resp.await.is_err(),
            Err(_) => true,
        }
    });
    assert!(second, "request on a stopped backend must fail");
    assert!(std::net::TcpStream::connect(addr).is_err());
}

#[test]
fn local_backend_on_current_executor() {
    let (status, served) = client(|| async {
        let listener = glommio::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let b = demo_backend::spawn_local(listener, BackendOptions::new("local")).unwrap();
        let addr = b.addr();
        let mut s = connect(addr).await;
        let (resp, _) = s.send_request(request(addr, "GET", &[]), true).unwrap();
        let resp = resp.await.unwrap();
        let status = resp.status();
        let (body, _) = read_all(resp.into_body()).await.unwrap();
        assert_eq!(&body[..], b"hello from local\n");
        let served = b.requests();
        b.stop().await;
        (status, served)
    });
    assert_eq!(status, StatusCode::OK);
    assert_eq!(served, 1);
}
