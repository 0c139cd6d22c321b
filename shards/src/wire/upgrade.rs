//! An HTTP/1.1 connection that upgrades (WebSocket) or CONNECTs: the upgrade's request on a connection of its own to the host the router chose (a CONNECT's bytes only: the gateway answers it 200 itself), the answer through the response phases, and on a 101 (or that 200) the two connections joined as a tunnel until either ends.
//!
//! The connection's task runs this once its streams hold a stream routed
//! to upgrade (`Streams::upgrading`); HTTP/1.1 serves one exchange at a
//! time, so no other stream is in flight. What the client sent after its
//! request head (early WebSocket frames) waits in the read buffer and
//! goes to the backend first; what the backend sent after its 101 goes to
//! the client first. The upgraded connection never returns to a pool:
//! it is this task's, and closes with the tunnel.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::rc::Rc;
use std::task::Poll;

use bytes::{Bytes, BytesMut};
use futures_lite::{AsyncRead, AsyncWriteExt};
use glommio::timer::Timer;
use h2wire::conn::ClientEvent;
use h2wire::message::HeaderList;

use super::lifecycle::HARD_CLOSE_AFTER;
use super::readbuf::ReadBuf;
use super::streams::{Streams, UpgradeRequest, REFUSAL_BODY_LIMIT};
use super::tcp_proxy::{connect_host, ConnectError, Upstream};
use super::tls::Transport;
use super::tunnel::{self, TunnelLimits};
use super::upcodec::UpCodec;
use super::WireShard;
use crate::local_reply::LocalReply;

/// Bytes asked of the backend per read while its answer comes.
const READ_SIZE: usize = 8 * 1024;
/// How long an upgrade's answer may take when the stream has no idle
/// timeout (`stream_idle_timeout: 0s`): Envoy's default idle timeout.
const ANSWER_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// How the backend answered an upgrade.
enum Answer {
    /// 101 (on HTTP/2, a 200 to an extended CONNECT, a 2xx to a CONNECT):
    /// its head, and the bytes that came after it (on HTTP/2, for the
    /// codec).
    Switched(HeaderList, Vec<u8>),
    /// Any other response, with its whole body.
    Refused(HeaderList, Bytes),
    /// No answer: the stream fails with this.
    Failed(LocalReply),
}

/// An upgrade the client was told it has (the 101, or a CONNECT's 200,
/// went): what its tunnel is made of.
pub(super) struct Upgraded {
    /// The upgraded stream, still in its connection's table.
    pub stream: u32,
    pub up: Upstream,
    /// Bytes already read for the other side: the client's, after its
    /// request's head; the backend's, after its 101.
    pub early: (Vec<u8>, Vec<u8>),
    pub limits: TunnelLimits,
    /// To an HTTP/2 host: the connection's codec, the tunnel's stream on
    /// it, and what was read after the answer, for the codec (boxed: an
    /// idle HTTP/1.1 tunnel holds a pointer's worth of it).
    pub h2: Option<Box<(UpCodec, u32, BytesMut)>>,
}

