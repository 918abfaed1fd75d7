// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)]
//! Journaled writes (`StoreConfig::log_data_max_bytes`, format version 3): a small write's data rides in its log
//! record, its own data write goes out unsynced and is not waited for, so on a device whose durable writes each
//! cost a flush it is acknowledged after one durable write instead of two. (Crash consistency: tests/crash.rs,
//! seeds `% 3 == 1`, and the skipped redo it must catch.)

mod common;

use bytes::Bytes;
use common::*;
use ferrostore::rng::Rng;
use ferrostore::txn::{Op, Transaction};
use ferrostore::{Device, MkfsOptions, SimConfig, SimDevice, Store, StoreConfig, mkfs};

fn device(version: u32) -> SimDevice {
    let mut dev = SimDevice::new(
        64 << 20,
        SimConfig {
            seed: 11,
            reorder: true,
            max_completions_per_poll: 2,
            durable_writes: true,
        },
    );
    // As ferro-osd runs it: RWF_DSYNC writes, no ordered commits.
    dev.set_durable_writes_flush(false);
    mkfs(
        dev,
        &MkfsOptions {
            shards: 1,
            log_bytes: 4 << 20,
            uuid: 11,
            version,
        },
    )
    .unwrap()
}

fn journaling(max: u64) -> StoreConfig {
    StoreConfig {
        log_data_max_bytes: max,
        ..Default::default()
    }
}

/// A fresh store of format `version` journaling up to `max` bytes, with two collections (and its model).
fn fresh(version: u32, max: u64) -> (Store<SimDevice>, Model) {
    let mut model = Model::default();
    let mut s = Store::mount(device(version), 0, journaling(max)).unwrap();
    let setup = setup_txn(2);
    model.apply(&setup).unwrap();
    s.commit(&setup).unwrap();
    (s, model)
}

fn write_txn(rng: &mut Rng, i: u64, blocks: usize) -> Transaction {
    let mut data = vec![0u8; 4096 * blocks];
    rng.fill(&mut data);
    write_at(i % 2, i % 29, 4096 * (i % 5), data)
}

/// One write of `data` at `offset` of object `o` in collection `c`.
fn write_at(c: u64, o: u64, offset: u64, data: Vec<u8>) -> Transaction {
    let mut t = Transaction::new();
    t.push(Op::Write {
        cid: cid(c),
        oid: oid(o),
        offset,
        data: Bytes::from(data),
    });
    t
}

/// Checkpoint (it writes every deferred block), then everything reads back from the device, also after a clean
/// remount, and fsck is clean.
fn checkpoint_and_remount(mut s: Store<SimDevice>, model: &Model) {
    s.checkpoint().unwrap();
    assert_eq!(&dump(&mut s).unwrap(), model);
    let dev = s.umount().unwrap();
    let mut s = Store::mount(dev, 0, StoreConfig::default()).unwrap();
    assert_eq!(&dump(&mut s).unwrap(), model);
    assert!(s.fsck().unwrap().errors.is_empty());
}

/// (durable writes, all writes, acks) of `n` writes of `blocks` blocks, `qd` in flight, no checkpoint among them.
fn run(s: &mut Store<SimDevice>, model: &mut Model, n: u64, blocks: usize, qd: usize) -> (u64, u64, usize) {
    let mut rng = Rng::new(3);
    let d0 = s.device().stats();
    let c0 = s.stats.checkpoints;
    let mut acks = 0;
    for i in 0..n {
        let t = write_txn(&mut rng, i, blocks);
        model.apply(&t).unwrap();
        s.queue_transaction(&t).unwrap();
        acks += wait_acked(s, qd);
    }
    acks += wait_acked(s, 0);
    let d1 = s.device().stats();
    assert_eq!(
        s.stats.checkpoints, c0,
        "a checkpoint's writes would blur the counts"
    );
    (d1.synced_writes - d0.synced_writes, d1.writes - d0.writes, acks)
}

#[test]
fn a_journaled_write_is_one_durable_write() {
    for qd in [1, 4] {
        let (mut s, mut model) = fresh(3, 8192);
        let (synced, writes, acks) = run(&mut s, &mut model, 100, 1, qd);
        assert_eq!(acks, 100);
        assert_eq!(s.stats.journaled_txns, 100);
        // Only log records are durable writes; the 4 KiB data writes go out unsynced, in whole batches (16 of
        // 64 KiB: 96 writes; the last 4 wait for the next batch or checkpoint).
        let batch = ferrostore::store::DEFAULT_JOURNAL_BATCH_BYTES / 4096;
        assert_eq!(synced, writes - 100 / batch * batch, "qd {qd}: {writes} writes");
        if qd == 1 {
            assert_eq!(synced, 100, "one durable write per transaction at QD1");
        }
        assert_eq!(dump(&mut s).unwrap(), model);
        // Remount after a clean unmount and after the journaled blocks are replayed: the same state, fsck clean.
        let dev = s.umount().unwrap();
        let mut s = Store::mount(dev, 0, StoreConfig::default()).unwrap();
        assert_eq!(dump(&mut s).unwrap(), model);
        assert!(s.fsck().unwrap().errors.is_empty());

        // The same writes without journaling: data and record both durable writes.
        let (mut s, mut model) = fresh(3, 0);
        let (synced, writes, _) = run(&mut s, &mut model, 100, 1, qd);
        assert_eq!(s.stats.journaled_txns, 0);
        assert_eq!(
            synced, writes,
            "without journaling every write is durable by itself"
        );
        if qd == 1 {
            assert_eq!(synced, 200);
        }
    }
}

