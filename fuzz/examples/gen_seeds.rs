//! Writes the fuzz targets' seed inputs, `corpus/<target>/seed-<name>`,
//! from what the unit tests use: frames from h2wire's encoders, RFC 7541
//! Appendix C header blocks, the bytes a real ClientConn and ServerConn
//! exchange, the session tests' cookie values, the example xDS
//! resources, and DNS answers as the test DNS server writes them. Deterministic: run it again and git shows no change.
//!
//! `cargo run --example gen_seeds` (in fuzz/; stable is enough).

use std::collections::BTreeMap;
use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use gateway_fuzz::ConnInput;
use h2wire::conn::{ClientConfig, ClientConn, ClientEvent, Event, ServerConfig, ServerConn};
use h2wire::frame::{
    begin_headers, encode_data, encode_goaway, encode_ping, encode_rst_stream, encode_settings,
    encode_settings_ack, encode_window_update, finish_headers, flags, kind, FrameHeader, Settings,
};
use h2wire::hpack::Encoder;
use h2wire::ErrorCode;
use prost::Message;

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut total = 0;
    for (target, seeds) in [
        ("h2_frames", h2_frames()),
        ("hpack_differential", hpack_differential()),
        ("server_conn", server_conn()),
        ("client_conn", client_conn()),
        ("session_cookie", session_cookie()),
        ("xds_resources", xds_resources()),
        ("dns_answer", dns_answer()),
    ] {
        let dir = root.join(target);
        fs::create_dir_all(&dir).unwrap();
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if name_of(&path).starts_with("seed-") {
                fs::remove_file(path).unwrap();
            }
        }
        for (name, bytes) in &seeds {
            total += bytes.len();
            fs::write(dir.join(format!("seed-{name}")), bytes).unwrap();
        }
        println!("{target}: {} seeds", seeds.len());
    }
    println!("{total} bytes in all");
}

fn name_of(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

type Seeds = BTreeMap<String, Vec<u8>>;

fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| b.is_ascii_hexdigit()).collect();
    digits
        .chunks(2)
        .map(|c| u8::from_str_radix(std::str::from_utf8(c).unwrap(), 16).unwrap())
        .collect()
}

fn raw_frame(dst: &mut BytesMut, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    FrameHeader {
        len: payload.len() as u32,
        kind,
        flags,
        stream,
    }
    .encode(dst);
    dst.extend_from_slice(payload);
}

fn request_block(enc: &mut Encoder, dst: &mut BytesMut, extra: &[(&[u8], &[u8])]) {
    enc.begin_block(dst);
    for (n, v) in [
        (&b":method"[..], &b"GET"[..]),
        (b":scheme", b"https"),
        (b":path", b"/index.html"),
        (b":authority", b"www.example.com"),
    ]
    .into_iter()
    .chain(extra.iter().copied())
    {
        enc.encode_field(n, v, false, dst);
    }
}

// --- h2_frames: [mode][frames] -------------------------------------------

