//! The data plane: what a data shard runs on its core — listeners and their
//! connections, the request phases and HTTP filters, upstream pools, the
//! routing context — plus the stats it writes and the access log writer.
//!
//! Nothing here knows the control plane: the control shard (crate
//! `gateway`) sends [`messages::ShardMsg`] and reads [`messages::ShardReply`];
//! everything a data shard needs arrives in those messages or as arguments
//! of [`data_shard::run`].

pub mod access_log;
pub mod data_shard;
pub mod drain;
pub mod http_filter;
pub mod local_reply;
pub mod messages;
pub mod overload;
pub mod pacing;
pub mod shard;
pub mod signal;
pub mod stats;
pub mod steering;
pub mod wire;
