//! Envoy's host health states (`config.core.v3.HealthStatus`) and sets of
//! them.

/// `config.core.v3.HealthStatus`; numeric values are Envoy's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum HealthStatus {
    Unknown = 0,
    Healthy = 1,
    Unhealthy = 2,
    Draining = 3,
    Timeout = 4,
    Degraded = 5,
}

impl HealthStatus {
    pub fn from_i32(v: i32) -> Option<Self> {
        Some(match v {
            0 => Self::Unknown,
            1 => Self::Healthy,
            2 => Self::Unhealthy,
            3 => Self::Draining,
            4 => Self::Timeout,
            5 => Self::Degraded,
            _ => return None,
        })
    }

    /// Whether a load-balancing policy may choose a host in this state
    /// (Envoy: UNKNOWN and HEALTHY are healthy, DEGRADED is degraded).
    pub fn is_routable(self) -> bool {
        matches!(self, Self::Unknown | Self::Healthy | Self::Degraded)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "UNKNOWN",
            Self::Healthy => "HEALTHY",
            Self::Unhealthy => "UNHEALTHY",
            Self::Draining => "DRAINING",
            Self::Timeout => "TIMEOUT",
            Self::Degraded => "DEGRADED",
        }
    }
}

/// A set of [`HealthStatus`] values (`config.core.v3.HealthStatusSet`).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct HealthStatusSet(u8);

impl HealthStatusSet {
    pub const EMPTY: Self = Self(0);
    /// Envoy's default `override_host_status`: UNKNOWN, HEALTHY, DEGRADED.
    pub const DEFAULT_OVERRIDE_HOST_STATUS: Self = Self(
        1 << HealthStatus::Unknown as u8
            | 1 << HealthStatus::Healthy as u8
            | 1 << HealthStatus::Degraded as u8,
    );

    pub fn insert(&mut self, status: HealthStatus) {
        self.0 |= 1 << status as u8;
    }

    pub fn contains(self, status: HealthStatus) -> bool {
        self.0 & (1 << status as u8) != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The members in Envoy's numeric order.
    pub fn iter(self) -> impl Iterator<Item = HealthStatus> {
        (0..6)
            .filter_map(HealthStatus::from_i32)
            .filter(move |s| self.contains(*s))
    }
}

impl FromIterator<HealthStatus> for HealthStatusSet {
    fn from_iter<I: IntoIterator<Item = HealthStatus>>(iter: I) -> Self {
        let mut set = Self::EMPTY;
        for s in iter {
            set.insert(s);
        }
        set
    }
}

impl std::fmt::Debug for HealthStatusSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}
