//! Envoy v3 protos, decoding and validation into engine types.
