//! The control shard's main loop: one place where every config change —
//! SIGHUP reloads, ADS responses, file sources, initial fetch timeouts —
//! turns into a new `Snapshot` pushed to every data shard.
//!
//! ```text
//!  commands (std mpsc, polled) ─┐
//!  ADS task (AdsEvent) ─────────┼─▶ Event ─▶ XdsClient ─▶ compose ─▶ Snapshot::build ─▶ shards
//!  file watchers ───────────────┤                 │                                       │
//!  tick (timeouts) ─────────────┘                 └── ACK/NACK on the ADS stream ◀── acks ┘
//! ```
//! An update is acknowledged to the control plane only after every shard
//! applied it, so an ACK means "serving".

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::unix::io::{FromRawFd, IntoRawFd};
use std::rc::{Rc, Weak};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use bytes::Bytes;
use engine::{Bootstrap, HostRegistry, Snapshot};
use futures_lite::AsyncReadExt;
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use glommio::Task;
use xds::client::{ResourceType, XdsClient};
use xds::pb::envoy::service::discovery::v3::DiscoveryResponse;

mod ads_events;
mod initial;

use initial::{first_lookups, initial_snapshot, read_sources, Initial, Watched};

use crate::admin::{self, AdminState};
use crate::certs::CertWatch;
use crate::dns::{DnsLookups, Lookup, Resolution};
use crate::error::{StartError, Started};
use crate::events::{Command, CommandReceiver, Event, EventSender};
use crate::health::HealthCheckers;
use crate::outlier::OutlierControl;
use crate::ports::PortReservations;
use crate::shard_links::{self, stop_shards, Layout, ShardLink};
use crate::xds::ads::{self, AdsTarget};
use crate::xds::{files, view};
use shards::messages::{ShardMsg, ShardReply};
use shards::stats::ShardStats;

/// Says at info level what an update did to the listeners: those added,
/// removed or moved, and the chains whose connections now drain (an
/// operator reading the log sees why clients reconnect).
fn log_listener_changes(old: &Snapshot, new: &Snapshot) {
    for l in &new.listeners {
        match old.listener(&l.name) {
            None => tracing::info!(listener = %l.name, address = %l.address, "listener added"),
            Some(o) if o.address != l.address => {
                tracing::info!(listener = %l.name, address = %l.address, "listener moved: the old one drains");
            }
            Some(o) if Arc::ptr_eq(o, l) => {}
            Some(o) => {
                let changed = o.chains().filter(|c| l.chain(c.id).is_none()).count();
                if changed > 0 {
                    tracing::info!(listener = %l.name, chains = changed, "filter chains changed: their connections drain");
                }
            }
        }
    }
    for o in &old.listeners {
        if new.listener(&o.name).is_none() {
            tracing::info!(listener = %o.name, "listener removed: its connections drain");
        }
    }
    for (name, c) in &new.warming {
        if !old.warming.contains_key(name) {
            let hosts = c.hosts.len();
            tracing::info!(cluster = %name, hosts, "cluster warming: it serves once each host's first health check ended");
        }
    }
    for name in old.warming.keys() {
        if new.clusters.contains_key(name) {
            tracing::info!(cluster = %name, "cluster warmed: serving");
        }
    }
}

/// How often a listener that could not bind is tried again (A36 leaves
/// the period open; Envoy never retries on its own).
const BIND_RETRY: std::time::Duration = std::time::Duration::from_secs(5);

/// The ADS stream as the control loop sees it.
#[derive(Default)]
struct AdsLink {
    gen: u64,
    send: Option<h2::SendStream<Bytes>>,
    server: Option<SocketAddr>,
    restarts: u64,
    connect_failures: u64,
    /// Requests held back until their time (repeated NACKs, see
    /// `xds::client::Outcome::delay`).
    pending: Vec<(Instant, Bytes)>,
}

