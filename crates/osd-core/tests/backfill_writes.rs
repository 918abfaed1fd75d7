// SPDX-License-Identifier: LGPL-3.0-or-later
//! Client writes during backfill reach the backfill target (issue 6; Ceph sends every write to all of
//! `acting_recovery_backfill`, the target included even when pg_temp keeps it out of the acting set):
//! * an object the backfill already passed: the target gets the transaction and holds the new version when
//!   the client is answered, without another push;
//! * an object the backfill has not reached: the target gets the log entry with an empty transaction, and
//!   backfill copies the object later;
//! * the client reply waits for the target's commit too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;

use bytes::Bytes;
use ceph_msgs::CephMessage;
use ceph_msgs::osd_rep::{MOSDPGBackfill, MOSDPGPush, MOSDRepOp, backfill_op, rep_msg};
use common::Cluster;
use denc::{HObject, SnapId, SpgId};
use osd_core::Input;

/// What the backfill target was sent.
#[derive(Default)]
struct Seen {
    /// `last_backfill` of every PROGRESS, in order.
    progress: Vec<HObject>,
    /// Pushes per object.
    pushes: BTreeMap<HObject, usize>,
    /// Rep ops per object: whether each carried a transaction.
    repops: BTreeMap<HObject, Vec<bool>>,
    finished: bool,
}

/// One step of the cluster (outputs, store events, one message), noting what goes to `target`.
fn step(c: &mut Cluster, target: i32, seen: &mut Seen) -> bool {
    let mut any = c.drain_outputs();
    any |= c.pump_stores();
    if let Some((from, to, msg)) = c.bus.pop_front() {
        any = true;
        if to == target {
            match msg.msg_type {
                rep_msg::PG_BACKFILL => {
                    let m = MOSDPGBackfill::from_message(&msg).unwrap();
                    match m.op {
                        backfill_op::PROGRESS => seen.progress.push(m.last_backfill),
                        backfill_op::FINISH => seen.finished = true,
                        _ => {}
                    }
                }
                rep_msg::PG_PUSH => {
                    for p in MOSDPGPush::from_message(&msg).unwrap().pushes {
                        *seen.pushes.entry(p.recovery_info.soid).or_default() += 1;
                    }
                }
                rep_msg::REPOP => {
                    let m = MOSDRepOp::from_message(&msg).unwrap();
                    seen.repops.entry(m.poid).or_default().push(!m.op_t.is_empty());
                }
                _ => {}
            }
        }
        if let Some(s) = c.osds.get_mut(&to) {
            s.handle(c.now, c.wall, Input::Peer { from, msg });
        }
    }
    if !any {
        // the monitor publishes pending up_thru / pg_temp requests when nothing else moves
        c.publish(|_| {});
    }
    any
}

fn hobj(c: &Cluster, name: &str) -> HObject {
    let (_, hash, _) = c.locate(name);
    HObject::new(
        Bytes::copy_from_slice(name.as_bytes()),
        "",
        SnapId::NOSNAP,
        hash,
        1,
        "",
    )
}

fn payload(i: usize) -> Vec<u8> {
    format!("object {i} ").repeat(1 + i % 7).into_bytes()
}

/// The stored data of `oid` in `spgid` on `osd`.
fn data_on(c: &mut Cluster, osd: i32, spgid: SpgId, oid: &HObject) -> Option<Bytes> {
    let store = c.osds.get_mut(&osd).unwrap().store_mut();
    let cid = pg::keys::collection_id(&spgid);
    let k = pg::keys::object_key(oid, &spgid);
    let st = store.stat(&cid, &k).ok()?;
    store.read(&cid, &k, 0, st.size).ok()
}

