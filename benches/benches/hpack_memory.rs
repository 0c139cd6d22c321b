//! Heap held by one connection's HPACK decoder after traffic: `h2wire`
//! against the `h2` crate's, counted by a global allocator that tracks live
//! bytes (exact, no sampling). This is most of what an idle client
//! connection keeps after use (docs/benchmarks-history.md, idle connection memory).
//!
//! For 1, 16 and 64 browser-like request blocks on one connection (each
//! with a fresh `x-request-id`, so the 4 KiB table churns), it prints the
//! live heap of each decoder (dynamic table and whatever else it keeps),
//! and our decoder's own `memory_bytes()` as a cross-check.
//!
//! `cargo bench -p benches --bench hpack_memory`

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Cursor;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicIsize, Ordering};

use h2::hpack as theirs;

#[path = "hpack_fixtures/mod.rs"]
mod fixtures;
use fixtures::encoded_requests;

/// Live heap bytes of this process.
static LIVE: AtomicIsize = AtomicIsize::new(0);

struct Counting;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to parse.
    println!("requests  h2wire live B  h2wire memory_bytes  h2 live B  h2wire/h2");
    for n in [1, 16, 64] {
        let input = encoded_requests(n);

        let before = live();
        let mut ours = h2wire::hpack::Decoder::new(4096);
        for b in &input {
            ours.decode(b, 64 * 1024, |f| {
                std::hint::black_box(f);
            })
            .expect("h2wire decodes what h2 encodes");
        }
        let ours_live = live() - before;

        let before = live();
        let mut theirs_dec = theirs::Decoder::new(4096);
        for b in &input {
            // The copy is h2's input, not its state: dropped before counting.
            let mut src = b.clone();
            theirs_dec
                .decode(&mut Cursor::new(&mut src), |h| {
                    std::hint::black_box(h);
                    ControlFlow::Continue(())
                })
                .expect("h2 decodes its own blocks");
        }
        let theirs_live = live() - before;

        println!(
            "{n:>8}  {ours_live:>13}  {:>19}  {theirs_live:>9}  {:>9.2}",
            ours.memory_bytes(),
            ours_live as f64 / theirs_live as f64
        );
        drop(ours);
        drop(theirs_dec);
    }
}