struct Control {
    links: Vec<ShardLink>,
    ports: PortReservations,
    registry: HostRegistry,
    admin: AdminState,
    current: Arc<Snapshot>,
    version: u64,
    client: XdsClient,
    ads: AdsLink,
    /// `dynamic_resources` as started (a reload may not change them).
    dynamic: Option<engine::DynamicResources>,
    /// `initialized` as last shown by the admin server.
    initialized: bool,
    /// Monotonic → wall clock, for the admin's timestamps.
    epoch: (Instant, SystemTime),
    outlier: OutlierControl,
    /// Certificate files of the current listeners.
    certs: CertWatch,
    /// Listeners of the last update that could not bind, and when to try
    /// them again.
    not_serving: Vec<crate::ports::NotServing>,
    bind_retry_at: Option<Instant>,
    /// DNS clusters' lookups.
    dns: DnsLookups,
    /// The loop's own inbox, for the lookup tasks it starts (weak: the
    /// loop still ends when every source is gone).
    events: Weak<LocalSender<Event>>,
    /// The ADS server's cluster as the ADS task reads it, kept current
    /// (its hosts may come from DNS).
    ads_cluster: Option<Rc<RefCell<Arc<engine::Cluster>>>>,
    /// Active health checks' host tasks and verdicts.
    health: HealthCheckers,
    /// When verdicts changed since the last snapshot: a burst of reports
    /// makes one snapshot.
    health_push_at: Option<Instant>,
    /// The overload manager's sampler, told each snapshot's configuration.
    overload: Option<crate::overload::Sampler>,
    /// The process's listening sockets, and whether the first
    /// configuration is complete: then a hot restart's sockets no listener
    /// took are closed, and `ready` tells the main thread.
    sockets: Arc<shards::wire::sockets::ListenSockets>,
    ready: Arc<std::sync::atomic::AtomicBool>,
}

/// The control shard: reads the file sources, starts the data shards and
/// the admin server, says on `started` whether it serves, then handles
/// events until shutdown and stops the shards.
pub(crate) async fn run(
    bootstrap: Bootstrap,
    layout: Layout,
    shard_stats: Vec<Arc<ShardStats>>,
    commands: CommandReceiver,
    started: mpsc::Sender<Started>,
) {
    let now = Instant::now();
    let mut client = XdsClient::new(&bootstrap, now);
    // Nothing runs yet: a failure here only has to be reported.
    let watched = match read_sources(&mut client, now) {
        Ok(watched) => watched,
        Err(e) => {
            let _ = started.send(Err(e));
            return;
        }
    };
    let mut dns = DnsLookups::new(clock_seed());
    first_lookups(&mut client, &mut dns).await;
    let mut health = HealthCheckers::new(clock_seed(), shard_stats.clone());
    health.first_round(&client.compose()).await;
    let initial = match initial_snapshot(&mut client, dns, health, Arc::clone(&layout.sockets)) {
        Ok(initial) => initial,
        Err(e) => {
            let _ = started.send(Err(e));
            return;
        }
    };
    let (boot, snap) = (initial.boot.clone(), Arc::clone(&initial.snap));
    // The data shards, then the admin server: a failure of either stops
    // the shards started so far.
    let mut links = Vec::with_capacity(layout.shards);
    let (admin_tx, admin_rx) = match crate::events::command_channel() {
        Ok(pair) => pair,
        Err(e) => {
            let _ = started.send(Err(StartError::Control(e.to_string())));
            return;
        }
    };
    let serving = shard_links::start(&mut links, &layout, &shard_stats, &snap)
        .await
        .and_then(|()| {
            let overload = Arc::clone(&layout.overload);
            let admin_state =
                AdminState::new(shard_stats, Arc::clone(&snap), boot.clone(), overload);
            let sockets = Arc::clone(&layout.sockets);
            start_admin(boot.admin, &admin_state, admin_tx, sockets).map(|addr| (admin_state, addr))
        });
    let (admin_state, admin_addr) = match serving {
        Ok(serving) => serving,
        Err(e) => {
            let _ = started.send(Err(e));
            stop_shards(&mut links).await;
            return;
        }
    };

    let listeners = snap
        .listeners
        .iter()
        .map(|l| (l.name.clone(), l.address))
        .collect::<BTreeMap<_, _>>();

    let (events, inbox) = local_channel::new_unbounded::<Event>();
    let events: EventSender = Rc::new(events);
    let ads = ads_target(&boot);
    let ads_cluster = ads.as_ref().map(|t| Rc::clone(&t.cluster));
    let _sources = Sources::spawn((commands, admin_rx), watched, ads, &events);
    let inbox_sender = Rc::downgrade(&events);
    drop(events);

    let dynamic = bootstrap.dynamic.clone();
    let mut control = Control::new(links, initial, admin_state, client, dynamic);
    control.events = inbox_sender;
    control.ads_cluster = ads_cluster;
    control.sockets = Arc::clone(&layout.sockets);
    control.ready = Arc::clone(&layout.ready);
    control.note_ready();
    match crate::overload::Sampler::start(Arc::clone(&layout.overload)) {
        Ok(s) => {
            s.configure(control.current.overload.clone());
            control.overload = Some(s);
        }
        Err(e) => {
            tracing::error!("overload manager: no sampler thread ({e}); its actions stay off")
        }
    }
    control.health.sync(&control.current, &control.events);
    control.admin.set_health(control.health.counts());
    control.refresh_admin();
    control.admin.publish();
    let _ = started.send(Ok((admin_addr, listeners)));
    control.event_loop(&inbox).await;
    // Actions from now on are answered 503: nothing would act on them.
    drop(_sources);
    stop_shards(&mut control.links).await;
    control.admin.stop();
}

