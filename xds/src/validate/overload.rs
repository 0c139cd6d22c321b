//! The bootstrap's `overload_manager` → `engine::overload::OverloadConfig`: the fixed-heap and global downstream-connections monitors, the actions we take with their threshold or scaled triggers, the buffer accounting `reset_high_memory_stream` needs; anything else refused by name.

use std::collections::HashSet;

use engine::overload::{
    Action, ActionKind, Floor, Monitor, OverloadConfig, ScaledTimer, Timer, Trigger,
    ACCOUNT_POWERS, REFRESH_INTERVAL,
};
use prost::Name;

use super::common::{duration, reject_set};
use crate::decode::{any_type_name, unpack};
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::overload::v3 as pb;
use crate::pb::envoy::extensions::resource_monitors::downstream_connections::v3::DownstreamConnectionsConfig;
use crate::pb::envoy::extensions::resource_monitors::fixed_heap::v3::FixedHeapConfig;

pub fn overload_manager(o: &pb::OverloadManager, path: &Path) -> Result<OverloadConfig> {
    reject_set!(path, o, loadshed_points);
    let refresh_interval = match &o.refresh_interval {
        Some(d) => {
            let d = duration(d, &path.field("refresh_interval"))?;
            if d.is_zero() {
                return Err(Error::invalid(
                    path.field("refresh_interval"),
                    "must be above 0",
                ));
            }
            d
        }
        None => REFRESH_INTERVAL,
    };
    let mut out = OverloadConfig {
        refresh_interval,
        max_heap_bytes: None,
        max_downstream_connections: None,
        account_power: account_power(o, path)?,
        actions: Vec::new(),
    };
    let mpath = path.field("resource_monitors");
    for (i, m) in o.resource_monitors.iter().enumerate() {
        let at = mpath.index(i);
        let Some(pb::resource_monitor::ConfigType::TypedConfig(any)) = &m.config_type else {
            return Err(Error::invalid(at.field("typed_config"), "required"));
        };
        let tpath = at.field("typed_config");
        let name = any_type_name(any, &tpath)?;
        let monitor = if name == FixedHeapConfig::full_name() {
            let (cfg, cpath) = unpack::<FixedHeapConfig>(any, &tpath)?;
            if cfg.max_heap_size_bytes == 0 {
                return Err(Error::invalid(
                    cpath.field("max_heap_size_bytes"),
                    "must be above 0",
                ));
            }
            out.max_heap_bytes = Some(cfg.max_heap_size_bytes);
            Monitor::FixedHeap
        } else if name == DownstreamConnectionsConfig::full_name() {
            let (cfg, cpath) = unpack::<DownstreamConnectionsConfig>(any, &tpath)?;
            let max = u64::try_from(cfg.max_active_downstream_connections)
                .ok()
                .filter(|m| *m > 0)
                .ok_or_else(|| {
                    Error::invalid(
                        cpath.field("max_active_downstream_connections"),
                        "must be above 0",
                    )
                })?;
            out.max_downstream_connections = Some(max);
            Monitor::DownstreamConnections
        } else {
            return Err(Error::unsupported_msg(
                tpath,
                format!(
                    "resource monitor {:?} ({name}) is not supported; only {} and {} are",
                    m.name,
                    FixedHeapConfig::full_name(),
                    DownstreamConnectionsConfig::full_name()
                ),
            ));
        };
        if m.name != monitor.name() {
            return Err(Error::invalid(
                at.field("name"),
                format!(
                    "{:?}: a {} is named {:?} (triggers name it so)",
                    m.name,
                    any_type_name(any, &tpath)?,
                    monitor.name()
                ),
            ));
        }
    }
    let configured: HashSet<&str> = o
        .resource_monitors
        .iter()
        .map(|m| m.name.as_str())
        .collect();
    let apath = path.field("actions");
    let mut seen = HashSet::new();
    for (i, a) in o.actions.iter().enumerate() {
        let at = apath.index(i);
        let kind = action_kind(a, &at)?;
        if !seen.insert(kind.name()) {
            return Err(Error::invalid(
                at.field("name"),
                format!("{} is listed twice", kind.name()),
            ));
        }
        if a.triggers.is_empty() {
            return Err(Error::invalid(
                at.field("triggers"),
                "at least one is required",
            ));
        }
        let mut triggers = Vec::with_capacity(a.triggers.len());
        for (j, t) in a.triggers.iter().enumerate() {
            let tpath = at.field("triggers").index(j);
            if !configured.contains(t.name.as_str()) {
                return Err(Error::invalid(
                    tpath.field("name"),
                    format!("{:?} is not among resource_monitors", t.name),
                ));
            }
            let monitor = if t.name == Monitor::FixedHeap.name() {
                Monitor::FixedHeap
            } else {
                Monitor::DownstreamConnections
            };
            triggers.push((monitor, trigger(t, &tpath)?));
        }
        if kind == ActionKind::ResetHighMemoryStream && out.account_power.is_none() {
            // Envoy refuses it so: without the accounts nothing could be
            // reset.
            return Err(Error::invalid(
                at.field("name"),
                format!("{} requires buffer_factory_config", kind.name()),
            ));
        }
        out.actions.push(Action { kind, triggers });
    }
    Ok(out)
}

