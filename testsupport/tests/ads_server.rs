//! Drives the test ADS server with a small h2 gRPC client running on its own
//! glommio thread, controlled from the test thread through channels (so the
//! test can use the server's blocking helpers while the client keeps going).

use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures_lite::future::or;
use glommio::net::TcpStream;
use glommio::{LocalExecutorBuilder, Placement};
use http::Request;
use prost::Message;
use testsupport::{any, type_url, AdsServer, RecordedRequest};
use tokio_util::compat::FuturesAsyncReadCompatExt;
use xds::pb::envoy::config::cluster::v3::Cluster;
use xds::pb::envoy::config::core::v3::Node;
use xds::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use xds::pb::envoy::config::listener::v3::Listener;
use xds::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use xds::pb::google::rpc::Status;

const ADS_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";

/// Generous: the CI machine may be a slow 2-core box.
const WAIT: Duration = Duration::from_secs(5);

/// How long we listen to make sure nothing (more) arrives.
const QUIET: Duration = Duration::from_millis(300);

#[derive(Debug)]
enum Event {
    Response(DiscoveryResponse),
    /// The stream ended: `grpc-status` from the trailers (or from the
    /// headers of a trailers-only response).
    End(Option<String>),
    /// The stream or connection failed (e.g. reset).
    Error(h2::Error),
}

/// One gRPC stream on its own h2 connection and glommio thread.
struct Client {
    cmds: Option<mpsc::Sender<Bytes>>,
    events: mpsc::Receiver<Event>,
    join: Option<glommio::ExecutorJoinHandle<()>>,
}

impl Client {
    fn ads(addr: SocketAddr) -> Client {
        Client::open(addr, ADS_PATH)
    }

    fn open(addr: SocketAddr, path: &str) -> Client {
        let (cmd_tx, cmd_rx) = mpsc::channel();
        let (ev_tx, ev_rx) = mpsc::channel();
        let path = path.to_owned();
        let join = LocalExecutorBuilder::new(Placement::Unbound)
            .name("ads-client")
            .io_memory(1 << 20)
            .spawn(move || run_client(addr, path, cmd_rx, ev_tx))
            .expect("client executor");
        Client {
            cmds: Some(cmd_tx),
            events: ev_rx,
            join: Some(join),
        }
    }

    fn send(&self, req: DiscoveryRequest) {
        self.cmds.as_ref().unwrap().send(frame(&req)).unwrap();
    }

    fn send_raw(&self, bytes: Bytes) {
        self.cmds.as_ref().unwrap().send(bytes).unwrap();
    }

    fn next_event(&self, within: Duration) -> Option<Event> {
        self.events.recv_timeout(within).ok()
    }

    /// The next response; panics on anything else or after [`WAIT`].
    fn response(&self) -> DiscoveryResponse {
        match self.next_event(WAIT) {
            Some(Event::Response(r)) => r,
            other => panic!("expected a DiscoveryResponse, got {other:?}"),
        }
    }

    /// Asserts that nothing arrives for a while.
    fn assert_quiet(&self) {
        if let Some(ev) = self.next_event(QUIET) {
            panic!("expected nothing, got {ev:?}");
        }
    }

