//! Header edits a filter makes: fields removed by name and fields added, applied over the head as it goes out, so the head itself (a decoded, pooled list) is never copied to change it.
//!
//! Only regular fields are edited: pseudo-headers, `host`, `te` and the
//! hop-by-hop fields belong to the gateway (the route's rewrites, the
//! codecs' framing), and a name that is not a token or a value with a
//! control character (CR, LF, NUL) is refused, so a filter cannot split a
//! response or make an HTTP/2 head malformed.

use engine::headers::is_hop_by_hop;

/// Fields removed and added over a head. Empty until a filter edits: no
/// allocation for a stream no filter touches. The added fields' bytes
/// sit back to back in one buffer (a route adding four fields makes two
/// allocations, not eight).
#[derive(Debug, Default, Clone)]
pub struct HeaderEdits {
    /// Lowercase names whose original fields are dropped: where each is
    /// in `bytes` (kept with the buffer: no allocation per removal once
    /// the edits are warm).
    removed: Vec<[u32; 2]>,
    /// The removed names, and the added fields' lowercase names and
    /// values, back to back; bytes of fields removed again stay until the
    /// edits are cleared.
    bytes: Vec<u8>,
    /// Fields added after the originals, in order: where each name
    /// starts, where it ends (its value starts), where its value ends.
    added: Vec<[u32; 3]>,
}

impl PartialEq for HeaderEdits {
    fn eq(&self, other: &Self) -> bool {
        self.removed_names().eq(other.removed_names()) && self.added().eq(other.added())
    }
}

impl Eq for HeaderEdits {}

/// Why an edit was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    #[error("not a field name (RFC 9110 token)")]
    BadName,
    #[error("a pseudo-header, host, a te other than trailers or a hop-by-hop field: the gateway sets those")]
    Reserved,
    #[error("a field value with CR, LF or NUL")]
    BadValue,
}

/// RFC 9110's `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Whether a filter may edit `name` (lowercase).
fn check_name(name: &[u8]) -> Result<(), EditError> {
    if name.first() == Some(&b':') {
        return Err(EditError::Reserved);
    }
    if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
        return Err(EditError::BadName);
    }
    // `te` is checked with its value (`trailers` is a filter's to add:
    // gRPC-Web's).
    if name == b"host" || (name != b"te" && is_hop_by_hop(name)) {
        return Err(EditError::Reserved);
    }
    Ok(())
}

/// A field a filter may add: `te` only as `trailers`.
fn check_field(name: &[u8], value: &[u8]) -> Result<(), EditError> {
    check_name(name)?;
    if name == b"te" && !engine::headers::keep_te(value) {
        return Err(EditError::Reserved);
    }
    check_value(value)
}

/// `name` lowercased, without allocating for the usual lowercase name.
fn lowercase(name: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    match name.iter().any(u8::is_ascii_uppercase) {
        true => std::borrow::Cow::Owned(name.to_ascii_lowercase()),
        false => std::borrow::Cow::Borrowed(name),
    }
}

fn check_value(value: &[u8]) -> Result<(), EditError> {
    match value.iter().any(|&b| matches!(b, b'\r' | b'\n' | 0)) {
        true => Err(EditError::BadValue),
        false => Ok(()),
    }
}

