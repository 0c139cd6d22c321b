//! A server byte stream, read in input-driven pieces, into h2wire's ClientConn after it sent requests (more follow, bodies and trailers too): no panic, bounded streams, memory and output, and every frame it writes parses with h2wire and loads with h2.
#![no_main]

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use gateway_fuzz::{ConnInput, OutputCheck, PeerSide, Rng, Role};
use h2wire::conn::{ClientConfig, ClientConn, ClientEvent};
use h2wire::ErrorCode;
use libfuzzer_sys::fuzz_target;

/// Requests opened over one input at most: enough for stream limits and
/// GOAWAY to matter, few enough to keep runs fast.
const MAX_REQUESTS: usize = 12;

/// A request body still to send, and whether trailers end it.
struct Pending {
    body: Bytes,
    trailers: bool,
}

struct App {
    conn: ClientConn,
    cfg: ClientConfig,
    rng: Rng,
    check: OutputCheck,
    peer: PeerSide,
    bodies: BTreeMap<u32, Pending>,
    unreleased: Vec<(u32, u32)>,
    opened: usize,
}

// The struct update keeps fields added to ClientConfig later at their
// defaults.
#[allow(clippy::needless_update)]
fn config(b: u8) -> ClientConfig {
    ClientConfig {
        max_concurrent_streams: 0,
        initial_stream_window: if b & 4 != 0 { 1024 } else { 65_535 },
        connection_window: if b & 8 != 0 { 65_535 } else { 1 << 20 },
        max_frame_size: if b & 16 != 0 { 1 << 20 } else { 16_384 },
        max_header_list_size: if b & 32 != 0 { 256 } else { 60 << 10 },
        header_table_size: if b & 64 != 0 { 0 } else { 4096 },
        max_continuations: if b & 128 != 0 { 1 } else { 32 },
        ..ClientConfig::default()
    }
}

const FIELDS: [(&[u8], &[u8], bool); 4] = [
    (b"user-agent", b"gateway-fuzz", false),
    (b"accept", b"*/*", false),
    (b"authorization", b"Bearer secret", true),
    (b"te", b"trailers", false),
];

impl App {
    fn drain(&mut self) -> usize {
        let mut n = 0;
        while let Some(chunk) = self.conn.poll_output() {
            n += chunk.len();
            self.check.feed(&chunk, &self.peer);
        }
        self.check.drained();
        assert!(!self.conn.has_output());
        n
    }

    /// Opens a request if the connection allows one; `Err` only for the
    /// reasons `can_open_stream` said.
    fn request(&mut self) {
        if self.opened >= MAX_REQUESTS {
            return;
        }
        let can = self.conn.can_open_stream();
        let fields = &FIELDS[..self.rng.below(FIELDS.len() + 1)];
        let (method, body): (&[u8], usize) = match self.rng.below(4) {
            0 => (b"GET", 0),
            1 => (b"HEAD", 0),
            2 => (b"POST", [1, 300, 5_000, 20_000][self.rng.below(4)]),
            _ => (b"PUT", 0),
        };
        let authority: &[u8] = if self.rng.chance(20) {
            b""
        } else {
            b"backend.internal"
        };
        let end_stream = body == 0 && method != b"PUT";
        let result = self.conn.send_request(
            method,
            b"https",
            authority,
            b"/items?id=1",
            fields.iter().copied(),
            end_stream,
        );
        assert_eq!(
            result.is_ok(),
            can,
            "can_open_stream said {can}: {result:?}"
        );
        if let Ok(stream) = result {
            self.opened += 1;
            assert_eq!(stream % 2, 1);
            if !end_stream {
                self.bodies.insert(
                    stream,
                    Pending {
                        body: Bytes::from(vec![b'y'; body]),
                        trailers: method == b"PUT",
                    },
                );
            }
        }
    }

