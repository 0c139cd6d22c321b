//! The decoders: encoded bytes go in, the body comes out, with a bound on how much one call may make per byte it was given, so a compression bomb is refused instead of filling memory.

use brotli::enc::StandardAlloc;
use brotli::{BrotliDecompressStream, BrotliResult, BrotliState};
use zlib_rs::{Inflate, InflateFlush, Status};
use zstd::stream::raw::Operation;

use crate::params::DecoderParams;
use crate::Coding;

/// Why a body did not decode. The stream is unusable afterwards.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("not valid {0}: {1}")]
    Corrupt(&'static str, String),
    #[error("the {0} stream ended early")]
    Truncated(&'static str),
    #[error("{0} output passed {1}x its input")]
    RatioExceeded(&'static str, u32),
}

/// One body's decoder.
pub struct Decoder {
    inner: Inner,
    chunk: usize,
    ratio: u32,
    done: bool,
    /// Bytes taken and made so far: the ratio is the stream's.
    total_in: u64,
    total_out: u64,
    /// zstd: the last frame read ended (a body may hold several frames:
    /// one ending is not the stream's end).
    frame_ended: bool,
}

/// Output allowed beyond the ratio: the chunk that crosses it (Envoy
/// stops at the first chunk past `ratio × input`).
const SLACK: u64 = 0;

enum Inner {
    Gzip(Inflate),
    Brotli(Box<BrotliState<StandardAlloc, StandardAlloc, StandardAlloc>>),
    Zstd(zstd::stream::raw::Decoder<'static>),
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder")
            .field("coding", &self.coding())
            .finish()
    }
}

impl Decoder {
    pub fn new(params: &DecoderParams) -> Result<Self, DecodeError> {
        let inner = match params.coding {
            // 16 + bits: gzip only (Envoy's gzip decompressor).
            Coding::Gzip => Inner::Gzip(Inflate::new(true, 16 + params.window_bits as u8)),
            Coding::Brotli => Inner::Brotli(Box::new(BrotliState::new(
                StandardAlloc::default(),
                StandardAlloc::default(),
                StandardAlloc::default(),
            ))),
            Coding::Zstd => {
                let dict = params.dictionaries.first().map_or(&[][..], |d| &d[..]);
                let mut d = zstd::stream::raw::Decoder::with_dictionary(dict)
                    .map_err(|e| DecodeError::Corrupt("zstd", e.to_string()))?;
                // RFC 9659: a zstd content coding's window is at most
                // 8 MiB; a frame asking for more is refused, not obeyed.
                d.set_parameter(zstd::stream::raw::DParameter::WindowLogMax(23))
                    .map_err(|e| DecodeError::Corrupt("zstd", e.to_string()))?;
                Inner::Zstd(d)
            }
        };
        Ok(Self {
            inner,
            chunk: params.chunk_size.max(1024),
            ratio: params.max_inflate_ratio.max(1),
            done: false,
            total_in: 0,
            total_out: 0,
            frame_ended: false,
        })
    }

    pub fn coding(&self) -> Coding {
        match self.inner {
            Inner::Gzip(_) => Coding::Gzip,
            Inner::Brotli(_) => Coding::Brotli,
            Inner::Zstd(_) => Coding::Zstd,
        }
    }

    /// Decodes `input`, appending the body to `out`. Once the stream has
    /// made more than `max_inflate_ratio` bytes per byte it was given, it
    /// makes no more (the chunk that crossed the line is kept, as in
    /// Envoy) and is refused. Bytes after the stream's end are ignored.
    pub fn write(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
        let name = self.coding().token();
        self.total_in += input.len() as u64;
        // The stream's ratio, and this call's own: input that made no
        // output (padding, empty blocks) does not buy one later chunk a
        // larger expansion.
        let stream = (self.total_in * u64::from(self.ratio) + SLACK).saturating_sub(self.total_out);
        let call = (input.len() as u64 * u64::from(self.ratio)).max(self.chunk as u64);
        let bound = stream.min(call);
        let base = out.len();
        let result = self.decode(input, out, bound, name);
        self.total_out += (out.len() - base) as u64;
        result
    }

    fn decode(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        bound: u64,
        name: &'static str,
    ) -> Result<(), DecodeError> {
        let base = out.len();
        let mut input = input;
        while !input.is_empty() && !self.done {
            if (out.len() - base) as u64 > bound {
                return Err(DecodeError::RatioExceeded(name, self.ratio));
            }
            let start = out.len();
            out.resize(start + self.chunk, 0);
            let (took, made, ended) = self.step(input, &mut out[start..]);
            let result = match made {
                Ok(n) => {
                    out.truncate(start + n);
                    Ok(())
                }
                Err(e) => {
                    out.truncate(start);
                    Err(e)
                }
            };
            result?;
            input = &input[took..];
            self.done = ended;
            if took == 0 && out.len() == start && !ended {
                // No progress: the codec holds what it needs until more
                // input comes.
                break;
            }
        }
        // What is still in the codec (a long run of output from the last
        // bytes) comes out too, within the bound.
        while !self.done {
            if (out.len() - base) as u64 > bound {
                return Err(DecodeError::RatioExceeded(name, self.ratio));
            }
            let start = out.len();
            out.resize(start + self.chunk, 0);
            let (_, made, ended) = self.step(&[], &mut out[start..]);
            let n = match made {
                Ok(n) => n,
                Err(e) => {
                    out.truncate(start);
                    return Err(e);
                }
            };
            out.truncate(start + n);
            self.done = ended;
            if n < self.chunk {
                break;
            }
        }
        Ok(())
    }

    /// The body ended: an error if its stream did not.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.done || self.frame_ended {
            true => Ok(()),
            false => Err(DecodeError::Truncated(self.coding().token())),
        }
    }

    /// One codec call: (input taken, output made, stream ended).
    fn step(&mut self, input: &[u8], out: &mut [u8]) -> (usize, Result<usize, DecodeError>, bool) {
        match &mut self.inner {
            Inner::Gzip(d) => {
                let (before, made_before) = (d.total_in(), d.total_out());
                let r = d.decompress(input, out, InflateFlush::NoFlush);
                let took = (d.total_in() - before) as usize;
                let made = (d.total_out() - made_before) as usize;
                match r {
                    Ok(Status::StreamEnd) => (took, Ok(made), true),
                    Ok(_) => (took, Ok(made), false),
                    Err(e) => (
                        took,
                        Err(DecodeError::Corrupt("gzip", e.as_str().to_owned())),
                        false,
                    ),
                }
            }
            Inner::Brotli(state) => {
                let (mut avail_in, mut in_off) = (input.len(), 0);
                let (mut avail_out, mut out_off, mut total) = (out.len(), 0, 0);
                let r = BrotliDecompressStream(
                    &mut avail_in,
                    &mut in_off,
                    input,
                    &mut avail_out,
                    &mut out_off,
                    out,
                    &mut total,
                    state,
                );
                match r {
                    BrotliResult::ResultSuccess => (in_off, Ok(out_off), true),
                    BrotliResult::NeedsMoreInput | BrotliResult::NeedsMoreOutput => {
                        (in_off, Ok(out_off), false)
                    }
                    BrotliResult::ResultFailure => (
                        in_off,
                        Err(DecodeError::Corrupt("br", "invalid stream".into())),
                        false,
                    ),
                }
            }
            Inner::Zstd(d) => match d.run_on_buffers(input, out) {
                // 0 left: a frame just ended; another may follow.
                Ok(st) => {
                    if st.bytes_read > 0 || st.bytes_written > 0 {
                        self.frame_ended = st.remaining == 0;
                    }
                    (st.bytes_read, Ok(st.bytes_written), false)
                }
                Err(e) => (0, Err(DecodeError::Corrupt("zstd", e.to_string())), false),
            },
        }
    }
}