    /// Waits for the end of the stream, returning its `grpc-status`.
    fn end(&self) -> Option<String> {
        match self.next_event(WAIT) {
            Some(Event::End(status)) => status,
            other => panic!("expected the end of the stream, got {other:?}"),
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // Closing the command channel ends the client task.
        self.cmds.take();
        if let Some(join) = self.join.take() {
            let _ = join.join();
        }
    }
}

fn frame(msg: &impl Message) -> Bytes {
    let mut b = BytesMut::new();
    b.put_u8(0);
    b.put_u32(msg.encoded_len() as u32);
    msg.encode(&mut b).unwrap();
    b.freeze()
}

async fn run_client(
    addr: SocketAddr,
    path: String,
    cmds: mpsc::Receiver<Bytes>,
    events: mpsc::Sender<Event>,
) {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    tcp.set_nodelay(true).unwrap();
    let (h2, conn) = h2::client::handshake(tcp.compat())
        .await
        .expect("handshake");
    glommio::spawn_local(async move {
        let _ = conn.await;
    })
    .detach();
    let req = Request::post(format!("http://ads.test{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let mut h2 = h2.ready().await.expect("h2 ready");
    let (resp, mut send) = h2.send_request(req, false).expect("send request");
    // Commands are forwarded concurrently with reading: the response
    // headers only arrive once the server answers, and requests must not wait
    // for them. Dropping the `Client` closes the channel, which ends this
    // future and so the client thread.
    let commands = async move {
        loop {
            match cmds.try_recv() {
                Ok(bytes) => {
                    let _ = send.send_data(bytes, false);
                }
                Err(mpsc::TryRecvError::Empty) => {
                    glommio::timer::sleep(Duration::from_millis(2)).await
                }
                Err(mpsc::TryRecvError::Disconnected) => return,
            }
        }
    };
    let finished = async {
        let resp = match resp.await {
            Ok(r) => r,
            Err(e) => {
                let _ = events.send(Event::Error(e));
                return;
            }
        };
        let (parts, mut body) = resp.into_parts();
        if body.is_end_stream() {
            let status = parts.headers.get("grpc-status");
            let status = status.map(|v| v.to_str().unwrap().to_owned());
            let _ = events.send(Event::End(status));
            return;
        }
        let mut buf = BytesMut::new();
        while let Some(chunk) = body.data().await {
            let chunk = match chunk {
                Ok(c) => c,
                Err(e) => {
                    let _ = events.send(Event::Error(e));
                    return;
                }
            };
            body.flow_control().release_capacity(chunk.len()).unwrap();
            buf.extend_from_slice(&chunk);
            while buf.len() >= 5 {
                assert_eq!(buf[0], 0, "compressed flag");
                let len = u32::from_be_bytes(buf[1..5].try_into().unwrap()) as usize;
                if buf.len() < 5 + len {
                    break;
                }
                buf.advance(5);
                let msg = DiscoveryResponse::decode(buf.split_to(len)).expect("response decodes");
                let _ = events.send(Event::Response(msg));
            }
        }
        let status = match body.trailers().await {
            Ok(t) => t.and_then(|t| t.get("grpc-status").map(|v| v.to_str().unwrap().to_owned())),
            Err(e) => {
                let _ = events.send(Event::Error(e));
                return;
            }
        };
        let _ = events.send(Event::End(status));
    };
    or(finished, commands).await;
}

fn discovery_request(
    type_url: &str,
    names: &[&str],
    version: &str,
    nonce: &str,
) -> DiscoveryRequest {
    DiscoveryRequest {
        version_info: version.into(),
        node: Some(Node {
            id: "gw-1".into(),
            ..Node::default()
        }),
        resource_names: names.iter().map(|n| n.to_string()).collect(),
        type_url: type_url.into(),
        response_nonce: nonce.into(),
        error_detail: None,
    }
}

fn listener(name: &str) -> (String, prost_types::Any) {
    let l = Listener {
        name: name.into(),
        ..Listener::default()
    };
    (name.into(), any(&l))
}

fn cluster(name: &str) -> (String, prost_types::Any) {
    let c = Cluster {
        name: name.into(),
        ..Cluster::default()
    };
    (name.into(), any(&c))
}

fn assignment(name: &str) -> (String, prost_types::Any) {
    let a = ClusterLoadAssignment {
        cluster_name: name.into(),
        ..ClusterLoadAssignment::default()
    };
    (name.into(), any(&a))
}

fn listener_names(resp: &DiscoveryResponse) -> Vec<String> {
    resp.resources
        .iter()
        .map(|a| {
            assert_eq!(a.type_url, type_url::LISTENER);
            Listener::decode(a.value.as_slice()).unwrap().name
        })
        .collect()
}

fn assignment_names(resp: &DiscoveryResponse) -> Vec<String> {
    resp.resources
        .iter()
        .map(|a| {
            assert_eq!(a.type_url, type_url::ENDPOINT);
            ClusterLoadAssignment::decode(a.value.as_slice())
                .unwrap()
                .cluster_name
        })
        .collect()
}

#[test]
fn first_request_gets_all_listeners() {
    let server = AdsServer::start();
    server.set(type_url::LISTENER, "v1", vec![listener("a"), listener("b")]);
    let client = Client::ads(server.addr());
    client.send(discovery_request(type_url::LISTENER, &[], "", ""));
    let resp = client.response();
    assert_eq!(resp.type_url, type_url::LISTENER);
    assert_eq!(resp.version_info, "v1");
    assert_eq!(listener_names(&resp), ["a", "b"]);
    assert!(!resp.nonce.is_empty());
    assert_eq!(server.last_nonce(type_url::LISTENER), Some(resp.nonce));
    assert_eq!(server.last_nonce(type_url::CLUSTER), None);

    let req = server.wait_for(WAIT, |r| r.type_url == type_url::LISTENER);
    assert!(req.has_node);
    assert_eq!(req.node_id, "gw-1");
    assert_eq!(req.response_nonce, "");
    assert_eq!(server.streams(), 1);
}

#[test]
fn ack_gets_no_response() {
    let server = AdsServer::start();
    server.set(type_url::CLUSTER, "v1", vec![cluster("c1")]);
    let client = Client::ads(server.addr());
    client.send(discovery_request(type_url::CLUSTER, &[], "", ""));
    let resp = client.response();
    assert_eq!(resp.resources.len(), 1);

    client.send(discovery_request(type_url::CLUSTER, &[], "v1", &resp.nonce));
    let ack = server.wait_for(WAIT, |r| r.is_ack_of(&resp.nonce));
    assert_eq!(ack.version_info, "v1");
    assert!(!ack.is_nack_of(&resp.nonce));
    client.assert_quiet();
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn set_pushes_new_version_to_subscribed_stream() {
    let server = AdsServer::start();
    server.set(type_url::LISTENER, "v1", vec![listener("a")]);
    let client = Client::ads(server.addr());
    client.send(discovery_request(type_url::LISTENER, &[], "", ""));
    let first = client.response();
    client.send(discovery_request(
        type_url::LISTENER,
        &[],
        "v1",
        &first.nonce,
    ));
    server.wait_for(WAIT, |r| r.is_ack_of(&first.nonce));

    server.set(type_url::LISTENER, "v2", vec![listener("a"), listener("z")]);
    let pushed = client.response();
    assert_eq!(pushed.version_info, "v2");
    assert_eq!(listener_names(&pushed), ["a", "z"]);
    assert_ne!(pushed.nonce, first.nonce);
    assert_eq!(server.last_nonce(type_url::LISTENER), Some(pushed.nonce));

    // A type the stream never asked for is not pushed.
    server.set(type_url::CLUSTER, "v1", vec![cluster("c1")]);
    client.assert_quiet();
}

#[test]
fn subscription_before_set_is_answered_by_set() {
    let server = AdsServer::start();
    let client = Client::ads(server.addr());
    client.send(discovery_request(type_url::CLUSTER, &[], "", ""));
    server.wait_for(WAIT, |r| r.type_url == type_url::CLUSTER);
    client.assert_quiet();
    // An empty list is a valid state of the world once `set`.
    server.set(type_url::CLUSTER, "v0", vec![]);
    let resp = client.response();
    assert_eq!(resp.version_info, "v0");
    assert!(resp.resources.is_empty());
}

#[test]
fn eds_subscription_gets_only_named_resources() {
    let server = AdsServer::start();
    server.set(
        type_url::ENDPOINT,
        "1",
        vec![assignment("a"), assignment("b"), assignment("c")],
    );
    let client = Client::ads(server.addr());
    // No names: nothing to send for a named type.
    client.send(discovery_request(type_url::ENDPOINT, &[], "", ""));
    server.wait_for(WAIT, |r| r.type_url == type_url::ENDPOINT);
    client.assert_quiet();

    client.send(discovery_request(type_url::ENDPOINT, &["c", "a"], "", ""));
    let resp = client.response();
    assert_eq!(assignment_names(&resp), ["a", "c"]);

    // Same names in another order: an ACK, not a new subscription.
    client.send(discovery_request(
        type_url::ENDPOINT,
        &["a", "c"],
        "1",
        &resp.nonce,
    ));
    server.wait_for(WAIT, |r| r.is_ack_of(&resp.nonce));
    client.assert_quiet();

    // A changed subscription is answered at once, with the new subset.
    client.send(discovery_request(
        type_url::ENDPOINT,
        &["b", "missing"],
        "1",
        &resp.nonce,
    ));
    let resp = client.response();
    assert_eq!(resp.version_info, "1");
    assert_eq!(assignment_names(&resp), ["b"]);

    // `set` pushes only the subscribed subset too.
    server.set(
        type_url::ENDPOINT,
        "2",
        vec![assignment("a"), assignment("b")],
    );
    let pushed = client.response();
    assert_eq!(pushed.version_info, "2");
    assert_eq!(assignment_names(&pushed), ["b"]);
}

#[test]
fn nack_is_recorded_with_error_detail() {
    let server = AdsServer::start();
    server.set(type_url::LISTENER, "v1", vec![listener("bad")]);
    let client = Client::ads(server.addr());
    client.send(discovery_request(type_url::LISTENER, &[], "", ""));
    let resp = client.response();

    let mut nack = discovery_request(type_url::LISTENER, &[], "", &resp.nonce);
    nack.error_detail = Some(Status {
        code: 3,
        message: "listener bad: no filter chain".into(),
        details: vec![],
    });
    client.send(nack);
    let got = server.wait_for(WAIT, |r| r.is_nack_of(&resp.nonce));
    assert_eq!(
        got.error_detail,
        Some((3, "listener bad: no filter chain".to_string()))
    );
    assert_eq!(got.version_info, "");
    assert!(!got.is_ack_of(&resp.nonce));
    client.assert_quiet();
}

#[test]
fn stop_ends_stream_with_unavailable() {
    let server = AdsServer::start();
    server.set(type_url::LISTENER, "v1", vec![listener("a")]);
    let client = Client::ads(server.addr());
    client.send(discovery_request(type_url::LISTENER, &[], "", ""));
    client.response();
    assert_eq!(server.streams(), 1);
    server.stop();
    assert_eq!(client.end().as_deref(), Some("14"));
}

#[test]
fn restart_on_same_port_after_stop() {
    let server = AdsServer::start();
    let addr = server.addr();
    server.set(type_url::LISTENER, "v1", vec![listener("a")]);
    let client = Client::ads(addr);
    client.send(discovery_request(type_url::LISTENER, &[], "", ""));
    let first = client.response();
    server.stop();
    assert_eq!(client.end().as_deref(), Some("14"));

    let server = AdsServer::start_on(addr).expect("restart on the same port");
    assert_eq!(server.addr(), addr);
    assert!(server.requests().is_empty());
    server.set(type_url::LISTENER, "v2", vec![listener("b")]);
    let client = Client::ads(addr);
    client.send(discovery_request(
        type_url::LISTENER,
        &[],
        "v1",
        &first.nonce,
    ));
    let resp = client.response();
    assert_eq!(resp.version_info, "v2");
    assert_eq!(listener_names(&resp), ["b"]);
    assert_ne!(resp.nonce, first.nonce, "nonces are unique across restarts");
    let req: RecordedRequest = server.wait_for(WAIT, |r| r.version_info == "v1");
    assert_eq!(req.stream, 1);
}

#[test]
fn unknown_method_is_unimplemented() {
    let server = AdsServer::start();
    let client = Client::open(
        server.addr(),
        "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources",
    );
    assert_eq!(client.end().as_deref(), Some("12"));
    assert_eq!(server.streams(), 0);
}

#[test]
fn oversized_message_resets_stream() {
    let server = AdsServer::start();
    let client = Client::ads(server.addr());
    client.send_raw(Bytes::from_static(&[0, 0xff, 0xff, 0xff, 0xff]));
    match client.next_event(WAIT) {
        Some(Event::Error(e)) => assert_eq!(e.reason(), Some(h2::Reason::ENHANCE_YOUR_CALM)),
        other => panic!("expected a reset, got {other:?}"),
    }
}

#[test]
fn messages_split_and_coalesced_across_data_frames() {
    let server = AdsServer::start();
    server.set(type_url::LISTENER, "v1", vec![listener("a")]);
    server.set(type_url::CLUSTER, "v1", vec![cluster("c")]);
    let client = Client::ads(server.addr());
    // Two messages in one DATA frame, the second split over two frames.
    let mut bytes = BytesMut::new();
    bytes.extend_from_slice(&frame(&discovery_request(type_url::LISTENER, &[], "", "")));
    bytes.extend_from_slice(&frame(&discovery_request(type_url::CLUSTER, &[], "", "")));
    let mut bytes = bytes.freeze();
    let tail = bytes.split_off(bytes.len() - 7);
    client.send_raw(bytes);
    server.wait_for(WAIT, |r| r.type_url == type_url::LISTENER);
    client.send_raw(tail);
    let types: Vec<String> = (0..2).map(|_| client.response().type_url).collect();
    assert_eq!(types, [type_url::LISTENER, type_url::CLUSTER]);
}
