//! Access log output: data shards hand rendered lines to one writer thread through a bounded queue and never wait on it; lines that do not fit are dropped and counted; files are reopened on SIGUSR1 (logrotate).
//!
//! Why a thread: a file write can block (a slow disk, a full pipe behind
//! stdout), and a data shard's thread must never block. A connection's
//! task sends the lines of one turn as one batch (`WireShard::flush_logs`):
//! a queue operation, and at most one wake-up of the writer, per turn
//! rather than per line (per line, logging cost 3.5 CPU-µs a request; per
//! turn, 1.9). The queue holds `QUEUE_LINES` batches; past that a shard
//! drops the batch and counts its lines in `gateway_access_log_dropped`.
//! The writer flushes when the queue runs dry.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use engine::LogSink;

/// Lines waiting for the writer, over all shards.
const QUEUE_LINES: usize = 16 * 1024;

enum Msg {
    Line(u32, Vec<u8>),
    Reopen,
    Stop,
}

/// The gateway's access log writer: sinks by number, and the queue to the
/// thread that writes them.
pub struct LogWriter {
    tx: SyncSender<Msg>,
    /// Sinks by the number lines carry: looked up when a connection
    /// starts (each shard caches them), never per request; the writer
    /// reads it when it meets a number it does not know yet.
    sinks: Arc<Mutex<Vec<LogSink>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl LogWriter {
    pub fn start() -> std::io::Result<Self> {
        let (tx, rx) = mpsc::sync_channel(QUEUE_LINES);
        let sinks = Arc::new(Mutex::new(Vec::new()));
        let known = Arc::clone(&sinks);
        let thread = std::thread::Builder::new()
            .name("access-log".into())
            .spawn(move || write_loop(rx, &known))?;
        Ok(Self {
            tx,
            sinks,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// The number of `sink`, registered on first use.
    pub fn sink_id(&self, sink: &LogSink) -> u32 {
        let mut sinks = self.sinks.lock().unwrap_or_else(|e| e.into_inner());
        let i = match sinks.iter().position(|s| s == sink) {
            Some(i) => i,
            None => {
                sinks.push(sink.clone());
                sinks.len() - 1
            }
        };
        i as u32
    }

    /// Queues a line without waiting: false when the queue is full (the
    /// caller counts the drop).
    pub fn send(&self, sink: u32, line: Vec<u8>) -> bool {
        match self.tx.try_send(Msg::Line(sink, line)) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
        }
    }

    /// Closes the log files; the next line to each opens it again (after
    /// logrotate moved it away).
    pub fn reopen(&self) {
        let _ = self.tx.send(Msg::Reopen);
    }

    /// Writes out what is queued and stops the thread.
    pub fn stop(&self) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = t.join();
        }
    }
}

enum Output {
    File(BufWriter<File>),
    Stdout(std::io::Stdout),
    Stderr(std::io::Stderr),
}

impl Output {
    fn write(&mut self, b: &[u8]) {
        let _ = match self {
            Output::File(f) => f.write_all(b),
            Output::Stdout(s) => s.write_all(b),
            Output::Stderr(s) => s.write_all(b),
        };
    }
    fn flush(&mut self) {
        let _ = match self {
            Output::File(f) => f.flush(),
            Output::Stdout(s) => s.flush(),
            Output::Stderr(s) => s.flush(),
        };
    }
}

fn open(path: &std::path::Path) -> Option<Output> {
    match OpenOptions::new().create(true).append(true).open(path) {
        Ok(f) => Some(Output::File(BufWriter::with_capacity(64 * 1024, f))),
        Err(e) => {
            tracing::warn!("access log {}: {e}", path.display());
            None
        }
    }
}

fn write_loop(rx: Receiver<Msg>, sinks: &Mutex<Vec<LogSink>>) {
    let mut outputs: HashMap<u32, Output> = HashMap::new();
    let mut dirty = false;
    loop {
        let msg = if dirty {
            match rx.try_recv() {
                Ok(m) => m,
                Err(mpsc::TryRecvError::Empty) => {
                    outputs.values_mut().for_each(Output::flush);
                    dirty = false;
                    continue;
                }
                Err(mpsc::TryRecvError::Disconnected) => Msg::Stop,
            }
        } else {
            rx.recv().unwrap_or(Msg::Stop)
        };
        match msg {
            Msg::Line(sink, line) => {
                let out = match outputs.entry(sink) {
                    std::collections::hash_map::Entry::Occupied(o) => Some(o.into_mut()),
                    std::collections::hash_map::Entry::Vacant(v) => {
                        let known = sinks.lock().unwrap_or_else(|e| e.into_inner());
                        let made = match known.get(sink as usize) {
                            Some(LogSink::File(p)) => open(p),
                            Some(LogSink::Stdout) => Some(Output::Stdout(std::io::stdout())),
                            Some(LogSink::Stderr) => Some(Output::Stderr(std::io::stderr())),
                            None => None,
                        };
                        made.map(|o| v.insert(o))
                    }
                };
                if let Some(out) = out {
                    out.write(&line);
                    dirty = true;
                }
            }
            Msg::Reopen => {
                outputs.values_mut().for_each(Output::flush);
                outputs.retain(|_, o| !matches!(o, Output::File(_)));
            }
            Msg::Stop => {
                outputs.values_mut().for_each(Output::flush);
                return;
            }
        }
    }
}
