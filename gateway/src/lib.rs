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

/// Writes one line to stderr in one `write`: `eprintln!` writes its
/// pieces one by one, and another process on the same stream (a hot
/// restart's other epoch, under gateway-restarter or systemd) can write
/// between them, cutting a line scripts look for in two.
pub fn say(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut line = args.to_string();
    line.push('\n');
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// [`say()`] with `format!`'s arguments.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::say(format_args!($($arg)*))
    };
}
pub use ports::NotServing;
pub use start::{start, GatewayHandle, Options};
