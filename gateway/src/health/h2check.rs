//! HTTP/2 and gRPC health checks on our own codec (`h2wire`'s sans-I/O
//! `ClientConn`), driven inside the host's own task.
//!
//! Why not the `h2` crate (as before): it wanted a second task per
//! connection, a tokio-compat reader that zeroed its buffer on every read,
//! and owned `http` types per check; at 10,000 hosts checked every second
//! those were a fifth of the checker's CPU. Here a check is one write (the
//! request, with whatever SETTINGS ack or WINDOW_UPDATE was pending) and,
//! usually, one read.

use bytes::{Bytes, BytesMut};
use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
use h2wire::conn::{ClientConfig, ClientConn, ClientEvent};
use shards::wire::tls::Transport;

/// Bytes asked of the socket per read: a check's answer is small (a
/// larger one takes more reads).
const READ_SIZE: usize = 2048;

/// One connection to a checked host, kept between checks.
pub struct H2Conn {
    stream: Transport,
    conn: ClientConn,
    /// Received bytes the codec has not consumed yet.
    received: BytesMut,
    /// The codec's output gathered for one write.
    out: Vec<u8>,
}

/// The response fields a verdict looks at; the others are not kept (a
/// check is judged on its status, these and its body).
const JUDGED: [&[u8]; 3] = [
    b"x-envoy-immediate-health-check-fail",
    b"x-envoy-degraded",
    b"grpc-status",
];

/// A check's answer: status, the fields in [`JUDGED`] and (up to
/// `max_body`) body.
#[derive(Debug, Default)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub trailers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// A request as the checkers send it.
pub struct Ask<'a> {
    pub method: &'a str,
    pub authority: &'a str,
    pub path: &'a str,
    pub fields: &'a [(String, String)],
    /// A request body (gRPC's message), sent with END_STREAM.
    pub body: Option<Bytes>,
    /// Body bytes kept; more are read and dropped.
    pub max_body: usize,
}

impl H2Conn {
    /// A connection over `stream` (TCP, or the cluster's TLS); the client
    /// preface and SETTINGS go out with the first request.
    pub fn new(stream: Transport) -> Self {
        let cfg = ClientConfig {
            // Enough for any answer a checker looks at; the rest is
            // released as read.
            initial_stream_window: 64 << 10,
            connection_window: 1 << 20,
            max_header_list_size: 16 << 10,
            ..ClientConfig::default()
        };
        Self {
            stream,
            conn: ClientConn::new(cfg),
            received: BytesMut::new(),
            out: Vec::new(),
        }
    }

    /// Whether the next check may use this connection (no GOAWAY, ids
    /// left, the server's stream limit not reached).
    pub fn reusable(&self) -> bool {
        self.conn.can_open_stream()
    }

    /// Sends `ask` on a new stream and reads its whole answer.
    pub async fn exchange(&mut self, ask: &Ask<'_>) -> Result<Answer, String> {
        let fields = ask
            .fields
            .iter()
            .map(|(n, v)| (n.as_bytes(), v.as_bytes(), false));
        let stream = self
            .conn
            .send_request(
                ask.method.as_bytes(),
                // As Envoy's checks: the scheme of the transport.
                if matches!(self.stream, Transport::TlsClient(_)) {
                    b"https"
                } else {
                    b"http"
                },
                ask.authority.as_bytes(),
                ask.path.as_bytes(),
                fields,
                ask.body.is_none(),
            )
            .map_err(|e| format!("h2: {e:?}"))?;
        // The request body goes as the server's windows allow (a server
        // may announce a tiny one): what is left waits for WINDOW_UPDATEs.
        let mut body = ask.body.clone().unwrap_or_default();
        let mut answer = Answer::default();
        loop {
            if !body.is_empty() {
                self.conn
                    .send_data(stream, &mut body, true)
                    .map_err(|e| format!("h2: {e:?}"))?;
            }
            self.flush().await?;
            while let Some(event) = self.conn.poll_event() {
                if self.on_event(stream, event, &mut answer, ask.max_body)? {
                    if self.received.is_empty() {
                        // Between checks a connection holds no read
                        // buffer (10,000 of them would hold 20 MB).
                        self.received = BytesMut::new();
                    }
                    return Ok(answer);
                }
            }
            self.flush().await?;
            self.read().await?;
        }
    }

