//! Hitless binary upgrade with Envoy's command-line contract (`--restart-epoch`, `--base-id`, `--parent-shutdown-time-s`): the new process takes every listening socket of the running one over a Unix socket, serves, then tells it to drain and go.
//!
//! ```text
//!  epoch N-1 (parent)                          epoch N (child)
//!  listens on <socket-path>_<base-id>_<N-1>
//!                         ◀── hello {epoch N} ──  connects
//!        ── hello {epoch N-1} ──▶
//!                         ◀── sockets ──────────
//!        ── sockets [addr…] + SCM_RIGHTS ──▶       shards and admin take
//!                                                  them (no bind, no gap),
//!                                                  bind the rest, serve
//!                         ◀── drain ────────────
//!        ── draining ──▶                           listens on …_<N>
//!  stops accepting, drains its
//!  connections (--drain-time-s),
//!  exits by --parent-shutdown-time-s
//! ```
//!
//! Both processes accept on the same sockets while the child starts; the
//! parent then stops. Nothing is refused or reset: the sockets never
//! close (the child holds copies), connections queued in their backlogs
//! are the child's, and a stopped accept loses none (glommio's
//! `PATCH(polled-accept)`). With as many data shards as before, each of
//! the child's shards takes the socket of the parent's shard of the same
//! index, so the kernel's SO_REUSEPORT group, and how it spreads
//! connections, is unchanged. Addresses the child's configuration no
//! longer has are closed with the parent; new ones are bound.

pub mod channel;

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use shards::wire::sockets::ListenSockets;

use channel::{Channel, Listener, MAX_FDS};

/// How long one exchange with the other process may take.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);

/// The hot restart's settings (the command line's).
#[derive(Debug, Clone)]
pub struct Options {
    /// `--base-id`: tells apart the gateways of one host.
    pub base_id: u32,
    /// `--restart-epoch`: 0 for a first start, then one more per upgrade.
    pub epoch: u32,
    /// `--socket-path`: the channel's name prefix (`@…`: abstract).
    pub socket_path: String,
    /// `--socket-mode`, for a filesystem name.
    pub socket_mode: u32,
    /// `--parent-shutdown-time-s`: a parent exits at the latest this long
    /// after its child asked it to drain.
    pub parent_shutdown_time: Duration,
    /// `--skip-hot-restart-on-no-parent`: an epoch above 0 finding no
    /// parent starts afresh instead of failing.
    pub skip_on_no_parent: bool,
}

impl Options {
    fn own_name(&self) -> String {
        channel::name(&self.socket_path, self.base_id, self.epoch)
    }

    fn parent_name(&self) -> Option<String> {
        let parent = self.epoch.checked_sub(1)?;
        Some(channel::name(&self.socket_path, self.base_id, parent))
    }
}

/// What a child got from its parent, and the way to tell it to go.
pub struct Inherited {
    pub sockets: Vec<(SocketAddr, OwnedFd)>,
    /// The parent's process id.
    pub parent_pid: u32,
    channel: Channel,
}

impl Inherited {
    /// Tells the parent to stop accepting and drain: call once this
    /// process serves.
    pub fn drain_parent(self) -> Result<(), String> {
        let reply = exchange(&self.channel, json!({ "type": "drain" }), &mut Vec::new())?;
        expect(&reply, "draining")
    }
}

fn send(c: &Channel, v: &Value, fds: &[std::os::fd::RawFd]) -> Result<(), String> {
    c.send(v.to_string().as_bytes(), fds)
        .map_err(|e| format!("hot restart: sending to the other process: {e}"))
}

fn recv(c: &Channel, fds: &mut Vec<OwnedFd>) -> Result<Value, String> {
    let (text, got) = c
        .recv()
        .map_err(|e| format!("hot restart: reading from the other process: {e}"))?;
    fds.extend(got);
    serde_json::from_slice(&text).map_err(|e| format!("hot restart: malformed message: {e}"))
}

