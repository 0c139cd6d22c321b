//! The admin server's thread: its own executor, so that rendering a large page (or a storm of scrapes) runs beside the control shard, never on it; it reads the state the control shard last published and sends its actions back over a command channel.

use shards::wire::sockets::{ListenSockets, Owner};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};
use glommio::{LocalExecutorBuilder, Placement, PoolPlacement};

use super::state::Inner;
use crate::events::{AdminAction, Command, CommandSender};

const MAX_REQUEST: usize = 16 * 1024;
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// A client that does not read its page within this is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Pages rendered or being sent at once, at most: a page of 10,000
/// clusters is tens of MB, so a storm of scrapes must not hold one each.
/// Past it, a request is answered 503 at once (and counted).
pub(super) const MAX_PAGES: usize = 4;
/// Threads that render pages: two at once at most, so a storm of scrapes
/// takes no more than two cores' worth from the data shards (the pages
/// past them wait for a thread, within [`MAX_PAGES`]).
const RENDER_THREADS: usize = 2;
/// Connections open at once, at most; past it, closed unanswered (and
/// counted).
const MAX_CONNECTIONS: usize = 256;

/// What the control shard and the admin thread share.
pub(super) struct Shared {
    /// The state as last published: the admin thread takes the `Arc` (a
    /// lock held for a pointer copy), the control shard swaps in a new one.
    view: Mutex<Arc<Inner>>,
    /// Where actions go (set once the thread starts).
    actions: Mutex<Option<CommandSender>>,
    stopped: AtomicBool,
    /// Written once by [`Shared::stop`]: the accept loop waits on the
    /// other end (no timer, so an idle admin thread does not wake).
    stop_signal: Mutex<Option<std::os::unix::net::UnixStream>>,
    bound: Mutex<Option<SocketAddr>>,
    /// Connections open, and pages being rendered or sent (only the admin
    /// thread changes them).
    connections: AtomicUsize,
    pages: AtomicUsize,
    /// Requests refused past those bounds (`/stats` says).
    pub(super) refused: AtomicU64,
}

impl Shared {
    pub(super) fn new(inner: Inner) -> Self {
        Self {
            view: Mutex::new(Arc::new(inner)),
            actions: Mutex::new(None),
            stopped: AtomicBool::new(false),
            stop_signal: Mutex::new(None),
            bound: Mutex::new(None),
            connections: AtomicUsize::new(0),
            pages: AtomicUsize::new(0),
            refused: AtomicU64::new(0),
        }
    }

    pub(super) fn publish(&self, inner: Inner) {
        let next = Arc::new(inner);
        // The old copy is dropped outside the lock (its snapshot may be
        // the last reference to a large config).
        let old = std::mem::replace(&mut *lock(&self.view), next);
        drop(old);
    }

    pub(super) fn view(&self) -> Arc<Inner> {
        Arc::clone(&lock(&self.view))
    }

    /// Sends `action` to the control shard; false when it is gone.
    pub(super) fn act(&self, action: AdminAction) -> bool {
        lock(&self.actions)
            .as_ref()
            .is_some_and(|c| c.send(Command::Admin(action)))
    }

    /// Ends the thread: its accept loop wakes on the stop signal. (Not by
    /// connecting to itself: after a hot restart the next process accepts
    /// on the same socket.)
    pub(super) fn stop(&self) {
        use std::io::Write as _;
        self.stopped.store(true, Relaxed);
        *lock(&self.actions) = None;
        if let Some(mut w) = lock(&self.stop_signal).as_ref() {
            let _ = w.write(&[1]);
        }
    }
}

/// The admin server's own series, for `/stats`.
pub(super) fn write_series(out: &mut String, shared: &Shared) {
    use std::fmt::Write as _;
    let name = "gateway_admin_requests_refused_total";
    super::exposition::metric(
        out,
        name,
        "counter",
        "Admin requests refused: past the pages served at once (answered 503) or the connections open at once (closed).",
    );
    let _ = writeln!(out, "{name} {}", shared.refused.load(Relaxed));
}

