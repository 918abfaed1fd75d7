// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)]
//! The extent cache (src/extcache.rs) never changes what a read returns: random writes, zeroes, truncates,
//! clones, renames and removes of objects larger than several cache chunks (with extents straddling the 1 MiB
//! chunk boundaries), interleaved with reads through the blocking, queued and prefetched paths, against a byte
//! model — with the cache off, tiny (constant eviction) and large, across a remount.

mod common;

use bytes::Bytes;
use common::sim_store;
use ferrostore::rng::Rng;
use ferrostore::{CollectionId, Event, ObjectKey, Op, Store, StoreConfig, Transaction};
use std::collections::BTreeMap;

const MIB: u64 = 1 << 20;
const CHUNK: u64 = MIB;

fn oid(i: u64) -> ObjectKey {
    ObjectKey::new(i as u32, Bytes::from(format!("obj{i}")))
}

/// An offset near a chunk boundary half of the time (so extents straddle them), anywhere otherwise.
fn offset(rng: &mut Rng, max: u64) -> u64 {
    if rng.chance(50) {
        let boundary = CHUNK * (1 + rng.below(max / CHUNK));
        boundary
            .saturating_sub(64 << 10)
            .saturating_add(rng.below(128 << 10))
            .min(max - 1)
    } else {
        rng.below(max)
    }
}

fn read_via<D: ferrostore::Device>(
    s: &mut Store<D>,
    how: u64,
    cid: &CollectionId,
    o: &ObjectKey,
    off: u64,
    len: u64,
) -> Vec<u8> {
    match how {
        0 => s.read(cid, o, off, len).unwrap().to_vec(),
        1 => {
            let id = s.queue_read(cid, o, off, len).unwrap();
            loop {
                let mut ev = Vec::new();
                s.wait(&mut ev).unwrap();
                for e in ev {
                    if let Event::ReadDone(r, d) = e
                        && r == id
                    {
                        return d.unwrap().to_vec();
                    }
                }
            }
        }
        _ => {
            if let Some(t) = s.prefetch(cid, o, &[(off, len)]).unwrap() {
                while !s.take_prefetched().iter().any(|(x, _)| *x == t) {
                    let mut ev = Vec::new();
                    s.wait(&mut ev).unwrap();
                }
                let d = s.read(cid, o, off, len).unwrap().to_vec();
                s.release_prefetch(t);
                d
            } else {
                s.read(cid, o, off, len).unwrap().to_vec()
            }
        }
    }
}

fn run(seed: u64, cache: usize) {
    let cfg = StoreConfig {
        extent_cache_entries: cache,
        node_cache_nodes: 32,
        ..Default::default()
    };
    let mut s = sim_store(seed, 64 << 20, 256 << 10, cfg.clone());
    let cid = CollectionId::new(&b"c"[..]);
    let mut t = Transaction::new();
    t.push(Op::CreateCollection {
        cid: cid.clone(),
        bits: 0,
    });
    s.commit(&t).unwrap();
    let max = 3 * MIB + 5000;
    let mut model: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    let mut rng = Rng::new(seed);
    for step in 0..400 {
        let i = rng.below(3);
        let o = oid(i);
        let mut t = Transaction::new();
        match rng.below(12) {
            0..=5 => {
                let off = offset(&mut rng, max);
                let big = rng.chance(30);
                let len = 1 + rng.below(if big { 200 << 10 } else { 20 << 10 });
                let byte = rng.below(255) as u8 + 1;
                let data = vec![byte; len as usize];
                t.push(Op::Write {
                    cid: cid.clone(),
                    oid: o.clone(),
                    offset: off,
                    data: Bytes::from(data.clone()),
                });
                let m = model.entry(i).or_default();
                if m.len() < (off + len) as usize {
                    m.resize((off + len) as usize, 0);
                }
                m[off as usize..(off + len) as usize].copy_from_slice(&data);
            }
            6 => {
                let Some(m) = model.get_mut(&i) else { continue };
                let off = offset(&mut rng, max);
                let len = 1 + rng.below(300 << 10);
                t.push(Op::Zero {
                    cid: cid.clone(),
                    oid: o.clone(),
                    offset: off,
                    len,
                });
                let end = ((off + len) as usize).max(m.len());
                m.resize(end, 0);
                m[off as usize..(off + len) as usize].fill(0);
            }
            7 => {
                let Some(m) = model.get_mut(&i) else { continue };
                let size = offset(&mut rng, max);
                t.push(Op::Truncate {
                    cid: cid.clone(),
                    oid: o.clone(),
                    size,
                });
                m.resize(size as usize, 0);
            }
            8 => {
                let j = (i + 1) % 3;
                let Some(m) = model.get(&i).cloned() else { continue };
                t.push(Op::Clone {
                    cid: cid.clone(),
                    src: o.clone(),
                    dst: oid(j),
                });
                model.insert(j, m);
            }
            9 => {
                if model.remove(&i).is_none() {
                    continue;
                }
                t.push(Op::Remove {
                    cid: cid.clone(),
                    oid: o.clone(),
                });
            }
            10 => {
                // rename to a fresh name and back: the onode (and its extents) keep their id
                if !model.contains_key(&i) {
                    continue;
                }
                let tmp = ObjectKey::new(o.hash, Bytes::from(format!("tmp{i}")));
                t.push(Op::Rename {
                    cid: cid.clone(),
                    oid: o.clone(),
                    new_cid: cid.clone(),
                    new_oid: tmp.clone(),
                });
                t.push(Op::Rename {
                    cid: cid.clone(),
                    oid: tmp,
                    new_cid: cid.clone(),
                    new_oid: o.clone(),
                });
            }
            _ => {}
        }
        if !t.ops.is_empty() {
            if rng.chance(50) {
                s.commit(&t).unwrap();
            } else {
                s.queue_transaction(&t).unwrap();
            }
        }
        // a few reads of random ranges of random objects, through every read path
        for _ in 0..3 {
            let i = rng.below(3);
            let Some(m) = model.get(&i) else { continue };
            let off = offset(&mut rng, max);
            let big = rng.chance(20);
            let len = rng.below(if big { 2 * MIB } else { 100 << 10 });
            let end = if len == 0 {
                m.len()
            } else {
                (off as usize + len as usize).min(m.len())
            };
            let want: &[u8] = if (off as usize) < end {
                &m[off as usize..end]
            } else {
                &[]
            };
            let got = read_via(&mut s, rng.below(3), &cid, &oid(i), off, len);
            assert!(
                got == want,
                "seed {seed} cache {cache} step {step}: read of obj{i} [{off}, +{len}) differs (got {} bytes, want {})",
                got.len(),
                want.len()
            );
        }
        if step == 200 {
            let dev = s.umount().unwrap();
            s = Store::mount(dev, 0, cfg.clone()).unwrap();
        }
    }
    let rep = s.fsck().unwrap();
    assert!(rep.errors.is_empty(), "seed {seed}: {:?}", rep.errors);
    if cache > 0 {
        assert!(s.stats.extent_cache_hits > 0, "the cache served nothing");
    } else {
        assert_eq!(s.stats.extent_cache_hits, 0);
    }
}

#[test]
fn reads_match_the_model_with_any_cache_size() {
    for seed in 0..3 {
        for cache in [0, 24, 16384] {
            run(seed, cache);
        }
    }
}