/// Starts the admin server if the bootstrap has an `admin.address`.
fn start_admin(
    addr: Option<SocketAddr>,
    state: &AdminState,
    actions: crate::events::CommandSender,
    sockets: Arc<shards::wire::sockets::ListenSockets>,
) -> Result<Option<SocketAddr>, StartError> {
    let Some(addr) = addr else { return Ok(None) };
    admin::start(addr, state, actions, sockets)
        .map(Some)
        .map_err(|e| StartError::Bind(format!("admin.address {addr}: {e}")))
}

/// The tasks that turn what happens outside into events. Dropping a task
/// cancels it, so this lives as long as the control loop; the fields are
/// in the order they are dropped in: the ADS task first, commands last.
struct Sources {
    _ads: Option<Task<()>>,
    _watchers: Vec<Task<()>>,
    _admin: Task<()>,
    _commands: Task<()>,
}

impl Sources {
    /// Spawns the command forwarder, one watcher per file source, and the
    /// ADS task if the bootstrap has `ads_config`.
    fn spawn(
        (commands, admin): (CommandReceiver, CommandReceiver),
        watched: Vec<Watched>,
        ads: Option<AdsTarget>,
        events: &EventSender,
    ) -> Sources {
        let _commands = glommio::spawn_local(forward_commands(commands, events.clone()));
        let _admin = glommio::spawn_local(forward_admin(admin, events.clone()));
        let _watchers: Vec<Task<()>> = watched
            .into_iter()
            .map(|(kind, path, stamp)| {
                glommio::spawn_local(files::watch(kind, path, stamp, events.clone()))
            })
            .collect();
        let _ads =
            ads.map(|target| glommio::spawn_local(ads::run(target, events.clone(), clock_seed())));
        Sources {
            _ads,
            _watchers,
            _admin,
            _commands,
        }
    }
}

/// A seed for random draws (ADS backoff jitter, outlier enforcement),
/// from the wall clock so that gateways do not all draw alike.
fn clock_seed() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}

/// The static cluster `ads_config` names (validation made sure it exists).
fn ads_target(b: &Bootstrap) -> Option<AdsTarget> {
    let ads = b.dynamic.as_ref()?.ads.as_ref()?;
    let cluster = b.clusters.iter().find(|c| c.name == ads.cluster)?;
    Some(AdsTarget {
        cluster: Rc::new(RefCell::new(Arc::clone(cluster))),
        authority: ads.authority.clone(),
        delta: ads.delta,
    })
}

