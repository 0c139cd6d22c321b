//! One worker thread: its glommio executor's connections, stream slots and request loop.
//!
//! Each connection runs `-m` slot tasks sharing one h2 `SendRequest`. A slot
//! sends a request, reads the whole response (releasing flow-control
//! capacity as it goes) and records it, then sends the next one: at once in
//! closed loop, or at its next scheduled time in open loop. Everything on the
//! hot path is thread-local (`Rc`/`Cell`), and the request parts are built
//! once per thread so a request costs reference-count bumps, not rebuilding.
//!
//! In session mode a slot first takes an idle session of its thread (waiting
//! for one when all are busy), sends the session's cookies, and updates the
//! session from the response headers as soon as they arrive.

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_lite::future::or;
use glommio::net::TcpStream;
use glommio::sync::Semaphore;
use glommio::timer::{sleep, Timer};
use glommio::Task;
use h2::client::SendRequest;
use h2::Reason;
use http::header::COOKIE;
use http::{HeaderMap, HeaderName, Method, Request, Uri};
use tokio_util::compat::FuturesAsyncReadCompatExt;

use crate::args::Plan;
use crate::grpc;
use crate::session::SessionPool;
use crate::stats::{ErrorKind, Progress, ThreadStats};

/// The run's time line, shared by all threads.
#[derive(Debug, Clone, Copy)]
pub struct Timeline {
    /// Load starts (connections open, warm-up begins).
    pub start: Instant,
    /// Requests starting from here on are recorded.
    pub warmup_end: Instant,
    /// No request starts from here on.
    pub end: Instant,
}

/// Below this, an open-loop slot sends right away instead of arming a timer:
/// a timer round trip costs about as much as the wait itself.
const MIN_SLEEP: Duration = Duration::from_micros(20);
/// Pause before re-dialling after a failed connect.
const CONNECT_RETRY: Duration = Duration::from_millis(100);
/// Pause before re-dialling after a connection broke (avoids a hot loop
/// against a server that accepts and immediately closes).
const RECONNECT_PAUSE: Duration = Duration::from_millis(10);
/// How long a finished connection may take to close gracefully.
const CLOSE_GRACE: Duration = Duration::from_millis(100);

/// Request parts built once per thread.
struct Template {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Option<Bytes>,
}

impl Template {
    fn new(plan: &Plan) -> Template {
        let mut headers = HeaderMap::new();
        if plan.grpc {
            for (k, v) in grpc::request_headers() {
                headers.insert(k, v);
            }
        }
        for (k, v) in &plan.headers {
            headers.append(k.clone(), v.clone());
        }
        let body = if plan.grpc {
            Some(grpc::frame(plan.body_size))
        } else if plan.has_body && plan.body_size > 0 {
            Some(Bytes::from(vec![b'x'; plan.body_size]))
        } else {
            None
        };
        Template {
            method: plan.method.clone(),
            uri: plan.uri.parse().expect("URI validated by Plan::from_args"),
            headers,
            body,
        }
    }

    #[inline]
    fn request(&self) -> Request<()> {
        // `http::Request` is not Clone; assembling one from pre-parsed parts
        // only bumps reference counts (an empty HeaderMap does not allocate).
        let mut req = Request::new(());
        *req.method_mut() = self.method.clone();
        *req.uri_mut() = self.uri.clone();
        if !self.headers.is_empty() {
            *req.headers_mut() = self.headers.clone();
        }
        req
    }
}

/// Open-loop send times of one connection: evenly spaced, shared by its
/// slots, each slot taking the next one when it is free. A slot that is
/// late still measures from the intended time (coordinated omission).
struct Schedule {
    base: Instant,
    interval_s: f64,
    next: Cell<u64>,
    /// Send times whose request never left (connection lost before sending):
    /// re-sent on the next connection, keeping their intended time.
    retry: RefCell<Vec<Instant>>,
}

impl Schedule {
    fn next(&self) -> Instant {
        if let Some(t) = self.retry.borrow_mut().pop() {
            return t;
        }
        let i = self.next.get();
        self.next.set(i + 1);
        self.base + Duration::from_secs_f64(i as f64 * self.interval_s)
    }
}

