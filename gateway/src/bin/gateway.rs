//! `gateway`: run the edge gateway from an Envoy v3 bootstrap (or the
//! embedded demo), reload it on SIGHUP, reopen access logs on SIGUSR1, drain on
//! SIGTERM/SIGINT (a second one exits at once); with `--restart-epoch`, take
//! over from the running epoch without refusing a connection (hot restart).

use shards::drain::{DrainOptions, DrainStrategy};
use shards::pacing::Pacing;
use shards::wire::sockets::ListenSockets;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use demo_backend::BackendOptions;
use engine::session::CookieFormat;

/// The demo bootstrap, embedded so `gateway --demo` needs no files.
const DEMO_CONFIG: &str = include_str!("../../../deploy/examples/demo.yaml");
/// Ports of the demo backends named in the demo bootstrap.
const DEMO_BACKENDS: [(&str, u16); 3] = [
    ("backend-1", 18081),
    ("backend-2", 18082),
    ("backend-3", 18083),
];

#[derive(Parser, Debug)]
#[command(
    name = "gateway",
    version,
    about = "Thread-per-core HTTP/2 edge gateway configured like Envoy"
)]
struct Args {
    /// Envoy v3 bootstrap (YAML or JSON).
    #[arg(short, long, value_name = "FILE", required_unless_present = "demo")]
    config: Option<PathBuf>,
    /// Run the embedded demo config and start its three demo backends.
    #[arg(long, conflicts_with = "config")]
    demo: bool,
    /// Number of data shards (default: one per CPU of --cpu-list, else per core).
    #[arg(long)]
    shards: Option<usize>,
    /// CPUs to pin data shards to, e.g. `0-3,6`.
    #[arg(long, value_name = "LIST")]
    cpu_list: Option<String>,
    /// How new connections are spread over the data shards:
    /// `least-connections` (each to the shard with the fewest, chosen in
    /// the kernel by a SO_REUSEPORT eBPF program; needs CAP_BPF, else the
    /// hash is used and a warning says why) or `kernel-hash` (SO_REUSEPORT's
    /// hash of addresses and ports).
    #[arg(long, value_name = "MODE", default_value = "least-connections")]
    connection_steering: shards::steering::SteeringMode,
    /// Validate the config and exit (status 0 if valid, 2 if not).
    #[arg(long)]
    check: bool,
    /// Log filter (tracing `EnvFilter` syntax), e.g. `info` or `shards=debug`.
    #[arg(long, default_value = "info")]
    log: String,
    /// How new stateful-session cookies are written: `envoy` (base64 of
    /// Envoy's `envoy.Cookie` message, shared with Envoy fleets) or `a55`
    /// (gRFC A55's plain base64("ip:port")). Every form is read either way.
    #[arg(long, value_name = "FORMAT", default_value = "envoy", value_parser = parse_cookie_format)]
    session_cookie_format: CookieFormat,
    /// I/O batching: a data shard with at least --io-batch-min-streams
    /// streams in flight polls its sockets at most every this many
    /// microseconds, so each poll reads and writes more at once (fewer
    /// syscalls per request; up to this much added latency per read).
    /// 0 turns it off. See docs/architecture.md, "I/O batching".
    #[arg(long, value_name = "MICROS", default_value_t = Pacing::default().interval.as_micros() as u64)]
    io_batch_us: u64,
    /// Streams in flight on a shard from which --io-batch-us applies.
    #[arg(long, value_name = "N", default_value_t = Pacing::default().min_streams)]
    io_batch_min_streams: u64,
    /// Envoy's drain time: connections of a listener (or filter chain) an
    /// update removed or changed, and all of them at stop, are told to go
    /// over this many seconds (spread, see --drain-strategy); what is
    /// left at its end is closed. Idle connections close at once.
    #[arg(long, value_name = "SECONDS", default_value_t = 600,
          value_parser = clap::value_parser!(u64).range(0..=31_536_000))]
    drain_time_s: u64,
    /// `gradual` spreads the drain over --drain-time-s so clients do not
    /// all reconnect at once; `immediate` tells every connection at once.
    #[arg(long, value_name = "STRATEGY", default_value = "gradual", value_parser = parse_drain_strategy)]
    drain_strategy: DrainStrategy,
    /// Hot restart (hitless binary upgrade), as Envoy's: 0 for the first
    /// process, then one more for each that takes over from the one
    /// running (its listening sockets handed over, then it drains). With
    /// this flag or --base-id the process listens for its successor.
    /// `gateway-restarter` passes it in the environment.
    #[arg(long, value_name = "N", env = "RESTART_EPOCH")]
    restart_epoch: Option<u32>,
    /// Tells apart the gateways of one host that use hot restart.
    #[arg(long, value_name = "N")]
    base_id: Option<u32>,
    /// After a hot restart, the previous process exits at the latest this
    /// many seconds after its successor took over (its drain, up to
    /// --drain-time-s, usually ends it sooner).
    #[arg(long, value_name = "SECONDS", default_value_t = 900)]
    parent_shutdown_time_s: u64,
    /// The hot restart channel's name prefix: `@name` in the abstract
    /// namespace, else a filesystem path (with --socket-mode).
    #[arg(long, value_name = "PATH", default_value = "@gateway_hot_restart")]
    socket_path: String,
    /// Permissions of a filesystem --socket-path, in octal.
    #[arg(long, value_name = "MODE", default_value = "600", value_parser = parse_octal)]
    socket_mode: u32,
    /// With --restart-epoch above 0 and no running process to take over
    /// from, start afresh instead of failing.
    #[arg(long)]
    skip_hot_restart_on_no_parent: bool,
    /// Never listen for a successor, whatever --restart-epoch and
    /// --base-id say.
    #[arg(long)]
    disable_hot_restart: bool,
}

