//! Decoded header lists and the RFC 9113 §8 rules a request, response or trailer section must obey.
//!
//! A [`HeaderList`] keeps one block's fields in a byte arena that is reused
//! from stream to stream, so filling it from the HPACK decoder allocates
//! nothing once warm:
//!
//! ```
//! # use h2wire::{hpack::Decoder, message::{check_request, HeaderList}};
//! let (mut decoder, mut list) = (Decoder::new(4096), HeaderList::new());
//! let block = b"\x82\x86\x84\x01\x0bexample.com"; // GET http / :authority
//! decoder
//!     .decode(block, 64 << 10, |f| list.push(f.name, f.value, f.never_index))
//!     .unwrap();
//! let head = check_request(&list).unwrap();
//! assert_eq!(head.path, Some(&b"/"[..]));
//! ```
//!
//! [`check_request`], [`check_response`] and [`check_trailers`] apply every
//! rule of §8 that one header list can break; what they report is a
//! *malformed* message (§8.1.1), which the caller answers with RST_STREAM
//! (PROTOCOL_ERROR) — a server may send a 400 first — and must never
//! forward. Rules that need more than the list stay with the caller:
//! content-length against the DATA received, END_STREAM on trailers, and
//! whether `:protocol` is allowed at all (only once we have sent
//! SETTINGS_ENABLE_CONNECT_PROTOCOL = 1, RFC 8441 §3).

mod check;
mod head;
mod list;
mod malformed;

#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests;

pub use check::{check_request, check_response, check_trailers, content_length};
pub use head::{RequestHead, ResponseHead};
pub use list::HeaderList;
pub use malformed::Malformed;
