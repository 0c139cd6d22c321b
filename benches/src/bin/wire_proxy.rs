//! `wire_proxy --listen ADDR --upstream ADDR [--upstreams N]`: a minimal
//! HTTP/2 reverse proxy on `h2wire` (`ServerConn` downstream, `ClientConn`
//! upstream) and glommio, to measure the codec and the driver model the
//! gateway is moving to (docs/h2-codec.md) against HAProxy and the gateway
//! itself (`benches/e2e/compare.sh --targets "... wireproxy"`).
//!
//! The shape is the gateway's: one task per client connection, and a pool
//! of `N` upstream connections (default 1) shared by every client, each
//! with its own task. No task, waker or lock per stream. The tasks meet in
//! one `RefCell`'d [`Shard`] (one thread, so borrows never wait): a client
//! task opens its streams on an upstream `ClientConn` directly and wakes
//! that connection's task to write; an upstream task routes what its
//! connection received into the owning client's inbox and wakes it. Since
//! glommio runs every ready task before polling the ring again, the
//! upstream task writes all the requests that arrived in one turn with one
//! send (and reads all their answers with one receive), which is where a
//! shared pool saves system time over a connection per client.
//!
//! Requests go upstream with their fields as received (the
//! pseudo-headers rebuilt); responses, bodies and trailers come back. A
//! body chunk is released on the side it came from only once the other
//! side's windows took it, so a client that stops reading stops its own
//! upstream stream. A reset on either side resets the other half.
//!
//! What it is not: the gateway. No routing, no timeouts, no limits beyond
//! the codec's, no admin; a closed upstream connection is replaced, nothing
//! more. It answers how much CPU per
//! request the HTTP/2 layer and the driver model cost in a proxy.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::pin::Pin;
use std::process::ExitCode;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use ahash::AHashMap;
use futures_lite::{AsyncRead, AsyncWriteExt};
use glommio::net::TcpStream;
use h2wire::conn::{ClientConfig, ClientConn, ClientEvent, Event, ServerConfig, ServerConn};
use h2wire::message::HeaderList;
use h2wire::ErrorCode;
use shards::wire::body::drain;
use shards::wire::body::{owned, queued, Item, ItemQueue};
use shards::wire::ReadBuf;

/// Bytes asked of a client socket per read.
const CLIENT_READ: usize = 8 * 1024;
/// Bytes asked of an upstream socket per read: one read brings the
/// answers of many clients' streams.
const UPSTREAM_READ: usize = 32 * 1024;
/// Upstream connections at most (a bit each in [`Client::touched`]).
const MAX_UPSTREAMS: usize = 64;

/// One proxied stream seen from one side: where it goes on the other side
/// and what waits to go there.
struct Half {
    /// Upstream connection (index into [`Shard::ups`]).
    up: usize,
    /// The stream id on the other connection.
    peer: u32,
    queue: ItemQueue,
}

impl Half {
    fn new(up: usize, peer: u32) -> Self {
        Self {
            up,
            peer,
            queue: ItemQueue::default(),
        }
    }
}

/// A shared upstream connection.
struct Upstream {
    conn: ClientConn,
    /// Upstream stream → (client slot, downstream stream).
    routes: AHashMap<u32, (usize, u32)>,
    /// Its task, parked until bytes arrive or there is output to write.
    waker: Option<Waker>,
    /// Closed or never connected: no new streams.
    dead: bool,
}

impl Upstream {
    fn new() -> Self {
        Self {
            conn: ClientConn::new(ClientConfig {
                connection_window: 16 << 20,
                ..ClientConfig::default()
            }),
            routes: AHashMap::default(),
            waker: None,
            dead: false,
        }
    }
}

/// What a client task is told by the upstream tasks.
#[derive(Default)]
struct Slot {
    /// Events of the client's streams, with their upstream connection.
    inbox: VecDeque<(usize, ClientEvent)>,
    waker: Option<Waker>,
}

/// What the shard's tasks share.
struct Shard {
    ups: Vec<Upstream>,
    /// Client slots by id; `None` is free.
    clients: Vec<Option<Slot>>,
    free: Vec<usize>,
}

