//! RFC 7541 Appendix C, decoded and re-encoded (C.1 is in `int.rs`).

use super::{decode, encode, hex, owned};
use crate::hpack::{Decoder, Encoder};

struct Step {
    block: &'static str,
    fields: &'static [(&'static str, &'static str)],
    /// Dynamic table after the block, newest first.
    table: &'static [(&'static str, &'static str)],
    size: usize,
}

fn table_of(d: &Decoder) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..d.table().len())
        .map(|i| {
            let (n, v) = d.table().get(i).unwrap();
            (n.to_vec(), v.to_vec())
        })
        .collect()
}

fn check_decoding(max_table_size: usize, steps: &[Step]) {
    let mut d = Decoder::new(max_table_size);
    for (i, s) in steps.iter().enumerate() {
        assert_eq!(
            decode(&mut d, &hex(s.block)).unwrap(),
            owned(s.fields),
            "block {i}"
        );
        let table: Vec<_> = s
            .table
            .iter()
            .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect();
        assert_eq!(table_of(&d), table, "block {i}");
        assert_eq!(d.table_size(), s.size, "block {i}");
    }
}

/// Encodes the steps' fields with one encoder, checks each block against
/// `expected` (hex), and decodes them in step with a fresh decoder.
fn check_encoding(max_table_size: usize, huffman: bool, steps: &[Step], expected: &[&str]) {
    let mut e = Encoder::new();
    e.set_huffman(huffman);
    e.set_max_table_size(max_table_size);
    let mut d = Decoder::new(4096);
    d.set_max_table_size(max_table_size);
    for (i, (s, want)) in steps.iter().zip(expected).enumerate() {
        let block = encode(&mut e, &owned(s.fields));
        assert_eq!(block.to_vec(), hex(want), "block {i}");
        assert_eq!(
            decode(&mut d, &block).unwrap(),
            owned(s.fields),
            "block {i}"
        );
        assert_eq!(d.table_size(), s.size, "block {i}");
        assert_eq!(e.table().size(), s.size, "block {i}");
    }
}

#[test]
fn c2_1_literal_with_indexing() {
    let mut d = Decoder::new(4096);
    let block = hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572");
    assert_eq!(
        decode(&mut d, &block).unwrap(),
        owned(&[("custom-key", "custom-header")])
    );
    assert_eq!(
        table_of(&d),
        [(b"custom-key".to_vec(), b"custom-header".to_vec())]
    );
    assert_eq!(d.table_size(), 55);
}

#[test]
fn c2_2_literal_without_indexing() {
    let mut d = Decoder::new(4096);
    let block = hex("040c 2f73 616d 706c 652f 7061 7468");
    assert_eq!(
        decode(&mut d, &block).unwrap(),
        owned(&[(":path", "/sample/path")])
    );
    assert_eq!(d.table_size(), 0);
}

#[test]
fn c2_3_literal_never_indexed() {
    let mut d = Decoder::new(4096);
    let block = hex("1008 7061 7373 776f 7264 0673 6563 7265 74");
    assert_eq!(
        decode(&mut d, &block).unwrap(),
        [(b"password".to_vec(), b"secret".to_vec(), true)]
    );
    assert_eq!(d.table_size(), 0);
    // Re-encoded the same way.
    let mut e = Encoder::new();
    e.set_huffman(false);
    assert_eq!(
        encode(&mut e, &[(b"password".to_vec(), b"secret".to_vec(), true)]).to_vec(),
        block
    );
}

#[test]
fn c2_4_indexed() {
    let mut d = Decoder::new(4096);
    assert_eq!(
        decode(&mut d, &[0x82]).unwrap(),
        owned(&[(":method", "GET")])
    );
    assert_eq!(d.table_size(), 0);
}

const REQ1: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
];
const REQ2: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
    ("cache-control", "no-cache"),
];
const REQ3: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "https"),
    (":path", "/index.html"),
    (":authority", "www.example.com"),
    ("custom-key", "custom-value"),
];
const REQ_T1: &[(&str, &str)] = &[(":authority", "www.example.com")];
const REQ_T2: &[(&str, &str)] = &[
    ("cache-control", "no-cache"),
    (":authority", "www.example.com"),
];
const REQ_T3: &[(&str, &str)] = &[
    ("custom-key", "custom-value"),
    ("cache-control", "no-cache"),
    (":authority", "www.example.com"),
];