/// The admin server's actions, from its thread over a command channel of
/// their own: its end closing (the admin stopped) is no shutdown, unlike
/// the handle's.
async fn forward_admin(commands: CommandReceiver, events: EventSender) {
    let CommandReceiver { commands, bell } = commands;
    // SAFETY: as in `forward_commands`.
    let mut bell = unsafe { glommio::net::UnixStream::from_raw_fd(bell.into_raw_fd()) };
    let mut rings = [0u8; 64];
    loop {
        match commands.try_recv() {
            Ok(Command::Admin(action)) => {
                if events.send(Event::Admin(action)).await.is_err() {
                    return;
                }
            }
            Ok(_) => {}
            Err(mpsc::TryRecvError::Empty) => match bell.read(&mut rings).await {
                Ok(n) if n > 0 => {}
                _ => return,
            },
            Err(mpsc::TryRecvError::Disconnected) => return,
        }
    }
}

/// Commands come from ordinary threads over a std channel, which cannot
/// wake an executor: each rings the doorbell this awaits.
async fn forward_commands(commands: CommandReceiver, events: EventSender) {
    let CommandReceiver { commands, bell } = commands;
    // SAFETY: `bell` is an open, non-blocking socket we own; its fd moves
    // into the glommio stream, which closes it.
    let mut bell = unsafe { glommio::net::UnixStream::from_raw_fd(bell.into_raw_fd()) };
    let mut rings = [0u8; 64];
    loop {
        let cmd = match commands.try_recv() {
            Ok(c) => c,
            Err(mpsc::TryRecvError::Empty) => match bell.read(&mut rings).await {
                Ok(n) if n > 0 => continue,
                // End of file: the handle is gone (its channel first).
                _ => Command::Shutdown,
            },
            Err(mpsc::TryRecvError::Disconnected) => Command::Shutdown,
        };
        let last = matches!(cmd, Command::Shutdown);
        if events.send(Event::Command(cmd)).await.is_err() || last {
            return;
        }
    }
}

impl Control {
    /// The control state once the shards serve the first snapshot: nothing
    /// is ejected yet and the certificates are those of `snap`.
    fn new(
        links: Vec<ShardLink>,
        initial: Initial,
        admin: AdminState,
        client: XdsClient,
        dynamic: Option<engine::DynamicResources>,
    ) -> Control {
        let Initial {
            ports,
            registry,
            snap,
            dns,
            health,
            ..
        } = initial;
        let mut outlier = OutlierControl::new(clock_seed());
        // Nothing is ejected yet, so there is nothing to push.
        let _ = outlier.on_snapshot(&snap, Instant::now());
        let mut certs = CertWatch::default();
        certs.track(&snap, Instant::now());
        admin.set_dns(dns.counts().clone());
        let epoch = (Instant::now(), SystemTime::now());
        // The detectors' series are there from the start, as Envoy's.
        admin.set_outlier(outlier.view(&snap), epoch);
        Control {
            links,
            ports,
            registry,
            admin,
            current: snap,
            version: 1,
            client,
            ads: AdsLink::default(),
            dynamic,
            initialized: false,
            epoch,
            outlier,
            certs,
            not_serving: Vec::new(),
            bind_retry_at: None,
            dns,
            events: Weak::new(),
            ads_cluster: None,
            health,
            health_push_at: None,
            overload: None,
            sockets: Arc::default(),
            ready: Arc::default(),
        }
    }

