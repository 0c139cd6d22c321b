//! Loading an Envoy v3 `Bootstrap` (YAML or JSON) into `engine::Bootstrap`.

use std::collections::HashSet;
use std::sync::Arc;

use crate::decode;
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::bootstrap::v3 as pb;
use crate::validate;

/// Text format of a bootstrap file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Yaml,
    Json,
}

impl Format {
    /// By file name: `.json` is JSON, anything else YAML (a superset of
    /// JSON, so `.yaml`, `.yml` and unknown extensions all work).
    pub fn of(path: &std::path::Path) -> Self {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("json") => Format::Json,
            _ => Format::Yaml,
        }
    }

    /// Parses `text` into a JSON value (YAML maps onto the same model).
    pub fn parse(self, text: &str) -> Result<serde_json::Value> {
        match self {
            Format::Json => {
                serde_json::from_str(text).map_err(|e| Error::Syntax(format!("invalid JSON: {e}")))
            }
            Format::Yaml => {
                serde_yaml::from_str(text).map_err(|e| Error::Syntax(format!("invalid YAML: {e}")))
            }
        }
    }
}

/// Reads a whole config file.
pub(crate) fn read(path: &std::path::Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| Error::Io {
        file: path.to_owned(),
        source,
    })
}

/// Parses and validates a bootstrap document.
pub fn from_str(text: &str, format: Format) -> Result<engine::Bootstrap> {
    let pb: pb::Bootstrap = decode::from_json(format.parse(text)?, &Path::root())?;
    bootstrap(&pb)
}

/// Reads a bootstrap file (format by extension, see [`Format::of`]).
pub fn load_file(path: impl AsRef<std::path::Path>) -> Result<engine::Bootstrap> {
    let path = path.as_ref();
    from_str(&read(path)?, Format::of(path))
}

/// Reads the static listeners' and clusters' TLS contexts that name
/// secrets: the bootstrap's own now (one it does not have is an error, as
/// in Envoy); those over ADS when they arrive (which needs ADS, and
/// cannot be what reaches the ADS server).
fn resolve_static_tls(
    listeners: &[Arc<engine::Listener>],
    clusters: &[Arc<engine::Cluster>],
    secrets: &engine::tls::SecretMap,
    ads: Option<&engine::AdsConfig>,
    srpath: &Path,
) -> Result<()> {
    use engine::tls::{RebuildError, SecretSource, SecretView};
    let none = engine::tls::SecretMap::new();
    let view = SecretView {
        statics: secrets,
        ads: &none,
    };
    for engine::SourcedTls { owner, tls } in engine::sourced_tls(listeners.iter(), clusters.iter())
    {
        let at = || srpath.field(&owner);
        match tls.resolve(&view, false) {
            Ok(_) => {}
            Err(RebuildError::Waiting(r)) if r.source == SecretSource::Ads => match ads {
                Some(a) if owner == format!("clusters[{}]", a.cluster) => {
                    return Err(Error::invalid(
                        at(),
                        format!("{r}: the ADS cluster's TLS cannot come over ADS"),
                    ))
                }
                Some(_) => {}
                None => {
                    return Err(Error::invalid(
                        at(),
                        format!("{r}: sds_config `ads` needs dynamic_resources.ads_config"),
                    ))
                }
            },
            Err(RebuildError::Waiting(r)) => {
                return Err(Error::invalid(
                    at(),
                    format!("{r} is not in static_resources.secrets"),
                ))
            }
            Err(RebuildError::Invalid(m)) => return Err(Error::invalid(at(), m)),
        }
    }
    Ok(())
}

