// SPDX-License-Identifier: LGPL-3.0-or-later
//! CPU cost of the engine's side of an OSD write, shaped like the compare benchmark's 4K random write test: 4 MiB
//! objects prefilled with 64 KiB extents (the bench's prefill), spread over 16 PG collections; each transaction
//! writes one 4K block at a random offset, sets the object's `_` and `snapset` attrs and, on the PG's meta object,
//! adds one pg log entry, rewrites `_fastinfo` and trims the oldest log entry (as the OSD's op engine does). 16
//! transactions are queued per poll (QD16's group commit). In-memory, always-durable simulated device: what is
//! measured is the engine's CPU (tree updates, log records, checkpoints), not device time. Prints per round the
//! CPU per transaction (thread CPU time) and checkpoints / tree-node bytes / log bytes per transaction.
//!
//! `cargo run --release -p ferrostore --example write_cpu -- [objects] [rounds] [txns per round] [write KiB]`
//! (write KiB: 4 by default; 64 for the 64K random write test, at 64 KiB-aligned offsets). `WRITE_CPU_FRAGMENT=1`
//! first leaves every object as one-block extents (the 64K test after the 4K test).

mod common;

use bytes::Bytes;
use ferrostore::rng::Rng;
use ferrostore::{CollectionId, ObjectKey, Op, Transaction};

const PGS: u64 = 16;
const BLOCKS: u64 = 1024;
const LOG_KEEP: u64 = 1000;

fn pg_coll(pg: u64) -> CollectionId {
    CollectionId::new(Bytes::from(format!("2.{pg:x}_head")))
}

/// Object names shaped like the OSD's ghobject encoding (a fixed header, then the RADOS name).
fn obj(i: u64) -> ObjectKey {
    let name = format!("\u{1}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{1}benchmark_data_obj.{i:08}");
    ObjectKey::new(crc32c::crc32c(name.as_bytes()), Bytes::from(name))
}

fn pgmeta() -> ObjectKey {
    ObjectKey::new(0, Bytes::from_static(b"\0\0\0\0\0\0\0\0pgmeta"))
}