thread_local! {
    /// The executor's shard, made when its first client arrives (the accept
    /// loop's closure must be `Send`, a shard is not).
    static SHARD: RefCell<Option<Rc<RefCell<Shard>>>> = const { RefCell::new(None) };
}

struct Args {
    listen: SocketAddr,
    upstream: SocketAddr,
    upstreams: usize,
    cpu: Option<usize>,
}

fn parse_args() -> Result<Args, String> {
    let (mut listen, mut upstream, mut cpu, mut upstreams) = (None, None, None, 1);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--listen" => listen = Some(value()?.parse().map_err(|e| format!("--listen: {e}"))?),
            "--upstream" => {
                upstream = Some(value()?.parse().map_err(|e| format!("--upstream: {e}"))?)
            }
            "--upstreams" => {
                upstreams = value()?.parse().map_err(|e| format!("--upstreams: {e}"))?
            }
            "--cpu" => cpu = Some(value()?.parse().map_err(|e| format!("--cpu: {e}"))?),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if !(1..=MAX_UPSTREAMS).contains(&upstreams) {
        return Err(format!("--upstreams must be within 1..={MAX_UPSTREAMS}"));
    }
    Ok(Args {
        listen: listen.ok_or("--listen ADDR is required")?,
        upstream: upstream.ok_or("--upstream ADDR is required")?,
        upstreams,
        cpu,
    })
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

/// Stores `cx`'s waker in `slot` unless the one there already wakes the
/// same task (a clone is a reference count).
fn park(slot: &mut Option<Waker>, cx: &Context<'_>) {
    match slot {
        Some(w) if w.will_wake(cx.waker()) => {}
        _ => *slot = Some(cx.waker().clone()),
    }
}

fn wake(slot: &mut Option<Waker>) {
    if let Some(w) = slot.take() {
        w.wake();
    }
}

/// Key of an upstream stream in a client's map.
fn up_key(up: usize, stream: u32) -> u64 {
    (up as u64) << 32 | stream as u64
}

/// One client connection's proxy state, owned by its task.
struct Client {
    id: usize,
    down: ServerConn,
    /// Downstream stream → its upstream half (request body queue).
    d2u: AHashMap<u32, Half>,
    /// [`up_key`] → its downstream half (response body queue).
    u2d: AHashMap<u64, Half>,
    /// Upstream connections given output this turn, to wake.
    touched: u64,
}

impl Client {
    /// Picks the upstream connection with the fewest open streams that may
    /// open one more.
    fn pick(sh: &Shard) -> Option<usize> {
        sh.ups
            .iter()
            .enumerate()
            .filter(|(_, u)| !u.dead && u.conn.can_open_stream())
            .min_by_key(|(_, u)| u.conn.open_streams())
            .map(|(i, _)| i)
    }

    fn on_down_event(&mut self, sh: &mut Shard, ev: Event) {
        match ev {
            Event::Request {
                stream,
                head,
                end_stream,
            } => {
                let Some(i) = Self::pick(sh) else {
                    self.down.recycle(head);
                    self.down.reset(stream, ErrorCode::REFUSED_STREAM);
                    return;
                };
                let up = &mut sh.ups[i];
                let get = |n: &[u8]| head.get(n).unwrap_or(b"");
                let authority = head.get(b":authority").or(head.get(b"host"));
                let sent = up.conn.send_request(
                    get(b":method"),
                    get(b":scheme"),
                    authority.unwrap_or(b""),
                    get(b":path"),
                    regular(&head).filter(|(n, _, _)| *n != b"host"),
                    end_stream,
                );
                self.down.recycle(head);
                match sent {
                    Ok(us) => {
                        up.routes.insert(us, (self.id, stream));
                        self.d2u.insert(stream, Half::new(i, us));
                        self.u2d.insert(up_key(i, us), Half::new(i, stream));
                        self.touched |= 1 << i;
                    }
                    Err(_) => self.down.reset(stream, ErrorCode::REFUSED_STREAM),
                }
            }
            Event::Data {
                stream,
                data,
                end_stream,
            } => match self.d2u.get_mut(&stream) {
                Some(h) => h.queue.push_back(Item::data(data, end_stream)),
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
                    let up = &mut sh.ups[h.up];
                    up.conn.reset(h.peer, ErrorCode::CANCEL);
                    up.routes.remove(&h.peer);
                    if let Some(r) = self.u2d.remove(&up_key(h.up, h.peer)) {
                        up.conn.release(h.peer, queued(&r.queue));
                    }
                    self.touched |= 1 << h.up;
                }
            }
            Event::WindowOpen { .. } | Event::GoAway { .. } => {}
        }
    }

    fn on_up_event(&mut self, sh: &mut Shard, i: usize, ev: ClientEvent) {
        let up = &mut sh.ups[i];
        match ev {
            ClientEvent::Response {
                stream,
                head,
                informational,
                end_stream,
            } => {
                if let Some(h) = self.u2d.get(&up_key(i, stream)) {
                    let fields = regular(&head).map(|(n, v, _)| (n, v));
                    if self
                        .down
                        .send_headers(h.peer, status_of(&head), fields, end_stream)
                        .is_err()
                    {
                        up.conn.reset(stream, ErrorCode::CANCEL);
                        self.touched |= 1 << i;
                    }
                    if end_stream && !informational {
                        self.finish(up, i, stream);
                    }
                }
                up.conn.recycle(head);
            }
            ClientEvent::Data {
                stream,
                data,
                end_stream,
            } => match self.u2d.get_mut(&up_key(i, stream)) {
                Some(h) => h.queue.push_back(Item::data(data, end_stream)),
                None => {
                    up.conn.release(stream, data.len() as u32);
                    self.touched |= 1 << i;
                }
            },
            ClientEvent::Trailers { stream, fields } => {
                if let Some(h) = self.u2d.get_mut(&up_key(i, stream)) {
                    h.queue.push_back(Item::Trailers(owned(&fields)));
                }
                up.conn.recycle(fields);
            }
            ClientEvent::Reset { stream, .. }
            | ClientEvent::Broken { stream, .. }
            | ClientEvent::TooLarge { stream } => {
                up.routes.remove(&stream);
                if let Some(h) = self.u2d.remove(&up_key(i, stream)) {
                    up.conn.release(stream, queued(&h.queue));
                    self.down.reset(h.peer, ErrorCode::INTERNAL_ERROR);
                    if let Some(r) = self.d2u.remove(&h.peer) {
                        self.down.release(h.peer, queued(&r.queue));
                    }
                    self.touched |= 1 << i;
                }
            }
            ClientEvent::WindowOpen { .. }
            | ClientEvent::StreamLimit { .. }
            | ClientEvent::GoAway { .. } => {}
        }
    }

    /// The response ended: the stream is done on both connections.
    fn finish(&mut self, up: &mut Upstream, i: usize, stream: u32) {
        up.routes.remove(&stream);
        if let Some(h) = self.u2d.remove(&up_key(i, stream)) {
            self.d2u.remove(&h.peer);
        }
    }

    /// Moves queued chunks across as far as the windows allow, releasing
    /// each on the side it came from once the other side took it.
    fn forward(&mut self, sh: &mut Shard) {
        let mut done = Vec::new();
        for (&key, h) in self.u2d.iter_mut() {
            if h.queue.is_empty() {
                continue;
            }
            let stream = key as u32;
            let up = &mut sh.ups[h.up];
            if drain(&mut h.queue, &mut self.down, h.peer, &mut up.conn, stream).ended {
                done.push((h.up, stream));
            }
            self.touched |= 1 << h.up;
        }
        for (i, stream) in done {
            self.finish(&mut sh.ups[i], i, stream);
        }
        for (&down, h) in self.d2u.iter_mut() {
            if h.queue.is_empty() {
                continue;
            }
            drain(
                &mut h.queue,
                &mut sh.ups[h.up].conn,
                h.peer,
                &mut self.down,
                down,
            );
            self.touched |= 1 << h.up;
        }
    }

    /// Wakes the upstream tasks whose connections were given output.
    fn wake_touched(&mut self, sh: &mut Shard) {
        while self.touched != 0 {
            let i = self.touched.trailing_zeros() as usize;
            self.touched &= self.touched - 1;
            wake(&mut sh.ups[i].waker);
        }
    }

    /// The client is gone: its upstream streams are cancelled and every
    /// byte it held is released, so the shared connections lose nothing.
    fn close(mut self, sh: &mut Shard) {
        for (key, h) in self.u2d.drain() {
            let (i, stream) = ((key >> 32) as usize, key as u32);
            let up = &mut sh.ups[i];
            up.routes.remove(&stream);
            up.conn.reset(stream, ErrorCode::CANCEL);
            up.conn.release(stream, queued(&h.queue));
            self.touched |= 1 << i;
        }
        if let Some(slot) = sh.clients[self.id].take() {
            for (i, ev) in slot.inbox {
                if let ClientEvent::Data { stream, data, .. } = ev {
                    sh.ups[i].conn.release(stream, data.len() as u32);
                }
            }
        }
        sh.free.push(self.id);
        self.wake_touched(sh);
    }
}

