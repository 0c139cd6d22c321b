//! Test helpers shared by the workspace's integration tests: an in-process
//! ADS (Aggregated Discovery Service) State-of-the-World server ([`AdsServer`])
//! and the Envoy resources tests feed it ([`resources`]).

pub mod ads;
pub mod resources;

pub use ads::{any, type_url, AdsServer, RecordedRequest};
