//! The overload manager's sampler: a thread that reads the resource monitors every `refresh_interval` (the process's resident memory for `fixed_heap`, the open downstream connections for `global_downstream_max_connections`) and sets each action's level for the data shards; it sleeps while no `overload_manager` is configured.

use std::sync::{Arc, Condvar, Mutex};

use engine::overload::{Monitor, OverloadConfig};
use shards::overload::{Act, OverloadState};

#[derive(Default)]
struct Wanted {
    config: Option<Arc<OverloadConfig>>,
    stop: bool,
}

/// The sampler's thread; stopped (and joined) when dropped.
pub(crate) struct Sampler {
    wanted: Arc<(Mutex<Wanted>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    pub(crate) fn start(state: Arc<OverloadState>) -> std::io::Result<Self> {
        let wanted = Arc::new((Mutex::new(Wanted::default()), Condvar::new()));
        let w = Arc::clone(&wanted);
        let thread = std::thread::Builder::new()
            .name("overload".into())
            .spawn(move || run(&w, &state))?;
        Ok(Self {
            wanted,
            thread: Some(thread),
        })
    }

    /// The configuration of the snapshot being served (`None`: every action
    /// off, the thread asleep).
    pub(crate) fn configure(&self, config: Option<Arc<OverloadConfig>>) {
        let (lock, cv) = &*self.wanted;
        let mut w = lock.lock().unwrap_or_else(|e| e.into_inner());
        if w.config.as_ref().map(Arc::as_ptr) != config.as_ref().map(Arc::as_ptr) {
            w.config = config;
            cv.notify_all();
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        let (lock, cv) = &*self.wanted;
        lock.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
        cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(wanted: &(Mutex<Wanted>, Condvar), state: &OverloadState) {
    let (lock, cv) = wanted;
    let mut w = lock.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if w.stop {
            return;
        }
        let Some(config) = w.config.clone() else {
            clear(state);
            w = cv.wait(w).unwrap_or_else(|e| e.into_inner());
            continue;
        };
        drop(w);
        sample(&config, state);
        w = lock.lock().unwrap_or_else(|e| e.into_inner());
        if !w.stop {
            w = cv
                .wait_timeout(w, config.refresh_interval)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// Every action off.
fn clear(state: &OverloadState) {
    for a in Act::ALL {
        state.set(a, 0.0);
    }
    state.set_pressures(0.0, 0.0);
}

/// One refresh: the monitors' pressures, then each action's level.
fn sample(config: &OverloadConfig, state: &OverloadState) {
    let heap = config
        .max_heap_bytes
        .map_or(0.0, |max| resident_bytes() as f64 / max as f64);
    let connections = config.max_downstream_connections.map_or(0.0, |max| {
        state.downstream_connections() as f64 / max as f64
    });
    state.set_pressures(heap, connections);
    let pressure = |m: Monitor| match m {
        Monitor::FixedHeap => heap,
        Monitor::DownstreamConnections => connections,
    };
    for a in Act::ALL {
        let level = config
            .actions
            .iter()
            .filter(|action| Act::of(&action.kind) == a)
            .map(|action| action.state(pressure))
            .fold(0.0, f64::max);
        state.set(a, level);
    }
    if state.level(Act::ShrinkHeap) >= 1.0 {
        // SAFETY: glibc's malloc_trim only returns free pages to the
        // system; any thread may call it at any time.
        unsafe { libc::malloc_trim(0) };
    }
}

/// The process's resident memory, from `/proc/self/statm` (0 if it
/// cannot be read).
fn resident_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(0) as u64;
    pages * page
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::overload::{Action, ActionKind, Trigger};
    use std::time::Duration;

    /// How long a test waits for a refresh.
    const PATIENCE: Duration = Duration::from_secs(5);

    fn wait_for(what: &str, cond: impl Fn() -> bool) {
        let until = std::time::Instant::now() + PATIENCE;
        while !cond() {
            assert!(std::time::Instant::now() < until, "{what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn levels_follow_the_monitors_and_clear_when_unconfigured() {
        let state = OverloadState::new();
        let sampler = Sampler::start(Arc::clone(&state)).expect("thread");
        let config = OverloadConfig {
            refresh_interval: Duration::from_millis(10),
            max_heap_bytes: Some(1 << 50),
            max_downstream_connections: Some(4),
            account_power: None,
            actions: vec![
                Action {
                    kind: ActionKind::StopAcceptingConnections,
                    triggers: vec![(
                        Monitor::DownstreamConnections,
                        Trigger::Threshold { value: 0.75 },
                    )],
                },
                Action {
                    kind: ActionKind::DisableHttpKeepalive,
                    triggers: vec![(
                        Monitor::DownstreamConnections,
                        Trigger::Scaled {
                            scaling: 0.0,
                            saturation: 1.0,
                        },
                    )],
                },
                Action {
                    kind: ActionKind::StopAcceptingRequests,
                    triggers: vec![(Monitor::FixedHeap, Trigger::Threshold { value: 0.5 })],
                },
            ],
        };
        sampler.configure(Some(Arc::new(config)));
        let open: Vec<_> = (0..2).map(|_| state.connection_opened()).collect();
        wait_for("keep-alive at half", || {
            (state.level(Act::DisableHttpKeepalive) - 0.5).abs() < 1e-6
        });
        assert_eq!(state.level(Act::StopAcceptingConnections), 0.0);
        let more: Vec<_> = (0..1).map(|_| state.connection_opened()).collect();
        wait_for("stop accepting at 3 of 4", || {
            state.level(Act::StopAcceptingConnections) == 1.0
        });
        // A petabyte heap limit: no heap pressure to speak of.
        assert_eq!(state.level(Act::StopAcceptingRequests), 0.0);
        assert!(state.pressures().0 < 0.01);
        drop((open, more));
        sampler.configure(None);
        wait_for("cleared", || {
            state.level(Act::StopAcceptingConnections) == 0.0
        });
        drop(sampler);
    }
}
