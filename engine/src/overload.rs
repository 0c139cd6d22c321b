//! Envoy's overload manager as pure logic: resource monitors' pressures (0 = idle, 1 = at the configured maximum) turned into each action's state by its triggers (threshold: on or off; scaled: a level between 0 and 1), the timeouts a scaled `reduce_timeouts` leaves, and the memory classes `reset_high_memory_stream` sorts streams into and resets.

use std::time::Duration;

/// `overload_manager`.
#[derive(Debug, Clone, PartialEq)]
pub struct OverloadConfig {
    /// `refresh_interval` (Envoy's default 1 s): how often the monitors
    /// are read and the actions' states recomputed.
    pub refresh_interval: Duration,
    /// `envoy.resource_monitors.fixed_heap`: `max_heap_size_bytes`.
    pub max_heap_bytes: Option<u64>,
    /// `envoy.resource_monitors.global_downstream_max_connections`:
    /// `max_active_downstream_connections`. Besides its pressure, a
    /// connection past it is closed as it is accepted (as Envoy's).
    pub max_downstream_connections: Option<u64>,
    /// `buffer_factory_config.minimum_account_to_track_power_of_two`
    /// (10–56): streams' buffered body bytes are sorted into
    /// [`MEMORY_CLASSES`] from there on, for `reset_high_memory_stream`;
    /// `None`: nothing is tracked (Envoy's default).
    pub account_power: Option<u32>,
    pub actions: Vec<Action>,
}

impl OverloadConfig {
    /// How `reduce_timeouts` scales `timer`, if it lists it.
    pub fn scaled_timer(&self, timer: Timer) -> Option<&ScaledTimer> {
        self.actions
            .iter()
            .find_map(|a| match &a.kind {
                ActionKind::ReduceTimeouts(t) => Some(t),
                _ => None,
            })?
            .iter()
            .find(|t| t.timer == timer)
    }
}

/// A resource monitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Monitor {
    FixedHeap,
    DownstreamConnections,
}

impl Monitor {
    /// Envoy's name, as triggers name it.
    pub fn name(self) -> &'static str {
        match self {
            Monitor::FixedHeap => "envoy.resource_monitors.fixed_heap",
            Monitor::DownstreamConnections => {
                "envoy.resource_monitors.global_downstream_max_connections"
            }
        }
    }
}

/// When a trigger fires.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Trigger {
    /// On (1) at or above `value`, else off (0).
    Threshold { value: f64 },
    /// 0 below `scaling`, 1 at or above `saturation`, linear between.
    Scaled { scaling: f64, saturation: f64 },
}

impl Trigger {
    /// The trigger's level for `pressure`.
    pub fn level(self, pressure: f64) -> f64 {
        match self {
            Trigger::Threshold { value } => f64::from(u8::from(pressure >= value)),
            Trigger::Scaled {
                scaling,
                saturation,
            } => {
                if pressure >= saturation {
                    1.0
                } else if pressure <= scaling || saturation <= scaling {
                    0.0
                } else {
                    (pressure - scaling) / (saturation - scaling)
                }
            }
        }
    }
}

/// An overload action and what triggers it.
#[derive(Debug, Clone, PartialEq)]
pub struct Action {
    pub kind: ActionKind,
    pub triggers: Vec<(Monitor, Trigger)>,
}

impl Action {
    /// Its state: the highest level of its triggers (Envoy's).
    pub fn state(&self, pressure: impl Fn(Monitor) -> f64) -> f64 {
        self.triggers
            .iter()
            .map(|(m, t)| t.level(pressure(*m)))
            .fold(0.0, f64::max)
    }
}

/// The actions we take.
#[derive(Debug, Clone, PartialEq)]
pub enum ActionKind {
    /// `envoy.overload_actions.stop_accepting_requests`: new requests are
    /// answered 503 (`x-envoy-overloaded`).
    StopAcceptingRequests,
    /// `envoy.overload_actions.stop_accepting_connections`: the listeners
    /// stop accepting; connections wait in the kernel's backlog.
    StopAcceptingConnections,
    /// `envoy.overload_actions.reject_incoming_connections`: connections
    /// are accepted and closed at once.
    RejectIncomingConnections,
    /// `envoy.overload_actions.disable_http_keepalive`: responses end
    /// their connection (HTTP/1.1 `Connection: close`, HTTP/2 GOAWAY), for
    /// that share of requests when scaled.
    DisableHttpKeepalive,
    /// `envoy.overload_actions.reduce_timeouts`: the listed timers shrink
    /// towards their minimum as the action's level grows.
    ReduceTimeouts(Vec<ScaledTimer>),
    /// `envoy.overload_actions.shrink_heap`: the allocator gives freed
    /// memory back to the system (glibc's `malloc_trim`).
    ShrinkHeap,
    /// `envoy.overload_actions.reset_high_memory_stream`: each time its
    /// level changes, each data shard resets the streams in the memory
    /// classes [`classes_to_reset`] names, the largest first, at most
    /// [`MAX_RESETS_PER_PASS`] (needs `buffer_factory_config`).
    ResetHighMemoryStream,
}