    /// Handles events until a shutdown or until every sender is gone.
    /// The loop sleeps until the next event or its next deadline: an idle
    /// gateway's control shard does not wake up at all.
    async fn event_loop(&mut self, inbox: &LocalReceiver<Event>) {
        loop {
            let event = match self.next_due() {
                None => inbox.recv().await,
                Some(at) => {
                    let due = async {
                        glommio::timer::sleep(at.saturating_duration_since(Instant::now())).await;
                        Some(Event::Tick)
                    };
                    futures_lite::future::or(inbox.recv(), due).await
                }
            };
            let Some(event) = event else { break };
            let refresh = match event {
                Event::Command(Command::Shutdown) => break,
                Event::Command(Command::StopAdmin) => {
                    self.admin.stop();
                    false
                }
                Event::Command(Command::Reload(boot, reply)) => {
                    let result = self.reload(*boot).await;
                    // The admin shows the new config before the caller
                    // hears it applied.
                    self.refresh_admin();
                    self.admin.publish();
                    let _ = reply.send(result);
                    true
                }
                Event::Command(Command::Admin(action)) => {
                    self.on_admin(action).await;
                    true
                }
                Event::Ads(e) => {
                    self.on_ads(e).await;
                    true
                }
                Event::Admin(action) => {
                    self.on_admin(action).await;
                    true
                }
                Event::File { kind, result } => {
                    self.on_file(kind, result).await;
                    true
                }
                Event::Dns { lookup, result } => {
                    self.on_dns(lookup, result).await;
                    true
                }
                Event::Health(report) => {
                    let uneject = report
                        .passed_while_ejected
                        .then(|| (Rc::clone(&report.cluster), report.address));
                    if self.health.on_report(report) {
                        self.health_push_at.get_or_insert_with(Instant::now);
                    }
                    if let Some((cluster, address)) = uneject {
                        self.uneject_after_check(&cluster, address).await;
                    }
                    false
                }
                Event::Tick => self.on_tick().await,
            };
            if refresh {
                self.refresh_admin();
            }
            // Whatever the event changed, at once for the admin server.
            self.admin.publish();
        }
    }

    /// Does what is due: certificate checks, outlier sweeps, held-back ADS
    /// requests, initial fetch timeouts, bind retries. Returns whether the
    /// admin server's xDS view may have changed.
    async fn on_tick(&mut self) -> bool {
        let now = Instant::now();
        let checked = self.certs.check(now, &self.client.secret_view());
        self.admin
            .record_tls_reloads(checked.reloaded, checked.failed);
        self.sweep_outliers(now).await;
        self.send_due(now);
        self.dns.start_due(now, &self.events);
        let expired = self.client.poll(now);
        // A listener that could not bind is pushed again once its
        // address is free (probed first: no snapshot per retry).
        let rebind = self.bind_retry_at.is_some_and(|at| now >= at) && {
            self.bind_retry_at = Some(now + BIND_RETRY);
            self.not_serving
                .iter()
                .any(|n| crate::ports::probe_exclusive(n.address).is_ok())
        };
        if self.health.next_poll().is_some_and(|at| now >= at)
            && self.health.poll_immediate_failures(now)
        {
            self.health_push_at.get_or_insert(now);
        }
        let checked = self.health_push_at.take_if(|at| now >= *at).is_some();
        if expired || rebind || checked {
            self.push_xds(now).await;
        }
        // Most ticks change nothing the admin server shows.
        expired || self.initialized != self.client.initialized(now)
    }

    async fn reload(&mut self, boot: Bootstrap) -> Result<u64, String> {
        let started = Instant::now();
        if boot.dynamic != self.dynamic {
            return Err("dynamic_resources cannot change on reload; restart the gateway".into());
        }
        let now = Instant::now();
        let previous = self.client.statics().clone();
        let requests = self.client.set_statics(&boot, now);
        let composed = self.client.compose();
        match self.push(&composed, false, started).await {
            Ok(v) => {
                self.send(requests);
                Ok(v)
            }
            Err(e) => {
                // Nothing was applied (a listener could not bind): forget
                // the new statics so the next xDS update does not apply them.
                self.client.set_statics(&previous, now);
                self.client.compose();
                Err(e)
            }
        }
    }

    async fn on_file(&mut self, kind: ResourceType, result: Result<DiscoveryResponse, String>) {
        let started = Instant::now();
        let outcome = match result {
            Ok(resp) => self.client.on_file(kind, &resp, started),
            Err(e) => {
                self.client.note_rejection(kind, "", &e, Instant::now());
                tracing::warn!("{e}");
                return;
            }
        };
        if let Some(e) = &outcome.rejected {
            tracing::warn!(kind = kind.name(), "file update rejected: {e}");
        }
        if outcome.changed {
            self.push_xds(started).await;
        }
        self.send(outcome.requests);
    }

