//! Why a header block cannot be decoded.

use crate::ErrorCode;

/// A header block the decoder refused. Every variant but
/// [`HeaderListTooLarge`](DecodeError::HeaderListTooLarge) leaves the
/// decoder out of step with the peer's encoder, so the connection must end
/// with GOAWAY(COMPRESSION_ERROR) (RFC 9113 §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The block ends inside an integer or a string.
    #[error("header block truncated")]
    Truncated,
    /// An integer above 2^32 - 1 or spread over too many octets.
    #[error("integer overflow in header block")]
    IntegerOverflow,
    /// Index 0, or an index past the static and dynamic tables.
    #[error("index {0} is in neither the static nor the dynamic table")]
    InvalidIndex(usize),
    /// A dynamic table size update above the SETTINGS_HEADER_TABLE_SIZE we
    /// advertised (§6.3).
    #[error("dynamic table size update above our SETTINGS_HEADER_TABLE_SIZE")]
    SizeUpdateTooLarge,
    /// A dynamic table size update after the block's first field (§4.2).
    #[error("dynamic table size update after a header field")]
    SizeUpdateNotAtStart,
    /// We lowered SETTINGS_HEADER_TABLE_SIZE below the table's size and the
    /// next block did not start by shrinking the table to fit (§4.2).
    #[error("missing dynamic table size update after SETTINGS_HEADER_TABLE_SIZE was lowered")]
    MissingSizeUpdate,
    /// A Huffman-coded string contains the EOS symbol (§5.2).
    #[error("EOS symbol inside a Huffman-coded string")]
    HuffmanEos,
    /// A Huffman-coded string ends with more than 7 bits of padding (§5.2).
    #[error("Huffman padding longer than 7 bits")]
    HuffmanPaddingTooLong,
    /// A Huffman-coded string's padding is not a prefix of EOS, i.e. not all
    /// ones (§5.2).
    #[error("Huffman padding is not a prefix of EOS")]
    HuffmanBadPadding,
    /// The decoded header list is above the `max_list_size` given to
    /// [`Decoder::decode`](super::Decoder::decode) (RFC 9113 §6.5.2). Not a
    /// compression error: the whole block was still decoded, so the dynamic
    /// table is in step and the connection stays usable.
    #[error("header list larger than the advertised maximum")]
    HeaderListTooLarge,
}

impl DecodeError {
    /// The code for GOAWAY: COMPRESSION_ERROR for everything but
    /// [`HeaderListTooLarge`](DecodeError::HeaderListTooLarge), which gets
    /// PROTOCOL_ERROR only so that this returns something: callers answer
    /// it with a 431 response (or RST_STREAM) and keep the connection.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::HeaderListTooLarge => ErrorCode::PROTOCOL_ERROR,
            _ => ErrorCode::COMPRESSION_ERROR,
        }
    }
}
