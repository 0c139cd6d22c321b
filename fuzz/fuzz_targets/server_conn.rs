//! A client byte stream, read in input-driven pieces, into h2wire's ServerConn, requests answered: no panic, bounded streams, memory and output, and every frame it writes parses with h2wire and loads with h2.
#![no_main]

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use gateway_fuzz::{ConnInput, OutputCheck, PeerSide, Rng, Role};
use h2wire::conn::{Event, FloodLimits, ServerConfig, ServerConn, UnderscoreAction};
use h2wire::ErrorCode;
use libfuzzer_sys::fuzz_target;

/// Header fields, owned.
type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// A response body still to send, and whether trailers end it.
struct Pending {
    body: Bytes,
    trailers: bool,
}

struct App {
    conn: ServerConn,
    cfg: ServerConfig,
    rng: Rng,
    check: OutputCheck,
    peer: PeerSide,
    bodies: BTreeMap<u32, Pending>,
    /// DATA bytes received and not released yet, by stream.
    unreleased: Vec<(u32, u32)>,
    /// Requests we leave unanswered for now.
    waiting: Vec<u32>,
    /// Each open request's regular fields, which its response may echo as
    /// a proxy passes fields on: arbitrary (valid) fields for the encoder.
    echo: BTreeMap<u32, Fields>,
}

/// The config byte sets the codec's sizes; the seed's low bits turn on the
/// limits the gateway adds from its HCM config (Envoy's flood limits,
/// `max_headers_count`, the underscore action), half the time, so that
/// inputs which trip them do not hide the rest.
fn config(b: u8, seed: u8) -> ServerConfig {
    ServerConfig {
        flood: if seed & 1 != 0 {
            FloodLimits::ENVOY
        } else {
            FloodLimits::default()
        },
        max_headers_count: (seed & 2 != 0).then_some(8),
        headers_with_underscores: match (seed >> 2) & 3 {
            1 => UnderscoreAction::Reject,
            2 => UnderscoreAction::Drop,
            _ => UnderscoreAction::Allow,
        },
        max_concurrent_streams: [0, 1, 4, 100][usize::from(b & 3)],
        initial_stream_window: if b & 4 != 0 { 1024 } else { 65_535 },
        connection_window: if b & 8 != 0 { 65_535 } else { 1 << 20 },
        max_frame_size: if b & 16 != 0 { 1 << 20 } else { 16_384 },
        max_header_list_size: if b & 32 != 0 { 256 } else { 60 << 10 },
        header_table_size: if b & 64 != 0 { 0 } else { 4096 },
        max_continuations: if b & 128 != 0 { 1 } else { 32 },
        ..ServerConfig::default()
    }
}

const FIELDS: [(&[u8], &[u8]); 4] = [
    (b"content-type", b"text/plain"),
    (b"server", b"gateway"),
    (b"cache-control", b"no-store"),
    (b"x-request-id", b"0123456789abcdef"),
];

impl App {
    /// Everything written so far, through the peer's checks; returns its size.
    fn drain(&mut self) -> usize {
        let mut n = 0;
        while let Some(chunk) = self.conn.poll_output() {
            n += chunk.len();
            self.check.feed(&chunk, &self.peer);
        }
        self.check.drained();
        assert!(!self.conn.has_output());
        // All of it is written: no frame stays counted against the
        // outbound flood limits.
        if self.conn.check_outbound(0).is_ok() {
            if let Some(pending) = self.conn.outbound_frames() {
                assert_eq!(pending, (0, 0), "frames counted after all were written");
            }
        }
        n
    }

