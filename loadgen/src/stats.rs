//! Per-thread counters and latency histograms, their merge, and the report.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;

/// Default of `--backend-header`: the demo backend's `x-backend`.
pub const DEFAULT_BACKEND_HEADER: &str = "x-backend";

/// Highest recordable latency (µs): one hour; larger values saturate.
const MAX_LATENCY_US: u64 = 3_600_000_000;

/// Why a request did not succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// TCP connect or h2 handshake failed (counted per attempt).
    Connect,
    /// The stream was reset (RST_STREAM).
    Reset,
    /// The connection went away with an error GOAWAY (not NO_ERROR).
    GoAway,
    /// No complete response within `--timeout`.
    Timeout,
    /// A response arrived with a status outside 2xx.
    Non2xx,
    /// gRPC: missing or non-zero grpc-status.
    GrpcStatus,
    /// The connection failed at the I/O level (closed, refused...).
    Io,
    /// Anything else (protocol errors...).
    Other,
}

/// Error counts by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorCounts {
    pub connect: u64,
    pub reset: u64,
    pub goaway: u64,
    pub timeout: u64,
    pub non_2xx: u64,
    pub grpc_status: u64,
    pub io: u64,
    pub other: u64,
}

impl ErrorCounts {
    pub fn add(&mut self, kind: ErrorKind) {
        *match kind {
            ErrorKind::Connect => &mut self.connect,
            ErrorKind::Reset => &mut self.reset,
            ErrorKind::GoAway => &mut self.goaway,
            ErrorKind::Timeout => &mut self.timeout,
            ErrorKind::Non2xx => &mut self.non_2xx,
            ErrorKind::GrpcStatus => &mut self.grpc_status,
            ErrorKind::Io => &mut self.io,
            ErrorKind::Other => &mut self.other,
        } += 1;
    }

    pub fn total(&self) -> u64 {
        self.connect
            + self.reset
            + self.goaway
            + self.timeout
            + self.non_2xx
            + self.grpc_status
            + self.io
            + self.other
    }

    fn merge(&mut self, o: &ErrorCounts) {
        self.connect += o.connect;
        self.reset += o.reset;
        self.goaway += o.goaway;
        self.timeout += o.timeout;
        self.non_2xx += o.non_2xx;
        self.grpc_status += o.grpc_status;
        self.io += o.io;
        self.other += o.other;
    }

    fn fields(&self) -> [(&'static str, u64); 8] {
        [
            ("connect", self.connect),
            ("reset", self.reset),
            ("goaway", self.goaway),
            ("timeout", self.timeout),
            ("non_2xx", self.non_2xx),
            ("grpc_status", self.grpc_status),
            ("io", self.io),
            ("other", self.other),
        ]
    }
}

/// Responses by status class (index = status / 100; 0 unused).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusCounts(pub [u64; 6]);

impl StatusCounts {
    pub fn class(&self, hundreds: usize) -> u64 {
        self.0.get(hundreds).copied().unwrap_or(0)
    }
}

/// Session mode (`--sessions`): backend affinity as seen by the sessions.
/// Only responses to requests started in the measured window are counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Sessions run.
    pub sessions: u64,
    /// Sessions with at least one affinity break.
    pub broken: u64,
    /// Affinity breaks in all: responses carrying the backend header whose
    /// backend differs from the one the session's previous such response
    /// came from.
    pub breaks: u64,
    /// Responses without the backend header (not part of the affinity figures).
    pub no_header: u64,
}

impl SessionStats {
    /// Threads own disjoint sessions, so every figure adds up.
    pub fn merge(&mut self, o: &SessionStats) {
        self.sessions += o.sessions;
        self.broken += o.broken;
        self.breaks += o.breaks;
        self.no_header += o.no_header;
    }

    /// Share of sessions with at least one break, in percent.
    pub fn broken_pct(&self) -> f64 {
        if self.sessions == 0 {
            0.0
        } else {
            self.broken as f64 * 100.0 / self.sessions as f64
        }
    }
}

/// What one worker thread measured; merged into a [`Report`].
#[derive(Debug, Clone)]
pub struct ThreadStats {
    /// Latency (µs) of every response received in the measured window,
    /// whatever its status.
    pub latency: Histogram<u64>,
    /// Responses received (any status) for requests started in the window.
    pub responses: u64,
    /// Requests that succeeded (2xx, and grpc-status 0 in gRPC mode).
    pub succeeded: u64,
    pub status: StatusCounts,
    pub errors: ErrorCounts,
    /// Connections re-opened after a graceful GOAWAY or a failure.
    pub reconnects: u64,
    /// Session mode only.
    pub sessions: Option<SessionStats>,
}

impl Default for ThreadStats {
    fn default() -> Self {
        ThreadStats {
            latency: Histogram::new_with_bounds(1, MAX_LATENCY_US, 3)
                .expect("static histogram bounds"),
            responses: 0,
            succeeded: 0,
            status: StatusCounts::default(),
            errors: ErrorCounts::default(),
            reconnects: 0,
            sessions: None,
        }
    }
}

