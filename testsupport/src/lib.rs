//! Test helpers shared by the workspace's integration tests: an in-process
//! ADS (Aggregated Discovery Service) State-of-the-World server ([`AdsServer`]),
//! the Envoy resources tests feed it ([`resources`]) and a DNS server on
//! loopback ([`DnsServer`]).

pub mod ads;
pub mod delta;
pub mod dns;
mod h2c;
pub mod resources;

pub use ads::{any, type_url, AdsServer, RecordedRequest};
pub use dns::{DnsServer, Zone};
