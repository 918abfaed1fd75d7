// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)]
//! `Store::prefetch`: device reads started ahead of an op; a later `read` of the same ranges is served from memory
//! with the same bytes a blocking read returns, and never stale after a change to the object.

mod common;

use bytes::Bytes;
use ferrostore::rng::Rng;
use ferrostore::{
    CollectionId, Event, ObjectKey, Op, SimDevice, Store, StoreConfig, StoreError, Transaction,
};

fn fresh(seed: u64) -> Store<SimDevice> {
    let mut s = common::sim_store(seed, 32 << 20, 1 << 20, StoreConfig::default());
    let mut t = Transaction::new();
    t.push(Op::CreateCollection { cid: cid(), bits: 0 });
    s.commit(&t).unwrap();
    s
}

fn cid() -> CollectionId {
    CollectionId::new(Bytes::from_static(b"c"))
}

fn oid(i: u64) -> ObjectKey {
    ObjectKey::new(i as u32, Bytes::from(format!("obj{i:04}")))
}

fn pattern(seed: u64, len: usize) -> Bytes {
    let mut v = vec![0u8; len];
    Rng::new(seed).fill(&mut v);
    Bytes::from(v)
}

fn write(s: &mut Store<SimDevice>, o: u64, off: u64, data: Bytes) {
    let mut t = Transaction::new();
    t.push(Op::Write {
        cid: cid(),
        oid: oid(o),
        offset: off,
        data,
    });
    s.commit(&t).unwrap();
}

/// Poll until every token has its `Prefetched` event (each exactly once).
fn wait_all(s: &mut Store<SimDevice>, tokens: &[u64]) {
    let mut seen = std::collections::BTreeMap::new();
    let mut ev = Vec::new();
    for _ in 0..100_000 {
        if tokens.iter().all(|t| seen.contains_key(t)) {
            break;
        }
        ev.clear();
        s.wait(&mut ev).unwrap();
        for e in &ev {
            if let Event::Prefetched(t) = e {
                *seen.entry(*t).or_insert(0) += 1;
            }
        }
    }
    // a few more polls: no event comes twice
    for _ in 0..10 {
        ev.clear();
        s.poll(&mut ev).unwrap();
        for e in &ev {
            if let Event::Prefetched(t) = e {
                *seen.entry(*t).or_insert(0) += 1;
            }
        }
    }
    for t in tokens {
        assert_eq!(seen.get(t), Some(&1), "token {t}: events {seen:?}");
    }
}

/// Objects with data, holes, partial blocks; checkpointed so reads go to the device.
fn populate(s: &mut Store<SimDevice>, n: u64) -> Vec<u64> {
    let mut sizes = Vec::new();
    let mut rng = Rng::new(11);
    for o in 0..n {
        let len = 1 + rng.below(200_000) as usize;
        let off = rng.below(50_000);
        write(s, o, off, pattern(o, len));
        if rng.chance(30) {
            // a second extent after a hole
            write(s, o, off + len as u64 + 20_000, pattern(o + 1000, 5000));
        }
        sizes.push(s.stat(&cid(), &oid(o)).unwrap().size);
    }
    s.checkpoint().unwrap();
    sizes
}