impl ThreadStats {
    /// Records a response that took `latency`.
    #[inline]
    pub fn record_response(&mut self, latency: Duration, status: u16, ok: bool) {
        // 0 µs is below the histogram's lowest bound (1).
        let us = (latency.as_micros() as u64).max(1);
        self.latency.saturating_record(us);
        self.responses += 1;
        self.status.0[(status as usize / 100).min(5)] += 1;
        self.succeeded += u64::from(ok);
    }

    pub fn merge(&mut self, o: &ThreadStats) {
        // Same bounds on both sides: addition cannot fail.
        let _ = self.latency.add(&o.latency);
        self.responses += o.responses;
        self.succeeded += o.succeeded;
        for (a, b) in self.status.0.iter_mut().zip(o.status.0.iter()) {
            *a += b;
        }
        self.errors.merge(&o.errors);
        self.reconnects += o.reconnects;
        if let Some(o) = &o.sessions {
            self.sessions.get_or_insert_with(Default::default).merge(o);
        }
    }
}

/// Live counters a worker publishes for the once-a-second progress line.
/// Padded to its own cache lines: each is written by one thread only, so
/// stores stay local and never bounce between cores.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct Progress {
    pub done: AtomicU64,
    pub errors: AtomicU64,
}

impl Progress {
    pub fn load(&self) -> (u64, u64) {
        (
            self.done.load(Ordering::Relaxed),
            self.errors.load(Ordering::Relaxed),
        )
    }
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Latency {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
    pub mean: f64,
}

/// The result of a run.
#[derive(Debug, Clone)]
pub struct Report {
    /// Responses received (any status) for requests started in the window.
    pub requests: u64,
    /// Of which successful (2xx, grpc-status 0 in gRPC mode).
    pub succeeded: u64,
    /// Length of the measured window (warm-up excluded).
    pub duration: Duration,
    /// Achieved responses per second.
    pub rps: f64,
    /// Open loop: the requested rate.
    pub intended_rps: Option<f64>,
    pub latency: Latency,
    /// Full merged histogram (µs) for callers that want other quantiles.
    pub histogram: Histogram<u64>,
    pub status: StatusCounts,
    pub errors: ErrorCounts,
    pub reconnects: u64,
    /// Session mode (`--sessions`) only.
    pub sessions: Option<SessionStats>,
    /// The response header naming the backend (`--backend-header`).
    pub backend_header: String,
    pub threads: usize,
    pub connections: usize,
    pub streams: usize,
}

impl Report {
    /// Builds the report from merged thread stats.
    pub fn new(
        stats: ThreadStats,
        duration: Duration,
        intended_rps: Option<f64>,
        threads: usize,
        connections: usize,
        streams: usize,
    ) -> Report {
        let h = &stats.latency;
        let q = |x| {
            if h.is_empty() {
                0
            } else {
                h.value_at_quantile(x)
            }
        };
        let latency = Latency {
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            p999: q(0.999),
            max: h.max(),
            mean: if h.is_empty() { 0.0 } else { h.mean() },
        };
        let secs = duration.as_secs_f64();
        Report {
            requests: stats.responses,
            succeeded: stats.succeeded,
            duration,
            rps: if secs > 0.0 {
                stats.responses as f64 / secs
            } else {
                0.0
            },
            intended_rps,
            latency,
            histogram: stats.latency,
            status: stats.status,
            errors: stats.errors,
            reconnects: stats.reconnects,
            sessions: stats.sessions,
            backend_header: DEFAULT_BACKEND_HEADER.to_string(),
            threads,
            connections,
            streams,
        }
    }

    /// The machine-readable report (`--json`).
    pub fn to_json(&self) -> serde_json::Value {
        let errors: serde_json::Map<String, serde_json::Value> = self
            .errors
            .fields()
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).into()))
            .collect();
        serde_json::json!({
            "requests": self.requests,
            "succeeded": self.succeeded,
            "duration_s": self.duration.as_secs_f64(),
            "rps": self.rps,
            "intended_rps": self.intended_rps,
            "latency_us": {
                "p50": self.latency.p50,
                "p90": self.latency.p90,
                "p99": self.latency.p99,
                "p999": self.latency.p999,
                "max": self.latency.max,
                "mean": self.latency.mean,
            },
            "status": {
                "1xx": self.status.class(1),
                "2xx": self.status.class(2),
                "3xx": self.status.class(3),
                "4xx": self.status.class(4),
                "5xx": self.status.class(5),
            },
            "errors": errors,
            "errors_total": self.errors.total(),
            "reconnects": self.reconnects,
            "sessions": self.sessions.map(|s| serde_json::json!({
                "sessions": s.sessions,
                "broken": s.broken,
                "broken_pct": s.broken_pct(),
                "breaks": s.breaks,
                "no_backend_header": s.no_header,
                "backend_header": self.backend_header,
            })),
            "threads": self.threads,
            "connections": self.connections,
            "streams": self.streams,
        })
    }
}

