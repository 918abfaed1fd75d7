// SPDX-License-Identifier: LGPL-3.0-or-later
//! CPU cost of the engine's read path without device time: 4 KiB reads, stats and xattr lookups on objects whose
//! every block is its own extent (as after random 4K writes), on the in-memory simulated device (a read completes
//! at the next poll). Repeats the measurement and prints the best run, which is robust on a shared machine.
//!
//! `cargo run --release -p ferrostore --example lookup_cpu -- [objects] [rounds] [blocks per extent]`
//! (FERRO_EXTENT_CACHE=0 turns the extent cache off; times are thread CPU time.)

mod common;

use bytes::Bytes;
use common::coll;
use ferrostore::rng::Rng;
use ferrostore::{ObjectKey, Op, Transaction};

fn obj(i: u64) -> ObjectKey {
    // shaped like the OSD's keys: a long common prefix, the name at the end
    let name = format!("\u{1}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{1}rbd_data.10226b8b4567.{i:016x}");
    ObjectKey::new(crc32c::crc32c(name.as_bytes()), Bytes::from(name))
}

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let objects: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(64);
    let rounds: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(7);
    // 1: every block its own extent (as after random 4K writes); 16: 64 KiB extents (as after large writes)
    let per_extent: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1).clamp(1, 16);
    let blocks = 1024u64; // 4 MiB objects
    let mut s = common::sim_store(((objects * blocks * 4096) as usize) * 2 + (64 << 20))?;
    let data = Bytes::from(vec![0x5a; 4096 * per_extent as usize]);
    for i in 0..objects {
        for parity in [0, 1] {
            let mut t = Transaction::new();
            for b in (parity * per_extent..blocks).step_by(2 * per_extent as usize) {
                t.push(Op::Write {
                    cid: coll(),
                    oid: obj(i),
                    offset: b * 4096,
                    data: data.clone(),
                });
                if t.ops.len() == 64 {
                    s.commit(&t).map_err(|e| e.to_string())?;
                    t = Transaction::new();
                }
            }
            if !t.ops.is_empty() {
                s.commit(&t).map_err(|e| e.to_string())?;
            }
        }
        let mut t = Transaction::new();
        t.push(Op::SetAttrs {
            cid: coll(),
            oid: obj(i),
            attrs: vec![(Bytes::from_static(b"_"), Bytes::from(vec![1u8; 250]))],
        });
        s.commit(&t).map_err(|e| e.to_string())?;
    }
    s.checkpoint().map_err(|e| e.to_string())?;
    let ops = 100_000u64;
    let mut best = [f64::MAX; 4];
    for _ in 0..rounds {
        let mut rng = Rng::new(9);
        let t0 = common::thread_cpu_ns();
        for _ in 0..ops {
            let o = obj(rng.below(objects));
            let off = rng.below(blocks) * 4096;
            // what an OSD read op does in the engine: object info, size, data
            std::hint::black_box(s.getattr(&coll(), &o, b"_").map_err(|e| e.to_string())?);
            std::hint::black_box(s.stat(&coll(), &o).map_err(|e| e.to_string())?);
            std::hint::black_box(s.read(&coll(), &o, off, 4096).map_err(|e| e.to_string())?);
        }
        best[0] = best[0].min((common::thread_cpu_ns() - t0) / ops as f64);
        let t0 = common::thread_cpu_ns();
        for _ in 0..ops {
            let o = obj(rng.below(objects));
            let off = rng.below(blocks) * 4096;
            std::hint::black_box(s.fiemap(&coll(), &o, off, 65536).map_err(|e| e.to_string())?);
        }
        best[1] = best[1].min((common::thread_cpu_ns() - t0) / ops as f64);
        let t0 = common::thread_cpu_ns();
        for _ in 0..ops {
            let o = obj(rng.below(objects));
            std::hint::black_box(s.stat(&coll(), &o).map_err(|e| e.to_string())?);
        }
        best[2] = best[2].min((common::thread_cpu_ns() - t0) / ops as f64);
        let t0 = common::thread_cpu_ns();
        for _ in 0..ops / 4 {
            let o = obj(rng.below(objects));
            let off = rng.below(blocks / 16) * 65536;
            std::hint::black_box(s.read(&coll(), &o, off, 65536).map_err(|e| e.to_string())?);
        }
        best[3] = best[3].min((common::thread_cpu_ns() - t0) / (ops / 4) as f64);
    }
    println!(
        "objects {objects}, {per_extent}-block extents, best of {rounds}: read op (getattr+stat+4K read) {:.0} ns, fiemap 64K {:.0} ns, stat {:.0} ns, 64K read {:.0} ns",
        best[0], best[1], best[2], best[3]
    );
    Ok(())
}
