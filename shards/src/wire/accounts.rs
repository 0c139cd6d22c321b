//! The overload manager's `reset_high_memory_stream` on a data shard: the streams whose buffered body bytes reach the tracked minimum, sorted into Envoy's memory classes, and the pass that picks the largest to reset each time the action's level changes.
//!
//! A stream is charged the body bytes the gateway holds for it, both
//! ways: request chunks waiting for the upstream's window (`DStream::req`)
//! or gathered for a filter that paused for the body, response chunks
//! waiting for the client's window (`DStream::resp`) or held by a filter
//! until the response's end. Envoy charges the slices of the stream's
//! buffers (its codec's, its upstream request's, its filters'); we count
//! bytes, not 4 KiB slices, and charge nobody for the connection's
//! unwritten output (shared by its streams, at most
//! `per_connection_buffer_limit_bytes`) nor for a retry's copy of the body
//! (it shares the queued chunks).
//!
//! The charge is taken where a stream's body items move: each turn's
//! `forward` over the streams with items queued, a gather, a held
//! response. With the action unconfigured that is one load of a `Cell`
//! and a branch; configured, a class changes only when a stream's bytes
//! cross a power of two, and only then does the stream move between the
//! shard's sets (bounded by the streams open on the shard).
//!
//! The sampler thread only counts the action's level changes
//! (`OverloadState::changes`): a task on each data shard looks every
//! `refresh_interval` and, on a change, picks the streams to reset from
//! its own sets and hands each to its connection's task through the
//! connection's inbox, where it is reset (`streams/overload.rs`), as
//! Envoy's workers each reset their own streams when the action's state
//! changes.

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};
use std::time::Duration;

use ahash::AHashSet;
use engine::overload::{
    classes_to_reset, memory_class, ActionKind, MAX_RESETS_PER_PASS, MEMORY_CLASSES,
};
use engine::Snapshot;

use super::inbox::Delivered;
use super::WireShard;
use crate::overload::Act;

/// A stream's class when it is in none: below the tracked minimum, or
/// nothing is tracked.
pub(crate) const UNTRACKED: u8 = u8::MAX;

/// The shortest look between two passes, whatever `refresh_interval`
/// says: the level cannot change faster than the sampler samples.
const MIN_PERIOD: Duration = Duration::from_millis(10);

/// A stream of the shard: its connection's inbox and its downstream id.
type StreamKey = (usize, u32);

/// The streams of one shard in each memory class, and the task that
/// resets them (see the module's comment).
#[derive(Default)]
pub(crate) struct Accounts {
    /// `minimum_account_to_track_power_of_two` while
    /// `reset_high_memory_stream` is configured; 0: nothing is tracked.
    power: Cell<u32>,
    /// The tracked streams, by class (0: the smallest).
    classes: RefCell<[AHashSet<StreamKey>; MEMORY_CLASSES]>,
    /// How long the watcher sleeps between looks.
    period: Cell<Duration>,
    /// The watcher, while the action is configured (dropping it stops it).
    watcher: RefCell<Option<glommio::Task<()>>>,
}

impl Accounts {
    /// Streams are charged: `reset_high_memory_stream` is configured.
    #[inline]
    pub(crate) fn tracking(&self) -> bool {
        self.power.get() != 0
    }

    /// Charges stream `key` (whose class is `*class`) with `bytes`: it
    /// moves to the class they fall in.
    #[inline]
    pub(crate) fn charge(&self, key: StreamKey, class: &mut u8, bytes: u64) {
        let power = self.power.get();
        if power == 0 {
            return;
        }
        let new = memory_class(bytes, power).map_or(UNTRACKED, |c| c as u8);
        if new != *class {
            self.moved(key, *class, new);
            *class = new;
        }
    }

    /// Stream `key` ended (or left its connection's table): out of its
    /// class, whether or not tracking is still on.
    pub(crate) fn forget(&self, key: StreamKey, class: &mut u8) {
        if *class != UNTRACKED {
            self.moved(key, *class, UNTRACKED);
            *class = UNTRACKED;
        }
    }

    fn moved(&self, key: StreamKey, from: u8, to: u8) {
        let mut classes = self.classes.borrow_mut();
        if let Some(set) = classes.get_mut(usize::from(from)) {
            set.remove(&key);
        }
        if let Some(set) = classes.get_mut(usize::from(to)) {
            set.insert(key);
        }
    }

    /// The streams a pass at `level` resets: those of the
    /// [`classes_to_reset`] largest classes, the largest first, at most
    /// [`MAX_RESETS_PER_PASS`]; each taken out of its class (a later pass
    /// does not pick it again while its reset is on its way).
    pub(crate) fn pick(&self, level: f64) -> Vec<StreamKey> {
        let n = classes_to_reset(level);
        let mut picked = Vec::new();
        let mut classes = self.classes.borrow_mut();
        for set in classes.iter_mut().rev().take(n) {
            let room = MAX_RESETS_PER_PASS - picked.len();
            if room == 0 {
                break;
            }
            if set.len() <= room {
                picked.extend(set.drain());
            } else {
                let some: Vec<StreamKey> = set.iter().copied().take(room).collect();
                for key in &some {
                    set.remove(key);
                }
                picked.extend(some);
            }
        }
        picked
    }

    /// How many streams each class holds.
    #[cfg(test)]
    fn sizes(&self) -> [usize; MEMORY_CLASSES] {
        let classes = self.classes.borrow();
        std::array::from_fn(|i| classes[i].len())
    }
}

