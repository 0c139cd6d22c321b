//! glommio runtime of the gateway: the control shard (snapshots, admin) and
//! the data shards (listeners, h2 proxying, upstream pools), plus the demo
//! backend used by the README, the tests and the benchmarks.

pub mod admin;
pub mod body;
pub(crate) mod control;
pub mod data_shard;
pub mod demo_backend;
pub mod downstream;
pub mod gateway;
pub mod io;
pub mod local_reply;
pub mod outlier;
pub mod pacing;
pub mod pool;
pub mod proxy;
pub mod session;
pub mod shard;
pub mod signal;
pub mod stats;
pub mod tick;
pub mod wire;
pub(crate) mod xds;

pub use gateway::{start, GatewayHandle, Options, StartError};
