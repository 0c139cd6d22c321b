//! Command-line options and their validation into a [`Plan`] the workers run.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use clap::Parser;
use http::{HeaderName, HeaderValue, Method};

/// HTTP/2 cleartext (prior knowledge) load generator.
///
/// Closed loop by default (each of the `-c × -m` streams sends its next
/// request when the previous one finished); open loop with `--rate`, where
/// latency is measured from the intended send time (corrected for
/// coordinated omission).
///
/// With `--sessions N`, every request belongs to one of N virtual sessions,
/// each with its own cookie jar and at most one request in flight; the
/// report adds how often a session's backend (the `--backend-header` of the
/// responses) changed.
#[derive(Parser, Debug, Clone)]
#[command(name = "loadgen", version)]
pub struct Args {
    /// Target URL: http://HOST:PORT/path (h2c, prior knowledge).
    pub url: String,

    /// Connections in total, spread over the threads.
    #[arg(short = 'c', long, default_value_t = 16)]
    pub connections: usize,

    /// Concurrent streams per connection.
    #[arg(short = 'm', long = "streams", default_value_t = 16)]
    pub streams: usize,

    /// Worker threads, one glommio executor each (default: all cores).
    #[arg(short = 't', long)]
    pub threads: Option<usize>,

    /// Pin worker threads to these CPUs, e.g. `0,2-3` (thread i gets the i-th).
    #[arg(long)]
    pub cpu_list: Option<String>,

    /// Measured duration, e.g. `10s`, `500ms`, `1m`.
    #[arg(short = 'd', long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,

    /// Warm-up before measuring (load is sent but not recorded).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub warmup: Duration,

    /// Open loop: total requests per second, spread evenly over connections.
    #[arg(short = 'r', long)]
    pub rate: Option<f64>,

    /// Request method (default GET, or POST when a body is sent).
    #[arg(short = 'X', long)]
    pub method: Option<String>,

    /// Request body size in bytes (the gRPC message size with --grpc).
    #[arg(short = 'b', long, default_value_t = 0)]
    pub body_size: usize,

    /// Path (and query), overriding the URL's.
    #[arg(long)]
    pub path: Option<String>,

    /// Extra request header `name: value` (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,

    /// :authority to send (default: HOST:PORT of the URL).
    #[arg(long)]
    pub authority: Option<String>,

    /// gRPC unary mode: POST application/grpc, success = grpc-status 0.
    #[arg(long)]
    pub grpc: bool,

    /// Per-request timeout (counted as a `timeout` error).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,

    /// TCP connect + h2 handshake timeout.
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    pub connect_timeout: Duration,

    /// Per-stream receive window in bytes (the connection window is larger).
    #[arg(long, default_value_t = 16 << 20)]
    pub window: u32,

    /// Session mode: N virtual sessions, split over the threads (at most N
    /// threads then). Each keeps the cookies its responses set and sends
    /// them back, has at most one request in flight (a free stream slot
    /// takes the least recently used idle session, or waits for one: fewer
    /// sessions than `-c × -m` slots caps the concurrency at N), and counts
    /// affinity breaks: responses from another backend than its previous one.
    #[arg(long, value_name = "N")]
    pub sessions: Option<usize>,

    /// Session mode: response header naming the backend that answered.
    #[arg(long, value_name = "NAME", default_value = crate::stats::DEFAULT_BACKEND_HEADER)]
    pub backend_header: String,

    /// Print one JSON object on stdout instead of the text report.
    #[arg(long)]
    pub json: bool,