fn h2_frames() -> Seeds {
    let mut one: Vec<(&str, BytesMut)> = Vec::new();
    let mut b = BytesMut::new();
    encode_settings(
        &mut b,
        &Settings {
            header_table_size: Some(8192),
            enable_push: Some(false),
            max_concurrent_streams: Some(100),
            initial_window_size: Some(1 << 20),
            max_frame_size: Some(1 << 20),
            max_header_list_size: Some(16 << 10),
            enable_connect_protocol: Some(true),
        },
    );
    one.push(("settings", b.split()));
    encode_settings_ack(&mut b);
    one.push(("settings_ack", b.split()));
    encode_data(&mut b, 1, b"hello", true);
    one.push(("data", b.split()));
    // PADDED DATA: pad length 3, "body", 3 bytes of padding.
    raw_frame(&mut b, kind::DATA, flags::PADDED, 3, b"\x03body\0\0\0");
    one.push(("data_padded", b.split()));
    let mut enc = Encoder::new();
    let mark = begin_headers(&mut b);
    request_block(&mut enc, &mut b, &[(b"accept", b"*/*")]);
    finish_headers(&mut b, mark, 1, true, 16_384);
    one.push(("headers", b.split()));
    // The h2compat test's padded, prioritized HEADERS.
    raw_frame(
        &mut b,
        kind::HEADERS,
        flags::PADDED | flags::PRIORITY | flags::END_HEADERS,
        5,
        b"\x03\x80\0\0\x01\xff\x82\x86\0\0\0",
    );
    one.push(("headers_padded_priority", b.split()));
    // A block cut into HEADERS + CONTINUATIONs.
    let mark = begin_headers(&mut b);
    request_block(&mut enc, &mut b, &[(b"x-long", &[b'v'; 100])]);
    finish_headers(&mut b, mark, 7, false, 40);
    one.push(("headers_continuations", b.split()));
    raw_frame(&mut b, kind::PRIORITY, 0, 3, b"\x80\0\0\x01\x0f");
    one.push(("priority", b.split()));
    encode_rst_stream(&mut b, 1, ErrorCode::CANCEL);
    one.push(("rst_stream", b.split()));
    raw_frame(
        &mut b,
        kind::PUSH_PROMISE,
        flags::PADDED | flags::END_HEADERS,
        1,
        b"\x02\0\0\0\x02\x82\0\0",
    );
    one.push(("push_promise", b.split()));
    encode_ping(&mut b, false, *b"pingpong");
    one.push(("ping", b.split()));
    encode_ping(&mut b, true, [0; 8]);
    one.push(("ping_ack", b.split()));
    encode_goaway(&mut b, 41, ErrorCode::ENHANCE_YOUR_CALM, b"calm down");
    one.push(("goaway", b.split()));
    encode_window_update(&mut b, 0, 1 << 20);
    one.push(("window_update", b.split()));
    raw_frame(&mut b, 0x42, 0xff, 9, b"extension");
    one.push(("unknown", b.split()));

    let mut seeds = Seeds::new();
    let mut all = vec![0u8];
    for (name, bytes) in &one {
        let mut v = vec![0u8];
        v.extend_from_slice(bytes);
        seeds.insert(format!("frame_{name}"), v);
        all.extend_from_slice(bytes);
    }
    seeds.insert("all_frames".into(), all.clone());
    // The same with another MAX_FRAME_SIZE and re-split size.
    all[0] = 0x1d;
    seeds.insert("all_frames_split7".into(), all);
    seeds
}

// --- hpack_differential: ([op][len u16 le][block])* ------------------------