const C3: [Step; 3] = [
    Step {
        block: "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        fields: REQ1,
        table: REQ_T1,
        size: 57,
    },
    Step {
        block: "8286 84be 5808 6e6f 2d63 6163 6865",
        fields: REQ2,
        table: REQ_T2,
        size: 110,
    },
    Step {
        block: "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
        fields: REQ3,
        table: REQ_T3,
        size: 164,
    },
];

const C4: [Step; 3] = [
    Step {
        block: "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        fields: REQ1,
        table: REQ_T1,
        size: 57,
    },
    Step {
        block: "8286 84be 5886 a8eb 1064 9cbf",
        fields: REQ2,
        table: REQ_T2,
        size: 110,
    },
    Step {
        block: "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
        fields: REQ3,
        table: REQ_T3,
        size: 164,
    },
];

const DATE1: &str = "Mon, 21 Oct 2013 20:13:21 GMT";
const DATE2: &str = "Mon, 21 Oct 2013 20:13:22 GMT";
const LOC: &str = "https://www.example.com";
const COOKIE: &str = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";

const RESP1: &[(&str, &str)] = &[
    (":status", "302"),
    ("cache-control", "private"),
    ("date", DATE1),
    ("location", LOC),
];
const RESP2: &[(&str, &str)] = &[
    (":status", "307"),
    ("cache-control", "private"),
    ("date", DATE1),
    ("location", LOC),
];
const RESP3: &[(&str, &str)] = &[
    (":status", "200"),
    ("cache-control", "private"),
    ("date", DATE2),
    ("location", LOC),
    ("content-encoding", "gzip"),
    ("set-cookie", COOKIE),
];
const RESP_T1: &[(&str, &str)] = &[
    ("location", LOC),
    ("date", DATE1),
    ("cache-control", "private"),
    (":status", "302"),
];
const RESP_T2: &[(&str, &str)] = &[
    (":status", "307"),
    ("location", LOC),
    ("date", DATE1),
    ("cache-control", "private"),
];
const RESP_T3: &[(&str, &str)] = &[
    ("set-cookie", COOKIE),
    ("content-encoding", "gzip"),
    ("date", DATE2),
];

const C5: [Step; 3] = [
    Step {
        block: "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
                2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
                6c65 2e63 6f6d",
        fields: RESP1,
        table: RESP_T1,
        size: 222,
    },
    Step {
        block: "4803 3330 37c1 c0bf",
        fields: RESP2,
        table: RESP_T2,
        size: 222,
    },
    Step {
        block: "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
                54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
                5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e
                3d31",
        fields: RESP3,
        table: RESP_T3,
        size: 215,
    },
];

const C6: [Step; 3] = [
    Step {
        block: "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
                2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        fields: RESP1,
        table: RESP_T1,
        size: 222,
    },
    Step {
        block: "4883 640e ffc1 c0bf",
        fields: RESP2,
        table: RESP_T2,
        size: 222,
    },
    Step {
        block: "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
                77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
                9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        fields: RESP3,
        table: RESP_T3,
        size: 215,
    },
];

#[test]
fn c3_requests_without_huffman() {
    check_decoding(4096, &C3);
}

#[test]
fn c4_requests_with_huffman() {
    check_decoding(4096, &C4);
}

#[test]
fn c5_responses_without_huffman() {
    check_decoding(256, &C5);
}

#[test]
fn c6_responses_with_huffman() {
    check_decoding(256, &C6);
}

#[test]
fn c3_encoded_byte_for_byte() {
    check_encoding(4096, false, &C3, &C3.map(|s| s.block));
}

#[test]
fn c4_encoded_byte_for_byte() {
    check_encoding(4096, true, &C4, &C4.map(|s| s.block));
}

#[test]
fn c5_encoded_byte_for_byte() {
    // Our encoder starts at 4096 and announces 256 first.
    let first = format!("3fe101 {}", C5[0].block);
    check_encoding(256, false, &C5, &[&first, C5[1].block, C5[2].block]);
}

#[test]
fn c6_encoded_byte_for_byte_but_for_307() {
    // The RFC Huffman-codes "307" at the same length as the raw string; we
    // only take Huffman when strictly shorter, which gives C.5.2's bytes.
    let first = format!("3fe101 {}", C6[0].block);
    check_encoding(256, true, &C6, &[&first, C5[1].block, C6[2].block]);
}
