//! `wire_proxy --listen ADDR --upstream ADDR`: a minimal HTTP/2 reverse
//! proxy on `h2wire` (`ServerConn` downstream, `ClientConn` upstream) and
//! glommio, to measure the codec and the driver model the gateway is moving
//! to (docs/h2-codec.md) against HAProxy and the gateway itself
//! (`benches/e2e/compare.sh --targets "... wireproxy"`).
//!
//! One task per client connection, which opens its own upstream connection
//! and owns both: no task, waker or lock per stream. Requests go upstream
//! with their fields as received (the pseudo-headers rebuilt), responses,
//! bodies and trailers come back; a body chunk is released on the side it
//! came from only once the other side's windows took it, so a client that
//! stops reading stops its own upstream stream. A reset on either side
//! resets the other half.
//!
//! What it is not: the gateway. No routing, no pool shared between clients,
//! no timeouts, no limits beyond the codec's, no admin. It answers how much
//! CPU per request the HTTP/2 layer and the driver model cost in a proxy.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::pin::Pin;
use std::process::ExitCode;
use std::task::Poll;

use ahash::AHashMap;
use bytes::{Bytes, BytesMut};
use futures_lite::{AsyncRead, AsyncWriteExt};
use glommio::net::TcpStream;
use h2wire::conn::{ClientConfig, ClientConn, ClientEvent, Event, ServerConfig, ServerConn};
use h2wire::message::HeaderList;
use h2wire::ErrorCode;

/// Bytes asked of a socket per read.
const READ_CHUNK: usize = 8 * 1024;

/// A body chunk waiting for window on the side it goes to, or the trailers
/// that end it.
enum Item {
    Data(Bytes, bool),
    Trailers(Vec<(Vec<u8>, Vec<u8>)>),
}

/// One proxied stream: its id on the other connection and what waits to go
/// there.
#[derive(Default)]
struct Half {
    peer: u32,
    queue: VecDeque<Item>,
}

/// A client connection and the upstream connection it owns.
struct Pair {
    down: ServerConn,
    up: ClientConn,
    /// Downstream stream id → its upstream half (request body queue).
    d2u: AHashMap<u32, Half>,
    /// Upstream stream id → its downstream half (response body queue).
    u2d: AHashMap<u32, Half>,
}

fn parse_args() -> Result<(SocketAddr, SocketAddr, Option<usize>), String> {
    let (mut listen, mut upstream, mut cpu) = (None, None, None);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--listen" => listen = Some(value()?.parse().map_err(|e| format!("--listen: {e}"))?),
            "--upstream" => {
                upstream = Some(value()?.parse().map_err(|e| format!("--upstream: {e}"))?)
            }
            "--cpu" => cpu = Some(value()?.parse().map_err(|e| format!("--cpu: {e}"))?),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok((
        listen.ok_or("--listen ADDR is required")?,
        upstream.ok_or("--upstream ADDR is required")?,
        cpu,
    ))
}

/// Regular fields of a header list (pseudo-headers left out).
fn regular(list: &HeaderList) -> impl Iterator<Item = (&[u8], &[u8], bool)> {
    list.iter().filter(|(n, _, _)| !n.starts_with(b":"))
}

fn status_of(head: &HeaderList) -> u16 {
    head.get(b":status")
        .and_then(|s| std::str::from_utf8(s).ok()?.parse().ok())
        .unwrap_or(502)
}

impl Pair {
    fn on_down_event(&mut self, ev: Event) {
        match ev {
            Event::Request {
                stream,
                head,
                end_stream,
            } => {
                let get = |n: &[u8]| head.get(n).unwrap_or(b"");
                let authority = head.get(b":authority").or(head.get(b"host"));
                let sent = self.up.send_request(
                    get(b":method"),
                    get(b":scheme"),
                    authority.unwrap_or(b""),
                    get(b":path"),
                    regular(&head).filter(|(n, _, _)| *n != b"host"),
                    end_stream,
                );
                self.down.recycle(head);
                match sent {
                    Ok(up) => {
                        self.d2u.insert(
                            stream,
                            Half {
                                peer: up,
                                ..Half::default()
                            },
                        );
                        self.u2d.insert(
                            up,
                            Half {
                                peer: stream,
                                ..Half::default()
                            },
                        );
                    }
                    Err(_) => self.down.reset(stream, ErrorCode::REFUSED_STREAM),
                }
            }
            Event::Data {
                stream,
                data,
                end_stream,
            } => match self.d2u.get_mut(&stream) {
                Some(h) => h.queue.push_back(Item::Data(data, end_stream)),
                None => self.down.release(stream, data.len() as u32),
            },
            Event::Trailers { stream, fields } => {
                if let Some(h) = self.d2u.get_mut(&stream) {
                    h.queue.push_back(Item::Trailers(owned(&fields)));
                }
                self.down.recycle(fields);
            }
            Event::Reset { stream, .. } => {
                if let Some(h) = self.d2u.remove(&stream) {
                    self.down.release(stream, queued(&h.queue));
                    self.up.reset(h.peer, ErrorCode::CANCEL);
                    self.u2d.remove(&h.peer);
                }
            }
            Event::WindowOpen { .. } | Event::GoAway { .. } => {}
        }
    }

