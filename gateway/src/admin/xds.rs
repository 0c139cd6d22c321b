//! What the admin server shows about xDS: a copy of the client's state that
//! the control loop refreshes after every event (the admin server never
//! reaches into the client itself).

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::exposition::{escape, metric};

/// xDS state for `/config_dump` and `/stats`.
#[derive(Debug, Clone, Default)]
pub struct XdsView {
    /// Whether an ADS stream is up.
    pub connected: bool,
    /// The ADS server address of the current (or last) stream.
    pub server: Option<String>,
    /// ADS streams that ended (for any reason) after opening.
    pub stream_restarts: u64,
    /// Attempts to open an ADS stream that failed (connect, handshake,
    /// refused stream).
    pub connect_failures: u64,
    /// One entry per resource type, in subscription order (clusters,
    /// endpoints, listeners, routes).
    pub types: Vec<XdsTypeView>,
    /// Listeners and clusters received but not serving yet (warming).
    pub warming_listeners: Vec<String>,
    pub warming_clusters: Vec<String>,
    /// First LDS/CDS fetch done or timed out (`/ready` waits for it).
    pub initialized: bool,
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
    /// Delta xDS: removals of names that were not held (ignored).
    pub unknown_removals: u64,
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

/// The `"xds"` object of `/config_dump`; `error_state` follows Envoy's
/// `UpdateFailureState` (`version_info`, `details`, `last_update_attempt`).
pub(super) fn dump(v: &XdsView) -> Value {
    let resources: Vec<Value> = v
        .types
        .iter()
        .map(|t| {
            let error_state = t.last_error.as_ref().map(|e| {
                json!({
                    "version_info": e.version,
                    "details": e.message,
                    "last_update_attempt": rfc3339(e.at),
                })
            });
            json!({
                "type": t.name,
                "type_url": t.type_url,
                "source": t.source,
                "version_info": t.version,
                "last_updated": t.last_update.map(rfc3339),
                "accepted": t.accepted,
                "rejected": t.rejected,
                "unknown_removals": t.unknown_removals,
                "subscribed": t.subscribed,
                "names": t.resources,
                "error_state": error_state,
            })
        })
        .collect();
    json!({
        "connected": v.connected,
        "initialized": v.initialized,
        "server": v.server,
        "stream_restarts": v.stream_restarts,
        "connect_failures": v.connect_failures,
        "warming": {
            "listeners": v.warming_listeners,
            "clusters": v.warming_clusters,
        },
        "resources": resources,
    })
}

/// The `gateway_xds_*` metrics of `/stats`.
pub(super) fn prometheus(v: &XdsView, out: &mut String) {
    metric(
        out,
        "gateway_xds_connected",
        "gauge",
        "Whether an ADS stream is up (0/1).",
    );
    let _ = writeln!(out, "gateway_xds_connected {}", u8::from(v.connected));
    metric(
        out,
        "gateway_xds_stream_restarts_total",
        "counter",
        "ADS streams that ended after opening.",
    );
    let _ = writeln!(
        out,
        "gateway_xds_stream_restarts_total {}",
        v.stream_restarts
    );
    metric(
        out,
        "gateway_xds_connect_failures_total",
        "counter",
        "Attempts to open an ADS stream that failed.",
    );
    let _ = writeln!(
        out,
        "gateway_xds_connect_failures_total {}",
        v.connect_failures
    );
    type Count = fn(&XdsTypeView) -> u64;
    let per_type: [(&str, &str, Count); 3] = [
        (
            "gateway_xds_update_accepted_total",
            "xDS updates accepted (ACKed) per resource type.",
            |t| t.accepted,
        ),
        (
            "gateway_xds_update_rejected_total",
            "xDS updates rejected (NACKed) per resource type.",
            |t| t.rejected,
        ),
        (
            "gateway_xds_unknown_removals_total",
            "Delta xDS removals of resources that were not held (ignored), per resource type.",
            |t| t.unknown_removals,
        ),
    ];
    for (name, help, f) in per_type {
        metric(out, name, "counter", help);
        for t in &v.types {
            let _ = writeln!(out, "{name}{{type=\"{}\"}} {}", escape(t.name), f(t));
        }
    }
    metric(
        out,
        "gateway_xds_warming",
        "gauge",
        "Resources received but not serving yet, by kind.",
    );
    let _ = writeln!(
        out,
        "gateway_xds_warming{{kind=\"listeners\"}} {}",
        v.warming_listeners.len()
    );
    let _ = writeln!(
        out,
        "gateway_xds_warming{{kind=\"clusters\"}} {}",
        v.warming_clusters.len()
    );
}

/// RFC 3339 in UTC with milliseconds: `2026-11-22T13:45:01.123Z`.
pub(super) fn rfc3339(t: SystemTime) -> String {
    let ms: i64 = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        // Before the epoch: round down to the millisecond.
        Err(e) => {
            let d = e.duration();
            let whole = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
            if d.subsec_nanos() % 1_000_000 == 0 {
                -whole
            } else {
                -whole - 1
            }
        }
    };
    let secs = ms.div_euclid(1000);
    let milli = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{milli:03}Z",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

/// (year, month, day) of a count of days since 1970-01-01, proleptic
/// Gregorian (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March first
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(secs: u64, ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(ms)
    }

