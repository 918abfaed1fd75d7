// SPDX-License-Identifier: LGPL-3.0-or-later
//! Recovery and backfill end to end through `OsdShard` (the core's test cluster): an OSD misses writes while
//! down and is recovered from the log when it returns; an OSD marked out is replaced, by log recovery while the
//! log reaches back to the PG's creation and by backfill once it was trimmed (also with client writes during the
//! backfill). Every PG ends active+clean with identical replicas.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::Cluster;
use osd_core::state_string;

fn primary_states(c: &Cluster) -> Vec<(i32, String)> {
    let mut v = Vec::new();
    for (o, s) in &c.osds {
        for r in s.pg_stats() {
            if r.primary {
                v.push((*o, state_string(r.state)));
            }
        }
    }
    v
}

fn settle(c: &mut Cluster) {
    for _ in 0..20 {
        c.advance_time(Duration::from_secs(1));
        if primary_states(c).iter().all(|(_, s)| s == "active+clean") {
            return;
        }
    }
    panic!(
        "not clean: {:?}\nlog tail: {:?}",
        primary_states(c),
        &c.logs[c.logs.len().saturating_sub(30)..]
    );
}

fn assert_identical(c: &mut Cluster, name: &str) {
    let (spgid, _, _) = c.locate(name);
    let acting = c.map.pg_to_up_acting_osds(spgid.pgid).unwrap().acting;
    let first = acting[0];
    let d0 = c.dump_pg(first, spgid);
    for &o in &acting[1..] {
        let d = c.dump_pg(o, spgid);
        assert_eq!(
            d0.keys().collect::<Vec<_>>(),
            d.keys().collect::<Vec<_>>(),
            "pg {spgid}: objects differ osd.{first} vs osd.{o}"
        );
        assert!(d0 == d, "pg {spgid}: contents differ osd.{first} vs osd.{o}");
    }
}

fn payload(i: usize, round: usize) -> Vec<u8> {
    format!("object {i} round {round} ")
        .repeat(1 + i % 7)
        .into_bytes()
}

#[test]
fn returning_osd_is_recovered_from_the_log() {
    let mut c = Cluster::new(3, 3, 2, 4);
    let mut tids = Vec::new();
    for i in 0..20 {
        tids.push(c.write_full(&format!("obj{i}"), &payload(i, 0)));
    }
    c.run();
    c.stop(2);
    // while osd.2 is down: overwrite some, create some, delete some
    for i in 0..10 {
        tids.push(c.write_full(&format!("obj{i}"), &payload(i, 1)));
    }
    for i in 20..30 {
        tids.push(c.write_full(&format!("obj{i}"), &payload(i, 1)));
    }
    for i in 10..14 {
        tids.push(c.send(
            &format!("obj{i}"),
            vec![ceph_msgs::osd_op::OSDOp::new(ceph_msgs::osd_op::op::DELETE)],
        ));
    }
    c.run();
    for t in &tids {
        assert_eq!(c.reply(*t).unwrap().result, 0, "tid {t}");
    }
    c.restart(2);
    settle(&mut c);
    for i in 0..30 {
        assert_identical(&mut c, &format!("obj{i}"));
        let r = c.read(&format!("obj{i}"));
        c.run();
        if (10..14).contains(&i) {
            assert!(c.read_data(r).is_none(), "obj{i} was deleted");
        } else {
            let round = usize::from(!(10..20).contains(&i));
            assert_eq!(c.read_data(r).unwrap(), &payload(i, round)[..], "obj{i}");
        }
    }
}

/// A short history: the OSD taking over from the out one is recovered from the log (no trimmed entries).
#[test]
fn out_osd_is_replaced_and_recovered() {
    let mut c = Cluster::new(4, 3, 2, 8);
    for i in 0..40 {
        c.write_full(&format!("obj{i}"), &payload(i, 0));
    }
    c.run();
    c.publish(|b| {
        b.mark_out(3).unwrap();
    });
    settle(&mut c);
    for i in 0..40 {
        let (spgid, _, _) = c.locate(&format!("obj{i}"));
        let acting = c.map.pg_to_up_acting_osds(spgid.pgid).unwrap().acting;
        assert!(!acting.contains(&3), "{spgid} still on osd.3: {acting:?}");
        assert_identical(&mut c, &format!("obj{i}"));
    }
}