#[test]
fn read_after_prefetch_is_the_blocking_read_without_device_io() {
    let mut s = fresh(1);
    let sizes = populate(&mut s, 24);
    let mut rng = Rng::new(5);
    for round in 0..300 {
        let o = rng.below(24);
        let size = sizes[o as usize];
        let off = rng.below(size + 5000);
        let len = if rng.chance(10) { 0 } else { 1 + rng.below(100_000) };
        let want = s.read(&cid(), &oid(o), off, len).unwrap();
        let before = s.stats.reads_prefetched;
        let Some(t) = s.prefetch(&cid(), &oid(o), &[(off, len)]).unwrap() else {
            // nothing to read from the device (beyond the end, or a hole only)
            let got = s.read(&cid(), &oid(o), off, len).unwrap();
            assert_eq!(got, want, "round {round}");
            continue;
        };
        wait_all(&mut s, &[t]);
        let dev_reads = s.device_stats().reads;
        let got = s.read(&cid(), &oid(o), off, len).unwrap();
        assert_eq!(got.len(), want.len(), "round {round} o {o} off {off} len {len}");
        assert!(
            got == want,
            "round {round} o {o} off {off} len {len}: bytes differ"
        );
        assert_eq!(
            s.device_stats().reads,
            dev_reads,
            "round {round}: served from memory"
        );
        assert_eq!(s.stats.reads_prefetched, before + 1);
        // a sub-range too (what sparse_read does per mapped extent), and again (not consumed by a read)
        if want.len() > 10 {
            let sub = s.read(&cid(), &oid(o), off + 3, want.len() as u64 - 7).unwrap();
            assert_eq!(&sub[..], &want[3..want.len() - 4]);
            assert_eq!(s.device_stats().reads, dev_reads);
        }
        s.release_prefetch(t);
        assert_eq!(s.prefetches_held(), 0);
        // after release: the device again
        let again = s.read(&cid(), &oid(o), off, len).unwrap();
        assert_eq!(again, want);
    }
    assert!(s.stats.reads_prefetched > 100, "{:?}", s.stats);
}

#[test]
fn sparse_read_and_take_prefetched() {
    let mut s = fresh(2);
    write(&mut s, 1, 0, pattern(1, 8192));
    write(&mut s, 1, 100_000, pattern(2, 10_000));
    s.checkpoint().unwrap();
    let want = s.sparse_read(&cid(), &oid(1), 0, 0).unwrap();
    let t = s.prefetch(&cid(), &oid(1), &[(0, 0)]).unwrap().unwrap();
    wait_all(&mut s, &[t]);
    assert_eq!(s.take_prefetched(), vec![(t, cid())]);
    assert!(s.take_prefetched().is_empty());
    let r0 = s.device_stats().reads;
    assert_eq!(s.sparse_read(&cid(), &oid(1), 0, 0).unwrap(), want);
    assert_eq!(s.device_stats().reads, r0);
    assert_eq!(s.stats.reads_prefetched, 2);
}

#[test]
fn no_prefetch_when_nothing_to_wait_for() {
    let mut s = fresh(3);
    assert!(matches!(
        s.prefetch(&cid(), &oid(9), &[(0, 4096)]),
        Err(StoreError::NotFound)
    ));
    // a hole only
    let mut t = Transaction::new();
    t.push(Op::Touch {
        cid: cid(),
        oid: oid(1),
    });
    t.push(Op::Truncate {
        cid: cid(),
        oid: oid(1),
        size: 1 << 20,
    });
    s.commit(&t).unwrap();
    assert_eq!(s.prefetch(&cid(), &oid(1), &[(4096, 8192)]).unwrap(), None);
    // beyond the end, empty
    assert_eq!(s.prefetch(&cid(), &oid(1), &[(2 << 20, 4096)]).unwrap(), None);
    assert_eq!(s.prefetch(&cid(), &oid(1), &[]).unwrap(), None);
    // data of a write still in flight (queued, not durable): in memory already
    let mut t = Transaction::new();
    t.push(Op::Write {
        cid: cid(),
        oid: oid(2),
        offset: 0,
        data: pattern(3, 4096),
    });
    s.queue_transaction(&t).unwrap();
    assert_eq!(s.prefetch(&cid(), &oid(2), &[(0, 4096)]).unwrap(), None);
    // more than MAX_PREFETCH_BYTES: refused (read synchronously)
    let mut t = Transaction::new();
    t.push(Op::Write {
        cid: cid(),
        oid: oid(3),
        offset: 0,
        data: pattern(4, 20 << 20),
    });
    s.commit(&t).unwrap();
    s.checkpoint().unwrap();
    assert_eq!(s.prefetch(&cid(), &oid(3), &[(0, 0)]).unwrap(), None);
    assert!(s.prefetch(&cid(), &oid(3), &[(0, 4 << 20)]).unwrap().is_some());
    assert_eq!(s.prefetches_held(), 1);
}

