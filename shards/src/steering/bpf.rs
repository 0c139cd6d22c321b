//! The kernel side of connection steering: the `bpf(2)` calls, the two maps and the SO_REUSEPORT program, written out as instructions (no compiler, no libbpf).
//!
//! The program runs in the kernel for each new connection's SYN, before
//! any shard sees it. It reads every shard's score from one array map
//! (open connections, which the shards write, plus connections picked for
//! them and not accepted yet, which the program itself counts, plus a
//! penalty from the group's own map for a shard not listening there),
//! picks the lowest, and hands the SYN to that shard's socket through a
//! `REUSEPORT_SOCKARRAY` map keyed by shard. Counting its own picks is
//! what spreads a burst: 64 SYNs that arrive before any shard has run
//! would otherwise all see the same scores and all go to one shard.
//!
//! The minimum is found without branches (a sign mask per shard), so the
//! verifier walks one path whatever the shard count.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `bpf(2)` commands.
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_PROG_LOAD: libc::c_long = 5;

const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_MAP_TYPE_REUSEPORT_SOCKARRAY: u32 = 20;
const BPF_F_MMAPABLE: u32 = 1 << 10;
const BPF_PROG_TYPE_SK_REUSEPORT: u32 = 21;
const BPF_SK_REUSEPORT_SELECT: u32 = 39;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const HELPER_MAP_LOOKUP_ELEM: i32 = 1;
const HELPER_SK_SELECT_REUSEPORT: i32 = 82;
const SK_PASS: i32 = 1;

/// The most data shards one program scores: a slot's offset must fit the
/// instruction's 16-bit offset.
pub const MAX_SHARDS: usize = 512;

/// Bytes of one shard's slot in the load map: its own cache line, so that
/// shards writing their counts do not share one.
pub const SLOT: usize = 64;
/// Offsets in a slot: the shard's open connections (the shard writes it)
/// and the connections picked for it and not yet accepted (the program
/// adds, the shard takes away).
pub const OPEN: usize = 0;
pub const PICKED: usize = 8;

/// `union bpf_attr`, as large as this kernel's (the tail stays zero, as
/// the kernel requires of fields it knows and we do not set).
#[repr(C, align(8))]
struct Attr([u8; 144]);

impl Attr {
    fn new() -> Self {
        Self([0; 144])
    }
    fn u32(&mut self, at: usize, v: u32) -> &mut Self {
        self.0[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, at: usize, v: u64) -> &mut Self {
        self.0[at..at + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn name(&mut self, at: usize, name: &str) -> &mut Self {
        let n = name.len().min(15);
        self.0[at..at + n].copy_from_slice(&name.as_bytes()[..n]);
        self
    }
}

fn bpf(cmd: libc::c_long, attr: &mut Attr) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a valid, zero-padded `union bpf_attr` of the size
    // passed; pointers in it point at memory live for the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.0.as_mut_ptr(),
            attr.0.len() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn new_fd(r: libc::c_long) -> OwnedFd {
    // SAFETY: a descriptor the kernel just returned to us, owned by no one.
    unsafe { OwnedFd::from_raw_fd(r as RawFd) }
}

/// A new map with `u32` keys.
fn create_map(
    map_type: u32,
    value_size: usize,
    max_entries: usize,
    flags: u32,
    name: &str,
) -> io::Result<OwnedFd> {
    bpf(
        BPF_MAP_CREATE,
        Attr::new()
            .u32(0, map_type)
            .u32(4, 4)
            .u32(8, value_size as u32)
            .u32(12, max_entries as u32)
            .u32(16, flags)
            .name(28, name),
    )
    .map(new_fd)
}

/// Writes the value at `value` (the map's value size) under `key`.
fn update_elem(map: &OwnedFd, key: u32, value: *const u8) -> io::Result<()> {
    bpf(
        BPF_MAP_UPDATE_ELEM,
        Attr::new()
            .u32(0, map.as_raw_fd() as u32)
            .u64(8, &key as *const u32 as u64)
            .u64(16, value as u64),
    )
    .map(drop)
}

/// The shards' scores: one array map of one value holding a slot per
/// shard, mapped into the process so that shards update their own slot
/// with plain atomics, no system call.
pub struct LoadMap {
    fd: OwnedFd,
    base: *mut u8,
    len: usize,
    shards: usize,
}

// SAFETY: the mapping is shared memory accessed only through atomics
// (`slot`), and lives as long as the value.
unsafe impl Send for LoadMap {}
unsafe impl Sync for LoadMap {}

impl LoadMap {
    pub fn new(shards: usize) -> io::Result<Self> {
        let value_size = SLOT * shards;
        let fd = create_map(
            BPF_MAP_TYPE_ARRAY,
            value_size,
            1,
            BPF_F_MMAPABLE,
            "gw_shard_load",
        )?;
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let len = value_size.div_ceil(page) * page;
        // SAFETY: mapping a map the kernel made mmapable, shared, at any
        // address; checked for failure below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            fd,
            base: base.cast(),
            len,
            shards,
        })
    }

    /// Shard `shard`'s counter at `offset` ([`OPEN`] or [`PICKED`]).
    pub fn slot(&self, shard: usize, offset: usize) -> &std::sync::atomic::AtomicU64 {
        assert!(shard < self.shards && offset + 8 <= SLOT);
        // SAFETY: in bounds (checked), 8-aligned (page-aligned base, slot
        // and offsets multiples of 8), and only ever accessed atomically,
        // by us and by the program's atomic add.
        unsafe { &*self.base.add(shard * SLOT + offset).cast() }
    }
}

impl Drop for LoadMap {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// A `REUSEPORT_SOCKARRAY`: shard index → that shard's listening socket.
pub struct SockArray {
    fd: OwnedFd,
}

impl SockArray {
    pub fn new(shards: usize) -> io::Result<Self> {
        let fd = create_map(
            BPF_MAP_TYPE_REUSEPORT_SOCKARRAY,
            8,
            shards,
            0,
            "gw_shard_socks",
        )?;
        Ok(Self { fd })
    }

