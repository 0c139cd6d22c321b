//! Phase 3 for a stream a filter paused: the body chunks and trailers that came meanwhile go through the body hooks once the chain passed the router, in order.

use super::Streams;
use crate::http_filter::chain;
use crate::wire::body::Item;

impl Streams {
    /// Body chunks (and trailers) that came before the stream passed the
    /// router (a filter had paused it) go through the body hooks now, in
    /// order. `Err`: a filter answered, and the stream is over.
    pub(super) fn filter_held_body(&mut self, stream: u32) -> Result<(), ()> {
        let now = self.now;
        let Some(s) = self.table.get_mut(&stream) else {
            return Err(());
        };
        let mut req = std::mem::take(&mut s.req);
        let (answer, last) = self
            .cx
            .filters(s, stream, now, false, |f, cx| {
                let answer = req.iter_mut().find_map(|item| match item {
                    Item::Data { data, end, .. } => chain::request_body(f, cx, data, *end),
                    Item::Trailers(t) => chain::request_trailers(f, cx, t),
                });
                (answer, cx.before_trailers.take())
            })
            .unwrap_or_default();
        if let Some(data) = last {
            // An encoder's end, ahead of the trailers it was given at
            // (the last item held).
            let mut with_end = crate::wire::body::ItemQueue::default();
            let mut data = Some(data);
            while let Some(item) = req.pop_front() {
                if matches!(item, Item::Trailers(_)) {
                    if let Some(data) = data.take() {
                        with_end.push_back(Item::Data {
                            data,
                            end: false,
                            credit: 0,
                        });
                    }
                }
                with_end.push_back(item);
            }
            req = with_end;
        }
        s.req = req;
        match answer {
            Some(r) => {
                self.fail_with(stream, r, None);
                Err(())
            }
            None => Ok(()),
        }
    }
}