#[test]
fn larger_writes_and_version_2_stores_are_not_journaled() {
    // 3 blocks > 8 KiB: written as before.
    let (mut s, mut model) = fresh(3, 8192);
    run(&mut s, &mut model, 20, 3, 2);
    assert_eq!(s.stats.journaled_txns, 0);
    run(&mut s, &mut model, 20, 2, 2);
    assert_eq!(s.stats.journaled_txns, 20);
    assert_eq!(dump(&mut s).unwrap(), model);

    // A version 2 shard keeps its version (an older build can mount it) and never journals.
    let (mut s, mut model) = fresh(2, 8192);
    run(&mut s, &mut model, 20, 1, 2);
    assert_eq!(s.stats.journaled_txns, 0);
    s.checkpoint().unwrap();
    let dev = s.umount().unwrap();
    let mut s = Store::mount(dev, 0, journaling(8192)).unwrap();
    run(&mut s, &mut model, 5, 1, 1);
    assert_eq!(s.stats.journaled_txns, 0, "the shard became version 3");
    assert_eq!(dump(&mut s).unwrap(), model);
}

#[test]
fn a_journaled_write_reads_back_before_and_after_its_data_write_completes() {
    let (mut s, mut model) = fresh(3, 8192);
    let mut rng = Rng::new(8);
    let mut ev = Vec::new();
    // 150 single-block writes (plus read-modify-writes): more than two batches of deferred data writes go out and
    // complete while the test reads, the rest are still only in memory and in the log.
    for i in 0..150u64 {
        // A partial-block overwrite too: its read-modify-write reads the block an earlier journaled write left.
        let mut t = write_txn(&mut rng, i, 1);
        if i % 3 == 0 {
            t.push(Op::Write {
                cid: cid(i % 2),
                oid: oid(i % 29),
                offset: 4096 * (i % 5) + 100,
                data: Bytes::from(vec![i as u8; 300]),
            });
        }
        model.apply(&t).unwrap();
        s.queue_transaction(&t).unwrap();
        // Right after queueing (record in flight, data write deferred) and after each poll.
        assert_eq!(dump(&mut s).unwrap(), model);
        while s.unacked() > 0 {
            ev.clear();
            s.wait(&mut ev).unwrap();
            assert_eq!(dump(&mut s).unwrap(), model);
        }
    }
    assert!(s.stats.journaled_txns >= 150);
    let d = s.device().stats();
    assert!(
        d.writes >= s.stats.log_records + 128,
        "deferred data writes went out: {} writes, {} records",
        d.writes,
        s.stats.log_records
    );
    // The checkpoint writes the rest; afterwards every block reads back from the device, also after a remount.
    checkpoint_and_remount(s, &model);
}

#[test]
fn a_block_rewritten_before_its_batch_goes_out_is_written_only_in_the_log() {
    let (mut s, mut model) = fresh(3, 8192);
    let mut rng = Rng::new(21);
    let d0 = s.device().stats();
    let r0 = s.stats.log_records;
    // The same block 200 times, one write at a time (a file system's journal block, a database page): each
    // rewrite frees the block the previous one was given before that block's deferred data write was submitted.
    for i in 0..200u64 {
        let mut data = vec![0u8; 4096];
        rng.fill(&mut data);
        commit_acked(&mut s, &mut model, &write_at(0, 7, 8192, data));
        if i % 50 == 0 {
            assert_eq!(dump(&mut s).unwrap(), model);
        }
    }
    assert!(s.stats.journaled_txns >= 200);
    assert_eq!(s.stats.journaled_writes_skipped, 199);
    let (writes, records) = (s.device().stats().writes - d0.writes, s.stats.log_records - r0);
    assert!(
        writes <= records + 2,
        "only the records went to the device: {writes} writes for {records} records"
    );
    assert_eq!(dump(&mut s).unwrap(), model);

    // Power lost now, before any checkpoint: replay writes every record's block again, the last one wins.
    let img = s.device().crash_image(&mut Rng::new(5));
    let cfg = SimConfig {
        seed: 12,
        reorder: true,
        max_completions_per_poll: 2,
        durable_writes: true,
    };
    let mut c = Store::mount(SimDevice::from_image(img, cfg), 0, journaling(8192)).unwrap();
    assert_eq!(dump(&mut c).unwrap(), model);
    assert!(c.fsck().unwrap().errors.is_empty());

    // The last write's own data write is still deferred: the checkpoint writes it, then it reads from the device.
    checkpoint_and_remount(s, &model);
}

#[test]
fn a_run_freed_only_in_part_keeps_its_data_write() {
    let (mut s, mut model) = fresh(3, 16384);
    let mut rng = Rng::new(22);
    // A 4-block journaled write, then one of its blocks rewritten: the run is still referenced (3 blocks), so its
    // deferred write must go out, and the data must read back from the device after a checkpoint and a crash.
    for (offset, blocks) in [(0, 4), (4096, 1)] {
        let mut data = vec![0u8; 4096 * blocks];
        rng.fill(&mut data);
        commit_acked(&mut s, &mut model, &write_at(1, 3, offset, data));
    }
    assert_eq!(s.stats.journaled_writes_skipped, 0);
    assert_eq!(dump(&mut s).unwrap(), model);
    checkpoint_and_remount(s, &model);
}
