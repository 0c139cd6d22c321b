//! The accept loop of one listener socket: each accepted connection becomes a task of its own, served by [`super::downstream::serve`].

use std::rc::Rc;
use std::time::Duration;

use glommio::net::TcpListener;

use crate::shard::Shard;
use crate::signal::Signal;

/// Accepts connections on one listener socket until cancelled (by dropping
/// the task, which also closes the socket).
pub async fn accept_loop(shard: Rc<Shard>, sock: TcpListener, listener: Rc<str>, drain: Signal) {
    loop {
        match sock.accept().await {
            Ok(stream) => {
                let (sh, name, drain) = (Rc::clone(&shard), Rc::clone(&listener), drain.clone());
                // Detached: a connection outlives the listener's task while
                // it drains.
                glommio::spawn_local(super::downstream::serve(sh, stream, name, drain)).detach();
            }
            Err(e) => {
                // Out of descriptors or similar: don't spin, don't die.
                tracing::warn!(shard = shard.id, listener = %listener, "accept failed: {e}");
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}
