//! glommio runtime of the gateway: the control shard (snapshots, admin) and
//! the data shards (listeners, HTTP/2 proxying on `h2wire`, upstream pools), plus the demo
//! backend used by the README, the tests and the benchmarks.

pub mod access_log;
pub mod admin;
mod certs;
pub(crate) mod control;
pub mod data_shard;
pub mod demo_backend;
pub mod gateway;
pub mod io;
pub mod local_reply;
pub mod messages;
pub mod outlier;
pub mod pacing;
pub mod session;
pub mod shard;
pub mod signal;
pub mod stats;
pub mod wire;
pub(crate) mod xds;

pub use gateway::{start, GatewayHandle, Options, StartError};
