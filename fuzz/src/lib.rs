//! Helpers the fuzz targets share: input scheduling, a deterministic
//! generator for the application's choices, and the peer's view of what a
//! connection writes (every frame parsed by h2wire and loaded by h2, header
//! blocks decoded by both HPACK decoders and checked as messages).

use bytes::{Bytes, BytesMut};
use h2::frame as h2f;
use h2wire::frame::{
    decode_frame, Frame, FrameHeader, Settings, DEFAULT_MAX_FRAME_SIZE, HEADER_LEN,
    MAX_MAX_FRAME_SIZE,
};
use h2wire::hpack::{Decoder, DEFAULT_TABLE_SIZE};
use h2wire::message::{check_request, check_response, check_trailers, HeaderList};

/// xorshift64: the application's choices (answer how, release when) come
/// from it, seeded by the input, so the bytes of the wire stay the wire.
pub struct Rng(pub u64);

impl Rng {
    pub fn new(seed: u8) -> Self {
        Self(0x9e37_79b9_7f4a_7c15 ^ (u64::from(seed) << 32 | u64::from(seed)))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// The layout of a connection target's input:
/// `[config][seed][n][n schedule bytes][wire...]`. Each read takes the
/// next schedule byte (cycling) for its length, so mutating the wire does
/// not move the read boundaries and the other way round.
pub struct ConnInput<'a> {
    pub config: u8,
    pub seed: u8,
    schedule: &'a [u8],
    step: usize,
    pub wire: &'a [u8],
}

impl<'a> ConnInput<'a> {
    pub fn parse(data: &'a [u8]) -> Option<Self> {
        let (&[config, seed, n], rest) = data.split_first_chunk::<3>()?;
        let n = usize::from(n % 32).min(rest.len());
        let (schedule, wire) = rest.split_at(n);
        Some(Self {
            config,
            seed,
            schedule,
            step: 0,
            wire,
        })
    }

    /// The next read: 0 means all that is left, 1..=127 bytes as is, and
    /// with the top bit set 64-byte units up to 8 KB.
    pub fn next_read(&mut self) -> Option<&'a [u8]> {
        if self.wire.is_empty() {
            return None;
        }
        let s = match self.schedule {
            [] => 0,
            s => s[self.step % s.len()],
        };
        self.step += 1;
        let len = match s {
            0 => self.wire.len(),
            s if s & 0x80 == 0 => usize::from(s),
            s => usize::from(s & 0x7f).max(1) << 6,
        };
        let (read, rest) = self.wire.split_at(len.min(self.wire.len()));
        self.wire = rest;
        Some(read)
    }

    /// Builds an input; for the seed generator.
    pub fn encode(config: u8, seed: u8, schedule: &[u8], wire: &[u8]) -> Vec<u8> {
        let mut v = vec![config, seed, schedule.len() as u8];
        v.extend_from_slice(schedule);
        v.extend_from_slice(wire);
        v
    }
}

/// What the fuzzed peer has told the connection so far, from the frames
/// the connection consumed: the bounds its output must respect.
pub struct PeerSide {
    /// Bytes the connection consumed and we have not parsed yet.
    consumed: BytesMut,
    /// The client preface still to strip (server side), in bytes.
    preface_left: usize,
    /// Parsing stopped: the peer sent what a connection error ends.
    broken: bool,
    /// The largest SETTINGS_MAX_FRAME_SIZE announced (or the default).
    pub max_frame_size: u32,
    /// The largest SETTINGS_HEADER_TABLE_SIZE announced (or the default).
    pub header_table_size: usize,
}

impl PeerSide {
    pub fn new(preface: bool) -> Self {
        Self {
            consumed: BytesMut::new(),
            preface_left: if preface { 24 } else { 0 },
            broken: false,
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            header_table_size: DEFAULT_TABLE_SIZE,
        }
    }

    /// `bytes` were consumed by the connection's `recv`.
    pub fn consumed(&mut self, bytes: &[u8]) {
        if self.broken {
            return;
        }
        let skip = self.preface_left.min(bytes.len());
        self.preface_left -= skip;
        self.consumed.extend_from_slice(&bytes[skip..]);
        loop {
            match decode_frame(&mut self.consumed, MAX_MAX_FRAME_SIZE) {
                Ok(Some(Frame::Settings(s))) => self.apply(&s),
                Ok(Some(_)) | Err(h2wire::FrameError::Stream { .. }) => {}
                Ok(None) => break,
                Err(h2wire::FrameError::Connection { .. }) => {
                    self.broken = true;
                    break;
                }
            }
        }
    }

