//! `wire_backend --listen ADDR [--cpu N] [--name NAME]`: the demo backend's
//! hello answer served by `h2wire::conn::ServerConn` on glommio, for
//! measuring our server-side HTTP/2 codec against `demo-backend` (the same
//! answer through the `h2` crate) under the same load
//! (`benches/e2e/compare.sh --targets "wire direct"`, target `wire`).
//!
//! Any request gets `200`, `x-backend: NAME`, `content-type: text/plain`
//! and `hello from NAME\n`; a request body is read and discarded (its
//! window released at once). One executor thread, one task per connection,
//! no task per stream: each connection's loop writes what the connection
//! wants written, reads, and answers the events. This is a measuring
//! instrument and a first driver; the gateway's own driver will grow
//! from it (docs/h2-codec.md).

use std::net::SocketAddr;
use std::process::ExitCode;

use bytes::{Bytes, BytesMut};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use h2wire::conn::{Event, ServerConfig, ServerConn};

/// Bytes asked of the socket per read.
const READ_CHUNK: usize = 4 * 1024;

struct Args {
    listen: SocketAddr,
    cpu: Option<usize>,
    name: String,
}

fn parse_args() -> Result<Args, String> {
    let mut listen = None;
    let mut cpu = None;
    let mut name = "backend".to_string();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--listen" => listen = Some(value()?.parse().map_err(|e| format!("--listen: {e}"))?),
            "--cpu" => cpu = Some(value()?.parse().map_err(|e| format!("--cpu: {e}"))?),
            "--name" => name = value()?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(Args {
        listen: listen.ok_or("--listen ADDR is required")?,
        cpu,
        name,
    })
}

/// The response every request gets, built once.
struct Answer {
    name: Vec<u8>,
    body: Bytes,
}

async fn serve_conn(mut io: TcpStream, answer: &Answer) {
    let _ = io.set_nodelay(true);
    let mut conn = ServerConn::new(ServerConfig {
        // As demo-backend: clients are proxies multiplexing many streams.
        max_concurrent_streams: 1024,
        ..ServerConfig::default()
    });
    let mut rbuf = BytesMut::new();
    loop {
        while let Some(chunk) = conn.poll_output() {
            if io.write_all(&chunk).await.is_err() {
                return;
            }
        }
        // Read straight into the receive buffer's tail: frames are split off
        // it without a second copy, and no scratch buffer lives with the
        // connection. (glommio's read wants an initialised slice, hence the
        // zeroed tail.)
        let start = rbuf.len();
        rbuf.resize(start + READ_CHUNK, 0);
        let n = match io.read(&mut rbuf[start..]).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        rbuf.truncate(start + n);
        if conn.recv(&mut rbuf).is_err() {
            // GOAWAY is queued: write it, then close.
            while let Some(chunk) = conn.poll_output() {
                let _ = io.write_all(&chunk).await;
            }
            return;
        }
        while let Some(ev) = conn.poll_event() {
            match ev {
                Event::Request { stream, head, .. } => {
                    conn.recycle(head);
                    let headers: [(&[u8], &[u8]); 2] = [
                        (b"x-backend", &answer.name),
                        (b"content-type", b"text/plain"),
                    ];
                    let sent = conn
                        .send_headers(stream, 200, headers, false)
                        .and_then(|()| conn.send_data(stream, &mut answer.body.clone(), true));
                    if sent.is_err() {
                        conn.reset(stream, h2wire::ErrorCode::INTERNAL_ERROR);
                    }
                }
                Event::Data { stream, data, .. } => conn.release(stream, data.len() as u32),
                Event::Trailers { fields, .. } => conn.recycle(fields),
                Event::Reset { .. } | Event::WindowOpen { .. } | Event::GoAway { .. } => {}
            }
        }
        if conn.open_streams() == 0 && rbuf.is_empty() {
            // Idle: hold no read buffer and no spare output (many idle
            // connections).
            rbuf = BytesMut::new();
            conn.shrink();
        }
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("wire_backend: {e}");
            return ExitCode::from(2);
        }
    };
    let answer: &'static Answer = Box::leak(Box::new(Answer {
        name: args.name.clone().into_bytes(),
        body: Bytes::from(format!("hello from {}\n", args.name)),
    }));
    benches::serve_on_one_core("wire_backend", args.listen, args.cpu, move |s| {
        serve_conn(s, answer)
    })
}