fn parse_octal(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s, 8).map_err(|_| format!("{s:?}: expected an octal mode such as 600"))
}

impl Args {
    /// The hot restart's options, when it is on.
    fn hot_restart(&self) -> Option<gateway::hot_restart::Options> {
        let on = self.restart_epoch.is_some() || self.base_id.is_some();
        (on && !self.disable_hot_restart).then(|| gateway::hot_restart::Options {
            base_id: self.base_id.unwrap_or(0),
            epoch: self.restart_epoch.unwrap_or(0),
            socket_path: self.socket_path.clone(),
            socket_mode: self.socket_mode,
            parent_shutdown_time: Duration::from_secs(self.parent_shutdown_time_s),
            skip_on_no_parent: self.skip_hot_restart_on_no_parent,
        })
    }
}

fn parse_drain_strategy(s: &str) -> Result<DrainStrategy, String> {
    match s {
        "gradual" => Ok(DrainStrategy::Gradual),
        "immediate" => Ok(DrainStrategy::Immediate),
        other => Err(format!("{other:?}: expected gradual or immediate")),
    }
}

fn parse_cookie_format(s: &str) -> Result<CookieFormat, String> {
    match s {
        "envoy" => Ok(CookieFormat::Envoy),
        "a55" | "plain" => Ok(CookieFormat::Plain),
        other => Err(format!("{other:?}: expected envoy or a55")),
    }
}

fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("--cpu-list: bad entry {part:?} (expected N or N-M)");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) =
                    (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    if out.is_empty() {
        return Err("--cpu-list: empty".into());
    }
    Ok(out)
}

