//! Request bodies: `Content-Length` and chunked framing (RFC 9112 §6, §7).

use bytes::{Bytes, BytesMut};

use crate::error::Error;
use crate::head::{BodyFraming, Limits};

/// The longest chunk-size line taken (size, extensions, CRLF): extensions
/// are ignored, so there is no reason to buffer many of them.
const MAX_CHUNK_LINE: usize = 4096;

/// What a [`BodyDecoder`] found next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyEvent {
    /// Body bytes, zero-copy out of the caller's buffer.
    Data(Bytes),
    /// The trailer section of a chunked body (raw, CRLFs included, the
    /// final empty line excluded), when it has any fields.
    Trailers(Bytes),
    /// The body is complete; the buffer now starts with the next request.
    End,
}

/// Takes a request's body out of the connection's read buffer, piece by
/// piece, as it arrives.
#[derive(Debug, Clone)]
pub struct BodyDecoder {
    state: State,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Length(u64),
    ChunkSize,
    ChunkData(u64),
    ChunkDataEnd,
    Trailers,
    /// `End` given.
    Done,
}

impl BodyDecoder {
    pub fn new(framing: BodyFraming) -> Self {
        let state = match framing {
            BodyFraming::None | BodyFraming::Length(0) => State::Length(0),
            BodyFraming::Length(n) => State::Length(n),
            BodyFraming::Chunked => State::ChunkSize,
        };
        Self { state }
    }

    /// Whether `End` was given.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// The next piece of the body in `buf`, if there is one yet (`Ok(None)`:
    /// read more). Data is never split more than the buffer forces: one
    /// `Data` per call with all the bytes available. After `End`, `None`.
    pub fn decode(
        &mut self,
        buf: &mut BytesMut,
        limits: &Limits,
    ) -> Result<Option<BodyEvent>, Error> {
        self.decode_max(buf, limits, usize::MAX)
    }

    /// [`Self::decode`] giving at most `max` data bytes: a reader's window
    /// caps what is taken, not what is read. Framing (chunk-size lines,
    /// trailers, the end) is still taken with `max` 0, so that a body whose
    /// last byte filled the window is seen to end there.
    pub fn decode_max(
        &mut self,
        buf: &mut BytesMut,
        limits: &Limits,
        max: usize,
    ) -> Result<Option<BodyEvent>, Error> {
        loop {
            match self.state {
                State::Done => return Ok(None),
                State::Length(0) => {
                    self.state = State::Done;
                    return Ok(Some(BodyEvent::End));
                }
                State::Length(left) | State::ChunkData(left) => {
                    if buf.is_empty() || max == 0 {
                        return Ok(None);
                    }
                    let take = usize::try_from(left)
                        .unwrap_or(usize::MAX)
                        .min(buf.len())
                        .min(max);
                    let data = buf.split_to(take).freeze();
                    let left = left - take as u64;
                    self.state = match self.state {
                        State::Length(_) => State::Length(left),
                        _ if left == 0 => State::ChunkDataEnd,
                        _ => State::ChunkData(left),
                    };
                    return Ok(Some(BodyEvent::Data(data)));
                }
                State::ChunkSize => match chunk_size(buf)? {
                    None => return Ok(None),
                    Some((line, 0)) => {
                        let _ = buf.split_to(line);
                        self.state = State::Trailers;
                    }
                    Some((line, size)) => {
                        let _ = buf.split_to(line);
                        self.state = State::ChunkData(size);
                    }
                },
                State::ChunkDataEnd => {
                    if buf.len() < 2 {
                        return Ok(None);
                    }
                    if &buf[..2] != b"\r\n" {
                        return Err(Error::BadChunk("chunk data not followed by CRLF"));
                    }
                    let _ = buf.split_to(2);
                    self.state = State::ChunkSize;
                }
                State::Trailers => {
                    // The empty line ending the body; like httparse in
                    // heads, a bare LF is taken as a line end.
                    let empty = [&b"\r\n"[..], b"\n"]
                        .into_iter()
                        .find(|e| buf.starts_with(e));
                    if let Some(empty) = empty {
                        let _ = buf.split_to(empty.len());
                        self.state = State::Done;
                        return Ok(Some(BodyEvent::End));
                    }
                    let Some(len) = trailer_section(buf, limits)? else {
                        return Ok(None);
                    };
                    // The fields without the final empty line, which stays
                    // for the next turn to end the body.
                    let empty =
                        if buf[..len].ends_with(b"\r\n\r\n") || buf[..len].ends_with(b"\n\r\n") {
                            2
                        } else {
                            1
                        };
                    let trailers = buf.split_to(len - empty).freeze();
                    return Ok(Some(BodyEvent::Trailers(trailers)));
                }
            }
        }
    }
}

