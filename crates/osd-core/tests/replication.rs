// SPDX-License-Identifier: LGPL-3.0-or-later
//! Replicated pools through the core: three OSDs, pool size 3 / min_size 2. Writes are acknowledged only once
//! every acting replica is durable; replicas hold identical objects; an OSD going down leaves PGs active
//! (undersized+degraded) and writes continue; below min_size ops wait and complete when an OSD returns;
//! restarted OSDs reload their PGs; a replicated write lost with a broken connection is resent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use ceph_msgs::osd_rep::rep_msg;
use common::Cluster;
use osd_core::{Input, state_string};

fn all_states(c: &Cluster) -> Vec<(i32, String)> {
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

fn assert_all(c: &Cluster, want: &str) {
    let states = all_states(c);
    assert!(!states.is_empty());
    for (o, s) in &states {
        assert_eq!(
            s,
            want,
            "osd.{o}: {states:?}\nlog tail: {:?}",
            &c.logs[c.logs.len().saturating_sub(20)..]
        );
    }
}

/// Compare one PG's objects across its acting set.
fn assert_identical(c: &mut Cluster, name: &str) {
    let (spgid, _, _) = c.locate(name);
    let acting = c.map.pg_to_up_acting_osds(spgid.pgid).unwrap().acting;
    let dumps: Vec<_> = acting.iter().map(|&o| (o, c.dump_pg(o, spgid))).collect();
    let (o0, d0) = &dumps[0];
    assert!(!d0.is_empty(), "pg {spgid} is empty on osd.{o0}");
    for (o, d) in &dumps[1..] {
        assert_eq!(
            d0.keys().collect::<Vec<_>>(),
            d.keys().collect::<Vec<_>>(),
            "object sets differ osd.{o0} vs osd.{o}"
        );
        for (k, v) in d0 {
            assert_eq!(
                Some(v),
                d.get(k),
                "object {:?} differs between osd.{o0} and osd.{o}",
                String::from_utf8_lossy(k)
            );
        }
    }
}

#[test]
fn size3_pgs_go_active_clean() {
    let c = Cluster::new(3, 3, 2, 8);
    let states = all_states(&c);
    assert_eq!(states.len(), 8, "{states:?}");
    assert_all(&c, "active+clean");
    // every OSD holds every PG (3 OSDs, size 3)
    for s in c.osds.values() {
        assert_eq!(s.pg_stats().len(), 8);
    }
}

#[test]
fn write_is_acked_only_after_every_replica_is_durable() {
    let mut c = Cluster::new(3, 3, 2, 8);
    let (spgid, _, primary) = c.locate("slow");
    let acting = c.map.pg_to_up_acting_osds(spgid.pgid).unwrap().acting;
    let slow = *acting.iter().find(|&&o| o != primary).unwrap();
    c.hold_durable.insert(slow);
    let w = c.write_full("slow", b"replicated bytes");
    c.run();
    assert!(
        c.reply(w).is_none(),
        "acknowledged while osd.{slow} had not made the write durable"
    );
    // the other replica and the primary already applied it
    for o in acting.iter().filter(|&&o| o != slow) {
        assert_eq!(c.dump_pg(*o, spgid).len(), 1, "osd.{o} does not have the object");
    }
    c.hold_durable.clear();
    c.run();
    assert_eq!(c.reply(w).unwrap().result, 0);
    let r = c.read("slow");
    c.run();
    assert_eq!(c.read_data(r).unwrap(), &b"replicated bytes"[..]);
}

#[test]
fn replicas_hold_identical_objects() {
    let mut c = Cluster::new(3, 3, 2, 4);
    let mut tids = Vec::new();
    for i in 0..24 {
        let name = format!("obj{i}");
        tids.push(c.write_full(&name, format!("payload {i} ").repeat(i + 1).as_bytes()));
        if i % 3 == 0 {
            tids.push(c.send(
                &name,
                vec![ceph_msgs::osd_op::OSDOp::new(ceph_msgs::osd_op::op::APPEND)
                    .with_extent(0, 4)
                    .with_indata(bytes::Bytes::from_static(b"tail"))],
            ));
        }
    }
    c.run();
    for t in &tids {
        assert_eq!(c.reply(*t).unwrap().result, 0, "tid {t}");
    }
    for i in 0..24 {
        assert_identical(&mut c, &format!("obj{i}"));
    }
}

#[test]
fn osd_down_leaves_pgs_active_undersized_and_writes_continue() {
    let mut c = Cluster::new(3, 3, 2, 8);
    let w = c.write_full("before", b"one");
    c.run();
    assert_eq!(c.reply(w).unwrap().result, 0);
    c.stop(2);
    assert_all(&c, "active+undersized+degraded");
    let mut tids = Vec::new();
    for i in 0..10 {
        tids.push(c.write_full(&format!("during{i}"), b"two"));
    }
    c.run();
    for t in &tids {
        assert_eq!(c.reply(*t).unwrap().result, 0);
    }
    let r = c.read("before");
    c.run();
    assert_eq!(c.read_data(r).unwrap(), &b"one"[..]);
    for i in 0..10 {
        assert_identical(&mut c, &format!("during{i}"));
    }
}

#[test]
fn below_min_size_ops_wait_and_complete_when_an_osd_returns() {
    let mut c = Cluster::new(3, 3, 2, 8);
    c.stop(1);
    c.stop(2);
    for (o, s) in all_states(&c) {
        assert!(s.contains("peered") && !s.contains("active"), "osd.{o}: {s}");
    }
    let w = c.write_full("waiting", b"patience");
    c.run();
    c.advance_time(Duration::from_secs(5));
    assert!(c.reply(w).is_none(), "a write was acknowledged below min_size");
    c.restart(1);
    c.advance_time(Duration::from_secs(1));
    assert_eq!(
        c.reply(w)
            .expect("the write never completed after osd.1 returned")
            .result,
        0
    );
    assert_identical(&mut c, "waiting");
}

#[test]
fn primary_failure_keeps_acknowledged_writes() {
    let mut c = Cluster::new(3, 3, 2, 8);
    let mut tids = Vec::new();
    for i in 0..12 {
        tids.push(c.write_full(&format!("k{i}"), format!("v{i}").as_bytes()));
    }
    c.run();
    for t in &tids {
        assert_eq!(c.reply(*t).unwrap().result, 0);
    }
    let (_, _, primary) = c.locate("k0");
    c.stop(primary);
    let (_, _, new_primary) = c.locate("k0");
    assert_ne!(primary, new_primary);
    for i in 0..12 {
        let r = c.read(&format!("k{i}"));
        c.run();
        assert_eq!(
            c.read_data(r).unwrap(),
            format!("v{i}").as_bytes(),
            "k{i} after osd.{primary} died"
        );
    }
    let w = c.write_full("k0", b"new");
    c.run();
    assert_eq!(c.reply(w).unwrap().result, 0);
}

#[test]
fn restarted_osd_reloads_its_pgs() {
    let mut c = Cluster::new(3, 3, 2, 8);
    let mut tids = Vec::new();
    for i in 0..12 {
        tids.push(c.write_full(&format!("r{i}"), format!("v{i}").as_bytes()));
    }
    c.run();
    c.stop(1);
    c.restart(1);
    c.advance_time(Duration::from_secs(1));
    assert_eq!(c.osds[&1].pg_stats().len(), 8);
    assert_all(&c, "active+clean");
    for i in 0..12 {
        assert_identical(&mut c, &format!("r{i}"));
    }
    // the restarted OSD keeps taking writes
    let w = c.write_full("r0", b"again");
    c.run();
    assert_eq!(c.reply(w).unwrap().result, 0);
    assert_identical(&mut c, "r0");
}

/// The PG of `name`, its primary and one of its other acting OSDs.
fn primary_and_replica(c: &Cluster, name: &str) -> (denc::SpgId, i32, i32) {
    let (spgid, _, primary) = c.locate(name);
    let acting = c.map.pg_to_up_acting_osds(spgid.pgid).unwrap().acting;
    let replica = *acting.iter().find(|&&o| o != primary).unwrap();
    (spgid, primary, replica)
}

/// `at` learns that its connection to `osd` broke.
fn peer_reset(c: &mut Cluster, at: i32, osd: i32) {
    let (now, wall) = (c.now, c.wall);
    c.osds
        .get_mut(&at)
        .unwrap()
        .handle(now, wall, Input::PeerReset(osd));
}

#[test]
fn lost_repop_is_resent_after_peer_reset() {
    let mut c = Cluster::new(3, 3, 2, 8);
    let (_, primary, victim) = primary_and_replica(&c, "lost");
    let w = c.write_full("lost", b"again and again");
    drop_one_repop_to(&mut c, victim);
    c.run();
    assert!(c.reply(w).is_none(), "acknowledged without osd.{victim}");
    peer_reset(&mut c, primary, victim);
    c.run();
    assert_eq!(c.reply(w).unwrap().result, 0);
    assert_identical(&mut c, "lost");
}

/// A second object in the PG of `name` (found by trying names).
fn same_pg_as(c: &Cluster, name: &str) -> String {
    let (spgid, _, _) = c.locate(name);
    (0..10_000)
        .map(|i| format!("{name}-{i}"))
        .find(|n| c.locate(n).0 == spgid)
        .unwrap()
}

/// A write's MOSDRepOp is lost with a broken connection and the next write's overtakes the primary's resend of
/// it: the replica must not apply the later one over the hole (it would then take the resend for a duplicate and
/// answer it without having the data). It drops it; the resends bring both, in order.
#[test]
fn repop_overtaking_a_lost_one_waits_for_its_resend() {
    let mut c = Cluster::new(3, 3, 2, 8);
    let (spgid, primary, victim) = primary_and_replica(&c, "first");
    let second = same_pg_as(&c, "first");
    let w1 = c.write_full("first", b"lost on the way");
    drop_one_repop_to(&mut c, victim);
    let w2 = c.write_full(&second, b"arrives first");
    c.run();
    assert!(
        c.reply(w1).is_none(),
        "first write acknowledged without osd.{victim}"
    );
    assert!(
        c.reply(w2).is_none(),
        "second write acknowledged while osd.{victim} misses the first"
    );
    assert!(
        c.dump_pg(victim, spgid).is_empty(),
        "osd.{victim} applied a write over a hole in its log"
    );
    peer_reset(&mut c, primary, victim);
    c.run();
    assert_eq!(c.reply(w1).unwrap().result, 0);
    assert_eq!(c.reply(w2).unwrap().result, 0);
    assert_eq!(c.dump_pg(victim, spgid).len(), 2);
    assert_identical(&mut c, "first");
}

/// A replica's commit reply is lost; the primary resends the write — after a connection reset at once, else when
/// it is overdue (5 s) — and the replica, which has it durable already and has nothing more to write, answers
/// the duplicate at once.
#[test]
fn lost_commit_reply_is_answered_again_on_resend() {
    for reset in [true, false] {
        let mut c = Cluster::new(3, 3, 2, 8);
        let (spgid, primary, victim) = primary_and_replica(&c, "quiet");
        let w = c.write_full("quiet", b"committed, reply lost");
        // deliver everything except the victim's commit reply
        assert_eq!(run_losing_replies_of(&mut c, victim), 1);
        assert!(c.reply(w).is_none(), "acknowledged without osd.{victim}'s reply");
        assert_eq!(c.dump_pg(victim, spgid).len(), 1, "osd.{victim} has the write");
        if reset {
            peer_reset(&mut c, primary, victim);
        } else {
            c.advance_time(Duration::from_secs(6));
        }
        c.run();
        assert_eq!(c.reply(w).unwrap().result, 0, "reset: {reset}");
        assert_identical(&mut c, "quiet");
    }
}

/// A rep op lost with nothing reported (no connection reset): the primary sends it again once it has waited
/// too long, the replica applies it, and the write is acknowledged.
#[test]
fn rep_op_lost_unnoticed_is_sent_again() {
    let mut c = Cluster::new(3, 3, 2, 8);
    let (spgid, _, victim) = primary_and_replica(&c, "unnoticed");
    let w = c.write_full("unnoticed", b"lost, no reset");
    drop_one_repop_to(&mut c, victim);
    c.run();
    assert!(c.reply(w).is_none(), "acknowledged without osd.{victim}");
    c.advance_time(Duration::from_secs(2));
    c.run();
    assert!(c.reply(w).is_none(), "sent again before it was overdue");
    c.advance_time(Duration::from_secs(4));
    c.run();
    assert_eq!(c.reply(w).unwrap().result, 0);
    assert_eq!(c.dump_pg(victim, spgid).len(), 1);
    assert_identical(&mut c, "unnoticed");
}

/// Lose the one MOSDRepOp on its way to `victim` (nothing reports the loss).
fn drop_one_repop_to(c: &mut Cluster, victim: i32) {
    c.drain_outputs();
    let before = c.bus.len();
    c.bus
        .retain(|(_, to, m)| !(*to == victim && m.msg_type == rep_msg::REPOP));
    assert_eq!(c.bus.len() + 1, before, "one MOSDRepOp to osd.{victim} dropped");
}

/// Run the cluster until it settles, losing every commit reply `victim` sends; returns how many were lost.
fn run_losing_replies_of(c: &mut Cluster, victim: i32) -> usize {
    let mut lost = 0;
    for _ in 0..1000 {
        let mut any = c.drain_outputs();
        let before = c.bus.len();
        c.bus
            .retain(|(from, _, m)| !(*from == victim && m.msg_type == rep_msg::REPOPREPLY));
        lost += before - c.bus.len();
        any |= c.pump_stores();
        while let Some((from, to, msg)) = c.bus.pop_front() {
            any = true;
            let (now, wall) = (c.now, c.wall);
            c.osds
                .get_mut(&to)
                .unwrap()
                .handle(now, wall, Input::Peer { from, msg });
        }
        if !any {
            break;
        }
    }
    lost
}

#[test]
fn malformed_peer_messages_are_dropped() {
    let mut c = Cluster::new(3, 3, 2, 4);
    let (now, wall) = (c.now, c.wall);
    let s = c.osds.get_mut(&0).unwrap();
    for t in [
        rep_msg::REPOP,
        rep_msg::REPOPREPLY,
        rep_msg::PG_LOG,
        rep_msg::PG_PUSH,
        9999,
    ] {
        let msg = ceph_msgs::Message {
            msg_type: t,
            version: 3,
            compat_version: 1,
            priority: 127,
            tid: 0,
            front: bytes::Bytes::from_static(&[1, 2, 3, 0xff, 0xff, 0xff, 0xff, 7]),
            middle: bytes::Bytes::new(),
            data: bytes::Bytes::from_static(&[9; 5]),
            ..Default::default()
        };
        s.handle(now, wall, Input::Peer { from: 1, msg });
    }
    assert!(s.status().peer_msgs_dropped >= 5);
    c.run();
    assert_all(&c, "active+clean");
}

#[test]
fn write_in_flight_when_a_replica_dies_is_acked_after_repeering() {
    let mut c = Cluster::new(3, 3, 2, 8);
    let (spgid, _, primary) = c.locate("inflight");
    let acting = c.map.pg_to_up_acting_osds(spgid.pgid).unwrap().acting;
    let victim = *acting.iter().find(|&&o| o != primary).unwrap();
    c.hold_durable.insert(victim);
    let w = c.write_full("inflight", b"survives");
    c.run();
    assert!(c.reply(w).is_none());
    // the replica dies before answering; the new interval activates with the two others, which both have
    // the write durably: it is acknowledged then (Ceph answers the requeued op as a dup after re-peering)
    c.hold_durable.clear();
    c.stop(victim);
    c.run();
    assert_eq!(c.reply(w).expect("the write was never acknowledged").result, 0);
    let r = c.read("inflight");
    c.run();
    assert_eq!(c.read_data(r).unwrap(), &b"survives"[..]);
    assert_identical(&mut c, "inflight");
}

#[test]
fn resent_write_after_primary_failure_is_answered_from_the_log() {
    let mut c = Cluster::new(3, 3, 2, 8);
    let w = c.write_full("dup", b"once");
    c.run();
    let first = c.reply(w).unwrap().clone();
    assert_eq!(first.result, 0);
    let (_, _, primary) = c.locate("dup");
    c.stop(primary);
    // the client did not see the reply (say) and resends to the new primary: answered from the log, not
    // executed again (same version)
    c.resend(w);
    c.run();
    let again = c.reply(w).expect("no answer to the resend").clone();
    assert_eq!(again.result, 0);
    assert_eq!(
        again.user_version, first.user_version,
        "the resend was executed a second time"
    );
    assert_eq!(again.replay_version, first.replay_version);
}

/// `cargo test --release -p osd-core --test replication bench -- --ignored --nocapture`: client writes through
/// three cores (engine, peering, replication, message encode/decode, simulated devices) in one thread.
#[test]
#[ignore]
fn bench_replicated_writes() {
    for (size, min) in [(1u8, 1u8), (3, 2)] {
        let mut c = Cluster::new(3, size, min, 32);
        let n = 3000;
        let data = vec![0x5au8; 4096];
        let t0 = std::time::Instant::now();
        let mut tids = Vec::with_capacity(n);
        for i in 0..n {
            tids.push(c.write_full(&format!("bench{i}"), &data));
            if i % 32 == 31 {
                c.run();
            }
        }
        c.run();
        let dt = t0.elapsed();
        for t in &tids {
            assert_eq!(c.reply(*t).unwrap().result, 0);
        }
        println!(
            "size {size}: {n} x 4 KiB writes in {:.2?}: {:.0} writes/s, {:.1} us/write (all OSDs on one thread)",
            dt,
            n as f64 / dt.as_secs_f64(),
            dt.as_secs_f64() * 1e6 / n as f64
        );
    }
}

#[test]
fn expired_read_lease_holds_reads_until_the_map_moves_on() {
    let mut c = Cluster::new(3, 3, 2, 8);
    let w = c.write_full("leased", b"v1");
    c.run();
    assert_eq!(c.reply(w).unwrap().result, 0);
    let (spgid, _, primary) = c.locate("leased");
    let acting = c.map.pg_to_up_acting_osds(spgid.pgid).unwrap().acting;
    let cut = *acting.iter().find(|&&o| o != primary).unwrap();
    // reads are served while the lease runs
    let r = c.read("leased");
    c.run();
    assert_eq!(c.read_data(r).unwrap(), &b"v1"[..]);
    // a replica stops answering (not yet marked down): its lease acks stop, the primary's lease runs out
    c.partitioned.insert(cut);
    for _ in 0..20 {
        c.advance_time(Duration::from_secs(1));
    }
    let r = c.read("leased");
    c.run();
    assert!(
        c.reply(r).is_none(),
        "a read was served after the read lease expired"
    );
    // the monitor marks it down: the PG re-peers without it and the waiting read is answered
    c.publish(|b| {
        b.mark_down(cut).unwrap();
    });
    c.run();
    c.advance_time(Duration::from_secs(1));
    assert_eq!(c.read_data(r).expect("the read never completed").as_ref(), b"v1");
}
