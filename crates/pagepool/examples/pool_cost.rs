// SPDX-License-Identifier: LGPL-3.0-or-later
//! What a 4 MiB receive buffer costs per message, in this thread's CPU time (the build machines are shared, so
//! wall time is noisy): taken, filled with 4 MiB (the kernel's copy out of the socket), frozen and dropped.
//! `cargo run --release -p pagepool --example pool_cost`
#![allow(clippy::unwrap_used)] // example code

use std::hint::black_box;

const LEN: usize = 4 << 20;
const ROUNDS: usize = 200;

fn cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn minflt() -> i64 {
    // SAFETY: a valid rusage to fill.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    ru.ru_minflt
}

fn per_buffer(name: &str, mut f: impl FnMut(&[u8])) {
    // A page-aligned source, as socket buffers are.
    let v = vec![7u8; LEN + 4096];
    let off = v.as_ptr().align_offset(4096);
    let src = &v[off..off + LEN];
    f(src);
    let (t, m) = (cpu_ns(), minflt());
    for _ in 0..ROUNDS {
        f(src);
    }
    let us = (cpu_ns() - t) as f64 / ROUNDS as f64 / 1000.0;
    let faults = (minflt() - m) as f64 / ROUNDS as f64;
    println!("{name:<48} {us:8.0} µs CPU, {faults:6.0} page faults per 4 MiB buffer");
}

fn main() {
    let pool = pagepool::PagePool::new(32 << 20);
    per_buffer("pagepool (hit: a recycled mapping)", |src| {
        let mut b = pool.alloc(LEN, 0);
        b.extend_from_slice(src);
        black_box(b.freeze());
    });
    let none = pagepool::PagePool::new(0);
    per_buffer("fresh mmap + munmap (pool bound 0)", |src| {
        let mut b = none.alloc(LEN, 0);
        b.extend_from_slice(src);
        black_box(b.freeze());
    });
    per_buffer("malloc, glibc's dynamic threshold (arena reuse)", |src| {
        let mut v = Vec::<u8>::with_capacity(LEN + 4095);
        v.extend_from_slice(src);
        black_box(v);
    });
    println!("{:?}", pool.stats());
}
