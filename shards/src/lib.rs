//! glommio runtime of the gateway: data and control shards, h2 proxying,
//! admin, and the demo backend used by the README and the tests.

pub mod demo_backend;
