//! File sources (`path_config_source`): a YAML or JSON `DiscoveryResponse`
//! whose `resources` are `"@type"`-tagged Envoy resources, as Envoy reads.

use crate::bootstrap::Format;
use crate::decode;
use crate::error::{Error, Path, Result};
use crate::pb::envoy::service::discovery::v3::DiscoveryResponse;

/// Parses a `DiscoveryResponse` document.
pub fn discovery_response(text: &str, format: Format) -> Result<DiscoveryResponse> {
    decode::from_json(format.parse(text)?, &Path::root())
}

/// Reads a `DiscoveryResponse` file (format by extension, see
/// [`Format::of`]); errors other than I/O name the file.
pub fn load_discovery_response(path: &std::path::Path) -> Result<DiscoveryResponse> {
    let text = crate::bootstrap::read(path)?;
    discovery_response(&text, Format::of(path)).map_err(|e| Error::InFile {
        file: path.to_owned(),
        source: Box::new(e),
    })
}
