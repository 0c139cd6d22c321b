//! A connection manager's `access_log` entries: where lines go and in
//! which format.

use std::sync::Arc;

/// One `access_log` entry of a connection manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessLog {
    pub sink: LogSink,
    pub format: Arc<crate::access_log::LogFormat>,
    /// `filter`: which requests it logs (all without one).
    pub filter: Option<Arc<LogRule>>,
}

/// An access log's `filter`, with the request fields it reads (captured
/// at the request's head, as the format's are).
#[derive(Debug, PartialEq, Eq)]
pub struct LogRule {
    pub filter: crate::access_log::filter::LogFilter,
    pub fields: Vec<String>,
}

impl LogRule {
    pub fn new(filter: crate::access_log::filter::LogFilter) -> Self {
        let fields = filter.fields();
        Self { filter, fields }
    }
}

/// Where an access log's lines go.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LogSink {
    /// `envoy.access_loggers.file`: appended; reopened on SIGUSR1.
    File(std::path::PathBuf),
    Stdout,
    Stderr,
}
