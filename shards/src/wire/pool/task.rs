//! One upstream connection's task: it connects (TCP, then TLS), learns the protocol, then writes what its pool's streams give it, reads, routes responses to the downstream connections that own the streams, and closes when it is over (failed, drained, idle past the cluster's `idle_timeout`).

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use engine::UpstreamProtocol;
use futures_lite::{AsyncRead, AsyncWrite};
use glommio::timer::Timer;
use h2wire::conn::ClientEvent;

use super::conn::UpConn;
use super::state::{PoolRef, BACKOFF_BASE, BACKOFF_MAX};
use crate::stats::tls::TlsFailure;
use crate::wire::codec::Proto;
use crate::wire::inbox::{park, Delivered, Inboxes};
use crate::wire::outbuf::OutBuf;
use crate::wire::readbuf::ReadBuf;
use crate::wire::tls::{connect_upstream, Preface, Transport};
use crate::wire::upcodec::UpCodec;

/// How long a closing upstream connection may take to write its last
/// frames (GOAWAY, resets) to a backend that may not be reading.
const CLOSE_FLUSH: Duration = Duration::from_secs(1);
/// Bytes asked of an upstream socket per read: one read brings the
/// answers of many clients' streams.
const READ_SIZE: usize = 32 * 1024;

/// Drives connection `slot` (generation `gen`) of `pool`: connects (TCP,
/// then TLS when the cluster has it), then writes what the downstream
/// tasks gave it, reads, and routes events to the downstream connections
/// owning their streams.
pub(super) async fn drive(pool: PoolRef, slot: usize, gen: u32) {
    let (addr, host, timeout, shard_stats, tls, cluster, proxy, header) = {
        let p = pool.borrow();
        (
            p.addr,
            p.host,
            p.cluster.connect_timeout,
            Arc::clone(&p.stats),
            p.cluster.upstream.tls.clone(),
            Arc::clone(&p.cluster_stats),
            p.cluster.upstream.proxy_protocol.clone(),
            p.proxy_header.clone(),
        )
    };
    let stats = shard_stats.hosts.host(host);
    let began = Instant::now();
    cluster.upstream_cx_total.inc();
    let preface = Preface::of(proxy.as_ref(), header.as_deref());
    let connected = connect_upstream(addr, timeout, tls.as_deref(), preface).await;
    // Envoy's: a connection's length from its start, a failed one's too
    // (0 where refused at once); its connect time only once it is up.
    let _length = ConnectionLength(&cluster.upstream_cx_length_ms, began);
    let (mut transport, alpn) = match connected {
        Ok(t) => {
            if let Transport::TlsClient(s) = &t.0 {
                cluster.ssl.handshake_done(s.get_ref().1);
            }
            t
        }
        Err(e) => {
            if let Some(why) = TlsFailure::of(&e) {
                cluster.ssl.failed(why);
            }
            tracing::debug!(%addr, "upstream connect failed: {e}");
            stats.cx_connect_fail.inc();
            cluster.upstream_cx_connect_fail.inc();
            // Envoy's: a refused connect (or a failed handshake) is a
            // connection the remote ended; one that timed out, the
            // gateway closed.
            cluster.upstream_cx_destroy.inc();
            let remote = e.kind() != std::io::ErrorKind::TimedOut;
            cluster.destroys().count(remote, false);
            let mut p = pool.borrow_mut();
            let b = p.backoff;
            p.retry_at = Some(Instant::now() + b);
            p.backoff = (b * 2).min(BACKOFF_MAX);
            drop(p);
            fail(&pool, slot, gen, true);
            finish_task(&pool, slot, gen);
            return;
        }
    };
    {
        let mut p = pool.borrow_mut();
        p.retry_at = None;
        p.backoff = BACKOFF_BASE;
        if let Some(c) = p.conns.get_mut(slot).filter(|c| c.gen == gen) {
            c.connected = true;
            // The streams that waited for it are attempts on a
            // connection now.
            cluster.upstream_rq_total.add(c.routes.len() as u64);
        }
    }
    stats.cx_total.inc();
    stats.cx_active.inc();
    cluster.upstream_cx_connect_ms.record(began.elapsed());
    let mut out = OutBuf::new(u32::MAX);
    let by = if adopt_protocol(&pool, slot, gen, alpn) {
        let mut rb = ReadBuf::default();
        run(&pool, slot, gen, &mut transport, &mut rb, &mut out).await
    } else {
        tracing::debug!(%addr, "upstream ALPN changed protocol: connection dropped");
        ClosedBy::Gateway
    };
    cluster.upstream_cx_tx_bytes_total.add(out.take_written());
    let active_rq = pool
        .borrow()
        .conns
        .get(slot)
        .is_some_and(|c| c.gen == gen && !c.routes.is_empty());
    cluster.upstream_cx_destroy.inc();
    cluster
        .destroys()
        .count(matches!(by, ClosedBy::Server), active_rq);
    stats.cx_active.dec();
    fail(&pool, slot, gen, false);
    finish_task(&pool, slot, gen);
}

