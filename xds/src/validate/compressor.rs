//! The compressor and decompressor filters (`envoy.filters.http.compressor` / `decompressor`), their libraries (gzip, brotli, zstd) and per-route overrides (`CompressorPerRoute`) → `engine::Compressor` / `engine::Decompressor`.

use engine::{
    BrotliMode, BrotliParams, Coding, CompressDirection, CompressResponse, Compressor,
    CompressorOverrides, DecoderParams, DecompressDirection, Decompressor, EncoderParams,
    GzipParams, GzipStrategy, PerRoute, ZstdParams, ZstdStrategy, DEFAULT_COMPRESSED_TYPES,
};
use prost::Name;

use super::common::{feature_flag as flag, u32_in};
use super::tls::data_source;
use crate::decode::{any_type_name, any_type_url, unpack};
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::core::v3 as core;
use crate::pb::envoy::extensions::compression::brotli::compressor::v3::{
    brotli::EncoderMode, Brotli,
};
use crate::pb::envoy::extensions::compression::brotli::decompressor::v3::Brotli as BrotliDecoder;
use crate::pb::envoy::extensions::compression::gzip::compressor::v3::{
    gzip::CompressionStrategy, Gzip,
};
use crate::pb::envoy::extensions::compression::gzip::decompressor::v3::Gzip as GzipDecoder;
use crate::pb::envoy::extensions::compression::zstd::compressor::v3::{zstd::Strategy, Zstd};
use crate::pb::envoy::extensions::compression::zstd::decompressor::v3::Zstd as ZstdDecoder;
use crate::pb::envoy::extensions::filters::http::compressor::v3 as pb;
use crate::pb::envoy::extensions::filters::http::decompressor::v3 as dpb;

const CHUNK_RANGE: std::ops::RangeInclusive<u32> = 4096..=65536;

/// `Compressor` (at `path`). `chain` is filled in by the connection
/// manager, which knows the other compressors.
pub(super) fn compressor(c: &pb::Compressor, path: &Path) -> Result<Compressor> {
    let lpath = path.field("compressor_library");
    let Some(lib) = &c.compressor_library else {
        return Err(Error::invalid(lpath, "required"));
    };
    let (library_name, library) = encoder_library(lib, &lpath)?;
    let rpath = path.field("response_direction_config");
    // Without `response_direction_config`, Envoy reads the deprecated
    // top-level fields in its place (older configs set those).
    let r = match &c.response_direction_config {
        Some(r) => r.clone(),
        None => pb::compressor::ResponseDirectionConfig {
            common_config: Some(pb::compressor::CommonDirectionConfig {
                enabled: c.runtime_enabled.clone(),
                min_content_length: c.content_length,
                content_type: c.content_type.clone(),
            }),
            disable_on_etag_header: c.disable_on_etag_header,
            remove_accept_encoding_header: c.remove_accept_encoding_header,
            ..Default::default()
        },
    };
    let codes = r
        .uncompressible_response_codes
        .iter()
        .enumerate()
        .map(|(i, &code)| match code {
            200..=599 => Ok(code as u16),
            _ => Err(Error::invalid(
                rpath.field("uncompressible_response_codes").index(i),
                format!("{code} is not a status in 200..=599"),
            )),
        })
        .collect::<Result<Vec<u16>>>()?;
    let response = CompressResponse {
        common: direction(r.common_config.as_ref(), &rpath.field("common_config"))?,
        disable_on_etag_header: r.disable_on_etag_header,
        remove_accept_encoding_header: r.remove_accept_encoding_header,
        uncompressible_codes: codes,
        status_header: r.status_header_enabled,
    };
    let request = match &c.request_direction_config {
        Some(q) => {
            let qpath = path.field("request_direction_config");
            let d = direction(q.common_config.as_ref(), &qpath.field("common_config"))?;
            d.enabled.then_some(d)
        }
        None => None,
    };
    Ok(Compressor {
        library_name,
        library,
        response,
        request,
        choose_first: c.choose_first,
        chain: Vec::new(),
    })
}

fn direction(
    c: Option<&pb::compressor::CommonDirectionConfig>,
    path: &Path,
) -> Result<CompressDirection> {
    let c = c.cloned().unwrap_or_default();
    let content_types = match c.content_type.is_empty() {
        true => DEFAULT_COMPRESSED_TYPES
            .iter()
            .map(|s| s.to_string())
            .collect(),
        false => c
            .content_type
            .iter()
            .map(|t| media_type(t).to_owned())
            .collect(),
    };
    Ok(CompressDirection {
        enabled: flag(c.enabled.as_ref(), true, &path.field("enabled"))?,
        // 0 is Envoy's default too.
        min_content_length: c.min_content_length.filter(|&n| n > 0).unwrap_or(30),
        content_types,
    })
}

