//! HPACK header compression (RFC 7541).
//!
//! - [`Decoder`] turns one complete header block into [`Field`]s borrowed
//!   from the block, the tables or a scratch buffer it reuses (Huffman-coded
//!   strings), handed to a callback: no allocation per header. It enforces
//!   the size update rules of §4.2 and counts the header list size of RFC
//!   9113 §6.5.2 while keeping the dynamic table in step past the limit.
//! - [`Encoder`] indexes exact matches, names fields by index when it can,
//!   keeps sensitive fields out of the table, and finds dynamic entries
//!   through hashes checked against the table's bytes.
//! - [`DynamicTable`], shared by both, packs its entries in one byte buffer
//!   that grows and shrinks with its content.
//!
//! Names are taken and given as they are on the wire: HTTP/2 requires them
//! lowercase, and checking that is the caller's job.

mod decoder;
mod encoder;
mod error;
pub mod huffman;
mod int;
mod table;

#[cfg(test)]
mod tests;

pub use decoder::{Decoder, Field};
pub use encoder::Encoder;
pub use error::DecodeError;
pub use table::{DynamicTable, DEFAULT_TABLE_SIZE, ENTRY_OVERHEAD, STATIC_TABLE};