/// Timeout state of one slot, checked by the thread's ticker. This avoids
/// arming a glommio timer per request (a reactor insert and remove each).
#[derive(Default)]
struct Slot {
    deadline: Cell<Option<Instant>>,
    expired: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

/// How a request failed.
enum Fail {
    /// The connection went away before the request was sent, or it was
    /// refused by a graceful GOAWAY: not processed, safe to re-send.
    Retry,
    /// Counted error; `dead` when the connection is unusable.
    Error(ErrorKind, bool),
    Timeout,
}

fn classify(e: h2::Error) -> Fail {
    if e.is_go_away() {
        if e.reason() == Some(Reason::NO_ERROR) {
            Fail::Retry
        } else {
            Fail::Error(ErrorKind::GoAway, true)
        }
    } else if e.is_io() {
        Fail::Error(ErrorKind::Io, true)
    } else if e.is_reset() {
        Fail::Error(ErrorKind::Reset, false)
    } else {
        Fail::Error(ErrorKind::Other, false)
    }
}

/// A thread's sessions. `free` counts the idle ones, so that waiting for a
/// session is a FIFO wait on the semaphore; taking and returning one never
/// awaits in between, which keeps `free` equal to the idle queue's length.
struct Sessions {
    pool: RefCell<SessionPool>,
    free: Semaphore,
}

impl Sessions {
    fn new(n: usize, backend_header: HeaderName) -> Sessions {
        Sessions {
            pool: RefCell::new(SessionPool::new(n, backend_header)),
            free: Semaphore::new(n as u64),
        }
    }

    /// Waits for the least recently used idle session.
    async fn lease(&self) -> Lease<'_> {
        // Never closed, so this cannot fail.
        let _ = self.free.acquire(1).await;
        let idx = self
            .pool
            .borrow_mut()
            .take()
            .expect("a permit means an idle session");
        Lease {
            sessions: self,
            idx,
        }
    }
}

/// A session in use by one slot; idle again when dropped, whatever way the
/// slot's request ended (or the slot task itself).
struct Lease<'a> {
    sessions: &'a Sessions,
    idx: usize,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        self.sessions.pool.borrow_mut().give_back(self.idx);
        self.sessions.free.signal(1);
    }
}

/// Per-thread state shared by its tasks.
struct Worker {
    plan: Arc<Plan>,
    tl: Timeline,
    template: Template,
    builder: h2::client::Builder,
    stats: RefCell<ThreadStats>,
    progress: Arc<Progress>,
    done: Cell<u64>,
    errors: Cell<u64>,
    slots: Vec<Rc<Slot>>,
    sessions: Option<Sessions>,
}

impl Worker {
    fn count_error(&self, kind: ErrorKind) {
        self.stats.borrow_mut().errors.add(kind);
        self.errors.set(self.errors.get() + 1);
        self.progress
            .errors
            .store(self.errors.get(), std::sync::atomic::Ordering::Relaxed);
    }

    fn count_done(&self) {
        self.done.set(self.done.get() + 1);
        // Plain store of a thread-local count: the line is only read once a
        // second by the main thread.
        self.progress
            .done
            .store(self.done.get(), std::sync::atomic::Ordering::Relaxed);
    }
}

/// Runs this thread's share of the connections (and in session mode, its
/// `sessions`) until the end of the timeline, then returns what it measured.
pub async fn thread_main(
    plan: Arc<Plan>,
    tl: Timeline,
    conns: Vec<usize>,
    sessions: Option<usize>,
    progress: Arc<Progress>,
) -> ThreadStats {
    let mut builder = h2::client::Builder::new();
    let conn_window = (plan.window as u64 * plan.streams as u64).clamp(64 << 20, (1 << 31) - 1);
    builder
        // Lets the first `-m` streams go out before the server's SETTINGS.
        .initial_max_send_streams(plan.streams)
        .initial_window_size(plan.window)
        .initial_connection_window_size(conn_window as u32)
        .enable_push(false);
    let slots = (0..conns.len() * plan.streams)
        .map(|_| Rc::new(Slot::default()))
        .collect();
    let sessions = sessions.map(|n| {
        // Parsed per thread (as the template): no shared reference counts.
        let name = HeaderName::from_bytes(plan.backend_header.as_bytes())
            .expect("header name validated by Plan::from_args");
        Sessions::new(n, name)
    });
    let w = Rc::new(Worker {
        template: Template::new(&plan),
        plan,
        tl,
        builder,
        stats: RefCell::new(ThreadStats::default()),
        progress,
        done: Cell::new(0),
        errors: Cell::new(0),
        slots,
        sessions,
    });
    let ticker = glommio::spawn_local(ticker(w.clone()));
    let tasks: Vec<Task<()>> = conns
        .iter()
        .enumerate()
        .map(|(local, &global)| glommio::spawn_local(connection(w.clone(), global, local)))
        .collect();
    for t in tasks {
        t.await;
    }
    drop(ticker);
    let mut stats = w.stats.replace(ThreadStats::default());
    stats.sessions = w.sessions.as_ref().map(|s| s.pool.borrow().stats());
    stats
}

/// Expires slots whose deadline passed and wakes them.
async fn ticker(w: Rc<Worker>) {
    let tick = (w.plan.timeout / 20).clamp(Duration::from_millis(5), Duration::from_millis(100));
    loop {
        sleep(tick).await;
        let now = Instant::now();
        for s in &w.slots {
            if s.deadline.get().is_some_and(|d| now >= d) {
                s.expired.set(true);
                if let Some(waker) = s.waker.borrow().as_ref() {
                    waker.wake_by_ref();
                }
            }
        }
    }
}