    /// Shard `shard` listens on `socket`.
    pub fn set(&self, shard: usize, socket: RawFd) -> io::Result<()> {
        let value = socket as u64;
        update_elem(&self.fd, shard as u32, (&value as *const u64).cast())
    }

    /// Shard `shard` no longer listens here (no error if it was not).
    pub fn clear(&self, shard: usize) {
        let key = shard as u32;
        let _ = bpf(
            BPF_MAP_DELETE_ELEM,
            Attr::new()
                .u32(0, self.fd.as_raw_fd() as u32)
                .u64(8, &key as *const u32 as u64),
        );
    }
}

/// One group's penalty per shard: 0 for a shard whose socket is in the
/// group's socket map, [`ABSENT`] for one whose is not, so that the
/// program never picks a shard it cannot hand the connection to while
/// another can take it.
pub struct AbsentMap {
    fd: OwnedFd,
    shards: usize,
}

/// An absent shard's penalty: above any real count of connections, far
/// below where sums of scores could overflow.
pub const ABSENT: u64 = 1 << 40;

impl AbsentMap {
    /// Every shard absent.
    pub fn new(shards: usize) -> io::Result<Self> {
        let fd = create_map(BPF_MAP_TYPE_ARRAY, 8 * shards, 1, 0, "gw_shard_absent")?;
        let map = Self { fd, shards };
        map.set(&vec![true; shards])?;
        Ok(map)
    }