/// Makes the demo's self-signed certificate for `localhost` and
/// 127.0.0.1, hands it to the demo config in the environment variables
/// it names, and writes it where curl can trust it (`--cacert`).
fn demo_certificate() -> Result<std::path::PathBuf, String> {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
        .map_err(|e| format!("demo certificate: {e}"))?;
    let cert = made.cert.pem();
    let dir = std::env::temp_dir().join(format!("gateway-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join("cert.pem");
    std::fs::write(&path, &cert).map_err(|e| format!("{}: {e}", path.display()))?;
    // Set before any other thread starts (it is the first thing `run`
    // does): the environment is process-wide.
    std::env::set_var("GATEWAY_DEMO_TLS_CERT", cert);
    std::env::set_var("GATEWAY_DEMO_TLS_KEY", made.key_pair.serialize_pem());
    Ok(path)
}

fn load(args: &Args) -> Result<engine::Bootstrap, String> {
    match &args.config {
        Some(path) => {
            xds::bootstrap::load_file(path).map_err(|e| format!("{}: {e}", path.display()))
        }
        None => xds::bootstrap::from_str(DEMO_CONFIG, xds::bootstrap::Format::Yaml)
            .map_err(|e| format!("embedded demo config: {e}")),
    }
}

/// `--check` also validates the files `path_config_source` names, as a
/// start would.
fn check_file_sources(b: &engine::Bootstrap) -> Result<(), String> {
    use xds::client::{ResourceType, XdsClient};
    let now = std::time::Instant::now();
    let mut client = XdsClient::new(b, now);
    for kind in [ResourceType::Cluster, ResourceType::Listener] {
        if let Some(engine::ConfigSource::Path(path)) = client.source(kind).cloned() {
            let resp = xds::file::load_discovery_response(&path).map_err(|e| e.to_string())?;
            if let Some(e) = client.on_file(kind, &resp, now).rejected {
                return Err(format!("{}: {e}", path.display()));
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&args.log).unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => code,
    }
}

/// Says why the process stops early and gives its exit status (1: could
/// not start, 2: invalid configuration or arguments). The message is
/// printed where the error happens, before whatever was started stops.
fn fail(status: u8) -> impl FnOnce(String) -> ExitCode {
    move |e| {
        gateway::say!("error: {e}");
        ExitCode::from(status)
    }
}

/// Everything after logging: check or start, serve until a signal says
/// stop, drain.
fn run(args: &Args) -> Result<(), ExitCode> {
    let demo_cert = args
        .demo
        .then(demo_certificate)
        .transpose()
        .map_err(fail(1))?;
    let bootstrap = load(args).map_err(fail(2))?;
    if args.check {
        check_file_sources(&bootstrap).map_err(fail(2))?;
        println!("configuration OK");
        return Ok(());
    }
    let cpus = args
        .cpu_list
        .as_deref()
        .map(parse_cpu_list)
        .transpose()
        .map_err(fail(2))?;
    let mut signals = install_signal_handlers()?;
    let hot = args.hot_restart();
    // Before anything binds: the sockets of the epoch running now.
    let mut inherited = match &hot {
        Some(h) => gateway::hot_restart::take_over(h).map_err(fail(1))?,
        None => None,
    };
    let taken = inherited
        .as_mut()
        .map(|i| std::mem::take(&mut i.sockets))
        .unwrap_or_default();
    let sockets = Arc::new(ListenSockets::new(taken));
    // Listening for the next epoch before serving: a name another
    // gateway holds (the same --base-id) fails the start, not an upgrade.
    let successor = match &hot {
        Some(h) => Some(
            gateway::hot_restart::Server::start(h, Arc::clone(&sockets), hand_over(h))
                .map_err(fail(1))?,
        ),
        None => None,
    };
    let backends = if args.demo {
        start_demo_backends()?
    } else {
        Vec::new()
    };
    let gw = start_gateway(args, bootstrap, cpus, sockets)?;
    print_addresses(&gw, args.demo, demo_cert.as_deref());
    if hot.is_some() {
        // Listeners and clusters from xDS first (or their initial fetch
        // timeouts): the previous epoch serves until this one can.
        while !gw.wait_ready(Duration::from_secs(10)) {
            gateway::say!(
                "hot restart: waiting for the first xDS configuration before taking over"
            );
        }
    }
    if let Some(s) = &successor {
        s.ready();
    }
    if let Some(parent) = inherited {
        let pid = parent.parent_pid;
        match parent.drain_parent() {
            Ok(()) => gateway::say!("hot restart: took over from process {pid}, which drains"),
            Err(e) => gateway::say!("hot restart: process {pid} was not told to drain: {e}"),
        }
    }
    serve_until_stop(args, &gw, &mut signals);
    if HANDED_OVER.load(std::sync::atomic::Ordering::Acquire) {
        // The successor serves the admin socket from now on: one admin
        // answers on it (its `/ready` is not this draining one's).
        gw.stop_admin();
    }
    drain_and_stop(gw, signals, args.drain_time_s);
    drop(backends);
    if let Some(dir) = demo_cert.as_deref().and_then(std::path::Path::parent) {
        let _ = std::fs::remove_dir_all(dir);
    }
    Ok(())
}

/// A successor took over (hot restart): this process only drains.
static HANDED_OVER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// What a process does when its successor took over: stops as at
/// SIGTERM (stops accepting, drains), and exits at the latest
/// `--parent-shutdown-time-s` later.
fn hand_over(h: &gateway::hot_restart::Options) -> impl FnOnce() + Send + 'static {
    let limit = h.parent_shutdown_time;
    move || {
        HANDED_OVER.store(true, std::sync::atomic::Ordering::Release);
        std::thread::spawn(move || {
            std::thread::sleep(limit);
            gateway::say!("hot restart: --parent-shutdown-time-s reached; exiting");
            std::process::exit(0);
        });
        // The main thread waits on signals: the same path as SIGTERM's.
        // SAFETY: plain system calls.
        unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
    }
}

/// Handlers go in before anything serves: a SIGHUP or SIGTERM that
/// arrives the moment we print our addresses must not kill the process.
/// The main thread then blocks on them: no polling while idle.
fn install_signal_handlers() -> Result<signal_hook::iterator::Signals, ExitCode> {
    signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGUSR1,
    ])
    .map_err(|e| fail(1)(format!("installing signal handler: {e}")))
}

/// Starts the demo bootstrap's three backends, each on a thread of its own.
fn start_demo_backends() -> Result<Vec<demo_backend::BackendHandle>, ExitCode> {
    let mut backends = Vec::new();
    for (name, port) in DEMO_BACKENDS {
        let addr = ([127, 0, 0, 1], port).into();
        match demo_backend::spawn_thread(addr, BackendOptions::new(name), None) {
            Ok(b) => backends.push(b),
            Err(e) => return Err(fail(1)(format!("demo backend {name} on {addr}: {e}"))),
        }
    }
    Ok(backends)
}

