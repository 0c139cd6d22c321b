//! Envoy's overload manager as pure logic: resource monitors' pressures (0 = idle, 1 = at the configured maximum) turned into each action's state by its triggers (threshold: on or off; scaled: a level between 0 and 1), and the timeouts a scaled `reduce_timeouts` leaves.

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
    pub actions: Vec<Action>,
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
