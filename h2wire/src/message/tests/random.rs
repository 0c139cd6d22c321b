//! The optimized checks against the plain ones (`reference`), on random
//! lists made from pieces that sit on the rules' edges.

use super::*;
use crate::message::reference;

/// Field names: pseudo-headers known, unknown and misspelled,
/// connection-specific names, and names that are no tokens.
const NAMES: &[&[u8]] = &[
    b":method",
    b":scheme",
    b":authority",
    b":path",
    b":protocol",
    b":status",
    b":foo",
    b":Method",
    b":",
    b"::path",
    b":meth",
    b":pathx",
    b"",
    b"accept",
    b"x-Foo",
    b"X",
    b"host",
    b"te",
    b"connection",
    b"upgrade",
    b"keep-alive",
    b"transfer-encoding",
    b"proxy-connection",
    b"content-length",
    b"a b",
    b"x:y",
    b"x\x00",
    b"\xff",
    b"user-agent",
];

/// Values on the rules' edges: methods, schemes, paths, authorities,
/// `te`, content lengths, statuses, with whitespace and odd bytes.
const VALUES: &[&[u8]] = &[
    b"",
    b" x",
    b"x ",
    b"\t",
    b"GET",
    b"CONNECT",
    b"OPTIONS",
    b"connect",
    b"G T",
    b"http",
    b"https",
    b"HTTPS",
    b"foo+bar.1",
    b"1foo",
    b"/",
    b"*",
    b"a/b",
    b"/a b",
    b"/\x7f",
    b"/\x80",
    b"example.com",
    b"Example.COM:80",
    b"u:p@h",
    b"[::1]:443",
    b"[::1]",
    b"example.com:",
    b"example.com:443",
    b"trailers",
    b"TRAILERS",
    b"12",
    b"012",
    b"1,2",
    b"99999999999999999999",
    b"200",
    b"599",
    b"600",
    b"99",
    b"websocket",
    b"/index.html?q=1&r=2#x",
];

/// What random pieces are made of: NUL/CR/LF/whitespace/DEL/'@'/high
/// bytes, URI delimiters, token characters.
const BYTES: &[u8] = b"\x00\n\r\t \x7f\x80\xff@:%[]/*aAzZ09-._~,;=!#$&'()+^`|\"<>?";

/// A xorshift generator with a fixed seed: every run checks the same lists.
struct Rng(u64);

impl Rng {
    /// A number in `0..n`.
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// A name or value: random bytes, a known piece with one byte replaced,
/// or a known piece as it is.
fn piece(pieces: &[&[u8]], rnd: &mut Rng) -> Vec<u8> {
    match rnd.below(4) {
        // A random string, long enough for several words at times.
        0 => (0..rnd.below(24))
            .map(|_| BYTES[rnd.below(BYTES.len())])
            .collect(),
        // A known piece with one byte replaced.
        1 => {
            let mut p = pieces[rnd.below(pieces.len())].to_vec();
            if !p.is_empty() {
                let at = rnd.below(p.len());
                p[at] = BYTES[rnd.below(BYTES.len())];
            }
            p
        }
        _ => pieces[rnd.below(pieces.len())].to_vec(),
    }
}

/// One random field list.
fn random_fields(rnd: &mut Rng) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut fields = Vec::new();
    // Mostly a valid request or response to start from, so that the
    // later rules are reached too.
    match rnd.below(3) {
        0 => fields.extend(GET.iter().map(|(n, v)| (n.to_vec(), v.to_vec()))),
        1 => fields.push((b":status".to_vec(), b"200".to_vec())),
        _ => {}
    }
    for _ in 0..rnd.below(5) {
        let name = piece(NAMES, rnd);
        let value = piece(VALUES, rnd);
        let at = rnd.below(fields.len() + 1);
        fields.insert(at, (name, value));
    }
    if !fields.is_empty() && rnd.below(3) == 0 {
        // A valid list with one value broken.
        let i = rnd.below(fields.len());
        fields[i].1 = piece(VALUES, rnd);
    }
    fields
}

/// `check_*` and `content_length` give exactly what `reference` gives for
/// `l`; `shown` names the list when they do not.
fn assert_agree(l: &HeaderList, shown: &dyn Fn() -> String) {
    assert_eq!(check_request(l), reference::check_request(l), "{}", shown());
    assert_eq!(
        check_response(l),
        reference::check_response(l),
        "{}",
        shown()
    );
    assert_eq!(
        check_trailers(l),
        reference::check_trailers(l),
        "{}",
        shown()
    );
    assert_eq!(
        content_length(l),
        reference::content_length(l),
        "{}",
        shown()
    );
}

/// Random lists from pieces that sit on the rules' edges (pseudo-headers
/// known, unknown and misspelled, connection-specific names, values with
/// NUL/CR/LF/whitespace/DEL/'@'/high bytes at either end or inside, short
/// and long): `check_*` must give exactly what `reference` gives, the same
/// error for the same list included.
#[test]
fn the_checks_agree_with_the_reference_on_random_lists() {
    let mut rnd = Rng(0x2545_f491_4f6c_dd1d);
    let mut checked = 0;
    for round in 0..200_000 {
        let fields = random_fields(&mut rnd);
        let mut l = HeaderList::new();
        for (n, v) in &fields {
            l.push(n, v, false);
        }
        let shown = || format!("round {round}: {fields:?}");
        assert_agree(&l, &shown);
        checked += usize::from(check_request(&l).is_ok() || check_response(&l).is_ok());
    }
    // Enough of them pass for the later rules to be exercised.
    assert!(checked > 1000, "only {checked} lists passed");
}