/// Records a connection's length in its cluster's histogram as it ends,
/// however it ends.
struct ConnectionLength<'a>(&'a crate::stats::envoy::Histogram, Instant);

impl Drop for ConnectionLength<'_> {
    fn drop(&mut self) {
        self.0.record(self.1.elapsed());
    }
}

/// With `auto_config`, takes the protocol the handshake chose (no ALPN:
/// HTTP/1.1, as in Envoy): a connection that waited for it gets its codec
/// and the pool's waiters try again. False: a connection opened on the
/// pool's last answer found another; it is dropped (its streams learn it
/// as a lost connection) and the pool keeps the new answer.
fn adopt_protocol(pool: &PoolRef, slot: usize, gen: u32, alpn: Option<Proto>) -> bool {
    let mut p = pool.borrow_mut();
    if p.cluster.upstream.protocol != UpstreamProtocol::Auto || p.conns[slot].gen != gen {
        return true;
    }
    let chosen = alpn.unwrap_or(Proto::H1);
    let before = p.auto.replace(chosen);
    if !p.conns[slot].alpn_pending {
        return before == Some(chosen);
    }
    let (codec, cap) = p.codec(Some(chosen));
    let c = &mut p.conns[slot];
    c.conn = codec;
    c.cap = cap;
    c.alpn_pending = false;
    p.kick_all_waiters();
    true
}

/// Who ended an upstream connection (Envoy's `upstream_cx_destroy_remote`
/// and `_local`).
enum ClosedBy {
    /// The server closed its side, or the socket failed.
    Server,
    /// The gateway: idle, served out, drained, its host gone, a protocol
    /// error it saw.
    Gateway,
}

/// How a wait on the connection ended.
enum UpWoken {
    /// `n` bytes were read; 0: the server closed its side.
    Read(usize),
    /// The socket failed.
    Failed,
    /// Another task has work for this one.
    Nudged,
    /// The idle timer fired: the connection may have had no stream for
    /// the cluster's `idle_timeout`.
    IdleCheck,
}

