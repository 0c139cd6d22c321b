//! The `gateway` binary as a child process for tests: spawned with its output captured, killed on drop, every wait bounded; a serving one with the addresses it printed.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

pub const GATEWAY: &str = env!("CARGO_BIN_EXE_gateway");
/// Upper bound for anything the gateway should do "at once".
pub const PATIENCE: Duration = Duration::from_secs(15);

/// A fresh, empty directory for one test's files.
pub fn temp_dir(tag: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "cli-{tag}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

/// Writes `text` to `path` atomically (write a sibling, then rename), so the
/// gateway never reads a half-written file.
pub fn write_config(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write config");
    std::fs::rename(&tmp, path).expect("rename config");
}

/// A running `gateway` child: killed (and reaped) when dropped.
pub struct Child {
    pub child: std::process::Child,
    /// stdout, line by line, as it comes.
    pub stdout: mpsc::Receiver<String>,
    /// Everything written on stderr so far.
    stderr: Arc<Mutex<String>>,
    stderr_reader: Option<std::thread::JoinHandle<()>>,
}

impl Child {
    pub fn spawn(args: &[&str]) -> Child {
        Self::spawn_program(GATEWAY, args)
    }

    /// Runs `program` (another binary of the crate) with `args`.
    pub fn spawn_program(program: &str, args: &[&str]) -> Child {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn gateway");
        let out = child.stdout.take().unwrap();
        let (tx, stdout) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut err = child.stderr.take().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&stderr);
        let stderr_reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                match err.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => sink
                        .lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buf[..n])),
                }
            }
        });
        Child {
            child,
            stdout,
            stderr,
            stderr_reader: Some(stderr_reader),
        }
    }

    pub fn pid(&self) -> libc::pid_t {
        libc::pid_t::try_from(self.child.id()).expect("pid fits pid_t")
    }

    pub fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill(2) on our own, not yet reaped, child.
        let rc = unsafe { libc::kill(self.pid(), sig) };
        assert_eq!(rc, 0, "kill({}, {sig})", self.pid());
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// stderr up to its last complete line (unbuffered stderr can arrive
    /// in pieces of a line).
    pub fn stderr_lines(&self) -> String {
        let s = self.stderr();
        match s.rfind('\n') {
            Some(i) => s[..=i].to_string(),
            None => String::new(),
        }
    }

    /// Waits (bounded) for the exit status; panics (and so kills the child)
    /// if it does not come within `limit`.
    pub fn wait(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                // stderr is complete once the pipe closes.
                if let Some(t) = self.stderr_reader.take() {
                    let _ = t.join();
                }
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "gateway did not exit within {limit:?}; stderr:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// stdout lines received so far (without waiting).
    pub fn stdout_now(&self) -> Vec<String> {
        self.stdout.try_iter().collect()
    }

    /// Waits (bounded) until stderr contains `needle` (at least `count` times).
    pub fn wait_stderr(&self, needle: &str, count: usize) {
        let deadline = Instant::now() + PATIENCE;
        while self.stderr_lines().matches(needle).count() < count {
            assert!(
                Instant::now() < deadline,
                "stderr never had {needle:?} {count} time(s); stderr:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A gateway that is serving, with the addresses it printed.
pub struct Gateway {
    pub child: Child,
    pub listener: SocketAddr,
    pub admin: SocketAddr,
    /// Every stdout line up to `serving with ...`.
    pub banner: Vec<String>,
}

impl Gateway {
    /// Starts `gateway --config FILE --shards 2` and reads its stdout until
    /// it says it is serving.
    pub fn start(config: &Path) -> Gateway {
        Self::start_with(config, &[])
    }

    /// [`Self::start`] with more arguments.
    pub fn start_with(config: &Path, extra: &[&str]) -> Gateway {
        let mut args = vec!["--config", config.to_str().unwrap(), "--shards", "2"];
        args.extend_from_slice(extra);
        let child = Child::spawn(&args);
        let deadline = Instant::now() + PATIENCE;
        let mut banner = Vec::new();
        let (mut listener, mut admin) = (None, None);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match child.stdout.recv_timeout(left) {
                Ok(l) => l,
                Err(e) => panic!(
                    "gateway did not report serving ({e}); stdout: {banner:?}; stderr:\n{}",
                    child.stderr()
                ),
            };
            if let Some(rest) = line.strip_prefix("listener ingress on ") {
                listener = Some(rest.trim().parse::<SocketAddr>().expect("listener addr"));
            }
            if let Some(rest) = line.strip_prefix("admin on http://") {
                let rest = rest.trim().trim_end_matches('/');
                admin = Some(rest.parse::<SocketAddr>().expect("admin addr"));
            }
            let done = line.starts_with("serving with ");
            banner.push(line);
            if done {
                break;
            }
        }
        Gateway {
            child,
            listener: listener.unwrap_or_else(|| panic!("no listener line in {banner:?}")),
            admin: admin.unwrap_or_else(|| panic!("no admin line in {banner:?}")),
            banner,
        }
    }

    /// Sends SIGHUP and waits until stderr reports the outcome (the
    /// `expect`ed one: `reloaded configuration` or `reload rejected`).
    pub fn reload(&self, expect: &str) {
        let before = self.child.stderr_lines().matches(expect).count();
        let other = if expect.starts_with("reloaded") {
            "reload rejected"
        } else {
            "reloaded configuration"
        };
        let others = self.child.stderr_lines().matches(other).count();
        self.child.signal(libc::SIGHUP);
        self.child.wait_stderr(expect, before + 1);
        assert_eq!(
            self.child.stderr_lines().matches(other).count(),
            others,
            "unexpected reload outcome; stderr:\n{}",
            self.child.stderr()
        );
    }
}