/// How a wait for a socket ended.
enum Woken {
    /// `n` bytes read (0: the peer closed, or the read failed).
    Read(usize),
    /// Another task has work for this one.
    Nudged,
}

fn read_result(r: std::io::Result<usize>) -> Woken {
    Woken::Read(r.unwrap_or(0))
}

/// Drives shared upstream connection `i`: writes what the client tasks
/// gave it, reads, and routes each event to the client owning its stream.
/// Runs upstream connection `i`, and a new one each time it ends (a
/// backend may close it, e.g. with GOAWAY after a burst of cancelled
/// streams when a load generator stops).
async fn keep_upstream(shard: Rc<RefCell<Shard>>, i: usize, addr: SocketAddr) {
    loop {
        run_upstream(Rc::clone(&shard), i, addr).await;
        glommio::timer::sleep(std::time::Duration::from_millis(20)).await;
        let old = std::mem::replace(&mut shard.borrow_mut().ups[i], Upstream::new());
        // Streams still routed to the old connection were reset by
        // `fail_upstream`; their clients release nothing on it.
        drop(old);
    }
}

async fn run_upstream(shard: Rc<RefCell<Shard>>, i: usize, addr: SocketAddr) {
    let Ok(mut io) = TcpStream::connect(addr).await else {
        eprintln!("wire_proxy: cannot connect to {addr}");
        shard.borrow_mut().ups[i].dead = true;
        return;
    };
    let _ = io.set_nodelay(true);
    let mut rb = ReadBuf::default();
    loop {
        loop {
            let chunk = shard.borrow_mut().ups[i].conn.poll_output();
            let Some(chunk) = chunk else { break };
            if io.write_all(&chunk).await.is_err() {
                return fail_upstream(&shard, i);
            }
        }
        let room = rb.room(UPSTREAM_READ);
        let woken = poll_fn(|cx| match Pin::new(&mut io).poll_read(cx, room) {
            Poll::Ready(r) => Poll::Ready(read_result(r)),
            Poll::Pending => {
                let mut sh = shard.borrow_mut();
                let up = &mut sh.ups[i];
                if up.conn.has_output() {
                    return Poll::Ready(Woken::Nudged);
                }
                park(&mut up.waker, cx);
                Poll::Pending
            }
        })
        .await;
        let n = match woken {
            Woken::Read(0) => return fail_upstream(&shard, i),
            Woken::Read(n) => n,
            Woken::Nudged => 0,
        };
        rb.filled(n);
        if n == 0 {
            continue;
        }
        let mut guard = shard.borrow_mut();
        let sh = &mut *guard;
        if sh.ups[i].conn.recv(&mut rb.buf).is_err() {
            drop(guard);
            return fail_upstream(&shard, i);
        }
        while let Some(ev) = sh.ups[i].conn.poll_event() {
            route(sh, i, ev);
        }
    }
}