/// Validates a decoded `Bootstrap`.
pub fn bootstrap(b: &pb::Bootstrap) -> Result<engine::Bootstrap> {
    let root = Path::root();
    validate::reject_set!(
        root,
        b,
        cluster_manager,
        flags_path,
        stats_sinks,
        stats_flush_interval,
        watchdog,
        tracing,
        stats_config,
        hds_config,
        enable_dispatcher_stats,
        header_prefix,
        use_tcp_for_dns_lookups,
        bootstrap_extensions,
        node_context_params,
        watchdogs,
        default_regex_engine,
        application_log_config,
    );
    let node = match &b.node {
        Some(n) => validate::node(n, &root.field("node"))?,
        None => engine::Node::default(),
    };
    let admin = match &b.admin {
        Some(a) => Some(admin(a, &root.field("admin"))?),
        None => None,
    };
    let sr = b.static_resources.clone().unwrap_or_default();
    let srpath = root.field("static_resources");
    let secrets = Arc::new(validate::static_secrets(
        &sr.secrets,
        &srpath.field("secrets"),
    )?);

    // Clusters first: inline route configs are checked against their names.
    let mut clusters = Vec::with_capacity(sr.clusters.len());
    let mut names = HashSet::new();
    for (i, c) in sr.clusters.iter().enumerate() {
        let cpath = srpath.field("clusters").index(i);
        let cluster = validate::cluster(c, &cpath)?;
        if !names.insert(cluster.name.clone()) {
            return Err(Error::invalid(
                cpath.field("name"),
                format!("duplicate cluster name {:?}", cluster.name),
            ));
        }
        clusters.push(Arc::new(cluster));
    }

    let mut listeners: Vec<Arc<engine::Listener>> = Vec::with_capacity(sr.listeners.len());
    for (i, l) in sr.listeners.iter().enumerate() {
        let lpath = srpath.field("listeners").index(i);
        let named;
        let l = if l.name.is_empty() {
            named = crate::pb::envoy::config::listener::v3::Listener {
                name: generated_listener_name(i, l),
                ..l.clone()
            };
            &named
        } else {
            l
        };
        let listener = validate::listener(l, &lpath, &names)?;
        if listeners.iter().any(|o| o.name == listener.name) {
            return Err(Error::invalid(
                lpath.field("name"),
                format!("duplicate listener name {:?}", listener.name),
            ));
        }
        if listener.address.port() != 0 && listeners.iter().any(|o| o.address == listener.address) {
            return Err(Error::invalid(
                lpath.field("address"),
                format!("duplicate listener address {}", listener.address),
            ));
        }
        listeners.push(Arc::new(listener));
    }
    let dpath = root.field("dynamic_resources");
    let dynamic = b
        .dynamic_resources
        .as_ref()
        .map(|d| validate::dynamic_resources(d, &dpath))
        .transpose()?;
    let ads = dynamic.as_ref().and_then(|d| d.ads.as_ref());
    if let Some(ads) = ads {
        let cpath = dpath
            .field("ads_config")
            .field("grpc_services")
            .index(0)
            .field("envoy_grpc")
            .field("cluster_name");
        match clusters.iter().find(|c| c.name == ads.cluster) {
            None => {
                return Err(Error::invalid(
                    cpath,
                    format!("{:?} is not a static cluster", ads.cluster),
                ))
            }
            Some(c) if c.eds.is_some() => {
                return Err(Error::invalid(
                    cpath,
                    format!("{:?} must be a STATIC or DNS cluster, not EDS", ads.cluster),
                ))
            }
            Some(_) => {}
        }
    } else {
        // `ads: {}` sources inside static resources need the ADS server too.
        if let Some(i) = clusters.iter().position(|c| c.eds.is_some()) {
            return Err(Error::invalid(
                srpath
                    .field("clusters")
                    .index(i)
                    .field("eds_cluster_config")
                    .field("eds_config")
                    .field("ads"),
                "needs dynamic_resources.ads_config",
            ));
        }
        if let Some(i) = listeners
            .iter()
            .position(|l| l.chains().any(|c| c.http.rds.is_some()))
        {
            return Err(Error::invalid(
                srpath.field("listeners").index(i),
                "its rds config_source `ads` needs dynamic_resources.ads_config",
            ));
        }
    }
    resolve_static_tls(&listeners, &clusters, &secrets, ads, &srpath)?;
    let runtime = match &b.layered_runtime {
        Some(r) => layered_runtime(r, &root.field("layered_runtime"))?,
        None => engine::Runtime::default(),
    };
    let overload = b
        .overload_manager
        .as_ref()
        .map(|o| validate::overload_manager(o, &root.field("overload_manager")))
        .transpose()?
        .map(Arc::new);
    Ok(engine::Bootstrap {
        node,
        admin,
        listeners,
        clusters,
        dynamic,
        runtime,
        overload,
        secrets,
    })
}

/// The runtime key prefix and suffix of a listener's connection limit.
const LISTENER_LIMIT_PREFIX: &str = "envoy.resource_limits.listener.";
const LISTENER_LIMIT_SUFFIX: &str = ".connection_limit";

