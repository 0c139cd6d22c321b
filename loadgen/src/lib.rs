//! h2c load generator library: `run(&Args)` drives the load and returns a [`Report`].
//!
//! The binary (`src/main.rs`) is a thin CLI over [`run`]; tests and the
//! benchmark runner call [`run`] directly.

pub mod args;
pub mod grpc;
pub mod session;
pub mod stats;
pub mod worker;

use std::sync::Arc;
use std::time::{Duration, Instant};

use glommio::{LocalExecutorBuilder, Placement};

pub use args::{Args, Plan};
pub use stats::{ErrorCounts, Latency, Report, SessionStats, StatusCounts};

use stats::{Progress, ThreadStats};
use worker::Timeline;

/// Runs the load described by `args` and returns the merged report.
/// Errors are configuration problems (bad URL, header, CPU list) or a worker
/// thread that could not start; request failures are counted in the report.
pub fn run(args: &Args) -> Result<Report, String> {
    let plan = Plan::from_args(args)?;
    run_plan(plan, !args.quiet)
}

/// Like [`run`] for an already validated plan; `progress` prints a line per
/// second on stderr.
pub fn run_plan(plan: Plan, progress: bool) -> Result<Report, String> {
    let plan = Arc::new(plan);
    let threads = plan.threads;
    let start = Instant::now();
    let tl = Timeline {
        start,
        warmup_end: start + plan.warmup,
        end: start + plan.warmup + plan.duration,
    };
    let counters: Vec<Arc<Progress>> = (0..threads).map(|_| Arc::default()).collect();
    let mut handles = Vec::with_capacity(threads);
    for (i, counter) in counters.iter().enumerate() {
        // Round-robin so that connection i's schedule offset stays global.
        let conns: Vec<usize> = (i..plan.connections).step_by(threads).collect();
        // Each thread owns its sessions (`threads` <= sessions: none idle).
        let sessions = plan.sessions.map(|n| session::share(n, threads, i));
        let placement = match &plan.cpus {
            Some(cpus) => Placement::Fixed(cpus[i % cpus.len()]),
            None => Placement::Unbound,
        };
        let plan = plan.clone();
        let counter = counter.clone();
        let handle = LocalExecutorBuilder::new(placement)
            .name(&format!("loadgen-{i}"))
            // Small locked-memory limit on CI machines; we do little file I/O.
            .io_memory(1 << 20)
            .spawn(move || worker::thread_main(plan, tl, conns, sessions, counter))
            .map_err(|e| format!("cannot start worker thread {i}: {e}"))?;
        handles.push(handle);
    }

    if progress {
        print_progress(&tl, &counters);
    }

    let mut total = ThreadStats::default();
    for (i, h) in handles.into_iter().enumerate() {
        let st = h
            .join()
            .map_err(|e| format!("worker thread {i} failed: {e}"))?;
        total.merge(&st);
    }
    let mut report = Report::new(
        total,
        plan.duration,
        plan.rate,
        threads,
        plan.connections,
        plan.streams,
    );
    report.backend_header = plan.backend_header.clone();
    Ok(report)
}

/// One line per second on stderr until the end of the run.
fn print_progress(tl: &Timeline, counters: &[Arc<Progress>]) {
    let mut last = (0u64, tl.start);
    let mut tick = tl.start + Duration::from_secs(1);
    while tick <= tl.end {
        std::thread::sleep(tick.saturating_duration_since(Instant::now()));
        let now = Instant::now();
        let (done, errors) = counters
            .iter()
            .map(|c| c.load())
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        let rate = (done - last.0) as f64 / now.duration_since(last.1).as_secs_f64();
        let phase = if now < tl.warmup_end {
            " (warm-up)"
        } else {
            ""
        };
        eprintln!(
            "[{:>4}s] {:>10.0} req/s  {:>10} done  {:>6} errors{}",
            (tick - tl.start).as_secs(),
            rate,
            done,
            errors,
            phase
        );
        last = (done, now);
        tick += Duration::from_secs(1);
    }
}
