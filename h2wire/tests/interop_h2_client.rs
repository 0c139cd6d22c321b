//! `ServerConn` against a real HTTP/2 client: the `h2` crate's, over an
//! in-memory duplex pipe, both driven by one single-threaded executor (no
//! runtime, no sockets, no timers). The server side is a minimal driver of
//! the kind the gateway's shards will run: write what the connection wants
//! written, read, feed it in, act on the events.
//!
//! The application answers `GET` with a body naming the path, echoes
//! `POST` bodies back as they arrive (respecting both flow-control
//! directions), and echoes request trailers as response trailers.

use std::collections::{HashMap, VecDeque};

use bytes::{Bytes, BytesMut};
use futures_lite::future;
use futures_util::future::join_all;
use h2wire::conn::{Event, ServerConfig, ServerConn};
use http::{HeaderMap, Method, Request};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

/// What the echo application still has to send on a stream.
#[derive(Default)]
struct Pending {
    chunks: VecDeque<Bytes>,
    /// The request ended: END_STREAM goes with the last chunk.
    ended: bool,
    /// Trailers to send once the body is out.
    trailers: Option<Vec<(Vec<u8>, Vec<u8>)>>,
    /// END_STREAM went out.
    fin_sent: bool,
}

/// Runs the server side until the client closes the pipe. Returns the
/// streams that were reset by the client.
async fn serve(mut io: DuplexStream, cfg: ServerConfig) -> Vec<u32> {
    let mut conn = ServerConn::new(cfg);
    let mut rbuf = BytesMut::with_capacity(16 * 1024);
    let mut echo: HashMap<u32, Pending> = HashMap::new();
    let mut resets = Vec::new();
    loop {
        while let Some(chunk) = conn.poll_output() {
            if io.write_all(&chunk).await.is_err() {
                return resets;
            }
        }
        rbuf.reserve(16 * 1024);
        match io.read_buf(&mut rbuf).await {
            Ok(0) | Err(_) => return resets,
            Ok(_) => {}
        }
        if let Err(e) = conn.recv(&mut rbuf) {
            panic!("server connection error: {e}");
        }
        while let Some(ev) = conn.poll_event() {
            match ev {
                Event::Request {
                    stream,
                    head,
                    end_stream,
                } => {
                    let path = head.get(b":path").unwrap_or(b"").to_vec();
                    let post = head.get(b":method") == Some(b"POST");
                    conn.recycle(head);
                    conn.send_headers(stream, 200, [(&b"x-path"[..], &path[..])], false)
                        .unwrap();
                    if post {
                        echo.insert(stream, Pending::default());
                        if end_stream {
                            echo.get_mut(&stream).unwrap().ended = true;
                        }
                    } else {
                        let mut body = Bytes::from([&b"hello "[..], &path].concat());
                        let n = conn.send_data(stream, &mut body, true).unwrap();
                        assert!(
                            body.is_empty(),
                            "a short body fits the initial windows ({n})"
                        );
                    }
                }
                Event::Data {
                    stream,
                    data,
                    end_stream,
                } => {
                    // Give the window back only once the echo went out, so a
                    // client that does not read its responses is slowed down.
                    if let Some(p) = echo.get_mut(&stream) {
                        p.chunks.push_back(data);
                        p.ended |= end_stream;
                    } else {
                        conn.release(stream, data.len() as u32);
                    }
                }
                Event::Trailers { stream, fields } => {
                    let t = fields
                        .iter()
                        .map(|(n, v, _)| (n.to_vec(), v.to_vec()))
                        .collect();
                    conn.recycle(fields);
                    if let Some(p) = echo.get_mut(&stream) {
                        p.ended = true;
                        p.trailers = Some(t);
                    }
                }
                Event::Reset { stream, .. } => {
                    resets.push(stream);
                    // Bytes handed out but not echoed still count.
                    if let Some(p) = echo.remove(&stream) {
                        let n: usize = p.chunks.iter().map(Bytes::len).sum();
                        conn.release(stream, n as u32);
                    }
                }
                Event::WindowOpen { .. } | Event::GoAway { .. } => {}
            }
        }
        // Echo what the windows allow now.
        let mut done = Vec::new();
        for (&stream, p) in echo.iter_mut() {
            while !p.chunks.is_empty() {
                let last = p.ended && p.trailers.is_none() && p.chunks.len() == 1;
                let chunk = &mut p.chunks[0];
                let sent = conn.send_data(stream, chunk, last).unwrap();
                if sent > 0 {
                    conn.release(stream, sent as u32);
                }
                if !chunk.is_empty() {
                    break; // out of window: WindowOpen will come
                }
                p.chunks.pop_front();
                p.fin_sent |= last;
            }
            if p.chunks.is_empty() && p.ended && !p.fin_sent {
                match p.trailers.take() {
                    Some(t) => conn
                        .send_trailers(stream, t.iter().map(|(n, v)| (&n[..], &v[..])))
                        .unwrap(),
                    None => {
                        conn.send_data(stream, &mut Bytes::new(), true).unwrap();
                    }
                }
                p.fin_sent = true;
            }
            if p.fin_sent {
                done.push(stream);
            }
        }
        for s in done {
            echo.remove(&s);
        }
    }
}

