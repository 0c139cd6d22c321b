//! What an idle connection holds after a burst of streams.

use super::*;
use crate::conn::output::BUF_KEEP;
use crate::conn::streams::StreamMap;

/// `count` GETs from stream `first` on, all answered; returns the memory
/// held while they were open.
fn burst(p: &mut Peer, first: u32, count: u32) -> usize {
    let req = [request("GET", "/items"), vec![("accept", "*/*")]].concat();
    for i in 0..count {
        p.headers(first + 2 * i, &req, true);
    }
    p.flush().unwrap();
    let mut streams = Vec::new();
    for e in p.events() {
        let (stream, head, _) = expect_request(Some(e));
        p.conn.recycle(head);
        streams.push(stream);
    }
    assert_eq!(streams.len(), count as usize);
    let peak = p.conn.memory_bytes();
    let ct: (&[u8], &[u8]) = (b"content-type", b"application/json");
    for s in streams {
        p.conn.send_headers(s, 200, [ct], false).unwrap();
        let mut body = Bytes::from_static(b"{}");
        assert_eq!(p.conn.send_data(s, &mut body, true), Ok(2));
    }
    assert_eq!(p.read().len(), 2 * count as usize);
    assert_eq!(p.conn.open_streams(), 0);
    peak
}

#[test]
fn memory_goes_back_near_idle_after_100_streams() {
    let mut p = Peer::connected(ServerConfig::default());
    burst(&mut p, 1, 1);
    let idle = p.conn.memory_bytes();
    let idle_streams = p.conn.streams.memory_bytes();
    let peak = burst(&mut p, 3, 100);
    let after = p.conn.memory_bytes();
    assert!(peak > idle + 5000, "100 streams held only {peak} vs {idle}");
    // Until the connection goes quiet, the stream map may keep room for
    // a burst, the output buffer up to BUF_KEEP, and the list pool two
    // lists.
    let keep = StreamMap::burst_keep_bytes();
    assert!(p.conn.streams.memory_bytes() <= keep);
    assert!(
        after <= idle + BUF_KEEP + keep + 512,
        "idle {idle} bytes, {after} after 100 streams (peak {peak})"
    );
    // And once more: nothing accumulates.
    burst(&mut p, 203, 100);
    assert!(p.conn.memory_bytes() <= after + 256);
    // Quiet: the spare buffers go too, below the first idle value, and
    // the stream map is back to its smallest.
    p.conn.shrink();
    assert_eq!(p.conn.streams.memory_bytes(), idle_streams);
    assert!(p.conn.memory_bytes() <= idle, "{}", p.conn.memory_bytes());
    // And the connection works as before.
    burst(&mut p, 403, 3);
}
