//! Request and response heads as filters see them: the decoded head, read through the filters' edits, which apply over it as it goes out.

use h2wire::message::HeaderList;

use super::edits::{EditError, HeaderEdits};

/// A request head as filters see it: the decoded head, with their edits
/// applied over it when it goes upstream.
pub struct RequestHead<'a> {
    pub(crate) list: &'a HeaderList,
    pub(crate) edits: &'a mut HeaderEdits,
    pub(crate) end_stream: bool,
}

impl RequestHead<'_> {
    /// The first value of field `name` (lowercase; pseudo-headers too),
    /// edits applied.
    pub fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.edits.get(name, self.list.get(name))
    }

    /// Every value of `name` as decoded (edits not applied): `cookie`
    /// crumbs, repeated fields.
    pub fn get_all<'s>(&'s self, name: &'s [u8]) -> impl Iterator<Item = &'s [u8]> + 's {
        self.list.get_all(name)
    }

    /// Whether an Envoy header matcher takes this request (`host` is read
    /// as `:authority`, as route matching reads it; edits applied).
    pub fn matches(&self, m: &engine::HeaderMatcher) -> bool {
        let name = match m.name.as_str() {
            "host" => ":authority",
            n => n,
        };
        let value = self
            .get(name.as_bytes())
            .and_then(|v| std::str::from_utf8(v).ok());
        engine::route::header_value_matches(m, value)
    }

    /// The request has no body (END_STREAM came with its head).
    pub fn end_stream(&self) -> bool {
        self.end_stream
    }

    /// Adds a regular field (see [`HeaderEdits`] for what is refused).
    pub fn append(&mut self, name: &[u8], value: &[u8]) -> Result<(), EditError> {
        self.edits.append(name, value)
    }

    /// Replaces a regular field; `x-forwarded-for` replaces the one the
    /// gateway would send.
    pub fn set(&mut self, name: &[u8], value: &[u8]) -> Result<(), EditError> {
        self.edits.set(name, value)
    }

    /// Removes a regular field.
    pub fn remove(&mut self, name: &[u8]) -> Result<(), EditError> {
        self.edits.remove(name)
    }
}

/// A response head as filters see it: the upstream's (or a local reply's)
/// fields, with their edits applied over them when it goes downstream.
pub struct ResponseHead<'a> {
    pub(crate) status: u16,
    pub(crate) list: Option<&'a HeaderList>,
    pub(crate) edits: &'a mut HeaderEdits,
    pub(crate) end_stream: bool,
    /// A local reply's body.
    pub(crate) local_body: Option<&'a mut bytes::Bytes>,
}

impl ResponseHead<'_> {
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The response has no body (END_STREAM came with its head: HEAD,
    /// 204, 304, an empty reply).
    pub fn end_stream(&self) -> bool {
        self.end_stream
    }

    /// Every value of `name` as the upstream sent it (edits not applied;
    /// none for a local reply).
    pub fn get_all<'s>(&'s self, name: &'s [u8]) -> impl Iterator<Item = &'s [u8]> + 's {
        self.list.into_iter().flat_map(move |l| l.get_all(name))
    }

    /// The gateway made this response (a local reply), not the upstream.
    pub fn is_local(&self) -> bool {
        self.list.is_none()
    }

    /// A local reply's body, which the hook may replace (the reply's
    /// length follows it); `None` for an upstream's response, whose body
    /// goes through the body hooks.
    pub fn local_body(&mut self) -> Option<&mut bytes::Bytes> {
        self.local_body.as_deref_mut()
    }

    /// The first value of field `name` (lowercase), edits applied.
    pub fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.edits.get(name, self.list.and_then(|l| l.get(name)))
    }

    pub fn append(&mut self, name: &[u8], value: &[u8]) -> Result<(), EditError> {
        self.edits.append(name, value)
    }

    pub fn set(&mut self, name: &[u8], value: &[u8]) -> Result<(), EditError> {
        self.edits.set(name, value)
    }

    pub fn remove(&mut self, name: &[u8]) -> Result<(), EditError> {
        self.edits.remove(name)
    }
}
