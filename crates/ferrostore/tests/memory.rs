// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)]
//! The shard's metadata memory stays within `StoreConfig::cache_bytes` however much is written, and eviction
//! never changes what is read back. (How RSS behaves over GiB of writes is a benchmark:
//! `ferrostore-bench --mem N`, see docs/benchmarks.md.)

use bytes::Bytes;
use ferrostore::{
    CollectionId, Event, MkfsOptions, ObjectKey, Op, SimConfig, SimDevice, Store, StoreConfig, Transaction,
    mkfs,
};

fn obj(i: u64) -> ObjectKey {
    let name = format!("rbd_data.{i:016x}");
    ObjectKey::new(crc32c::crc32c(name.as_bytes()), Bytes::from(name))
}

fn block(i: u64) -> Bytes {
    Bytes::from(vec![(i % 251) as u8; 4096])
}

#[test]
fn metadata_memory_is_bounded_by_the_cache_budget() {
    let budget = 512 << 10;
    let dev = mkfs(
        SimDevice::new(
            96 << 20,
            SimConfig {
                seed: 5,
                reorder: true,
                max_completions_per_poll: 8,
                durable_writes: true,
            },
        ),
        &MkfsOptions::default(),
    )
    .unwrap();
    let cfg = StoreConfig {
        cache_bytes: budget,
        ..Default::default()
    };
    let mut s = Store::mount(dev, 0, cfg).unwrap();
    let c = CollectionId::new(Bytes::from_static(b"pg"));
    let mut t = Transaction::new();
    t.push(Op::CreateCollection {
        cid: c.clone(),
        bits: 0,
    });
    s.commit(&t).unwrap();
    let n = 12_000u64;
    let mut peak = 0usize;
    let mut ev = Vec::new();
    for i in 0..n {
        let mut t = Transaction::new();
        t.push(Op::Write {
            cid: c.clone(),
            oid: obj(i),
            offset: 0,
            data: block(i),
        });
        t.push(Op::OmapSetKeys {
            cid: c.clone(),
            oid: obj(i),
            kvs: vec![(Bytes::from(format!("k{i}")), Bytes::from(vec![7u8; 64]))],
        });
        s.queue_transaction(&t).unwrap();
        if i % 16 == 15 {
            while s.unacked() > 0 {
                s.wait(&mut ev).unwrap();
            }
            ev.clear();
        }
        if i % 500 == 0 {
            peak = peak.max(s.memory_bytes());
        }
    }
    while s.unacked() > 0 {
        s.wait(&mut ev).unwrap();
    }
    // The metadata of 12,000 objects is several MiB of nodes: far more than the budget, so eviction happened.
    let (cached, dirty) = s.tree_stats();
    eprintln!(
        "peak engine memory {peak} B (budget {budget}), cached {cached} dirty {dirty}, {} checkpoints",
        s.stats.checkpoints
    );
    assert!(s.stats.checkpoints > 2, "dirty budget never forced a checkpoint");
    assert!(
        // Slack for what is outside the node cache: in-flight data, log, the allocator's free-run indexes.
        peak <= budget + (288 << 10),
        "engine memory {peak} exceeds the budget {budget} (cached {cached}, dirty {dirty})"
    );
    // Everything reads back (clean nodes were evicted and are re-read from the media).
    for i in (0..n).step_by(97) {
        assert_eq!(s.read(&c, &obj(i), 0, 0).unwrap(), block(i));
        let got = s
            .omap_get_values(&c, &obj(i), &[Bytes::from(format!("k{i}"))])
            .unwrap();
        assert_eq!(got.len(), 1);
    }
    let dev = s.umount().unwrap();
    let mut s = Store::mount(dev, 0, StoreConfig::default()).unwrap();
    assert!(s.fsck().unwrap().errors.is_empty());
    assert_eq!(s.read(&c, &obj(n - 1), 0, 0).unwrap(), block(n - 1));
    let _ = Event::Durable(0);
}
