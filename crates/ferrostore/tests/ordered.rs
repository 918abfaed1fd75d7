// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)]
//! Ordered commits on a simulated device without FUA (durable writes that flush what completed before them): a
//! group commit's data writes are unsynced and only its log record is a durable write, submitted after the data
//! completed; every transaction is acknowledged and the store remounts to the model. (Crash consistency of the
//! mode: tests/crash.rs, seeds `% 4 == 3`, and the seeded unordered log record it must catch.)

mod common;

use bytes::Bytes;
use common::*;
use ferrostore::rng::Rng;
use ferrostore::txn::{Op, Transaction};
use ferrostore::{Device, MkfsOptions, SimConfig, SimDevice, Store, StoreConfig, mkfs};

fn store(flushing: bool, cfg: StoreConfig) -> Store<SimDevice> {
    let mut dev = SimDevice::new(
        64 << 20,
        SimConfig {
            seed: 5,
            reorder: true,
            max_completions_per_poll: 2,
            durable_writes: true,
        },
    );
    dev.set_durable_writes_flush(flushing);
    let dev = mkfs(
        dev,
        &MkfsOptions {
            shards: 1,
            log_bytes: 4 << 20,
            uuid: 5,
            ..Default::default()
        },
    )
    .unwrap();
    Store::mount(dev, 0, cfg).unwrap()
}

/// (durable writes, all writes, log records, acks) of 200 transactions of one or two data writes at 4 in flight
/// (no checkpoint among them).
fn run(s: &mut Store<SimDevice>, model: &mut Model) -> (u64, u64, u64, usize) {
    let mut rng = Rng::new(9);
    let t = setup_txn(2);
    model.apply(&t).unwrap();
    s.commit(&t).unwrap();
    let (d0, r0, c0) = (s.device().stats(), s.stats.log_records, s.stats.checkpoints);
    let mut acks = 0;
    for i in 0..200u64 {
        let mut t = Transaction::new();
        for j in 0..1 + i % 2 {
            let mut data = vec![0u8; 4096 * (1 + j as usize)];
            rng.fill(&mut data);
            t.push(Op::Write {
                cid: cid(i % 2),
                oid: oid(i % 37),
                offset: 8192 * j,
                data: Bytes::from(data),
            });
        }
        model.apply(&t).unwrap();
        s.queue_transaction(&t).unwrap();
        acks += wait_acked(s, 4);
    }
    acks += wait_acked(s, 0);
    let d1 = s.device().stats();
    assert_eq!(
        s.stats.checkpoints, c0,
        "a checkpoint's writes would blur the counts"
    );
    (
        d1.synced_writes - d0.synced_writes,
        d1.writes - d0.writes,
        s.stats.log_records - r0,
        acks,
    )
}

#[test]
fn ordered_commits_make_only_the_log_record_durable_by_itself() {
    let mut records_of = Vec::new();
    for (flushing, unbounded) in [(false, false), (true, false), (true, true)] {
        let cfg = StoreConfig {
            ordered_records_unbounded: unbounded,
            // every transaction ordered, also one that finds the queue empty
            ordered_lone_synced: false,
            ..Default::default()
        };
        let mut s = store(flushing, cfg);
        let mut model = Model::default();
        let (synced, writes, records, acks) = run(&mut s, &mut model);
        assert_eq!(acks, 200);
        if flushing {
            // Every log record is a durable write, no data write is.
            assert_eq!(synced, records, "{writes} writes, {records} records");
        } else {
            assert_eq!(synced, writes, "every write is durable by itself");
        }
        assert!(
            records < 200,
            "group commit: {records} records for 200 transactions"
        );
        records_of.push(records);
        assert_eq!(dump(&mut s).unwrap(), model);
        let dev = s.umount().unwrap();
        let mut s = Store::mount(dev, 0, StoreConfig::default()).unwrap();
        assert_eq!(dump(&mut s).unwrap(), model);
        assert!(s.fsck().unwrap().errors.is_empty());
    }
    eprintln!(
        "records for 200 transactions: durable writes {records_of:?} (dsync, ordered, ordered unbounded)"
    );
    // One ordered record in flight at a time groups the transactions whose data completes meanwhile.
    assert!(
        records_of[1] < records_of[2],
        "records: one in flight {}, unbounded {}",
        records_of[1],
        records_of[2]
    );
}

