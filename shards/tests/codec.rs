//! Regression tests for the patches in the vendored h2 (third_party/h2,
//! PATCHES.md): I/O buffers allocated lazily and freed when a connection
//! has no streams (never while a partial frame is held), the HPACK Huffman
//! scratch buffer starting empty. That crate is not a workspace member, so
//! these drive the patched code through the gateway instead.

mod support;

use std::future::Future;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::SendRequest;
use http::StatusCode;
use support::*;

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const GOAWAY: u8 = 0x7;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const ACK: u8 = 0x1;

/// How long any one exchange may take: a codec bug tends to lose bytes,
/// and then both ends wait (the gateway's stream idle timeout is minutes).
const LIMIT: Duration = Duration::from_secs(5);

/// `fut`'s output, or `None` if it takes longer than [`LIMIT`].
async fn within<T>(fut: impl Future<Output = T>) -> Option<T> {
    futures_lite::future::or(async { Some(fut.await) }, async {
        glommio::timer::sleep(LIMIT).await;
        None
    })
    .await
}

/// [`connect`] bounded by [`LIMIT`].
async fn connect_ok(addr: SocketAddr) -> SendRequest<Bytes> {
    within(connect(addr))
        .await
        .unwrap_or_else(|| panic!("h2 handshake: not within {LIMIT:?}"))
}

/// [`get`] bounded by [`LIMIT`]; panics on a failed or stuck stream.
async fn get_ok(c: &SendRequest<Bytes>, path: &str, headers: &[(&str, &str)]) -> Reply {
    within(get(c, path, headers))
        .await
        .unwrap_or_else(|| panic!("GET {path}: no reply within {LIMIT:?}"))
        .unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

/// One GET, summed up as "STATUS BACKEND" or what went wrong, so a batch
/// of them is checked with one comparison.
async fn get_outcome(
    c: &SendRequest<Bytes>,
    headers: &[(&str, &str)],
    body_len: Option<usize>,
) -> String {
    match within(get(c, "/", headers)).await {
        Some(Ok(r)) if body_len.is_some_and(|n| n != r.body.len()) => {
            format!("body of {} bytes", r.body.len())
        }
        Some(Ok(r)) => format!("{} {}", r.status.as_u16(), r.backend()),
        Some(Err(e)) => format!("error {e}"),
        None => "timed out".to_string(),
    }
}

/// The outputs of spawned tasks, in order.
async fn join_all<T>(tasks: Vec<glommio::Task<T>>) -> Vec<T> {
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(t.await);
    }
    out
}

/// One frame read off a raw connection: (type, flags, stream id, payload).
fn read_frame(s: &mut TcpStream) -> std::io::Result<(u8, u8, u32, Vec<u8>)> {
    let mut head = [0u8; 9];
    s.read_exact(&mut head)?;
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload)?;
    Ok((head[3], head[4], stream, payload))
}

/// A header value of `len` bytes that is not one repeated character, so
/// that a misplaced byte anywhere would change what decodes.
fn header_value(len: usize) -> String {
    let alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";
    let mut x: u32 = 0x2545_f491;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            alphabet[(x % alphabet.len() as u32) as usize] as char
        })
        .collect()
}

/// What came back on stream 1 of a raw connection.
struct RawReply {
    /// The first byte of the response's header block (`0x88` is an indexed
    /// `:status 200`).
    first_header_byte: Option<u8>,
    /// DATA bytes received.
    body_len: usize,
}