/// A media type without its parameters, lowercase.
pub(crate) fn media_type(t: &str) -> String {
    t.split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// A `compressor_library` (its name, its parameters).
fn encoder_library(t: &core::TypedExtensionConfig, path: &Path) -> Result<(String, EncoderParams)> {
    let tpath = path.field("typed_config");
    let Some(any) = &t.typed_config else {
        return Err(Error::invalid(tpath, "required"));
    };
    let name = any_type_name(any, &tpath)?;
    let params = if name == Gzip::full_name() {
        let (g, p) = unpack::<Gzip>(any, &tpath)?;
        let level = match g.compression_level {
            0 => None,
            n @ 1..=9 => Some(n as u32),
            n => {
                return Err(Error::invalid(
                    p.field("compression_level"),
                    format!("unknown value {n}"),
                ))
            }
        };
        let strategy = match CompressionStrategy::try_from(g.compression_strategy) {
            Ok(CompressionStrategy::DefaultStrategy) => GzipStrategy::Default,
            Ok(CompressionStrategy::Filtered) => GzipStrategy::Filtered,
            Ok(CompressionStrategy::HuffmanOnly) => GzipStrategy::HuffmanOnly,
            Ok(CompressionStrategy::Rle) => GzipStrategy::Rle,
            Ok(CompressionStrategy::Fixed) => GzipStrategy::Fixed,
            Err(_) => {
                return Err(Error::invalid(
                    p.field("compression_strategy"),
                    format!("unknown value {}", g.compression_strategy),
                ))
            }
        };
        EncoderParams::Gzip(GzipParams {
            level,
            memory_level: u32_in(g.memory_level, 1..=9, 5, &p.field("memory_level"))?,
            window_bits: u32_in(g.window_bits, 9..=15, 12, &p.field("window_bits"))?,
            strategy,
            chunk_size: u32_in(g.chunk_size, CHUNK_RANGE, 4096, &p.field("chunk_size"))? as usize,
        })
    } else if name == Brotli::full_name() {
        let (b, p) = unpack::<Brotli>(any, &tpath)?;
        let mode = match EncoderMode::try_from(b.encoder_mode) {
            Ok(EncoderMode::Default) => BrotliMode::Default,
            Ok(EncoderMode::Generic) => BrotliMode::Generic,
            Ok(EncoderMode::Text) => BrotliMode::Text,
            Ok(EncoderMode::Font) => BrotliMode::Font,
            Err(_) => {
                return Err(Error::invalid(
                    p.field("encoder_mode"),
                    format!("unknown value {}", b.encoder_mode),
                ))
            }
        };
        EncoderParams::Brotli(BrotliParams {
            quality: u32_in(b.quality, 0..=11, 3, &p.field("quality"))?,
            window_bits: u32_in(b.window_bits, 10..=24, 18, &p.field("window_bits"))?,
            input_block_bits: u32_in(
                b.input_block_bits,
                16..=24,
                24,
                &p.field("input_block_bits"),
            )?,
            mode,
            disable_literal_context_modeling: b.disable_literal_context_modeling,
            chunk_size: u32_in(b.chunk_size, CHUNK_RANGE, 4096, &p.field("chunk_size"))? as usize,
        })
    } else if name == Zstd::full_name() {
        let (z, p) = unpack::<Zstd>(any, &tpath)?;
        let strategy = match Strategy::try_from(z.strategy) {
            Ok(Strategy::Default) => ZstdStrategy::Default,
            Ok(Strategy::Fast) => ZstdStrategy::Fast,
            Ok(Strategy::Dfast) => ZstdStrategy::Dfast,
            Ok(Strategy::Greedy) => ZstdStrategy::Greedy,
            Ok(Strategy::Lazy) => ZstdStrategy::Lazy,
            Ok(Strategy::Lazy2) => ZstdStrategy::Lazy2,
            Ok(Strategy::Btlazy2) => ZstdStrategy::Btlazy2,
            Ok(Strategy::Btopt) => ZstdStrategy::Btopt,
            Ok(Strategy::Btultra) => ZstdStrategy::Btultra,
            Ok(Strategy::Btultra2) => ZstdStrategy::Btultra2,
            Err(_) => {
                return Err(Error::invalid(
                    p.field("strategy"),
                    format!("unknown value {}", z.strategy),
                ))
            }
        };
        let level = match z.compression_level {
            None => None,
            // zstd's levels (negative ones are "fast" levels).
            Some(l @ 1..=22) => Some(l as i32),
            Some(l) => {
                return Err(Error::invalid(
                    p.field("compression_level"),
                    format!("{l} is out of range 1..=22"),
                ))
            }
        };
        let dictionary = match &z.dictionary {
            Some(d) => Some(data_source(Some(d), &p.field("dictionary"))?),
            None => None,
        };
        EncoderParams::Zstd(ZstdParams {
            level,
            checksum: z.enable_checksum,
            strategy,
            dictionary,
            chunk_size: u32_in(z.chunk_size, CHUNK_RANGE, 4096, &p.field("chunk_size"))? as usize,
        })
    } else {
        return Err(Error::unsupported_msg(
            tpath.clone(),
            format!(
                "compressor library {} is not supported (gzip, brotli and zstd are)",
                any_type_url(any, &tpath)?
            ),
        ));
    };
    Ok((t.name.clone(), params))
}

/// `CompressorPerRoute` (at `path`).
pub(super) fn compressor_per_route(
    r: &pb::CompressorPerRoute,
    path: &Path,
) -> Result<PerRoute<CompressorOverrides>> {
    use pb::compressor_per_route::Override;
    match &r.r#override {
        Some(Override::Disabled(true)) => Ok(PerRoute::Disabled),
        Some(Override::Disabled(false)) => {
            Err(Error::invalid(path.field("disabled"), "must be true"))
        }
        Some(Override::Overrides(o)) => {
            let opath = path.field("overrides");
            let library = match &o.compressor_library {
                Some(l) => Some(encoder_library(l, &opath.field("compressor_library"))?.1),
                None => None,
            };
            Ok(PerRoute::Override(CompressorOverrides {
                response_enabled: o.response_direction_config.is_some(),
                remove_accept_encoding_header: o
                    .response_direction_config
                    .as_ref()
                    .and_then(|r| r.remove_accept_encoding_header),
                library,
            }))
        }
        None => Err(Error::invalid(
            path.clone(),
            "one of disabled and overrides is required",
        )),
    }
}