    #[test]
    fn rfc3339_known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(at(951_782_400, 0)), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339(at(951_868_799, 999)), "2000-02-29T23:59:59.999Z");
        assert_eq!(rfc3339(at(951_868_800, 0)), "2000-03-01T00:00:00.000Z");
        assert_eq!(rfc3339(at(1_795_355_101, 123)), "2026-11-22T13:45:01.123Z");
        assert_eq!(rfc3339(at(1_767_225_599, 0)), "2025-12-31T23:59:59.000Z");
        assert_eq!(rfc3339(at(4_107_542_400, 0)), "2100-03-01T00:00:00.000Z");
        // Sub-millisecond precision is truncated.
        assert_eq!(
            rfc3339(at(0, 5) + Duration::from_micros(999)),
            "1970-01-01T00:00:00.005Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH - Duration::from_millis(1)),
            "1969-12-31T23:59:59.999Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH - Duration::from_micros(1)),
            "1969-12-31T23:59:59.999Z"
        );
    }

    #[test]
    fn civil_from_days_round_trips_every_day_of_four_centuries() {
        // Walk day by day from 1900-01-01 and check the calendar steps.
        let mut day = -25_567; // 1900-01-01
        let (mut y, mut m, mut d) = (1900i64, 1u32, 1u32);
        while y < 2300 {
            assert_eq!(civil_from_days(day), (y, m, d), "day {day}");
            let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
            let len = match m {
                2 if leap => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            d += 1;
            if d > len {
                d = 1;
                m += 1;
                if m > 12 {
                    m = 1;
                    y += 1;
                }
            }
            day += 1;
        }
    }

    fn view() -> XdsView {
        XdsView {
            connected: true,
            server: Some("127.0.0.1:18000".into()),
            stream_restarts: 2,
            connect_failures: 5,
            types: vec![
                XdsTypeView {
                    name: "clusters",
                    type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster",
                    source: "ads".into(),
                    version: "7".into(),
                    last_update: Some(at(1_795_355_101, 123)),
                    last_error: Some(XdsError {
                        version: "8".into(),
                        message: "clusters[0].lb_policy: CLUSTER_PROVIDED is not supported".into(),
                        at: at(1_795_355_102, 0),
                    }),
                    accepted: 3,
                    rejected: 1,
                    unknown_removals: 0,
                    subscribed: vec![],
                    resources: vec!["backend".into()],
                },
                XdsTypeView {
                    name: "routes",
                    type_url: "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
                    source: String::new(),
                    subscribed: vec!["local_route".into()],
                    ..XdsTypeView::default()
                },
            ],
            warming_listeners: vec!["ingress".into()],
            warming_clusters: vec![],
            initialized: true,
        }
    }

    #[test]
    fn dump_renders_state_and_error_state() {
        let v = dump(&view());
        assert_eq!(
            v,
            json!({
                "connected": true,
                "initialized": true,
                "server": "127.0.0.1:18000",
                "stream_restarts": 2,
                "connect_failures": 5,
                "warming": { "listeners": ["ingress"], "clusters": [] },
                "resources": [
                    {
                        "type": "clusters",
                        "type_url": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
                        "source": "ads",
                        "version_info": "7",
                        "last_updated": "2026-11-22T13:45:01.123Z",
                        "accepted": 3,
                        "rejected": 1,
                        "unknown_removals": 0,
                        "subscribed": [],
                        "names": ["backend"],
                        "error_state": {
                            "version_info": "8",
                            "details": "clusters[0].lb_policy: CLUSTER_PROVIDED is not supported",
                            "last_update_attempt": "2026-11-22T13:45:02.000Z",
                        },
                    },
                    {
                        "type": "routes",
                        "type_url": "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
                        "source": "",
                        "version_info": "",
                        "last_updated": null,
                        "accepted": 0,
                        "rejected": 0,
                        "unknown_removals": 0,
                        "subscribed": ["local_route"],
                        "names": [],
                        "error_state": null,
                    },
                ],
            })
        );
        let disconnected = dump(&XdsView::default());
        assert_eq!(disconnected["connected"], json!(false));
        assert_eq!(disconnected["initialized"], json!(false));
        assert_eq!(disconnected["server"], Value::Null);
        assert_eq!(disconnected["resources"], json!([]));
    }

    #[test]
    fn prometheus_lines() {
        let mut out = String::new();
        prometheus(&view(), &mut out);
        let expected = "\
# HELP gateway_xds_connected Whether an ADS stream is up (0/1).
# TYPE gateway_xds_connected gauge
gateway_xds_connected 1
# HELP gateway_xds_stream_restarts_total ADS streams that ended after opening.
# TYPE gateway_xds_stream_restarts_total counter
gateway_xds_stream_restarts_total 2
# HELP gateway_xds_connect_failures_total Attempts to open an ADS stream that failed.
# TYPE gateway_xds_connect_failures_total counter
gateway_xds_connect_failures_total 5
# HELP gateway_xds_update_accepted_total xDS updates accepted (ACKed) per resource type.
# TYPE gateway_xds_update_accepted_total counter
gateway_xds_update_accepted_total{type=\"clusters\"} 3
gateway_xds_update_accepted_total{type=\"routes\"} 0
# HELP gateway_xds_update_rejected_total xDS updates rejected (NACKed) per resource type.
# TYPE gateway_xds_update_rejected_total counter
gateway_xds_update_rejected_total{type=\"clusters\"} 1
gateway_xds_update_rejected_total{type=\"routes\"} 0
# HELP gateway_xds_unknown_removals_total Delta xDS removals of resources that were not held (ignored), per resource type.
# TYPE gateway_xds_unknown_removals_total counter
gateway_xds_unknown_removals_total{type=\"clusters\"} 0
gateway_xds_unknown_removals_total{type=\"routes\"} 0
# HELP gateway_xds_warming Resources received but not serving yet, by kind.
# TYPE gateway_xds_warming gauge
gateway_xds_warming{kind=\"listeners\"} 1
gateway_xds_warming{kind=\"clusters\"} 0
";
        assert_eq!(out, expected);
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
