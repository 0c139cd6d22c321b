//! `ClientConn` against a real HTTP/2 server: the `h2` crate's, over an
//! in-memory duplex pipe, both driven by one single-threaded executor (no
//! runtime, no sockets, no timers). The client side is a minimal driver of
//! the kind the gateway's upstream connections will run: open what the
//! server's limit allows, write, read, feed it in, act on the events,
//! retry what the server refused.
//!
//! The server answers `GET` with a body naming the path and echoes `POST`
//! bodies back as they arrive.

use std::collections::{HashMap, VecDeque};
use std::task::Poll;

use bytes::{Bytes, BytesMut};
use futures_lite::future;
use futures_util::stream::{FuturesUnordered, StreamExt};
use h2wire::conn::{ClientConfig, ClientConn, ClientEvent};
use h2wire::ErrorCode;
use http::{Method, Response};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

/// One request of the script, and what came back for it.
struct Exchange {
    method: &'static str,
    path: String,
    body: Bytes,
    status: u16,
    response: Vec<u8>,
    done: bool,
}

impl Exchange {
    fn new(method: &'static str, path: String, body: Bytes) -> Self {
        Self {
            method,
            path,
            body,
            status: 0,
            response: Vec::new(),
            done: false,
        }
    }
}

/// Runs `script` over one `ClientConn`; returns it with the responses
/// filled in, and how many streams the server refused (and were retried).
async fn drive(mut io: DuplexStream, mut script: Vec<Exchange>) -> (Vec<Exchange>, usize) {
    let mut conn = ClientConn::new(ClientConfig::default());
    let mut rbuf = BytesMut::with_capacity(16 * 1024);
    let mut queue: VecDeque<usize> = (0..script.len()).collect();
    // Stream id -> index in the script; bodies still to upload.
    let mut streams: HashMap<u32, usize> = HashMap::new();
    let mut uploads: HashMap<u32, Bytes> = HashMap::new();
    let mut refused = 0;
    loop {
        while conn.can_open_stream() {
            let Some(i) = queue.pop_front() else { break };
            let x = &script[i];
            let none: [(&[u8], &[u8], bool); 0] = [];
            let end = x.body.is_empty();
            let s = conn
                .send_request(
                    x.method.as_bytes(),
                    b"http",
                    b"test",
                    x.path.as_bytes(),
                    none,
                    end,
                )
                .expect("can_open_stream said yes");
            streams.insert(s, i);
            if !end {
                uploads.insert(s, x.body.clone());
            }
        }
        uploads.retain(|&s, body| {
            conn.send_data(s, body, true).expect("upload");
            !body.is_empty()
        });
        while let Some(chunk) = conn.poll_output() {
            io.write_all(&chunk).await.expect("write to server");
        }
        if script.iter().all(|x| x.done) {
            return (script, refused);
        }
        rbuf.reserve(16 * 1024);
        match io.read_buf(&mut rbuf).await {
            Ok(0) | Err(_) => panic!("server closed the connection early"),
            Ok(_) => {}
        }
        conn.recv(&mut rbuf).expect("no connection error");
        while let Some(ev) = conn.poll_event() {
            match ev {
                ClientEvent::Response {
                    stream,
                    head,
                    informational,
                    end_stream,
                } => {
                    let x = &mut script[streams[&stream]];
                    if !informational {
                        let status = head.get(b":status").expect("checked");
                        x.status = std::str::from_utf8(status).unwrap().parse().unwrap();
                    }
                    x.done |= end_stream;
                    conn.recycle(head);
                }
                ClientEvent::Data {
                    stream,
                    data,
                    end_stream,
                } => {
                    let x = &mut script[streams[&stream]];
                    x.response.extend_from_slice(&data);
                    x.done |= end_stream;
                    conn.release(stream, data.len() as u32);
                }
                ClientEvent::Trailers { stream, fields } => {
                    script[streams[&stream]].done = true;
                    conn.recycle(fields);
                }
                ClientEvent::Reset {
                    stream,
                    code: ErrorCode::REFUSED_STREAM,
                } => {
                    // Not processed: safe to send again.
                    refused += 1;
                    uploads.remove(&stream);
                    queue.push_back(streams[&stream]);
                }
                ClientEvent::Reset { stream, code } => panic!("stream {stream} reset: {code}"),
                ClientEvent::Broken { stream, code } => panic!("stream {stream} broken: {code}"),
                ClientEvent::TooLarge { stream } => panic!("stream {stream} head too large"),
                ClientEvent::GoAway { .. } => panic!("server went away"),
                ClientEvent::WindowOpen { .. } | ClientEvent::StreamLimit { .. } => {}
            }
        }
    }
}

