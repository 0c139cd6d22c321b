//! The drain signals of one listener on a shard: the listener's own, one per filter chain its connections were given, and which chains are live; an update fires those of the chains it changed or removed.

use std::cell::{Cell, RefCell};

use ahash::{AHashMap, AHashSet};
use engine::Listener;

use crate::signal::Signal;

/// The drain signals of one listener on this shard: the listener's own
/// (connections still choosing a chain watch it) and one per filter chain
/// its connections were given, by chain id.
pub(crate) struct ChainDrains {
    listener: Signal,
    chains: RefCell<AHashMap<u64, Signal>>,
    /// The ids of the chains the listener has now: a connection that
    /// opened under a chain an update has since removed (it was still
    /// reading its ClientHello) drains at once.
    live: RefCell<AHashSet<u64>>,
    /// `/drain_listeners?graceful`: the listener still accepts, and what
    /// it accepts drains from the start.
    draining: Cell<bool>,
}

impl ChainDrains {
    pub fn new(listener: &Listener) -> Self {
        Self {
            listener: Signal::new(),
            chains: RefCell::default(),
            live: RefCell::new(listener.chains().map(|c| c.id).collect()),
            draining: Cell::new(false),
        }
    }

    /// The signal of chain `id`, made on first use; one already fired
    /// when the listener or the chain is gone or draining.
    pub fn chain(&self, id: u64) -> Signal {
        if self.listener.is_fired() || self.draining.get() || !self.live.borrow().contains(&id) {
            let gone = Signal::new();
            gone.fire();
            return gone;
        }
        self.chains.borrow_mut().entry(id).or_default().clone()
    }

    /// An update kept the listener: the connections of chains it no longer
    /// has (removed, or changed: a new id) drain; the others go on.
    pub fn keep_chains(&self, listener: &Listener) {
        *self.live.borrow_mut() = listener.chains().map(|c| c.id).collect();
        self.chains.borrow_mut().retain(|&id, signal| {
            let kept = listener.chain(id).is_some();
            if !kept {
                signal.fire();
            }
            kept
        });
    }

    /// Every connection drains, those the listener accepts from now on
    /// too, while it keeps accepting (`/drain_listeners?graceful`).
    pub fn fire_chains(&self) {
        self.draining.set(true);
        for (_, s) in self.chains.borrow_mut().drain() {
            s.fire();
        }
    }

    /// The listener goes: every connection drains.
    pub fn fire_all(&self) {
        self.listener.fire();
        for (_, s) in self.chains.borrow_mut().drain() {
            s.fire();
        }
    }
}