    fn on_up_event(&mut self, ev: ClientEvent) {
        match ev {
            ClientEvent::Response {
                stream,
                head,
                informational,
                end_stream,
            } => {
                if let Some(h) = self.u2d.get(&stream) {
                    let fields = regular(&head).map(|(n, v, _)| (n, v));
                    if self
                        .down
                        .send_headers(h.peer, status_of(&head), fields, end_stream)
                        .is_err()
                    {
                        self.up.reset(stream, ErrorCode::CANCEL);
                    }
                    if end_stream && !informational {
                        self.finish(stream);
                    }
                }
                self.up.recycle(head);
            }
            ClientEvent::Data {
                stream,
                data,
                end_stream,
            } => match self.u2d.get_mut(&stream) {
                Some(h) => h.queue.push_back(Item::Data(data, end_stream)),
                None => self.up.release(stream, data.len() as u32),
            },
            ClientEvent::Trailers { stream, fields } => {
                if let Some(h) = self.u2d.get_mut(&stream) {
                    h.queue.push_back(Item::Trailers(owned(&fields)));
                }
                self.up.recycle(fields);
            }
            ClientEvent::Reset { stream, .. } | ClientEvent::TooLarge { stream } => {
                if let Some(h) = self.u2d.remove(&stream) {
                    self.up.release(stream, queued(&h.queue));
                    self.down.reset(h.peer, ErrorCode::INTERNAL_ERROR);
                    self.d2u.remove(&h.peer);
                }
            }
            ClientEvent::WindowOpen { .. }
            | ClientEvent::StreamLimit { .. }
            | ClientEvent::GoAway { .. } => {}
        }
    }

    /// The response ended: the stream is done on both connections.
    fn finish(&mut self, up: u32) {
        if let Some(h) = self.u2d.remove(&up) {
            self.d2u.remove(&h.peer);
        }
    }

    /// Moves queued chunks across as far as the windows allow, releasing
    /// each on the side it came from once the other side took it.
    fn forward(&mut self) {
        let mut done = Vec::new();
        for (&up, h) in self.u2d.iter_mut() {
            if drain(&mut h.queue, h.peer, &mut self.down, &mut self.up, up) {
                done.push(up);
            }
        }
        for up in done {
            self.finish(up);
        }
        for (&down, h) in self.d2u.iter_mut() {
            drain(&mut h.queue, h.peer, &mut self.up, &mut self.down, down);
        }
    }
}

/// Either side of a pair, seen as where bytes go (`send_*`) or where they
/// came from (`release`).
trait Side {
    fn send_data(&mut self, stream: u32, data: &mut Bytes, end: bool) -> usize;
    fn send_trailers(&mut self, stream: u32, t: &[(Vec<u8>, Vec<u8>)]);
    fn release(&mut self, stream: u32, n: u32);
}

impl Side for ServerConn {
    fn send_data(&mut self, stream: u32, data: &mut Bytes, end: bool) -> usize {
        ServerConn::send_data(self, stream, data, end).unwrap_or(0)
    }
    fn send_trailers(&mut self, stream: u32, t: &[(Vec<u8>, Vec<u8>)]) {
        let _ = ServerConn::send_trailers(self, stream, t.iter().map(|(n, v)| (&n[..], &v[..])));
    }
    fn release(&mut self, stream: u32, n: u32) {
        ServerConn::release(self, stream, n)
    }
}

impl Side for ClientConn {
    fn send_data(&mut self, stream: u32, data: &mut Bytes, end: bool) -> usize {
        ClientConn::send_data(self, stream, data, end).unwrap_or(0)
    }
    fn send_trailers(&mut self, stream: u32, t: &[(Vec<u8>, Vec<u8>)]) {
        let _ = ClientConn::send_trailers(self, stream, t.iter().map(|(n, v)| (&n[..], &v[..])));
    }
    fn release(&mut self, stream: u32, n: u32) {
        ClientConn::release(self, stream, n)
    }
}

