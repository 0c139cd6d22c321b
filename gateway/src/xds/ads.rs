//! The ADS stream: one gRPC call,
//! `/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources`
//! (or `DeltaAggregatedResources` for Delta xDS),
//! over our own h2 client, kept up with jittered exponential backoff.
//!
//! This task only moves bytes: it hands the request half of each new
//! stream to the control loop (which owns the protocol state and decides
//! what to send) and forwards every response to it as an event.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use engine::backoff::Backoff;
use engine::Cluster;
use h2::RecvStream;
use http::{HeaderMap, Request};
use prost::Message;
use xds::pb::envoy::service::discovery::v3::{DeltaDiscoveryResponse, DiscoveryResponse};

use super::grpc::Decoder;
use crate::events::{AdsEvent, Event, EventSender};
use crate::io;

pub const ADS_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
/// Delta xDS's method.
pub const DELTA_ADS_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";

/// Envoy's defaults for xDS stream retries.
const BACKOFF_BASE: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// TCP keepalive on the ADS connection: a control plane whose host died
/// (no FIN, no RST) is noticed within about `IDLE + INTERVAL × PROBES` and we
/// move on to the next endpoint instead of waiting on a dead stream. Not
/// HTTP/2 PINGs: gRPC servers by default answer a PING more often than every
/// 5 minutes with GOAWAY `too_many_pings`, and Envoy sends none either.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
const KEEPALIVE_PROBES: u32 = 3;

/// Where the ADS server is: a static cluster and the `:authority` to use.
/// The control loop replaces the cluster when its hosts change (a DNS
/// cluster's lookups); each connection attempt reads the latest.
pub struct AdsTarget {
    pub cluster: Rc<RefCell<Arc<Cluster>>>,
    pub authority: String,
    /// Delta xDS (`DeltaAggregatedResources`), else State of the World.
    pub delta: bool,
}

/// Runs until dropped: connect, stream, and on any loss reconnect (to the
/// cluster's next endpoint) after a backoff.
pub async fn run(target: AdsTarget, events: EventSender, seed: u64) {
    let mut backoff = Backoff::new(BACKOFF_BASE, BACKOFF_MAX);
    let mut rng = seed | 1;
    let mut gen = 0u64;
    loop {
        let cluster = Arc::clone(&target.cluster.borrow());
        let endpoints = &cluster.endpoints;
        if endpoints.is_empty() {
            tracing::warn!(cluster = %cluster.name, "ADS cluster has no endpoints");
        } else {
            gen += 1;
            let addr = endpoints[(gen as usize - 1) % endpoints.len()].address;
            let reason = match stream(&target, &cluster, addr, gen, &events, &mut backoff).await {
                Ok(reason) | Err(reason) => reason,
            };
            if events
                .send(Event::Ads(AdsEvent::Lost { gen, reason }))
                .await
                .is_err()
            {
                return; // the control loop is gone
            }
        }
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        glommio::timer::sleep(backoff.next_wait(rng)).await;
    }
}

