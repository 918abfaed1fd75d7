// SPDX-License-Identifier: LGPL-3.0-or-later
//! The SPSC ring under two racing threads: every value arrives once, in order, with its payload intact, and
//! nothing leaks. Bounded by count, with a guard that fails only when a side makes no progress for 20 s (a
//! total-time bound failed on a loaded 2-CPU machine where each yield can cost a whole time slice).
#![allow(clippy::unwrap_used)]

use reactor::spsc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

struct Tracked(u64, Vec<u8>, Arc<AtomicUsize>);
impl Drop for Tracked {
    fn drop(&mut self) {
        self.2.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn two_threads_in_order_no_loss_no_leak() {
    const N: u64 = 100_000;
    const STALL: Duration = Duration::from_secs(20);
    let drops = Arc::new(AtomicUsize::new(0));
    for cap in [2usize, 64, 1024] {
        drops.store(0, Ordering::Relaxed);
        let (mut p, mut c) = spsc::channel::<Tracked>(cap);
        let d2 = drops.clone();
        let n = if cap == 2 { N / 10 } else { N };
        // Values consumed so far: the producer's progress guard watches it too (a full ring waits for the consumer).
        let consumed = Arc::new(AtomicU64::new(0));
        let consumed2 = consumed.clone();
        let prod = std::thread::spawn(move || {
            let mut last = (0u64, Instant::now());
            for i in 0..n {
                let mut v = Tracked(i, vec![i as u8; (i % 7) as usize], d2.clone());
                loop {
                    match p.push(v) {
                        Ok(()) => break,
                        Err(back) => {
                            v = back;
                            let seen = consumed2.load(Ordering::Relaxed);
                            if seen != last.0 {
                                last = (seen, Instant::now());
                            }
                            assert!(last.1.elapsed() < STALL, "producer stuck at {i}");
                            std::thread::yield_now();
                        }
                    }
                }
            }
        });
        let mut next = 0u64;
        let mut last = (0u64, Instant::now());
        while next < n {
            let got = c.drain(97, |v| {
                assert_eq!(v.0, next);
                assert_eq!(v.1.len(), (next % 7) as usize);
                assert!(v.1.iter().all(|b| *b == next as u8));
                next += 1;
            });
            if got == 0 {
                if let Some(v) = c.pop() {
                    assert_eq!(v.0, next);
                    next += 1;
                }
                if next != last.0 {
                    last = (next, Instant::now());
                }
                assert!(last.1.elapsed() < STALL, "consumer stuck at {next}");
                std::thread::yield_now();
            }
            consumed.store(next, Ordering::Relaxed);
        }
        prod.join().unwrap();
        assert!(c.pop().is_none());
        assert_eq!(
            drops.load(Ordering::Relaxed) as u64,
            n,
            "every value dropped exactly once"
        );
    }
}
