//! Header edits a filter makes: fields removed by name and fields added, applied over the head as it goes out, so the head itself (a decoded, pooled list) is never copied to change it.

/// A field added: lowercase name, value.
type Field = (Box<[u8]>, Box<[u8]>);

/// Fields removed and added over a head. Empty until a filter edits: no
/// allocation for a stream no filter touches.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HeaderEdits {
    /// Lowercase names whose original fields are dropped.
    removed: Vec<Box<[u8]>>,
    /// Fields added after the originals, lowercase names, in order.
    added: Vec<Field>,
}

fn lowercase(name: &[u8]) -> Box<[u8]> {
    name.to_ascii_lowercase().into_boxed_slice()
}

impl HeaderEdits {
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.added.is_empty()
    }

    /// Adds a field after the others of its name.
    pub fn append(&mut self, name: &[u8], value: &[u8]) {
        self.added.push((lowercase(name), value.into()));
    }

    /// Drops every field named `name`, the original ones and those added
    /// before.
    pub fn remove(&mut self, name: &[u8]) {
        let name = lowercase(name);
        self.added.retain(|(n, _)| *n != name);
        if !self.removed.contains(&name) {
            self.removed.push(name);
        }
    }

    /// Replaces every field named `name` with one of `value`.
    pub fn set(&mut self, name: &[u8], value: &[u8]) {
        self.remove(name);
        self.append(name, value);
    }

    /// Whether the original fields named `name` (lowercase) are dropped.
    pub fn removes(&self, name: &[u8]) -> bool {
        self.removed.iter().any(|n| **n == *name)
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
        self.added.iter().map(|(n, v)| (&**n, &**v))
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

    fn out(e: &HeaderEdits, fields: &[(&'static [u8], &'static [u8])]) -> Vec<(Vec<u8>, Vec<u8>)> {
        e.apply(fields.iter().copied())
            .map(|(n, v)| (n.to_vec(), v.to_vec()))
            .collect()
    }

    #[test]
    fn edits_apply_over_the_original_fields() {
        let fields: &[(&[u8], &[u8])] = &[(b"a", b"1"), (b"b", b"2"), (b"a", b"3")];
        let mut e = HeaderEdits::default();
        assert!(e.is_empty());
        assert_eq!(out(&e, fields).len(), 3);
        e.append(b"X-New", b"x");
        e.remove(b"A");
        assert_eq!(
            out(&e, fields),
            vec![
                (b"b".to_vec(), b"2".to_vec()),
                (b"x-new".to_vec(), b"x".to_vec())
            ]
        );
        e.set(b"b", b"two");
        assert_eq!(
            out(&e, fields),
            vec![
                (b"x-new".to_vec(), b"x".to_vec()),
                (b"b".to_vec(), b"two".to_vec())
            ]
        );
        assert_eq!(e.get(b"b", Some(b"2")), Some(&b"two"[..]));
        assert_eq!(e.get(b"c", Some(b"3")), Some(&b"3"[..]));
        e.remove(b"x-new");
        assert_eq!(e.get(b"x-new", None), None, "an added field removed again");
    }
}