    fn apply(&mut self, s: &Settings) {
        if let Some(n) = s.max_frame_size {
            self.max_frame_size = self.max_frame_size.max(n);
        }
        if let Some(n) = s.header_table_size {
            self.header_table_size = self.header_table_size.max(n as usize);
        }
    }
}

/// Which messages a header block may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The connection is a server: response heads and trailers.
    Server,
    /// A client: request heads and trailers.
    Client,
}

/// The peer's reading side: parses everything the connection writes,
/// with h2wire and with h2, and panics on anything a real peer would
/// have to refuse.
pub struct OutputCheck {
    role: Role,
    inbox: BytesMut,
    /// The client preface still expected (client side), in bytes.
    preface_left: usize,
    /// Header block being joined: stream, h2's view of its HEADERS frame
    /// header, fragments so far.
    block: Option<(u32, h2f::Head, BytesMut)>,
    ours: Decoder,
    /// h2's decoder, until a block holds a field h2 refuses though RFC
    /// 9113 allows it (a value with a control character other than NUL,
    /// CR, LF: h2's `HeaderValue` is stricter), which ends its context.
    theirs: Option<h2::hpack::Decoder>,
    table_limit: usize,
    /// A GOAWAY went out.
    pub goaway: bool,
    /// Frames checked so far.
    pub frames: usize,
}

impl OutputCheck {
    pub fn new(role: Role) -> Self {
        Self {
            role,
            inbox: BytesMut::new(),
            preface_left: if role == Role::Client { 24 } else { 0 },
            block: None,
            ours: Decoder::new(DEFAULT_TABLE_SIZE),
            theirs: Some(h2::hpack::Decoder::new(DEFAULT_TABLE_SIZE)),
            table_limit: DEFAULT_TABLE_SIZE,
            goaway: false,
            frames: 0,
        }
    }

