//! `gateway-restarter COMMAND [ARGS...]`: keeps a hot-restarting gateway under one process id for a service manager (systemd's `ExecReload`, a container's PID 1), as Envoy's `hot-restarter.py` does.
//!
//! It runs COMMAND with `RESTART_EPOCH=0` in its environment (`gateway`
//! reads it as `--restart-epoch`), and:
//!
//! - on SIGHUP runs COMMAND again with the next epoch, which takes the
//!   running gateway's listening sockets and tells it to drain (a new
//!   binary and a new bootstrap, no connection refused);
//! - forwards SIGTERM and SIGINT to every child and exits once they are
//!   gone (with the status of the last, 0 if it drained and stopped);
//!   forwards SIGUSR1 (reopen access logs);
//! - when a child exits: 0 is a drained gateway going away; a failure of
//!   the newest child (a bad bootstrap or binary) while an older one still
//!   serves leaves that one serving, unlike Envoy's restarter, which then
//!   kills everything; when no child is left it exits with the last one's
//!   status, for the service manager to restart.

use std::process::{Child, Command, ExitCode};

use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGTERM, SIGUSR1};
use signal_hook::iterator::Signals;

fn usage() -> ExitCode {
    gateway::say!(
        "usage: gateway-restarter COMMAND [ARGS...]\n\
         runs COMMAND (a gateway) with RESTART_EPOCH=0, and again with the next epoch on \
         SIGHUP (hot restart)"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let Some(command) = args.next() else {
        return usage();
    };
    if command == "-h" || command == "--help" {
        return usage();
    }
    let rest: Vec<_> = args.collect();
    let mut signals = match Signals::new([SIGHUP, SIGTERM, SIGINT, SIGUSR1, SIGCHLD]) {
        Ok(s) => s,
        Err(e) => {
            gateway::say!("gateway-restarter: signal handlers: {e}");
            return ExitCode::from(1);
        }
    };
    let spawn = |epoch: u32| -> std::io::Result<Child> {
        Command::new(&command)
            .args(&rest)
            .env("RESTART_EPOCH", epoch.to_string())
            .spawn()
    };
    let mut epoch = 0;
    // Oldest first; the last is the newest.
    let mut children: Vec<Child> = match spawn(epoch) {
        Ok(c) => vec![c],
        Err(e) => {
            gateway::say!("gateway-restarter: starting {command:?}: {e}");
            return ExitCode::from(1);
        }
    };
    let mut stopping = false;
    let mut last_status = 0u8;
    loop {
        for signal in signals.wait() {
            match signal {
                SIGHUP if !stopping => {
                    epoch += 1;
                    match spawn(epoch) {
                        Ok(c) => {
                            gateway::say!(
                                "gateway-restarter: started epoch {epoch} (pid {})",
                                c.id()
                            );
                            children.push(c);
                        }
                        Err(e) => gateway::say!("gateway-restarter: epoch {epoch}: {e}"),
                    }
                }
                SIGTERM | SIGINT => {
                    stopping = true;
                    forward(&children, libc::SIGTERM);
                }
                SIGUSR1 => forward(&children, libc::SIGUSR1),
                _ => {}
            }
        }
        // Reap whoever exited (SIGCHLD, or a signal that raced with it).
        let newest = children.last().map(Child::id);
        let mut i = 0;
        while i < children.len() {
            match children[i].try_wait() {
                Ok(Some(status)) => {
                    let pid = children[i].id();
                    let code = status.code().map_or(1, |c| c.clamp(0, 255) as u8);
                    // Reaped by `try_wait`: `wait` returns its kept status.
                    let _ = children.remove(i).wait();
                    last_status = code;
                    if code != 0 && Some(pid) == newest && !children.is_empty() {
                        gateway::say!(
                            "gateway-restarter: epoch {epoch} (pid {pid}) failed with {status}; \
                             the previous epoch keeps serving"
                        );
                        // The next SIGHUP takes over from the one serving:
                        // it reuses the failed epoch's number.
                        epoch -= 1;
                    } else if code != 0 {
                        gateway::say!("gateway-restarter: pid {pid} exited with {status}");
                    }
                }
                _ => i += 1,
            }
        }
        if children.is_empty() {
            return ExitCode::from(last_status);
        }
    }
}

/// Sends `sig` to every child.
fn forward(children: &[Child], sig: libc::c_int) {
    for c in children {
        if let Ok(pid) = libc::pid_t::try_from(c.id()) {
            // SAFETY: kill(2) on our own, not yet reaped, child.
            unsafe { libc::kill(pid, sig) };
        }
    }
}