    /// No progress lines on stderr.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

impl Args {
    /// Defaults for `url`, as if run as `loadgen URL`.
    pub fn for_url(url: &str) -> Args {
        Args::parse_from(["loadgen", url])
    }
}

/// Parses `10s`, `250ms`, `2m`, `1h`, `100us` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("invalid duration `{s}`"))?;
    let secs = match unit.trim() {
        "" | "s" => n,
        "ms" => n / 1e3,
        "us" | "µs" => n / 1e6,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        u => return Err(format!("invalid duration unit `{u}` in `{s}`")),
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("invalid duration `{s}`"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses a CPU list such as `0,2-3`.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("invalid cpu list `{s}`");
        match part.split_once('-') {
            Some((a, b)) => {
                let a: usize = a.trim().parse().map_err(|_| bad())?;
                let b: usize = b.trim().parse().map_err(|_| bad())?;
                if a > b {
                    return Err(bad());
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().map_err(|_| bad())?),
        }
    }
    if cpus.is_empty() {
        return Err(format!("empty cpu list `{s}`"));
    }
    Ok(cpus)
}

/// Validated, resolved configuration. Holds strings and plain values only:
/// each worker thread builds its own `http` values from it so that threads
/// never share reference counts (no cache-line ping-pong per request).
#[derive(Debug, Clone)]
pub struct Plan {
    pub addr: SocketAddr,
    /// `http://AUTHORITY/PATH`, what goes into :scheme/:authority/:path.
    pub uri: String,
    pub method: Method,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body_size: usize,
    /// Whether the request carries a body (POST/PUT..., or gRPC).
    pub has_body: bool,
    pub grpc: bool,
    pub connections: usize,
    pub streams: usize,
    pub threads: usize,
    pub cpus: Option<Vec<usize>>,
    pub duration: Duration,
    pub warmup: Duration,
    pub rate: Option<f64>,
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub window: u32,
    /// Session mode: the number of sessions.
    pub sessions: Option<usize>,
    /// Session mode: the backend header's name, lower-case and valid.
    pub backend_header: String,
}

impl Plan {
    pub fn from_args(args: &Args) -> Result<Plan, String> {
        let rest = args
            .url
            .strip_prefix("http://")
            .ok_or_else(|| format!("URL must start with http:// (h2c): `{}`", args.url))?;
        let (hostport, url_path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, "/"),
        };
        if hostport.is_empty() {
            return Err(format!("URL has no host: `{}`", args.url));
        }
        let with_port = if hostport
            .rsplit_once(':')
            .is_some_and(|(_, p)| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        {
            hostport.to_string()
        } else {
            format!("{hostport}:80")
        };
        let addr = with_port
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve `{hostport}`: {e}"))?
            .next()
            .ok_or_else(|| format!("`{hostport}` resolves to no address"))?;
        let authority = args.authority.as_deref().unwrap_or(hostport);
        let path = args.path.as_deref().unwrap_or(url_path);
        let path = if path.starts_with('/') {
            path.to_string()
        } else {
            format!("/{path}")
        };
        let uri = format!("http://{authority}{path}");
        uri.parse::<http::Uri>()
            .map_err(|e| format!("invalid URI `{uri}`: {e}"))?;

        let method = match (&args.method, args.grpc || args.body_size > 0) {
            (Some(m), _) => Method::from_bytes(m.to_ascii_uppercase().as_bytes())
                .map_err(|_| format!("invalid method `{m}`"))?,
            (None, true) => Method::POST,
            (None, false) => Method::GET,
        };
        if args.grpc && method != Method::POST {
            return Err("--grpc requires POST".into());
        }
        let has_body = args.grpc || (args.body_size > 0 && method != Method::GET);
        if args.body_size > 0 && !has_body {
            return Err("--body-size with GET: use -X POST".into());
        }

        let mut headers = Vec::with_capacity(args.headers.len());
        for h in &args.headers {
            let (name, value) = h
                .split_once(':')
                .ok_or_else(|| format!("header must be `name: value`: `{h}`"))?;
            let name = HeaderName::from_bytes(name.trim().to_ascii_lowercase().as_bytes())
                .map_err(|_| format!("invalid header name in `{h}`"))?;
            let value = HeaderValue::from_str(value.trim())
                .map_err(|_| format!("invalid header value in `{h}`"))?;
            headers.push((name, value));
        }

        if args.connections == 0 || args.streams == 0 {
            return Err("-c and -m must be at least 1".into());
        }
        if args.duration.is_zero() {
            return Err("--duration must be > 0".into());
        }
        if let Some(r) = args.rate {
            if !(r.is_finite() && r > 0.0) {
                return Err("--rate must be > 0".into());
            }
        }
        if args.sessions == Some(0) {
            return Err("--sessions must be at least 1".into());
        }
        let backend_header = args.backend_header.trim().to_ascii_lowercase();
        HeaderName::from_bytes(backend_header.as_bytes())
            .map_err(|_| format!("invalid --backend-header `{}`", args.backend_header))?;
        let cpus = args.cpu_list.as_deref().map(parse_cpu_list).transpose()?;
        let default_threads = cpus.as_ref().map_or_else(
            || std::thread::available_parallelism().map_or(1, |n| n.get()),
            Vec::len,
        );
        let threads = args
            .threads
            .unwrap_or(default_threads)
            // Every thread needs a connection, and a session in session mode.
            .clamp(1, args.connections.min(args.sessions.unwrap_or(usize::MAX)));

        Ok(Plan {
            addr,
            uri,
            method,
            headers,
            body_size: args.body_size,
            has_body,
            grpc: args.grpc,
            connections: args.connections,
            streams: args.streams,
            threads,
            cpus,
            duration: args.duration,
            warmup: args.warmup,
            rate: args.rate,
            timeout: args.timeout,
            connect_timeout: args.connect_timeout,
            window: args.window.clamp(65_535, (1 << 31) - 1),
            sessions: args.sessions,
            backend_header,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("x").is_err());
        assert!(parse_duration("3 parsecs").is_err());
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0,2-4").unwrap(), vec![0, 2, 3, 4]);
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("").is_err());
    }

    #[test]
    fn plan_from_url() {
        let mut a = Args::for_url("http://127.0.0.1:8080/a/b?x=1");
        a.headers = vec!["X-Foo: bar".into()];
        a.authority = Some("example.com".into());
        let p = Plan::from_args(&a).unwrap();
        assert_eq!(p.addr, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(p.uri, "http://example.com/a/b?x=1");
        assert_eq!(p.method, Method::GET);
        assert_eq!(p.headers[0].0.as_str(), "x-foo");
        assert!(!p.has_body);

        let mut a = Args::for_url("http://127.0.0.1:8080");
        a.body_size = 10;
        a.path = Some("echo".into());
        let p = Plan::from_args(&a).unwrap();
        assert_eq!(p.method, Method::POST);
        assert_eq!(p.uri, "http://127.0.0.1:8080/echo");
        assert!(p.has_body);

        assert!(Plan::from_args(&Args::for_url("https://x:1/")).is_err());
        let mut a = Args::for_url("http://127.0.0.1:1/");
        a.headers = vec!["nocolon".into()];
        assert!(Plan::from_args(&a).is_err());
    }

    #[test]
    fn session_options() {
        let a = Args::parse_from(["loadgen", "http://127.0.0.1:1/", "-c", "4", "-t", "4"]);
        let p = Plan::from_args(&a).unwrap();
        assert_eq!(p.sessions, None);
        assert_eq!(p.backend_header, "x-backend");
        assert_eq!(p.threads, 4);

        let a = Args::parse_from([
            "loadgen",
            "http://127.0.0.1:1/",
            "-c",
            "4",
            "-t",
            "4",
            "--sessions",
            "3",
            "--backend-header",
            "X-Upstream",
        ]);
        let p = Plan::from_args(&a).unwrap();
        assert_eq!(p.sessions, Some(3));
        assert_eq!(p.backend_header, "x-upstream");
        // No thread without a session.
        assert_eq!(p.threads, 3);

        let mut a = Args::for_url("http://127.0.0.1:1/");
        a.sessions = Some(0);
        assert!(Plan::from_args(&a).is_err());
        a.sessions = Some(1);
        a.backend_header = "bad header".into();
        assert!(Plan::from_args(&a).is_err());
    }
}
