//! The encoders: a body goes in chunk by chunk, encoded bytes come out as the codec has them, and `finish` ends the stream.

use std::io::Write;

use brotli::enc::backward_references::BrotliEncoderMode;
use brotli::enc::BrotliEncoderParams;
use zlib_rs::{DeflateConfig, DeflateFlush, Method, Status, Strategy};
use zstd::stream::raw::{CParameter, Operation};

use crate::params::{BrotliMode, EncoderParams, GzipStrategy, ZstdStrategy};
use crate::Coding;

/// An encoder that failed: its stream is unusable (the codec's own error;
/// with valid parameters this does not happen).
#[derive(Debug, thiserror::Error)]
#[error("{coding:?} encoder failed: {detail}")]
pub struct EncodeError {
    pub coding: Coding,
    pub detail: String,
}

/// One response's (or request's) encoder.
pub struct Encoder {
    inner: Inner,
    chunk: usize,
}

enum Inner {
    Gzip(zlib_rs::Deflate),
    /// `None` once finished (brotli's writer is consumed by its end).
    Brotli(Option<Box<brotli::CompressorWriter<Vec<u8>>>>),
    Zstd(zstd::stream::raw::Encoder<'static>),
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder")
            .field("coding", &self.coding())
            .finish()
    }
}

impl Encoder {
    /// A fresh stream with these parameters.
    pub fn new(params: &EncoderParams) -> Result<Self, EncodeError> {
        let coding = params.coding();
        let fail = |detail: String| EncodeError { coding, detail };
        let (inner, chunk) = match params {
            EncoderParams::Gzip(g) => {
                let config = DeflateConfig {
                    // zlib's Z_DEFAULT_COMPRESSION.
                    level: g.level.map_or(-1, |l| l as i32),
                    method: Method::Deflated,
                    // 16 + bits: a gzip header and trailer.
                    window_bits: 16 + g.window_bits as i32,
                    mem_level: g.memory_level as i32,
                    strategy: match g.strategy {
                        GzipStrategy::Default => Strategy::Default,
                        GzipStrategy::Filtered => Strategy::Filtered,
                        GzipStrategy::HuffmanOnly => Strategy::HuffmanOnly,
                        GzipStrategy::Rle => Strategy::Rle,
                        GzipStrategy::Fixed => Strategy::Fixed,
                    },
                };
                (
                    Inner::Gzip(zlib_rs::Deflate::new_with_config(config)),
                    g.chunk_size,
                )
            }
            EncoderParams::Brotli(b) => {
                let params = BrotliEncoderParams {
                    quality: b.quality as i32,
                    lgwin: b.window_bits as i32,
                    lgblock: b.input_block_bits as i32,
                    mode: match b.mode {
                        BrotliMode::Default | BrotliMode::Generic => {
                            BrotliEncoderMode::BROTLI_MODE_GENERIC
                        }
                        BrotliMode::Text => BrotliEncoderMode::BROTLI_MODE_TEXT,
                        BrotliMode::Font => BrotliEncoderMode::BROTLI_MODE_FONT,
                    },
                    disable_literal_context_modeling: i32::from(b.disable_literal_context_modeling),
                    ..BrotliEncoderParams::default()
                };
                let writer =
                    brotli::CompressorWriter::with_params(Vec::new(), b.chunk_size, &params);
                (Inner::Brotli(Some(Box::new(writer))), b.chunk_size)
            }
            EncoderParams::Zstd(z) => {
                let dict = z.dictionary.as_deref().unwrap_or(&[]);
                let mut e = zstd::stream::raw::Encoder::with_dictionary(z.level.unwrap_or(3), dict)
                    .map_err(|e| fail(e.to_string()))?;
                e.set_parameter(CParameter::ChecksumFlag(z.checksum))
                    .map_err(|e| fail(e.to_string()))?;
                if let Some(s) = zstd_strategy(z.strategy) {
                    e.set_parameter(CParameter::Strategy(s))
                        .map_err(|e| fail(e.to_string()))?;
                }
                (Inner::Zstd(e), z.chunk_size)
            }
        };
        Ok(Self {
            inner,
            chunk: chunk.max(1024),
        })
    }

    pub fn coding(&self) -> Coding {
        match self.inner {
            Inner::Gzip(_) => Coding::Gzip,
            Inner::Brotli(_) => Coding::Brotli,
            Inner::Zstd(_) => Coding::Zstd,
        }
    }

