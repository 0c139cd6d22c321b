//! The accept loop of one listener socket: each accepted connection becomes a task of its own, served by `downstream::serve`; the listener's runtime connection limit.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Duration;

use glommio::net::TcpListener;

use super::chain_drains::ChainDrains;
use super::WireShard;
use crate::overload::Act;
use crate::shard::Shard;
use crate::steering::ShardLoad;

/// How often a paused accept loop looks at `stop_accepting_connections`
/// again.
const OVERLOAD_RECHECK: Duration = Duration::from_millis(50);

/// The connections one listener's accept loop has open on this shard,
/// for its runtime connection limit, and the loop waiting for one to
/// close.
#[derive(Default)]
pub(crate) struct ConnGate {
    open: Cell<u64>,
    waiting: RefCell<Option<Waker>>,
    /// This shard's score for connection steering, when it steers.
    load: Option<ShardLoad>,
}

impl ConnGate {
    pub fn new(load: Option<ShardLoad>) -> Self {
        Self {
            load,
            ..Self::default()
        }
    }

    /// Wakes the accept loop if it waits, to look at its limit again (a
    /// connection closed, or a new snapshot may have changed the limit).
    pub fn nudge(&self) {
        if let Some(w) = self.waiting.borrow_mut().take() {
            w.wake();
        }
    }

    /// A connection came out of the backlog: counted for steering until
    /// the token drops (with the connection's [`GateGuard`], or when it is
    /// refused, or its accept loop is cancelled first).
    fn accepted(self: &Rc<Self>) -> Accepted {
        if let Some(l) = &self.load {
            l.accepted();
        }
        Accepted(Rc::clone(self))
    }

    fn enter(accepted: Accepted) -> GateGuard {
        let gate = &accepted.0;
        gate.open.set(gate.open.get() + 1);
        GateGuard(accepted)
    }
}

/// A connection accepted from a gate's socket (see [`ConnGate::accepted`]).
pub(super) struct Accepted(Rc<ConnGate>);

impl Drop for Accepted {
    fn drop(&mut self) {
        if let Some(l) = &self.0.load {
            l.closed();
        }
    }
}

/// One open connection of a gate; dropped when its task ends.
pub(super) struct GateGuard(Accepted);

impl Drop for GateGuard {
    fn drop(&mut self) {
        let gate = &self.0 .0;
        gate.open.set(gate.open.get() - 1);
        gate.nudge();
    }
}

/// This shard's share of the listener's connection limit
/// (`envoy.resource_limits.listener.<name>.connection_limit`): the limit is
/// for the whole process, so each of N data shards takes `ceil(limit / N)`.
fn share(shard: &Shard, listener: &str) -> Option<u64> {
    let limit = shard.snapshot().runtime.connection_limit(listener)?;
    Some(limit.div_ceil(shard.data_shards.max(1) as u64))
}

fn at_limit(shard: &Shard, listener: &str, gate: &ConnGate) -> bool {
    share(shard, listener).is_some_and(|max| gate.open.get() >= max)
}

/// Accepts connections on one listener socket until cancelled (by dropping
/// the task, which also closes the socket).
///
/// With a connection limit, a connection accepted while this shard's share
/// is in use waits, unserved, until one of the listener's connections on
/// this shard closes; meanwhile the loop accepts nothing, so later ones
/// wait in the kernel's backlog (Envoy instead closes each connection
/// over the limit). Each such pause counts once in
/// `gateway_downstream_cx_overflow`.
///
/// The overload manager acts here too: `stop_accepting_connections`
/// leaves connections in the backlog, `reject_incoming_connections` and
/// the global connection limit close them as they come (counted in the
/// listener's `downstream_cx_overload_reject` and
/// `downstream_global_cx_overflow`).
pub(crate) async fn accept_loop(
    wire: Rc<WireShard>,
    sock: TcpListener,
    listener: Rc<str>,
    drains: Rc<ChainDrains>,
    gate: Rc<ConnGate>,
) {
    let shard = &wire.shard;
    let counted = shard.stats.envoy.listeners.get(&listener);
    let overload = &shard.overload;
    loop {
        // Checked every 50 ms while it lasts: the sampler changes levels
        // every `refresh_interval`, and nothing wakes this loop then.
        while overload.hits(Act::StopAcceptingConnections, || shard.unit()) {
            glommio::timer::sleep(OVERLOAD_RECHECK).await;
        }
        match sock.accept().await {
            Ok(stream) => {
                let accepted = gate.accepted();
                // Accepted while `stop_accepting_connections` acts (it
                // began while the accept waited): held unserved until it
                // passes, as the backlog holds the ones after it (this
                // loop accepts nothing meanwhile).
                while overload.hits(Act::StopAcceptingConnections, || shard.unit()) {
                    glommio::timer::sleep(OVERLOAD_RECHECK).await;
                }
                if overload.hits(Act::RejectIncomingConnections, || shard.unit()) {
                    shard.stats.downstream.cx_overload_reject.inc();
                    counted.downstream_cx_overload_reject.inc();
                    drop((stream, accepted));
                    continue;
                }
                let max = shard
                    .snapshot()
                    .overload
                    .as_ref()
                    .and_then(|o| o.max_downstream_connections);
                if max.is_some_and(|m| overload.downstream_connections() >= m) {
                    shard.stats.downstream.cx_global_overflow.inc();
                    counted.downstream_global_cx_overflow.inc();
                    drop((stream, accepted));
                    continue;
                }
                if at_limit(shard, &listener, &gate) {
                    shard.stats.downstream.cx_overflow.inc();
                    poll_fn(|cx| {
                        if !at_limit(shard, &listener, &gate) {
                            return Poll::Ready(());
                        }
                        *gate.waiting.borrow_mut() = Some(cx.waker().clone());
                        Poll::Pending
                    })
                    .await;
                }
                let guard = ConnGate::enter(accepted);
                let (shared, name, drains) =
                    (Rc::clone(&wire), Rc::clone(&listener), Rc::clone(&drains));
                // Detached: a connection outlives the listener's task while
                // it drains. The task is `serve`'s future itself: a block
                // around it would hold it twice (as captured, and as
                // awaited), for as long as the connection is open.
                glommio::spawn_local(super::connection::serve(
                    shared, stream, name, drains, guard,
                ))
                .detach();
            }
            Err(e) => {
                // Out of descriptors or similar: don't spin, don't die.
                tracing::warn!(shard = shard.id, listener = %listener, "accept failed: {e}");
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}
