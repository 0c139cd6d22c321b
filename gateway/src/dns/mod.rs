//! DNS clusters' lookups on the control shard, never on a data shard: which are due ([`schedule`]), how one runs ([`resolve`]) and what the system's resolver settings are ([`system`]). Results reach the data shards as snapshot updates, like EDS.

pub mod resolve;
pub mod schedule;
pub mod system;

use std::rc::Weak;
use std::sync::Arc;
use std::time::Instant;

use engine::{Dns, Endpoint};
use glommio::channels::local_channel::LocalSender;

use crate::events::Event;
pub use schedule::{Counts, Lookup, Resolution, Schedule};

/// The lookups of every DNS cluster and the tasks that run them.
pub struct DnsLookups {
    schedule: Schedule,
    /// Draws query ids, one seed per lookup.
    seed: u64,
}

impl DnsLookups {
    pub fn new(seed: u64) -> DnsLookups {
        DnsLookups {
            schedule: Schedule::new(seed),
            seed: seed | 1,
        }
    }

    /// See [`Schedule::sync`].
    pub fn sync(&mut self, clusters: &[(String, Arc<Dns>)], now: Instant) {
        self.schedule.sync(clusters, now);
    }

    pub fn next_due(&self) -> Option<Instant> {
        self.schedule.next_due()
    }

    fn next_seed(&mut self) -> u64 {
        self.seed = self
            .seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.seed
    }

    /// Starts the lookups due at `now`, each a task that sends
    /// [`Event::Dns`] when it ends (unless the control loop is gone).
    pub fn start_due(&mut self, now: Instant, events: &Weak<LocalSender<Event>>) {
        for lookup in self.schedule.due(now) {
            let seed = self.next_seed();
            let events = events.clone();
            glommio::spawn_local(async move {
                let result = run(&lookup, seed).await;
                if let Some(events) = events.upgrade() {
                    let _ = events.send(Event::Dns { lookup, result }).await;
                }
            })
            .detach();
        }
    }

    /// Runs the lookups due at `now` and waits for them all: the static
    /// DNS clusters' first lookups, before the first snapshot, as Envoy
    /// initializes them before its listeners. Returns each lookup's
    /// outcome, to be handed to [`DnsLookups::on_result`].
    pub async fn run_due(&mut self, now: Instant) -> Vec<(Lookup, Result<Resolution, String>)> {
        let tasks: Vec<_> = self
            .schedule
            .due(now)
            .into_iter()
            .map(|lookup| {
                let seed = self.next_seed();
                glommio::spawn_local(async move {
                    let result = run(&lookup, seed).await;
                    (lookup, result)
                })
            })
            .collect();
        let mut out = Vec::with_capacity(tasks.len());
        for t in tasks {
            out.push(t.await);
        }
        out
    }

    /// See [`Schedule::on_result`]; logs a failure.
    pub fn on_result(
        &mut self,
        lookup: &Lookup,
        result: Result<Resolution, String>,
        now: Instant,
    ) -> Option<Vec<Endpoint>> {
        if let Err(e) = &result {
            tracing::warn!(cluster = %lookup.cluster, "DNS lookup failed: {e}");
        }
        self.schedule.on_result(lookup, result, now)
    }

    pub fn counts(&self) -> &std::collections::BTreeMap<String, Counts> {
        self.schedule.counts()
    }
}

/// Looks up `lookup`'s name.
async fn run(lookup: &Lookup, seed: u64) -> Result<Resolution, String> {
    let Some(target) = lookup.dns.targets.get(lookup.target) else {
        return Err("no such name".into());
    };
    resolve::resolve(&target.host, &lookup.dns, seed)
        .await
        .map_err(|e| format!("{}: {e}", target.host))
}