    /// Encodes `input`, appending what the codec emits to `out` (it may
    /// keep some until more comes or the stream ends).
    pub fn write(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.step(input, Step::Write, out)
    }

    /// Emits everything written so far, decodable on its own (a sync
    /// flush: for a stream whose chunks must not wait, such as events).
    pub fn flush(&mut self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.step(&[], Step::Flush, out)
    }

    /// Ends the stream: `input`, then the codec's trailer, into `out`.
    pub fn finish(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.step(input, Step::Finish, out)
    }

    fn step(&mut self, input: &[u8], step: Step, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let coding = self.coding();
        let fail = |detail: String| EncodeError { coding, detail };
        match &mut self.inner {
            Inner::Gzip(d) => {
                let flush = match step {
                    Step::Write => DeflateFlush::NoFlush,
                    Step::Flush => DeflateFlush::SyncFlush,
                    Step::Finish => DeflateFlush::Finish,
                };
                let mut input = input;
                loop {
                    // Straight into `out`'s tail: no scratch buffer.
                    let start = out.len();
                    out.resize(start + self.chunk, 0);
                    let (before, made_before) = (d.total_in(), d.total_out());
                    let status = d.compress(input, &mut out[start..], flush);
                    let took = (d.total_in() - before) as usize;
                    let made = (d.total_out() - made_before) as usize;
                    out.truncate(start + made);
                    let status = status.map_err(|e| fail(e.as_str().to_owned()))?;
                    input = &input[took..];
                    // Done when the input is in and the codec had room
                    // left (nothing more pending), or the stream ended.
                    if status == Status::StreamEnd
                        || (input.is_empty() && made < self.chunk && flush != DeflateFlush::Finish)
                    {
                        return Ok(());
                    }
                    if status == Status::BufError && input.is_empty() && made == 0 {
                        return Ok(());
                    }
                }
            }
            Inner::Brotli(w) => {
                let Some(writer) = w.as_mut() else {
                    return Err(fail("written after its end".into()));
                };
                writer.write_all(input).map_err(|e| fail(e.to_string()))?;
                match step {
                    Step::Write => {}
                    Step::Flush => writer.flush().map_err(|e| fail(e.to_string()))?,
                    Step::Finish => {
                        let Some(writer) = w.take() else {
                            return Ok(());
                        };
                        out.append(&mut writer.into_inner());
                        return Ok(());
                    }
                }
                out.append(writer.get_mut());
                Ok(())
            }
            Inner::Zstd(e) => {
                let mut input = input;
                while !input.is_empty() {
                    let start = out.len();
                    out.resize(start + self.chunk, 0);
                    let st = e.run_on_buffers(input, &mut out[start..]);
                    let (read, written) = st
                        .as_ref()
                        .map_or((0, 0), |s| (s.bytes_read, s.bytes_written));
                    out.truncate(start + written);
                    st.map_err(|e| fail(e.to_string()))?;
                    input = &input[read..];
                }
                if step == Step::Write {
                    return Ok(());
                }
                loop {
                    let start = out.len();
                    out.resize(start + self.chunk, 0);
                    let mut buf = zstd::stream::raw::OutBuffer::around(&mut out[start..]);
                    let left = match step {
                        Step::Finish => e.finish(&mut buf, true),
                        _ => e.flush(&mut buf),
                    };
                    let n = buf.pos();
                    out.truncate(start + n);
                    if left.map_err(|e| fail(e.to_string()))? == 0 {
                        return Ok(());
                    }
                }
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Write,
    Flush,
    Finish,
}

fn zstd_strategy(s: ZstdStrategy) -> Option<zstd::zstd_safe::Strategy> {
    use zstd::zstd_safe::Strategy as S;
    Some(match s {
        ZstdStrategy::Default => return None,
        ZstdStrategy::Fast => S::ZSTD_fast,
        ZstdStrategy::Dfast => S::ZSTD_dfast,
        ZstdStrategy::Greedy => S::ZSTD_greedy,
        ZstdStrategy::Lazy => S::ZSTD_lazy,
        ZstdStrategy::Lazy2 => S::ZSTD_lazy2,
        ZstdStrategy::Btlazy2 => S::ZSTD_btlazy2,
        ZstdStrategy::Btopt => S::ZSTD_btopt,
        ZstdStrategy::Btultra => S::ZSTD_btultra,
        ZstdStrategy::Btultra2 => S::ZSTD_btultra2,
    })
}
