//! Metrics' pure parts: the histogram bucket math shared by the shards that record and the admin that merges.

pub mod histogram;