/// One connection and stream; returns why it ended.
async fn stream(
    target: &AdsTarget,
    cluster: &Cluster,
    addr: SocketAddr,
    gen: u64,
    events: &EventSender,
    backoff: &mut Backoff,
) -> Result<String, String> {
    // TCP, then the cluster's TLS (mTLS with its client certificate)
    // when it has a transport socket, as Envoy reaches its control plane.
    let tls = cluster.upstream.tls.as_deref();
    let none = shards::wire::tls::Preface::None;
    let transport = shards::wire::tls::connect_backend(addr, cluster.connect_timeout, tls, none)
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    set_keepalive(transport.tcp());
    let (mut client, conn) = h2::client::Builder::new()
        .initial_max_send_streams(1)
        // Large pushes (10k-endpoint EDS) arrive without waiting for
        // window updates every 64 KiB.
        .initial_window_size(4 << 20)
        .initial_connection_window_size(8 << 20)
        .handshake::<_, Bytes>(io::h2_transport(transport))
        .await
        .map_err(|e| format!("h2 handshake with {addr}: {e}"))?;
    // Dropping this task (when the stream ends) closes the connection. It
    // keeps the connection's own error (a GOAWAY's code and debug data,
    // say), which says more than the stream's "broken pipe".
    let conn_error = Rc::new(RefCell::new(None));
    let conn_error2 = Rc::clone(&conn_error);
    let _conn = glommio::spawn_local(async move {
        if let Err(e) = conn.await {
            *conn_error2.borrow_mut() = Some(e.to_string());
        }
    });
    let path = if target.delta {
        DELTA_ADS_PATH
    } else {
        ADS_PATH
    };
    let request = Request::post(format!("http://{}{path}", target.authority))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .map_err(|e| format!("ADS request: {e}"))?;
    client = client.ready().await.map_err(|e| format!("{addr}: {e}"))?;
    let (response, send) = client
        .send_request(request, false)
        .map_err(|e| format!("{addr}: {e}"))?;
    // Hand over the request half first: gRPC servers may send headers only
    // after our first request.
    if events
        .send(Event::Ads(AdsEvent::Connected {
            gen,
            send,
            server: addr,
        }))
        .await
        .is_err()
    {
        return Ok("shutting down".into());
    }
    let result = async {
        let response = response.await.map_err(|e| format!("{addr}: {e}"))?;
        let (parts, body) = response.into_parts();
        if parts.status != http::StatusCode::OK {
            return Err(format!("{addr}: HTTP status {}", parts.status));
        }
        if let Some(status) = grpc_status(&parts.headers) {
            return Err(format!("{addr}: stream refused: {status}"));
        }
        read_responses(body, (addr, target.delta), gen, events, backoff).await
    }
    .await;
    match result {
        Err(e) => {
            // Let the connection task record why the connection ended.
            glommio::timer::sleep(Duration::from_millis(5)).await;
            match conn_error.borrow_mut().take() {
                Some(c) => Err(format!("{e} (connection: {c})")),
                None => Err(e),
            }
        }
        ok => ok,
    }
}

fn set_keepalive(tcp: &glommio::net::TcpStream) {
    let ka = socket2::TcpKeepalive::new()
        .with_time(KEEPALIVE_IDLE)
        .with_interval(KEEPALIVE_INTERVAL)
        .with_retries(KEEPALIVE_PROBES);
    use std::os::fd::{AsRawFd, BorrowedFd};
    // SAFETY: the descriptor belongs to `tcp`, which outlives this borrow.
    let fd = unsafe { BorrowedFd::borrow_raw(tcp.as_raw_fd()) };
    if let Err(e) = socket2::SockRef::from(&fd).set_tcp_keepalive(&ka) {
        tracing::debug!("ADS TCP keepalive: {e}");
    }
}

async fn read_responses(
    mut body: RecvStream,
    (addr, delta): (SocketAddr, bool),
    gen: u64,
    events: &EventSender,
    backoff: &mut Backoff,
) -> Result<String, String> {
    let mut decoder = Decoder::default();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|e| format!("{addr}: {e}"))?;
        let _ = body.flow_control().release_capacity(chunk.len());
        decoder.push(&chunk);
        while let Some(msg) = decoder.next_message().map_err(|e| format!("{addr}: {e}"))? {
            let event = match delta {
                false => AdsEvent::Response {
                    gen,
                    response: DiscoveryResponse::decode(msg)
                        .map_err(|e| format!("{addr}: invalid DiscoveryResponse: {e}"))?,
                },
                true => AdsEvent::DeltaResponse {
                    gen,
                    response: DeltaDiscoveryResponse::decode(msg)
                        .map_err(|e| format!("{addr}: invalid DeltaDiscoveryResponse: {e}"))?,
                },
            };
            // The server answers: this stream works, so the next loss starts
            // the backoff afresh.
            backoff.reset();
            if events.send(Event::Ads(event)).await.is_err() {
                return Ok("shutting down".into());
            }
        }
    }
    let trailers = body
        .trailers()
        .await
        .map_err(|e| format!("{addr}: {e}"))?
        .unwrap_or_default();
    Ok(format!(
        "{addr}: stream ended: {}",
        grpc_status(&trailers).unwrap_or_else(|| "no grpc-status".into())
    ))
}

/// `grpc-status` (and `grpc-message`) as text, if present.
fn grpc_status(h: &HeaderMap) -> Option<String> {
    let status = h.get("grpc-status")?.to_str().unwrap_or("?");
    let message = h
        .get("grpc-message")
        .and_then(|m| m.to_str().ok())
        .unwrap_or("");
    Some(
        format!("grpc-status {status} {message}")
            .trim_end()
            .to_owned(),
    )
}
