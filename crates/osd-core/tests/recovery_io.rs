// SPDX-License-Identifier: LGPL-3.0-or-later
//! Client I/O while PGs move (issue 6: writes must keep being acknowledged during backfill and recovery, as in
//! Ceph, where only ops on the object being moved wait). The cluster is stepped one message at a time; a
//! client writes new objects at a steady rate (one every few steps, like a benchmark) and every write's wait is
//! measured in steps while the PG is backfilling or recovering.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;

use common::Cluster;
use denc::SpgId;
use osd_core::{Input, state_string};

fn payload(i: usize) -> Vec<u8> {
    format!("object {i} ").repeat(1 + i % 5).into_bytes()
}

/// One step of the cluster: outputs, store events, one message. Whether anything moved.
fn step(c: &mut Cluster) -> bool {
    let mut any = c.drain_outputs();
    any |= c.pump_stores();
    if let Some((from, to, msg)) = c.bus.pop_front() {
        any = true;
        if let Some(s) = c.osds.get_mut(&to) {
            s.handle(c.now, c.wall, Input::Peer { from, msg });
        }
    }
    any
}

fn moving(c: &Cluster, spgid: SpgId) -> bool {
    c.osds.values().flat_map(|s| s.pg_stats()).any(|r| {
        r.spgid == spgid && r.primary && {
            let s = state_string(r.state);
            s.contains("backfill") || s.contains("recover")
        }
    })
}

/// What the writes issued while the PG moved saw.
#[derive(Debug)]
struct Moved {
    /// Writes issued while the PG was moving, and how many of them were answered before it stopped moving.
    issued: usize,
    answered_while_moving: usize,
    /// The longest wait of any write issued while moving, in steps.
    max_wait: usize,
    steps_moving: usize,
}

impl Moved {
    /// At least `min_issued` writes were issued during the move, 80 % of them were answered before it ended,
    /// and none waited for a quarter of it.
    fn assert_flowed(&self, min_issued: usize) {
        eprintln!("{self:?}");
        assert!(
            self.issued >= min_issued,
            "too few writes during the move: {self:?}"
        );
        assert!(
            self.answered_while_moving * 10 >= self.issued * 8,
            "writes stalled while the PG moved: {self:?}"
        );
        assert!(
            self.max_wait < self.steps_moving / 4,
            "a write waited for most of the move: {self:?}"
        );
    }
}

/// Drive the cluster after a change that moves `spgid`: a write every `every` steps (to `name(i)`, with
/// `payload(i)`) until the PG is clean again; returns the statistics and the names written.
fn write_through_move(
    c: &mut Cluster,
    spgid: SpgId,
    name: impl Fn(usize) -> String,
    every: usize,
) -> (Moved, Vec<String>) {
    let mut issued: BTreeMap<u64, (usize, bool)> = BTreeMap::new(); // tid -> (step issued, while moving)
    let mut names = Vec::new();
    let mut waits = Vec::new();
    let mut answered_while_moving = 0;
    let mut steps_moving = 0;
    let mut seen_moving = false;
    let mut idle = 0;
    for n in 0..3_000_000usize {
        let mv = moving(c, spgid);
        seen_moving |= mv;
        if mv {
            steps_moving += 1;
        }
        if n % every == 0 && (mv || !seen_moving) {
            let nm = name(names.len());
            let (pg, _, _) = c.locate(&nm);
            if pg == spgid {
                let t = c.write_full(&nm, &payload(names.len()));
                issued.insert(t, (n, mv));
            }
            names.push(nm);
        }
        let any = step(c);
        let done: Vec<u64> = issued.keys().copied().filter(|t| c.reply(*t).is_some()).collect();
        for t in done {
            let (at, mvd) = issued.remove(&t).unwrap();
            assert_eq!(c.reply(t).unwrap().result, 0, "{t}");
            if mvd {
                waits.push(n - at);
                if moving(c, spgid) {
                    answered_while_moving += 1;
                }
            }
        }
        if !any {
            idle += 1;
            if seen_moving && !moving(c, spgid) && issued.is_empty() {
                break;
            }
            // the monitor publishes pending up_thru / pg_temp requests when nothing else moves
            c.publish(|_| {});
            if idle > 100_000 {
                panic!("stuck: {} writes unanswered", issued.len());
            }
        }
    }
    assert!(seen_moving, "the PG never moved");
    let n_moving = waits.len();
    (
        Moved {
            issued: n_moving,
            answered_while_moving,
            max_wait: waits.iter().copied().max().unwrap_or(0),
            steps_moving,
        },
        names,
    )
}