/// One transaction at a time (QD1) on a device without FUA: with `ordered_lone_synced` (the default) each is
/// written as without ordered commits (data and record durable writes, the record not waiting for the data),
/// and with it off only its record is a durable write (after its data). Both remount to the model; so does a
/// mix of lone and grouped transactions.
#[test]
fn a_lone_transaction_writes_data_and_record_at_once() {
    for lone in [true, false] {
        let cfg = StoreConfig {
            ordered_lone_synced: lone,
            ..Default::default()
        };
        let mut s = store(true, cfg);
        let mut model = Model::default();
        let t = setup_txn(2);
        model.apply(&t).unwrap();
        s.commit(&t).unwrap();
        let (d0, l0) = (s.device().stats(), s.stats.ordered_lone_txns);
        let mut rng = Rng::new(3);
        for i in 0..50u64 {
            let mut data = vec![0u8; 4096];
            rng.fill(&mut data);
            let mut t = Transaction::new();
            t.push(Op::Write {
                cid: cid(0),
                oid: oid(i % 7),
                offset: 0,
                data: Bytes::from(data),
            });
            commit_acked(&mut s, &mut model, &t);
        }
        let d1 = s.device().stats();
        let synced = d1.synced_writes - d0.synced_writes;
        let lone_txns = s.stats.ordered_lone_txns - l0;
        if lone {
            assert_eq!(lone_txns, 50);
            assert_eq!(synced, 100, "data and record durable writes");
        } else {
            assert_eq!(lone_txns, 0);
            assert_eq!(synced, 50, "only the record is a durable write");
        }
        // Then a burst with company (grouped, ordered) after the lone ones.
        for i in 0..40u64 {
            let mut t = Transaction::new();
            t.push(Op::Write {
                cid: cid(1),
                oid: oid(i % 11),
                offset: 4096 * (i % 3),
                data: Bytes::from(vec![i as u8; 4096]),
            });
            model.apply(&t).unwrap();
            s.queue_transaction(&t).unwrap();
            wait_acked(&mut s, 6);
        }
        wait_acked(&mut s, 0);
        assert_eq!(dump(&mut s).unwrap(), model);
        let dev = s.umount().unwrap();
        let mut s = Store::mount(dev, 0, StoreConfig::default()).unwrap();
        assert_eq!(dump(&mut s).unwrap(), model);
        assert!(s.fsck().unwrap().errors.is_empty());
    }
}

/// `ordered_min_data_bytes`: transactions with less data than that are written as without ordered commits (their
/// data writes durable by themselves), larger ones ordered; both remount to the model.
#[test]
fn only_large_transactions_are_ordered() {
    let cfg = StoreConfig {
        ordered_lone_synced: false,
        ordered_min_data_bytes: 8192,
        ..Default::default()
    };
    let mut s = store(true, cfg);
    let mut model = Model::default();
    // 200 transactions: the even ones one 4 KiB write (small), the odd ones 4 + 8 KiB (ordered).
    let (synced, writes, records, acks) = run(&mut s, &mut model);
    assert_eq!(acks, 200);
    assert_eq!(writes, 300 + records);
    assert_eq!(
        synced,
        records + 100,
        "records and the small transactions' data writes"
    );
    assert_eq!(dump(&mut s).unwrap(), model);
    let dev = s.umount().unwrap();
    let mut s = Store::mount(dev, 0, StoreConfig::default()).unwrap();
    assert_eq!(dump(&mut s).unwrap(), model);
}
