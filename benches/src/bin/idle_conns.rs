//! `idle_conns ADDR N [HOLD_SECS]`: opens N idle HTTP/2 cleartext (prior
//! knowledge) connections to ADDR, completes the handshake on each (client
//! preface + SETTINGS, server SETTINGS acknowledged, our SETTINGS acked by
//! the server), prints `ready N` on stdout, then holds them open for
//! HOLD_SECS (default 60) or until killed.
//!
//! Used by benches/e2e/compare.sh to measure a proxy's memory per idle
//! connection (its RSS before and after, divided by N). Std only, no h2
//! crate: the point is to open many connections cheaply and exactly.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const FRAME_SETTINGS: u8 = 0x4;
const FLAG_ACK: u8 = 0x1;

fn frame_header(len: usize, kind: u8, flags: u8, stream: u32) -> [u8; 9] {
    let l = (len as u32).to_be_bytes();
    let s = stream.to_be_bytes();
    [l[1], l[2], l[3], kind, flags, s[0], s[1], s[2], s[3]]
}

/// Raises the soft open-files limit to the hard limit.
fn raise_nofile() {
    // SAFETY: plain getrlimit/setrlimit on a local struct.
    unsafe {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

/// Connects and completes the h2 handshake.
fn open(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(3))?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut hello = PREFACE.to_vec();
    hello.extend_from_slice(&frame_header(0, FRAME_SETTINGS, 0, 0)); // empty SETTINGS
    s.write_all(&hello)?;
    let (mut got_settings, mut got_ack) = (false, false);
    let mut buf = Vec::with_capacity(256);
    let mut chunk = [0u8; 1024];
    while !(got_settings && got_ack) {
        // Parse whole frames already buffered.
        while buf.len() >= 9 {
            let len =
                (usize::from(buf[0]) << 16) | (usize::from(buf[1]) << 8) | usize::from(buf[2]);
            if buf.len() < 9 + len {
                break;
            }
            let (kind, flags) = (buf[3], buf[4]);
            if kind == FRAME_SETTINGS {
                if flags & FLAG_ACK != 0 {
                    got_ack = true;
                } else {
                    got_settings = true;
                    s.write_all(&frame_header(0, FRAME_SETTINGS, FLAG_ACK, 0))?;
                }
            }
            buf.drain(..9 + len);
        }
        if got_settings && got_ack {
            break;
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "server closed during handshake",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    s.set_read_timeout(None)?;
    Ok(s)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: idle_conns ADDR N [HOLD_SECS]");
        return ExitCode::from(2);
    }
    let Ok(addr) = args[1].parse::<SocketAddr>() else {
        eprintln!("idle_conns: bad address {}", args[1]);
        return ExitCode::from(2);
    };
    let Ok(n) = args[2].parse::<usize>() else {
        eprintln!("idle_conns: bad count {}", args[2]);
        return ExitCode::from(2);
    };
    let hold = Duration::from_secs(args.get(3).and_then(|h| h.parse().ok()).unwrap_or(60));
    raise_nofile();

    let start = Instant::now();
    let mut conns = Vec::with_capacity(n);
    for i in 0..n {
        match open(addr) {
            Ok(s) => conns.push(s),
            Err(e) => {
                eprintln!("idle_conns: connection {i} to {addr}: {e}");
                return ExitCode::from(1);
            }
        }
    }
    println!("ready {n} ({:.0} ms)", start.elapsed().as_secs_f64() * 1e3);
    let _ = std::io::stdout().flush();

    // Hold; the runner measures, then kills us (or HOLD_SECS pass).
    std::thread::sleep(hold);
    drop(conns);
    ExitCode::SUCCESS
}