/// Restart a stopped OSD and mark it up, without running the cluster (the test steps it).
fn restart_quiet(c: &mut Cluster, osd: i32) {
    let store = c.stopped.remove(&osd).unwrap();
    let dev = store.umount().unwrap();
    let store = ferrostore::Store::mount(dev, 0, ferrostore::StoreConfig::default()).unwrap();
    let s = osd_core::OsdShard::new(c.config(osd), store);
    c.osds.insert(osd, s);
    c.publish(|b| {
        b.mark_up(osd, 100 + osd as u32).unwrap();
    });
}

fn fill(c: &mut Cluster, n: usize) {
    for i in 0..n {
        c.write_full(&format!("obj{i}"), &payload(i));
        if i % 50 == 49 {
            c.run();
        }
    }
    c.run();
}

/// An OSD marked out: its PG is backfilled to the OSD replacing it (trimmed log). New writes keep being
/// acknowledged during the backfill, none waits long, and everything is intact and identical after.
#[test]
fn writes_flow_while_an_out_osd_is_backfilled() {
    let mut c = Cluster::new(4, 3, 2, 1);
    fill(&mut c, 420);
    let (spgid, _, _) = c.locate("obj0");
    let victim = c.map.pg_to_up_acting_osds(spgid.pgid).unwrap().acting[2];
    c.publish(|b| {
        b.mark_out(victim).unwrap();
    });
    let (m, names) = write_through_move(&mut c, spgid, |i| format!("new{i}"), 40);
    m.assert_flowed(20);
    check(&mut c, spgid, &names);
}

/// An OSD returns after missing writes: its objects are recovered from the log. Writes to new objects flow
/// during the recovery, and a write to an object still degraded waits only until that object is recovered
/// (it is taken next, Ceph's `maybe_kick_recovery`), not until the whole recovery is done.
#[test]
fn writes_flow_while_a_returning_osd_is_recovered() {
    let mut c = Cluster::new(3, 3, 2, 1);
    fill(&mut c, 20);
    c.stop(2);
    // while osd.2 is down, 300 objects change; they are degraded on it when it returns
    for i in 0..300 {
        c.write_full(&format!("obj{i}"), &payload(i + 1));
        if i % 50 == 49 {
            c.run();
        }
    }
    c.run();
    let (spgid, _, _) = c.locate("obj0");
    restart_quiet(&mut c, 2);
    // alternately a new object and an overwrite of a still degraded one (from the end of the recovery order)
    let (m, names) = write_through_move(
        &mut c,
        spgid,
        |i| {
            if i % 2 == 0 {
                format!("new{i}")
            } else {
                format!("obj{}", 299 - i / 2)
            }
        },
        40,
    );
    m.assert_flowed(10);
    check(&mut c, spgid, &names);
}

fn check(c: &mut Cluster, spgid: SpgId, names: &[String]) {
    c.run();
    for (i, name) in names.iter().enumerate() {
        let (pg, _, _) = c.locate(name);
        if pg != spgid {
            continue;
        }
        let r = c.read(name);
        c.run();
        assert_eq!(c.read_data(r).unwrap(), &payload(i)[..], "{name}");
    }
    let acting = c.map.pg_to_up_acting_osds(spgid.pgid).unwrap().acting;
    let d0 = c.dump_pg(acting[0], spgid);
    for &o in &acting[1..] {
        let d = c.dump_pg(o, spgid);
        assert!(d0 == d, "pg {spgid}: osd.{} and osd.{o} differ", acting[0]);
    }
}