/// A chunk-size line: 1 to 16 hex digits, then optional extensions
/// (`;` and anything but control characters), then CRLF. Stricter than
/// `httparse::parse_chunk_size`, which takes an empty size as 0 and a bare
/// LF inside extensions: either lets two parsers see different bodies.
/// `Ok(Some((line length, size)))`.
fn chunk_size(buf: &[u8]) -> Result<Option<(usize, u64)>, Error> {
    let window = &buf[..buf.len().min(MAX_CHUNK_LINE)];
    let Some(lf) = window.iter().position(|&b| b == b'\n') else {
        if window.len() == MAX_CHUNK_LINE {
            return Err(Error::BadChunk("chunk-size line too long"));
        }
        return Ok(None);
    };
    if lf == 0 || window[lf - 1] != b'\r' {
        return Err(Error::BadChunk("chunk-size line not ended by CRLF"));
    }
    let line = &window[..lf - 1];
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return Err(Error::BadChunk("missing chunk size"));
    }
    if digits > 16 {
        return Err(Error::BadChunk("chunk size too large"));
    }
    let rest = &line[digits..];
    let ext = rest
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .map(|i| &rest[i..]);
    match ext {
        None if rest.is_empty() => {}
        // Whitespace before extensions only (BWS), never trailing alone.
        None => return Err(Error::BadChunk("whitespace after chunk size")),
        Some(ext) if ext[0] != b';' => return Err(Error::BadChunk("invalid chunk size")),
        Some(ext) => {
            if ext.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f) {
                return Err(Error::BadChunk("control character in chunk extension"));
            }
        }
    }
    let size = line[..digits].iter().fold(0u64, |n, &d| {
        let v = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            _ => d - b'A' + 10,
        };
        (n << 4) | u64::from(v)
    });
    Ok(Some((lf + 1, size)))
}

/// The length of a complete trailer section at the start of `buf` (fields
/// and the final empty line), checked like header fields and bounded like
/// a head. `Ok(None)`: incomplete.
fn trailer_section(buf: &[u8], limits: &Limits) -> Result<Option<usize>, Error> {
    let window = &buf[..buf.len().min(limits.max_head_bytes)];
    let mut fields = vec![httparse::EMPTY_HEADER; limits.max_headers];
    match httparse::parse_headers(window, &mut fields) {
        Ok(httparse::Status::Complete((len, _))) => Ok(Some(len)),
        Ok(httparse::Status::Partial) if window.len() < limits.max_head_bytes => Ok(None),
        Ok(httparse::Status::Partial) => Err(Error::HeadTooLarge {
            limit: limits.max_head_bytes,
        }),
        Err(httparse::Error::TooManyHeaders) => Err(Error::TooManyHeaders {
            limit: limits.max_headers,
        }),
        Err(_) => Err(Error::BadChunk("malformed trailer section")),
    }
}