/// The connection's loop; returns when it is over.
///
/// Output is written without waiting on the socket ([`OutBuf`]): a
/// backend whose socket stops draining (its windows open, its reads
/// stalled) leaves the request bytes here, while the responses it still
/// sends for the connection's other streams are read and delivered. The
/// output stays bounded by the backend's flow-control windows, which
/// every DATA frame the codec makes is within (HTTP/1.1: by the
/// downstream side's `takes_request_data`).
///
/// An HTTP/1.1 response past its window is not read: its bytes wait in
/// the socket, and those already read wait in `rb` until a release opens
/// the window and nudges the task.
///
/// The idle timer stays armed while the connection lives and is re-armed
/// when it fires (for what is left of the idle time, or all of it when
/// streams are open): arming it whenever the last stream leaves would
/// cost a timer per request on HTTP/1.1.
async fn run(
    pool: &PoolRef,
    slot: usize,
    gen: u32,
    tcp: &mut Transport,
    rb: &mut ReadBuf,
    out: &mut OutBuf,
) -> ClosedBy {
    let (idle_timeout, cluster) = {
        let p = pool.borrow();
        (
            p.cluster.upstream.idle_timeout,
            Arc::clone(&p.cluster_stats),
        )
    };
    let mut idle_timer: Option<Pin<Box<Timer>>> = None;
    // An upgrade's tunnel whose client ended: the socket's write side is
    // shut (once), and the server's direction goes on.
    let mut shut = false;
    loop {
        let (closing, pending) = {
            let mut p = pool.borrow_mut();
            let retired = p.retired;
            let c = &mut p.conns[slot];
            if c.gen != gen {
                return ClosedBy::Gateway;
            }
            out.take(|| c.conn.poll_output());
            c.unwritten = out.bytes();
            if let (None, Some(t)) = (&idle_timer, idle_timeout) {
                let left = c.idle_since.map_or(t, |since| {
                    (since + t).saturating_duration_since(Instant::now())
                });
                idle_timer = Some(Box::pin(Timer::new(left)));
            }
            // Retired (host left), failed or closing, and nothing left on
            // it: close.
            let closing = c.is_over(retired);
            (
                closing,
                c.conn.has_pending_input(&rb.buf) || c.conn.has_events(),
            )
        };
        if closing {
            out.flush_within(&mut *tcp, CLOSE_FLUSH).await;
            return ClosedBy::Gateway;
        }
        if pending {
            if take_input(pool, slot, rb, out) {
                out.flush_within(&mut *tcp, CLOSE_FLUSH).await;
                return ClosedBy::Gateway;
            }
            continue;
        }
        let wants = pool.borrow().conns[slot].conn.wants_input();
        // Reading: room at the buffer's tail. Not reading: the bytes that
        // wait for the window, to see when they can be taken.
        let (mut room, waiting) = if wants {
            (Some(rb.room(READ_SIZE)), None)
        } else {
            (None, Some(&rb.buf))
        };
        let woken = poll_fn(|cx| {
            if let Poll::Ready(Err(_)) = out.poll_write(&mut *tcp, cx) {
                return Poll::Ready(UpWoken::Failed);
            }
            if let Some(timer) = idle_timer.as_mut() {
                if timer.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(UpWoken::IdleCheck);
                }
            }
            if !shut && out.bytes() == 0 && pool.borrow().conns[slot].conn.wants_write_shut() {
                match Pin::new(&mut *tcp).poll_close(cx) {
                    Poll::Ready(Ok(())) => shut = true,
                    Poll::Ready(Err(_)) => return Poll::Ready(UpWoken::Failed),
                    Poll::Pending => {}
                }
            }
            if let Some(room) = room.as_deref_mut() {
                if let Poll::Ready(r) = Pin::new(&mut *tcp).poll_read(cx, room) {
                    return Poll::Ready(match r {
                        Ok(n) => UpWoken::Read(n),
                        // A TLS server that closed without close_notify
                        // (rustls says UnexpectedEof): still the end of a
                        // body that runs to the close, as Envoy takes it;
                        // a framed one cut short is caught as truncated.
                        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => UpWoken::Read(0),
                        Err(_) => UpWoken::Failed,
                    });
                }
            }
            let mut p = pool.borrow_mut();
            let p = &mut *p;
            let retired = p.retired;
            let limit = p.cluster.per_connection_buffer_limit_bytes as usize;
            let c = &mut p.conns[slot];
            c.unwritten = out.bytes();
            if c.backed_up && c.unwritten < limit / 2 {
                c.backed_up = false;
                p.inboxes
                    .wake_each(c.routes.values().map(|&(inbox, _)| inbox));
            }
            if c.conn.has_output()
                || c.conn.has_events()
                || c.conn.wants_input() != wants
                || waiting.is_some_and(|buf| c.conn.has_pending_input(buf))
                || c.is_over(retired)
            {
                return Poll::Ready(UpWoken::Nudged);
            }
            park(&mut c.waker, cx);
            Poll::Pending
        })
        .await;
        cluster.upstream_cx_tx_bytes_total.add(out.take_written());
        let n = match woken {
            UpWoken::Failed => return ClosedBy::Server,
            UpWoken::Read(0) => {
                // The server closed: an HTTP/1.1 body that runs to the
                // close ends here; streams cut short learn it below.
                let mut p = pool.borrow_mut();
                let p = &mut *p;
                let c = &mut p.conns[slot];
                if c.conn.recv_eof().is_ok() {
                    while let Some(ev) = c.conn.poll_event() {
                        route_event(&p.inboxes, c, ev);
                    }
                }
                return ClosedBy::Server;
            }
            UpWoken::Read(n) => {
                // Over TLS, after decryption, as Envoy's.
                cluster.upstream_cx_rx_bytes_total.add(n as u64);
                n
            }
            UpWoken::Nudged => 0,
            UpWoken::IdleCheck => {
                idle_timer = None;
                close_if_idle(pool, slot, idle_timeout);
                0
            }
        };
        if wants {
            // Gives back the room the read did not fill (only then was
            // there any).
            rb.filled(n);
        }
        if n > 0 && take_input(pool, slot, rb, out) {
            // A connection error: GOAWAY is queued; write it, then close.
            out.flush_within(&mut *tcp, CLOSE_FLUSH).await;
            return ClosedBy::Gateway;
        }
    }
}