    /// Which shards are absent now, by index.
    pub fn set(&self, absent: &[bool]) -> io::Result<()> {
        let value: Vec<u64> = (0..self.shards)
            .map(|s| {
                if absent.get(s).copied().unwrap_or(true) {
                    ABSENT
                } else {
                    0
                }
            })
            .collect();
        update_elem(&self.fd, 0, value.as_ptr().cast())
    }
}

/// One eBPF instruction, as the kernel reads it.
#[derive(Clone, Copy)]
struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

fn op(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | dst,
        off,
        imm,
    }
}

// Opcodes used below (class | op | source).
const MOV_X: u8 = 0xbf;
const MOV_K: u8 = 0xb7;
const ADD_X: u8 = 0x0f;
const ADD_K: u8 = 0x07;
const SUB_X: u8 = 0x1f;
const AND_X: u8 = 0x5f;
const XOR_X: u8 = 0xaf;
const ARSH_K: u8 = 0xc7;
const LSH_K: u8 = 0x67;
const LDX_DW: u8 = 0x79;
const ST_W: u8 = 0x62;
const STX_W: u8 = 0x63;
const STX_DW: u8 = 0x7b;
const ATOMIC_ADD_DW: u8 = 0xdb;
const LD_IMM64: u8 = 0x18;
const JEQ_K: u8 = 0x15;
const JNE_K: u8 = 0x55;
const JGE_K: u8 = 0x35;
const CALL: u8 = 0x85;
const EXIT: u8 = 0x95;

/// The program for one address's group (see the module's comment).
/// Registers: r6 the group's absence penalties, r9 the load value, r7
/// the best score so far, r8 its shard; the context waits on the stack.
fn program(shards: usize, load: RawFd, absent: RawFd, socks: RawFd) -> Vec<Insn> {
    let lookup = |map: RawFd| {
        [
            op(LD_IMM64, 1, BPF_PSEUDO_MAP_FD, 0, map),
            op(0, 0, 0, 0, 0),
            op(MOV_X, 2, 10, 0, 0),
            op(ADD_K, 2, 0, 0, -4),
            op(CALL, 0, 0, 0, HELPER_MAP_LOOKUP_ELEM),
            op(JEQ_K, 0, 0, i16::MAX, 0), // → pass (patched below)
        ]
    };
    let mut p = vec![op(STX_DW, 10, 1, -16, 0), op(ST_W, 10, 0, -4, 0)];
    p.extend(lookup(load));
    p.push(op(MOV_X, 9, 0, 0, 0));
    p.extend(lookup(absent));
    p.extend([
        op(MOV_X, 6, 0, 0, 0),
        op(LDX_DW, 7, 9, OPEN as i16, 0),
        op(LDX_DW, 3, 9, PICKED as i16, 0),
        op(ADD_X, 7, 3, 0, 0),
        op(LDX_DW, 3, 6, 0, 0),
        op(ADD_X, 7, 3, 0, 0),
        op(MOV_K, 8, 0, 0, 0),
    ]);
    for i in 1..shards {
        // In range of an i16: `Steering::new` refuses more than
        // MAX_SHARDS.
        let at = (i * SLOT) as i16;
        p.extend([
            // r3 = this shard's score.
            op(LDX_DW, 3, 9, at + OPEN as i16, 0),
            op(LDX_DW, 4, 9, at + PICKED as i16, 0),
            op(ADD_X, 3, 4, 0, 0),
            op(LDX_DW, 4, 6, (i * 8) as i16, 0),
            op(ADD_X, 3, 4, 0, 0),
            // r4 = all ones if r3 < r7, else zero (scores are far below
            // 2^63, so the difference's sign says which is lower).
            op(MOV_X, 4, 3, 0, 0),
            op(SUB_X, 4, 7, 0, 0),
            op(ARSH_K, 4, 0, 0, 63),
            // r7 += (r3 - r7) & r4: the lower of the two.
            op(MOV_X, 5, 3, 0, 0),
            op(SUB_X, 5, 7, 0, 0),
            op(AND_X, 5, 4, 0, 0),
            op(ADD_X, 7, 5, 0, 0),
            // r8 ^= (i ^ r8) & r4: its shard.
            op(MOV_K, 5, 0, 0, i as i32),
            op(XOR_X, 5, 8, 0, 0),
            op(AND_X, 5, 4, 0, 0),
            op(XOR_X, 8, 5, 0, 0),
        ]);
    }
    p.extend([
        op(STX_W, 10, 8, -8, 0),
        op(LDX_DW, 1, 10, -16, 0),
        op(LD_IMM64, 2, BPF_PSEUDO_MAP_FD, 0, socks),
        op(0, 0, 0, 0, 0),
        op(MOV_X, 3, 10, 0, 0),
        op(ADD_K, 3, 0, 0, -8),
        op(MOV_K, 4, 0, 0, 0),
        op(CALL, 0, 0, 0, HELPER_SK_SELECT_REUSEPORT),
        // That shard has no socket here (no shard has: the lowest score
        // is then an absent one's): the kernel's own hash picks, and
        // nothing is counted.
        op(JNE_K, 0, 0, i16::MAX, 0), // → pass
        // The verifier's bound for the slot's address below.
        op(JGE_K, 8, 0, i16::MAX, shards as i32), // → pass
        op(LSH_K, 8, 0, 0, SLOT.trailing_zeros() as i32),
        op(ADD_X, 9, 8, 0, 0),
        op(MOV_K, 1, 0, 0, 1),
        op(ATOMIC_ADD_DW, 9, 1, PICKED as i16, 0),
    ]);
    let pass = p.len();
    p.extend([op(MOV_K, 0, 0, 0, SK_PASS), op(EXIT, 0, 0, 0, 0)]);
    // Jumps to `pass` were written with i16::MAX: point them there.
    for (at, insn) in p.iter_mut().enumerate() {
        if insn.off == i16::MAX && matches!(insn.code, JEQ_K | JNE_K | JGE_K) {
            insn.off = (pass - at - 1) as i16;
        }
    }
    p
}

/// A loaded program, ready to attach to a group.
pub struct Program {
    fd: OwnedFd,
}

impl Program {
    /// Loads the program for a group of `shards` sockets in `socks`,
    /// scored by `load` plus `absent`. The verifier's log comes back in
    /// the error.
    pub fn load(
        shards: usize,
        load: &LoadMap,
        absent: &AbsentMap,
        socks: &SockArray,
    ) -> io::Result<Self> {
        let insns = program(
            shards,
            load.fd.as_raw_fd(),
            absent.fd.as_raw_fd(),
            socks.fd.as_raw_fd(),
        );
        let raw: Vec<u64> = insns
            .iter()
            .map(|i| {
                let (off, imm) = (i.off.to_le_bytes(), i.imm.to_le_bytes());
                u64::from_le_bytes([
                    i.code, i.regs, off[0], off[1], imm[0], imm[1], imm[2], imm[3],
                ])
            })
            .collect();
        // Without a log first: a log too small for the verifier's words
        // fails the load (ENOSPC) even when the program is sound, and the
        // log grows with the shard count. Only a refusal is loaded again,
        // with a log large enough to say why.
        match Self::load_raw(&raw, None) {
            Ok(p) => Ok(p),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => Err(e),
            Err(_) => {
                let mut log = vec![0u8; 4 << 20];
                Self::load_raw(&raw, Some(&mut log))
            }
        }
    }