    fn events(&mut self) {
        while let Some(e) = self.conn.poll_event() {
            match e {
                Event::Request {
                    stream,
                    head,
                    end_stream,
                } => {
                    let fields = head
                        .iter()
                        .filter(|(n, _, _)| !n.starts_with(b":") && *n != b"content-length")
                        .map(|(n, v, _)| (n.to_vec(), v.to_vec()))
                        .collect();
                    self.echo.insert(stream, fields);
                    self.conn.recycle(head);
                    if end_stream || self.rng.chance(50) {
                        self.answer(stream);
                    } else {
                        self.waiting.push(stream);
                    }
                }
                Event::Data { stream, data, .. } => {
                    let n = data.len() as u32;
                    if self.rng.chance(30) {
                        self.unreleased.push((stream, n));
                    } else {
                        self.conn.release(stream, n);
                    }
                }
                Event::Trailers { stream, fields } => {
                    self.conn.recycle(fields);
                    if let Some(i) = self.waiting.iter().position(|&s| s == stream) {
                        self.waiting.swap_remove(i);
                        self.answer(stream);
                    }
                }
                Event::Reset { stream, .. } => {
                    self.bodies.remove(&stream);
                    self.echo.remove(&stream);
                    self.waiting.retain(|&s| s != stream);
                }
                Event::WindowOpen { .. } | Event::GoAway { .. } => {}
            }
        }
    }

    /// Answers a request one of several ways; errors (the stream went away
    /// meanwhile) are fine, panics are not.
    fn answer(&mut self, stream: u32) {
        let echo = self.echo.remove(&stream).unwrap_or_default();
        let mut fields: Vec<(&[u8], &[u8])> = FIELDS[..self.rng.below(FIELDS.len() + 1)].to_vec();
        if self.rng.chance(50) {
            fields.extend(echo.iter().map(|(n, v)| (&n[..], &v[..])));
        }
        let fields = fields.into_iter();
        match self.rng.below(8) {
            0 => {
                let _ = self.conn.send_headers(stream, 204, fields, true);
            }
            1 => self.conn.reset(stream, ErrorCode::CANCEL),
            2 => {
                let _ = self.conn.send_headers(stream, 103, [], false);
                let _ = self.conn.send_headers(stream, 200, fields, false);
                let trailers = echo.iter().map(|(n, v)| (&n[..], &v[..]));
                let _ = self.conn.send_trailers(stream, trailers);
            }
            n => {
                let _ = self.conn.send_headers(stream, 200, fields, false);
                let len = [0, 1, 100, 5_000, 20_000][self.rng.below(5)];
                self.bodies.insert(
                    stream,
                    Pending {
                        body: Bytes::from(vec![b'x'; len]),
                        trailers: n == 3,
                    },
                );
            }
        }
    }

    /// Sends what the windows allow of the pending bodies.
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
                                .send_trailers(stream, [(&b"x-done"[..], &b"1"[..])]);
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

    /// The application's turn after a read.
    fn turn(&mut self) {
        self.events();
        if !self.waiting.is_empty() && self.rng.chance(30) {
            let stream = self.waiting.swap_remove(0);
            self.answer(stream);
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

    /// What the connection holds stays within what its config allows.
    fn bounded(&self) {
        let cfg = &self.cfg;
        assert!(self.conn.open_streams() <= cfg.max_concurrent_streams as usize);
        // Streams (map slots, generously), both HPACK tables (ours is
        // capped at 4 KiB), a header block being joined (twice the list
        // limit) and the spare output and event room kept between bursts.
        let streams = 256 * (cfg.max_concurrent_streams as usize).max(64);
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
    let cfg = config(input.config, input.seed);
    let mut app = App {
        conn: ServerConn::new(cfg.clone()),
        cfg,
        rng: Rng::new(input.seed),
        check: OutputCheck::new(Role::Server),
        peer: PeerSide::new(true),
        bodies: BTreeMap::new(),
        unreleased: Vec::new(),
        waiting: Vec::new(),
        echo: BTreeMap::new(),
    };
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
        // What a read makes the connection write on its own (ACKs, resets,
        // 431s, GOAWAY) stays proportional to it: no amplification.
        let out = app.drain();
        assert!(
            out <= 3 * read_len + 512,
            "{read_len} bytes read made {out} bytes of output"
        );
        app.turn();
        if result.is_err() {
            // Dead: it says so again, and writes nothing more.
            assert!(app.conn.recv(&mut buf).is_err());
            assert!(app.check.goaway);
            assert_eq!(app.drain(), 0);
            return;
        }
    }
    // The peer stops sending; the application finishes what it can.
    for _ in 0..3 {
        app.release_some();
        for stream in std::mem::take(&mut app.waiting) {
            app.answer(stream);
        }
        app.turn();
    }
});