fn exchange(c: &Channel, v: Value, fds: &mut Vec<OwnedFd>) -> Result<Value, String> {
    send(c, &v, &[])?;
    recv(c, fds)
}

fn expect(v: &Value, kind: &str) -> Result<(), String> {
    match v["type"].as_str() {
        Some(k) if k == kind => Ok(()),
        Some("error") => Err(format!(
            "hot restart refused by the running process: {}",
            v["message"].as_str().unwrap_or("?")
        )),
        _ => Err(format!("hot restart: expected {kind:?}, got {v}")),
    }
}

/// A child's start: connects to epoch N-1 and takes its sockets. `None`:
/// epoch 0, or no parent with `--skip-hot-restart-on-no-parent`.
pub fn take_over(opts: &Options) -> Result<Option<Inherited>, String> {
    let Some(name) = opts.parent_name() else {
        return Ok(None);
    };
    let channel = match Channel::connect(&name, EXCHANGE_TIMEOUT) {
        Ok(c) => c,
        Err(e) if opts.skip_on_no_parent => {
            tracing::warn!("hot restart: no parent on {name} ({e}); starting afresh");
            return Ok(None);
        }
        Err(e) => {
            return Err(format!(
                "--restart-epoch {}: no running gateway answers on {name} ({e}); start \
                 epoch 0 first, check --base-id and --socket-path, or pass \
                 --skip-hot-restart-on-no-parent",
                opts.epoch
            ))
        }
    };
    let hello = json!({
        "type": "hello",
        "epoch": opts.epoch,
        "pid": std::process::id(),
        "version": env!("CARGO_PKG_VERSION"),
    });
    let reply = exchange(&channel, hello, &mut Vec::new())?;
    expect(&reply, "hello")?;
    let parent_pid = reply["pid"].as_u64().unwrap_or(0) as u32;
    send(&channel, &json!({ "type": "sockets" }), &[])?;
    let mut sockets = Vec::new();
    loop {
        let mut fds = Vec::new();
        let batch = recv(&channel, &mut fds)?;
        expect(&batch, "sockets")?;
        let addrs = batch["addresses"].as_array().cloned().unwrap_or_default();
        if addrs.len() != fds.len() {
            return Err(format!(
                "hot restart: {} addresses for {} sockets",
                addrs.len(),
                fds.len()
            ));
        }
        for (a, fd) in addrs.iter().zip(fds) {
            let addr = a
                .as_str()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| format!("hot restart: bad address {a}"))?;
            sockets.push((addr, fd));
        }
        if batch["more"].as_bool() != Some(true) {
            break;
        }
    }
    tracing::info!(
        "hot restart: took {} listening socket(s) from process {parent_pid} (epoch {})",
        sockets.len(),
        opts.epoch - 1
    );
    Ok(Some(Inherited {
        sockets,
        parent_pid,
        channel,
    }))
}

/// The parent's side: serves the next epoch's requests on a thread of its
/// own until one asks it to drain; then `on_drain` runs (once) and the
/// thread ends.
pub struct Server {
    listener: Arc<Listener>,
    /// Set once this process serves: before, a next epoch is refused
    /// (there would be nothing to hand over yet).
    ready: Arc<AtomicBool>,
}

impl Server {
    /// Listens on this epoch's name.
    pub fn start(
        opts: &Options,
        sockets: Arc<ListenSockets>,
        on_drain: impl FnOnce() + Send + 'static,
    ) -> Result<Self, String> {
        let name = opts.own_name();
        let listener = Listener::bind(&name, opts.socket_mode).map_err(|e| {
            format!(
                "hot restart: cannot listen on {name} ({e}); is another gateway running with \
                 --base-id {}?",
                opts.base_id
            )
        })?;
        let listener = Arc::new(listener);
        let ready = Arc::new(AtomicBool::new(false));
        let epoch = opts.epoch;
        let (l, r) = (Arc::clone(&listener), Arc::clone(&ready));
        std::thread::Builder::new()
            .name("hot-restart".into())
            .spawn(move || serve(&l, epoch, &r, &sockets, on_drain))
            .map_err(|e| format!("hot restart thread: {e}"))?;
        Ok(Self { listener, ready })
    }