/// A poisoned lock still holds a usable value (an `Arc` or an option).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts the thread, binds `addr` there, and returns what it bound.
pub(super) fn start(
    addr: SocketAddr,
    shared: Arc<Shared>,
    actions: CommandSender,
    sockets: Arc<ListenSockets>,
) -> std::io::Result<SocketAddr> {
    *lock(&shared.actions) = Some(actions);
    let (signal, stop_rx) = std::os::unix::net::UnixStream::pair()?;
    stop_rx.set_nonblocking(true)?;
    *lock(&shared.stop_signal) = Some(signal);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("admin".into())
        .spawn(move || {
            // Pages render on the blocking pool's threads; the requests
            // that must not wait are answered on this one.
            let ex = LocalExecutorBuilder::new(Placement::Unbound)
                .io_memory(1 << 20)
                .blocking_thread_pool_placement(PoolPlacement::Unbound(RENDER_THREADS))
                .name("admin")
                .make();
            let ex = match ex {
                Ok(ex) => ex,
                Err(e) => {
                    let _ = tx.send(Err(std::io::Error::other(e.to_string())));
                    return;
                }
            };
            ex.run(accept(addr, shared, tx, sockets, stop_rx));
        })?;
    rx.recv()
        .map_err(|_| std::io::Error::other("the admin thread ended"))?
}

/// The admin socket: the one the previous process handed over (hot
/// restart), else one bound now.
fn listen(addr: SocketAddr, sockets: &ListenSockets) -> std::io::Result<TcpListener> {
    use std::os::fd::{FromRawFd, IntoRawFd};
    let mut taken = sockets.take(addr, Owner::Admin, 1);
    let Some(fd) = taken.pop() else {
        return Ok(TcpListener::bind(addr)?);
    };
    // SAFETY: a listening TCP socket the registry owned, now ours alone.
    let l = unsafe { TcpListener::from_raw_fd(fd.into_raw_fd()) };
    l.set_nonblocking()?;
    Ok(l)
}

/// Takes `fd` out of the hot restart's registry as the admin socket
/// closes.
struct Registered<'a>(&'a ListenSockets, SocketAddr, i32);

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.0.closing(self.1, Owner::Admin, self.2);
    }
}

