//! What the control shard does before any data shard runs: reads the file
//! sources, looks up the DNS clusters' names, checks the checked hosts once,
//! and builds the first snapshot.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use engine::{Bootstrap, ConfigSource, HostRegistry, Snapshot};
use xds::client::{ResourceType, XdsClient};

use crate::dns::DnsLookups;
use crate::error::StartError;
use crate::health::HealthCheckers;
use crate::ports::PortReservations;
use crate::xds::files;

/// A file source to watch: what it holds, where, and its state when read.
pub(super) type Watched = (ResourceType, PathBuf, Option<files::Stamp>);

/// What the gateway starts with, before any shard runs.
pub(super) struct Initial {
    pub(super) ports: PortReservations,
    pub(super) registry: HostRegistry,
    /// The composed bootstrap, its listener ports reserved.
    pub(super) boot: Bootstrap,
    /// Version 1, which the data shards start with.
    pub(super) snap: Arc<Snapshot>,
    /// The DNS clusters' lookups, the first ones done.
    pub(super) dns: DnsLookups,
    /// Active health checks, the first round done.
    pub(super) health: HealthCheckers,
}

/// Reads the file sources, so that the gateway starts with what they hold
/// (or fails to start if they are invalid); returns them, to be watched.
pub(super) fn read_sources(
    client: &mut XdsClient,
    now: Instant,
) -> Result<Vec<Watched>, StartError> {
    let mut watched = Vec::new();
    for kind in [ResourceType::Cluster, ResourceType::Listener] {
        if let Some(ConfigSource::Path(path)) = client.source(kind).cloned() {
            let stamp = files::stamp(&path);
            let resp = files::read(&path).map_err(StartError::Config)?;
            if let Some(e) = client.on_file(kind, &resp, now).rejected {
                return Err(StartError::Config(format!("{}: {e}", path.display())));
            }
            watched.push((kind, path, stamp));
        }
    }
    Ok(watched)
}

/// Looks up the names of the DNS clusters held so far (static ones and
/// those of a CDS file) and waits for the answers: Envoy initializes such
/// clusters before its listeners serve, so the first snapshot has their
/// hosts. A lookup that fails leaves its cluster without hosts for now.
pub(super) async fn first_lookups(client: &mut XdsClient, dns: &mut DnsLookups) {
    dns.sync(&client.dns_clusters(), Instant::now());
    for (lookup, result) in dns.run_due(Instant::now()).await {
        if let Some(endpoints) = dns.on_result(&lookup, result, Instant::now()) {
            client.on_dns(&lookup.cluster, &lookup.dns, endpoints);
        }
    }
}

/// Builds the first snapshot.
pub(super) fn initial_snapshot(
    client: &mut XdsClient,
    dns: DnsLookups,
    health: HealthCheckers,
    sockets: Arc<shards::wire::sockets::ListenSockets>,
) -> Result<Initial, StartError> {
    let mut ports = PortReservations::new(sockets);
    let mut registry = HostRegistry::new();
    let (boot, _) = ports
        .resolve(&client.compose(), &[], false)
        .map_err(StartError::Bind)?;
    let snap = Arc::new(Snapshot::build_checked(
        1,
        &boot,
        None,
        &mut registry,
        health.verdicts(),
    ));
    Ok(Initial {
        ports,
        registry,
        boot,
        snap,
        dns,
        health,
    })
}
