//! glommio's patched reactor loop (third_party/glommio/PATCHES.md:
//! `clock-preempt`, `one-enter-park`, `coop-taskrun`, `loop-clock`, `waker-dedup`): an
//! executor that parks submits what its tasks queued and sleeps in one
//! `io_uring_enter`, keeps the link between its rings armed across sleeps,
//! times its sleep out without a TIMEOUT request, yields to I/O at a
//! deadline read from the clock, and lets timers compare their deadlines
//! with the time its loop last read. Each test drives one of the ways an executor is woken, many times
//! in a row, and fails instead of hanging if a wake-up is lost.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::channels::shared_channel;
use glommio::net::{TcpListener, TcpStream};
use glommio::{LocalExecutorBuilder, Placement};

/// Far longer than any scenario here takes: reaching it means a lost wake-up.
const GIVE_UP: Duration = Duration::from_secs(30);

/// Runs `f` on a fresh executor thread built by `builder`; panics if it has
/// not finished within `GIVE_UP` (a parked executor that was never woken).
fn on_executor<F, Fut, T>(builder: LocalExecutorBuilder, f: F) -> T
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T> + 'static,
    T: Send + 'static,
{
    let (done, result) = mpsc::channel();
    let handle = builder
        .io_memory(1 << 20)
        .spawn(move || async move {
            let out = f().await;
            let _ = done.send(out);
        })
        .expect("executor");
    let out = result
        .recv_timeout(GIVE_UP)
        .expect("the executor never finished: a lost wake-up");
    handle.join().expect("executor thread");
    out
}

fn executor() -> LocalExecutorBuilder {
    LocalExecutorBuilder::new(Placement::Unbound)
}

/// Ping-pong between two executors over shared channels: each message wakes
/// a parked executor from another thread (its eventfd completes in the
/// latency ring, whose link ends the sleep on the main ring). The link fires
/// on every round and must be re-armed for the next sleep.
#[test]
fn a_parked_executor_wakes_for_each_message_from_another_executor() {
    const ROUNDS: u32 = 500;
    let (ping_tx, ping_rx) = shared_channel::new_bounded::<u32>(1);
    let (pong_tx, pong_rx) = shared_channel::new_bounded::<u32>(1);

    let echo = thread::spawn(move || {
        on_executor(executor(), move || async move {
            let rx = ping_rx.connect().await;
            let tx = pong_tx.connect().await;
            let mut n = 0;
            while let Some(v) = rx.recv().await {
                tx.send(v).await.expect("pong");
                n += 1;
                if n == ROUNDS {
                    break;
                }
            }
            n
        })
    });
    let sent = on_executor(executor(), move || async move {
        let tx = ping_tx.connect().await;
        let rx = pong_rx.connect().await;
        for i in 0..ROUNDS {
            tx.send(i).await.expect("ping");
            assert_eq!(rx.recv().await, Some(i));
            // Let the other side park before the next message now and then.
            if i % 50 == 0 {
                glommio::timer::sleep(Duration::from_millis(1)).await;
            }
        }
        ROUNDS
    });
    assert_eq!(sent, ROUNDS);
    assert_eq!(echo.join().expect("echo thread"), ROUNDS);
}

/// Ping-pong of one byte over loopback TCP between two executors: each read
/// finds nothing, queues its poll and parks, so every round needs the park
/// to submit that poll in the same enter that sleeps.
#[test]
fn a_read_queued_just_before_parking_is_submitted_by_the_park() {
    const ROUNDS: usize = 2_000;
    let (addr_tx, addr_rx) = mpsc::channel();

    let server = thread::spawn(move || {
        on_executor(executor(), move || async move {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
            addr_tx
                .send(listener.local_addr().expect("addr"))
                .expect("addr");
            let mut conn = listener.accept().await.expect("accept");
            let mut byte = [0u8; 1];
            for _ in 0..ROUNDS {
                conn.read_exact(&mut byte).await.expect("server read");
                conn.write_all(&byte).await.expect("server write");
            }
            ROUNDS
        })
    });
    let addr = addr_rx.recv_timeout(GIVE_UP).expect("server address");
    let rounds = on_executor(executor(), move || async move {
        let mut conn = TcpStream::connect(addr).await.expect("connect");
        conn.set_nodelay(true).expect("nodelay");
        let mut byte = [0u8; 1];
        for i in 0..ROUNDS {
            conn.write_all(&[i as u8]).await.expect("client write");
            conn.read_exact(&mut byte).await.expect("client read");
            assert_eq!(byte[0], i as u8);
        }
        ROUNDS
    });
    assert_eq!(rounds, ROUNDS);
    assert_eq!(server.join().expect("server thread"), ROUNDS);
}

/// An executor with nothing but a timer pending sleeps with the timer's
/// deadline as the time limit of its `io_uring_enter`; it must wake for it,
/// and not before it.
#[test]
fn a_parked_executor_with_only_a_timer_wakes_when_it_is_due() {
    const SLEEPS: u32 = 50;
    const EACH: Duration = Duration::from_millis(2);
    let elapsed = on_executor(executor(), || async {
        let start = Instant::now();
        for _ in 0..SLEEPS {
            let t = Instant::now();
            glommio::timer::sleep(EACH).await;
            assert!(t.elapsed() >= EACH, "a timer fired early");
        }
        start.elapsed()
    });
    assert!(elapsed >= EACH * SLEEPS);
}

