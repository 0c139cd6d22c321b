//! Pure data-plane logic of the gateway: the validated config model, route
//! matching, load balancing and immutable snapshots.
//!
//! Nothing here performs I/O or knows about glommio: every algorithm that
//! needs time or randomness takes the time (an `Instant`) or an RNG as a parameter,
//! so the whole crate is testable deterministically.

pub mod access_log;
pub mod active_health;
pub mod backoff;
pub mod base64;
pub mod config;
pub mod ejected;
pub mod filter_chain;
pub mod forwarding;
pub mod headers;
pub mod host;
pub mod lb;
pub mod matcher;
pub mod outlier;
pub mod overload;
pub mod override_host;
pub mod path;
pub mod rate_limit;
pub mod rbac;
pub mod redirect;
pub mod retry;
pub mod route;
pub mod session;
pub mod snapshot;
pub mod stats;
pub mod tls;
pub mod tracing;

pub use config::*;
pub use ejected::EjectedSet;
pub use host::{HostId, HostRegistry};
pub use snapshot::{ClusterSnapshot, Snapshot};