fn block_seq(steps: &[(Option<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut v = Vec::new();
    for (size, block) in steps {
        v.push(size.map_or(0, |i| 0x08 | i));
        v.extend_from_slice(&(block.len() as u16).to_le_bytes());
        v.extend_from_slice(block);
    }
    v
}

fn hpack_differential() -> Seeds {
    let c3 = [
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "8286 84be 5808 6e6f 2d63 6163 6865",
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
    ];
    let c4 = [
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8286 84be 5886 a8eb 1064 9cbf",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
    ];
    let c5 = [
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
         2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
         6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
         54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
         5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e
         3d31",
    ];
    let c6 = [
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
         2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ffc1 c0bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
         77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
         9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    ];
    let plain = |blocks: &[&str]| -> Vec<(Option<u8>, Vec<u8>)> {
        blocks.iter().map(|b| (None, hex(b))).collect()
    };
    // C.5 and C.6 run with a 256-byte table (SIZES[4]), which the first
    // block must then announce: a size update (0x3f 0xe1 0x01 = 256) first.
    let small = |blocks: &[&str]| -> Vec<(Option<u8>, Vec<u8>)> {
        blocks
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let mut block = if i == 0 {
                    vec![0x3f, 0xe1, 0x01]
                } else {
                    vec![]
                };
                block.extend(hex(b));
                ((i == 0).then_some(4), block)
            })
            .collect()
    };
    let mut seeds = Seeds::new();
    seeds.insert("rfc_c3".into(), block_seq(&plain(&c3)));
    seeds.insert("rfc_c4".into(), block_seq(&plain(&c4)));
    seeds.insert("rfc_c5".into(), block_seq(&small(&c5)));
    seeds.insert("rfc_c6".into(), block_seq(&small(&c6)));
    // C.2's single representations.
    seeds.insert(
        "rfc_c2".into(),
        block_seq(&plain(&[
            "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
            "040c 2f73 616d 706c 652f 7061 7468",
            "1008 7061 7373 776f 7264 0673 6563 7265 74",
            "82",
        ])),
    );
    // Our encoder, with a table size change down (0) and back up between.
    let mut enc = Encoder::new();
    let mut steps = Vec::new();
    let mut b = BytesMut::new();
    request_block(
        &mut enc,
        &mut b,
        &[(b"cookie", b"session=abc123"), (b"x-trace", b"t1")],
    );
    steps.push((None, b.split().to_vec()));
    request_block(
        &mut enc,
        &mut b,
        &[(b"cookie", b"session=abc123"), (b"x-trace", b"t2")],
    );
    steps.push((None, b.split().to_vec()));
    enc.set_max_table_size(0);
    request_block(&mut enc, &mut b, &[]);
    steps.push((Some(0), b.split().to_vec()));
    enc.set_max_table_size(4096);
    request_block(&mut enc, &mut b, &[(b"authorization", b"Bearer x")]);
    steps.push((Some(5), b.split().to_vec()));
    seeds.insert("h2wire_encoder".into(), block_seq(&steps));
    seeds
}

// --- server_conn / client_conn: a real exchange --------------------------

/// What one side's application does.
#[derive(Clone, Copy)]
enum Scenario {
    Get,
    PostBody,
    TwoRequests,
    BigHeaders,
    ClientReset,
    ManyStreams,
    GoAway,
}

const SCENARIOS: [(&str, Scenario); 7] = [
    ("get", Scenario::Get),
    ("post_body", Scenario::PostBody),
    ("two_requests", Scenario::TwoRequests),
    ("big_headers", Scenario::BigHeaders),
    ("client_reset", Scenario::ClientReset),
    ("many_streams", Scenario::ManyStreams),
    ("goaway", Scenario::GoAway),
];

