//! A response a filter holds until its end (`FilterCx::hold_response`): its head, which the filter's later hooks may still change (status, fields), and its body so far; it goes downstream whole, with its length, once the upstream's answer ended.

use bytes::BytesMut;
use h2wire::message::HeaderList;

use super::edits::{EditError, HeaderEdits};

/// A held response.
#[derive(Debug)]
pub struct HeldResponse {
    pub(crate) status: u16,
    /// The upstream's head, and the edits that go over it.
    pub(crate) head: HeaderList,
    pub(crate) edits: HeaderEdits,
    pub(crate) body: BytesMut,
}

impl HeldResponse {
    pub fn status(&self) -> u16 {
        self.status
    }

    pub fn set_status(&mut self, status: u16) {
        self.status = status;
    }

    /// The first value of field `name` (lowercase), edits applied.
    pub fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.edits.get(name, self.head.get(name))
    }

    pub fn set(&mut self, name: &[u8], value: &[u8]) -> Result<(), EditError> {
        self.edits.set(name, value)
    }

    pub fn remove(&mut self, name: &[u8]) -> Result<(), EditError> {
        self.edits.remove(name)
    }

    /// The body so far (what the filters' body hooks passed on).
    pub fn body_mut(&mut self) -> &mut BytesMut {
        &mut self.body
    }
}
