//! What a well-formed request or response head says: its pseudo-header
//! fields and content-length, as slices of the header list.

/// The pseudo-header fields of a well-formed request; slices of the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHead<'a> {
    pub method: &'a [u8],
    /// Absent only on a plain CONNECT.
    pub scheme: Option<&'a [u8]>,
    pub authority: Option<&'a [u8]>,
    /// Absent only on a plain CONNECT.
    pub path: Option<&'a [u8]>,
    /// Extended CONNECT (RFC 8441); the caller decides whether it is allowed.
    pub protocol: Option<&'a [u8]>,
    /// The content-length field's value, when there is one (checked as by
    /// [`content_length`](super::content_length)).
    pub content_length: Option<u64>,
}

/// What a well-formed response head says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseHead {
    /// 100..=599.
    pub status: u16,
    pub content_length: Option<u64>,
}

impl ResponseHead {
    /// A 1xx response: a final one is still to come (§8.1).
    pub fn is_informational(&self) -> bool {
        self.status < 200
    }
}