/// Runs a ClientConn against a ServerConn; returns the bytes each sent.
fn exchange(scenario: Scenario) -> (Vec<u8>, Vec<u8>) {
    let mut client = ClientConn::new(ClientConfig::default());
    let mut server = ServerConn::new(ServerConfig::default());
    let (mut c2s, mut s2c) = (Vec::new(), Vec::new());
    let mut bodies: Vec<(u32, Bytes, bool)> = Vec::new();
    let get = |c: &mut ClientConn, path: &[u8], extra: &[(&[u8], &[u8], bool)], end| {
        c.send_request(
            b"GET",
            b"https",
            b"backend.internal",
            path,
            extra.iter().copied(),
            end,
        )
        .unwrap()
    };
    match scenario {
        Scenario::Get | Scenario::GoAway => {
            get(&mut client, b"/", &[(b"accept", b"*/*", false)], true);
        }
        Scenario::PostBody => {
            let s = client
                .send_request(
                    b"POST",
                    b"https",
                    b"backend.internal",
                    b"/upload",
                    [],
                    false,
                )
                .unwrap();
            bodies.push((s, Bytes::from(vec![b'p'; 5_000]), false));
        }
        Scenario::TwoRequests => {
            get(
                &mut client,
                b"/a",
                &[(b"user-agent", b"gateway-fuzz", false)],
                true,
            );
            let s = client
                .send_request(b"PUT", b"https", b"backend.internal", b"/b", [], false)
                .unwrap();
            bodies.push((s, Bytes::from_static(b"put body"), true));
        }
        Scenario::BigHeaders => {
            // Over 16 KiB whatever the encoder does ('~' has a 13-bit
            // Huffman code, so it goes raw): HEADERS + CONTINUATION.
            let long = vec![b'~'; 17_000];
            let extra = [(&b"cookie"[..], &long[..], true)];
            get(&mut client, b"/big", &extra, true);
        }
        Scenario::ClientReset => {
            let s = get(&mut client, b"/slow", &[], false);
            client.reset(s, ErrorCode::CANCEL);
            get(&mut client, b"/after", &[], true);
        }
        Scenario::ManyStreams => {
            for i in 0..10 {
                get(&mut client, format!("/item/{i}").as_bytes(), &[], true);
            }
        }
    }
    for round in 0..20 {
        for (s, body, trailers) in &mut bodies {
            if !body.is_empty() {
                let _ = client.send_data(*s, body, !*trailers);
                if body.is_empty() && *trailers {
                    let _ = client.send_trailers(*s, [(&b"x-checksum"[..], &b"abc"[..])]);
                }
            }
        }
        let mut wire = BytesMut::new();
        while let Some(chunk) = client.poll_output() {
            wire.extend_from_slice(&chunk);
        }
        if round == 1 && matches!(scenario, Scenario::TwoRequests) {
            // Frames a client may send beside its streams.
            encode_ping(&mut wire, false, *b"fuzzping");
            raw_frame(&mut wire, kind::PRIORITY, 0, 3, b"\0\0\0\x01\x10");
            encode_window_update(&mut wire, 0, 4096);
        }
        c2s.extend_from_slice(&wire);
        server.recv(&mut wire).unwrap();
        while let Some(e) = server.poll_event() {
            match e {
                Event::Request {
                    stream,
                    head,
                    end_stream,
                } => {
                    server.recycle(head);
                    let ct: (&[u8], &[u8]) = (b"content-type", b"text/plain");
                    // A request reset in the same read is gone already:
                    // errors are expected there.
                    if stream == 1 && matches!(scenario, Scenario::TwoRequests) {
                        let _ = server.send_headers(stream, 103, [], false);
                    }
                    let _ = server.send_headers(stream, 200, [ct], false);
                    let mut body = Bytes::from_static(b"hello from the server");
                    // Requests with a body get trailers once it has ended.
                    let _ = server.send_data(stream, &mut body, end_stream);
                }
                Event::Data {
                    stream,
                    data,
                    end_stream,
                } => {
                    server.release(stream, data.len() as u32);
                    if end_stream {
                        let _ = server.send_trailers(stream, [(&b"grpc-status"[..], &b"0"[..])]);
                    }
                }
                Event::Trailers { stream, fields } => {
                    server.recycle(fields);
                    let _ = server.send_trailers(stream, [(&b"grpc-status"[..], &b"0"[..])]);
                }
                _ => {}
            }
        }
        if round == 2 && matches!(scenario, Scenario::GoAway) {
            server.go_away(ErrorCode::NO_ERROR);
        }
        let mut back = BytesMut::new();
        while let Some(chunk) = server.poll_output() {
            back.extend_from_slice(&chunk);
        }
        s2c.extend_from_slice(&back);
        client.recv(&mut back).unwrap();
        while let Some(e) = client.poll_event() {
            match e {
                ClientEvent::Response { head, .. } => client.recycle(head),
                ClientEvent::Trailers { fields, .. } => client.recycle(fields),
                ClientEvent::Data { stream, data, .. } => client.release(stream, data.len() as u32),
                _ => {}
            }
        }
    }
    (c2s, s2c)
}