/// Every kind of change to the object after the prefetch: the next read returns the new state, with the
/// prefetch's reads completed before or after the change.
#[test]
fn invalidated_by_every_change_of_the_object() {
    type Change = fn(&mut Transaction);
    let changes: Vec<(&str, Change)> = vec![
        ("write", |t| {
            t.push(Op::Write {
                cid: cid(),
                oid: oid(1),
                offset: 4096,
                data: pattern(77, 4096),
            });
        }),
        ("zero", |t| {
            t.push(Op::Zero {
                cid: cid(),
                oid: oid(1),
                offset: 100,
                len: 9000,
            });
        }),
        ("truncate", |t| {
            t.push(Op::Truncate {
                cid: cid(),
                oid: oid(1),
                size: 5000,
            });
        }),
        ("truncate-extend", |t| {
            t.push(Op::Truncate {
                cid: cid(),
                oid: oid(1),
                size: 1 << 20,
            });
        }),
        ("clone-onto", |t| {
            t.push(Op::Clone {
                cid: cid(),
                src: oid(2),
                dst: oid(1),
            });
        }),
        ("clone-range-onto", |t| {
            t.push(Op::CloneRange {
                cid: cid(),
                src: oid(2),
                dst: oid(1),
                src_offset: 0,
                len: 8192,
                dst_offset: 8192,
            });
        }),
        ("remove-recreate", |t| {
            t.push(Op::Remove {
                cid: cid(),
                oid: oid(1),
            });
            t.push(Op::Write {
                cid: cid(),
                oid: oid(1),
                offset: 0,
                data: pattern(78, 12_000),
            });
        }),
    ];
    for (name, change) in changes {
        for complete_first in [false, true] {
            let mut s = fresh(4);
            write(&mut s, 1, 0, pattern(1, 64 << 10));
            write(&mut s, 2, 0, pattern(2, 64 << 10));
            s.checkpoint().unwrap();
            let t = s.prefetch(&cid(), &oid(1), &[(0, 0)]).unwrap().unwrap();
            if complete_first {
                wait_all(&mut s, &[t]);
            }
            let mut tx = Transaction::new();
            change(&mut tx);
            s.queue_transaction(&tx).unwrap();
            if !complete_first {
                wait_all(&mut s, &[t]);
            }
            let got = s.read(&cid(), &oid(1), 0, 0).unwrap();
            s.release_prefetch(t);
            let want = s.read(&cid(), &oid(1), 0, 0).unwrap();
            assert!(
                got == want,
                "{name} (completed first: {complete_first}): stale bytes served"
            );
            assert_eq!(s.stats.reads_prefetched, 0, "{name}");
            assert!(s.stats.prefetches_dropped >= 1, "{name}");
        }
    }
}

/// Attr/omap changes and a rename keep the prefetch (its data did not change).
#[test]
fn kept_by_changes_that_leave_the_data() {
    let mut s = fresh(5);
    write(&mut s, 1, 0, pattern(1, 16 << 10));
    s.checkpoint().unwrap();
    let want = s.read(&cid(), &oid(1), 0, 0).unwrap();
    let t = s.prefetch(&cid(), &oid(1), &[(0, 0)]).unwrap().unwrap();
    let mut tx = Transaction::new();
    tx.push(Op::SetAttrs {
        cid: cid(),
        oid: oid(1),
        attrs: vec![(Bytes::from_static(b"_"), pattern(9, 300))],
    });
    tx.push(Op::OmapSetKeys {
        cid: cid(),
        oid: oid(1),
        kvs: vec![(Bytes::from_static(b"k"), Bytes::from_static(b"v"))],
    });
    s.commit(&tx).unwrap();
    wait_all(&mut s, &[t]);
    let r0 = s.device_stats().reads;
    assert_eq!(s.read(&cid(), &oid(1), 0, 0).unwrap(), want);
    assert_eq!(s.device_stats().reads, r0);
    // a write to another object does not touch it either
    write(&mut s, 2, 0, pattern(2, 4096));
    let r0 = s.device_stats().reads;
    assert_eq!(
        s.read(&cid(), &oid(1), 4096, 4096).unwrap(),
        want.slice(4096..8192)
    );
    assert_eq!(s.device_stats().reads, r0);
}