/// Builds the client side on `io` and runs `logic` against it; the
/// connection future is polled alongside.
async fn client<T, F, Fut>(io: DuplexStream, logic: F) -> T
where
    F: FnOnce(h2::client::SendRequest<Bytes>) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let (send, conn) = h2::client::Builder::new()
        .initial_max_send_streams(100)
        .handshake::<_, Bytes>(io)
        .await
        .expect("h2 handshake with ServerConn");
    let (out, conn_result) = future::zip(logic(send), conn).await;
    conn_result.expect("h2 client connection ends cleanly");
    out
}

/// Runs `logic` as the client against a `ServerConn` configured by `cfg`;
/// returns its result and the streams the server saw reset. A stall (a
/// flow-control bug leaves both sides waiting) fails after 20 s instead of
/// hanging the test run.
fn run<T, F, Fut>(cfg: ServerConfig, logic: F) -> (T, Vec<u32>)
where
    T: Send + 'static,
    F: FnOnce(h2::client::SendRequest<Bytes>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T>,
{
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (a, b) = tokio::io::duplex(64 * 1024);
        let out = future::block_on(future::zip(client(a, logic), serve(b, cfg)));
        let _ = tx.send(out);
    });
    match rx.recv_timeout(std::time::Duration::from_secs(20)) {
        Ok(out) => out,
        Err(e) => panic!("client and server stalled or panicked: {e}"),
    }
}

async fn read_body(mut body: h2::RecvStream) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.expect("body chunk");
        body.flow_control()
            .release_capacity(chunk.len())
            .expect("release");
        out.extend_from_slice(&chunk);
    }
    out
}

#[test]
fn concurrent_gets_on_one_connection() {
    let (bodies, resets) = run(ServerConfig::default(), |send| async move {
        let requests = (0..50).map(|i| {
            let mut send = send.clone();
            async move {
                let req = Request::get(format!("http://test/item/{i}"))
                    .body(())
                    .unwrap();
                send = send.ready().await.unwrap();
                let (resp, _) = send.send_request(req, true).unwrap();
                let resp = resp.await.expect("response");
                assert_eq!(resp.status(), 200);
                assert_eq!(resp.headers()["x-path"], format!("/item/{i}").as_str());
                read_body(resp.into_body()).await
            }
        });
        join_all(requests).await
    });
    for (i, body) in bodies.iter().enumerate() {
        assert_eq!(body, format!("hello /item/{i}").as_bytes());
    }
    assert!(resets.is_empty());
}