/// A connection without a stream for the cluster's `idle_timeout` takes
/// no more; the loop then closes it (Envoy's `upstream_cx_idle_timeout`).
fn close_if_idle(pool: &PoolRef, slot: usize, idle_timeout: Option<Duration>) {
    let mut p = pool.borrow_mut();
    let p = &mut *p;
    let c = &mut p.conns[slot];
    let idle_for = c.idle_since.map(|since| since.elapsed());
    if idle_for
        .zip(idle_timeout)
        .is_some_and(|(idle, t)| idle >= t)
        && !c.draining
    {
        c.draining = true;
        p.stats.hosts.host(p.host).cx_idle_timeout.inc();
        p.cluster_stats.upstream_cx_idle_timeout.inc();
    }
}

/// Hands what `rb` holds to the codec and routes its events; true when
/// the connection broke (its last output is in `out`).
fn take_input(pool: &PoolRef, slot: usize, rb: &mut ReadBuf, out: &mut OutBuf) -> bool {
    let mut p = pool.borrow_mut();
    let p = &mut *p;
    let c = &mut p.conns[slot];
    let broken = c.conn.recv(&mut rb.buf).is_err();
    let mut limit_changed = false;
    while let Some(ev) = c.conn.poll_event() {
        match ev {
            ClientEvent::StreamLimit { .. } => limit_changed = true,
            // No new streams here; those open go on to their end.
            ClientEvent::GoAway { .. } => c.draining = true,
            _ => {}
        }
        route_event(&p.inboxes, c, ev);
    }
    if broken {
        out.take(|| c.conn.poll_output());
    }
    if limit_changed {
        p.kick_waiter();
    }
    broken
}

/// Hands an event to the downstream stream it belongs to; the connection
/// window opening goes to every stream on the connection.
fn route_event(inboxes: &Inboxes, c: &mut UpConn, ev: ClientEvent) {
    let Some(stream) = ev.stream() else {
        return;
    };
    if stream == 0 {
        inboxes.wake_each(c.routes.values().map(|&(inbox, _)| inbox));
        return;
    }
    let Some(&(inbox, down)) = c.routes.get(&stream) else {
        give_back(&mut c.conn, ev);
        return;
    };
    // The last event of a stream's response: the stream is no longer the
    // connection's to answer for, so a close that follows (an HTTP/1.1
    // server's, after a body that ran to it) is not a loss for it.
    let ends = match &ev {
        ClientEvent::Response {
            informational,
            end_stream,
            ..
        } => *end_stream && !informational,
        ClientEvent::Data { end_stream, .. } => *end_stream,
        ClientEvent::Trailers { .. }
        | ClientEvent::Reset { .. }
        | ClientEvent::Broken { .. }
        | ClientEvent::TooLarge { .. } => true,
        _ => false,
    };
    match inboxes.deliver(inbox, down, Delivered::Event(ev)) {
        Ok(()) if ends => c.forget(stream),
        Ok(()) => {}
        Err(Delivered::Event(ev)) => {
            c.forget(stream);
            give_back(&mut c.conn, ev);
        }
        Err(_) => c.forget(stream),
    }
}

/// An event nobody takes: its window is released, its header list reused.
fn give_back(conn: &mut UpCodec, ev: ClientEvent) {
    match ev {
        ClientEvent::Data { stream, data, .. } => conn.release(stream, data.len() as u32),
        ClientEvent::Response { head, .. } => conn.recycle(head),
        ClientEvent::Trailers { fields, .. } => conn.recycle(fields),
        _ => {}
    }
}

/// The connection is over: its streams learn it (a connect failure, or a
/// reset as if the server had sent CONNECT_ERROR), and it takes no more.
fn fail(pool: &PoolRef, slot: usize, gen: u32, connect: bool) {
    let mut p = pool.borrow_mut();
    let p = &mut *p;
    let c = &mut p.conns[slot];
    if c.gen != gen {
        return;
    }
    c.dead = true;
    // Waiters for the protocol this connection was to learn wait no more.
    let learning = std::mem::take(&mut c.alpn_pending);
    for (_, (inbox, down)) in c.routes.drain() {
        let what = if connect {
            Delivered::ConnectFailed
        } else {
            Delivered::ConnectionLost
        };
        let _ = p.inboxes.deliver(inbox, down, what);
    }
    if learning {
        p.kick_all_waiters();
    } else {
        p.kick_waiter();
    }
}

fn finish_task(pool: &PoolRef, slot: usize, gen: u32) {
    let mut p = pool.borrow_mut();
    let p = &mut *p;
    if let Some(c) = p.conns.get_mut(slot).filter(|c| c.gen == gen) {
        c.task_done = true;
        c.dead = true;
        // Counted from `acquire`'s open to the end of its task.
        p.budget.end_connection();
    }
}