    /// Takes one chunk of output and checks every whole frame in it.
    pub fn feed(&mut self, chunk: &[u8], peer: &PeerSide) {
        let skip = self.preface_left.min(chunk.len());
        if skip > 0 {
            let want = &h2wire::frame::CLIENT_PREFACE[24 - self.preface_left..][..skip];
            assert_eq!(&chunk[..skip], want, "client preface");
            self.preface_left -= skip;
        }
        self.inbox.extend_from_slice(&chunk[skip..]);
        // The peer's decoder accepts tables up to what it announced: only
        // ever raised, since a lower value applies from some point in the
        // output we cannot place exactly.
        if peer.header_table_size > self.table_limit {
            self.table_limit = peer.header_table_size;
            self.ours.set_max_table_size(self.table_limit);
            if let Some(t) = &mut self.theirs {
                t.queue_size_update(self.table_limit);
            }
        }
        while let Some(h) = self.inbox.first_chunk::<HEADER_LEN>() {
            let end = HEADER_LEN + FrameHeader::parse(h).len as usize;
            let raw = (self.inbox.len() >= end).then(|| Bytes::copy_from_slice(&self.inbox[..end]));
            let frame = match decode_frame(&mut self.inbox, peer.max_frame_size) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => panic!("the connection wrote a frame its peer refuses: {e:?}"),
            };
            self.check_frame(frame, raw.expect("a parsed frame was whole"));
        }
    }

    /// All output must end on a frame boundary once drained.
    pub fn drained(&self) {
        assert!(self.inbox.is_empty(), "output ends inside a frame");
    }

    fn check_frame(&mut self, frame: Frame, raw: Bytes) {
        self.frames += 1;
        let head = h2f::Head::parse(&raw[..HEADER_LEN]);
        let payload = &raw[HEADER_LEN..];
        if self.block.is_some() {
            assert!(
                matches!(frame, Frame::Continuation { .. }),
                "{frame:?} inside a header block"
            );
        }
        match &frame {
            Frame::Settings(_) | Frame::SettingsAck => {
                h2f::Settings::load(head, payload).expect("h2 loads our SETTINGS");
            }
            Frame::Ping { .. } => {
                h2f::Ping::load(head, payload).expect("h2 loads our PING");
            }
            Frame::GoAway { .. } => {
                h2f::GoAway::load(head, payload).expect("h2 loads our GOAWAY");
                self.goaway = true;
            }
            Frame::RstStream { .. } => {
                h2f::Reset::load(head, payload).expect("h2 loads our RST_STREAM");
            }
            Frame::WindowUpdate { .. } => {
                h2f::WindowUpdate::load(head, payload).expect("h2 loads our WINDOW_UPDATE");
            }
            Frame::Headers {
                stream,
                end_headers,
                fragment,
                priority,
                ..
            } => {
                assert!(priority.is_none(), "we send no priority");
                let (_, rest) = h2f::Headers::load(head, BytesMut::from(payload))
                    .expect("h2 loads our HEADERS");
                assert_eq!(&rest[..], &fragment[..]);
                self.block = Some((*stream, head, BytesMut::from(&fragment[..])));
                if *end_headers {
                    self.finish_block();
                }
            }
            Frame::Continuation {
                stream,
                end_headers,
                fragment,
            } => {
                let (open, _, block) = self.block.as_mut().expect("CONTINUATION without HEADERS");
                assert_eq!(open, stream, "CONTINUATION on another stream");
                block.extend_from_slice(fragment);
                if *end_headers {
                    self.finish_block();
                }
            }
            Frame::Data { stream, .. } => assert_ne!(*stream, 0),
            f @ (Frame::Priority { .. } | Frame::PushPromise { .. } | Frame::Unknown { .. }) => {
                panic!("the connection wrote {f:?}")
            }
        }
    }

    /// A whole header block: both decoders agree on it, and it is a
    /// well-formed message for the role.
    fn finish_block(&mut self) {
        let (_, head, block) = self.block.take().expect("a block");
        let mut list = HeaderList::new();
        self.ours
            .decode(&block, usize::MAX, |f| {
                list.push(f.name, f.value, f.never_index)
            })
            .expect("h2wire decodes the connection's header block");
        let pseudo = list.iter().any(|(n, _, _)| n.starts_with(b":"));
        match (self.role, pseudo) {
            (Role::Server, true) => {
                check_response(&list).expect("a well-formed response head");
            }
            (Role::Client, true) => {
                check_request(&list).expect("a well-formed request head");
            }
            (_, false) => check_trailers(&list).expect("well-formed trailers"),
        }

        // h2's HEADERS loader on the joined block: its HPACK, its checks of
        // pseudo-headers and connection-specific fields; the same fields.
        let h2_takes = list.iter().all(|(n, v, _)| {
            h2::hpack::Header::new(Bytes::copy_from_slice(n), Bytes::copy_from_slice(v)).is_ok()
        });
        if !h2_takes {
            self.theirs = None;
        }
        let Some(theirs) = &mut self.theirs else {
            return;
        };
        let (mut headers, _) =
            h2f::Headers::load(head, BytesMut::new()).expect("h2 loads the HEADERS head");
        let mut joined = block;
        headers
            .load_hpack(&mut joined, usize::MAX / 4, theirs)
            .expect("h2 decodes the connection's header block");
        let (pseudo, fields) = headers.into_parts();
        let mut theirs: Vec<(Vec<u8>, Vec<u8>)> = fields
            .iter()
            .map(|(n, v)| (n.as_str().as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect();
        let as_bytes =
            |s: &Option<h2::frame::BytesStr>| s.as_ref().map(|s| AsRef::<[u8]>::as_ref(s).to_vec());
        for (name, value) in [
            (
                &b":method"[..],
                pseudo
                    .method
                    .as_ref()
                    .map(|m| m.as_str().as_bytes().to_vec()),
            ),
            (b":scheme", as_bytes(&pseudo.scheme)),
            (b":authority", as_bytes(&pseudo.authority)),
            (b":path", as_bytes(&pseudo.path)),
            (
                b":protocol",
                pseudo
                    .protocol
                    .as_ref()
                    .map(|p| p.as_str().as_bytes().to_vec()),
            ),
            (
                b":status",
                pseudo.status.map(|s| s.as_str().as_bytes().to_vec()),
            ),
        ] {
            if let Some(v) = value {
                theirs.push((name.to_vec(), v));
            }
        }
        let mut ours: Vec<(Vec<u8>, Vec<u8>)> = list
            .iter()
            .map(|(n, v, _)| (n.to_vec(), v.to_vec()))
            .collect();
        // h2 groups fields by name; the multiset is what must match.
        ours.sort();
        theirs.sort();
        assert_eq!(ours, theirs, "h2 decoded the block to other fields");
    }
}