    /// Takes one event of `stream`'s answer; true once it is complete.
    fn on_event(
        &mut self,
        stream: u32,
        event: ClientEvent,
        answer: &mut Answer,
        max_body: usize,
    ) -> Result<bool, String> {
        let owned = |list: &h2wire::message::HeaderList| {
            list.iter()
                .filter(|(n, _, _)| JUDGED.contains(n))
                .map(|(n, v, _)| {
                    (
                        String::from_utf8_lossy(n).into_owned(),
                        String::from_utf8_lossy(v).into_owned(),
                    )
                })
                .collect::<Vec<_>>()
        };
        match event {
            ClientEvent::Response {
                stream: s,
                head,
                informational,
                end_stream,
            } if s == stream => {
                if !informational {
                    answer.status = head
                        .get(b":status")
                        .and_then(|v| std::str::from_utf8(v).ok())
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    answer.headers = owned(&head);
                }
                self.conn.recycle(head);
                Ok(end_stream && !informational)
            }
            ClientEvent::Data {
                stream: s,
                data,
                end_stream,
            } => {
                self.conn.release(s, data.len() as u32);
                if s == stream {
                    let room = max_body.saturating_sub(answer.body.len());
                    answer.body.extend_from_slice(&data[..data.len().min(room)]);
                }
                Ok(s == stream && end_stream)
            }
            ClientEvent::Trailers { stream: s, fields } if s == stream => {
                answer.trailers = owned(&fields);
                self.conn.recycle(fields);
                Ok(true)
            }
            ClientEvent::Reset { stream: s, code } if s == stream => {
                Err(format!("h2: stream reset ({code:?})"))
            }
            ClientEvent::Broken { stream: s, code } if s == stream => {
                Err(format!("h2: malformed answer (reset {code:?})"))
            }
            ClientEvent::TooLarge { stream: s } if s == stream => {
                Err("h2: the answer's head is over 16 KiB".into())
            }
            ClientEvent::Response { head, .. } => {
                self.conn.recycle(head);
                Ok(false)
            }
            ClientEvent::Trailers { fields, .. } => {
                self.conn.recycle(fields);
                Ok(false)
            }
            _ => Ok(false),
        }
    }

    /// Writes whatever the codec has queued, in one write.
    async fn flush(&mut self) -> Result<(), String> {
        self.out.clear();
        while let Some(chunk) = self.conn.poll_output() {
            self.out.extend_from_slice(&chunk);
        }
        if self.out.is_empty() {
            return Ok(());
        }
        self.stream
            .write_all(&self.out)
            .await
            .map_err(|e| format!("send: {e}"))?;
        // TLS may hold records back until flushed.
        self.stream.flush().await.map_err(|e| format!("send: {e}"))
    }

    /// Reads what arrived and hands it to the codec. Straight into the
    /// codec's buffer: no chunk on the task's stack (its future would
    /// carry it for every host) and no copy.
    async fn read(&mut self) -> Result<(), String> {
        let start = self.received.len();
        self.received.resize(start + READ_SIZE, 0);
        let read = self.stream.read(&mut self.received[start..]).await;
        let n = *read.as_ref().unwrap_or(&0);
        self.received.truncate(start + n);
        let n = read.map_err(|e| format!("receive: {e}"))?;
        if n == 0 {
            return Err("h2: closed by the server".into());
        }
        self.conn
            .recv(&mut self.received)
            .map_err(|e| format!("h2: {e:?}"))
    }
}
