// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)]
//! A background checkpoint of hundreds of tree nodes submits its node writes a slice per poll (a loop turn of the
//! OSD never submits them all at once), completes, and the store holds the same data after a remount.

mod common;

use bytes::Bytes;
use common::*;
use ferrostore::rng::Rng;
use ferrostore::txn::{Op, Transaction};
use ferrostore::{Device, SimConfig, SimDevice, Store, StoreConfig};

#[test]
fn checkpoint_node_writes_go_out_in_slices() {
    checkpoint_in_slices(ferrostore::store::DEFAULT_CKPT_WALK_SLICE);
}

/// One node placed per poll: the placement outlasts the IO submitted before the snapshot, and the superblock
/// must still wait for it (it names the snapshot's root).
#[test]
fn superblock_waits_for_a_slow_placement() {
    checkpoint_in_slices(1);
}

fn checkpoint_in_slices(walk_slice: usize) {
    let cfg = StoreConfig {
        max_dirty_nodes: 300,
        checkpoint_walk_slice: walk_slice,
        ..Default::default()
    };
    let mut s = sim_store(7, 160 << 20, 16 << 20, cfg.clone());
    let mut rng = Rng::new(7);
    let mut model = Model::default();
    let mut ev = Vec::new();
    let t = setup_txn(4);
    model.apply(&t).unwrap();
    s.queue_transaction(&t).unwrap();
    // New objects until a background checkpoint starts: the poll that starts it serialises every dirty node.
    let mut nodes = 0;
    let mut writes_at_start = 0;
    for step in 0..2_000u64 {
        let mut t = Transaction::new();
        for i in 0..50 {
            let mut data = vec![0u8; 4096];
            rng.fill(&mut data);
            t.push(Op::Write {
                cid: cid(step % 4),
                oid: oid(step * 50 + i),
                offset: 0,
                data: Bytes::from(data),
            });
        }
        model.apply(&t).unwrap();
        s.queue_transaction(&t).unwrap();
        let writes = s.device().stats().writes;
        let node_bytes = s.stats.node_bytes;
        ev.clear();
        s.poll(&mut ev).unwrap();
        if s.stats.node_bytes > node_bytes {
            writes_at_start = writes;
            nodes = (s.stats.node_bytes - node_bytes) / 4096;
            let submitted = s.device().stats().writes - writes;
            // One slice of node writes (32) plus this poll's data and log writes, not every node.
            assert!(
                submitted <= 32 + 60,
                "{submitted} writes submitted in one poll for {nodes} nodes"
            );
            break;
        }
    }
    assert!(
        nodes >= walk_slice.min(64) as u64,
        "no large checkpoint started ({nodes} nodes)"
    );
    let first_poll_nodes = nodes;
    while s.stats.background_checkpoints == 0 {
        ev.clear();
        s.wait(&mut ev).unwrap();
    }
    // The snapshot's nodes got their blocks over several polls too (session 8): the poll that started the
    // checkpoint placed one slice of them, not the whole dirty tree.
    let total_nodes = s.stats.node_bytes / 4096;
    assert!(
        total_nodes > walk_slice as u64 + 10,
        "checkpoint too small to tell ({total_nodes} nodes)"
    );
    assert!(
        first_poll_nodes <= walk_slice as u64,
        "{first_poll_nodes} of {total_nodes} nodes placed in the poll that started the checkpoint"
    );
    // The snapshot's nodes got consecutive blocks and went out as runs of up to 32 blocks per write (besides the
    // poll's own data and log writes); one slice placed per poll leaves nothing to merge.
    let writes = s.device().stats().writes - writes_at_start;
    if walk_slice >= 32 {
        assert!(
            writes <= 60 + total_nodes / 8,
            "{writes} writes for a checkpoint of {total_nodes} nodes"
        );
    }
    let dev = s.umount().unwrap();
    let img = dev.durable_image().to_vec();
    let dev = SimDevice::from_image(
        img,
        SimConfig {
            seed: 8,
            reorder: true,
            max_completions_per_poll: 3,
            durable_writes: false,
        },
    );
    let mut s = Store::mount(dev, 0, cfg).unwrap();
    let got = dump(&mut s).unwrap();
    assert!(got == model, "{}", diff(&got, &model));
}

/// With writes durable on completion (RWF_DSYNC, where each write without FUA carries a device flush), a
/// checkpoint's node writes are unsynced and made durable by one flush before the superblock: one flush per
/// checkpoint, not one per node. (The crash test checks that the order holds: node writes, flush, superblock.)
#[test]
fn durable_writes_checkpoint_with_one_flush() {
    let cfg = StoreConfig {
        max_dirty_nodes: 60,
        ..Default::default()
    };
    let dev = SimDevice::new(
        64 << 20,
        SimConfig {
            seed: 9,
            reorder: true,
            max_completions_per_poll: 3,
            durable_writes: true,
        },
    );
    let dev = ferrostore::mkfs(
        dev,
        &ferrostore::MkfsOptions {
            shards: 1,
            log_bytes: 16 << 20,
            uuid: 9,
            ..Default::default()
        },
    )
    .unwrap();
    let mut s = Store::mount(dev, 0, cfg.clone()).unwrap();
    let mut rng = Rng::new(9);
    let mut model = Model::default();
    let mut ev = Vec::new();
    let t = setup_txn(4);
    model.apply(&t).unwrap();
    s.queue_transaction(&t).unwrap();
    let flushes0 = s.device().stats().flushes;
    let ckpts0 = s.stats.checkpoints;
    let node_bytes0 = s.stats.node_bytes;
    let mut step = 0u64;
    while s.stats.background_checkpoints < 2 {
        let mut t = Transaction::new();
        for i in 0..20 {
            let mut data = vec![0u8; 4096];
            rng.fill(&mut data);
            t.push(Op::Write {
                cid: cid(step % 4),
                oid: oid((step * 20 + i) % 2_000),
                offset: 0,
                data: Bytes::from(data),
            });
        }
        model.apply(&t).unwrap();
        s.queue_transaction(&t).unwrap();
        // A device that keeps up (the simulator completes a few requests per call): the transaction is durable
        // before the next one, so the checkpoint's barrier is reached and its frees come back.
        while s.unacked() > 0 {
            ev.clear();
            s.wait(&mut ev).unwrap();
        }
        step += 1;
        assert!(step < 5_000, "no background checkpoints");
    }
    let nodes = (s.stats.node_bytes - node_bytes0) / 4096;
    let flushes = s.device().stats().flushes - flushes0;
    let ckpts = s.stats.checkpoints - ckpts0;
    assert!(nodes > 100, "only {nodes} nodes written");
    // One flush per completed checkpoint, plus one if the next is running (its flush may be out already).
    assert!(
        (ckpts..=ckpts + 1).contains(&flushes),
        "{flushes} flushes for {ckpts} checkpoints of {nodes} nodes"
    );
    // The blocking checkpoint (unmount) adds one flush too (plus the running one's, if any).
    let before = s.device().stats().flushes;
    let dev = s.umount().unwrap();
    assert!((1..=2).contains(&(dev.stats().flushes - before)));
    let dev = SimDevice::from_image(
        dev.durable_image().to_vec(),
        SimConfig {
            seed: 10,
            reorder: true,
            max_completions_per_poll: 3,
            durable_writes: true,
        },
    );
    let mut s = Store::mount(dev, 0, cfg).unwrap();
    let got = dump(&mut s).unwrap();
    assert!(got == model, "{}", diff(&got, &model));
}