fn conn_seeds(server_side: bool) -> Seeds {
    let mut seeds = Seeds::new();
    for (name, scenario) in SCENARIOS {
        let (c2s, s2c) = exchange(scenario);
        let wire = if server_side { c2s } else { s2c };
        // config 3: the defaults (100 streams); one read, then reads of
        // 7 and 100 bytes and 4 KiB alternating.
        seeds.insert(name.to_string(), ConnInput::encode(3, 0, &[0], &wire));
        if matches!(scenario, Scenario::TwoRequests) {
            let split = ConnInput::encode(3, 1, &[7, 100, 0x80 | 64], &wire);
            seeds.insert(format!("{name}_split"), split);
        }
    }
    seeds
}

fn server_conn() -> Seeds {
    conn_seeds(true)
}

fn client_conn() -> Seeds {
    conn_seeds(false)
}

// --- dns_answer: [mode][message] -------------------------------------------

fn dns_answer() -> Seeds {
    use dnswire::server::{response, Rr};
    use dnswire::{query, RecordType};
    let mut seeds = Seeds::new();
    // The target answers a query for the mode's name and type whose id is
    // the message's first two bytes: mode 0 is A for web.example.com,
    // 1 AAAA for it, 2 A for "a".
    let mut add =
        |name: &str, mode: u8, qname: &str, rtype, rcode, tc, answers: &[(String, Rr)]| {
            let q = query(0x1234, qname, rtype).unwrap();
            let mut v = vec![mode];
            v.extend_from_slice(&response(&q, rcode, tc, answers));
            seeds.insert(name.to_string(), v);
        };
    let web = "web.example.com".to_string();
    let v4 = |s: &str, ttl| Rr::Addr(s.parse().unwrap(), ttl);
    add(
        "a_two",
        0,
        &web,
        RecordType::A,
        0,
        false,
        &[
            (web.clone(), v4("10.0.0.1", 30)),
            (web.clone(), v4("10.0.0.2", 60)),
        ],
    );
    add(
        "aaaa_cname",
        1,
        &web,
        RecordType::Aaaa,
        0,
        false,
        &[
            (web.clone(), Rr::Cname("pool.example.com".into(), 30)),
            ("pool.example.com".into(), v4("2001:db8::1", 5)),
        ],
    );
    add("nxdomain", 0, &web, RecordType::A, 3, false, &[]);
    let mut cut = vec![2u8];
    let q = query(0x1234, "a", RecordType::A).unwrap();
    let whole = response(&q, 0, true, &[("a".into(), v4("10.0.0.1", 30))]);
    cut.extend_from_slice(&whole[..whole.len() - 3]);
    seeds.insert("truncated".into(), cut);
    seeds
}

// --- session_cookie: [mode][value] ---------------------------------------

fn session_cookie() -> Seeds {
    let mut seeds = Seeds::new();
    let mut add = |name: &str, value: &[u8]| {
        let mut v = vec![1u8];
        v.extend_from_slice(value);
        seeds.insert(name.to_string(), v);
    };
    // From engine/src/session/tests: Envoy's proto form (with expires),
    // the plain and header forms, IPv6, gRPC's `ip:port;cluster`.
    add("envoy_expires", b"Cg4xMjcuMC4wLjE6ODA4MBCA4s+qBg==");
    add("envoy_quoted", b"\"Cg4xMjcuMC4wLjE6ODA4MA==\"");
    add("plain", b"MTI3LjAuMC4xOjgwODA=");
    add("ipv6", b"Wzo6MV06ODA=");
    let mut out = String::new();
    let grpc: SocketAddr = "10.0.0.1:80".parse().unwrap();
    engine::session::encode_cookie_value(
        grpc,
        Duration::from_secs(3600),
        1_699_999_000,
        engine::session::CookieFormat::Envoy,
        &mut out,
    );
    add("envoy_ttl", out.as_bytes());
    // base64("10.0.0.1:80;cluster_a"), URL-safe alphabet, unpadded.
    add("grpc_cluster", b"MTAuMC4wLjE6ODA7Y2x1c3Rlcl9h");
    add("grpc_v6_scope_urlsafe", b"W2ZlODA6OjElMl06NDQzO2M");
    // The address round trip's layout: kind, port, ip (4 or 16 + scope),
    // ttl, clock.
    let mut v6 = vec![0x0b, 0x01, 0xbb];
    v6.extend_from_slice(&[
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x17,
    ]);
    v6.extend_from_slice(&5u32.to_be_bytes());
    v6.extend_from_slice(&3600u64.to_be_bytes());
    v6.extend_from_slice(&1_700_000_000u64.to_be_bytes());
    add("address_v6", &v6);
    let mut v4 = vec![0x0c, 0x1f, 0x90, 127, 0, 0, 1];
    v4.extend_from_slice(&u64::MAX.to_be_bytes());
    v4.extend_from_slice(&(i64::MAX as u64).to_be_bytes());
    add("address_v4_saturating", &v4);
    seeds
}