/// Runs the upgrade of the stream `streams` holds for it, up to the
/// client's answer: `Some` when the connection is to become a tunnel (the
/// caller runs it, `tunnel_to`), else its end is the connection's (the
/// caller closes it, flushing what the streams left: a refusal's answer).
pub(super) async fn run(
    wire: &Rc<WireShard>,
    down: &mut Transport,
    rb: &mut ReadBuf,
    streams: &mut Streams,
) -> Option<Upgraded> {
    let req = streams.upgrade_request()?;
    let UpgradeRequest {
        stream,
        mut codec,
        mut up_stream,
        addr,
        host,
        cluster,
        idle,
        ends_at,
    } = req;
    // Responses to the client's earlier requests go before the 101.
    streams.out.take_from(&mut streams.conn);
    streams.out.flush_within(down, HARD_CLOSE_AFTER).await;
    if !streams.out.is_empty() {
        return None;
    }
    let budget = wire.budget(&cluster);
    let tls = cluster.upstream.tls.as_deref();
    let header = streams.cx.proxy_header(&cluster);
    let preface = header.as_deref().into();
    let timing = (cluster.connect_timeout, tls);
    let connected = connect_host(wire, budget, (addr, host), timing, preface).await;
    let failed = match connected {
        Ok(up) if codec.as_ref().is_some_and(|c| !c.is_h2()) && up.h2 => {
            // An `auto_config` cluster's ALPN picked HTTP/2: the request
            // goes as HTTP/2's, as Envoy sends it there.
            codec = Some(streams.write_upgrade(stream, true).map(|(c, id)| {
                up_stream = id;
                c
            })?);
            Ok(up)
        }
        Ok(up) => Ok(up),
        Err(ConnectError::Overflow) => Err(LocalReply::Overflow),
        Err(ConnectError::Failed(e)) => {
            tracing::debug!(%addr, "upgrade connect failed: {e}");
            Err(LocalReply::ConnectFailure)
        }
    };
    let mut up = match failed {
        Ok(up) => up,
        Err(reply) => {
            streams.upgrade_failed(stream, reply);
            return None;
        }
    };
    // The answer is awaited as a stream's response is: within its idle
    // timeout (upgrades have no route timeout, as in Envoy). A CONNECT
    // is answered here once the host is connected.
    let within = idle.unwrap_or(ANSWER_WAIT);
    let connect = streams.conn.upgrade_asked() == Some(b"CONNECT");
    let answer = match codec.as_mut() {
        Some(codec) => exchange(&mut up.transport, codec, (up_stream, connect), within).await,
        None => Answer::Switched(connected_head(), Vec::new()),
    };
    let (mut head, mut to_down) = match answer {
        Answer::Failed(reply) => {
            streams.upgrade_failed(stream, reply);
            return None;
        }
        Answer::Refused(head, body) => {
            streams.upgrade_answered(stream, &head, body);
            return None;
        }
        Answer::Switched(head, rest) => (head, rest),
    };
    // The rest of an HTTP/2 host's bytes are its codec's; its 200 to a
    // WebSocket's extended CONNECT is the client's 101 (Envoy's).
    let h2 = codec.filter(UpCodec::is_h2).map(|c| {
        let input = BytesMut::from(&std::mem::take(&mut to_down)[..]);
        Box::new((c, up_stream, input))
    });
    if h2.is_some() && !connect {
        head = with_status(&head, b"101");
    }
    if !streams.upgraded(stream, head) {
        // A response filter answered in the 101's place.
        return None;
    }
    streams.out.take_from(&mut streams.conn);
    streams.out.flush_within(down, HARD_CLOSE_AFTER).await;
    if !streams.out.is_empty() {
        streams.tunnel_closed(stream, tunnel::Moved::default());
        return None;
    }
    let limits = TunnelLimits {
        idle,
        deadline: ends_at,
        drain_time: wire.shard.drain.time,
    };
    let to_up = rb.buf.split().to_vec();
    Some(Upgraded {
        stream,
        up,
        early: (to_up, to_down),
        limits,
        h2,
    })
}

/// Whether an HTTP/2 host's `status` opens the tunnel: a 2xx to a CONNECT,
/// a 200 to an extended CONNECT (anything else is passed on as the
/// answer, as Envoy does).
fn switches(head: &HeaderList, connect: bool) -> bool {
    let status = super::streams::status_of(head);
    match connect {
        true => (200..300).contains(&status),
        false => status == 200,
    }
}

/// The head of the gateway's answer to a CONNECT it terminates.
fn connected_head() -> HeaderList {
    let mut head = HeaderList::pooled();
    head.push(b":status", b"200", false);
    head
}

/// `head` with its `:status` replaced by `status`.
fn with_status(head: &HeaderList, status: &[u8]) -> HeaderList {
    let mut list = HeaderList::pooled();
    list.push(b":status", status, false);
    for (name, value, never) in head.iter().filter(|(n, _, _)| *n != b":status") {
        list.push(name, value, never);
    }
    list
}