    /// This process serves: the next epoch may take over.
    pub fn ready(&self) {
        self.ready.store(true, Ordering::Release);
    }
}

impl Drop for Server {
    /// Stops listening (the thread's accept fails and it ends).
    fn drop(&mut self) {
        self.listener.shutdown();
    }
}

fn serve(
    l: &Listener,
    epoch: u32,
    ready: &AtomicBool,
    sockets: &ListenSockets,
    on_drain: impl FnOnce(),
) {
    loop {
        let Ok(c) = l.accept() else { return };
        if c.set_timeout(EXCHANGE_TIMEOUT).is_err() {
            continue;
        }
        if !ready.load(Ordering::Acquire) {
            let message = format!("epoch {epoch} is still starting");
            let _ = send(&c, &json!({ "type": "error", "message": message }), &[]);
            continue;
        }
        match child(&c, epoch, sockets) {
            Ok(true) => {
                on_drain();
                return;
            }
            Ok(false) => {}
            Err(e) => tracing::warn!("hot restart: {e}"),
        }
    }
}

/// One child's requests; `Ok(true)` once it asked this process to drain.
fn child(c: &Channel, epoch: u32, sockets: &ListenSockets) -> Result<bool, String> {
    let hello = recv(c, &mut Vec::new())?;
    expect(&hello, "hello")?;
    let want = epoch + 1;
    if hello["epoch"].as_u64() != Some(u64::from(want)) {
        let message = format!(
            "this is epoch {epoch}: the next is {want}, not {}",
            hello["epoch"]
        );
        send(c, &json!({ "type": "error", "message": message }), &[])?;
        return Err(message);
    }
    let child_pid = hello["pid"].as_u64().unwrap_or(0);
    let reply = json!({
        "type": "hello",
        "epoch": epoch,
        "pid": std::process::id(),
        "version": env!("CARGO_PKG_VERSION"),
    });
    send(c, &reply, &[])?;
    loop {
        let request = match recv(c, &mut Vec::new()) {
            Ok(r) => r,
            // The child went away before asking to drain: it failed to
            // start; this process goes on serving.
            Err(e) => {
                tracing::warn!("hot restart: process {child_pid} left without taking over: {e}");
                sockets.reclaim_steering();
                return Ok(false);
            }
        };
        match request["type"].as_str() {
            Some("sockets") => {
                let all = sockets
                    .duplicate()
                    .map_err(|e| format!("copying listening sockets: {e}"))?;
                let batches: Vec<_> = all.chunks(MAX_FDS).collect();
                if batches.is_empty() {
                    send(c, &json!({ "type": "sockets", "addresses": [] }), &[])?;
                }
                for (i, batch) in batches.iter().enumerate() {
                    let addresses: Vec<String> = batch.iter().map(|(a, _)| a.to_string()).collect();
                    let fds: Vec<_> = batch.iter().map(|(_, f)| f.as_raw_fd()).collect();
                    let more = i + 1 < batches.len();
                    let msg = json!({ "type": "sockets", "addresses": addresses, "more": more });
                    send(c, &msg, &fds)?;
                }
                tracing::info!(
                    "hot restart: handed {} listening socket(s) to process {child_pid}",
                    all.len()
                );
            }
            Some("drain") => {
                send(
                    c,
                    &json!({ "type": "draining", "pid": std::process::id() }),
                    &[],
                )?;
                tracing::info!("hot restart: process {child_pid} took over; draining");
                return Ok(true);
            }
            _ => {
                let message = format!("unknown request {request}");
                send(c, &json!({ "type": "error", "message": message }), &[])?;
                return Err(message);
            }
        }
    }
}