/// Sends the client preface, an empty SETTINGS frame and `header_block` as
/// the header block of a GET on stream 1 (HEADERS, then CONTINUATION
/// frames of at most 16 KiB), over a raw socket, `chunk` bytes per write
/// with a pause between them; then reads frames (answering SETTINGS) until
/// stream 1 ends, within 5 s.
fn raw_exchange(addr: SocketAddr, header_block: &[u8], chunk: usize) -> RawReply {
    const MAX_FRAME: usize = 16 * 1024;
    let mut req = Vec::new();
    req.extend_from_slice(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    req.extend_from_slice(&[0, 0, 0, SETTINGS, 0, 0, 0, 0, 0]);
    let frames: Vec<&[u8]> = header_block.chunks(MAX_FRAME).collect();
    for (i, payload) in frames.iter().enumerate() {
        let (ty, mut flags) = if i == 0 {
            (HEADERS, END_STREAM)
        } else {
            (CONTINUATION, 0)
        };
        if i == frames.len() - 1 {
            flags |= END_HEADERS;
        }
        let len = (payload.len() as u32).to_be_bytes();
        req.extend_from_slice(&[len[1], len[2], len[3], ty, flags, 0, 0, 0, 1]);
        req.extend_from_slice(payload);
    }

    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(LIMIT)).unwrap();
    // A pause after each segment, so that the gateway's reads end
    // mid-frame again and again and each next read would block: the
    // partial frame must survive every one of those.
    for part in req.chunks(chunk) {
        s.write_all(part).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }

    let deadline = Instant::now() + LIMIT;
    let mut reply = RawReply {
        first_header_byte: None,
        body_len: 0,
    };
    loop {
        assert!(
            Instant::now() < deadline,
            "stream 1 not done within {LIMIT:?}"
        );
        let (ty, flags, stream, payload) = read_frame(&mut s).unwrap_or_else(|e| {
            let status = reply.first_header_byte;
            panic!("reading the reply (header block starting {status:?}): {e}")
        });
        match ty {
            SETTINGS if flags & ACK == 0 => {
                s.write_all(&[0, 0, 0, SETTINGS, ACK, 0, 0, 0, 0]).unwrap();
            }
            GOAWAY => panic!("GOAWAY from the gateway: {payload:?}"),
            RST_STREAM if stream == 1 => panic!("stream 1 reset: {payload:?}"),
            HEADERS if stream == 1 => {
                reply.first_header_byte = reply.first_header_byte.or(payload.first().copied());
                if flags & END_STREAM != 0 {
                    break;
                }
            }
            DATA if stream == 1 => {
                reply.body_len += payload.len();
                if flags & END_STREAM != 0 {
                    break;
                }
            }
            _ => {}
        }
    }
    // Closed before the gateway shuts down: an open connection would hold
    // that up for the drain timeout.
    drop(s);
    reply
}

/// HPACK integer with an `n`-bit prefix (RFC 7541, 5.1), `flags` in the
/// bits above it.
fn hpack_int(out: &mut Vec<u8>, flags: u8, n: u32, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(flags | v as u8);
        return;
    }
    out.push(flags | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
}

/// A header field as a literal without indexing, new name, no Huffman.
fn hpack_literal(out: &mut Vec<u8>, name: &str, value: &str) {
    out.push(0);
    hpack_int(out, 0, 7, name.len());
    out.extend_from_slice(name.as_bytes());
    hpack_int(out, 0, 7, value.len());
    out.extend_from_slice(value.as_bytes());
}

/// GET, http, `/`, and a literal `:authority: a` (name index 1,
/// incremental indexing).
const GET_SLASH: [u8; 6] = [0x82, 0x86, 0x84, 0x41, 0x01, b'a'];

#[test]
fn request_trickled_one_byte_at_a_time() {
    let b = backend("b");
    let (gw, addr) = gateway_for(&[b.addr()], 1);
    let r = raw_exchange(addr, &GET_SLASH, 1);
    // `:status 200` is static table entry 8, indexed: 0x88.
    assert_eq!(r.first_header_byte, Some(0x88), "not a 200");
    gw.shutdown();
}

#[test]
fn connection_reused_after_going_idle() {
    let b = backend("b");
    let (gw, addr) = gateway_for(&[b.addr()], 1);
    client(move || async move {
        let c = connect_ok(addr).await;
        let r = get_ok(&c, "/first", &[]).await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.backend(), "b");

        // Idle: both sides' read and write buffers (and the gateway's
        // upstream connection's) are released; the next requests take
        // fresh ones.
        glommio::timer::sleep(Duration::from_millis(300)).await;
        for i in 0..20 {
            let r = get_ok(&c, "/again", &[]).await;
            assert_eq!(r.status, StatusCode::OK, "GET #{i} after idle");
            assert_eq!(r.backend(), "b", "GET #{i} after idle");
        }

        // Idle again, then a body many frames and many buffers long each
        // way: frames split across reads, writes that fill the buffer.
        glommio::timer::sleep(Duration::from_millis(300)).await;
        let body: Bytes = (0..300 * 1024)
            .map(|i| (i % 251) as u8)
            .collect::<Vec<u8>>()
            .into();
        let r = within(request(&c, "POST", "/echo", &[], Some(body.clone()), None))
            .await
            .expect("POST: no reply in time")
            .unwrap();
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.body.len(), body.len());
        assert!(r.body == body, "echoed body differs");
    });
    gw.shutdown();
}