/// A task that keeps the CPU but yields when the executor asks
/// (`yield_if_needed`) must let a due timer's task run: the preempt
/// deadline, now read from the clock rather than armed as a TIMEOUT, has to
/// pass and be seen.
#[test]
fn a_busy_task_that_yields_when_asked_lets_a_due_timer_run() {
    let builder = executor().preempt_timer(Duration::from_millis(10));
    let (timer_ran_first, spun) = on_executor(builder, || async {
        let done = std::rc::Rc::new(std::cell::Cell::new(false));
        let flag = done.clone();
        let timer = glommio::spawn_local(async move {
            glommio::timer::sleep(Duration::from_millis(20)).await;
            flag.set(true);
        });
        let start = Instant::now();
        // Busy for at most 5 s, yielding only when asked to.
        while !done.get() && start.elapsed() < Duration::from_secs(5) {
            let t = Instant::now();
            while t.elapsed() < Duration::from_micros(200) {
                std::hint::spin_loop();
            }
            glommio::yield_if_needed().await;
        }
        timer.await;
        (done.get(), start.elapsed())
    });
    assert!(timer_ran_first, "the busy task was never asked to yield");
    assert!(spun < Duration::from_secs(5));
}

/// `loop-clock`: a timer compares its deadline with the loop's time, which
/// lags the clock while tasks run. A timer already due by the clock but not
/// by the loop's time when it is first polled is registered, and the next
/// I/O poll (which reads the clock) must wake it: a lost wake-up otherwise.
#[test]
fn a_timer_due_only_by_the_clock_when_polled_still_fires() {
    const ROUNDS: u32 = 50;
    let waited = on_executor(executor(), || async {
        let mut longest = Duration::ZERO;
        for _ in 0..ROUNDS {
            let timer = glommio::timer::Timer::new(Duration::from_micros(200));
            // Run past the deadline without letting the loop read the clock.
            let t = Instant::now();
            while t.elapsed() < Duration::from_millis(1) {
                std::hint::spin_loop();
            }
            assert!(glommio::timer::loop_time() <= Instant::now());
            let polled = Instant::now();
            timer.await;
            longest = longest.max(polled.elapsed());
        }
        longest
    });
    // One more loop, not a wait for some later event.
    assert!(waited < Duration::from_secs(1), "waited {waited:?}");
}

/// `loop-clock`: after a park, the loop's time is read again: a task woken
/// by I/O after a long sleep sees a time no older than its wake-up (stream
/// deadlines and log times are taken from it).
#[test]
fn the_loop_time_is_read_again_after_a_park() {
    const SLEEP: Duration = Duration::from_millis(100);
    let (addr_tx, addr_rx) = mpsc::channel();
    let writer = thread::spawn(move || {
        let addr = addr_rx.recv_timeout(GIVE_UP).expect("address");
        let mut conn = std::net::TcpStream::connect(addr).expect("connect");
        for _ in 0..3 {
            thread::sleep(SLEEP);
            std::io::Write::write_all(&mut conn, b"x").expect("write");
        }
    });
    let lags = on_executor(executor(), move || async move {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        addr_tx
            .send(listener.local_addr().expect("addr"))
            .expect("addr");
        let mut conn = listener.accept().await.expect("accept");
        let mut lags = Vec::new();
        let mut byte = [0u8; 1];
        for _ in 0..3 {
            conn.read_exact(&mut byte).await.expect("read");
            lags.push(Instant::now() - glommio::timer::loop_time());
        }
        lags
    });
    writer.join().expect("writer");
    for lag in lags {
        assert!(
            lag < SLEEP / 2,
            "the loop's time lags by {lag:?} after a park"
        );
    }
}

/// An accept raced against a loop of sleeps (the admin's stop poll, an
/// accept loop paused by the overload manager) is polled again at every
/// tick: its readiness poll must keep one waker, not one more per tick
/// (glommio's `PATCH(waker-dedup)`). Past 32,767 ticks the task's reference
/// count would overflow and the task hang; the accept must still take a
/// connection that comes after all those ticks.
#[test]
fn an_accept_raced_against_a_ticker_keeps_one_waker() {
    const TICKS: u32 = 40_000;
    let accepted = on_executor(executor(), || async {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let ticks = std::cell::Cell::new(0u32);
        let ticker = async {
            while ticks.get() < TICKS {
                glommio::timer::sleep(Duration::from_micros(20)).await;
                ticks.set(ticks.get() + 1);
            }
            // Only now does a client come.
            thread::spawn(move || std::net::TcpStream::connect(addr).map(|_| ()));
            futures_lite::future::pending::<()>().await;
        };
        let accept = listener.accept();
        futures_lite::future::or(async { accept.await.is_ok() }, async {
            ticker.await;
            false
        })
        .await
    });
    assert!(accepted, "the accept took the late connection");
}
