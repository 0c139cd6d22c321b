//! Request mirroring's capturing side: a routed request's copies (`request_mirror_policies`), their head as it goes to the primary with the copy's host, then its body and trailers fed to them as the primary gets them (shared chunks, not copies).

use std::rc::Rc;

use bytes::Bytes;
use engine::{MirrorCluster, MirrorPolicy};
use smallvec::SmallVec;

use super::upstream::{write_request, HeadSink};
use super::Streams;
use crate::wire::body::Item;
use crate::wire::dstream::DStream;
use crate::wire::side::{SideField, SideHead};
use crate::wire::WireShard;

/// How far a copy's body may fall behind the request's, at least: a
/// client's first writes come before the copy's stream is open, and a
/// small listener buffer limit would abandon copies that keep up.
const COPY_BACKLOG: usize = 1 << 20;

/// What a request's copies get appended, Envoy's mark of a request made
/// by the proxy itself.
const INTERNAL: (&[u8], &[u8]) = (b"x-envoy-internal", b"true");

/// A request's copies while its body passes: their numbers in the shard's
/// mirror table. Dropped before the request ended (the stream is gone),
/// it abandons them.
pub(crate) struct MirrorTap {
    wire: Rc<WireShard>,
    copies: SmallVec<[u32; 1]>,
    ended: bool,
}

impl Drop for MirrorTap {
    fn drop(&mut self) {
        if !self.ended {
            for &id in &self.copies {
                self.wire.mirror_abandon(id);
            }
        }
    }
}

/// Captures a head as `write_request` writes it, with a copy's host.
struct Capture<'p> {
    policy: &'p MirrorPolicy,
}

impl HeadSink for Capture<'_> {
    type Out = SideHead;

    fn send<'a>(
        self,
        method: &'a [u8],
        authority: &'a [u8],
        path: &'a [u8],
        fields: impl Iterator<Item = (&'a [u8], &'a [u8], bool)>,
        bodyless: bool,
    ) -> Option<SideHead> {
        let mut fields: Vec<SideField> = fields
            .map(|(n, v, never)| (n.into(), v.into(), never))
            .collect();
        if !fields.iter().any(|(n, _, _)| &n[..] == INTERNAL.0) {
            fields.push((INTERNAL.0.into(), INTERNAL.1.into(), false));
        }
        Some(SideHead {
            method: method.into(),
            authority: self.policy.shadow_host(authority).into(),
            path: path.into(),
            fields,
            bodyless,
        })
    }
}

impl Streams {
    /// A stream just routed: when its route mirrors, each policy's share
    /// is drawn, its cluster named (by the route or the request's field)
    /// and its copy opened with the head as it goes to the primary; the
    /// chunks that came before the router follow.
    pub(super) fn tap_mirrors(&mut self, stream: u32) {
        let Some(s) = self.table.get_mut(&stream) else {
            return;
        };
        // An upgrade (WebSocket, CONNECT) is not copied: a copy of its
        // handshake would open nothing.
        if s.upgrade {
            return;
        }
        let Some(snap) = s.snap.as_ref() else { return };
        let Some((_, route)) = self
            .cx
            .hcm(snap)
            .and_then(|hcm| s.route?.get(&hcm.route_config))
        else {
            return;
        };
        let engine::RouteAction::Forward(action) = &route.action else {
            return;
        };
        if action.mirrors.is_empty() {
            return;
        }
        let wire = &self.cx.wire;
        let limit = COPY_BACKLOG.max(self.cx.listener.per_connection_buffer_limit_bytes as usize);
        let mut copies = SmallVec::new();
        for policy in &action.mirrors {
            if let Some(id) = open_copy(wire, s, policy, limit) {
                copies.push(id);
            }
        }
        if copies.is_empty() {
            return;
        }
        let mut tap = MirrorTap {
            wire: Rc::clone(wire),
            copies,
            ended: s.bodyless,
        };
        for item in s.req.iter() {
            let end = match item {
                Item::Data { end, .. } => *end,
                Item::Trailers(_) => true,
            };
            feed(&mut tap, item.share(), end);
        }
        if !tap.ended {
            s.mirror = Some(Box::new(tap));
        }
    }

    /// A chunk of the request body, as the primary gets it.
    pub(super) fn mirror_data(&mut self, stream: u32, data: &Bytes, end: bool) {
        self.mirror_item(stream, Item::data(data.clone(), end), end);
    }

    /// The request's trailers (its end).
    pub(super) fn mirror_trailers(&mut self, stream: u32, trailers: &[(Vec<u8>, Vec<u8>)]) {
        self.mirror_item(stream, Item::Trailers(trailers.to_vec()), true);
    }

    fn mirror_item(&mut self, stream: u32, item: Item, end: bool) {
        let Some(s) = self.table.get_mut(&stream) else {
            return;
        };
        if let Some(tap) = s.mirror.as_mut() {
            feed(tap, item, end);
            if tap.ended {
                s.mirror = None;
            }
        }
    }
}

/// Opens one policy's copy of stream `s`, unless its share leaves the
/// request out or its cluster is unknown.
fn open_copy(
    wire: &Rc<WireShard>,
    s: &DStream,
    policy: &MirrorPolicy,
    limit: usize,
) -> Option<u32> {
    let shard = &wire.shard;
    if policy
        .fraction
        .is_some_and(|f| !f.includes(shard.random_u64()))
    {
        return None;
    }
    let head = s.head.as_ref()?;
    let cluster = match &policy.cluster {
        MirrorCluster::Named(name) => name.as_str(),
        // The first value, as Envoy reads it.
        MirrorCluster::Header(field) => match head.get(field.as_bytes()).map(std::str::from_utf8) {
            Some(Ok(name)) if !name.is_empty() => name,
            _ => return None,
        },
    };
    if s.snap.as_ref()?.cluster(cluster).is_none() {
        shard.stats.mirror.unknown_cluster.inc();
        return None;
    }
    let copy = write_request(s, None, Capture { policy })?;
    wire.mirror_open(cluster, copy, limit, s.timeout)
}

/// Feeds every copy of `tap` an item (each its own share of the chunk).
fn feed(tap: &mut MirrorTap, item: Item, end: bool) {
    let Some((&last, rest)) = tap.copies.split_last() else {
        return;
    };
    for &id in rest {
        tap.wire.mirror_feed(id, item.share(), end);
    }
    tap.wire.mirror_feed(last, item, end);
    tap.ended |= end;
}
