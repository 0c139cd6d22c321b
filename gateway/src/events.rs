//! What the control shard's loop reacts to, and who sends it: commands from ordinary threads (a doorbell socket beside a std channel), the ADS task, file watchers and the admin server.
//!
//! The types live here, below every sender and the loop itself, so that
//! the senders (`xds::ads`, `xds::files`, `admin`) and the loop
//! (`control`) import them and never each other.

use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::net::UnixStream;
use std::rc::Rc;
use std::sync::mpsc;

use bytes::Bytes;
use engine::Bootstrap;
use glommio::channels::local_channel::LocalSender;
use xds::client::ResourceType;
use xds::pb::envoy::service::discovery::v3::DiscoveryResponse;

/// The sending side of the control loop's inbox, shared by its tasks.
pub type EventSender = Rc<LocalSender<Event>>;

/// Everything the control loop reacts to.
pub enum Event {
    Command(Command),
    Ads(AdsEvent),
    File {
        kind: ResourceType,
        result: Result<DiscoveryResponse, String>,
    },
    /// `POST /healthcheck/…` or `/drain_listeners`.
    Admin(AdminAction),
    /// A DNS cluster's name was looked up (see `crate::dns`).
    Dns {
        lookup: crate::dns::Lookup,
        result: Result<crate::dns::Resolution, String>,
    },
    /// An actively checked host's verdict changed (see `crate::health`).
    Health(crate::health::Report),
    /// A deadline of the control loop's passed (outlier sweeps, ADS
    /// requests held back, initial fetch timeouts, readiness, DNS lookups): see
    /// `Control::next_due`.
    Tick,
}

/// What an admin request asks the control shard to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminAction {
    /// `/healthcheck/fail` (true) or `/healthcheck/ok` (false).
    HealthCheckFailed(bool),
    /// `/drain_listeners`; `?graceful` keeps the listeners accepting for
    /// the drain time.
    DrainListeners { graceful: bool },
}

/// What the control loop hears from the ADS task. `gen` numbers streams so
/// that late events from a dead stream are recognised and dropped.
pub enum AdsEvent {
    Connected {
        gen: u64,
        send: h2::SendStream<Bytes>,
        server: SocketAddr,
    },
    Response {
        gen: u64,
        response: DiscoveryResponse,
    },
    /// Delta xDS (`DELTA_GRPC`).
    DeltaResponse {
        gen: u64,
        response: xds::pb::envoy::service::discovery::v3::DeltaDiscoveryResponse,
    },
    Lost {
        gen: u64,
        reason: String,
    },
}

/// From a [`GatewayHandle`](crate::GatewayHandle) (CLI, SIGHUP, tests) to
/// the control shard.
pub(crate) enum Command {
    Reload(Box<Bootstrap>, mpsc::Sender<Result<u64, String>>),
    Shutdown,
    /// A hot restart's successor took over: the admin socket is its now.
    StopAdmin,
    /// From the admin server's thread (its own channel: see
    /// `control::forward_admin`).
    Admin(AdminAction),
}

/// The sending half of the command path: a std channel (ordinary threads
/// cannot send on glommio's channels) plus a doorbell, one byte on a socket
/// pair per command, that the control shard awaits. Without it the control
/// shard had to poll the channel (50 wake-ups a second on an idle gateway).
pub(crate) struct CommandSender {
    // Declared before `bell`: dropped first, so that the control shard sees
    // the channel disconnected once the doorbell reads end of file.
    commands: mpsc::Sender<Command>,
    bell: UnixStream,
}

/// The control shard's half: see [`CommandSender`].
pub(crate) struct CommandReceiver {
    pub commands: mpsc::Receiver<Command>,
    pub bell: UnixStream,
}

/// A connected command sender and receiver.
pub(crate) fn command_channel() -> std::io::Result<(CommandSender, CommandReceiver)> {
    let (commands, receiver) = mpsc::channel();
    let (bell, bell_rx) = UnixStream::pair()?;
    // The control shard reads its end through glommio, which expects it
    // non-blocking; the sending end must never block its thread (see
    // `CommandSender::send`).
    bell_rx.set_nonblocking(true)?;
    bell.set_nonblocking(true)?;
    Ok((
        CommandSender { commands, bell },
        CommandReceiver {
            commands: receiver,
            bell: bell_rx,
        },
    ))
}

impl CommandSender {
    /// Queues `command` and rings the bell; false once the control shard is
    /// gone.
    pub fn send(&self, command: Command) -> bool {
        if self.commands.send(command).is_err() {
            return false;
        }
        // A full socket buffer means rings the control shard has not read
        // yet: it will find this command with them.
        let _ = (&self.bell).write(&[1]);
        true
    }
}
