// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)]
//! PG lifecycle at the store level: splitting a collection with many objects (what the pg crate does on a
//! pg_num increase) and removing a PG after its pool is deleted (objects in batches, then the collection), with
//! the space coming back.

use bytes::Bytes;
use ferrostore::rng::Rng;
use ferrostore::{
    CollectionId, MkfsOptions, ObjectKey, Op, SimConfig, SimDevice, Store, StoreConfig, Transaction, mkfs,
};
use std::collections::BTreeMap;

fn store(size: usize) -> Store<SimDevice> {
    let dev = mkfs(
        SimDevice::new(
            size,
            SimConfig {
                seed: 9,
                reorder: true,
                max_completions_per_poll: 8,
                durable_writes: false,
            },
        ),
        &MkfsOptions {
            shards: 1,
            log_bytes: 4 << 20,
            uuid: 77,
            ..Default::default()
        },
    )
    .unwrap();
    Store::mount(dev, 0, StoreConfig::default()).unwrap()
}

fn cid(s: &str) -> CollectionId {
    CollectionId::new(Bytes::copy_from_slice(s.as_bytes()))
}

fn obj(i: u32, hash: u32) -> ObjectKey {
    ObjectKey::new(hash, Bytes::from(format!("obj{i:06}")))
}

fn data(i: u32) -> Bytes {
    Bytes::from(vec![(i % 253) as u8 + 1; 4096 + (i as usize % 3) * 1000])
}

/// Write `n` objects (data, a small and a spilled attr, an omap key) in transactions of 32; returns name -> hash.
fn fill(s: &mut Store<SimDevice>, c: &CollectionId, n: u32, rng: &mut Rng) -> BTreeMap<u32, u32> {
    let mut objs = BTreeMap::new();
    let mut t = Transaction::new();
    for i in 0..n {
        let h = rng.next_u64() as u32;
        objs.insert(i, h);
        let o = obj(i, h);
        t.push(Op::Write {
            cid: c.clone(),
            oid: o.clone(),
            offset: 0,
            data: data(i),
        });
        t.push(Op::SetAttrs {
            cid: c.clone(),
            oid: o.clone(),
            attrs: vec![
                (Bytes::from("_"), Bytes::from(format!("oi{i}"))),
                (Bytes::from("big"), Bytes::from(vec![i as u8; 5000])),
            ],
        });
        t.push(Op::OmapSetKeys {
            cid: c.clone(),
            oid: o,
            kvs: vec![(Bytes::from("k"), Bytes::from(format!("v{i}")))],
        });
        if t.ops.len() >= 96 {
            s.commit(&std::mem::take(&mut t)).unwrap();
        }
    }
    if !t.is_empty() {
        s.commit(&t).unwrap();
    }
    objs
}

fn check_obj(s: &mut Store<SimDevice>, c: &CollectionId, i: u32, h: u32) {
    let o = obj(i, h);
    assert_eq!(s.read(c, &o, 0, 0).unwrap(), data(i), "object {i}");
    assert_eq!(s.getattr(c, &o, b"_").unwrap(), Bytes::from(format!("oi{i}")));
    assert_eq!(s.getattr(c, &o, b"big").unwrap().len(), 5000);
    let v = s.omap_get_values(c, &o, &[Bytes::from("k")]).unwrap();
    assert_eq!(v, vec![(Bytes::from("k"), Bytes::from(format!("v{i}")))]);
}

fn list_all(s: &mut Store<SimDevice>, c: &CollectionId) -> Vec<ObjectKey> {
    let mut out = Vec::new();
    let mut from = Vec::new();
    loop {
        let batch = s.list_objects(c, &from, None, 100).unwrap();
        let Some(last) = batch.last() else { break };
        from = last.name.to_vec();
        from.push(0);
        out.extend(batch);
    }
    out
}