/// Human-readable report.
impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} requests in {:.2}s ({} threads, {} connections x {} streams)",
            self.requests,
            self.duration.as_secs_f64(),
            self.threads,
            self.connections,
            self.streams
        )?;
        match self.intended_rps {
            Some(i) => writeln!(f, "req/s: {:.1} achieved, {:.1} intended", self.rps, i)?,
            None => writeln!(f, "req/s: {:.1}", self.rps)?,
        }
        let l = &self.latency;
        writeln!(
            f,
            "latency (us): p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  mean {:.1}",
            l.p50, l.p90, l.p99, l.p999, l.max, l.mean
        )?;
        if let Some(s) = &self.sessions {
            writeln!(
                f,
                "sessions: {}, broken: {} ({:.2} %), breaks: {}, no {}: {}",
                s.sessions,
                s.broken,
                s.broken_pct(),
                s.breaks,
                self.backend_header,
                s.no_header
            )?;
        }
        writeln!(
            f,
            "status: 2xx {}  3xx {}  4xx {}  5xx {}  other {}",
            self.status.class(2),
            self.status.class(3),
            self.status.class(4),
            self.status.class(5),
            self.status.class(1)
        )?;
        write!(f, "errors: {}", self.errors.total())?;
        for (k, v) in self.errors.fields() {
            if v > 0 {
                write!(f, "  {k} {v}")?;
            }
        }
        writeln!(f)?;
        if self.reconnects > 0 {
            writeln!(f, "reconnects: {}", self.reconnects)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_and_report() {
        let mut a = ThreadStats::default();
        let mut b = ThreadStats::default();
        for i in 1..=100u64 {
            a.record_response(Duration::from_micros(i), 200, true);
        }
        b.record_response(Duration::from_millis(5), 503, false);
        b.errors.add(ErrorKind::Non2xx);
        a.merge(&b);
        let r = Report::new(a, Duration::from_secs(2), None, 2, 4, 8);
        assert_eq!(r.requests, 101);
        assert_eq!(r.succeeded, 100);
        assert_eq!(r.status.class(2), 100);
        assert_eq!(r.status.class(5), 1);
        assert_eq!(r.errors.non_2xx, 1);
        assert!((r.rps - 50.5).abs() < 1e-9);
        assert!(r.latency.p50 >= 50 && r.latency.p50 <= 52);
        assert!(r.latency.max >= 4990);
        let j = r.to_json();
        assert_eq!(j["requests"], 101);
        assert_eq!(j["status"]["5xx"], 1);
        assert_eq!(j["errors"]["non_2xx"], 1);
        assert!(j["intended_rps"].is_null());
        assert!(j["latency_us"]["p999"].is_u64());
        assert!(r.to_string().contains("p99.9"));
        assert!(j["sessions"].is_null());
        assert!(!r.to_string().contains("sessions:"));
    }

    #[test]
    fn session_stats_merge_across_threads() {
        // Thread 0: 3 sessions, 1 broken twice; thread 1: 2 sessions, both
        // broken once, 4 responses without the header; thread 2: none.
        let a = ThreadStats {
            sessions: Some(SessionStats {
                sessions: 3,
                broken: 1,
                breaks: 2,
                no_header: 0,
            }),
            ..ThreadStats::default()
        };
        let b = ThreadStats {
            sessions: Some(SessionStats {
                sessions: 2,
                broken: 2,
                breaks: 2,
                no_header: 4,
            }),
            ..ThreadStats::default()
        };
        let c = ThreadStats::default();
        let mut total = ThreadStats::default();
        for t in [&a, &b, &c] {
            total.merge(t);
        }
        let s = total.sessions.unwrap();
        assert_eq!(
            s,
            SessionStats {
                sessions: 5,
                broken: 3,
                breaks: 4,
                no_header: 4,
            }
        );
        assert!((s.broken_pct() - 60.0).abs() < 1e-9);
        assert_eq!(SessionStats::default().broken_pct(), 0.0);

        let mut r = Report::new(total, Duration::from_secs(1), Some(10.0), 2, 2, 1);
        r.backend_header = "x-upstream".into();
        let text = r.to_string();
        assert!(
            text.contains("sessions: 5, broken: 3 (60.00 %), breaks: 4, no x-upstream: 4"),
            "{text}"
        );
        let j = r.to_json();
        assert_eq!(j["sessions"]["sessions"], 5);
        assert_eq!(j["sessions"]["broken"], 3);
        assert_eq!(j["sessions"]["broken_pct"], 60.0);
        assert_eq!(j["sessions"]["breaks"], 4);
        assert_eq!(j["sessions"]["no_backend_header"], 4);
        assert_eq!(j["sessions"]["backend_header"], "x-upstream");
    }
}