impl WireShard {
    /// Follows a new snapshot: tracking and the watcher run while its
    /// overload manager has `reset_high_memory_stream` (which needs
    /// `buffer_factory_config`), and stop otherwise. Streams tracked
    /// before stay in their classes until they end or move.
    pub(crate) fn follow_overload(self: &Rc<Self>, snap: &Snapshot) {
        let config = snap.overload.as_deref().filter(|o| {
            o.actions
                .iter()
                .any(|a| a.kind == ActionKind::ResetHighMemoryStream)
        });
        let a = &self.accounts;
        let Some((o, power)) = config.and_then(|o| Some((o, o.account_power?))) else {
            a.power.set(0);
            a.watcher.borrow_mut().take();
            return;
        };
        a.power.set(power);
        a.period.set(o.refresh_interval.max(MIN_PERIOD));
        let mut watcher = a.watcher.borrow_mut();
        if watcher.is_none() {
            *watcher = Some(glommio::spawn_local(watch(Rc::downgrade(self))));
        }
    }

    /// One pass at `level`: each stream picked is handed to its
    /// connection's task to reset.
    fn reset_high_memory_streams(&self, level: f64) {
        for (inbox, stream) in self.accounts.pick(level) {
            // A connection gone meanwhile took its streams with it.
            let _ = self
                .inboxes
                .deliver(inbox, stream, Delivered::OverloadReset);
        }
    }
}

/// The watcher: every `refresh_interval`, a pass if the action's level
/// changed since the last look. It holds the shard weakly, so that it
/// never keeps it alive.
async fn watch(wire: Weak<WireShard>) {
    // From 0: a level the sampler set before the watcher started is a
    // change too.
    let mut seen = 0;
    loop {
        let Some(period) = wire.upgrade().map(|w| w.accounts.period.get()) else {
            return;
        };
        glommio::timer::sleep(period).await;
        let Some(wire) = wire.upgrade() else {
            return;
        };
        let state = &wire.shard.overload;
        let changes = state.changes(Act::ResetHighMemoryStream);
        if changes != seen {
            seen = changes;
            wire.reset_high_memory_streams(state.level(Act::ResetHighMemoryStream));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracking(power: u32) -> Accounts {
        let a = Accounts::default();
        a.power.set(power);
        a
    }

    #[test]
    fn streams_move_between_classes_as_their_bytes_cross_powers_of_two() {
        let a = tracking(13);
        let mut class = UNTRACKED;
        a.charge((0, 1), &mut class, 4095);
        assert_eq!(class, UNTRACKED);
        assert_eq!(a.sizes(), [0; 8]);
        a.charge((0, 1), &mut class, 4096);
        assert_eq!(class, 0);
        a.charge((0, 1), &mut class, 20_000);
        assert_eq!(class, 2);
        assert_eq!(a.sizes(), [0, 0, 1, 0, 0, 0, 0, 0]);
        a.charge((0, 1), &mut class, 0);
        assert_eq!((class, a.sizes()), (UNTRACKED, [0; 8]));
        a.charge((0, 1), &mut class, 1 << 30);
        assert_eq!(a.sizes(), [0, 0, 0, 0, 0, 0, 0, 1]);
        a.forget((0, 1), &mut class);
        assert_eq!((class, a.sizes()), (UNTRACKED, [0; 8]));
    }

    #[test]
    fn nothing_is_tracked_without_the_action() {
        let a = Accounts::default();
        let mut class = UNTRACKED;
        a.charge((0, 1), &mut class, u64::MAX);
        assert_eq!((class, a.sizes()), (UNTRACKED, [0; 8]));
    }

    #[test]
    fn a_stream_tracked_before_tracking_stopped_is_still_forgotten() {
        let a = tracking(10);
        let mut class = UNTRACKED;
        a.charge((3, 7), &mut class, 1 << 20);
        a.power.set(0);
        a.charge((3, 7), &mut class, 0);
        assert_eq!(a.sizes()[7], 1, "no charge while off");
        a.forget((3, 7), &mut class);
        assert_eq!(a.sizes(), [0; 8]);
    }

    #[test]
    fn a_pass_takes_the_top_classes_largest_first_up_to_the_cap() {
        let a = tracking(10);
        // One stream in each class, its id its class.
        let mut classes = [UNTRACKED; 8];
        for (k, class) in classes.iter_mut().enumerate() {
            a.charge((0, k as u32), class, 512 << k);
        }
        assert_eq!(a.sizes(), [1; 8]);
        assert!(a.pick(0.0).is_empty(), "level 0 resets nothing");
        // Just above 0: the largest class only; 5/8: six classes.
        assert_eq!(a.pick(0.01), vec![(0, 7)]);
        let mut six = a.pick(0.625);
        six.sort_unstable();
        assert_eq!(six, vec![(0, 2), (0, 3), (0, 4), (0, 5), (0, 6)]);
        assert_eq!(a.sizes(), [1, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(a.pick(1.0).len(), 2);

        // Past the cap, the largest go first and the rest wait for the
        // next change of level (as Envoy's).
        let a = tracking(10);
        let mut big = [UNTRACKED; 60];
        for (i, class) in big.iter_mut().enumerate() {
            a.charge((1, i as u32), class, 1 << 30);
        }
        let mut small = [UNTRACKED; 10];
        for (i, class) in small.iter_mut().enumerate() {
            a.charge((2, i as u32), class, 600);
        }
        let first = a.pick(1.0);
        assert_eq!(first.len(), MAX_RESETS_PER_PASS);
        assert!(first.iter().all(|(inbox, _)| *inbox == 1));
        let second = a.pick(1.0);
        assert_eq!(second.len(), 20);
        assert_eq!(second.iter().filter(|(inbox, _)| *inbox == 1).count(), 10);
        assert!(a.pick(1.0).is_empty());
    }
}