/// `buffer_factory_config.minimum_account_to_track_power_of_two`: within
/// Envoy's 10–56 (a config without the field, hence 0, is refused there
/// too).
fn account_power(o: &pb::OverloadManager, path: &Path) -> Result<Option<u32>> {
    let Some(b) = &o.buffer_factory_config else {
        return Ok(None);
    };
    let v = b.minimum_account_to_track_power_of_two;
    if !ACCOUNT_POWERS.contains(&v) {
        return Err(Error::invalid(
            path.field("buffer_factory_config")
                .field("minimum_account_to_track_power_of_two"),
            format!(
                "{v} is not within [{}, {}]",
                ACCOUNT_POWERS.start(),
                ACCOUNT_POWERS.end()
            ),
        ));
    }
    Ok(Some(v))
}

fn fraction(v: f64, path: Path) -> Result<f64> {
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(Error::invalid(path, format!("{v} is not within [0, 1]")))
    }
}

fn trigger(t: &pb::Trigger, path: &Path) -> Result<Trigger> {
    use pb::trigger::TriggerOneof as T;
    match &t.trigger_oneof {
        Some(T::Threshold(th)) => Ok(Trigger::Threshold {
            value: fraction(th.value, path.field("threshold").field("value"))?,
        }),
        Some(T::Scaled(s)) => {
            let spath = path.field("scaled");
            let scaling = fraction(s.scaling_threshold, spath.field("scaling_threshold"))?;
            let saturation = fraction(s.saturation_threshold, spath.field("saturation_threshold"))?;
            if saturation < scaling {
                return Err(Error::invalid(
                    spath,
                    "saturation_threshold is below scaling_threshold",
                ));
            }
            Ok(Trigger::Scaled {
                scaling,
                saturation,
            })
        }
        None => Err(Error::invalid(
            path.clone(),
            "threshold or scaled is required",
        )),
    }
}

fn action_kind(a: &pb::OverloadAction, path: &Path) -> Result<ActionKind> {
    let kind = match a.name.as_str() {
        "envoy.overload_actions.stop_accepting_requests" => ActionKind::StopAcceptingRequests,
        "envoy.overload_actions.stop_accepting_connections" => ActionKind::StopAcceptingConnections,
        "envoy.overload_actions.reject_incoming_connections" => {
            ActionKind::RejectIncomingConnections
        }
        "envoy.overload_actions.disable_http_keepalive" => ActionKind::DisableHttpKeepalive,
        "envoy.overload_actions.shrink_heap" => ActionKind::ShrinkHeap,
        "envoy.overload_actions.reset_high_memory_stream" => ActionKind::ResetHighMemoryStream,
        "envoy.overload_actions.reduce_timeouts" => {
            let tpath = path.field("typed_config");
            let Some(any) = &a.typed_config else {
                return Err(Error::invalid(
                    tpath,
                    format!(
                        "required ({})",
                        pb::ScaleTimersOverloadActionConfig::type_url()
                    ),
                ));
            };
            let (cfg, cpath) = unpack::<pb::ScaleTimersOverloadActionConfig>(any, &tpath)?;
            return Ok(ActionKind::ReduceTimeouts(scale_timers(&cfg, &cpath)?));
        }
        other => {
            return Err(Error::unsupported_msg(
                path.field("name"),
                format!(
                    "overload action {other:?} is not supported; stop_accepting_requests, \
                     stop_accepting_connections, reject_incoming_connections, \
                     disable_http_keepalive, reduce_timeouts, shrink_heap and \
                     reset_high_memory_stream are"
                ),
            ))
        }
    };
    if a.typed_config.is_some() {
        return Err(Error::unsupported(path.field("typed_config")));
    }
    Ok(kind)
}

