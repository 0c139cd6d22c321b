//! Every §8 rule, met and broken, on hand-built header lists; and the
//! optimized checks against the plain ones on random lists.

mod fields;
mod heads;
mod random;

use super::*;

fn list(fields: &[(&[u8], &[u8])]) -> HeaderList {
    let mut l = HeaderList::new();
    for (n, v) in fields {
        l.push(n, v, false);
    }
    l
}

const GET: [(&[u8], &[u8]); 4] = [
    (b":method", b"GET"),
    (b":scheme", b"https"),
    (b":authority", b"example.com"),
    (b":path", b"/"),
];

/// A GET with `extra` fields after the pseudo-headers.
fn get_with(extra: &[(&[u8], &[u8])]) -> Result<(), Malformed> {
    let mut fields = GET.to_vec();
    fields.extend_from_slice(extra);
    check_request(&list(&fields)).map(|_| ())
}

/// A request of exactly these fields.
fn request(fields: &[(&[u8], &[u8])]) -> Result<(), Malformed> {
    check_request(&list(fields)).map(|_| ())
}

fn response(fields: &[(&[u8], &[u8])]) -> Result<ResponseHead, Malformed> {
    check_response(&list(fields))
}
