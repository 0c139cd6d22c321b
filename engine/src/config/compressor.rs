//! The compressor and decompressor filters' configs (`envoy.filters.http.compressor`, `envoy.filters.http.decompressor`), with their libraries' parameters and per-route overrides.

pub use compression::{
    BrotliMode, BrotliParams, Coding, DecoderParams, EncoderParams, GzipParams, GzipStrategy,
    ZstdParams, ZstdStrategy,
};

/// What one direction compresses (`common_config`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompressDirection {
    /// `enabled` (a runtime flag's default; unset: true).
    pub enabled: bool,
    /// `min_content_length` (default 30): a body known to be shorter is
    /// left alone.
    pub min_content_length: u32,
    /// `content_type`: the media types compressed (lowercase, without
    /// parameters); Envoy's list when none is given.
    pub content_types: Vec<String>,
}

/// The response side (`response_direction_config`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompressResponse {
    pub common: CompressDirection,
    /// `disable_on_etag_header`: a response with an `etag` is left alone
    /// (otherwise a strong `etag` is made weak).
    pub disable_on_etag_header: bool,
    /// `remove_accept_encoding_header`: the request goes upstream
    /// without `accept-encoding`.
    pub remove_accept_encoding_header: bool,
    /// `uncompressible_response_codes`.
    pub uncompressible_codes: Vec<u16>,
    /// `status_header_enabled`: the response says why it was or was not
    /// compressed (`x-envoy-compression-status`).
    pub status_header: bool,
}

/// `envoy.filters.http.compressor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compressor {
    /// `compressor_library.name`: its stats' prefix.
    pub library_name: String,
    pub library: EncoderParams,
    pub response: CompressResponse,
    /// `request_direction_config` (request bodies are compressed only
    /// when given and enabled).
    pub request: Option<CompressDirection>,
    /// `choose_first`: wins ties in `accept-encoding` against the other
    /// compressors of the chain.
    pub choose_first: bool,
    /// Every compressor of the connection manager's chain, in order (this
    /// one included): each decides alone, the same way, which of them a
    /// response gets.
    pub chain: Vec<ChainMember>,
}

/// What the compressors of one chain know of each other to negotiate
/// `accept-encoding` as one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainMember {
    pub coding: Coding,
    pub choose_first: bool,
    /// Its response `content_type` list: a response of another type does
    /// not take it.
    pub content_types: Vec<String>,
}

/// `CompressorPerRoute.overrides`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CompressorOverrides {
    /// `response_direction_config` is given (even empty): response
    /// compression is on for the route whatever the filter says.
    pub response_enabled: bool,
    /// `response_direction_config.remove_accept_encoding_header`.
    pub remove_accept_encoding_header: Option<bool>,
    /// `compressor_library`: its parameters replace the filter's (the
    /// coding must be the filter's).
    pub library: Option<EncoderParams>,
}

/// One direction of the decompressor (`common_config`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecompressDirection {
    pub enabled: bool,
    /// `ignore_no_transform_header`: decode even when `cache-control`
    /// says `no-transform`.
    pub ignore_no_transform: bool,
}

/// `envoy.filters.http.decompressor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decompressor {
    /// `decompressor_library.name`: its stats' prefix.
    pub library_name: String,
    pub library: DecoderParams,
    pub request: DecompressDirection,
    /// `advertise_accept_encoding` (default true): the request goes
    /// upstream saying it accepts this coding.
    pub advertise_accept_encoding: bool,
    pub response: DecompressDirection,
}

/// Envoy's default `content_type` list.
pub const DEFAULT_COMPRESSED_TYPES: [&str; 20] = [
    "text/html",
    "text/plain",
    "text/css",
    "application/javascript",
    "application/x-javascript",
    "text/javascript",
    "text/x-javascript",
    "text/ecmascript",
    "text/js",
    "text/jscript",
    "text/x-js",
    "application/ecmascript",
    "application/x-json",
    "application/xml",
    "application/json",
    "image/svg+xml",
    "text/xml",
    "application/xhtml+xml",
    "application/grpc-web",
    "application/grpc-web+proto",
];
