// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)] // test harness: a panic is the failure report
//! What a PG keeps must not keep its messages alive. Decoding is zero-copy, so an object name in a client op or
//! a rep op is a slice of the (64 KiB) receive buffer; the PG log, dups, the reqid index, the missing set,
//! watches and the object context cache live far longer than a message and must hold copies. Each test hands
//! the PG a message whose bytes live in a buffer that reports when it is freed, lets the PG run the op to
//! completion, drops everything but the PG and its store, and checks that the buffer is gone.

mod common;

use ceph_msgs::CephMessage;
use ceph_msgs::osd_op::{MOSDOp, OSDOp, flag, op, watch_op};
use ceph_msgs::osd_rep::MOSDRepOp;
use common::osdop::*;
use common::sim::{self, created_pg, op_ctx};
use denc::{Eversion, ObjectLocator, ObjectName, PgShard, SnapId, Utime};
use ferrostore::{SimDevice, Store};
use osd_types::{PgLogDup, PgLogEntry};
use pg::{OsdCap, Pg, PgConfig};
use tracked_bytes::{Freed, rx_buffer};

const EPOCH: u32 = 7;

fn store(seed: u64) -> Store<SimDevice> {
    sim::sim_store(16 << 20, 1 << 20, seed, sim::sim(seed, false, 64, true))
}

/// A client op on `oid` whose name (and namespace) are slices of a receive buffer.
fn client_op(tid: u64, oid: &str, ops: Vec<OSDOp>) -> (MOSDOp, Freed) {
    let (buf, freed) = rx_buffer(format!("{oid}ns").as_bytes());
    let write = ops.iter().any(|o| op::is_write(o.op));
    let m = MOSDOp {
        tid,
        pgid: sim::spgid(3),
        hash: name_hash(oid),
        osdmap_epoch: EPOCH,
        flags: flag::ACK | flag::ONDISK | if write { flag::WRITE } else { flag::READ },
        oloc: ObjectLocator {
            pool: 3,
            nspace: buf.slice(oid.len()..),
            ..Default::default()
        },
        oid: ObjectName::new(buf.slice(..oid.len())),
        ops,
        snapid: SnapId::NOSNAP,
        features: u64::MAX,
        ..Default::default()
    };
    (m, freed)
}

fn run(pg: &mut Pg, store: &mut Store<SimDevice>, m: MOSDOp) -> Vec<pg::RepOp> {
    let caps = OsdCap::allow_all();
    let out = pg.handle_op(store, op_ctx(m, 1, 1, &caps, EPOCH, Utime::new(100, 0)));
    let mut replies = out.replies.len();
    while store.unacked() > 0 {
        let mut ev = Vec::new();
        store.wait(&mut ev).unwrap();
        for e in ev {
            if let ferrostore::Event::Durable(s) = e {
                replies += pg.on_commit(s).replies.len();
            }
        }
    }
    assert!(replies <= 1);
    out.repops
}

#[test]
fn a_primary_keeps_no_client_message_alive() {
    let mut s = store(1);
    let cfg = PgConfig {
        // a short log, so that entries are trimmed into dups during the test
        osd_min_pg_log_entries: 2,
        osd_pg_log_trim_min: 1,
        ..PgConfig::default()
    };
    let mut pg = created_pg(&mut s, sim::pool(3, "data", 1), cfg, EPOCH);
    let mut flags = Vec::new();
    // writes (log entries, then dups and the reqid index), a failed write (an ERROR entry), a watch (the
    // watch state and the watcher in object_info_t), reads (the object context cache)
    let mut tid = 0;
    for i in 0..6 {
        for ops in [
            vec![write(0, b"data")],
            vec![xattr_op(op::SETXATTR, "a", b"v")],
            vec![OSDOp::new(op::DELETE), OSDOp::new(op::DELETE)],
            vec![watch_op_(7, watch_op::WATCH, 30)],
            vec![read(0, 4), OSDOp::new(op::STAT)],
        ] {
            tid += 1;
            let (m, freed) = client_op(tid, &format!("object-{i}"), ops);
            run(&mut pg, &mut s, m);
            flags.push((tid, freed));
        }
    }
    assert!(pg.stats().log_size <= 3, "the log was trimmed into dups");
    assert!(pg.obc_stats().hits > 0, "the cache held these objects");
    for (tid, freed) in flags {
        assert!(freed.is_freed(), "op {tid}: its receive buffer is still alive");
    }
}

#[test]
fn a_replica_keeps_no_rep_op_alive() {
    let mut ps = store(2);
    let mut primary = created_pg(&mut ps, sim::pool(3, "data", 1), PgConfig::default(), EPOCH);
    let _ = primary.set_replicas(vec![1]);
    let mut rs = store(3);
    let mut replica = created_pg(&mut rs, sim::pool(3, "data", 1), PgConfig::default(), EPOCH);
    replica.set_primary(false);
    let mut flags = Vec::new();
    for tid in 1..=5 {
        let (m, _) = client_op(
            tid,
            &format!("r{tid}"),
            vec![write(0, b"replicated"), OSDOp::new(op::STAT)],
        );
        let reps = run(&mut primary, &mut ps, m);
        assert_eq!(reps.len(), 1);
        let msg = reps[0]
            .to_message(
                &primary,
                EPOCH,
                EPOCH,
                PgShard::new(0, denc::ShardId::NO_SHARD),
                Eversion::default(),
            )
            .to_message(u64::MAX);
        // what the messenger hands over: front and data segments inside one receive buffer
        let mut wire = msg.front.to_vec();
        wire.extend_from_slice(&msg.data);
        let (buf, freed) = rx_buffer(&wire);
        let received = ceph_msgs::Message {
            front: buf.slice(..msg.front.len()),
            data: buf.slice(msg.front.len()..),
            ..msg
        };
        drop(buf);
        let m = MOSDRepOp::from_message(&received).unwrap();
        drop(received);
        let seq = replica.apply_rep_op_msg(&mut rs, &m).unwrap();
        rs.wait_durable(seq).unwrap();
        let _ = primary.on_rep_commit(1, m.version);
        drop(m);
        flags.push((tid, freed));
    }
    assert_eq!(replica.info().last_update, primary.info().last_update);
    for (tid, freed) in flags {
        assert!(
            freed.is_freed(),
            "rep op {tid}: its receive buffer is still alive"
        );
    }
}

/// The in-memory cost of the log, printed for docs/pg.md (`--nocapture`), and bounded so that a change that
/// makes entries much bigger is noticed.
#[test]
fn log_record_sizes() {
    let entry = std::mem::size_of::<PgLogEntry>();
    let dup = std::mem::size_of::<PgLogDup>();
    let index = std::mem::size_of::<(denc::OsdReqId, Eversion)>();
    eprintln!("pg_log_entry_t {entry} B + name, pg_log_dup_t {dup} B, reqid index {index} B per record");
    assert!(entry <= 512 && dup <= 128 && index <= 64);
}
