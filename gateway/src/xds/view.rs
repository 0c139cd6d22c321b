//! The xDS client's state as the admin server shows it ([`XdsView`]).

use std::net::SocketAddr;
use std::time::{Instant, SystemTime};

use engine::ConfigSource;
use xds::client::{ResourceType, XdsClient};

use crate::admin::{XdsError, XdsTypeView, XdsView};

/// What the control loop knows about the ADS stream.
pub struct StreamState {
    pub connected: bool,
    pub server: Option<SocketAddr>,
    pub restarts: u64,
    pub connect_failures: u64,
}

/// Builds the admin's copy; `epoch` maps the client's monotonic times to
/// wall-clock ones.
pub fn xds_view(
    c: &XdsClient,
    stream: &StreamState,
    initialized: bool,
    epoch: (Instant, SystemTime),
) -> XdsView {
    let wall = |t: Instant| {
        let (mono, wall) = epoch;
        match t.checked_duration_since(mono) {
            Some(d) => wall + d,
            None => wall - mono.duration_since(t),
        }
    };
    let types = ResourceType::ALL
        .into_iter()
        .map(|kind| {
            let st = c.status(kind);
            let source = match kind {
                ResourceType::Listener | ResourceType::Cluster => match c.source(kind) {
                    Some(ConfigSource::Ads { .. }) => "ads".to_string(),
                    Some(ConfigSource::Path(p)) => format!("file:{}", p.display()),
                    None => String::new(),
                },
                _ if c.subscribed(kind).next().is_some() => "ads".to_string(),
                _ => String::new(),
            };
            let resources: Vec<String> = match kind {
                ResourceType::Listener => c.listeners().keys().cloned().collect(),
                ResourceType::Cluster => c.clusters().keys().cloned().collect(),
                ResourceType::Route => c.routes().keys().cloned().collect(),
                ResourceType::Endpoint => c.endpoints().keys().cloned().collect(),
                ResourceType::Secret => c.secrets().keys().cloned().collect(),
            };
            XdsTypeView {
                name: kind.name(),
                type_url: kind.type_url(),
                source,
                version: st.version.clone(),
                last_update: st.last_update.map(wall),
                last_error: st.last_error.as_ref().map(|e| XdsError {
                    version: e.version.clone(),
                    message: e.message.clone(),
                    at: wall(e.at),
                }),
                accepted: st.accepted,
                rejected: st.rejected,
                unknown_removals: st.unknown_removals,
                subscribed: c.subscribed(kind).map(str::to_owned).collect(),
                resources,
            }
        })
        .collect();
    let (warming_listeners, warming_clusters) = c.warming();
    XdsView {
        connected: stream.connected,
        server: stream.server.map(|s| s.to_string()),
        stream_restarts: stream.restarts,
        connect_failures: stream.connect_failures,
        types,
        warming_listeners: warming_listeners.into_iter().map(str::to_owned).collect(),
        warming_clusters: warming_clusters.into_iter().map(str::to_owned).collect(),
        initialized,
    }
}
