// SPDX-License-Identifier: LGPL-3.0-or-later
//! Asynchronous client reads (src/prefetch.rs): a read op waits for its data without blocking the shard, reads of
//! different objects are in flight together, ops on one object keep their order (a write behind a parked read
//! waits for it), and a new interval hands parked reads back safely.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use bytes::Bytes;
use ceph_msgs::osd_op::{OSDOp, op};
use common::Cluster;
use denc::SnapId;
use ferrostore::Device;

fn data(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Two objects on one OSD whose data is on the device (not in the store's write buffers).
fn two_objects() -> (Cluster, Vec<u8>, Vec<u8>) {
    let mut c = Cluster::new(1, 1, 1, 8);
    let (a, b) = (data(1, 20_000), data(2, 70_000));
    let w1 = c.write_full("obj-a", &a);
    let w2 = c.write_full("obj-b", &b);
    c.run();
    assert_eq!(c.reply(w1).unwrap().result, 0);
    assert_eq!(c.reply(w2).unwrap().result, 0);
    (c, a, b)
}

fn held(c: &mut Cluster) -> (usize, usize) {
    let s = c.osds.get_mut(&0).unwrap().store_mut();
    (s.prefetches_held(), s.device().in_flight())
}

#[test]
fn reads_of_two_objects_are_in_flight_together() {
    let (mut c, a, b) = two_objects();
    let ra = c.read("obj-a");
    let rb = c.send("obj-b", vec![OSDOp::new(op::READ).with_extent(4096, 50_000)]);
    // both ops were handed in; neither blocked the shard on the device, both reads are queued at once
    assert!(c.reply(ra).is_none() && c.reply(rb).is_none());
    let (prefetches, device) = held(&mut c);
    assert_eq!(prefetches, 2, "two reads in flight at once");
    assert!(device >= 2, "device reads in flight: {device}");
    c.run();
    assert_eq!(c.read_data(ra).unwrap(), Bytes::from(a));
    assert_eq!(
        c.read_data(rb).unwrap(),
        Bytes::from(b[4096..4096 + 50_000].to_vec())
    );
    let s = c.osds.get_mut(&0).unwrap().store_mut();
    assert_eq!(s.stats.reads_prefetched, 2, "{:?}", s.stats);
    assert_eq!(s.prefetches_held(), 0, "released after the ops ran");
}

#[test]
fn ops_on_one_object_keep_their_order_behind_a_parked_read() {
    let (mut c, a, b) = two_objects();
    let new_a = data(9, 12_000);
    let r1 = c.read("obj-a");
    let w = c.write_full("obj-a", &new_a);
    let r2 = c.read("obj-a");
    let rb = c.read("obj-b");
    // the write and the second read wait behind the first read; obj-b's read goes ahead on its own
    assert!(c.reply(r1).is_none() && c.reply(w).is_none() && c.reply(r2).is_none());
    let (prefetches, _) = held(&mut c);
    assert_eq!(prefetches, 2, "obj-a's first read and obj-b's read");
    let spgid = c.locate("obj-a").0;
    assert!(c.report(0, spgid).unwrap().ops_waiting >= 3);
    c.run();
    assert_eq!(
        c.read_data(r1).unwrap(),
        Bytes::from(a),
        "the write overtook the read before it"
    );
    assert_eq!(c.reply(w).unwrap().result, 0);
    assert_eq!(
        c.read_data(r2).unwrap(),
        Bytes::from(new_a),
        "the read after the write saw old data"
    );
    assert_eq!(c.read_data(rb).unwrap(), Bytes::from(b));
    assert_eq!(held(&mut c).0, 0);
}

#[test]
fn sparse_read_cmpext_checksum_and_missing_objects() {
    let (mut c, a, _) = two_objects();
    let sr = c.send("obj-a", vec![OSDOp::new(op::SPARSE_READ).with_extent(0, 1 << 20)]);
    let cmp = c.send(
        "obj-a",
        vec![
            OSDOp::new(op::CMPEXT)
                .with_extent(100, 8)
                .with_indata(Bytes::copy_from_slice(&a[100..108])),
        ],
    );
    let missing = c.read("no-such-object");
    c.run();
    let r = c.reply(sr).unwrap();
    assert_eq!(r.result, 0);
    // sparse read reply: extent map then the data (ends with the object's bytes)
    assert!(r.ops[0].outdata.ends_with(&a), "sparse read data");
    assert_eq!(c.reply(cmp).unwrap().result, 0, "cmpext of equal bytes");
    assert_eq!(c.reply(missing).unwrap().result, -2, "ENOENT");
    assert_eq!(held(&mut c).0, 0);
}

#[test]
fn new_interval_requeues_parked_reads() {
    let mut c = Cluster::new(2, 2, 1, 8);
    let a = data(5, 30_000);
    let w = c.write_full("obj-a", &a);
    c.run();
    assert_eq!(c.reply(w).unwrap().result, 0);
    let (_, _, primary) = c.locate("obj-a");
    let other = 1 - primary;
    let r = c.read("obj-a");
    assert!(c.reply(r).is_none());
    assert_eq!(c.osds.get_mut(&primary).unwrap().store_mut().prefetches_held(), 1);
    // the replica goes down before the read's data arrives: a new interval on the same primary
    c.publish(|b| {
        b.mark_down(other).unwrap();
    });
    c.run();
    c.advance_time(Duration::from_secs(1));
    assert_eq!(c.locate("obj-a").2, primary);
    assert_eq!(
        c.read_data(r).unwrap(),
        Bytes::from(a),
        "the parked read ran after re-peering"
    );
    assert_eq!(c.osds.get_mut(&primary).unwrap().store_mut().prefetches_held(), 0);
}

/// A read at a snapshot is prefetched from the clone that serves it (not the head), returns the snapshot's bytes,
/// and keeps its place in the object's order: a write queued behind it does not overtake it.
#[test]
fn snapshot_reads_are_prefetched_from_their_clone() {
    let (mut c, a, _) = two_objects();
    // snapshot 1 taken (self-managed, as RBD does): the next write clones obj-a first
    let new_a = data(7, 25_000);
    let w = c.send_with(
        "obj-a",
        vec![
            OSDOp::new(op::WRITEFULL)
                .with_extent(0, new_a.len() as u64)
                .with_indata(Bytes::from(new_a.clone())),
        ],
        |m| {
            m.snap_seq = SnapId(1);
            m.snaps = vec![SnapId(1)];
        },
    );
    c.run();
    assert_eq!(c.reply(w).unwrap().result, 0);
    let at_snap = |m: &mut ceph_msgs::osd_op::MOSDOp| m.snapid = SnapId(1);
    let r_snap = c.send_with("obj-a", vec![OSDOp::new(op::READ).with_extent(0, 0)], at_snap);
    let newer = data(8, 5_000);
    let w2 = c.write_full("obj-a", &newer);
    let r_head = c.read("obj-a");
    // the snapshot read is parked on its clone's data; the write and the head read wait behind it
    assert!(c.reply(r_snap).is_none() && c.reply(w2).is_none() && c.reply(r_head).is_none());
    assert_eq!(held(&mut c).0, 1, "the snapshot read's prefetch");
    c.run();
    assert_eq!(
        c.read_data(r_snap).unwrap(),
        Bytes::from(a.clone()),
        "snapshot read returns the clone's bytes"
    );
    assert_eq!(c.reply(w2).unwrap().result, 0);
    assert_eq!(c.read_data(r_head).unwrap(), Bytes::from(newer));
    let s = c.osds.get_mut(&0).unwrap().store_mut();
    // the snapshot read was served from its prefetch (the head read found the write's data still in memory)
    assert_eq!(s.stats.reads_prefetched, 1, "{:?}", s.stats);
    assert_eq!(s.prefetches_held(), 0);
    // a snapshot no clone covers (before the object existed) answers ENOENT at once, nothing parked
    let r0 = c.send_with("obj-b", vec![OSDOp::new(op::READ).with_extent(0, 0)], |m| {
        m.snapid = SnapId(1);
    });
    c.run();
    assert_eq!(
        c.read_data(r0).unwrap(),
        Bytes::from(data(2, 70_000)),
        "obj-b unchanged since: head"
    );
    assert_eq!(held(&mut c).0, 0);
}
