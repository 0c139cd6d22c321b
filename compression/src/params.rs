//! The libraries' parameters, as Envoy's compressor and decompressor library configs give them, with Envoy's defaults.

use crate::Coding;

/// zlib's strategies (`compression_strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GzipStrategy {
    #[default]
    Default,
    Filtered,
    HuffmanOnly,
    Rle,
    Fixed,
}

/// `envoy.compression.gzip.compressor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GzipParams {
    /// 1..=9; `None`: zlib's default (6).
    pub level: Option<u32>,
    /// 1..=9 (Envoy's default 5).
    pub memory_level: u32,
    /// 9..=15 (Envoy's default 12).
    pub window_bits: u32,
    pub strategy: GzipStrategy,
    /// Output is produced in chunks of this size (4096..=65536).
    pub chunk_size: usize,
}

impl Default for GzipParams {
    fn default() -> Self {
        Self {
            level: None,
            memory_level: 5,
            window_bits: 12,
            strategy: GzipStrategy::Default,
            chunk_size: 4096,
        }
    }
}

/// Brotli's `encoder_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BrotliMode {
    #[default]
    Default,
    Generic,
    Text,
    Font,
}

/// `envoy.compression.brotli.compressor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BrotliParams {
    /// 0..=11 (Envoy's default 3).
    pub quality: u32,
    /// 10..=24 (Envoy's default 18).
    pub window_bits: u32,
    /// 16..=24 (Envoy's default 24).
    pub input_block_bits: u32,
    pub mode: BrotliMode,
    pub disable_literal_context_modeling: bool,
    pub chunk_size: usize,
}

impl Default for BrotliParams {
    fn default() -> Self {
        Self {
            quality: 3,
            window_bits: 18,
            input_block_bits: 24,
            mode: BrotliMode::Default,
            disable_literal_context_modeling: false,
            chunk_size: 4096,
        }
    }
}

/// zstd's strategies (`strategy`; `Default`: the level's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ZstdStrategy {
    #[default]
    Default,
    Fast,
    Dfast,
    Greedy,
    Lazy,
    Lazy2,
    Btlazy2,
    Btopt,
    Btultra,
    Btultra2,
}

/// `envoy.compression.zstd.compressor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZstdParams {
    /// `None`: zstd's default level (3).
    pub level: Option<i32>,
    pub checksum: bool,
    pub strategy: ZstdStrategy,
    /// A dictionary the frames are encoded with.
    pub dictionary: Option<Vec<u8>>,
    pub chunk_size: usize,
}

impl Default for ZstdParams {
    fn default() -> Self {
        Self {
            level: None,
            checksum: false,
            strategy: ZstdStrategy::Default,
            dictionary: None,
            chunk_size: 4096,
        }
    }
}

/// A compressor library and its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EncoderParams {
    Gzip(GzipParams),
    Brotli(BrotliParams),
    Zstd(ZstdParams),
}

impl EncoderParams {
    pub fn coding(&self) -> Coding {
        match self {
            Self::Gzip(_) => Coding::Gzip,
            Self::Brotli(_) => Coding::Brotli,
            Self::Zstd(_) => Coding::Zstd,
        }
    }
}

/// A decompressor library and its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecoderParams {
    pub coding: Coding,
    /// gzip's `window_bits` (9..=15; default 15).
    pub window_bits: u32,
    /// Output is produced in chunks of this size.
    pub chunk_size: usize,
    /// The most output one call may make per byte of its input (gzip's
    /// `max_inflate_ratio`, default 100): past it the body is refused.
    pub max_inflate_ratio: u32,
    /// zstd's dictionaries.
    pub dictionaries: Vec<Vec<u8>>,
}

impl DecoderParams {
    /// The library's defaults for `coding`.
    pub fn new(coding: Coding) -> Self {
        Self {
            coding,
            window_bits: 15,
            chunk_size: 4096,
            max_inflate_ratio: 100,
            dictionaries: Vec::new(),
        }
    }
}
