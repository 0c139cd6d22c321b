//! Starting and steering a gateway: the control shard (snapshot builder,
//! admin server) and one data shard per core.
//!
//! ```text
//!   GatewayHandle ──commands──▶ control shard ──Arc<Snapshot>──▶ data shard 0..N
//!   (main thread: CLI,           (own thread:                    (own pinned thread:
//!    SIGHUP, tests)               HostRegistry, admin)             listeners, pools)
//! ```
//! Commands cross from ordinary threads with a std channel and a doorbell
//! socket the control shard awaits; snapshots cross between executors on
//! glommio shared channels.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use engine::session::CookieFormat;
use engine::Bootstrap;

use glommio::{LocalExecutorBuilder, Placement};

use crate::error::StartError;
use crate::events::{command_channel, Command, CommandSender};
use shards::stats::ShardStats;

/// How to lay out shards on cores.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Number of data shards; `None` = one per CPU in `cpus` (or per core).
    pub shards: Option<usize>,
    /// CPUs to pin data shards to, in order; `None` = unpinned.
    pub cpus: Option<Vec<usize>>,
    /// How new session cookies are written (`--session-cookie-format`);
    /// every form is read whatever this says.
    pub session_cookie_format: CookieFormat,
    /// I/O batching of busy data shards (`--io-batch-us`).
    pub pacing: shards::pacing::Pacing,
    /// How connections drain on updates and at shutdown
    /// (`--drain-time-s`, `--drain-strategy`).
    pub drain: shards::drain::DrainOptions,
    /// The process's listening sockets: on a hot restart, those the
    /// previous process handed over (`crate::hot_restart`).
    pub sockets: Arc<shards::wire::sockets::ListenSockets>,
    /// How new connections are spread over the data shards
    /// (`--connection-steering`).
    pub connection_steering: shards::steering::SteeringMode,
}

/// A running gateway. Dropping it does not stop it; call [`shutdown`].
///
/// [`shutdown`]: GatewayHandle::shutdown
pub struct GatewayHandle {
    pub admin_addr: Option<SocketAddr>,
    /// Listener name → bound address (port 0 resolved).
    pub listeners: BTreeMap<String, SocketAddr>,
    pub shard_stats: Vec<Arc<ShardStats>>,
    commands: CommandSender,
    control: Option<JoinHandle<()>>,
    /// The access log writer thread, shared with the data shards.
    logs: Arc<shards::access_log::LogWriter>,
    /// The first configuration is complete (see `Layout::ready`).
    ready: Arc<std::sync::atomic::AtomicBool>,
}

impl GatewayHandle {
    pub fn listener(&self, name: &str) -> Option<SocketAddr> {
        self.listeners.get(name).copied()
    }

    /// Pushes a new config through the same path as the first one; returns
    /// the new snapshot version once every shard has applied it.
    pub fn reload(&self, bootstrap: Bootstrap) -> Result<u64, String> {
        let (tx, rx) = mpsc::channel();
        if !self.commands.send(Command::Reload(Box::new(bootstrap), tx)) {
            return Err("gateway stopped".to_string());
        }
        rx.recv().map_err(|_| "gateway stopped".to_string())?
    }

    /// Drains connections (GOAWAY, then up to each listener's drain timeout)
    /// and stops every shard, then writes out the access logs.
    pub fn shutdown(mut self) {
        self.commands.send(Command::Shutdown);
        if let Some(t) = self.control.take() {
            let _ = t.join();
        }
        self.logs.stop();
    }

    /// Waits (up to `limit`) until the first configuration is complete:
    /// static, or the first xDS fetches done (or their initial fetch
    /// timeouts passed). Whether it is.
    pub fn wait_ready(&self, limit: std::time::Duration) -> bool {
        let until = std::time::Instant::now() + limit;
        while !self.ready.load(std::sync::atomic::Ordering::Acquire) {
            if std::time::Instant::now() >= until {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        true
    }

    /// Stops the admin server (its socket stays open for a hot restart's
    /// successor, which serves it).
    pub fn stop_admin(&self) {
        self.commands.send(Command::StopAdmin);
    }

    /// Blocks until the gateway stops.
    pub fn wait(mut self) {
        if let Some(t) = self.control.take() {
            let _ = t.join();
        }
        self.logs.stop();
    }

    /// Closes the access log files; the next line reopens each (SIGUSR1,
    /// after logrotate moved them).
    pub fn reopen_logs(&self) {
        self.logs.reopen();
    }
}

/// Starts the control shard and the data shards, returns once every shard
/// serves the bootstrap (or with the first error).
pub fn start(bootstrap: Bootstrap, opts: Options) -> Result<GatewayHandle, StartError> {
    crate::admin::started();
    let cpus = opts.cpus.clone();
    let n = opts
        .shards
        .or_else(|| cpus.as_ref().map(Vec::len))
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    steer(&opts, n);
    let shard_stats: Vec<Arc<ShardStats>> =
        (0..n).map(|_| Arc::new(ShardStats::default())).collect();
    let (cmd_tx, cmd_rx) = command_channel().map_err(|e| StartError::Control(e.to_string()))?;
    let logs = Arc::new(
        shards::access_log::LogWriter::start().map_err(|e| StartError::Control(e.to_string()))?,
    );
    let logs2 = Arc::clone(&logs);
    let ready = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ready2 = Arc::clone(&ready);
    let (started_tx, started_rx) = mpsc::channel();
    let stats2 = shard_stats.clone();
    let control = std::thread::Builder::new()
        .name("control".into())
        .spawn(move || {
            let ex = match LocalExecutorBuilder::new(Placement::Unbound)
                .io_memory(1 << 20)
                .name("control")
                .make()
            {
                Ok(ex) => ex,
                Err(e) => {
                    let _ = started_tx.send(Err(StartError::Control(e.to_string())));
                    return;
                }
            };
            let layout = crate::shard_links::Layout {
                shards: n,
                cpus,
                cookie_format: opts.session_cookie_format,
                pacing: opts.pacing,
                logs: logs2,
                drain: opts.drain,
                sockets: Arc::clone(&opts.sockets),
                overload: shards::overload::OverloadState::new(),
                ready: ready2,
            };
            ex.run(crate::control::run(
                bootstrap, layout, stats2, cmd_rx, started_tx,
            ));
        })
        .map_err(|e| StartError::Control(e.to_string()))?;
    match started_rx.recv() {
        Ok(Ok((admin_addr, listeners))) => Ok(GatewayHandle {
            admin_addr,
            listeners,
            shard_stats,
            commands: cmd_tx,
            control: Some(control),
            logs,
            ready,
        }),
        Ok(Err(e)) => {
            let _ = control.join();
            logs.stop();
            Err(e)
        }
        Err(_) => {
            let _ = control.join();
            logs.stop();
            Err(StartError::Control(
                "control shard exited during start".into(),
            ))
        }
    }
}

/// Turns connection steering on for `n` data shards, as `opts` asks and
/// the kernel allows (`shards::steering`); says which.
fn steer(opts: &Options, n: usize) {
    use shards::steering::{Steering, SteeringMode};
    if n < 2 || opts.connection_steering == SteeringMode::KernelHash {
        return;
    }
    match Steering::new(n) {
        Ok(s) => {
            opts.sockets.steer(s);
            tracing::info!(
                shards = n,
                "connection steering: least connections (SO_REUSEPORT eBPF)"
            );
        }
        Err(e) => tracing::warn!(
            "connection steering off, the kernel's SO_REUSEPORT hash spreads connections: {e} \
             (needs CAP_BPF, or root, and Linux 5.8 or later)"
        ),
    }
}