#[test]
fn a_large_post_is_echoed_under_flow_control_both_ways() {
    // 1 MiB through 64 KiB stream windows in both directions.
    let payload: Bytes = (0..(1 << 20)).map(|i| (i % 251) as u8).collect();
    let sent = payload.clone();
    let (echoed, _) = run(ServerConfig::default(), |mut send| async move {
        let req = Request::builder()
            .method(Method::POST)
            .uri("http://test/echo")
            .body(())
            .unwrap();
        let (resp, mut body) = send.send_request(req, false).unwrap();
        let upload = async move {
            let mut rest = sent;
            while !rest.is_empty() {
                body.reserve_capacity(rest.len().min(32 * 1024));
                let cap = std::future::poll_fn(|cx| body.poll_capacity(cx))
                    .await
                    .expect("capacity")
                    .expect("capacity ok");
                let chunk = rest.split_to(cap.min(rest.len()));
                body.send_data(chunk, rest.is_empty()).unwrap();
            }
        };
        let download = async move { read_body(resp.await.expect("response").into_body()).await };
        future::zip(upload, download).await.1
    });
    assert_eq!(echoed.len(), payload.len());
    assert!(echoed == payload[..], "echo differs from what was sent");
}

#[test]
fn request_trailers_come_back_as_response_trailers() {
    let ((body, trailers), _) = run(ServerConfig::default(), |mut send| async move {
        let req = Request::post("http://test/grpc").body(()).unwrap();
        let (resp, mut body) = send.send_request(req, false).unwrap();
        body.send_data(Bytes::from_static(b"ping"), false).unwrap();
        let mut t = HeaderMap::new();
        t.insert("grpc-status", "0".parse().unwrap());
        body.send_trailers(t).unwrap();
        let mut resp_body = resp.await.unwrap().into_body();
        let mut got = Vec::new();
        while let Some(c) = resp_body.data().await {
            let c = c.unwrap();
            let _ = resp_body.flow_control().release_capacity(c.len());
            got.extend_from_slice(&c);
        }
        let trailers = resp_body.trailers().await.unwrap().expect("trailers");
        (got, trailers)
    });
    assert_eq!(body, b"ping");
    assert_eq!(trailers["grpc-status"], "0");
}

#[test]
fn a_client_reset_reaches_the_application() {
    let (_, resets) = run(ServerConfig::default(), |mut send| async move {
        let req = Request::post("http://test/abandon").body(()).unwrap();
        let (resp, mut body) = send.send_request(req, false).unwrap();
        body.send_data(Bytes::from_static(b"partial"), false)
            .unwrap();
        // Wait for the head so the server has seen the stream.
        let resp = resp.await.unwrap();
        body.send_reset(h2::Reason::CANCEL);
        drop(resp);
        // A later request on the same connection still works.
        let req = Request::get("http://test/after").body(()).unwrap();
        let (resp, _) = send.send_request(req, true).unwrap();
        read_body(resp.await.unwrap().into_body()).await
    });
    assert_eq!(resets, vec![1]);
}

#[test]
fn the_client_honours_our_concurrency_limit() {
    let cfg = ServerConfig {
        max_concurrent_streams: 5,
        ..ServerConfig::default()
    };
    let (statuses, resets) = run(cfg, |mut send| async move {
        // Until our SETTINGS arrive a client may assume 100 streams (h2
        // does), and streams past our limit are refused (§5.1.2). One
        // request first: its response comes after our SETTINGS.
        let req = Request::get("http://test/first").body(()).unwrap();
        let (resp, _) = send.send_request(req, true).unwrap();
        read_body(resp.await.unwrap().into_body()).await;
        let requests = (0..40).map(|i| {
            let send = send.clone();
            async move {
                let mut send = send.ready().await.unwrap();
                let req = Request::get(format!("http://test/{i}")).body(()).unwrap();
                let (resp, _) = send.send_request(req, true).unwrap();
                let resp = resp
                    .await
                    .expect("no REFUSED_STREAM: h2 waits for a free slot");
                let status = resp.status();
                read_body(resp.into_body()).await;
                status
            }
        });
        join_all(requests).await
    });
    assert!(statuses.iter().all(|s| *s == 200));
    assert!(resets.is_empty());
}
