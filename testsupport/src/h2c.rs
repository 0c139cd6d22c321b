//! The h2c serving loop both in-process control planes run: accept until stopped, a task per connection and per stream, and on stop an HTTP/2 graceful shutdown bounded by [`DRAIN`], with the sockets shut down so clients see the close at once.

use std::cell::Cell;
use std::future::Future;
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_lite::future::or;
use glommio::net::{TcpListener, TcpStream};
use glommio::timer::sleep;
use h2::server::SendResponse;
use h2::{Reason, RecvStream};
use http::Request;
use tokio_util::compat::FuturesAsyncReadCompatExt;

/// How often a stop flag is looked at.
pub(crate) const POLL: Duration = Duration::from_millis(5);
/// How long a stopping server keeps driving a connection for its streams'
/// trailers and the GOAWAY exchange.
pub(crate) const DRAIN: Duration = Duration::from_secs(1);

/// A server's state as far as the loop needs it.
pub(crate) trait Stopping: Send + Sync + 'static {
    fn stopping(&self) -> bool;
}

/// `fut`'s output, or `None` once the server is stopping.
pub(crate) async fn unless_stopped<S: Stopping, T>(
    shared: &S,
    fut: impl Future<Output = T>,
) -> Option<T> {
    let stopped = async {
        while !shared.stopping() {
            sleep(POLL).await;
        }
        None
    };
    or(async { Some(fut.await) }, stopped).await
}

/// Serves h2c on `listener` (its descriptor `fd`) until `shared` stops,
/// each stream in its own task by `stream`.
pub(crate) async fn serve<S, F, Fut>(listener: TcpListener, fd: RawFd, shared: Arc<S>, stream: F)
where
    S: Stopping,
    F: Fn(Request<RecvStream>, SendResponse<Bytes>, Arc<S>) -> Fut + Copy + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let open = Rc::new(Cell::new(0usize));
    loop {
        match unless_stopped(&*shared, listener.accept()).await {
            Some(Ok(conn)) => {
                let (shared, open) = (shared.clone(), open.clone());
                open.set(open.get() + 1);
                glommio::spawn_local(async move {
                    serve_conn(conn, shared, stream).await;
                    open.set(open.get() - 1);
                })
                .detach();
            }
            // Typically EMFILE: back off instead of spinning.
            Some(Err(_)) => sleep(Duration::from_millis(10)).await,
            None => break,
        }
    }
    // glommio may keep an operation in flight on the listener, and that
    // reference keeps the socket listening after `close` until the ring is
    // torn down; shutting it down makes clients see a refusal right away.
    // SAFETY: `listener` owns this fd and is still alive.
    unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
    drop(listener);
    // Returning ends the executor and drops the detached connection tasks:
    // give them the time to send their trailers and GOAWAY first.
    let deadline = Instant::now() + DRAIN + Duration::from_millis(500);
    while open.get() > 0 && Instant::now() < deadline {
        sleep(POLL).await;
    }
}

/// Serves one h2c connection; on stop, lets its streams send their final
/// trailers, shuts HTTP/2 down gracefully (bounded by [`DRAIN`]) and closes.
async fn serve_conn<S, F, Fut>(tcp: TcpStream, shared: Arc<S>, stream: F)
where
    S: Stopping,
    F: Fn(Request<RecvStream>, SendResponse<Bytes>, Arc<S>) -> Fut + Copy + 'static,
    Fut: Future<Output = ()> + 'static,
{
    // Responses are small frames that must not wait for Nagle.
    let _ = tcp.set_nodelay(true);
    let fd = tcp.as_raw_fd();
    let mut builder = h2::server::Builder::new();
    builder
        .initial_window_size(1 << 20)
        .initial_connection_window_size(4 << 20);
    let handshake = builder.handshake::<_, Bytes>(tcp.compat());
    let Some(Ok(mut conn)) = unless_stopped(&*shared, handshake).await else {
        return;
    };
    // `accept` also drives the connection's I/O for every stream, so it is
    // polled all along; the streams run in their own tasks.
    loop {
        match unless_stopped(&*shared, conn.accept()).await {
            Some(Some(Ok((req, respond)))) => {
                glommio::spawn_local(stream(req, respond, shared.clone())).detach();
            }
            // The client went away or broke the protocol.
            Some(_) => return,
            None => break,
        }
    }
    // Stopping: the stream tasks notice the flag too and end their streams;
    // keep driving the connection so those trailers and the GOAWAY exchange
    // reach the client, refusing any stream opened meanwhile.
    conn.graceful_shutdown();
    let drain = async {
        while let Some(Ok((_, mut respond))) = conn.accept().await {
            respond.send_reset(Reason::REFUSED_STREAM);
        }
    };
    or(drain, sleep(DRAIN)).await;
    // As for the listener, make the client see the close now even though
    // glommio may still hold the socket in the ring.
    // SAFETY: `conn` owns this fd and is still alive.
    unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
}
