//! The overload manager's state, shared by the whole process: each action's level as the sampler last set it, and the open downstream connections (the global connection monitor's count), read by the data shards without a lock.
//!
//! The sampler (`gateway::overload`) reads the resource monitors every
//! `refresh_interval` and stores each action's level; a data shard loads
//! one atomic where the action applies (an accept, a request's start, an
//! idle timer's arming), never a lock or a refcount. Each level also
//! counts its changes, for an action that acts on a change rather than on
//! each request (`reset_high_memory_stream`, as Envoy's workers run it
//! when the action's state changes).

use std::sync::atomic::{
    AtomicU32, AtomicU64,
    Ordering::{Acquire, Relaxed, Release},
};
use std::sync::Arc;

use engine::overload::ActionKind;

/// The actions, as indices of [`OverloadState`]'s levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    StopAcceptingRequests,
    StopAcceptingConnections,
    RejectIncomingConnections,
    DisableHttpKeepalive,
    ReduceTimeouts,
    ShrinkHeap,
    ResetHighMemoryStream,
}

impl Act {
    /// Every action, in index order.
    pub const ALL: [Act; 7] = [
        Act::StopAcceptingRequests,
        Act::StopAcceptingConnections,
        Act::RejectIncomingConnections,
        Act::DisableHttpKeepalive,
        Act::ReduceTimeouts,
        Act::ShrinkHeap,
        Act::ResetHighMemoryStream,
    ];

    pub fn of(kind: &ActionKind) -> Self {
        match kind {
            ActionKind::StopAcceptingRequests => Act::StopAcceptingRequests,
            ActionKind::StopAcceptingConnections => Act::StopAcceptingConnections,
            ActionKind::RejectIncomingConnections => Act::RejectIncomingConnections,
            ActionKind::DisableHttpKeepalive => Act::DisableHttpKeepalive,
            ActionKind::ReduceTimeouts(_) => Act::ReduceTimeouts,
            ActionKind::ShrinkHeap => Act::ShrinkHeap,
            ActionKind::ResetHighMemoryStream => Act::ResetHighMemoryStream,
        }
    }
}

/// A level's unit: 1.0 is this many.
const FULL: f64 = 1_000_000.0;

/// The process's overload state (see the module's comment).
#[derive(Debug, Default)]
pub struct OverloadState {
    levels: [AtomicU32; Act::ALL.len()],
    /// How many times each level changed.
    changes: [AtomicU64; Act::ALL.len()],
    /// Open downstream connections, every shard's.
    downstream_connections: AtomicU64,
    /// The monitors' last pressures, in millionths (for the admin).
    heap_pressure: AtomicU32,
    connections_pressure: AtomicU32,
}

impl OverloadState {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Action `a`'s level, 0 (inactive) to 1 (saturated).
    pub fn level(&self, a: Act) -> f64 {
        f64::from(self.levels[a as usize].load(Relaxed)) / FULL
    }

    pub fn set(&self, a: Act, level: f64) {
        let v = (level.clamp(0.0, 1.0) * FULL) as u32;
        if self.levels[a as usize].swap(v, Relaxed) != v {
            // Release: whoever sees the new count sees the new level.
            self.changes[a as usize].fetch_add(1, Release);
        }
    }

    /// How many times action `a`'s level changed so far: a data shard
    /// that remembers it sees the next change (and then reads
    /// [`Self::level`]) without being told.
    pub fn changes(&self, a: Act) -> u64 {
        self.changes[a as usize].load(Acquire)
    }

    /// Whether action `a` applies to one request or connection, given a
    /// uniform draw in `[0, 1)`: always when saturated, never when
    /// inactive, with the level's probability between (Envoy's scaled
    /// actions). The draw is only asked for when the action is scaling.
    pub fn hits(&self, a: Act, draw: impl FnOnce() -> f64) -> bool {
        match self.levels[a as usize].load(Relaxed) {
            0 => false,
            v if f64::from(v) >= FULL => true,
            v => draw() < f64::from(v) / FULL,
        }
    }

    /// One more open downstream connection; the guard counts it closed.
    pub fn connection_opened(self: &Arc<Self>) -> OpenConnectionGuard {
        self.downstream_connections.fetch_add(1, Relaxed);
        OpenConnectionGuard(Arc::clone(self))
    }

    pub fn downstream_connections(&self) -> u64 {
        self.downstream_connections.load(Relaxed)
    }

    /// The monitors' pressures as last sampled (heap, connections).
    pub fn set_pressures(&self, heap: f64, connections: f64) {
        let m = |p: f64| (p.clamp(0.0, 1.0) * FULL) as u32;
        self.heap_pressure.store(m(heap), Relaxed);
        self.connections_pressure.store(m(connections), Relaxed);
    }

    pub fn pressures(&self) -> (f64, f64) {
        let f = |a: &AtomicU32| f64::from(a.load(Relaxed)) / FULL;
        (f(&self.heap_pressure), f(&self.connections_pressure))
    }
}

/// One open downstream connection in [`OverloadState`]'s count.
pub struct OpenConnectionGuard(Arc<OverloadState>);

impl Drop for OpenConnectionGuard {
    fn drop(&mut self) {
        self.0.downstream_connections.fetch_sub(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_decide_who_is_hit() {
        let s = OverloadState::new();
        assert!(!s.hits(Act::StopAcceptingRequests, || panic!(
            "no draw when inactive"
        )));
        s.set(Act::StopAcceptingRequests, 1.0);
        assert!(s.hits(Act::StopAcceptingRequests, || panic!(
            "no draw when saturated"
        )));
        s.set(Act::DisableHttpKeepalive, 0.25);
        assert!(s.hits(Act::DisableHttpKeepalive, || 0.1));
        assert!(!s.hits(Act::DisableHttpKeepalive, || 0.3));
        assert!((s.level(Act::DisableHttpKeepalive) - 0.25).abs() < 1e-6);
    }

    #[test]
    fn changes_are_counted_not_stores() {
        let s = OverloadState::new();
        let a = Act::ResetHighMemoryStream;
        assert_eq!(s.changes(a), 0);
        s.set(a, 0.0);
        assert_eq!(s.changes(a), 0, "the same level is no change");
        s.set(a, 0.5);
        s.set(a, 0.5);
        assert_eq!(s.changes(a), 1);
        s.set(a, 0.75);
        s.set(a, 0.0);
        assert_eq!(s.changes(a), 3);
        assert_eq!(s.changes(Act::ShrinkHeap), 0, "per action");
    }

    #[test]
    fn connections_are_counted_while_open() {
        let s = OverloadState::new();
        let a = s.connection_opened();
        let b = s.connection_opened();
        assert_eq!(s.downstream_connections(), 2);
        drop(a);
        drop(b);
        assert_eq!(s.downstream_connections(), 0);
    }
}