    fn load_raw(raw: &[u64], log: Option<&mut Vec<u8>>) -> io::Result<Self> {
        let license = c"Apache-2.0";
        let mut attr = Attr::new();
        attr.u32(0, BPF_PROG_TYPE_SK_REUSEPORT)
            .u32(4, raw.len() as u32)
            .u64(8, raw.as_ptr() as u64)
            .u64(16, license.as_ptr() as u64)
            .name(48, "gw_steer")
            .u32(68, BPF_SK_REUSEPORT_SELECT);
        let log_ptr = log.as_ref().map(|l| (l.as_ptr() as u64, l.len() as u32));
        if let Some((ptr, len)) = log_ptr {
            attr.u32(24, 1).u32(28, len).u64(32, ptr);
        }
        match bpf(BPF_PROG_LOAD, &mut attr) {
            Ok(r) => Ok(Self { fd: new_fd(r) }),
            Err(e) => {
                let Some(log) = log else { return Err(e) };
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                let text = String::from_utf8_lossy(&log[..end]);
                let mut tail: Vec<&str> = text.lines().rev().take(4).collect();
                tail.reverse();
                Err(io::Error::new(
                    e.kind(),
                    format!("{e}; verifier: {}", tail.join(" | ")),
                ))
            }
        }
    }

    /// Makes this the program of `socket`'s SO_REUSEPORT group (replacing
    /// any program the group had).
    pub fn attach(&self, socket: RawFd) -> io::Result<()> {
        let fd: libc::c_int = self.fd.as_raw_fd();
        // SAFETY: a valid option value of the size passed.
        let r = unsafe {
            libc::setsockopt(
                socket,
                libc::SOL_SOCKET,
                libc::SO_ATTACH_REUSEPORT_EBPF,
                (&fd as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_jump_lands_on_the_pass_exit() {
        for shards in [1, 2, 4, 64, MAX_SHARDS] {
            let p = program(shards, 3, 4, 5);
            let pass = p.len() - 2;
            for (at, i) in p.iter().enumerate() {
                if matches!(i.code, JEQ_K | JNE_K | JGE_K) {
                    assert_eq!(at + 1 + i.off as usize, pass, "{shards} shards, insn {at}");
                }
            }
            assert_eq!(p[pass].imm, SK_PASS);
            assert_eq!(p.last().map(|i| i.code), Some(EXIT));
        }
    }

    /// Loaded for real, at shard counts whose verifier log would not fit
    /// a small buffer (it failed from 12 shards with a 16 KiB log).
    #[test]
    fn the_verifier_takes_the_program_up_to_the_most_shards() {
        for shards in [2, 12, 64, 256, MAX_SHARDS] {
            let maps = LoadMap::new(shards)
                .and_then(|l| Ok((l, AbsentMap::new(shards)?, SockArray::new(shards)?)));
            let (load, absent, socks) = match maps {
                Ok(m) => m,
                Err(e) => {
                    eprintln!("BPF maps refused here, not tested: {e}");
                    return;
                }
            };
            if let Err(e) = Program::load(shards, &load, &absent, &socks) {
                assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{shards} shards: {e}");
            }
        }
    }
}
