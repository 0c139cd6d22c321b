//! Certificate files of the listeners' and clusters' TLS contexts (their certificates, keys, CAs, ticket keys and SDS files), watched by the control shard: when one changes (rewritten, or replaced by an atomic rename), its context is read again and swapped in, with no restart and no connection dropped; a bad new file keeps the old certificate, logged and counted.
//!
//! Polled like file sources (`xds::files`: modification time, size,
//! inode), once a second and only while some context has certificate
//! files: a gateway without them still never wakes up when idle.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::tls::{Reloadable, SecretView};
use engine::{Snapshot, SourcedTls};

use crate::xds::files::{stamp, Stamp};

/// How often certificate files are looked at.
const POLL: Duration = Duration::from_secs(1);

/// One context being watched: what it belongs to, and its files and
/// their stamps as last read.
struct Watched {
    tls: Arc<dyn Reloadable>,
    owner: String,
    files: Vec<PathBuf>,
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
    /// Follows the TLS contexts of `snap`'s listeners and clusters: a
    /// context already watched (the same `Arc`: a snapshot that did not
    /// change it) keeps its stamps; a new one is stamped now, as it was
    /// just read.
    pub fn track(&mut self, snap: &Snapshot, now: Instant) {
        let mut old: HashMap<*const (), Watched> = std::mem::take(&mut self.watched)
            .into_iter()
            .map(|w| (Arc::as_ptr(&w.tls) as *const (), w))
            .collect();
        let clusters = snap.clusters.values().map(|c| &c.config);
        for SourcedTls { owner, tls } in engine::sourced_tls(snap.listeners.iter(), clusters) {
            let files = tls.files();
            if files.is_empty() {
                continue;
            }
            let stamps = old
                .remove(&(Arc::as_ptr(&tls) as *const ()))
                .filter(|w| w.files == files)
                .map(|w| w.stamps)
                .unwrap_or_else(|| stamps(&files));
            self.watched.push(Watched {
                tls,
                owner,
                files,
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
    /// read again, with the secrets of `view`. A failed read is not
    /// retried until the files change again.
    pub fn check(&mut self, now: Instant, view: &SecretView) -> Checked {
        let mut out = Checked::default();
        if self.next.is_none_or(|t| now < t) {
            return out;
        }
        self.next = Some(now + POLL);
        for w in &mut self.watched {
            let now_stamps = stamps(&w.files);
            if now_stamps == w.stamps || now_stamps.iter().any(Option::is_none) {
                continue;
            }
            w.stamps = now_stamps;
            match w.tls.resolve(view, true) {
                Ok(_) => {
                    // A new secret file may name other files.
                    let files = w.tls.files();
                    if files != w.files {
                        w.stamps = stamps(&files);
                        w.files = files;
                    }
                    out.reloaded += 1;
                    tracing::info!(owner = %w.owner, "TLS certificates reloaded");
                }
                Err(e) => {
                    out.failed += 1;
                    tracing::warn!(
                        owner = %w.owner,
                        "TLS certificate reload failed, keeping the current ones: {e}"
                    );
                }
            }
        }
        out
    }
}

fn stamps(files: &[PathBuf]) -> Vec<Option<Stamp>> {
    files.iter().map(|f| stamp(f)).collect()
}
