//! Access logs from the data path: a line per request over both protocols, with the request and response fields, flags and bytes a format names; files reopened on request (SIGUSR1 / logrotate).

mod support;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use engine::access_log::LogFormat;
use engine::{AccessLog, LogSink};
use support::*;

const FORMAT: &str = "%PROTOCOL% %REQ(:METHOD)% %REQ(:PATH)% %RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %RESP(X-BACKEND)% %UPSTREAM_CLUSTER% %REQ(X-TAG?USER-AGENT)%\n";

fn lines(path: &std::path::Path, n: usize) -> Vec<String> {
    let mut got = Vec::new();
    wait_until(Duration::from_secs(5), "the log lines", || {
        got = std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect();
        got.len() >= n
    });
    got
}

fn h1(addr: SocketAddr, request: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[test]
fn each_request_gets_a_line_and_files_reopen() {
    let dir = std::env::temp_dir().join(format!("gw-access-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("access.log");
    let b = backend("b1");
    let mut l = (*listener(vec![prefix_route("/known", "c", None)])).clone();
    l.filter_chains[0].http.access_log = vec![AccessLog {
        sink: LogSink::File(path.clone()),
        format: Arc::new(LogFormat::text(FORMAT).unwrap()),
    }];
    let gw = start(bootstrap(Arc::new(l), vec![cluster("c", &[b.addr()])]), 1);
    let addr = gw.listener("ingress").expect("listener");

    let resp = h1(
        addr,
        "POST /known/echo HTTP/1.1\r\nHost: a\r\nX-Tag: t1\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
    );
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    h1(
        addr,
        "GET /nowhere HTTP/1.1\r\nHost: a\r\nUser-Agent: ua/1\r\nConnection: close\r\n\r\n",
    );
    let replies = get_n(addr, "/known", 1);
    assert_eq!(replies[0].0, 200);
    let got = lines(&path, 3);
    assert_eq!(got[0], "HTTP/1.1 POST /known/echo 200 - 5 5 b1 c t1");
    assert_eq!(got[1], "HTTP/1.1 GET /nowhere 404 NR 0 0 - - ua/1");
    assert_eq!(got[2], "HTTP/2 GET /known 200 - 0 14 b1 c -");

    // logrotate: the file is moved away, then the gateway told.
    std::fs::rename(&path, dir.join("access.log.1")).unwrap();
    gw.reopen_logs();
    assert_eq!(get_n(addr, "/known", 1)[0].0, 200);
    let got = lines(&path, 1);
    assert_eq!(got, ["HTTP/2 GET /known 200 - 0 14 b1 c -"]);
    assert_eq!(
        lines(&dir.join("access.log.1"), 3).len(),
        3,
        "the old file kept its lines"
    );
    gw.shutdown();
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn failures_carry_their_response_flags() {
    let dir = std::env::temp_dir().join(format!("gw-access-uf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("access.log");
    // A port nobody listens on: connecting fails.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut l = (*listener(vec![prefix_route("/", "c", None)])).clone();
    l.filter_chains[0].http.access_log = vec![AccessLog {
        sink: LogSink::File(path.clone()),
        format: Arc::new(
            LogFormat::json(&[
                ("code".into(), "%RESPONSE_CODE%".into()),
                ("flags".into(), "%RESPONSE_FLAGS%".into()),
                ("upstream".into(), "%UPSTREAM_HOST%".into()),
            ])
            .unwrap(),
        ),
    }];
    let gw = start(bootstrap(Arc::new(l), vec![cluster("c", &[dead])]), 1);
    let addr = gw.listener("ingress").expect("listener");
    let resp = h1(
        addr,
        "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    assert!(resp.starts_with("HTTP/1.1 503"), "{resp}");
    let got = lines(&path, 1);
    assert_eq!(
        got[0],
        format!("{{\"code\":503,\"flags\":\"UF\",\"upstream\":\"{dead}\"}}")
    );
    gw.shutdown();
    std::fs::remove_dir_all(&dir).ok();
}