impl ActionKind {
    /// Envoy's name.
    pub fn name(&self) -> &'static str {
        match self {
            ActionKind::StopAcceptingRequests => "envoy.overload_actions.stop_accepting_requests",
            ActionKind::StopAcceptingConnections => {
                "envoy.overload_actions.stop_accepting_connections"
            }
            ActionKind::RejectIncomingConnections => {
                "envoy.overload_actions.reject_incoming_connections"
            }
            ActionKind::DisableHttpKeepalive => "envoy.overload_actions.disable_http_keepalive",
            ActionKind::ReduceTimeouts(_) => "envoy.overload_actions.reduce_timeouts",
            ActionKind::ShrinkHeap => "envoy.overload_actions.shrink_heap",
            ActionKind::ResetHighMemoryStream => "envoy.overload_actions.reset_high_memory_stream",
        }
    }
}

/// A timer `reduce_timeouts` scales.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timer {
    /// `HTTP_DOWNSTREAM_CONNECTION_IDLE`: the connection manager's
    /// `idle_timeout`.
    ConnectionIdle,
    /// `HTTP_DOWNSTREAM_STREAM_IDLE`: `stream_idle_timeout`.
    StreamIdle,
}

/// How far a timer may shrink.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Floor {
    /// `min_timeout`.
    Timeout(Duration),
    /// `min_scale`: a share of the configured timeout (0–1).
    Scale(f64),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaledTimer {
    pub timer: Timer,
    pub floor: Floor,
}

impl ScaledTimer {
    /// `configured` shrunk for an action at `level` (0: as configured; 1:
    /// the floor; linear between, as Envoy's).
    pub fn scale(&self, configured: Duration, level: f64) -> Duration {
        let floor = match self.floor {
            Floor::Timeout(d) => d.min(configured),
            Floor::Scale(s) => configured.mul_f64(s.clamp(0.0, 1.0)),
        };
        let level = level.clamp(0.0, 1.0);
        floor + (configured - floor).mul_f64(1.0 - level)
    }
}

/// Envoy's default `refresh_interval`.
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(1);

/// How many memory classes tracked streams fall in (Envoy's
/// `BufferMemoryAccountImpl::NUM_MEMORY_CLASSES_`).
pub const MEMORY_CLASSES: usize = 8;

/// The most streams one `reset_high_memory_stream` pass resets on a data
/// shard (Envoy: per worker and invocation), so that a pass stays short.
pub const MAX_RESETS_PER_PASS: usize = 50;

/// The valid `minimum_account_to_track_power_of_two` (Envoy's validation).
pub const ACCOUNT_POWERS: std::ops::RangeInclusive<u32> = 10..=56;

/// The memory class of a stream buffering `bytes`, under
/// `minimum_account_to_track_power_of_two` = `power`: `None` below the
/// tracked minimum, else `0..MEMORY_CLASSES`.
///
/// As Envoy's code sorts accounts (the balance shifted right by
/// `power - 1`, then its bit width less one, capped at the last class):
/// class `k` holds `[2^(power-1+k), 2^(power+k))` and the last one all
/// from `2^(power+6)` up. Envoy's documentation puts every class one
/// power of two higher (`[2^power, 2^(power+1))` first); its code, and its
/// own tests that pass `bit_width(4096)` (13) to track 4 KiB streams, are
/// what it does.
pub fn memory_class(bytes: u64, power: u32) -> Option<usize> {
    let shifted = bytes >> power.saturating_sub(1).min(63);
    if shifted == 0 {
        return None;
    }
    let class = (u64::BITS - 1 - shifted.leading_zeros()) as usize;
    Some(class.min(MEMORY_CLASSES - 1))
}