    fn events(&mut self) {
        while let Some(e) = self.conn.poll_event() {
            match e {
                ClientEvent::Response { head, stream, .. } => {
                    self.conn.recycle(head);
                    if self.rng.chance(10) {
                        self.bodies.remove(&stream);
                        self.conn.reset(stream, ErrorCode::CANCEL);
                    }
                }
                ClientEvent::Data { stream, data, .. } => {
                    let n = data.len() as u32;
                    if self.rng.chance(30) {
                        self.unreleased.push((stream, n));
                    } else {
                        self.conn.release(stream, n);
                    }
                }
                ClientEvent::Trailers { fields, .. } => self.conn.recycle(fields),
                ClientEvent::Reset { stream, .. }
                | ClientEvent::Broken { stream, .. }
                | ClientEvent::TooLarge { stream } => {
                    self.bodies.remove(&stream);
                }
                ClientEvent::StreamLimit { .. } => self.request(),
                ClientEvent::WindowOpen { .. } | ClientEvent::GoAway { .. } => {}
            }
        }
    }

    fn send_bodies(&mut self) {
        let streams: Vec<u32> = self.bodies.keys().copied().collect();
        for stream in streams {
            let p = self.bodies.get_mut(&stream).unwrap();
            let cap = self.conn.send_capacity(stream);
            let before = p.body.len();
            match self.conn.send_data(stream, &mut p.body, !p.trailers) {
                Ok(sent) => {
                    assert_eq!(sent, before - p.body.len());
                    assert!(sent <= cap, "sent {sent} over capacity {cap}");
                    if p.body.is_empty() {
                        let trailers = p.trailers;
                        self.bodies.remove(&stream);
                        if trailers {
                            let _ = self
                                .conn
                                .send_trailers(stream, [(&b"x-checksum"[..], &b"abc"[..])]);
                        }
                    }
                }
                Err(_) => {
                    self.bodies.remove(&stream);
                }
            }
        }
    }

    fn release_some(&mut self) {
        for (stream, n) in std::mem::take(&mut self.unreleased) {
            self.conn.release(stream, n);
        }
    }

    fn turn(&mut self) {
        self.events();
        if self.rng.chance(20) {
            self.request();
        }
        if self.rng.chance(50) {
            self.release_some();
        }
        self.send_bodies();
        if self.rng.chance(2) {
            self.conn.go_away(ErrorCode::NO_ERROR);
        }
        self.drain();
        self.bounded();
        if self.rng.chance(10) {
            self.conn.shrink();
        }
    }

    fn bounded(&self) {
        let cfg = &self.cfg;
        assert!(self.conn.open_streams() <= self.opened);
        let streams = 256 * 64;
        let tables = 3 * (cfg.header_table_size as usize).max(4096) + 3 * 4096 + 4096;
        let block = 3 * 2 * cfg.max_header_list_size as usize + 3 * 16_384;
        let limit = 16 * 1024 + streams + tables + block;
        let held = self.conn.memory_bytes();
        assert!(held <= limit, "{held} bytes held, limit {limit}");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some(mut input) = ConnInput::parse(data) else {
        return;
    };
    let cfg = config(input.config);
    let mut app = App {
        conn: ClientConn::new(cfg.clone()),
        cfg,
        rng: Rng::new(input.seed),
        check: OutputCheck::new(Role::Client),
        peer: PeerSide::new(false),
        bodies: BTreeMap::new(),
        unreleased: Vec::new(),
        opened: 0,
    };
    // Two requests before the server's first byte, as a pooled connection
    // sends them.
    app.request();
    app.request();
    app.send_bodies();
    app.drain();

    let mut buf = BytesMut::new();
    let mut fed = Vec::new();
    let mut consumed = 0;
    while let Some(read) = input.next_read() {
        buf.extend_from_slice(read);
        fed.extend_from_slice(read);
        let result = app.conn.recv(&mut buf);
        let now = fed.len() - buf.len();
        app.peer.consumed(&fed[consumed..now]);
        let read_len = now - consumed;
        consumed = now;
        let out = app.drain();
        assert!(
            out <= 3 * read_len + 512,
            "{read_len} bytes read made {out} bytes of output"
        );
        app.turn();
        if result.is_err() {
            assert!(app.conn.recv(&mut buf).is_err());
            assert!(app.check.goaway);
            assert!(!app.conn.can_open_stream());
            return;
        }
    }
    for _ in 0..3 {
        app.release_some();
        app.turn();
    }
});
