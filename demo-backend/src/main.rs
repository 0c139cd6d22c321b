//! `demo-backend`: the demo h2c backend as a process (README demo, benchmarks).

use std::io::Write;
use std::net::SocketAddr;
use std::rc::Rc;

use clap::Parser;
use demo_backend::BackendOptions;
use glommio::net::TcpListener;
use glommio::{LocalExecutorBuilder, Placement};

/// h2c (prior knowledge) hello/echo/gRPC-echo backend.
#[derive(Parser, Debug)]
#[command(name = "demo-backend", version)]
struct Cli {
    /// Address to listen on (repeatable; port 0 picks a free port).
    #[arg(long = "listen", required = true)]
    listen: Vec<SocketAddr>,
    /// Backend name (`x-backend` header); with several listeners NAME-1, NAME-2, ...
    #[arg(long, default_value = "backend")]
    name: String,
    /// Pin the executor thread to this CPU.
    #[arg(long)]
    cpu: Option<usize>,
    /// SETTINGS_MAX_CONCURRENT_STREAMS advertised to clients.
    #[arg(long, default_value_t = 1024)]
    max_concurrent_streams: u32,
    /// Send this `set-cookie` value on responses to requests without a
    /// `cookie` header (benchmarks of cookie-carrying clients).
    #[arg(long, value_name = "VALUE")]
    set_cookie_once: Option<String>,
}

fn main() {
    let cli = Cli::parse();
    let placement = cli.cpu.map_or(Placement::Unbound, Placement::Fixed);
    // All listeners share one executor thread: a benchmark backend should
    // occupy one core, however many upstream hosts it pretends to be.
    let result = LocalExecutorBuilder::new(placement)
        .name("demo-backend")
        .io_memory(1 << 20)
        .spawn(move || async move {
            let many = cli.listen.len() > 1;
            let mut tasks = Vec::with_capacity(cli.listen.len());
            for (i, addr) in cli.listen.iter().enumerate() {
                let listener = match TcpListener::bind(addr) {
                    Ok(l) => l,
                    Err(e) => {
                        eprintln!("demo-backend: cannot listen on {addr}: {e}");
                        std::process::exit(1);
                    }
                };
                let bound = listener.local_addr().unwrap_or(*addr);
                let name = if many {
                    format!("{}-{}", cli.name, i + 1)
                } else {
                    cli.name.clone()
                };
                let mut opts = BackendOptions::new(name);
                opts.max_concurrent_streams = cli.max_concurrent_streams;
                opts.set_cookie_once = cli.set_cookie_once.clone();
                println!("listening on {bound}");
                tasks.push(glommio::spawn_local(demo_backend::serve(
                    listener,
                    Rc::new(opts),
                )));
            }
            // Scripts wait for these lines before sending traffic.
            let _ = std::io::stdout().flush();
            for t in tasks {
                t.await;
            }
        })
        .and_then(|h| h.join());
    if let Err(e) = result {
        eprintln!("demo-backend: {e}");
        std::process::exit(1);
    }
}