/// How many memory classes, counted from the largest, a
/// `reset_high_memory_stream` pass at `level` resets: Envoy's
/// `floor(level * 8) + 1`, at most all 8 (so the largest class as soon as
/// the action scales, every tracked stream once it saturates).
///
/// At level 0, none. (Envoy's worker runs its reset whenever the action's
/// state changes, the change back to 0 included, where the formula still
/// names the largest class; its documentation says nothing is reset below
/// the trigger, which is what we do.)
pub fn classes_to_reset(level: f64) -> usize {
    if level.is_nan() || level <= 0.0 {
        return 0;
    }
    let n = (level.min(1.0) * MEMORY_CLASSES as f64).floor() as usize + 1;
    n.min(MEMORY_CLASSES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threshold_and_scaled_triggers() {
        let t = Trigger::Threshold { value: 0.9 };
        assert_eq!(t.level(0.89), 0.0);
        assert_eq!(t.level(0.9), 1.0);
        let s = Trigger::Scaled {
            scaling: 0.5,
            saturation: 0.9,
        };
        assert_eq!(s.level(0.4), 0.0);
        assert_eq!(s.level(0.5), 0.0);
        assert!((s.level(0.7) - 0.5).abs() < 1e-9);
        assert_eq!(s.level(0.95), 1.0);
    }

    #[test]
    fn an_action_takes_its_highest_trigger() {
        let a = Action {
            kind: ActionKind::StopAcceptingRequests,
            triggers: vec![
                (Monitor::FixedHeap, Trigger::Threshold { value: 0.95 }),
                (
                    Monitor::DownstreamConnections,
                    Trigger::Scaled {
                        scaling: 0.0,
                        saturation: 1.0,
                    },
                ),
            ],
        };
        let pressure = |heap, conns| {
            move |m| match m {
                Monitor::FixedHeap => heap,
                Monitor::DownstreamConnections => conns,
            }
        };
        assert_eq!(a.state(pressure(0.5, 0.25)), 0.25);
        assert_eq!(a.state(pressure(0.96, 0.25)), 1.0);
    }

    #[test]
    fn memory_classes_are_envoy_s_power_of_two_buckets() {
        // Envoy's integration tests track from 4 KiB with bit_width(4096)
        // = 13: streams of 4, 8 and 16 KiB fall in classes 0, 1 and 2.
        assert_eq!(memory_class(4095, 13), None);
        assert_eq!(memory_class(4096, 13), Some(0));
        assert_eq!(memory_class(8191, 13), Some(0));
        assert_eq!(memory_class(8192, 13), Some(1));
        assert_eq!(memory_class(16 * 1024, 13), Some(2));
        // Its unit tests: bit_width(1 MiB) = 21 tracks from 1 MiB, each
        // doubling a class up, 128 MiB and beyond the last.
        let mib = 1u64 << 20;
        assert_eq!(memory_class(mib - 1, 21), None);
        assert_eq!(memory_class(mib, 21), Some(0));
        assert_eq!(memory_class(2 * mib - 1, 21), Some(0));
        for k in 0..7 {
            assert_eq!(memory_class(mib << k, 21), Some(k));
        }
        assert_eq!(memory_class(128 * mib, 21), Some(7));
        assert_eq!(memory_class(u64::MAX, 21), Some(7));
        // The extremes of the valid powers.
        assert_eq!(memory_class(511, 10), None);
        assert_eq!(memory_class(512, 10), Some(0));
        assert_eq!(memory_class(1 << 62, 56), Some(7));
        assert_eq!(memory_class((1 << 55) - 1, 56), None);
    }

    #[test]
    fn a_level_resets_the_top_classes_as_envoy_s_floor_plus_one() {
        assert_eq!(classes_to_reset(0.0), 0);
        assert_eq!(classes_to_reset(-1.0), 0);
        assert_eq!(classes_to_reset(f64::NAN), 0);
        // Just above the trigger: the largest class alone.
        assert_eq!(classes_to_reset(0.01), 1);
        assert_eq!(classes_to_reset(0.124), 1);
        assert_eq!(classes_to_reset(0.125), 2);
        // Envoy's integration test: a scaled trigger at 0.90–0.98 and a
        // pressure of 0.95 (62 %) resets classes 7 to 2; 0.96 (75 %) down
        // to class 1. Its unit test: 0.85 resets all but class 0.
        assert_eq!(classes_to_reset(0.625), 6);
        assert_eq!(classes_to_reset(0.75), 7);
        assert_eq!(classes_to_reset(0.85), 7);
        assert_eq!(classes_to_reset(0.999), 8);
        assert_eq!(classes_to_reset(1.0), 8);
        assert_eq!(classes_to_reset(7.0), 8);
        // Each eighth of the level takes one class more.
        for i in 1..8 {
            assert_eq!(classes_to_reset(i as f64 / 8.0), i + 1);
        }
    }

    #[test]
    fn reduced_timeouts_go_linearly_to_their_floor() {
        let idle = Duration::from_secs(100);
        let by_min = ScaledTimer {
            timer: Timer::ConnectionIdle,
            floor: Floor::Timeout(Duration::from_secs(10)),
        };
        assert_eq!(by_min.scale(idle, 0.0), idle);
        assert_eq!(by_min.scale(idle, 0.5), Duration::from_secs(55));
        assert_eq!(by_min.scale(idle, 1.0), Duration::from_secs(10));
        let by_scale = ScaledTimer {
            timer: Timer::ConnectionIdle,
            floor: Floor::Scale(0.2),
        };
        assert_eq!(by_scale.scale(idle, 1.0), Duration::from_secs(20));
        // A floor above the timeout leaves it as configured.
        let high = ScaledTimer {
            timer: Timer::StreamIdle,
            floor: Floor::Timeout(Duration::from_secs(500)),
        };
        assert_eq!(high.scale(idle, 1.0), idle);
    }
}