#[test]
fn out_osd_with_trimmed_log_is_backfilled() {
    let mut c = Cluster::new(4, 3, 2, 1);
    let n = 420;
    for i in 0..n {
        c.write_full(&format!("obj{i}"), &payload(i, 0));
        if i % 50 == 49 {
            c.run();
        }
    }
    c.run();
    let (spgid, _, _) = c.locate("obj0");
    let acting = c.map.pg_to_up_acting_osds(spgid.pgid).unwrap().acting;
    let victim = acting[2];
    c.publish(|b| {
        b.mark_out(victim).unwrap();
    });
    settle(&mut c);
    let acting = c.map.pg_to_up_acting_osds(spgid.pgid).unwrap().acting;
    assert!(!acting.contains(&victim));
    assert_identical(&mut c, "obj0");
    assert_eq!(c.dump_pg(acting[1], spgid).len(), n);
}

/// Step the cluster by hand (the monitor publishes pending up_thru / pg_temp requests when idle) and, once
/// `after` MOSDPGPush went out, send an append to every 7th of `names`; returns their tids.
fn append_during_backfill(c: &mut Cluster, names: &[String], after: usize) -> Vec<u64> {
    let mut pushes = 0;
    let mut tids = Vec::new();
    let mut injected = false;
    for _ in 0..2_000_000 {
        let mut any = c.drain_outputs();
        any |= c.pump_stores();
        if let Some((from, to, msg)) = c.bus.pop_front() {
            any = true;
            if msg.msg_type == ceph_msgs::osd_rep::rep_msg::PG_PUSH {
                pushes += 1;
            }
            if let Some(s) = c.osds.get_mut(&to) {
                s.handle(c.now, c.wall, osd_core::Input::Peer { from, msg });
            }
        }
        if !injected && pushes >= after {
            injected = true;
            for name in names.iter().step_by(7) {
                tids.push(c.send(
                    name,
                    vec![ceph_msgs::osd_op::OSDOp::new(ceph_msgs::osd_op::op::APPEND)
                        .with_extent(0, 6)
                        .with_indata(bytes::Bytes::from_static(b"+extra"))],
                ));
            }
        }
        if !any {
            if injected {
                break;
            }
            c.publish(|_| {});
        }
    }
    assert!(injected, "backfill never got to {after} pushes ({pushes})");
    tids
}

fn check_appended(c: &mut Cluster, names: &[String], round: usize) {
    for (i, name) in names.iter().enumerate().step_by(7) {
        let r = c.read(name);
        c.run();
        let mut want = payload(i, round);
        want.extend_from_slice(b"+extra");
        assert_eq!(c.read_data(r).unwrap(), &want[..], "{name}");
    }
}

/// Client writes while the backfill cursor is half way through an empty target: writes to objects behind the
/// cursor must reach the target too.
#[test]
fn writes_behind_the_backfill_cursor_reach_the_target() {
    let mut c = Cluster::new(4, 3, 2, 1);
    let names: Vec<String> = (0..420).map(|i| format!("obj{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        c.write_full(name, &payload(i, 0));
        if i % 50 == 49 {
            c.run();
        }
    }
    c.run();
    let (spgid, _, _) = c.locate("obj0");
    let victim = c.map.pg_to_up_acting_osds(spgid.pgid).unwrap().acting[2];
    c.publish(|b| {
        b.mark_out(victim).unwrap();
    });
    let tids = append_during_backfill(&mut c, &names, names.len() / 2);
    settle(&mut c);
    for t in &tids {
        assert_eq!(c.reply(*t).unwrap().result, 0, "tid {t}");
    }
    assert_identical(&mut c, "obj0");
    check_appended(&mut c, &names, 0);
}

/// A returning OSD whose log is too old is backfilled over several scan digests of its stale objects; client
/// writes during the backfill to objects the target has not been scanned for yet must not be skipped later.
#[test]
fn writes_ahead_of_the_backfill_cursor_on_a_stale_target() {
    let mut c = Cluster::new(3, 3, 2, 1);
    let names: Vec<String> = (0..700).map(|i| format!("obj{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        c.write_full(name, &payload(i, 0));
        if i % 50 == 49 {
            c.run();
        }
    }
    c.run();
    c.stop(2);
    for (i, name) in names.iter().enumerate() {
        c.write_full(name, &payload(i, 1));
        if i % 50 == 49 {
            c.run();
        }
    }
    c.run();
    c.restart(2);
    let tids = append_during_backfill(&mut c, &names, 50);
    settle(&mut c);
    for t in &tids {
        assert_eq!(c.reply(*t).unwrap().result, 0, "tid {t}");
    }
    assert_identical(&mut c, "obj0");
    check_appended(&mut c, &names, 1);
}