/// Many prefetches in flight at once: the device sees them together, every event comes once, every read is
/// served from memory with the right bytes, and memory returns to zero after release.
#[test]
fn many_concurrent_prefetches() {
    let mut s = fresh(6);
    let sizes = populate(&mut s, 40);
    let mut rng = Rng::new(8);
    let mut want = Vec::new();
    for i in 0..300u64 {
        let o = i % 40;
        let off = rng.below(sizes[o as usize]);
        let len = 1 + rng.below(70_000);
        want.push((o, off, len, s.read(&cid(), &oid(o), off, len).unwrap()));
    }
    let r0 = s.device_stats().reads;
    let mut tokens = Vec::new();
    let mut owner = std::collections::HashMap::new();
    for (i, (o, off, len, _)) in want.iter().enumerate() {
        if let Some(t) = s.prefetch(&cid(), &oid(*o), &[(*off, *len)]).unwrap() {
            tokens.push(t);
            owner.insert(t, i);
        }
    }
    assert!(tokens.len() > 250, "{}", tokens.len());
    assert!(s.has_background_work(), "reads in flight keep the caller polling");
    let submitted = s.device_stats().reads - r0;
    assert!(
        submitted >= tokens.len() as u64,
        "all submitted before any completion"
    );
    wait_all(&mut s, &tokens);
    assert!(!s.has_background_work());
    let r1 = s.device_stats().reads;
    for t in &tokens {
        let (o, off, len, w) = &want[owner[t]];
        let got = s.read(&cid(), &oid(*o), *off, *len).unwrap();
        assert!(got == *w, "token {t}: bytes differ");
    }
    assert_eq!(s.device_stats().reads, r1, "all served from memory");
    assert_eq!(s.stats.reads_prefetched, tokens.len() as u64);
    assert!(s.memory_bytes() > 1 << 20);
    let held = s.memory_bytes();
    for t in &tokens {
        s.release_prefetch(*t);
    }
    assert_eq!(s.prefetches_held(), 0);
    assert!(s.memory_bytes() < held - (1 << 20));
}

/// A caller that never releases its tokens cannot grow the store's memory without bound.
#[test]
fn unreleased_prefetches_are_bounded() {
    let mut s = fresh(7);
    write(&mut s, 1, 0, pattern(1, 4 << 20));
    s.checkpoint().unwrap();
    let mut ev = Vec::new();
    for i in 0..2000u64 {
        let _ = s.prefetch(&cid(), &oid(1), &[((i % 64) * 65536, 65536)]).unwrap();
        if i % 16 == 0 {
            ev.clear();
            s.wait(&mut ev).unwrap();
        }
    }
    while s.has_background_work() {
        ev.clear();
        s.wait(&mut ev).unwrap();
    }
    assert!(s.prefetches_held() <= 1024, "{}", s.prefetches_held());
    assert!(s.memory_bytes() < 80 << 20, "{}", s.memory_bytes());
    assert!(s.stats.prefetches_dropped > 0);
    // still correct
    let want = s.read(&cid(), &oid(1), 65536 * 3, 65536).unwrap();
    assert_eq!(want, pattern(1, 4 << 20).slice(65536 * 3..65536 * 4));
}