/// `Decompressor` (at `path`).
pub(super) fn decompressor(d: &dpb::Decompressor, path: &Path) -> Result<Decompressor> {
    let lpath = path.field("decompressor_library");
    let Some(lib) = &d.decompressor_library else {
        return Err(Error::invalid(lpath, "required"));
    };
    let tpath = lpath.field("typed_config");
    let Some(any) = &lib.typed_config else {
        return Err(Error::invalid(tpath, "required"));
    };
    let name = any_type_name(any, &tpath)?;
    let library = if name == GzipDecoder::full_name() {
        let (g, p) = unpack::<GzipDecoder>(any, &tpath)?;
        DecoderParams {
            window_bits: u32_in(g.window_bits, 9..=15, 15, &p.field("window_bits"))?,
            chunk_size: u32_in(g.chunk_size, CHUNK_RANGE, 4096, &p.field("chunk_size"))? as usize,
            max_inflate_ratio: u32_in(
                g.max_inflate_ratio,
                1..=1032,
                100,
                &p.field("max_inflate_ratio"),
            )?,
            ..DecoderParams::new(Coding::Gzip)
        }
    } else if name == BrotliDecoder::full_name() {
        let (b, p) = unpack::<BrotliDecoder>(any, &tpath)?;
        DecoderParams {
            chunk_size: u32_in(b.chunk_size, CHUNK_RANGE, 4096, &p.field("chunk_size"))? as usize,
            ..DecoderParams::new(Coding::Brotli)
        }
    } else if name == ZstdDecoder::full_name() {
        let (z, p) = unpack::<ZstdDecoder>(any, &tpath)?;
        if z.dictionaries.len() > 1 {
            return Err(Error::unsupported_msg(
                p.field("dictionaries"),
                "one dictionary at most is supported",
            ));
        }
        let dictionaries = z
            .dictionaries
            .iter()
            .enumerate()
            .map(|(i, d)| data_source(Some(d), &p.field("dictionaries").index(i)))
            .collect::<Result<Vec<_>>>()?;
        DecoderParams {
            chunk_size: u32_in(z.chunk_size, CHUNK_RANGE, 4096, &p.field("chunk_size"))? as usize,
            dictionaries,
            ..DecoderParams::new(Coding::Zstd)
        }
    } else {
        return Err(Error::unsupported_msg(
            tpath.clone(),
            format!(
                "decompressor library {} is not supported (gzip, brotli and zstd are)",
                any_type_url(any, &tpath)?
            ),
        ));
    };
    let dir = |c: Option<&dpb::decompressor::CommonDirectionConfig>,
               p: &Path|
     -> Result<DecompressDirection> {
        let c = c.cloned().unwrap_or_default();
        Ok(DecompressDirection {
            enabled: flag(c.enabled.as_ref(), true, &p.field("enabled"))?,
            ignore_no_transform: c.ignore_no_transform_header,
        })
    };
    let q = d.request_direction_config.clone().unwrap_or_default();
    let r = d.response_direction_config.clone().unwrap_or_default();
    Ok(Decompressor {
        library_name: lib.name.clone(),
        library,
        request: dir(
            q.common_config.as_ref(),
            &path
                .field("request_direction_config")
                .field("common_config"),
        )?,
        advertise_accept_encoding: q.advertise_accept_encoding.unwrap_or(true),
        response: dir(
            r.common_config.as_ref(),
            &path
                .field("response_direction_config")
                .field("common_config"),
        )?,
    })
}