/// The fields of a trailer section as [`BodyEvent::Trailers`] gives it
/// (already checked while the body was decoded): `(name, value)` pairs,
/// values trimmed.
pub fn trailer_fields(raw: &[u8]) -> Vec<(&[u8], &[u8])> {
    let mut slots = vec![httparse::EMPTY_HEADER; raw.iter().filter(|&&b| b == b'\n').count() + 1];
    let mut with_end = Vec::with_capacity(raw.len() + 2);
    with_end.extend_from_slice(raw);
    with_end.extend_from_slice(b"\r\n");
    match httparse::parse_headers(&with_end, &mut slots) {
        Ok(httparse::Status::Complete((_, parsed))) => parsed
            .iter()
            .map(|h| {
                // Back into `raw` (the copy only added the end).
                let start = h.value.as_ptr() as usize - with_end.as_ptr() as usize;
                let name_start = h.name.as_ptr() as usize - with_end.as_ptr() as usize;
                (
                    &raw[name_start..name_start + h.name.len()],
                    &raw[start..start + h.value.len()],
                )
            })
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The body's bytes, the trailers, and what is left after `End`.
    type Decoded = (Vec<u8>, Vec<u8>, Vec<u8>);

    /// Decodes `wire` fed in pieces of `step` bytes.
    fn run(framing: BodyFraming, wire: &[u8], step: usize) -> Result<Decoded, Error> {
        let limits = Limits::default();
        let mut dec = BodyDecoder::new(framing);
        let mut buf = BytesMut::new();
        let (mut body, mut trailers) = (Vec::new(), Vec::new());
        let mut fed = 0;
        loop {
            match dec.decode(&mut buf, &limits)? {
                Some(BodyEvent::Data(d)) => body.extend_from_slice(&d),
                Some(BodyEvent::Trailers(t)) => trailers.extend_from_slice(&t),
                Some(BodyEvent::End) => return Ok((body, trailers, buf.to_vec())),
                None if fed < wire.len() => {
                    let next = (fed + step).min(wire.len());
                    buf.extend_from_slice(&wire[fed..next]);
                    fed = next;
                }
                None => panic!("incomplete body: {:?}", std::str::from_utf8(wire)),
            }
        }
    }

    #[test]
    fn content_length_bodies_end_at_their_length_in_any_pieces() {
        for step in [1, 3, 100] {
            let (body, _, rest) = run(BodyFraming::Length(5), b"hello GET", step).unwrap();
            assert_eq!(body, b"hello");
            assert!(b" GET".starts_with(&rest), "{rest:?}");
        }
        let (body, _, _) = run(BodyFraming::None, b"", 1).unwrap();
        assert!(body.is_empty());
    }

    #[test]
    fn chunked_bodies_with_extensions_and_trailers() {
        let wire = b"4;name=value\r\nWiki\r\n5 ; x\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nExpires: never\r\n\r\nNEXT";
        for step in [1, 2, 7, 1000] {
            let (body, trailers, rest) = run(BodyFraming::Chunked, wire, step).unwrap();
            assert_eq!(body, b"Wikipedia in\r\n\r\nchunks.");
            assert_eq!(trailers, b"Expires: never\r\n");
            assert!(b"NEXT".starts_with(&rest));
        }
        let (body, trailers, _) = run(BodyFraming::Chunked, b"0\r\n\r\n", 1).unwrap();
        assert!(body.is_empty() && trailers.is_empty());
    }

    #[test]
    fn malformed_chunks_are_refused() {
        for wire in [
            &b"\r\nabc"[..],                 // empty size (httparse reads 0)
            b"4\nWiki\r\n0\r\n\r\n",         // bare LF
            b"4;a\nb\r\nWiki\r\n0\r\n\r\n",  // bare LF inside an extension
            b"4\r\nWikiXX0\r\n\r\n",         // data not followed by CRLF
            b"-4\r\n",                       // not hex
            b"4 \r\nWiki\r\n0\r\n\r\n",      // trailing whitespace only
            b"11111111111111111\r\n",        // 17 digits
            b"4;a\x01\r\nWiki\r\n0\r\n\r\n", // control character
            b"0\r\nBad Trailer\r\n\r\n",     // a trailer that is no field
        ] {
            let err = run(BodyFraming::Chunked, wire, 1).expect_err(&format!("{wire:?}"));
            assert_eq!(err.status(), 400, "{err}");
        }
    }

    /// Found by the h1_request fuzz target: a trailer section whose empty
    /// line is a bare LF (httparse takes LF as a line end).
    #[test]
    fn a_trailer_section_may_end_in_a_bare_lf() {
        for step in [1, 100] {
            let (_, trailers, rest) =
                run(BodyFraming::Chunked, b"0\r\nT: v\r\n\nNEXT", step).unwrap();
            assert_eq!(trailers, b"T: v\r\n");
            assert!(b"NEXT".starts_with(&rest));
            let (_, trailers, _) = run(BodyFraming::Chunked, b"0\r\n\n", step).unwrap();
            assert!(trailers.is_empty());
        }
    }

    #[test]
    fn a_chunk_size_line_is_bounded() {
        let mut wire = b"4;".to_vec();
        wire.extend(std::iter::repeat_n(b'x', MAX_CHUNK_LINE));
        assert!(run(BodyFraming::Chunked, &wire, 512).is_err());
    }

    #[test]
    fn decode_max_caps_data_but_not_framing() {
        let limits = Limits::default();
        let mut buf = BytesMut::from(&b"5\r\nhello\r\n0\r\n\r\n"[..]);
        let mut dec = BodyDecoder::new(BodyFraming::Chunked);
        assert_eq!(dec.decode_max(&mut buf, &limits, 0).unwrap(), None);
        let ev = dec.decode_max(&mut buf, &limits, 3).unwrap();
        assert_eq!(ev, Some(BodyEvent::Data(Bytes::from_static(b"hel"))));
        let ev = dec.decode_max(&mut buf, &limits, 3).unwrap();
        assert_eq!(ev, Some(BodyEvent::Data(Bytes::from_static(b"lo"))));
        // The window is full, yet the end is seen.
        assert_eq!(
            dec.decode_max(&mut buf, &limits, 0).unwrap(),
            Some(BodyEvent::End)
        );
        assert!(buf.is_empty());
    }

    #[test]
    fn the_largest_chunk_size_does_not_overflow() {
        let mut buf = BytesMut::from(&b"ffffffffffffffff\r\nab"[..]);
        let mut dec = BodyDecoder::new(BodyFraming::Chunked);
        let ev = dec.decode(&mut buf, &Limits::default()).unwrap();
        assert_eq!(ev, Some(BodyEvent::Data(Bytes::from_static(b"ab"))));
        assert_eq!(dec.state, State::ChunkData(u64::MAX - 2));
    }
}
