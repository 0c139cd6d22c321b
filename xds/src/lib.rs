//! Envoy v3 protos (our subset), decoding and validation into engine types.
//!
//! Text (YAML/JSON) goes through [`decode::from_json`] into the prost structs
//! of [`pb`]; protobuf bytes (xDS) decode into the same structs; either way
//! [`validate`] turns them into `engine` config or a path-named [`Error`].

pub mod bootstrap;
pub mod client;
pub mod decode;
pub mod digest;
pub mod error;
pub mod file;
pub mod pb;
pub mod validate;

pub use error::{Error, Path, Result};