/// `layered_runtime`: static layers only, and in them only
/// `envoy.resource_limits.listener.<name>.connection_limit`. Nested
/// structs spell keys in parts (`envoy: { resource_limits: ... }`), which
/// Envoy joins with dots; a later layer overrides an earlier one.
/// The name of a static listener configured without one. Envoy gives such
/// a listener a random UUID; ours has a UUID's shape too, drawn from the
/// listener's place and address, so a reload of the same file names it
/// the same and does not drain it as a new listener.
fn generated_listener_name(
    index: usize,
    l: &crate::pb::envoy::config::listener::v3::Listener,
) -> String {
    use std::hash::{Hash, Hasher};
    let half = |salt: u8| {
        // SipHash with fixed keys: the same on every run and build.
        let mut h = std::hash::DefaultHasher::new();
        (salt, index, format!("{:?}", l.address)).hash(&mut h);
        h.finish()
    };
    let (a, b) = (half(0), half(1));
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        0x8000 | (b >> 48) & 0x3fff,
        b & 0xffff_ffff_ffff
    )
}

fn layered_runtime(r: &pb::LayeredRuntime, path: &Path) -> Result<engine::Runtime> {
    use pb::runtime_layer::LayerSpecifier;
    let mut out = engine::Runtime::default();
    for (i, layer) in r.layers.iter().enumerate() {
        let lpath = path.field("layers").index(i);
        match &layer.layer_specifier {
            Some(LayerSpecifier::StaticLayer(st)) => {
                let spath = lpath.field("static_layer");
                let mut leaves = Vec::new();
                flatten(st, "", &mut leaves);
                for (key, value) in leaves {
                    let (name, limit) = runtime_entry(&key, value, &spath.key(&key))?;
                    out.listener_connection_limits.insert(name, limit);
                }
            }
            Some(LayerSpecifier::DiskLayer(_)) => {
                return Err(Error::unsupported(lpath.field("disk_layer")))
            }
            Some(LayerSpecifier::AdminLayer(_)) => {
                return Err(Error::unsupported(lpath.field("admin_layer")))
            }
            Some(LayerSpecifier::RtdsLayer(_)) => {
                return Err(Error::unsupported(lpath.field("rtds_layer")))
            }
            None => {
                return Err(Error::invalid(
                    lpath,
                    "one of static_layer, disk_layer, admin_layer or rtds_layer is required",
                ))
            }
        }
    }
    Ok(out)
}

/// The leaves of a static layer with their dotted keys.
fn flatten<'a>(
    st: &'a prost_types::Struct,
    prefix: &str,
    out: &mut Vec<(String, &'a prost_types::Value)>,
) {
    use prost_types::value::Kind;
    for (k, v) in &st.fields {
        let key = format!("{prefix}{k}");
        match &v.kind {
            Some(Kind::StructValue(inner)) => flatten(inner, &format!("{key}."), out),
            _ => out.push((key, v)),
        }
    }
}

/// One runtime key: a listener's connection limit, `(listener, limit)`.
fn runtime_entry(key: &str, value: &prost_types::Value, path: &Path) -> Result<(String, u64)> {
    use prost_types::value::Kind;
    let name = key
        .strip_prefix(LISTENER_LIMIT_PREFIX)
        .and_then(|rest| rest.strip_suffix(LISTENER_LIMIT_SUFFIX))
        .filter(|name| !name.is_empty());
    let Some(name) = name else {
        return Err(Error::unsupported_msg(
            path.clone(),
            format!(
                "runtime key {key:?} is not supported (only \
                 {LISTENER_LIMIT_PREFIX}<listener name>{LISTENER_LIMIT_SUFFIX} is)"
            ),
        ));
    };
    let limit = match &value.kind {
        Some(Kind::NumberValue(n))
            if n.fract() == 0.0 && *n >= 0.0 && *n <= 9.007_199_254_740_992e15 =>
        {
            Some(*n as u64)
        }
        Some(Kind::StringValue(s)) => s.trim().parse::<u64>().ok(),
        _ => None,
    };
    match limit {
        None => Err(Error::invalid(
            path.clone(),
            "must be a whole number of connections",
        )),
        // Envoy would close every connection; waiting forever for a slot
        // that never frees is no better, so refuse it.
        Some(0) => Err(Error::invalid(path.clone(), "must be at least 1")),
        Some(n) => Ok((name.to_owned(), n)),
    }
}

fn admin(a: &pb::Admin, path: &Path) -> Result<std::net::SocketAddr> {
    validate::reject_set!(
        path,
        a,
        profile_path,
        socket_options,
        access_log,
        ignore_global_conn_limit,
        allow_paths
    );
    // Many Envoy examples say `access_log_path: /dev/null`, which is what we
    // do anyway; a real log path is not.
    if !a.access_log_path.is_empty() && a.access_log_path != "/dev/null" {
        return Err(Error::unsupported_msg(
            path.field("access_log_path"),
            "not supported (only /dev/null)",
        ));
    }
    validate::socket_address(a.address.as_ref(), &path.field("address"), true)
}
