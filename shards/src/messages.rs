//! What crosses between threads: commands to the control shard, messages to the data shards and their replies.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::sync::Arc;

use engine::outlier::HostReport;
use engine::{Bootstrap, EjectedSet, HostId, Snapshot};

/// Messages from the control shard to a data shard.
#[derive(Clone)]
pub enum ShardMsg {
    /// Adopt this snapshot; answered with [`ShardReply::Applied`].
    Apply(Arc<Snapshot>),
    /// Outlier detection changed which hosts are ejected. Not answered.
    Ejections(Arc<EjectedSet>),
    /// Hand over (and restart) the outlier counters of these clusters' hosts;
    /// answered with [`ShardReply::Outlier`].
    CollectOutlier(Arc<[String]>),
    /// Stop accepting, drain every connection (`--drain-time-s`), stop.
    Shutdown,
    /// `POST /healthcheck/fail` (true) or `/healthcheck/ok` (false).
    HealthCheckFailed(bool),
    /// `POST /drain_listeners`: every connection drains; the listeners
    /// stop accepting now, or (`graceful`) at the end of the drain time.
    /// Not answered.
    DrainListeners { graceful: bool },
}

/// A data shard's answer to the control shard. The control loop has at most
/// one request outstanding per shard, so answers never interleave.
pub enum ShardReply {
    /// The version applied, or why the snapshot could not be.
    Applied(Result<u64, String>),
    /// This shard's counts since the last collection, per host with any.
    Outlier(Vec<(HostId, HostReport)>),
}

/// From a [`GatewayHandle`](crate::GatewayHandle) (CLI, SIGHUP, tests) to
/// the control shard.
pub(crate) enum Command {
    Reload(Box<Bootstrap>, mpsc::Sender<Result<u64, String>>),
    Shutdown,
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