/// Writes the upgrade's request and reads the backend's answer to its
/// stream (`asked`: the stream, and whether it is a CONNECT), within
/// `within`.
async fn exchange(
    up: &mut Transport,
    codec: &mut UpCodec,
    asked: (u32, bool),
    within: std::time::Duration,
) -> Answer {
    let mut timer = Box::pin(Timer::new(within));
    let work = async {
        while let Some(bytes) = codec.poll_output() {
            if up.write_all(&bytes).await.is_err() {
                return Answer::Failed(LocalReply::UpstreamReset);
            }
        }
        if up.flush().await.is_err() {
            return Answer::Failed(LocalReply::UpstreamReset);
        }
        read_answer(up, codec, asked).await
    };
    let mut work = std::pin::pin!(work);
    poll_fn(|cx| {
        if let Poll::Ready(a) = work.as_mut().poll(cx) {
            return Poll::Ready(a);
        }
        timer
            .as_mut()
            .poll(cx)
            .map(|_| Answer::Failed(LocalReply::UpstreamTimeout))
    })
    .await
}

/// Reads until the backend's answer is whole: a 101's head (on HTTP/2,
/// a 200 to an extended CONNECT, a 2xx to a CONNECT, as Envoy takes
/// them), or another response's head and body (at most the codec's
/// window of body).
async fn read_answer(
    up: &mut Transport,
    codec: &mut UpCodec,
    (id, connect): (u32, bool),
) -> Answer {
    let mut rb = ReadBuf::default();
    let mut refused: Option<(HeaderList, BytesMut)> = None;
    let h2 = codec.is_h2();
    loop {
        // HTTP/2's own frames (SETTINGS' ACK, WINDOW_UPDATE) go as they
        // are made.
        while let Some(bytes) = codec.poll_output() {
            if up.write_all(&bytes).await.is_err() {
                return Answer::Failed(LocalReply::UpstreamReset);
            }
        }
        let room = rb.room(READ_SIZE);
        let Ok(n) = poll_fn(|cx| Pin::new(&mut *up).poll_read(cx, room)).await else {
            // Reset mid-answer: no answer, not a short one.
            return Answer::Failed(LocalReply::UpstreamReset);
        };
        rb.filled(n);
        let r = if n == 0 {
            codec.recv(&mut rb.buf).and_then(|()| codec.recv_eof())
        } else {
            codec.recv(&mut rb.buf)
        };
        while let Some(ev) = codec.poll_event() {
            match ev {
                ClientEvent::Response {
                    informational: true,
                    ..
                } => {}
                ClientEvent::Response { head, .. } if codec.is_upgraded() => {
                    return Answer::Switched(head, rb.buf.split().to_vec());
                }
                ClientEvent::Response {
                    head,
                    end_stream: false,
                    ..
                } if h2 && switches(&head, connect) => {
                    return Answer::Switched(head, rb.buf.split().to_vec());
                }
                ClientEvent::Response {
                    head, end_stream, ..
                } => {
                    if end_stream {
                        return Answer::Refused(head, Bytes::new());
                    }
                    refused = Some((head, BytesMut::new()));
                }
                ClientEvent::WindowOpen { .. } | ClientEvent::StreamLimit { .. } => {}
                ClientEvent::GoAway { last_stream, .. } if last_stream >= id => {}
                ClientEvent::Data {
                    data, end_stream, ..
                } => {
                    if let Some((_, body)) = refused.as_mut() {
                        codec.release(id, data.len() as u32);
                        body.extend_from_slice(&data);
                    }
                    if end_stream {
                        if let Some((head, body)) = refused.take() {
                            return Answer::Refused(head, body.freeze());
                        }
                    }
                }
                ClientEvent::Trailers { .. } => {
                    if let Some((head, body)) = refused.take() {
                        return Answer::Refused(head, body.freeze());
                    }
                }
                ClientEvent::Broken { .. } | ClientEvent::TooLarge { .. } => {
                    return Answer::Failed(LocalReply::UpstreamProtocolError)
                }
                _ => return Answer::Failed(LocalReply::UpstreamReset),
            }
        }
        if r.is_err() || n == 0 {
            return Answer::Failed(LocalReply::UpstreamReset);
        }
        if refused
            .as_ref()
            .is_some_and(|(_, b)| b.len() >= REFUSAL_BODY_LIMIT as usize)
        {
            // A refusal whose body will not fit: it is no answer we pass on.
            return Answer::Failed(LocalReply::UpstreamReset);
        }
    }
}
