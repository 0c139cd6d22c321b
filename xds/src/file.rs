//! File sources (`path_config_source`): a YAML or JSON `DiscoveryResponse`
//! whose `resources` are `"@type"`-tagged Envoy resources, as Envoy reads.

use crate::bootstrap::Format;
use crate::decode;
use crate::error::{Error, Path, Result};
use crate::pb::envoy::service::discovery::v3::DiscoveryResponse;

/// Parses a `DiscoveryResponse` document.
pub fn discovery_response(text: &str, format: Format) -> Result<DiscoveryResponse> {
    let value: serde_json::Value =
        match format {
            Format::Json => serde_json::from_str(text)
                .map_err(|e| Error::Syntax(format!("invalid JSON: {e}")))?,
            Format::Yaml => serde_yaml::from_str(text)
                .map_err(|e| Error::Syntax(format!("invalid YAML: {e}")))?,
        };
    decode::from_json(value, &Path::root())
}

/// Reads a `DiscoveryResponse` file (`.json` is JSON, anything else YAML).
pub fn load_discovery_response(path: &std::path::Path) -> Result<DiscoveryResponse> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        file: path.to_owned(),
        source,
    })?;
    let format = match path.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("json") => Format::Json,
        _ => Format::Yaml,
    };
    discovery_response(&text, format).map_err(|e| match e {
        Error::Io { .. } => e,
        other => Error::invalid(Path::root(), format!("{}: {other}", path.display())),
    })
}
