//! A connection manager's `access_log` entries: where lines go and in
//! which format.

use std::sync::Arc;

/// One `access_log` entry of a connection manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessLog {
    pub sink: LogSink,
    pub format: Arc<crate::access_log::LogFormat>,
}

/// Where an access log's lines go.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LogSink {
    /// `envoy.access_loggers.file`: appended; reopened on SIGUSR1.
    File(std::path::PathBuf),
    Stdout,
    Stderr,
}
