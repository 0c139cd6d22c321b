//! Certificate files of the listeners' TLS contexts, watched by the control shard: when one changes (rewritten, or replaced by an atomic rename), its context is read again and swapped in, with no restart and no connection dropped; a bad new file keeps the old certificate, logged and counted.
//!
//! Polled like file sources (`xds::files`: modification time, size,
//! inode), once a second and only while some listener has certificate
//! files: a gateway without them still never wakes up when idle.

use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::tls::DownstreamTls;
use engine::Snapshot;

use crate::xds::files::{stamp, Stamp};

/// How often certificate files are looked at.
const POLL: Duration = Duration::from_secs(1);

/// One context being watched: where it serves, and its files' stamps as
/// last read.
struct Watched {
    tls: Arc<DownstreamTls>,
    listener: String,
    stamps: Vec<Option<Stamp>>,
}

/// What one look found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Checked {
    pub reloaded: u32,
    pub failed: u32,
}

#[derive(Default)]
pub struct CertWatch {
    watched: Vec<Watched>,
    next: Option<Instant>,
}

impl CertWatch {
    /// Follows the TLS contexts of `snap`'s listeners: a context already
    /// watched (the same `Arc`: a snapshot that did not change the
    /// listener) keeps its stamps; a new one is stamped now, as it was
    /// just read.
    pub fn track(&mut self, snap: &Snapshot, now: Instant) {
        let old = std::mem::take(&mut self.watched);
        let contexts = snap
            .listeners
            .iter()
            .flat_map(|l| l.chains().map(move |c| (l, c)))
            .filter_map(|(l, c)| Some((l, c.tls.as_ref().filter(|t| !t.files.is_empty())?)));
        for (l, tls) in contexts {
            // Two chains may share a context (the same `Arc`): watched once.
            if self.watched.iter().any(|w| Arc::ptr_eq(&w.tls, tls)) {
                continue;
            }
            let stamps = old
                .iter()
                .find(|w| Arc::ptr_eq(&w.tls, tls))
                .map(|w| w.stamps.clone())
                .unwrap_or_else(|| tls.files.iter().map(|f| stamp(f)).collect());
            self.watched.push(Watched {
                tls: Arc::clone(tls),
                listener: l.name.clone(),
                stamps,
            });
        }
        self.next = (!self.watched.is_empty()).then(|| self.next.unwrap_or(now + POLL));
    }

    /// When to look next, if anything is watched.
    pub fn next_due(&self) -> Option<Instant> {
        self.next
    }

    /// Looks at the files if it is time: each context whose files changed
    /// (and all exist: a rename in progress is looked at next time) is
    /// read again. A failed read is not retried until the files change
    /// again.
    pub fn check(&mut self, now: Instant) -> Checked {
        let mut out = Checked::default();
        if self.next.is_none_or(|t| now < t) {
            return out;
        }
        self.next = Some(now + POLL);
        for w in &mut self.watched {
            let stamps: Vec<Option<Stamp>> = w.tls.files.iter().map(|f| stamp(f)).collect();
            if stamps == w.stamps || stamps.iter().any(Option::is_none) {
                continue;
            }
            w.stamps = stamps;
            match w.tls.reload() {
                Ok(()) => {
                    out.reloaded += 1;
                    tracing::info!(listener = %w.listener, "TLS certificates reloaded");
                }
                Err(e) => {
                    out.failed += 1;
                    tracing::warn!(
                        listener = %w.listener,
                        "TLS certificate reload failed, keeping the current ones: {e}"
                    );
                }
            }
        }
        out
    }
}
