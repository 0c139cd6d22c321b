//! Connection steering: each new connection goes to the data shard with the fewest connections, chosen in the kernel by a SO_REUSEPORT eBPF program, without a lock and without moving a connection between shards.
//!
//! Why: SO_REUSEPORT alone hashes each connection's addresses and ports to
//! a shard. With many short connections that evens out; with a few dozen
//! long-lived HTTP/2 clients (gRPC channels, browsers) it leaves one shard
//! with far more of them than another, and a shard cannot hand a
//! connection to a less busy one (thread-per-core: a connection stays
//! where it was accepted). So the choice is made before any shard sees
//! the connection, when its SYN arrives.
//!
//! How: one array map holds a score per shard (open connections, which
//! each shard writes into its own slot through a shared mapping, plus
//! connections picked for it and not accepted yet, which the program
//! counts); each listening address has its own socket map (shard → that
//! shard's socket), its own penalty per shard whose socket is not in that
//! map (so a shard that stopped listening is never the pick while another
//! can take the connection), and its own program, attached to the
//! address's SO_REUSEPORT group (`bpf.rs`, `group.rs`). The registry of
//! listening sockets ([`crate::wire::sockets`]) tells this module when a
//! shard starts or stops listening; nothing here runs per request.
//!
//! A hot restart's processes share their sockets, and a socket is in one
//! socket map at a time: the running process lets go of its sockets in
//! its maps when it hands copies over, and takes them back if the next
//! process leaves without taking over. A socket another process's map
//! still holds (one that died) waits, and joins once that map is freed.
//!
//! Where the kernel refuses (no CAP_BPF, an old kernel), steering is off
//! and the kernel's hash decides, as before; the reason is logged once.
//! Envoy's nearest setting is a listener's
//! `connection_balance_config.exact_balance`, which balances with a lock
//! and hands accepted sockets between workers.

mod bpf;
mod group;
mod load;

pub use load::{forget_pending, ShardLoad};

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

use group::Group;

/// How new connections are spread over the data shards
/// (`--connection-steering`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SteeringMode {
    /// The shard with the fewest open and pending connections
    /// (this module), where the kernel allows it.
    #[default]
    LeastConnections,
    /// The kernel's SO_REUSEPORT hash of addresses and ports.
    KernelHash,
}

impl std::str::FromStr for SteeringMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "least-connections" => Ok(Self::LeastConnections),
            "kernel-hash" => Ok(Self::KernelHash),
            _ => Err(format!(
                "unknown connection steering {s:?} (least-connections or kernel-hash)"
            )),
        }
    }
}

/// The process's steering state (see the module's comment).
pub struct Steering {
    load: bpf::LoadMap,
    shards: usize,
    /// Taken only when a listener starts or stops, at a hot restart's
    /// hand-over, and once a second by a shard with a socket waiting.
    groups: Mutex<HashMap<SocketAddr, Group>>,
}

impl std::fmt::Debug for Steering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Steering")
            .field("shards", &self.shards)
            .field("scores", &self.scores())
            .finish_non_exhaustive()
    }
}

impl Steering {
    /// Steering over `shards` data shards, or why the kernel refuses it.
    pub fn new(shards: usize) -> io::Result<Arc<Self>> {
        if shards > bpf::MAX_SHARDS {
            return Err(io::Error::other(format!(
                "at most {} data shards are steered, not {shards}",
                bpf::MAX_SHARDS
            )));
        }
        let steering = Self {
            load: bpf::LoadMap::new(shards)?,
            shards,
            groups: Mutex::new(HashMap::new()),
        };
        // Loading one program now finds a refusal (no CAP_BPF, a kernel
        // without these maps or helpers) at start, not at the first
        // listener.
        Group::new(shards, &steering.load)?;
        Ok(Arc::new(steering))
    }

    fn groups(&self) -> std::sync::MutexGuard<'_, HashMap<SocketAddr, Group>> {
        self.groups.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Shard `shard` listens on `socket` for `addr`: new connections to
    /// `addr` may be steered to it. A shard listening on two sockets for
    /// one address (a hot restart from more shards) is steered to the
    /// first; the kernel's backlog of the other is still accepted from.
    /// A socket still in another process's map waits (see
    /// [`Self::retry_waiting`]).
    pub fn join(&self, addr: SocketAddr, shard: usize, socket: RawFd) -> io::Result<()> {
        if shard >= self.shards {
            return Ok(());
        }
        let mut groups = self.groups();
        let group = match groups.entry(addr) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(Group::new(self.shards, &self.load)?),
        };
        group.join(shard, socket)
    }

    /// Shard `shard` is about to close `socket` for `addr`: no new
    /// connection is steered to it. Call before closing the socket.
    pub fn leave(&self, addr: SocketAddr, shard: usize, socket: RawFd) {
        let mut groups = self.groups();
        let Some(group) = groups.get_mut(&addr) else {
            return;
        };
        group.leave(shard, socket);
        if group.is_empty() {
            groups.remove(&addr);
        }
    }

    /// A hot restart's next process takes copies of every socket: this
    /// process lets go of them in its maps (a socket is in one socket map
    /// at a time), so that the next one's program can steer them. Until
    /// then the kernel's hash spreads connections.
    pub fn release_all(&self) {
        for group in self.groups().values_mut() {
            group.release();
        }
    }

    /// The next process left without taking over: this one steers its
    /// sockets again.
    pub fn reclaim_all(&self) {
        for group in self.groups().values_mut() {
            group.reclaim();
        }
    }

    /// Shard `shard`'s sockets that were still in another process's map
    /// when it joined: tried again (by the shard, once a second while it
    /// accepts connections).
    pub fn retry_waiting(&self, shard: usize) {
        for group in self.groups().values_mut() {
            group.retry(shard);
        }
    }

    /// Shard `shard`'s handle on its own score.
    pub fn shard_load(self: &Arc<Self>, shard: usize) -> Option<ShardLoad> {
        (shard < self.shards).then(|| ShardLoad::new(Arc::clone(self), shard))
    }

    /// Every shard's (open, pending) connections as the program sees them.
    pub fn scores(&self) -> Vec<(u64, u64)> {
        (0..self.shards)
            .map(|s| {
                (
                    self.load.slot(s, bpf::OPEN).load(Relaxed),
                    self.load.slot(s, bpf::PICKED).load(Relaxed),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
