//! Streaming body codecs for the compressor and decompressor filters: gzip (zlib-rs), brotli and zstd encoders, and decoders whose output is held to a ratio of their input (per call and per stream), so a small body cannot inflate into memory the gateway does not have.
//!
//! An [`Encoder`] takes a body chunk by chunk and returns the encoded bytes
//! it has so far; [`Encoder::finish`] ends the stream. A [`Decoder`] does
//! the reverse and refuses (with [`DecodeError`]) bytes that are not the
//! encoding, a stream that ends early, and output past its bound. Neither
//! does I/O or keeps more than its codec's window: the filters decide
//! when to call them, on the shard that owns the stream.

mod decoder;
mod encoder;
mod params;

pub use decoder::{DecodeError, Decoder};
pub use encoder::{EncodeError, Encoder};
pub use params::{
    BrotliMode, BrotliParams, DecoderParams, EncoderParams, GzipParams, GzipStrategy, ZstdParams,
    ZstdStrategy,
};

/// The content codings we encode and decode, by their HTTP names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Coding {
    Gzip,
    Brotli,
    Zstd,
}

impl Coding {
    /// The `content-encoding` token.
    pub fn token(self) -> &'static str {
        match self {
            Self::Gzip => "gzip",
            Self::Brotli => "br",
            Self::Zstd => "zstd",
        }
    }

    /// The coding a `content-encoding` token names (ASCII case ignored).
    pub fn from_token(token: &[u8]) -> Option<Self> {
        [Self::Gzip, Self::Brotli, Self::Zstd]
            .into_iter()
            .find(|c| token.eq_ignore_ascii_case(c.token().as_bytes()))
    }
}
