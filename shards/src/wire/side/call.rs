//! Filters' calls as side requests: a call's whole request handed over at once, its answer kept (head, body up to its bound, trailers) and given to its caller when it ends.

use std::rc::Rc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use engine::outlier::CallResult;
use h2wire::message::HeaderList;

use super::{Ended, SideField, SideHead, SideRequest, Stage};
use crate::http_filter::call::{CallAnswer, CallFailure, CallId, CallRequest, Calls, OnAnswer};
use crate::wire::body::{Item, ItemQueue};
use crate::wire::WireShard;

/// Calls in flight on one shard, at most (copies have their own bound).
pub const MAX_CALLS: usize = 8192;
/// Bytes the calls of one shard hold, at most: their unsent bodies and
/// the answers they keep (past it a call is refused, or its answer too
/// large).
pub const MAX_CALL_BYTES: usize = 64 << 20;

/// A call's answer so far, and who waits for it.
pub(super) struct Call {
    done: OnAnswer,
    head: Option<HeaderList>,
    body: BytesMut,
    max_body: usize,
    trailers: Option<HeaderList>,
}

impl Call {
    /// Keeps the answer's head; nothing is left to recycle.
    pub(super) fn keep_head(&mut self, head: HeaderList) -> Option<HeaderList> {
        self.head = Some(head);
        None
    }

    /// The answer bytes it keeps.
    pub(super) fn kept(&self) -> usize {
        self.body.len()
    }

    pub(super) fn keep_trailers(&mut self, fields: HeaderList) -> Option<HeaderList> {
        self.trailers = Some(fields);
        None
    }

    /// The call never got a host.
    pub(super) fn fail(self, why: CallFailure) {
        (self.done)(Err(why));
    }

    /// The call ended `how` (`status`: its answer's, if a head came). A
    /// cancelled call's caller is gone: nothing runs.
    pub(super) fn end(self, how: Ended, status: Option<u16>) {
        let outcome = match how {
            Ended::Abandoned => return,
            Ended::Answered => match (status, self.head) {
                (Some(status), Some(head)) => Ok(CallAnswer {
                    status,
                    head,
                    body: self.body.freeze(),
                    trailers: self.trailers,
                }),
                _ => Err(CallFailure::Reset),
            },
            Ended::Refused => Err(CallFailure::Overflow),
            Ended::Failed(CallResult::ConnectFailure) => Err(CallFailure::ConnectFailure),
            Ended::Failed(_) => Err(CallFailure::Reset),
            Ended::TimedOut => Err(CallFailure::Timeout),
            Ended::TooLarge => Err(CallFailure::TooLarge),
        };
        (self.done)(outcome);
    }
}

impl WireShard {
    /// A filter's call: its whole request queued at once, its deadline
    /// running from now.
    fn call_open(self: &Rc<Self>, req: CallRequest, done: OnAnswer) -> Result<CallId, CallFailure> {
        let mut m = self.side.borrow_mut();
        let len = req.body.len();
        if m.live.len() - m.copies >= MAX_CALLS || m.call_bytes + len > MAX_CALL_BYTES {
            return Err(CallFailure::Overflow);
        }
        let id = m.next_id();
        let bodyless = len == 0;
        let mut fields: Vec<SideField> = Vec::with_capacity(req.fields.len() + 1);
        fields.extend(req.fields.into_iter().map(|(n, v)| (n, v, false)));
        let mut body = ItemQueue::default();
        if !bodyless {
            let length = len.to_string().into_bytes().into_boxed_slice();
            fields.push((Box::from(&b"content-length"[..]), length, false));
            body.push_back(Item::Data {
                data: req.body,
                end: true,
                credit: 0,
            });
        }
        m.live.insert(
            id,
            SideRequest {
                stage: Stage::New {
                    cluster: req.cluster,
                },
                head: Some(SideHead {
                    method: req.method,
                    authority: req.authority,
                    path: req.path,
                    fields,
                    bodyless,
                }),
                body,
                unsent: len,
                limit: len,
                timeout: Some(req.timeout),
                deadline: Some(Instant::now() + req.timeout),
                status: None,
                due: false,
                ending: None,
                call: Some(Box::new(Call {
                    done,
                    head: None,
                    body: BytesMut::new(),
                    max_body: req.max_answer_bytes,
                    trailers: None,
                })),
            },
        );
        m.call_bytes += len;
        drop(m);
        self.side_due(id);
        Ok(CallId(id))
    }

    /// Its caller no longer waits for call `id`.
    fn call_cancel(self: &Rc<Self>, CallId(id): CallId) {
        let mut m = self.side.borrow_mut();
        let live = m.live.get_mut(&id);
        let Some(s) = live.filter(|s| s.ending.is_none() && s.call.is_some()) else {
            return;
        };
        s.ending = Some(Ended::Abandoned);
        drop(m);
        self.side_due(id);
    }
}

impl Calls for Rc<WireShard> {
    fn call(&self, req: CallRequest, done: OnAnswer) -> Result<CallId, CallFailure> {
        self.call_open(req, done)
    }

    fn cancel(&self, id: CallId) {
        self.call_cancel(id);
    }

    fn handle(&self) -> Rc<dyn Calls> {
        // Weak: what keeps it (a shard's exporter) must not keep the
        // shard alive.
        Rc::new(Rc::downgrade(self))
    }
}

/// A handle that does not keep the shard alive: a call after the shard
/// is gone is refused.
impl Calls for std::rc::Weak<WireShard> {
    fn call(&self, req: CallRequest, done: OnAnswer) -> Result<CallId, CallFailure> {
        match self.upgrade() {
            Some(wire) => wire.call_open(req, done),
            None => Err(CallFailure::Overflow),
        }
    }

    fn cancel(&self, id: CallId) {
        if let Some(wire) = self.upgrade() {
            wire.call_cancel(id);
        }
    }

    fn handle(&self) -> Rc<dyn Calls> {
        Rc::new(self.clone())
    }
}

impl super::Task {
    /// Keeps a chunk of call `id`'s answer body (a copy's is dropped);
    /// `false`: past the call's bound or the shard's.
    pub(super) fn keep_call_body(&self, id: u32, data: &Bytes) -> bool {
        let mut m = self.wire.side.borrow_mut();
        let total = m.call_bytes;
        let Some(call) = m.live.get_mut(&id).and_then(|s| s.call.as_deref_mut()) else {
            return true;
        };
        if call.body.len() + data.len() > call.max_body || total + data.len() > MAX_CALL_BYTES {
            return false;
        }
        call.body.extend_from_slice(data);
        m.call_bytes += data.len();
        true
    }

    /// Call `id`'s answer so far, if `id` is a live call.
    pub(super) fn call_of(&self, id: u32) -> Option<std::cell::RefMut<'_, Call>> {
        let m = self.wire.side.borrow_mut();
        std::cell::RefMut::filter_map(m, |m| m.live.get_mut(&id)?.call.as_deref_mut()).ok()
    }
}