/// One connection, re-dialled when it breaks, until the end of the run.
async fn connection(w: Rc<Worker>, global_idx: usize, local_idx: usize) {
    let plan = &w.plan;
    let sched = plan.rate.map(|rate| {
        let per_conn = rate / plan.connections as f64;
        // Stagger connections so that their combined sends are evenly spaced.
        let offset = Duration::from_secs_f64(global_idx as f64 / rate);
        Rc::new(Schedule {
            base: w.tl.start + offset,
            interval_s: 1.0 / per_conn,
            next: Cell::new(0),
            retry: RefCell::new(Vec::new()),
        })
    });
    let slots = &w.slots[local_idx * plan.streams..(local_idx + 1) * plan.streams];
    let mut first = true;
    while Instant::now() < w.tl.end {
        if !first {
            w.stats.borrow_mut().reconnects += 1;
            pause_until_end(&w, RECONNECT_PAUSE).await;
        }
        first = false;
        let (sender, driver) = match connect(&w).await {
            Ok(c) => c,
            Err(()) => {
                w.count_error(ErrorKind::Connect);
                pause_until_end(&w, CONNECT_RETRY).await;
                continue;
            }
        };
        let tasks: Vec<Task<SlotEnd>> = slots
            .iter()
            .map(|slot| {
                glommio::spawn_local(slot_loop(
                    w.clone(),
                    sender.clone(),
                    sched.clone(),
                    slot.clone(),
                ))
            })
            .collect();
        // Our handle must go too, so that the connection can close once the
        // slots are done with theirs.
        drop(sender);
        let mut broken = false;
        for t in tasks {
            broken |= t.await == SlotEnd::Broken;
        }
        let _ = or(driver, sleep(CLOSE_GRACE)).await;
        if !broken {
            // Every slot ran out of time (or of schedule): the run is over.
            break;
        }
    }
}

/// Why a slot loop returned.
#[derive(Debug, PartialEq, Eq)]
enum SlotEnd {
    /// No more requests to send in this run.
    Finished,
    /// The connection is unusable: re-dial.
    Broken,
}

async fn pause_until_end(w: &Worker, d: Duration) {
    let left = w.tl.end.saturating_duration_since(Instant::now());
    if !left.is_zero() {
        sleep(d.min(left)).await;
    }
}

/// Dials and handshakes; the returned task drives the h2 connection.
async fn connect(w: &Worker) -> Result<(SendRequest<Bytes>, Task<()>), ()> {
    let dial = async {
        let tcp = TcpStream::connect(w.plan.addr).await.map_err(|_| ())?;
        // Requests are small frames: do not let Nagle hold them back.
        let _ = tcp.set_nodelay(true);
        w.builder
            .handshake::<_, Bytes>(tcp.compat())
            .await
            .map_err(|_| ())
    };
    let timeout = async {
        sleep(w.plan.connect_timeout).await;
        Err(())
    };
    let (sender, conn) = or(dial, timeout).await?;
    let driver = glommio::spawn_local(async move {
        let _ = conn.await;
    });
    Ok((sender, driver))
}

/// Sends requests on one stream slot until the end or the connection breaks.
async fn slot_loop(
    w: Rc<Worker>,
    mut sender: SendRequest<Bytes>,
    sched: Option<Rc<Schedule>>,
    slot: Rc<Slot>,
) -> SlotEnd {
    let tl = w.tl;
    let mut timer: Option<Timer> = None;
    let mut now = Instant::now();
    loop {
        let mut start = match &sched {
            None => {
                if now >= tl.end {
                    return SlotEnd::Finished;
                }
                now
            }
            Some(s) => {
                let at = s.next();
                // A backlog left at the end is not sent: the achieved rate
                // must reflect what the server sustained within the window.
                if at >= tl.end || now >= tl.end {
                    return SlotEnd::Finished;
                }
                let wait = at.saturating_duration_since(now);
                if wait > MIN_SLEEP {
                    // One timer per slot, re-armed: no allocation per request.
                    match &mut timer {
                        Some(t) => t.reset(wait),
                        None => timer = Some(Timer::new(wait)),
                    }
                    if let Some(t) = &mut timer {
                        t.await;
                    }
                    now = Instant::now();
                }
                at
            }
        };
        // Session mode: wait for an idle session. The wait counts as latency
        // in open loop (measured from the intended time), not in closed loop
        // (measured from when the request goes out).
        let lease = match &w.sessions {
            Some(s) => {
                let lease = s.lease().await;
                now = Instant::now();
                if now >= tl.end {
                    return SlotEnd::Finished;
                }
                if sched.is_none() {
                    start = now;
                }
                Some(lease)
            }
            None => None,
        };
        let measured = start >= tl.warmup_end;
        let deadline = now.max(start) + w.plan.timeout;
        let session = lease.as_ref().map(|l| (l.idx, measured));
        let result = with_deadline(&slot, deadline, one_request(&w, &mut sender, session)).await;
        drop(lease);
        now = Instant::now();
        w.count_done();
        match result {
            Ok((status, grpc_ok)) => {
                let is_2xx = (200..300).contains(&status);
                if measured {
                    let mut st = w.stats.borrow_mut();
                    st.record_response(now - start, status, is_2xx && grpc_ok);
                }
                if !is_2xx {
                    if measured {
                        w.count_error(ErrorKind::Non2xx);
                    }
                } else if !grpc_ok && measured {
                    w.count_error(ErrorKind::GrpcStatus);
                }
            }
            Err(Fail::Retry) => {
                if let Some(s) = &sched {
                    s.retry.borrow_mut().push(start);
                }
                return SlotEnd::Broken;
            }
            Err(Fail::Error(kind, dead)) => {
                if measured {
                    w.count_error(kind);
                }
                if dead {
                    return SlotEnd::Broken;
                }
            }
            Err(Fail::Timeout) => {
                if measured {
                    w.count_error(ErrorKind::Timeout);
                }
            }
        }
    }
}