async fn accept(
    addr: SocketAddr,
    shared: Arc<Shared>,
    started: std::sync::mpsc::Sender<std::io::Result<SocketAddr>>,
    sockets: Arc<ListenSockets>,
    stop_rx: std::os::unix::net::UnixStream,
) {
    use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};
    // SAFETY: a non-blocking socket made for this loop, now owned by it.
    let stop_rx = unsafe { glommio::net::UnixStream::from_raw_fd(stop_rx.into_raw_fd()) };
    let listener = match listen(addr, &sockets) {
        Ok(l) => l,
        Err(e) => {
            let _ = started.send(Err(e));
            return;
        }
    };
    let bound = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => {
            let _ = started.send(Err(e.into()));
            return;
        }
    };
    *lock(&shared.bound) = Some(bound);
    sockets.opened(bound, Owner::Admin, listener.as_raw_fd());
    // Declared after the listener: dropped (and unregistered) first.
    let _registered = Registered(&sockets, bound, listener.as_raw_fd());
    let _ = started.send(Ok(bound));
    // One future for the loop's life, raced with each accept; it ends
    // once, after which the loop ends too.
    let stop = async {
        use futures_lite::AsyncReadExt as _;
        let mut rx = stop_rx;
        let _ = rx.read(&mut [0u8; 1]).await;
        if !shared.stopped.load(Relaxed) {
            // Woken without a stop (cannot happen while `shared`, which
            // holds the writing end, lives): never end.
            std::future::pending::<()>().await;
        }
        Err(glommio::GlommioError::IoError(
            std::io::ErrorKind::Interrupted.into(),
        ))
    };
    let mut stop = std::pin::pin!(stop);
    while !shared.stopped.load(Relaxed) {
        // Dropping a pending accept loses no connection (glommio's
        // PATCH(polled-accept)).
        match futures_lite::future::or(listener.accept(), stop.as_mut()).await {
            Ok(stream) if !shared.stopped.load(Relaxed) => {
                if shared.connections.load(Relaxed) >= MAX_CONNECTIONS {
                    shared.refused.fetch_add(1, Relaxed);
                    continue;
                }
                // Counted here, not when its task first runs: a burst of
                // accepts stays within the bound.
                let slot = Connection::new(Arc::clone(&shared));
                glommio::spawn_local(serve(stream, slot)).detach();
            }
            Ok(_) => break,
            Err(_) => glommio::timer::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// Counts one in `n` while it lives.
struct Held<'a>(&'a AtomicUsize);

impl<'a> Held<'a> {
    fn new(n: &'a AtomicUsize) -> Self {
        n.fetch_add(1, Relaxed);
        Self(n)
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

/// An admin connection counted open while it lives.
struct Connection(Arc<Shared>);

impl Connection {
    fn new(shared: Arc<Shared>) -> Self {
        shared.connections.fetch_add(1, Relaxed);
        Self(shared)
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Relaxed);
    }
}

async fn serve(mut stream: TcpStream, slot: Connection) {
    let shared = &slot.0;
    // A client that connects and never sends a request, or never reads
    // its page, must not hold a task and a buffer for ever.
    let _ = stream.set_read_timeout(Some(READ_TIMEOUT));
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let mut buf = vec![0u8; MAX_REQUEST];
    let mut len = 0;
    let (method, path, cross_site) = loop {
        let n = match stream.read(&mut buf[len..]).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        len += n;
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf[..len]) {
            Ok(httparse::Status::Complete(_)) => {
                // A browser's request from another site's page says where
                // it came from; the admin's own page sends none with GET.
                let origin = req
                    .headers
                    .iter()
                    .any(|h| h.name.eq_ignore_ascii_case("origin"));
                break (
                    req.method.unwrap_or("GET").to_string(),
                    req.path.unwrap_or("/").to_string(),
                    origin,
                );
            }
            Ok(httparse::Status::Partial) if len < MAX_REQUEST => continue,
            _ => {
                let _ = respond(&mut stream, 400, "text/plain", "bad request\n").await;
                return;
            }
        }
    };
    if cross_site && method == "POST" {
        // A page elsewhere must not fail this instance's health check.
        let _ = respond(&mut stream, 403, "text/plain", "cross-site POST refused\n").await;
        return;
    }
    // What a balancer, an operator's hook and a shutdown need are never
    // refused for pages: they render nothing large.
    let small = method == "POST"
        || matches!(
            path.split('?').next(),
            Some("/ready" | "/server_info" | "/help")
        );
    if !small && shared.pages.load(Relaxed) >= MAX_PAGES {
        shared.refused.fetch_add(1, Relaxed);
        let busy = "too many admin requests at once; retry\n";
        let _ = respond(&mut stream, 503, "text/plain", busy).await;
        return;
    }
    let _page = Held::new(&shared.pages);
    let (status, ctype, body) = match small {
        true => super::route(&method, &path, shared),
        // A page is rendered off this thread: a 10,000-cluster page takes
        // most of a second, and `/ready` (a balancer's probe) must not wait
        // behind it.
        false => {
            let shared = Arc::clone(shared);
            // A page that fails to render answers 500 and frees its slot:
            // the render thread must not take the request down with it.
            let render = move || {
                let page = || super::route(&method, &path, &shared);
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(page)).unwrap_or_else(|_| {
                    (500, "text/plain", "the page failed to render\n".to_owned())
                })
            };
            glommio::executor().spawn_blocking(render).await
        }
    };
    let _ = respond(&mut stream, status, ctype, &body).await;
}

async fn respond(
    stream: &mut TcpStream,
    status: u16,
    ctype: &str,
    body: &str,
) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        500 => "Internal Server Error",
        _ => "Service Unavailable",
    };
    // The dashboard's page may run its own inline script and fetch from
    // here, nothing else; no page is read as another type.
    let policy = match ctype.starts_with("text/html") {
        true => "content-security-policy: default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'\r\n",
        false => "",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nx-content-type-options: nosniff\r\n{policy}connection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.flush().await?;
    stream.close().await
}