/// Hands an upstream event to the client owning its stream (all clients,
/// for the connection window opening).
fn route(sh: &mut Shard, i: usize, ev: ClientEvent) {
    let Some(stream) = ev.stream() else {
        return;
    };
    if stream == 0 {
        for slot in sh.clients.iter_mut().flatten() {
            wake(&mut slot.waker);
        }
        return;
    }
    let client = sh.ups[i].routes.get(&stream).map(|&(c, _)| c);
    match client.and_then(|c| sh.clients[c].as_mut()) {
        Some(slot) => {
            slot.inbox.push_back((i, ev));
            wake(&mut slot.waker);
        }
        // Its client is gone: give back what it would have held.
        None => match ev {
            ClientEvent::Data { stream, data, .. } => {
                sh.ups[i].conn.release(stream, data.len() as u32)
            }
            ClientEvent::Response { head, .. } => sh.ups[i].conn.recycle(head),
            ClientEvent::Trailers { fields, .. } => sh.ups[i].conn.recycle(fields),
            _ => {}
        },
    }
}

/// The upstream connection is gone: every stream on it is reset for its
/// client, and the connection takes no new streams.
fn fail_upstream(shard: &Rc<RefCell<Shard>>, i: usize) {
    let mut guard = shard.borrow_mut();
    let sh = &mut *guard;
    sh.ups[i].dead = true;
    let routes: Vec<u32> = sh.ups[i].routes.keys().copied().collect();
    for stream in routes {
        route(
            sh,
            i,
            ClientEvent::Reset {
                stream,
                code: ErrorCode::CONNECT_ERROR,
            },
        );
    }
}

