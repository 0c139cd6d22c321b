//! The hot restart's channel between two processes: a Unix `SOCK_SEQPACKET` socket (message boundaries kept, file descriptors passed as `SCM_RIGHTS`), named in the abstract namespace (`@name`) or on the filesystem, with every wait bounded.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// The most bytes of one message (its JSON text).
pub const MAX_MESSAGE: usize = 64 * 1024;
/// The most descriptors one message carries (the kernel's `SCM_MAX_FD` is
/// 253).
pub const MAX_FDS: usize = 64;

/// A Unix socket address from a name: `@name` for the abstract
/// namespace (nothing on disk, gone with its last holder), else a path.
fn address(name: &str) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: all-zero is a valid sockaddr_un.
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let (bytes, abstract_) = match name.strip_prefix('@') {
        Some(rest) => (rest.as_bytes(), true),
        None => (name.as_bytes(), false),
    };
    let offset = usize::from(abstract_);
    if bytes.is_empty() || bytes.len() + offset >= sa.sun_path.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("hot restart socket name {name:?}: empty or longer than 107 bytes"),
        ));
    }
    if bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("hot restart socket name {name:?} has a NUL byte"),
        ));
    }
    for (i, b) in bytes.iter().enumerate() {
        sa.sun_path[i + offset] = *b as libc::c_char;
    }
    let base = std::mem::size_of::<libc::sa_family_t>();
    // Abstract names are exactly their bytes; paths end with their NUL.
    let len = base + offset + bytes.len() + usize::from(!abstract_);
    Ok((sa, len as libc::socklen_t))
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn seqpacket() -> io::Result<OwnedFd> {
    // SAFETY: plain system call; the descriptor is owned at once.
    let fd =
        cvt(unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: a new descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A listening channel socket.
pub struct Listener {
    fd: OwnedFd,
    /// The file to remove when it closes (a filesystem name).
    path: Option<std::path::PathBuf>,
}

impl Listener {
    /// Listens on `name`; a filesystem name gets `mode` (`--socket-mode`),
    /// and a file left by a process that is gone is replaced.
    pub fn bind(name: &str, mode: u32) -> io::Result<Self> {
        let (sa, len) = address(name)?;
        let fd = seqpacket()?;
        let path = (!name.starts_with('@')).then(|| std::path::PathBuf::from(name));
        if let Some(p) = &path {
            // Only a socket nobody answers on any more is removed.
            if p.exists() && Channel::connect(name, Duration::from_millis(200)).is_err() {
                let _ = std::fs::remove_file(p);
            }
        }
        // SAFETY: `sa` is a valid sockaddr_un of `len` bytes.
        cvt(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sa as *const _ as *const libc::sockaddr,
                len,
            )
        })
        .map_err(|e| io::Error::new(e.kind(), format!("binding {name}: {e}")))?;
        if let Some(p) = &path {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))?;
        }
        // SAFETY: plain system call on our descriptor.
        cvt(unsafe { libc::listen(fd.as_raw_fd(), 4) })?;
        Ok(Self { fd, path })
    }

    /// Waits for the next process (blocking).
    pub fn accept(&self) -> io::Result<Channel> {
        loop {
            // SAFETY: plain system call; the descriptor is owned at once.
            let r = unsafe {
                libc::accept4(
                    self.fd.as_raw_fd(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_CLOEXEC,
                )
            };
            match cvt(r) {
                // SAFETY: a new descriptor nothing else owns.
                Ok(fd) => return Ok(Channel(unsafe { OwnedFd::from_raw_fd(fd) })),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Wakes a blocked [`Self::accept`] (it fails) so its thread can end.
    pub fn shutdown(&self) {
        // SAFETY: plain system call on our descriptor.
        unsafe { libc::shutdown(self.fd.as_raw_fd(), libc::SHUT_RDWR) };
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Some(p) = &self.path {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// One end of a connected channel.
pub struct Channel(OwnedFd);

impl Channel {
    /// Connects to `name`, each message then bounded by `timeout`.
    pub fn connect(name: &str, timeout: Duration) -> io::Result<Self> {
        let (sa, len) = address(name)?;
        let fd = seqpacket()?;
        // SAFETY: `sa` is a valid sockaddr_un of `len` bytes.
        cvt(unsafe {
            libc::connect(
                fd.as_raw_fd(),
                &sa as *const _ as *const libc::sockaddr,
                len,
            )
        })?;
        let c = Self(fd);
        c.set_timeout(timeout)?;
        Ok(c)
    }

    /// Bounds every later send and receive.
    pub fn set_timeout(&self, timeout: Duration) -> io::Result<()> {
        let tv = libc::timeval {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_usec: timeout.subsec_micros() as libc::suseconds_t,
        };
        for opt in [libc::SO_RCVTIMEO, libc::SO_SNDTIMEO] {
            // SAFETY: `tv` is a valid timeval for these options.
            cvt(unsafe {
                libc::setsockopt(
                    self.0.as_raw_fd(),
                    libc::SOL_SOCKET,
                    opt,
                    &tv as *const _ as *const libc::c_void,
                    std::mem::size_of::<libc::timeval>() as libc::socklen_t,
                )
            })?;
        }
        Ok(())
    }

    /// Sends one message with `fds` (at most [`MAX_FDS`]).
    pub fn send(&self, text: &[u8], fds: &[RawFd]) -> io::Result<()> {
        if text.len() > MAX_MESSAGE || fds.len() > MAX_FDS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "message too large",
            ));
        }
        let mut iov = libc::iovec {
            iov_base: text.as_ptr() as *mut libc::c_void,
            iov_len: text.len(),
        };
        let space = cmsg_space(fds.len());
        let mut control = vec![0u8; space];
        // SAFETY: all-zero is a valid msghdr; the pointers set below
        // outlive the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if !fds.is_empty() {
            msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = space as _;
            // SAFETY: the control buffer holds one header for `fds`.
            unsafe {
                let cmsg = libc::CMSG_FIRSTHDR(&msg);
                (*cmsg).cmsg_level = libc::SOL_SOCKET;
                (*cmsg).cmsg_type = libc::SCM_RIGHTS;
                (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of_val(fds) as u32) as _;
                std::ptr::copy_nonoverlapping(
                    fds.as_ptr(),
                    libc::CMSG_DATA(cmsg) as *mut RawFd,
                    fds.len(),
                );
            }
        }
        // SAFETY: `msg` points at live buffers.
        let sent = unsafe { libc::sendmsg(self.0.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Receives one message and the descriptors it carried (owned now).
    /// A truncated message or descriptor list is an error (its
    /// descriptors are closed).
    pub fn recv(&self) -> io::Result<(Vec<u8>, Vec<OwnedFd>)> {
        let mut buf = vec![0u8; MAX_MESSAGE];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        let space = cmsg_space(MAX_FDS);
        let mut control = vec![0u8; space];
        // SAFETY: as in `send`.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = space as _;
        // SAFETY: `msg` points at live buffers.
        let n = unsafe { libc::recvmsg(self.0.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut fds = Vec::new();
        // SAFETY: the kernel filled `control` up to `msg_controllen`.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(cmsg) as *const RawFd;
                    let bytes = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                    for i in 0..bytes / std::mem::size_of::<RawFd>() {
                        fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
        if msg.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "hot restart message truncated",
            ));
        }
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.truncate(n as usize);
        Ok((buf, fds))
    }
}

fn cmsg_space(fds: usize) -> usize {
    // SAFETY: a pure size computation.
    unsafe { libc::CMSG_SPACE((fds * std::mem::size_of::<RawFd>()) as u32) as usize }
}

/// The channel name of process `epoch` under `base_id`.
pub fn name(socket_path: &str, base_id: u32, epoch: u32) -> String {
    format!("{socket_path}_{base_id}_{epoch}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_carry_descriptors_across() {
        let name = format!("@gateway-test-channel-{}", std::process::id());
        let l = Listener::bind(&name, 0o600).expect("bind");
        let server = std::thread::spawn(move || {
            let c = l.accept().expect("accept");
            let (text, fds) = c.recv().expect("recv");
            assert_eq!(text, b"hello");
            assert!(fds.is_empty());
            let sock = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            c.send(b"one", &[sock.as_raw_fd()]).expect("send");
            sock.local_addr().expect("addr")
        });
        let c = Channel::connect(&name, Duration::from_secs(5)).expect("connect");
        c.send(b"hello", &[]).expect("send");
        let (text, mut fds) = c.recv().expect("recv");
        let sent = server.join().expect("server");
        assert_eq!(text, b"one");
        assert_eq!(fds.len(), 1);
        // The same socket, listening: a connection to its address
        // arrives on our copy.
        let l = std::net::TcpListener::from(fds.pop().expect("fd"));
        assert_eq!(l.local_addr().expect("addr"), sent);
        assert!(Channel::connect("@", Duration::from_secs(1)).is_err());
    }
}
