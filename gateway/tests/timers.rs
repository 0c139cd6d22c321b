//! glommio `PATCH(timer-repoll)` (third_party/glommio/PATCHES.md): a pending
//! `Timer` polled again keeps its registration instead of being re-inserted,
//! and one that knows the waker it registered skips the reactor altogether.
//! These check that such a timer still wakes its task on its own, wakes the
//! task that polled it last when that changed, and registers again after a
//! reset that found it fired.

mod support;

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_lite::future::poll_fn;
use glommio::channels::local_channel;
use glommio::timer::Timer;
use support::client;

/// Far longer than any timer here: a lost wake-up fails instead of hanging.
const GIVE_UP: Duration = Duration::from_secs(5);

/// Polls `timer` until it fires or `GIVE_UP` passes; true if it fired.
async fn fires(timer: &mut Pin<Box<Timer>>) -> bool {
    let mut guard = Box::pin(Timer::new(GIVE_UP));
    poll_fn(|cx| {
        // The guard first: woken by it, the (long due) timer must not count.
        if guard.as_mut().poll(cx).is_ready() {
            return Poll::Ready(false);
        }
        if timer.as_mut().poll(cx).is_ready() {
            return Poll::Ready(true);
        }
        Poll::Pending
    })
    .await
}

/// The task is woken by messages many times while its timer is pending (so
/// the timer is polled again each time with the same deadline), then the
/// messages stop: the timer alone must wake it.
#[test]
fn a_timer_polled_again_and_again_still_wakes_its_task() {
    let (fired, elapsed, woken) = client(|| async {
        let (tx, rx) = local_channel::new_unbounded::<u32>();
        let sender = glommio::spawn_local(async move {
            for i in 0..10 {
                glommio::timer::sleep(Duration::from_millis(1)).await;
                let _ = tx.try_send(i);
            }
        });
        let start = Instant::now();
        let mut timer = Box::pin(Timer::new(Duration::from_millis(40)));
        let mut guard = Box::pin(Timer::new(GIVE_UP));
        let mut woken = 0;
        let mut recv = Box::pin(rx.stream());
        let fired = poll_fn(|cx| {
            use futures_lite::Stream;
            while let Poll::Ready(Some(_)) = recv.as_mut().poll_next(cx) {
                woken += 1;
            }
            if guard.as_mut().poll(cx).is_ready() {
                return Poll::Ready(false);
            }
            if timer.as_mut().poll(cx).is_ready() {
                return Poll::Ready(true);
            }
            Poll::Pending
        })
        .await;
        sender.await;
        (fired, start.elapsed(), woken)
    });
    assert!(fired, "the timer never fired on its own ({woken} messages)");
    assert_eq!(
        woken, 10,
        "every message woke the task before the timer fired"
    );
    assert!(
        elapsed >= Duration::from_millis(40),
        "fired early: {elapsed:?}"
    );
}

/// A timer first polled by one task and then by another wakes the second.
#[test]
fn a_timer_wakes_the_task_that_polled_it_last() {
    let fired = client(|| async {
        let timer = Box::pin(Timer::new(Duration::from_millis(30)));
        let slot = Rc::new(RefCell::new(Some(timer)));
        // The first task registers its waker, then ends.
        let first = Rc::clone(&slot);
        glommio::spawn_local(async move {
            let mut timer = first.borrow_mut().take().expect("timer");
            let pending = poll_fn(|cx| Poll::Ready(timer.as_mut().poll(cx).is_pending())).await;
            assert!(pending, "a 30 ms timer is pending at once");
            *first.borrow_mut() = Some(timer);
        })
        .await;
        // The second polls the same timer, with the same deadline.
        let mut timer = slot.borrow_mut().take().expect("timer");
        glommio::spawn_local(async move { fires(&mut timer).await }).await
    });
    assert!(fired, "the second task was never woken");
}

/// A timer that fired (its task not yet polled it) and is then reset to a
/// later deadline is no longer held by the reactor: the next poll must
/// register it again, or its task is never woken.
#[test]
fn a_fired_timer_reset_to_later_wakes_its_task() {
    let fired = client(|| async {
        let mut timer = Box::pin(Timer::new(Duration::from_millis(5)));
        let pending = poll_fn(|cx| Poll::Ready(timer.as_mut().poll(cx).is_pending())).await;
        assert!(pending, "a 5 ms timer is pending at once");
        // Let the reactor fire it without this task polling it.
        glommio::timer::sleep(Duration::from_millis(20)).await;
        timer.as_mut().get_mut().reset(Duration::from_millis(30));
        fires(&mut timer).await
    });
    assert!(fired, "the reset timer never woke its task");
}
