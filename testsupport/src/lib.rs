//! Test helpers shared by the workspace's integration tests: an in-process
//! ADS (Aggregated Discovery Service) State-of-the-World server ([`AdsServer`]).

pub mod ads;

pub use ads::{any, type_url, AdsServer, RecordedRequest};
