//! `loadgen` CLI: parse options, run, print the text report or `--json`.

use std::io::Write;

use clap::Parser;
use loadgen::Args;

fn main() {
    let args = Args::parse();
    match loadgen::run(&args) {
        Ok(report) => {
            // Not `println!`: a closed pipe (`| head`) must not panic.
            let mut out = std::io::stdout().lock();
            let _ = if args.json {
                writeln!(out, "{}", report.to_json())
            } else {
                write!(out, "{report}")
            };
        }
        Err(e) => {
            eprintln!("loadgen: {e}");
            std::process::exit(2);
        }
    }
}
