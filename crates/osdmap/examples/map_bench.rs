// SPDX-License-Identifier: LGPL-3.0-or-later
//! Rough speed of decode, encode and placement on a real map:
//! `cargo run --release -p osdmap --example map_bench -- OSDMAP_FILE`.
use std::time::Instant;

use denc::{Decode, Encode};
use osdmap::{OsdMap, PgId, features};

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        return eprintln!("usage: bench OSDMAP_FILE");
    };
    let Ok(bytes) = std::fs::read(&path) else {
        return eprintln!("cannot read {path}");
    };
    let bytes = bytes::Bytes::from(bytes);
    let n = 2000;
    let t = Instant::now();
    let mut m = None;
    for _ in 0..n {
        m = OsdMap::decode_all(bytes.clone()).ok();
    }
    let Some(m) = m else {
        return eprintln!("{path}: does not decode");
    };
    println!(
        "decode {} bytes: {:.1} us",
        bytes.len(),
        t.elapsed().as_secs_f64() * 1e6 / n as f64
    );
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(m.to_bytes(features::PACIFIC | features::RESERVED));
    }
    println!(
        "encode (with crc): {:.1} us",
        t.elapsed().as_secs_f64() * 1e6 / n as f64
    );
    let pgs: Vec<PgId> = m
        .pools
        .iter()
        .flat_map(|(id, p)| (0..p.pg_num).map(move |s| PgId::new(*id as u64, s)))
        .collect();
    let rounds = (200_000 / pgs.len().max(1)).max(1);
    let t = Instant::now();
    for _ in 0..rounds {
        for pg in &pgs {
            std::hint::black_box(m.pg_to_up_acting_osds(*pg).ok());
        }
    }
    let total = rounds * pgs.len();
    let s = t.elapsed().as_secs_f64();
    println!(
        "pg_to_up_acting_osds: {total} PGs over {} pools in {:.3} s = {:.0} PGs/s ({:.2} us each)",
        m.pools.len(),
        s,
        total as f64 / s,
        s * 1e6 / total as f64
    );
}
