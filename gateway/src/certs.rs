//! Certificate files of the listeners' TLS contexts (their certificates, keys, CAs, ticket keys and SDS files), watched by the control shard: when one changes (rewritten, or replaced by an atomic rename), its context is read again and swapped in, with no restart and no connection dropped; a bad new file keeps the old certificate, logged and counted.
//!
//! Polled like file sources (`xds::files`: modification time, size,
//! inode), once a second and only while some listener has certificate
//! files: a gateway without them still never wakes up when idle.

use std::sync::Arc;
use std::time::{Duration, Instant};

use std::path::PathBuf;

use engine::tls::{DownstreamTls, Reloadable, SecretView};
use engine::Snapshot;

use crate::xds::files::{stamp, Stamp};

/// How often certificate files are looked at.
const POLL: Duration = Duration::from_secs(1);

/// One context being watched: where it serves, and its files and their
/// stamps as last read.
struct Watched {
    tls: Arc<DownstreamTls>,
    listener: String,
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
            .filter_map(|(l, c)| Some((l, c.tls.as_ref()?)));
        for (l, tls) in contexts {
            // Two chains may share a context (the same `Arc`): watched once.
            if self.watched.iter().any(|w| Arc::ptr_eq(&w.tls, tls)) {
                continue;
            }
            let files = tls.files();
            if files.is_empty() {
                continue;
            }
            let stamps = old
                .iter()
                .find(|w| Arc::ptr_eq(&w.tls, tls) && w.files == files)
                .map(|w| w.stamps.clone())
                .unwrap_or_else(|| stamps(&files));
            self.watched.push(Watched {
                tls: Arc::clone(tls),
                listener: l.name.clone(),
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

fn stamps(files: &[PathBuf]) -> Vec<Option<Stamp>> {
    files.iter().map(|f| stamp(f)).collect()
}
