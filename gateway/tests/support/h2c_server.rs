//! Scripted h2c servers for tests (the `h2` crate on a glommio executor of
//! their own, loopback port 0): the test writes only what each connection
//! does; and one such server for tunnels (extended CONNECT, CONNECT),
//! [`h2_tunnel_backend`].

use std::future::Future;
use std::net::SocketAddr;

use bytes::Bytes;
use glommio::net::{TcpListener, TcpStream};
use glommio::{LocalExecutorBuilder, Placement};
use tokio_util::compat::{Compat, FuturesAsyncReadCompatExt};

/// A server connection after its handshake.
pub type H2Conn = h2::server::Connection<Compat<TcpStream>, Bytes>;

/// Starts a server; `serve` runs, in a task of its own, for every
/// connection that completes the HTTP/2 handshake, with its number (0,
/// 1, … in accept order). Returns where it listens.
pub fn h2c_server<F, Fut>(serve: F) -> SocketAddr
where
    F: Fn(u64, H2Conn) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    h2c_server_with(false, serve)
}

/// [`h2c_server`]; `extended_connect`: its SETTINGS enable extended
/// CONNECT (RFC 8441).
pub fn h2c_server_with<F, Fut>(extended_connect: bool, serve: F) -> SocketAddr
where
    F: Fn(u64, H2Conn) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let (tx, rx) = std::sync::mpsc::channel();
    LocalExecutorBuilder::new(Placement::Unbound)
        .io_memory(1 << 20)
        .spawn(move || async move {
            let l = TcpListener::bind("127.0.0.1:0").expect("bind");
            tx.send(l.local_addr().expect("addr"))
                .expect("send the address");
            let serve = std::rc::Rc::new(serve);
            for n in 0.. {
                let Ok(s) = l.accept().await else { return };
                // Its WINDOW_UPDATEs are small writes: Nagle would hold
                // them for the gateway's delayed ACK.
                let _ = s.set_nodelay(true);
                let serve = std::rc::Rc::clone(&serve);
                glommio::spawn_local(async move {
                    let mut builder = h2::server::Builder::new();
                    if extended_connect {
                        builder.enable_connect_protocol();
                    }
                    if let Ok(conn) = builder.handshake(s.compat()).await {
                        serve(n, conn).await;
                    }
                })
                .detach();
            }
        })
        .expect("executor");
    rx.recv().expect("the server's address")
}

/// One stream an [`h2_tunnel_backend`] saw: its method, URI, `:protocol`
/// and fields (name, value) in order.
#[derive(Debug, Clone)]
pub struct SeenStream {
    pub method: String,
    pub uri: String,
    pub protocol: Option<String>,
    pub fields: Vec<(String, String)>,
}

impl SeenStream {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// An HTTP/2 backend taking extended CONNECT (and CONNECT): a stream to
/// `/refused` is answered 403 with a body; any other 200 with
/// `x-backend: h2`, its DATA echoed until its END_STREAM, then `BYE` and
/// its own. Returns where it listens and the streams it saw.
pub fn h2_tunnel_backend() -> (
    SocketAddr,
    std::sync::Arc<std::sync::Mutex<Vec<SeenStream>>>,
) {
    use bytes::Bytes;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = std::sync::Arc::clone(&seen);
    let addr = h2c_server_with(true, move |_, mut conn| {
        let kept = std::sync::Arc::clone(&kept);
        async move {
            while let Some(Ok((req, mut respond))) = conn.accept().await {
                kept.lock().unwrap().push(SeenStream {
                    method: req.method().to_string(),
                    uri: req.uri().to_string(),
                    protocol: req
                        .extensions()
                        .get::<h2::ext::Protocol>()
                        .map(|p| p.as_str().to_string()),
                    fields: req
                        .headers()
                        .iter()
                        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("?").to_string()))
                        .collect(),
                });
                if req.uri().path() == "/refused" {
                    let response = http::Response::builder().status(403).body(()).unwrap();
                    if let Ok(mut tx) = respond.send_response(response, false) {
                        let _ = tx.send_data(Bytes::from_static(b"denied by backend"), true);
                    }
                    continue;
                }
                let mut body = req.into_body();
                let response = http::Response::builder()
                    .status(200)
                    .header("x-backend", "h2")
                    .body(())
                    .unwrap();
                let Ok(mut tx) = respond.send_response(response, false) else {
                    continue;
                };
                glommio::spawn_local(async move {
                    while let Some(Ok(chunk)) = body.data().await {
                        let _ = body.flow_control().release_capacity(chunk.len());
                        let _ = tx.send_data(chunk, false);
                    }
                    let _ = tx.send_data(Bytes::from_static(b"BYE"), true);
                })
                .detach();
            }
        }
    });
    (addr, seen)
}
