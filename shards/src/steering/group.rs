//! One listening address's SO_REUSEPORT group as steering sees it: its socket map, its penalties for absent shards, its program, and each shard's membership.

use std::io;
use std::os::fd::RawFd;

use super::bpf;

/// Where one shard's socket stands in its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Member {
    /// No socket of this shard's here.
    Absent,
    /// In the group's socket map: the program may pick it.
    Joined(RawFd),
    /// Listening, but the socket is still in another process's socket map
    /// (a hot restart's previous process has not let go yet, or a crashed
    /// one's program still holds it): tried again.
    Waiting(RawFd),
    /// Let go for a hot restart's next process; taken back only if that
    /// process leaves without taking over.
    Released(RawFd),
}

impl Member {
    fn socket(self) -> Option<RawFd> {
        match self {
            Member::Absent => None,
            Member::Joined(s) | Member::Waiting(s) | Member::Released(s) => Some(s),
        }
    }
}

pub(super) struct Group {
    socks: bpf::SockArray,
    absent: bpf::AbsentMap,
    program: bpf::Program,
    members: Vec<Member>,
}

impl Group {
    pub fn new(shards: usize, load: &bpf::LoadMap) -> io::Result<Self> {
        let socks = bpf::SockArray::new(shards)?;
        let absent = bpf::AbsentMap::new(shards)?;
        let program = bpf::Program::load(shards, load, &absent, &socks)?;
        Ok(Self {
            socks,
            absent,
            program,
            members: vec![Member::Absent; shards],
        })
    }

    pub fn is_empty(&self) -> bool {
        self.members.iter().all(|m| *m == Member::Absent)
    }

    pub fn join(&mut self, shard: usize, socket: RawFd) -> io::Result<()> {
        if self.members[shard] != Member::Absent {
            return Ok(());
        }
        // The program first, each time: a group whose sockets all closed
        // is gone in the kernel (the next socket at the address starts a
        // new one), and replacing another process's program frees its
        // socket map, which then lets go of the sockets we share with it.
        // Replacing ours with itself costs nothing.
        self.program.attach(socket)?;
        self.members[shard] = Member::Waiting(socket);
        self.retry(shard);
        Ok(())
    }

    /// Puts a waiting socket in the socket map, if its other map let go.
    pub fn retry(&mut self, shard: usize) {
        let Some(Member::Waiting(socket)) = self.members.get(shard).copied() else {
            return;
        };
        match self.socks.set(shard, socket) {
            Ok(()) => {
                self.members[shard] = Member::Joined(socket);
                self.publish();
            }
            // EBUSY: in another map still. Anything else (the socket no
            // longer listening) is for `leave` to clear; it waits.
            Err(e) => tracing::debug!(shard, "connection steering: socket waits: {e}"),
        }
    }

    pub fn leave(&mut self, shard: usize, socket: RawFd) {
        let Some(m) = self.members.get(shard).copied() else {
            return;
        };
        if m.socket() != Some(socket) {
            return;
        }
        self.members[shard] = Member::Absent;
        if let Member::Joined(_) = m {
            // The penalty first: the program must not pick a shard between
            // its socket leaving the map and its score saying so.
            self.publish();
            self.socks.clear(shard);
        }
    }

    pub fn release(&mut self) {
        for shard in 0..self.members.len() {
            match self.members[shard] {
                Member::Joined(s) | Member::Waiting(s) => self.members[shard] = Member::Released(s),
                Member::Absent | Member::Released(_) => {}
            }
        }
        self.publish();
        for shard in 0..self.members.len() {
            self.socks.clear(shard);
        }
    }

    pub fn reclaim(&mut self) {
        for shard in 0..self.members.len() {
            if let Member::Released(s) = self.members[shard] {
                self.members[shard] = Member::Waiting(s);
                // The next process may have put its program on the group.
                if let Err(e) = self.program.attach(s) {
                    tracing::warn!(shard, "connection steering: {e}");
                }
                self.retry(shard);
            }
        }
    }

    /// Writes the penalties of the shards not in the socket map.
    fn publish(&self) {
        let absent: Vec<bool> = self
            .members
            .iter()
            .map(|m| !matches!(m, Member::Joined(_)))
            .collect();
        if let Err(e) = self.absent.set(&absent) {
            tracing::warn!("connection steering: updating the group's shards: {e}");
        }
    }
}
