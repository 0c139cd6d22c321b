//! What the admin server shows about xDS: a copy of the client's state that
//! the control loop refreshes after every event (the admin server never
//! reaches into the client itself).

use std::time::SystemTime;

/// xDS state for `/config_dump` and `/stats`.
#[derive(Debug, Clone, Default)]
pub struct XdsView {
    /// Whether an ADS stream is up.
    pub connected: bool,
    /// The ADS server address of the current (or last) stream.
    pub server: Option<String>,
    /// ADS streams that ended (for any reason) since start.
    pub stream_restarts: u64,
    /// One entry per resource type, in subscription order (clusters,
    /// endpoints, listeners, routes).
    pub types: Vec<XdsTypeView>,
    /// Listeners and clusters received but not serving yet (warming).
    pub warming_listeners: Vec<String>,
    pub warming_clusters: Vec<String>,
}

#[derive(Debug, Clone, Default)]
pub struct XdsTypeView {
    /// `clusters`, `endpoints`, `listeners` or `routes`.
    pub name: &'static str,
    pub type_url: &'static str,
    /// `ads`, `file:PATH`, or empty when this type is not configured.
    pub source: String,
    /// Last accepted `version_info`.
    pub version: String,
    pub last_update: Option<SystemTime>,
    pub last_error: Option<XdsError>,
    pub accepted: u64,
    pub rejected: u64,
    /// Subscribed names (RDS and EDS).
    pub subscribed: Vec<String>,
    /// Names of the resources held.
    pub resources: Vec<String>,
}

/// The last rejected update of a type.
#[derive(Debug, Clone)]
pub struct XdsError {
    /// The rejected `version_info`.
    pub version: String,
    pub message: String,
    pub at: SystemTime,
}