fn scale_timers(
    cfg: &pb::ScaleTimersOverloadActionConfig,
    path: &Path,
) -> Result<Vec<ScaledTimer>> {
    use pb::scale_timers_overload_action_config::scale_timer::OverloadAdjust;
    use pb::scale_timers_overload_action_config::TimerType;
    let fpath = path.field("timer_scale_factors");
    if cfg.timer_scale_factors.is_empty() {
        return Err(Error::invalid(fpath, "at least one is required"));
    }
    let mut out = Vec::new();
    for (i, t) in cfg.timer_scale_factors.iter().enumerate() {
        let at = fpath.index(i);
        let timer = match TimerType::try_from(t.timer) {
            Ok(TimerType::HttpDownstreamConnectionIdle) => Timer::ConnectionIdle,
            Ok(TimerType::HttpDownstreamStreamIdle) => Timer::StreamIdle,
            Ok(other) => {
                return Err(Error::unsupported_msg(
                    at.field("timer"),
                    format!(
                        "{} is not supported; HTTP_DOWNSTREAM_CONNECTION_IDLE and \
                         HTTP_DOWNSTREAM_STREAM_IDLE are",
                        other.as_str_name()
                    ),
                ))
            }
            Err(_) => {
                return Err(Error::invalid(
                    at.field("timer"),
                    format!("{} is not a timer type", t.timer),
                ))
            }
        };
        let floor = match &t.overload_adjust {
            Some(OverloadAdjust::MinTimeout(d)) => {
                Floor::Timeout(duration(d, &at.field("min_timeout"))?)
            }
            Some(OverloadAdjust::MinScale(p)) => {
                let v = p.value;
                if !(0.0..=100.0).contains(&v) {
                    return Err(Error::invalid(
                        at.field("min_scale"),
                        format!("{v} is not a percentage"),
                    ));
                }
                Floor::Scale(v / 100.0)
            }
            None => {
                return Err(Error::invalid(
                    at.clone(),
                    "min_timeout or min_scale is required",
                ))
            }
        };
        out.push(ScaledTimer { timer, floor });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use engine::overload::ActionKind;

    use crate::bootstrap::{from_str, Format};

    const HEAP: &str = "  resource_monitors:\n  - name: envoy.resource_monitors.fixed_heap\n    typed_config: { \"@type\": type.googleapis.com/envoy.extensions.resource_monitors.fixed_heap.v3.FixedHeapConfig, max_heap_size_bytes: 1000 }\n";
    const RESET: &str = "  actions:\n  - name: envoy.overload_actions.reset_high_memory_stream\n    triggers: [ { name: envoy.resource_monitors.fixed_heap, scaled: { scaling_threshold: 0.85, saturation_threshold: 0.95 } } ]\n";

    fn load(overload: &str) -> crate::error::Result<engine::Bootstrap> {
        from_str(
            &format!("overload_manager:\n{overload}static_resources: {{}}\n"),
            Format::Yaml,
        )
    }

    fn refused(overload: &str) -> String {
        load(overload).expect_err("refused").to_string()
    }

    #[test]
    fn reset_high_memory_stream_takes_the_account_power() {
        let b = load(&format!(
            "  buffer_factory_config: {{ minimum_account_to_track_power_of_two: 20 }}\n{HEAP}{RESET}"
        ))
        .expect("accepted");
        let o = b.overload.expect("overload manager");
        assert_eq!(o.account_power, Some(20));
        assert_eq!(o.actions[0].kind, ActionKind::ResetHighMemoryStream);
        // The extremes Envoy allows.
        for p in [10, 56] {
            let o = load(&format!(
                "  buffer_factory_config: {{ minimum_account_to_track_power_of_two: {p} }}\n{HEAP}"
            ))
            .expect("accepted")
            .overload
            .expect("overload manager");
            assert_eq!(o.account_power, Some(p));
        }
        // Without it, nothing is tracked.
        let o = load(HEAP).unwrap().overload.unwrap();
        assert_eq!(o.account_power, None);
    }

    #[test]
    fn account_powers_outside_envoy_s_range_are_refused() {
        for p in ["9", "57", "0"] {
            let e = refused(&format!(
                "  buffer_factory_config: {{ minimum_account_to_track_power_of_two: {p} }}\n{HEAP}"
            ));
            assert!(
                e.contains(
                    "overload_manager.buffer_factory_config.minimum_account_to_track_power_of_two"
                ) && e.contains("[10, 56]"),
                "{p}: {e}"
            );
        }
        // An empty config is the field's 0: refused as Envoy's validation does.
        let e = refused(&format!("  buffer_factory_config: {{}}\n{HEAP}"));
        assert!(e.contains("0 is not within [10, 56]"), "{e}");
    }

    #[test]
    fn the_action_without_buffer_factory_config_is_refused() {
        let e = refused(&format!("{HEAP}{RESET}"));
        assert!(
            e.contains("overload_manager.actions[0].name")
                && e.contains(
                    "envoy.overload_actions.reset_high_memory_stream requires buffer_factory_config"
                ),
            "{e}"
        );
        // Nor does it take a typed_config (as Envoy's refuses one).
        let e = refused(&format!(
            "  buffer_factory_config: {{ minimum_account_to_track_power_of_two: 20 }}\n{HEAP}{RESET}    typed_config: {{ \"@type\": type.googleapis.com/envoy.config.overload.v3.ScaleTimersOverloadActionConfig }}\n"
        ));
        assert!(e.contains("actions[0].typed_config"), "{e}");
    }
}