/// Runs `fut` until it finishes or the ticker marks `slot` expired.
async fn with_deadline<T>(
    slot: &Slot,
    deadline: Instant,
    fut: impl Future<Output = Result<T, Fail>>,
) -> Result<T, Fail> {
    slot.expired.set(false);
    slot.deadline.set(Some(deadline));
    let mut fut = pin!(fut);
    let r = poll_fn(|cx| {
        if let Poll::Ready(r) = fut.as_mut().poll(cx) {
            return Poll::Ready(r);
        }
        if slot.expired.get() {
            return Poll::Ready(Err(Fail::Timeout));
        }
        // A slot always runs in the same task, so this clones at most once.
        let mut w = slot.waker.borrow_mut();
        if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            *w = Some(cx.waker().clone());
        }
        Poll::Pending
    })
    .await;
    slot.deadline.set(None);
    r
}

/// One request/response exchange: returns the status and whether gRPC
/// reported success (always true outside gRPC mode). `session`: the
/// session it is sent for, and whether the request is in the measured window.
async fn one_request(
    w: &Worker,
    sender: &mut SendRequest<Bytes>,
    session: Option<(usize, bool)>,
) -> Result<(u16, bool), Fail> {
    let tpl = &w.template;
    let mut request = tpl.request();
    if let (Some(s), Some((idx, _))) = (&w.sessions, session) {
        if let Some(cookie) = s.pool.borrow_mut().cookie_header(idx) {
            // Added to any `-H cookie:` (h2 allows several cookie fields).
            request.headers_mut().append(COOKIE, cookie);
        }
    }
    // Failures before anything was sent are retried on a new connection.
    poll_fn(|cx| sender.poll_ready(cx))
        .await
        .map_err(|_| Fail::Retry)?;
    // GET: END_STREAM on HEADERS, no DATA frame at all.
    let (response, mut send) = sender
        .send_request(request, tpl.body.is_none())
        .map_err(|_| Fail::Retry)?;
    if let Some(body) = &tpl.body {
        // END_STREAM on the (only) DATA frame. h2 buffers what exceeds the
        // peer's window; the body is a shared `Bytes`, so nothing is copied.
        send.send_data(body.clone(), true).map_err(classify)?;
    }
    let response = response.await.map_err(classify)?;
    if let (Some(s), Some((idx, measured))) = (&w.sessions, session) {
        s.pool
            .borrow_mut()
            .on_response(idx, response.headers(), measured);
    }
    let status = response.status().as_u16();
    let grpc_mode = w.plan.grpc;
    // Trailers-only gRPC responses carry grpc-status in the headers.
    let mut grpc_status = if grpc_mode {
        grpc::status(response.headers())
    } else {
        None
    };
    let mut body = response.into_body();
    if !body.is_end_stream() {
        while let Some(chunk) = body.data().await {
            let n = chunk.map_err(classify)?.len();
            // Hand the window back at once, or large responses stall.
            let _ = body.flow_control().release_capacity(n);
            if body.is_end_stream() {
                break;
            }
        }
        // Trailers pending (or the stream still open): consume them, so the
        // stream ends cleanly instead of being reset on drop.
        if !body.is_end_stream() {
            if let Some(trailers) = body.trailers().await.map_err(classify)? {
                if grpc_mode {
                    grpc_status = grpc::status(&trailers).or(grpc_status);
                }
            }
        }
    }
    Ok((status, !grpc_mode || grpc_status == Some(0)))
}