impl HeaderEdits {
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.added.is_empty()
    }

    /// Empties the edits, keeping their buffers for the next head.
    pub(crate) fn clear(&mut self) {
        self.removed.clear();
        self.bytes.clear();
        self.added.clear();
    }

    /// Adds a field after the others of its name.
    pub fn append(&mut self, name: &[u8], value: &[u8]) -> Result<(), EditError> {
        let name = lowercase(name);
        check_field(&name, value)?;
        self.push(&name, value);
        Ok(())
    }

    /// Adds a field whose name and value were checked before (a route's
    /// literal header, validated at load): no check per request.
    pub(crate) fn append_checked(&mut self, name: &[u8], value: &[u8]) {
        debug_assert!(check_name(name).is_ok() && check_value(value).is_ok());
        self.push(name, value);
    }

    fn push(&mut self, name: &[u8], value: &[u8]) {
        self.room();
        let start = self.bytes.len() as u32;
        self.bytes.extend_from_slice(name);
        let mid = self.bytes.len() as u32;
        self.bytes.extend_from_slice(value);
        self.added.push([start, mid, self.bytes.len() as u32]);
    }

    /// Drops every field named `name`, the original ones and those added
    /// before.
    pub fn remove(&mut self, name: &[u8]) -> Result<(), EditError> {
        let name = lowercase(name);
        check_name(&name)?;
        self.remove_checked(&name);
        Ok(())
    }

    fn remove_checked(&mut self, name: &[u8]) {
        let bytes = &self.bytes;
        self.added
            .retain(|[s, m, _]| bytes[*s as usize..*m as usize] != *name);
        if !self.removes(name) {
            self.room();
            let start = self.bytes.len() as u32;
            self.bytes.extend_from_slice(name);
            self.removed.push([start, self.bytes.len() as u32]);
        }
    }

    /// The first edit of a head makes room for a few fields at once.
    fn room(&mut self) {
        if self.bytes.capacity() == 0 {
            self.bytes.reserve(256);
        }
    }

    /// Replaces every field named `name` with one of `value`.
    pub fn set(&mut self, name: &[u8], value: &[u8]) -> Result<(), EditError> {
        check_field(&lowercase(name), value)?;
        self.remove(name)?;
        self.append(name, value)
    }

    /// [`set`](Self::set) for a lowercase name and a value checked before
    /// (the config's, validated at load): no check per head.
    pub(crate) fn set_checked(&mut self, name: &[u8], value: &[u8]) {
        debug_assert!(check_name(name).is_ok() && check_value(value).is_ok());
        self.remove_checked(name);
        self.push(name, value);
    }

    /// The names whose original fields are dropped.
    fn removed_names(&self) -> impl Iterator<Item = &[u8]> {
        self.removed
            .iter()
            .map(|&[s, e]| &self.bytes[s as usize..e as usize])
    }

    /// Whether the original fields named `name` (lowercase) are dropped.
    pub fn removes(&self, name: &[u8]) -> bool {
        self.removed_names().any(|n| n == name)
    }

    /// Whether the edits touch `name` (lowercase): remove or add it.
    pub fn touches(&self, name: &[u8]) -> bool {
        self.removes(name) || self.added().any(|(n, _)| n == name)
    }

    /// The first value of `name` (lowercase) with the edits applied over
    /// `original`, the head's own first value.
    pub fn get<'a>(&'a self, name: &[u8], original: Option<&'a [u8]>) -> Option<&'a [u8]> {
        original
            .filter(|_| !self.removes(name))
            .or_else(|| self.added().find(|(n, _)| *n == name).map(|(_, v)| v))
    }

    /// The fields added, in order.
    pub fn added(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.added.iter().map(|&[s, m, e]| {
            (
                &self.bytes[s as usize..m as usize],
                &self.bytes[m as usize..e as usize],
            )
        })
    }

    /// Takes `other`'s edits after its own.
    pub fn extend(&mut self, other: HeaderEdits) {
        for name in other.removed_names() {
            // Names in edits were checked when they went in.
            self.remove_checked(name);
        }
        for (name, value) in other.added() {
            self.push(name, value);
        }
    }

    /// `fields` with the edits applied: those removed dropped, those added
    /// after.
    pub fn apply<'a>(
        &'a self,
        fields: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    ) -> impl Iterator<Item = (&'a [u8], &'a [u8])> {
        fields
            .filter(move |(n, _)| !self.removes(n))
            .chain(self.added())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Fields = Vec<(Vec<u8>, Vec<u8>)>;

    fn out(e: &HeaderEdits, fields: &[(&'static [u8], &'static [u8])]) -> Fields {
        e.apply(fields.iter().copied())
            .map(|(n, v)| (n.to_vec(), v.to_vec()))
            .collect()
    }

    fn pair(n: &[u8], v: &[u8]) -> (Vec<u8>, Vec<u8>) {
        (n.to_vec(), v.to_vec())
    }

    #[test]
    fn edits_apply_over_the_original_fields() {
        let fields: &[(&[u8], &[u8])] = &[(b"a", b"1"), (b"b", b"2"), (b"a", b"3")];
        let mut e = HeaderEdits::default();
        assert!(e.is_empty());
        assert_eq!(out(&e, fields).len(), 3);
        e.append(b"X-New", b"x").unwrap();
        e.remove(b"A").unwrap();
        assert_eq!(
            out(&e, fields),
            vec![pair(b"b", b"2"), pair(b"x-new", b"x")]
        );
        e.set(b"b", b"two").unwrap();
        assert_eq!(
            out(&e, fields),
            vec![pair(b"x-new", b"x"), pair(b"b", b"two")]
        );
        assert_eq!(e.get(b"b", Some(b"2")), Some(&b"two"[..]));
        assert_eq!(e.get(b"c", Some(b"3")), Some(&b"3"[..]));
        assert!(e.touches(b"a") && e.touches(b"x-new") && !e.touches(b"c"));
        e.remove(b"x-new").unwrap();
        assert_eq!(e.get(b"x-new", None), None, "an added field removed again");
    }

    #[test]
    fn fields_the_gateway_owns_and_malformed_ones_are_refused() {
        let mut e = HeaderEdits::default();
        for name in [&b":path"[..], b"host", b"Connection", b"transfer-encoding"] {
            assert_eq!(e.append(name, b"v"), Err(EditError::Reserved), "{name:?}");
            assert_eq!(e.remove(name), Err(EditError::Reserved), "{name:?}");
        }
        // `te` only as gRPC's `trailers`.
        assert_eq!(e.append(b"te", b"gzip"), Err(EditError::Reserved));
        assert_eq!(e.set(b"TE", b"chunked"), Err(EditError::Reserved));
        assert_eq!(e.append(b"", b"v"), Err(EditError::BadName));
        assert_eq!(e.append(b"bad name", b"v"), Err(EditError::BadName));
        assert_eq!(
            e.append(b"x-a", b"v\r\nset-cookie: x"),
            Err(EditError::BadValue)
        );
        assert_eq!(e.set(b"x-a", b"v\n"), Err(EditError::BadValue));
        assert!(e.is_empty(), "nothing refused was kept");
        e.set(b"te", b"trailers").unwrap();
        assert_eq!(e.get(b"te", None), Some(&b"trailers"[..]));
    }

    #[test]
    fn extend_takes_the_later_edits_over_the_earlier() {
        let mut first = HeaderEdits::default();
        first.append(b"x-a", b"1").unwrap();
        let mut later = HeaderEdits::default();
        later.set(b"x-a", b"2").unwrap();
        first.extend(later);
        let fields: &[(&[u8], &[u8])] = &[(b"x-a", b"0")];
        assert_eq!(out(&first, fields), vec![pair(b"x-a", b"2")]);
    }
}