#[test]
fn header_block_larger_than_read_buffer_and_frame() {
    let b = backend("b");
    let (gw, addr) = gateway_for(&[b.addr()], 1);
    client(move || async move {
        let c = connect_ok(addr).await;
        // 40,000 bytes (about 30,000 Huffman-coded): more than the 8 KiB
        // read buffer and the 16 KiB frame, so HEADERS + CONTINUATION over
        // many reads, yet under the 60 KiB max header list size. The
        // header after it must still decode: it sets the reply's size.
        let big = header_value(40_000);
        let r = get_ok(&c, "/", &[("x-big", &big), ("x-response-size", "1234")]).await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.backend(), "b");
        assert_eq!(r.body.len(), 1234, "the header after x-big was lost");

        // Over the limit: h2 answers 431 itself (the backend never sees
        // it) but still decodes the block to keep HPACK state in step.
        let huge = header_value(70_000);
        let r = get_ok(&c, "/", &[("x-big", &huge)]).await;
        assert_eq!(r.status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
        assert_eq!(r.backend(), "");

        // And the connection goes on.
        let r = get_ok(&c, "/", &[("x-response-size", "10")]).await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.body.len(), 10);
    });
    gw.shutdown();
}

#[test]
fn header_block_trickled_across_frames_and_reads() {
    let b = backend("b");
    let (gw, addr) = gateway_for(&[b.addr()], 1);
    // The same 40,000-byte header written by hand (no Huffman): HEADERS and
    // CONTINUATION of 16 KiB each (twice the 8 KiB read buffer), then a
    // last CONTINUATION, sent 1,000 bytes at a time so that every read ends
    // inside a frame and the partial frame must outgrow the buffer.
    let mut block = GET_SLASH.to_vec();
    hpack_literal(&mut block, "x-big", &header_value(40_000));
    hpack_literal(&mut block, "x-response-size", "1234");
    let r = raw_exchange(addr, &block, 1000);
    assert_eq!(r.first_header_byte, Some(0x88), "not a 200");
    assert_eq!(r.body_len, 1234, "the header after x-big was lost");
    gw.shutdown();
}

#[test]
fn many_idle_connections_stay_healthy() {
    const CONNECTIONS: usize = 200;
    let b = backend("b");
    let (gw, addr) = gateway_for(&[b.addr()], 2);
    let statuses = client(move || async move {
        let mut conns = Vec::with_capacity(CONNECTIONS);
        for _ in 0..CONNECTIONS {
            conns.push(connect_ok(addr).await);
        }
        let round = |conns: &Vec<SendRequest<Bytes>>| {
            let tasks: Vec<_> = conns
                .iter()
                .map(|c| {
                    let c = c.clone();
                    glommio::spawn_local(async move { get_outcome(&c, &[], None).await })
                })
                .collect();
            join_all(tasks)
        };
        let first = round(&conns).await;
        // Every connection goes idle (buffers released) before the next.
        glommio::timer::sleep(Duration::from_millis(200)).await;
        let second = round(&conns).await;
        (first, second)
    });
    let bad: Vec<_> = statuses
        .0
        .iter()
        .chain(&statuses.1)
        .filter(|s| *s != "200 b")
        .collect();
    assert!(
        bad.is_empty(),
        "{} of {}: {bad:?}",
        bad.len(),
        2 * CONNECTIONS
    );
    gw.shutdown();
}

/// `shrink-when-idle`: a connection that held 100 streams at once frees its
/// stream tables when the last one ends, and must then grow them again for
/// the next burst (and keep working while a burst is half done).
#[test]
fn stream_tables_shrink_and_grow_again() {
    const STREAMS: usize = 100;
    let b = backend("b");
    let (gw, addr) = gateway_for(&[b.addr()], 1);
    let results = client(move || async move {
        let c = connect_ok(addr).await;
        let burst = |c: &SendRequest<Bytes>| {
            let tasks: Vec<_> = (0..STREAMS)
                .map(|i| {
                    let c = c.clone();
                    glommio::spawn_local(async move {
                        // Some bodies, so frames queue in the shared slabs.
                        let len = i * 97 % 5000;
                        let size = len.to_string();
                        get_outcome(&c, &[("x-response-size", &size)], Some(len)).await
                    })
                })
                .collect();
            join_all(tasks)
        };
        let mut all = Vec::new();
        for _ in 0..3 {
            all.extend(burst(&c).await);
            glommio::timer::sleep(Duration::from_millis(50)).await;
        }
        all
    });
    let bad: Vec<_> = results.iter().filter(|s| *s != "200 b").collect();
    assert!(
        bad.is_empty(),
        "{} of {}: {bad:?}",
        bad.len(),
        results.len()
    );
    gw.shutdown();
}
