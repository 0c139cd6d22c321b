//! prost structs generated from `proto/` (Envoy's package layout, our subset).
#![allow(clippy::all, missing_docs, rustdoc::all)]

include!(concat!(env!("OUT_DIR"), "/_includes.rs"));

/// Serialized `FileDescriptorSet` of `proto/` plus the well-known types it
/// imports, for building a [`prost_reflect::DescriptorPool`].
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/descriptor.bin"));
