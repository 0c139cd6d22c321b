//! Scripted h2c servers for tests (the `h2` crate on a glommio executor of
//! their own, loopback port 0): the test writes only what each connection
//! does.

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