    /// The earliest time the loop has something to do without an event:
    /// an outlier sweep, an ADS request held back, an initial fetch
    /// timeout, a certificate check, a bind retry, a DNS lookup, or the
    /// end of the wait for the first resources.
    fn next_due(&self) -> Option<Instant> {
        let init = self.client.init_deadline().filter(|_| !self.initialized);
        [
            self.outlier.next_due(),
            self.ads.pending.iter().map(|(at, _)| *at).min(),
            self.client.next_deadline(),
            self.certs.next_due(),
            self.bind_retry_at,
            self.dns.next_due(),
            self.health_push_at,
            self.health.next_poll(),
            init,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Tells every data shard what the admin asked.
    async fn on_admin(&mut self, action: crate::admin::AdminAction) {
        use crate::admin::AdminAction as A;
        let msg = match action {
            A::HealthCheckFailed(failed) => {
                tracing::info!(failed, "health check set by the admin");
                ShardMsg::HealthCheckFailed(failed)
            }
            A::DrainListeners { graceful } => {
                tracing::info!(graceful, "draining listeners (admin)");
                ShardMsg::DrainListeners { graceful }
            }
        };
        for l in &self.links {
            let _ = l.tx.send(msg.clone()).await;
        }
    }

    /// A DNS cluster's name was looked up: its hosts reach the shards
    /// when they changed.
    async fn on_dns(&mut self, lookup: Lookup, result: Result<Resolution, String>) {
        let now = Instant::now();
        if let Some(endpoints) = self.dns.on_result(&lookup, result, now) {
            if self.client.on_dns(&lookup.cluster, &lookup.dns, endpoints) {
                self.push_xds(now).await;
            }
        }
        self.admin.set_dns(self.dns.counts().clone());
    }

    async fn push_xds(&mut self, started: Instant) {
        let composed = self.client.compose();
        if let Err(e) = self.push(&composed, true, started).await {
            tracing::warn!("applying xDS update: {e}");
        }
    }

    /// Builds the next snapshot and waits until every shard applied it.
    /// `started`: when the change arrived (push time in `/stats` covers
    /// validation and composition too).
    async fn push(
        &mut self,
        boot: &Bootstrap,
        lenient: bool,
        started: Instant,
    ) -> Result<u64, String> {
        let (boot, failed) = self.ports.resolve(boot, &self.current.listeners, lenient)?;
        for f in &failed {
            if !self.not_serving.contains(f) {
                tracing::warn!(
                    "{}: not serving; binding again every {}s",
                    f.error,
                    BIND_RETRY.as_secs()
                );
            }
        }
        self.bind_retry_at = (!failed.is_empty()).then(|| Instant::now() + BIND_RETRY);
        self.not_serving = failed;
        self.version += 1;
        self.health_push_at = None;
        let snap = Arc::new(Snapshot::build_checked(
            self.version,
            &boot,
            Some(&self.current),
            &mut self.registry,
            self.health.verdicts(),
        ));
        let mut result = Ok(self.version);
        for l in &self.links {
            if l.tx.send(ShardMsg::Apply(Arc::clone(&snap))).await.is_err() {
                result = Err("a data shard has stopped".to_string());
            }
        }
        if let Err(e) = shard_links::collect_acks(&self.links).await {
            result = Err(e);
        }
        self.admin.record_push(started.elapsed());
        // Together: the admin never shows a listener in neither list.
        self.follow_ads_cluster(&boot);
        self.admin.set_config(Arc::clone(&snap), boot);
        self.admin.set_not_serving(self.not_serving.clone());
        self.certs.track(&snap, Instant::now());
        log_listener_changes(&self.current, &snap);
        self.current = snap;
        if let Some(s) = &self.overload {
            s.configure(self.current.overload.clone());
        }
        if let Some(set) = self.outlier.on_snapshot(&self.current, Instant::now()) {
            self.push_ejections(set).await;
        }
        self.admin
            .set_outlier(self.outlier.view(&self.current), self.epoch);
        // The DNS clusters of this config: new ones are looked up now.
        self.dns.sync(&self.client.dns_clusters(), Instant::now());
        self.admin.set_dns(self.dns.counts().clone());
        // The checked hosts of this config: new ones get a task.
        self.health.sync(&self.current, &self.events);
        self.admin.set_health(self.health.counts());
        result
    }

    /// Hands the ADS task the ADS cluster as this config has it (a DNS
    /// cluster's hosts change with its lookups).
    fn follow_ads_cluster(&self, boot: &Bootstrap) {
        let Some(cell) = &self.ads_cluster else {
            return;
        };
        let name = cell.borrow().name.clone();
        if let Some(c) = boot.clusters.iter().find(|c| c.name == name) {
            if !Arc::ptr_eq(c, &cell.borrow()) {
                *cell.borrow_mut() = Arc::clone(c);
            }
        }
    }

    /// Runs the outlier sweeps that are due: collects every shard's counts
    /// for those clusters, sweeps, and pushes the ejected set if it changed.
    async fn sweep_outliers(&mut self, now: Instant) {
        let due = self.outlier.due(now);
        if due.is_empty() {
            return;
        }
        let due: Arc<[String]> = due.into();
        for l in &self.links {
            let _ = l.tx.send(ShardMsg::CollectOutlier(Arc::clone(&due))).await;
        }
        let mut reports = ahash::AHashMap::new();
        for l in &self.links {
            if let Some(ShardReply::Outlier(list)) = l.acks.recv().await {
                for (id, r) in list {
                    reports
                        .entry(id)
                        .or_insert_with(engine::outlier::HostReport::default)
                        .merge(&r);
                }
            }
        }
        if let Some(set) = self.outlier.sweep(now, &due, &reports) {
            self.push_ejections(set).await;
        }
        self.admin
            .set_outlier(self.outlier.view(&self.current), self.epoch);
    }

    /// Tells every shard which hosts are ejected now (and the health
    /// checkers, whose passes may end an ejection). Not acknowledged: the
    /// channel is ordered, so a later snapshot or collection follows it.
    async fn push_ejections(&mut self, set: Arc<engine::EjectedSet>) {
        self.health.follow_ejections(&set);
        for l in &self.links {
            let _ = l.tx.send(ShardMsg::Ejections(Arc::clone(&set))).await;
        }
    }

    /// An ejected host of `cluster` passed its active health check: its
    /// ejection ends now unless the cluster keeps it
    /// (`successful_active_health_check_uneject_host: false`).
    async fn uneject_after_check(&mut self, cluster: &str, address: SocketAddr) {
        let Some(id) = self
            .current
            .cluster(cluster)
            .and_then(|c| c.host_by_addr(&address))
            .map(|h| h.id)
        else {
            return;
        };
        if let Some(set) = self.outlier.uneject_after_check(cluster, id) {
            self.push_ejections(set).await;
            self.admin
                .set_outlier(self.outlier.view(&self.current), self.epoch);
        }
    }

    /// Once the first configuration is complete (static, or the first
    /// xDS fetches done or timed out, and no listener warming): a hot
    /// restart's sockets for
    /// addresses no listener took are closed (the previous process closes
    /// its copies as it stops), and the main thread hears it.
    fn note_ready(&mut self) {
        use std::sync::atomic::Ordering;
        // Initialized, and no listener still waiting for its routes: every
        // listener of the first configuration has taken its sockets.
        let complete =
            self.dynamic.is_none() || (self.initialized && self.client.warming().0.is_empty());
        if !complete || self.ready.load(Ordering::Acquire) {
            return;
        }
        for addr in self.sockets.release_untaken() {
            tracing::info!(%addr, "hot restart: not listening on {addr} any more");
        }
        self.ready.store(true, Ordering::Release);
    }

    fn refresh_admin(&mut self) {
        if self.dynamic.is_none() {
            return;
        }
        self.initialized = self.client.initialized(Instant::now());
        self.note_ready();
        let link = view::StreamState {
            connected: self.ads.send.is_some(),
            server: self.ads.server,
            restarts: self.ads.restarts,
            connect_failures: self.ads.connect_failures,
        };
        let v = view::xds_view(&self.client, &link, self.initialized, self.epoch);
        self.admin.set_xds(v);
    }
}