fn shard(upstream: SocketAddr, upstreams: usize) -> Rc<RefCell<Shard>> {
    SHARD.with(|s| {
        s.borrow_mut()
            .get_or_insert_with(|| {
                let sh = Rc::new(RefCell::new(Shard {
                    ups: (0..upstreams).map(|_| Upstream::new()).collect(),
                    clients: Vec::new(),
                    free: Vec::new(),
                }));
                for i in 0..upstreams {
                    glommio::spawn_local(keep_upstream(sh.clone(), i, upstream)).detach();
                }
                sh
            })
            .clone()
    })
}

async fn serve_client(mut io: TcpStream, shard: Rc<RefCell<Shard>>) {
    let _ = io.set_nodelay(true);
    let id = {
        let mut sh = shard.borrow_mut();
        match sh.free.pop() {
            Some(id) => {
                sh.clients[id] = Some(Slot::default());
                id
            }
            None => {
                sh.clients.push(Some(Slot::default()));
                sh.clients.len() - 1
            }
        }
    };
    let mut client = Client {
        id,
        down: ServerConn::new(ServerConfig::default()),
        d2u: AHashMap::default(),
        u2d: AHashMap::default(),
        touched: 0,
    };
    let mut rb = ReadBuf::default();
    let mut inbox = VecDeque::new();
    loop {
        while let Some(c) = client.down.poll_output() {
            if io.write_all(&c).await.is_err() {
                return client.close(&mut shard.borrow_mut());
            }
        }
        let room = rb.room(CLIENT_READ);
        let woken = poll_fn(|cx| match Pin::new(&mut io).poll_read(cx, room) {
            Poll::Ready(r) => Poll::Ready(read_result(r)),
            Poll::Pending => {
                let mut sh = shard.borrow_mut();
                let Some(slot) = sh.clients[id].as_mut() else {
                    return Poll::Ready(Woken::Read(0));
                };
                if !slot.inbox.is_empty() {
                    return Poll::Ready(Woken::Nudged);
                }
                park(&mut slot.waker, cx);
                Poll::Pending
            }
        })
        .await;
        let n = match woken {
            Woken::Read(0) => return client.close(&mut shard.borrow_mut()),
            Woken::Read(n) => n,
            Woken::Nudged => 0,
        };
        rb.filled(n);
        // A connection error stops the client; GOAWAY is queued.
        if n > 0 && client.down.recv(&mut rb.buf).is_err() {
            // A best-effort flush, then close.
            while let Some(c) = client.down.poll_output() {
                let _ = io.write_all(&c).await;
            }
            return client.close(&mut shard.borrow_mut());
        }
        let mut guard = shard.borrow_mut();
        let sh = &mut *guard;
        while let Some(ev) = client.down.poll_event() {
            client.on_down_event(sh, ev);
        }
        if let Some(slot) = sh.clients[id].as_mut() {
            std::mem::swap(&mut slot.inbox, &mut inbox);
        }
        for (i, ev) in inbox.drain(..) {
            client.on_up_event(sh, i, ev);
        }
        client.forward(sh);
        client.wake_touched(sh);
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("wire_proxy: {e}");
            return ExitCode::from(2);
        }
    };
    let (upstream, upstreams) = (args.upstream, args.upstreams);
    benches::serve_on_one_core("wire_proxy", args.listen, args.cpu, move |s| {
        serve_client(s, shard(upstream, upstreams))
    })
}