fn log_key(v: u64) -> Bytes {
    Bytes::from(format!("0000000007.{v:020}"))
}

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let objects: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(64);
    let rounds: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let per_round: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let write_blocks: u64 = args
        .next()
        .and_then(|a| a.parse::<u64>().ok())
        .map_or(1, |k| (k / 4).clamp(1, 16));
    let mut s = common::sim_store(((objects * BLOCKS * 4096) as usize) * 2 + (256 << 20))?;
    let e = |e: ferrostore::StoreError| e.to_string();
    for pg in 0..PGS {
        let mut t = Transaction::new();
        t.push(Op::CreateCollection {
            cid: pg_coll(pg),
            bits: 4,
        });
        t.push(Op::Touch {
            cid: pg_coll(pg),
            oid: pgmeta(),
        });
        s.commit(&t).map_err(e)?;
    }
    let chunk = Bytes::from(vec![0x5au8; 65536]);
    for i in 0..objects {
        let cid = pg_coll(i % PGS);
        for c in (0..BLOCKS / 16).collect::<Vec<_>>().chunks(16) {
            let mut t = Transaction::new();
            for &c in c {
                t.push(Op::Write {
                    cid: cid.clone(),
                    oid: obj(i),
                    offset: c * 65536,
                    data: chunk.clone(),
                });
            }
            s.commit(&t).map_err(e)?;
        }
    }
    // WRITE_CPU_FRAGMENT=1: rewrite every block of every object alone first, so each object is 1,024 one-block
    // extents (what the compare benchmark's 4K random write test leaves for the 64K test that follows it).
    if std::env::var("WRITE_CPU_FRAGMENT").is_ok_and(|v| v == "1") {
        let block = Bytes::from(vec![0x66u8; 4096]);
        for i in 0..objects {
            let cid = pg_coll(i % PGS);
            for b in (0..BLOCKS).collect::<Vec<_>>().chunks(16) {
                let mut t = Transaction::new();
                for &b in b {
                    t.push(Op::Write {
                        cid: cid.clone(),
                        oid: obj(i),
                        offset: b * 4096,
                        data: block.clone(),
                    });
                }
                s.commit(&t).map_err(e)?;
            }
        }
    }
    // The pg logs: LOG_KEEP entries per PG before the timed writes.
    let entry = Bytes::from(vec![0x33u8; 190]);
    let mut next_v = vec![1u64; PGS as usize];
    for (pg, v) in next_v.iter_mut().enumerate() {
        let kvs: Vec<_> = (0..LOG_KEEP).map(|k| (log_key(k + 1), entry.clone())).collect();
        for kvs in kvs.chunks(100) {
            let mut t = Transaction::new();
            t.push(Op::OmapSetKeys {
                cid: pg_coll(pg as u64),
                oid: pgmeta(),
                kvs: kvs.to_vec(),
            });
            s.commit(&t).map_err(e)?;
        }
        *v = LOG_KEEP + 1;
    }
    s.checkpoint().map_err(e)?;
    let data = Bytes::from(vec![0x77u8; 4096 * write_blocks as usize]);
    let oi = Bytes::from(vec![0x11u8; 270]);
    let snapset = Bytes::from(vec![0x22u8; 35]);
    let fastinfo = Bytes::from(vec![0x44u8; 186]);
    let mut rng = Rng::new(5);
    let mut events = Vec::new();
    let mut best = f64::MAX;
    for round in 0..rounds {
        let st0 = s.stats;
        let t0 = common::thread_cpu_ns();
        for n in 0..per_round {
            let i = rng.below(objects);
            let pg = i % PGS;
            let cid = pg_coll(pg);
            let o = obj(i);
            let v = &mut next_v[pg as usize];
            let mut t = Transaction::new();
            t.push(Op::Write {
                cid: cid.clone(),
                oid: o.clone(),
                offset: rng.below(BLOCKS / write_blocks) * write_blocks * 4096,
                data: data.clone(),
            });
            t.push(Op::SetAttrs {
                cid: cid.clone(),
                oid: o,
                attrs: vec![
                    (Bytes::from_static(b"_"), oi.clone()),
                    (Bytes::from_static(b"snapset"), snapset.clone()),
                ],
            });
            t.push(Op::OmapSetKeys {
                cid: cid.clone(),
                oid: pgmeta(),
                kvs: vec![
                    (log_key(*v), entry.clone()),
                    (Bytes::from_static(b"_fastinfo"), fastinfo.clone()),
                ],
            });
            t.push(Op::OmapRmKeys {
                cid,
                oid: pgmeta(),
                keys: vec![log_key(*v - LOG_KEEP)],
            });
            *v += 1;
            s.queue_transaction(&t).map_err(e)?;
            if n % 16 == 15 {
                s.poll(&mut events).map_err(e)?;
                events.clear();
            }
        }
        while s.unacked() > 0 || s.has_background_work() {
            s.wait(&mut events).map_err(e)?;
            events.clear();
        }
        let ns = (common::thread_cpu_ns() - t0) / per_round as f64;
        best = best.min(ns);
        let st = s.stats;
        let per = |a: u64, b: u64| (a - b) as f64 / per_round as f64;
        println!(
            "round {round}: {ns:.0} ns/txn; per txn: checkpoints {:.5}, node bytes {:.0}, log bytes {:.0}, log records {:.3}",
            per(st.checkpoints, st0.checkpoints),
            per(st.node_bytes, st0.node_bytes),
            per(st.log_bytes, st0.log_bytes),
            per(st.log_records, st0.log_records),
        );
    }
    println!(
        "objects {objects}, best of {rounds}: {best:.0} ns per {}K write transaction",
        write_blocks * 4
    );
    Ok(())
}
