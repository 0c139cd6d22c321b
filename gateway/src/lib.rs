//! The control plane and the gateway's start-up: the control shard (xDS
//! transport, snapshot builds, outlier sweeps, certificate watching), the
//! admin server, ports, and the data shards it starts (crate `shards`).

pub mod admin;
mod certs;
mod control;
mod dns;
mod error;
mod events;
mod health;
pub mod hot_restart;
mod io;
mod outlier;
mod overload;
mod ports;
mod shard_links;
mod start;
mod xds;

pub use error::StartError;
pub use ports::NotServing;
pub use start::{start, GatewayHandle, Options};