#[test]
fn split_with_many_objects_moves_exactly_the_matching_ones() {
    let mut s = store(96 << 20);
    let mut rng = Rng::new(4);
    let (parent, c1, c3) = (cid("1.0_head"), cid("1.1_head"), cid("1.3_head"));
    let mut t = Transaction::new();
    t.push(Op::CreateCollection {
        cid: parent.clone(),
        bits: 0,
    });
    s.commit(&t).unwrap();
    let objs = fill(&mut s, &parent, 3000, &mut rng);

    // pg_num 1 -> 4 as the pg crate does it: both children in one transaction.
    let mut t = Transaction::new();
    for (c, rem) in [(&c1, 1u32), (&c3, 3)] {
        t.push(Op::CreateCollection {
            cid: c.clone(),
            bits: 2,
        });
        t.push(Op::SplitCollection {
            src: parent.clone(),
            dst: c.clone(),
            bits: 2,
            rem,
        });
    }
    // pg 1.2 would be split out the same way; here it stays in the parent to check what remains.
    s.commit(&t).unwrap();
    assert_eq!(s.collection_bits(&parent).unwrap(), 2);
    assert_eq!(s.collection_bits(&c3).unwrap(), 2);

    let dump = |s: &mut Store<SimDevice>, c: &CollectionId| -> Vec<u32> {
        list_all(s, c)
            .iter()
            .map(|o| String::from_utf8_lossy(&o.name[3..]).parse().unwrap())
            .collect()
    };
    for _ in 0..2 {
        let (p, a, b) = (dump(&mut s, &parent), dump(&mut s, &c1), dump(&mut s, &c3));
        assert_eq!(p.len() + a.len() + b.len(), objs.len());
        for (list, want) in [(&a, Some(1u32)), (&b, Some(3))] {
            for i in list {
                assert_eq!(Some(objs[i] & 3), want, "object {i} in the wrong child");
            }
        }
        for i in &p {
            assert!(
                objs[i] & 3 == 0 || objs[i] & 3 == 2,
                "object {i} should have moved"
            );
        }
        let want_a = objs.values().filter(|h| *h & 3 == 1).count();
        assert_eq!(a.len(), want_a);
        // Listing order stays the name order, with the hash reported.
        assert!(list_all(&mut s, &c1).windows(2).all(|w| w[0].name < w[1].name));
        for (list, c) in [(&p, &parent), (&a, &c1), (&b, &c3)] {
            for i in list.iter().step_by(37) {
                check_obj(&mut s, c, *i, objs[i]);
                assert_eq!(s.stat(c, &obj(*i, objs[i])).unwrap().hash, objs[i]);
            }
        }
        let rep = s.fsck().unwrap();
        assert!(rep.errors.is_empty(), "{:?}", rep.errors);
        let dev = s.umount().unwrap();
        s = Store::mount(dev, 0, StoreConfig::default()).unwrap();
    }

    // A split onto a collection that already holds one of the names is refused and changes nothing.
    let (i, h) = objs
        .iter()
        .find(|(_, h)| *h & 3 == 0)
        .map(|(i, h)| (*i, *h))
        .unwrap();
    let mut t = Transaction::new();
    t.push(Op::Touch {
        cid: c1.clone(),
        oid: obj(i, h),
    });
    t.push(Op::SplitCollection {
        src: parent.clone(),
        dst: c1.clone(),
        bits: 2,
        rem: 0,
    });
    assert_eq!(s.commit(&t).unwrap_err().errno(), libc::EEXIST);
    check_obj(&mut s, &parent, i, h);
}

#[test]
fn removing_a_pg_in_batches_returns_its_space() {
    let mut s = store(64 << 20);
    let mut rng = Rng::new(5);
    let (keep, gone) = (cid("1.0_head"), cid("2.0_head"));
    let mut t = Transaction::new();
    t.push(Op::CreateCollection {
        cid: keep.clone(),
        bits: 0,
    });
    s.commit(&t).unwrap();
    let kept = fill(&mut s, &keep, 50, &mut rng);
    s.checkpoint().unwrap();
    let free0 = s.free_bytes();
    let mut t = Transaction::new();
    t.push(Op::CreateCollection {
        cid: gone.clone(),
        bits: 0,
    });
    s.commit(&t).unwrap();
    fill(&mut s, &gone, 2000, &mut rng);
    s.checkpoint().unwrap();
    let used = free0 - s.free_bytes();
    assert!(used > 2000 * 3 * 4096, "only {used} bytes used");

    // Not empty: refused.
    let mut t = Transaction::new();
    t.push(Op::RemoveCollection { cid: gone.clone() });
    assert_eq!(s.commit(&t).unwrap_err().errno(), libc::ENOTEMPTY);

    // The OSD removes a deleted pool's PG in bounded transactions (osd_target_transaction_size), queued back to
    // back without waiting for each, then the collection.
    loop {
        let batch = s.list_objects(&gone, b"", None, 30).unwrap();
        if batch.is_empty() {
            break;
        }
        let mut t = Transaction::new();
        for o in batch {
            t.push(Op::Remove {
                cid: gone.clone(),
                oid: o,
            });
        }
        s.queue_transaction(&t).unwrap();
        let mut ev = Vec::new();
        s.poll(&mut ev).unwrap();
    }
    let mut t = Transaction::new();
    t.push(Op::RemoveCollection { cid: gone.clone() });
    s.commit(&t).unwrap();
    assert!(!s.collection_exists(&gone).unwrap());
    s.checkpoint().unwrap();
    // Everything the PG used is free again, up to a few tree nodes.
    let back = s.free_bytes();
    assert!(
        back + 64 * 4096 >= free0,
        "free {back} vs {free0} before the PG was filled"
    );
    let rep = s.fsck().unwrap();
    assert!(rep.errors.is_empty(), "{:?}", rep.errors);
    for (i, h) in kept.iter().step_by(7) {
        check_obj(&mut s, &keep, *i, *h);
    }
}