/// One request on the h2 server: GET gets "hello <path>", POST its body
/// back as it arrives.
async fn handle(req: http::Request<h2::RecvStream>, mut respond: h2::server::SendResponse<Bytes>) {
    let path = req.uri().path().to_string();
    let post = req.method() == Method::POST;
    let resp = Response::builder()
        .status(200)
        .header("x-path", &path)
        .body(())
        .unwrap();
    let mut send = respond.send_response(resp, false).expect("send head");
    if !post {
        let body = Bytes::from(format!("hello {path}"));
        send.send_data(body, true).expect("send body");
        return;
    }
    let mut body = req.into_body();
    while let Some(chunk) = body.data().await {
        let mut chunk = chunk.expect("request chunk");
        let _ = body.flow_control().release_capacity(chunk.len());
        while !chunk.is_empty() {
            send.reserve_capacity(chunk.len());
            let cap = std::future::poll_fn(|cx| send.poll_capacity(cx))
                .await
                .expect("capacity")
                .expect("capacity ok");
            send.send_data(chunk.split_to(cap.min(chunk.len())), false)
                .expect("echo");
        }
    }
    send.send_data(Bytes::new(), true).expect("end echo");
}

/// Serves on `io` until the client goes; streams are handled together
/// while the connection is polled.
async fn serve(io: DuplexStream, max_streams: Option<u32>) {
    let mut builder = h2::server::Builder::new();
    if let Some(n) = max_streams {
        builder.max_concurrent_streams(n);
    }
    let mut conn = builder
        .handshake::<_, Bytes>(io)
        .await
        .expect("h2 handshake with ClientConn");
    let mut handlers = FuturesUnordered::new();
    loop {
        let next = std::future::poll_fn(|cx| {
            while let Poll::Ready(Some(())) = handlers.poll_next_unpin(cx) {}
            conn.poll_accept(cx)
        })
        .await;
        match next {
            Some(Ok((req, respond))) => handlers.push(handle(req, respond)),
            // The client closed the pipe once all was answered.
            Some(Err(_)) | None => break,
        }
    }
}

/// Runs `script` against an h2 server; a stall fails after 20 s instead of
/// hanging the test run.
fn run(script: Vec<Exchange>, max_streams: Option<u32>) -> (Vec<Exchange>, usize) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (a, b) = tokio::io::duplex(64 * 1024);
        let out = future::block_on(future::zip(drive(a, script), serve(b, max_streams)));
        let _ = tx.send(out.0);
    });
    match rx.recv_timeout(std::time::Duration::from_secs(20)) {
        Ok(out) => out,
        Err(e) => panic!("client and server stalled or panicked: {e}"),
    }
}

fn gets(n: usize) -> Vec<Exchange> {
    (0..n)
        .map(|i| Exchange::new("GET", format!("/item/{i}"), Bytes::new()))
        .collect()
}

#[test]
fn concurrent_gets_on_one_connection() {
    let (done, refused) = run(gets(50), None);
    for (i, x) in done.iter().enumerate() {
        assert_eq!(x.status, 200);
        assert_eq!(x.response, format!("hello /item/{i}").as_bytes());
    }
    assert_eq!(refused, 0);
}

#[test]
fn the_servers_stream_limit_is_honoured() {
    // Requests sent before the server's SETTINGS may go past its limit of
    // 10 and be refused; they are retried, and all 50 complete.
    let (done, _refused) = run(gets(50), Some(10));
    assert!(done.iter().all(|x| x.status == 200 && x.done));
}

#[test]
fn a_large_post_is_echoed_under_flow_control_both_ways() {
    let payload: Bytes = (0..(1 << 20)).map(|i| (i % 251) as u8).collect();
    let script = vec![Exchange::new("POST", "/echo".into(), payload.clone())];
    let (done, _) = run(script, None);
    assert_eq!(done[0].status, 200);
    assert_eq!(done[0].response.len(), payload.len());
    assert!(done[0].response == payload[..], "echo differs");
}
