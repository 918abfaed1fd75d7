// SPDX-License-Identifier: LGPL-3.0-or-later
//! CPU cost of the engine's omap reads, shaped like the compare benchmark's OMAP tests: 16 objects with 1024 keys of
//! 100 bytes each; "get" reads one key by name, "list" reads the 16 keys after a random key (the OSD asks for one
//! more than it returns, to know whether the listing is truncated). In-memory simulated device, tree checkpointed
//! (the nodes come from the node cache, as on a warm OSD). Prints the best of `rounds`, robust on a shared machine.
//!
//! `cargo run --release -p ferrostore --example omap_cpu -- [rounds]`

mod common;

use bytes::Bytes;
use common::coll;
use ferrostore::rng::Rng;
use ferrostore::{ObjectKey, Op, Transaction};
use std::time::Instant;

const OBJECTS: u64 = 16;
const KEYS: u64 = 1024;

fn obj(i: u64) -> ObjectKey {
    let name = format!("\u{1}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{1}omap.{i}");
    ObjectKey::new(crc32c::crc32c(name.as_bytes()), Bytes::from(name))
}

fn key(i: u64) -> Bytes {
    Bytes::from(format!("key.{i:08}"))
}

fn main() -> Result<(), String> {
    let rounds: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(5);
    let mut s = common::sim_store(256 << 20)?;
    let value = Bytes::from(vec![0x61u8; 100]);
    for o in 0..OBJECTS {
        let mut t = Transaction::new();
        t.push(Op::Touch {
            cid: coll(),
            oid: obj(o),
        });
        t.push(Op::SetAttrs {
            cid: coll(),
            oid: obj(o),
            attrs: vec![(Bytes::from_static(b"_"), Bytes::from(vec![1u8; 250]))],
        });
        s.commit(&t).map_err(|e| e.to_string())?;
        for chunk in (0..KEYS).collect::<Vec<_>>().chunks(64) {
            let mut t = Transaction::new();
            t.push(Op::OmapSetKeys {
                cid: coll(),
                oid: obj(o),
                kvs: chunk.iter().map(|&k| (key(k), value.clone())).collect(),
            });
            s.commit(&t).map_err(|e| e.to_string())?;
        }
    }
    s.checkpoint().map_err(|e| e.to_string())?;
    let ops = 50_000u64;
    let names = ["get 1 key", "list 16 (batch 256)", "list 16 (batch 17)"];
    let mut best = [f64::MAX; 3];
    for _ in 0..rounds {
        let mut rng = Rng::new(9);
        for (m, b) in best.iter_mut().enumerate() {
            let t0 = Instant::now();
            for _ in 0..ops {
                let o = obj(rng.below(OBJECTS));
                let k = key(rng.below(KEYS - 16));
                match m {
                    0 => {
                        let v = s.omap_get_values(&coll(), &o, &[k]).map_err(|e| e.to_string())?;
                        assert_eq!(v.len(), 1);
                    }
                    _ => {
                        let mut start = k.to_vec();
                        start.push(0);
                        let limit = if m == 1 { 256 } else { 17 };
                        let v = s
                            .omap_iterate(&coll(), &o, &start, limit)
                            .map_err(|e| e.to_string())?;
                        assert!(v.len() >= 16);
                    }
                }
            }
            *b = b.min(t0.elapsed().as_nanos() as f64 / ops as f64);
        }
    }
    let parts: Vec<String> = names
        .iter()
        .zip(best)
        .map(|(n, b)| format!("{n} {b:.0} ns"))
        .collect();
    println!("omap, best of {rounds}: {}", parts.join(", "));
    Ok(())
}
