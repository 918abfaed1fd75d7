// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)]
//! The shard's stops for a checkpoint are counted (`StoreStats::ckpt_waits_log`, `ckpt_waits_dirty`,
//! `ckpt_log_full`): none while the device keeps up with the checkpoints; each kind, alone, when writes outrun them
//! in its way; the data is the same either way.

mod common;

use bytes::Bytes;
use common::*;
use ferrostore::rng::Rng;
use ferrostore::txn::{Op, Transaction};
use ferrostore::{SimDevice, Store, StoreConfig};

/// A transaction of `n` 4 KiB writes to random objects (each dirties a tree leaf of its own, mostly).
fn writes(rng: &mut Rng, n: u64) -> Transaction {
    let mut t = Transaction::new();
    for _ in 0..n {
        let mut data = vec![0u8; 4096];
        rng.fill(&mut data);
        let o = rng.below(3_000);
        t.push(Op::Write {
            cid: cid(o % 4),
            oid: oid(o),
            offset: rng.below(4) * 4096,
            data: Bytes::from(data),
        });
    }
    t
}

/// `steps` transactions of `per_txn` writes; after each, `polls` non-blocking polls, or (`None`) waits until
/// it is durable. Returns the store, checked against the model.
fn run(cfg: StoreConfig, log_bytes: u64, steps: u64, per_txn: u64, polls: Option<usize>) -> Store<SimDevice> {
    let mut s = sim_store(21, 96 << 20, log_bytes, cfg);
    let mut model = Model::default();
    let mut rng = Rng::new(21);
    let t = setup_txn(4);
    commit_acked(&mut s, &mut model, &t);
    let mut ev = Vec::new();
    for _ in 0..steps {
        let t = writes(&mut rng, per_txn);
        model.apply(&t).unwrap();
        s.queue_transaction(&t).unwrap();
        match polls {
            Some(n) => {
                for _ in 0..n {
                    ev.clear();
                    s.poll(&mut ev).unwrap();
                }
            }
            None => {
                while s.unacked() > 0 {
                    ev.clear();
                    s.wait(&mut ev).unwrap();
                }
            }
        }
    }
    wait_acked(&mut s, 0);
    let got = dump(&mut s).unwrap();
    assert!(got == model, "{}", diff(&got, &model));
    s
}

#[test]
fn no_stops_while_the_device_keeps_up() {
    let cfg = StoreConfig {
        max_dirty_nodes: 30,
        ..Default::default()
    };
    let s = run(cfg, 8 << 20, 600, 5, None);
    assert!(s.stats.background_checkpoints >= 2, "{:?}", s.stats);
    assert_eq!(
        (
            s.stats.ckpt_waits_log,
            s.stats.ckpt_waits_dirty,
            s.stats.ckpt_log_full
        ),
        (0, 0, 0),
        "{:?}",
        s.stats
    );
}

#[test]
fn dirty_nodes_outrunning_a_checkpoint_stop_the_shard() {
    // One poll per transaction: a background checkpoint advances a slice per poll while each transaction
    // dirties dozens of leaves, so the dirty nodes reach twice the limit before it ends.
    let cfg = StoreConfig {
        max_dirty_nodes: 8,
        ..Default::default()
    };
    let s = run(cfg, 8 << 20, 300, 40, Some(1));
    assert!(s.stats.ckpt_waits_dirty > 0, "{:?}", s.stats);
    assert_eq!(s.stats.ckpt_log_full, 0, "{:?}", s.stats);
}

/// A small log (256 KiB) and journaled data (a transaction of at most 16 KiB rides in its record).
fn journaling() -> StoreConfig {
    StoreConfig {
        log_data_max_bytes: 16 << 10,
        ..Default::default()
    }
}

#[test]
fn a_log_outrunning_a_checkpoint_stops_the_shard() {
    // One poll per transaction of 8 writes (32 KiB, not journaled): the records fill the log to its hard limit
    // while a background checkpoint still runs, long before the dirty nodes reach theirs.
    let s = run(journaling(), 256 << 10, 200, 8, Some(1));
    assert!(s.stats.ckpt_waits_log > 0, "{:?}", s.stats);
    assert_eq!(
        (s.stats.ckpt_waits_dirty, s.stats.ckpt_log_full),
        (0, 0),
        "{:?}",
        s.stats
    );
}

#[test]
fn a_log_with_no_room_for_a_record_runs_a_blocking_checkpoint() {
    // 60 journaled transactions (12 KiB each, 720 KiB in all) queued with no poll between them: the records go
    // out back to back, and one finds no room in the 256 KiB log.
    let s = run(journaling(), 256 << 10, 60, 3, Some(0));
    assert!(s.stats.ckpt_log_full > 0, "{:?}", s.stats);
    assert_eq!(s.stats.journaled_txns, 60, "{:?}", s.stats);
}
