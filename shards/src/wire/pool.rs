//! Shard-local pools of upstream connections (HTTP/2 or HTTP/1.1, cleartext or TLS), one pool per host, each connection driven by its own task.
//!
//! Isolation rules: an HTTP/2 connection carries at most `connection window ÷ stream window` streams
//! (stalled streams can never use up the window others need); when every
//! connection is full another is opened, up to [`MAX_CONNS_PER_HOST`];
//! failed connects back off exponentially. A client connection's streams
//! go to the same upstream connection while it has room (batching), else
//! to the least loaded one. Requests are written into a
//! new connection's `ClientConn` at once and go out when the TCP connect
//! completes, so the first requests to a host do not wait for a
//! round of the pool.
//!
//! An HTTP/1.1 connection carries one stream at a time and is reused once
//! it is done; a pool opens up to [`MAX_H1_CONNS_PER_HOST`] of them. With
//! `auto_config` the protocol is what the server's ALPN chose: the pool's
//! first connection takes no stream until its handshake said which, and
//! later ones assume the same (one that finds otherwise fails as a lost
//! connection, and the pool learns the new answer).

mod acquire;
mod budget;
mod conn;
mod state;
mod task;

pub(crate) use acquire::Acquire;
pub use acquire::{MAX_CONNS_PER_HOST, MAX_H1_CONNS_PER_HOST};
pub use budget::Budget;
pub(crate) use conn::UpRef;
pub use state::{Pool, PoolRef, INITIAL_RESPONSE_WINDOW, RESET_BUDGET};

/// How a wait on a socket ended.
pub(crate) enum Woken {
    /// `n` bytes were read; 0: the peer closed or the read failed.
    Read(usize),
    /// Another task has work for this one.
    Nudged,
}
