//! File sources: watch a `path_config_source` file and hand each new
//! version to the control loop.
//!
//! We poll the file's metadata (modification time, size, inode) rather than
//! use inotify: it also catches the atomic rename Envoy documents as the
//! way to update such files, needs no extra dependency, and a quarter
//! second of delay is nothing for config changes.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use xds::client::ResourceType;
use xds::pb::envoy::service::discovery::v3::DiscoveryResponse;

use crate::events::{Event, EventSender};

const POLL: Duration = Duration::from_millis(250);

/// A file's identity and version as far as we can tell without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

pub fn stamp(path: &std::path::Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some(Stamp {
        modified: m.modified().ok(),
        len: m.len(),
        inode: m.ino(),
    })
}

/// Reads and parses the file now.
pub fn read(path: &std::path::Path) -> Result<DiscoveryResponse, String> {
    xds::file::load_discovery_response(path).map_err(|e| e.to_string())
}

/// Runs until dropped: re-reads `path` whenever its stamp changes.
pub async fn watch(
    kind: ResourceType,
    path: PathBuf,
    mut last: Option<Stamp>,
    events: EventSender,
) {
    loop {
        glommio::timer::sleep(POLL).await;
        let now = stamp(&path);
        if now == last || now.is_none() {
            // A missing file (mid-rename, or deleted) keeps what we have.
            continue;
        }
        last = now;
        let result = read(&path);
        if events.send(Event::File { kind, result }).await.is_err() {
            return;
        }
    }
}