/// Starts the gateway with the options the command line gave; an invalid
/// configuration (a file source) exits with 2, anything else with 1.
fn start_gateway(
    args: &Args,
    bootstrap: engine::Bootstrap,
    cpus: Option<Vec<usize>>,
    sockets: Arc<ListenSockets>,
) -> Result<gateway::GatewayHandle, ExitCode> {
    let opts = gateway::Options {
        shards: args.shards,
        cpus,
        session_cookie_format: args.session_cookie_format,
        pacing: Pacing {
            interval: Duration::from_micros(args.io_batch_us),
            min_streams: args.io_batch_min_streams,
        },
        drain: DrainOptions {
            time: Duration::from_secs(args.drain_time_s),
            strategy: args.drain_strategy,
        },
        sockets,
        connection_steering: args.connection_steering,
    };
    gateway::start(bootstrap, opts).map_err(|e| {
        let config_error = matches!(e, gateway::StartError::Config(_));
        fail(if config_error { 2 } else { 1 })(e.to_string())
    })
}

/// Prints where the gateway listens, and for the demo what to try.
fn print_addresses(gw: &gateway::GatewayHandle, demo: bool, demo_cert: Option<&std::path::Path>) {
    for (name, addr) in &gw.listeners {
        println!("listener {name} on {addr}");
    }
    if let Some(a) = gw.admin_addr {
        println!("admin on http://{a}/");
    }
    println!("serving with {} data shard(s)", gw.shard_stats.len());
    if demo {
        let (l, t) = (gw.listener("ingress"), gw.listener("ingress_tls"));
        if let (Some(l), Some(t), Some(a), Some(ca)) = (l, t, gw.admin_addr, demo_cert) {
            let (ca, tp) = (ca.display(), t.port());
            println!(
                "\ntry (HTTP/1.1 and HTTP/2 on the same port):\n  \
                 curl -i http://{l}/\n  \
                 curl --http2-prior-knowledge -i http://{l}/\n  \
                 curl -i http://{l}/one/x          # prefix_rewrite to one backend\n  \
                 curl -d 'echo me' http://{l}/echo  # bodies are echoed\n  \
                 curl -i -c jar -b jar http://{l}/sticky  # stateful session: repeat, same x-backend\n\
                 over TLS (a self-signed certificate for localhost; ALPN picks the protocol):\n  \
                 curl --cacert {ca} -i https://localhost:{tp}/\n  \
                 curl --cacert {ca} --http1.1 -i https://localhost:{tp}/\n\
                 admin:\n  \
                 curl http://{a}/stats\n  curl http://{a}/clusters\n  curl http://{a}/config_dump\n\
                 Ctrl-C drains and stops."
            );
        }
    }
}

/// Serves until SIGTERM or SIGINT: SIGUSR1 reopens the access logs, SIGHUP
/// reloads the configuration.
fn serve_until_stop(
    args: &Args,
    gw: &gateway::GatewayHandle,
    signals: &mut signal_hook::iterator::Signals,
) {
    for signal in signals.forever() {
        if signal == signal_hook::consts::SIGUSR1 {
            // logrotate moved the access log files away: open new ones.
            gw.reopen_logs();
            continue;
        }
        if signal == signal_hook::consts::SIGHUP {
            // Bad config on reload: keep serving what we have.
            match load(args).and_then(|b| gw.reload(b)) {
                Ok(v) => gateway::say!("reloaded configuration (version {v})"),
                Err(e) => gateway::say!("reload rejected, keeping current configuration: {e}"),
            }
            continue;
        }
        break;
    }
}

/// Drains and stops the gateway; a second SIGTERM or SIGINT meanwhile
/// ends the drain: the process exits at once.
fn drain_and_stop(
    gw: gateway::GatewayHandle,
    mut signals: signal_hook::iterator::Signals,
    drain_time_s: u64,
) {
    gateway::say!(
        "draining and stopping (up to --drain-time-s {drain_time_s}s; send the signal again to exit now)"
    );
    std::thread::spawn(move || {
        for signal in signals.forever() {
            if signal == signal_hook::consts::SIGTERM || signal == signal_hook::consts::SIGINT {
                gateway::say!("second signal: exiting without waiting for the drain");
                std::process::exit(1);
            }
        }
    });
    gw.shutdown();
}

#[cfg(test)]
mod tests {
    use super::parse_cpu_list;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-2,5").unwrap(), vec![0, 1, 2, 5]);
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
    }
}