// --- xds_resources: [kind][protobuf] ---------------------------------------

fn xds_resources() -> Seeds {
    use xds::pb::envoy::config::bootstrap::v3::Bootstrap;
    use xds::pb::envoy::config::listener::v3::Listener;
    use xds::pb::envoy::config::route::v3::RouteConfiguration;
    use xds::pb::envoy::extensions::filters::network::http_connection_manager::v3 as hcm;

    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut seeds = Seeds::new();
    let mut add = |name: String, kind: u8, bytes: Vec<u8>| {
        let mut v = vec![kind];
        v.extend(bytes);
        seeds.insert(name, v);
    };
    let mut listeners: Vec<(String, Listener)> = Vec::new();
    // The example discovery responses (xds/tests/examples.rs).
    for (file, kind) in [("cds.yaml", 1u8), ("lds.yaml", 0)] {
        let path = repo.join("deploy/examples/files").join(file);
        let resp = xds::file::load_discovery_response(&path).unwrap();
        for (i, any) in resp.resources.iter().enumerate() {
            let stem = file.trim_end_matches(".yaml");
            add(format!("{stem}_{i}"), kind, any.value.clone());
            if kind == 0 {
                listeners.push((
                    format!("{stem}_{i}"),
                    Listener::decode(&any.value[..]).unwrap(),
                ));
            }
        }
    }
    // Static resources of the bootstraps the tests load.
    for (name, file) in [
        ("bootstrap", "xds/tests/data/bootstrap.yaml"),
        ("demo", "deploy/examples/demo.yaml"),
    ] {
        let path = repo.join(file);
        let text = fs::read_to_string(&path).unwrap();
        let value = xds::bootstrap::Format::of(&path).parse(&text).unwrap();
        let b: Bootstrap = xds::decode::from_json(value, &xds::Path::root()).unwrap();
        let Some(sr) = b.static_resources else {
            continue;
        };
        for (i, c) in sr.clusters.iter().enumerate() {
            add(format!("{name}_cluster_{i}"), 1, c.encode_to_vec());
            if let Some(la) = &c.load_assignment {
                add(format!("{name}_endpoints_{i}"), 3, la.encode_to_vec());
            }
        }
        for (i, l) in sr.listeners.into_iter().enumerate() {
            add(format!("{name}_listener_{i}"), 0, l.encode_to_vec());
            listeners.push((format!("{name}_listener_{i}"), l));
        }
    }
    // Inline route tables, as RDS would send them, from the listeners.
    for (name, l) in listeners {
        for chain in &l.filter_chains {
            for f in &chain.filters {
                let Some(xds::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(
                    any,
                )) = &f.config_type
                else {
                    continue;
                };
                let Ok((m, _)) =
                    xds::decode::unpack::<hcm::HttpConnectionManager>(any, &xds::Path::root())
                else {
                    continue;
                };
                if let Some(hcm::http_connection_manager::RouteSpecifier::RouteConfig(rc)) =
                    m.route_specifier
                {
                    let rc: RouteConfiguration = rc;
                    add(format!("{name}_routes"), 2, rc.encode_to_vec());
                    add(format!("{name}_routes_inline"), 6, rc.encode_to_vec());
                }
            }
        }
    }
    seeds
}
