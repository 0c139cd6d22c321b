//! glommio runtime: data and control shards.