/// Sends what `queue` holds on `to`'s stream `to_stream`, releasing it on
/// `from`'s `from_stream`. True once the end of the body went out.
fn drain(
    queue: &mut VecDeque<Item>,
    to_stream: u32,
    to: &mut impl Side,
    from: &mut impl Side,
    from_stream: u32,
) -> bool {
    while let Some(item) = queue.front_mut() {
        match item {
            Item::Data(data, end) => {
                let end = *end;
                let sent = to.send_data(to_stream, data, end);
                if sent > 0 {
                    from.release(from_stream, sent as u32);
                }
                if !data.is_empty() {
                    return false; // out of window: WindowOpen brings us back
                }
                queue.pop_front();
                if end {
                    return true;
                }
            }
            Item::Trailers(t) => {
                to.send_trailers(to_stream, t);
                queue.pop_front();
                return true;
            }
        }
    }
    false
}

fn owned(list: &HeaderList) -> Vec<(Vec<u8>, Vec<u8>)> {
    regular(list)
        .map(|(n, v, _)| (n.to_vec(), v.to_vec()))
        .collect()
}

fn queued(queue: &VecDeque<Item>) -> u32 {
    queue
        .iter()
        .map(|i| match i {
            Item::Data(d, _) => d.len() as u32,
            Item::Trailers(_) => 0,
        })
        .sum()
}

/// Makes room for one read at the end of `buf` (glommio reads into an
/// initialised slice) and returns where it starts.
fn read_room(buf: &mut BytesMut) -> usize {
    let start = buf.len();
    buf.resize(start + READ_CHUNK, 0);
    start
}

async fn serve_pair(mut dio: TcpStream, upstream: SocketAddr) {
    let Ok(mut uio) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = dio.set_nodelay(true);
    let _ = uio.set_nodelay(true);
    let mut pair = Pair {
        down: ServerConn::new(ServerConfig::default()),
        up: ClientConn::new(ClientConfig::default()),
        d2u: AHashMap::default(),
        u2d: AHashMap::default(),
    };
    let (mut dbuf, mut ubuf) = (BytesMut::new(), BytesMut::new());
    loop {
        while let Some(c) = pair.up.poll_output() {
            if uio.write_all(&c).await.is_err() {
                return;
            }
        }
        while let Some(c) = pair.down.poll_output() {
            if dio.write_all(&c).await.is_err() {
                return;
            }
        }
        let (ds, us) = (read_room(&mut dbuf), read_room(&mut ubuf));
        // Whichever socket has bytes (both, if both do).
        let (dn, un) = poll_fn(|cx| {
            let d = Pin::new(&mut dio).poll_read(cx, &mut dbuf[ds..]);
            let u = Pin::new(&mut uio).poll_read(cx, &mut ubuf[us..]);
            let take = |p: Poll<std::io::Result<usize>>| match p {
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => Some(None),
                Poll::Ready(Ok(n)) => Some(Some(n)),
                Poll::Pending => None,
            };
            match (take(d), take(u)) {
                (None, None) => Poll::Pending,
                (d, u) => Poll::Ready((d, u)),
            }
        })
        .await;
        dbuf.truncate(ds + dn.flatten().unwrap_or(0));
        ubuf.truncate(us + un.flatten().unwrap_or(0));
        if matches!(dn, Some(None)) || matches!(un, Some(None)) {
            return; // one side closed: the pair ends
        }
        if pair.down.recv(&mut dbuf).is_err() || pair.up.recv(&mut ubuf).is_err() {
            // GOAWAYs are queued; a best-effort flush, then close.
            while let Some(c) = pair.down.poll_output() {
                let _ = dio.write_all(&c).await;
            }
            return;
        }
        while let Some(ev) = pair.down.poll_event() {
            pair.on_down_event(ev);
        }
        while let Some(ev) = pair.up.poll_event() {
            pair.on_up_event(ev);
        }
        pair.forward();
    }
}

fn main() -> ExitCode {
    let (listen, upstream, cpu) = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("wire_proxy: {e}");
            return ExitCode::from(2);
        }
    };
    benches::serve_on_one_core("wire_proxy", listen, cpu, move |s| serve_pair(s, upstream))
}