#[test]
fn writes_during_backfill_reach_the_target_outside_the_acting_set() {
    let mut c = Cluster::new(4, 3, 2, 1);
    // more writes than the log keeps (250 entries, trimmed 100 at a time): the new OSD needs backfill
    let n = 420;
    for i in 0..n {
        c.write_full(&format!("obj{i}"), &payload(i));
        if i % 50 == 49 {
            c.run();
        }
    }
    c.run();
    let (spgid, _, _) = c.locate("obj0");
    let acting = c.map.pg_to_up_acting_osds(spgid.pgid).unwrap().acting;
    let target = (0..4).find(|o| !acting.contains(o)).unwrap();
    let victim = acting[2];
    c.publish(|b| {
        b.mark_out(victim).unwrap();
    });
    let mut seen = Seen::default();
    let names: Vec<String> = (0..n).map(|i| format!("obj{i}")).collect();
    let objs: Vec<HObject> = names.iter().map(|nm| hobj(&c, nm)).collect();
    // until the target has been told that a good part of the PG is in sync, with much still to go
    let mut steps = 0;
    let lb = loop {
        step(&mut c, target, &mut seen);
        steps += 1;
        assert!(steps < 2_000_000, "backfill never progressed");
        assert!(!seen.finished, "backfill finished before the test wrote");
        if let Some(lb) = seen.progress.last()
            && objs.iter().filter(|o| *o <= lb).count() >= n / 5
        {
            break lb.clone();
        }
    };
    eprintln!("progress after {steps} steps: {lb}");
    // pg_temp keeps the old acting set while the target is backfilled
    let ua = c.map.pg_to_up_acting_osds(spgid.pgid).unwrap();
    assert!(ua.up.contains(&target) && !ua.acting.contains(&target), "{ua:?}");
    let behind = names.iter().zip(&objs).find(|(_, o)| **o <= lb).unwrap();
    let ahead = names.iter().zip(&objs).max_by(|a, b| a.1.cmp(b.1)).unwrap();
    assert!(
        !seen.pushes.contains_key(ahead.1),
        "the last object was pushed already"
    );
    let (behind, behind_oid) = (behind.0.clone(), behind.1.clone());
    let (ahead, ahead_oid) = (ahead.0.clone(), ahead.1.clone());
    let pushes_before = seen.pushes.get(&behind_oid).copied().unwrap_or(0);
    assert_eq!(pushes_before, 1, "{behind} was copied once");

    // the reply to a write waits for the target's commit as well
    c.hold_durable.insert(target);
    let t1 = c.write_full(&behind, b"written behind the cursor");
    for _ in 0..20_000 {
        if !step(&mut c, target, &mut seen) {
            break;
        }
    }
    assert!(
        c.reply(t1).is_none(),
        "answered before the backfill target committed"
    );
    eprintln!("held write checked");
    c.hold_durable.remove(&target);
    let t2 = c.write_full(&ahead, b"written ahead of the cursor");
    while c.reply(t1).is_none() || c.reply(t2).is_none() {
        step(&mut c, target, &mut seen);
        steps += 1;
        assert!(steps < 4_000_000, "writes never answered");
    }
    assert_eq!(c.reply(t1).unwrap().result, 0);
    assert_eq!(c.reply(t2).unwrap().result, 0);
    // behind the cursor: the transaction went to the target, which holds the new data when the client is
    // answered
    assert_eq!(seen.repops.get(&behind_oid), Some(&vec![true]), "{behind}");
    assert_eq!(
        data_on(&mut c, target, spgid, &behind_oid).as_deref(),
        Some(&b"written behind the cursor"[..])
    );
    // ahead of it: the log entry only
    assert_eq!(seen.repops.get(&ahead_oid), Some(&vec![false]), "{ahead}");

    eprintln!("writes answered after {steps} steps");
    // finish: backfill copies the object written ahead of the cursor, not the one behind it
    while !seen.finished {
        step(&mut c, target, &mut seen);
        steps += 1;
        assert!(steps < 4_000_000, "backfill never finished");
    }
    c.run();
    assert_eq!(
        seen.pushes.get(&behind_oid).copied().unwrap_or(0),
        pushes_before,
        "{behind} was pushed again"
    );
    assert!(seen.pushes.get(&ahead_oid).copied().unwrap_or(0) >= 1);
    let ua = c.map.pg_to_up_acting_osds(spgid.pgid).unwrap();
    assert_eq!(ua.acting, ua.up, "pg_temp removed after backfill");
    assert!(ua.acting.contains(&target));
    let d0 = c.dump_pg(ua.acting[0], spgid);
    assert_eq!(d0.len(), n);
    for &o in &ua.acting[1..] {
        assert!(
            d0 == c.dump_pg(o, spgid),
            "osd.{} and osd.{o} differ",
            ua.acting[0]
        );
    }
    assert_eq!(
        data_on(&mut c, target, spgid, &ahead_oid).as_deref(),
        Some(&b"written ahead of the cursor"[..])
    );
    for (i, nm) in names.iter().enumerate() {
        if *nm == behind || *nm == ahead {
            continue;
        }
        let r = c.read(nm);
        c.run();
        assert_eq!(c.read_data(r).unwrap(), &payload(i)[..], "{nm}");
    }
}
