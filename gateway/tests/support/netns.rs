//! Network namespace plumbing for tests that need a routed topology
//! (`scale_out.rs`): namespaces and veth pairs made with `ip`, removed by a
//! Drop guard; threads that run inside a namespace (`setns(2)` changes only
//! the calling thread, and what it spawns inherits it), so clients, servers
//! and child processes are placed without `ip netns exec`.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::thread::JoinHandle;

/// A prefix of this process's own (`gw<pid>`, at most 9 characters, so
/// that interface names made with it stay within 15): names made with it
/// never collide with those of a parallel run, and those left by a dead
/// process with the same pid are stale and can be removed.
pub fn prefix() -> String {
    format!("gw{}", std::process::id())
}

/// Runs `ip ARGS`; its stdout, or a message with its stderr.
pub fn ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// [`ip`], panicking (in a test) on failure.
pub fn ip_ok(args: &[&str]) -> String {
    ip(args).unwrap_or_else(|e| panic!("{e}"))
}

/// [`ip_ok`] inside namespace `ns` (`ip -n NS ...`), the arguments given
/// as one whitespace-separated string.
pub fn ip_in(ns: &str, args: &str) -> String {
    let mut all = vec!["-n", ns];
    all.extend(args.split_whitespace());
    ip_ok(&all)
}

/// Why namespaces cannot be used here, if they cannot: not root, or no
/// working `ip netns` (checked by making and removing one).
pub fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root (network namespaces)".into());
    }
    let probe = format!("{}-probe", prefix());
    let _ = ip(&["netns", "del", &probe]);
    if let Err(e) = ip(&["netns", "add", &probe]) {
        let _ = ip(&["netns", "del", &probe]);
        return Some(format!("`ip netns add` fails: {e}"));
    }
    let _ = ip(&["netns", "del", &probe]);
    None
}

/// Namespaces made by this process, deleted (with their veths) on drop,
/// also when the test panics. Processes still inside keep a namespace
/// alive: stop them first (drop them before this).
pub struct Namespaces {
    prefix: String,
    names: Vec<String>,
}

impl Namespaces {
    /// Removes stale namespaces of this prefix (left by a killed process
    /// that had the same pid) and starts empty.
    pub fn new() -> Namespaces {
        let prefix = prefix();
        let stale = format!("{prefix}-");
        for line in ip(&["netns", "list"]).unwrap_or_default().lines() {
            let name = line.split_whitespace().next().unwrap_or("");
            if name.starts_with(&stale) {
                let _ = ip(&["netns", "del", name]);
            }
        }
        Namespaces {
            prefix,
            names: Vec::new(),
        }
    }

    /// Makes namespace `<prefix>-<role>` with its loopback up; its name.
    pub fn add(&mut self, role: &str) -> String {
        let name = format!("{}-{role}", self.prefix);
        ip_ok(&["netns", "add", &name]);
        self.names.push(name.clone());
        ip_ok(&["-n", &name, "link", "set", "lo", "up"]);
        name
    }

    /// A veth pair `<prefix><a_if>` in `a` and `<prefix><b_if>` in `b`
    /// (at most 15 characters each), addressed (CIDR) and up. Made inside
    /// `a` with the peer created directly in `b`: nothing appears in the
    /// root namespace, so parallel runs can use the same addresses.
    pub fn veth(&self, a: &str, a_if: &str, a_addr: &str, b: &str, b_if: &str, b_addr: &str) {
        let (ai, bi) = (
            format!("{}{a_if}", self.prefix),
            format!("{}{b_if}", self.prefix),
        );
        assert!(ai.len() <= 15 && bi.len() <= 15, "{ai}, {bi}: too long");
        ip_ok(&[
            "-n", a, "link", "add", "name", &ai, "type", "veth", "peer", "name", &bi, "netns", b,
        ]);
        for (ns, dev, addr) in [(a, &ai, a_addr), (b, &bi, b_addr)] {
            ip_ok(&["-n", ns, "addr", "add", addr, "dev", dev]);
            ip_ok(&["-n", ns, "link", "set", dev, "up"]);
        }
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for name in self.names.iter().rev() {
            let _ = ip(&["netns", "del", name]);
        }
    }
}

/// Moves the calling thread into namespace `ns` (`/var/run/netns/NS`).
pub fn enter(ns: &str) -> std::io::Result<()> {
    let file = File::open(format!("/var/run/netns/{ns}"))?;
    enter_fd(&file)
}

fn enter_fd(file: &File) -> std::io::Result<()> {
    // SAFETY: setns(2) on an open namespace file; it affects only this
    // thread (CLONE_NEWNET is allowed in a multi-threaded process).
    match unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// The calling thread inside namespace `ns` until dropped, then back where
/// it was (also on a panic).
pub struct Inside {
    home: File,
}

impl Inside {
    pub fn enter(ns: &str) -> Inside {
        let home = File::open("/proc/thread-self/ns/net").expect("this thread's namespace");
        enter(ns).unwrap_or_else(|e| panic!("setns into {ns}: {e}"));
        Inside { home }
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        let _ = enter_fd(&self.home);
    }
}

/// Runs `f` on a new thread inside namespace `ns`: its sockets, the threads
/// it starts and the processes it spawns all live there.
pub fn spawn_in<T, F>(ns: &str, f: F) -> JoinHandle<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let ns = ns.to_string();
    std::thread::Builder::new()
        .name(format!("in-{ns}"))
        .spawn(move || {
            enter(&ns).unwrap_or_else(|e| panic!("setns into {ns}: {e}"));
            f()
        })
        .expect("spawn a thread")
}

/// [`spawn_in`], waiting for the result.
pub fn run_in<T, F>(ns: &str, f: F) -> T
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    match spawn_in(ns, f).join() {
        Ok(t) => t,
        Err(e) => std::panic::resume_unwind(e),
    }
}

/// Sets sysctl `key` (slash form, e.g. `net/ipv4/ip_forward`) in `ns`:
/// `/proc/sys/net` shows the namespace of the task that opens it.
pub fn sysctl(ns: &str, key: &str, value: &str) {
    let (key, value) = (key.to_string(), value.to_string());
    let path = format!("/proc/sys/{key}");
    run_in(ns, move || {
        std::fs::write(&path, &value).unwrap_or_else(|e| panic!("{path} = {value}: {e}"));
        let now = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(now.trim(), value, "{path}");
    });
}
