// SPDX-License-Identifier: LGPL-3.0-or-later
//! What the read path's verify pass (`blocks::crc_by_pages`) costs on bytes the device has just written by DMA,
//! against the same pass over cold memory the CPU wrote and over hot memory (docs/benchmarks.md, session 28).
//! `crc_after_dma FILE [READS]`: FILE is read with O_DIRECT in 64 KiB pieces at pseudo-random offsets (a file of
//! 1 GiB or more on the disk under test); prints µs per 64 KiB for each case.
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::time::{Duration, Instant};

const CHUNK: usize = 64 << 10;
const PAGE: usize = 4096;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: crc_after_dma FILE [READS]");
        std::process::exit(2);
    };
    let reads: usize = std::env::args()
        .nth(2)
        .and_then(|r| r.parse().ok())
        .unwrap_or(20_000);
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    };
    let pieces = f.metadata().map_or(0, |m| m.len() as usize / CHUNK);
    if pieces == 0 {
        eprintln!("{path}: shorter than 64 KiB");
        std::process::exit(1);
    }
    // 64 buffers in rotation, page-aligned (O_DIRECT).
    let nbuf = 64;
    let mut v = vec![0u8; nbuf * CHUNK + PAGE];
    let pad = v.as_ptr().align_offset(PAGE);
    let mut seed = 777u64;
    let mut next = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 20) as usize
    };
    let (mut dma, mut hot) = (Duration::ZERO, Duration::ZERO);
    let mut x = 0u32;
    for k in 0..reads {
        let b = pad + (k % nbuf) * CHUNK;
        let off = (next() % pieces) * CHUNK;
        if let Err(e) = f.read_exact_at(&mut v[b..b + CHUNK], off as u64) {
            eprintln!("read at {off}: {e}");
            std::process::exit(1);
        }
        let t = Instant::now();
        x ^= ceph_crc::blocks::crc_by_pages(&v[b..b + CHUNK]).0;
        dma += t.elapsed();
        let t = Instant::now();
        x ^= ceph_crc::blocks::crc_by_pages(&v[b..b + CHUNK]).0;
        hot += t.elapsed();
    }
    // Cold but written by the CPU: 1 GiB filled here, visited in pseudo-random 64 KiB pieces.
    let total = 1 << 30;
    let mut c = vec![0u8; total + PAGE];
    for (i, b) in c.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(13);
    }
    let pad = c.as_ptr().align_offset(PAGE);
    let n = total / CHUNK;
    let t = Instant::now();
    for _ in 0..reads.min(n) {
        let i = next() % n;
        x ^= ceph_crc::blocks::crc_by_pages(&c[pad + i * CHUNK..pad + (i + 1) * CHUNK]).0;
    }
    let cold = t.elapsed();
    let us = |d: Duration, n: usize| d.as_secs_f64() * 1e6 / n as f64;
    println!(
        "µs per 64 KiB: after an O_DIRECT read {:.2}, cold CPU-written {:.2}, hot {:.2} ({reads} reads; {x:08x})",
        us(dma, reads),
        us(cold, reads.min(n)),
        us(hot, reads)
    );
}
