//! xDS transport on the control shard: the ADS gRPC stream and file
//! sources. Protocol state lives in [`xds::client`]; these tasks only move
//! bytes and report to the control loop.

pub mod ads;
pub mod files;
pub mod grpc;
pub mod view;
