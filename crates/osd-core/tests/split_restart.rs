// SPDX-License-Identifier: LGPL-3.0-or-later
//! A restart across PG splits: the OSD was down while its pool's pg_num grew (once or twice). Either the first
//! map it sees after the restart is already past the split (the monitor trimmed the epochs it missed): its
//! stored PGs still have the old split and must split on load, before the children are created, or the objects
//! that moved to a child are lost (the simulator's `finding_split_across_restart_loses_objects_seed1`); or it
//! replays every epoch it missed and splits at each.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Cluster;

/// Restart osd.1 on its store and mark it up; `replay`: it replays the epochs it missed, else it jumps to the
/// current map.
fn restart(c: &mut Cluster, replay: bool) {
    let s = c.remount(1, replay);
    c.osds.insert(1, s);
    c.publish(|b| {
        b.mark_up(1, 101).unwrap();
    });
    c.run();
}

/// Every object reads back as written.
fn check_all(c: &mut Cluster, what: &str) {
    for i in 0..48 {
        let got = c.read_eventually(&format!("r{i}"), 5);
        let (pg, _, primary) = c.locate(&format!("r{i}"));
        assert_eq!(
            got.unwrap_or_else(|| panic!(
                "r{i} in {pg} on osd.{primary} {what}: {:?}",
                &c.logs[c.logs.len().saturating_sub(30)..]
            )),
            format!("restart {i}").as_bytes(),
            "r{i} {what}"
        );
    }
}

fn restart_over_split(steps: &[u32], replay: bool) {
    let mut c = Cluster::new(2, 1, 1, 4);
    let mut tids = Vec::new();
    for i in 0..48 {
        tids.push(c.write_full(&format!("r{i}"), format!("restart {i}").as_bytes()));
    }
    c.run();
    for t in &tids {
        assert_eq!(c.reply(*t).unwrap().result, 0);
    }
    c.stop(1);
    for &n in steps {
        c.publish(|b| {
            b.split_pg_num(1, n).unwrap();
        });
        c.run();
    }
    restart(&mut c, replay);
    c.settle(5);
    let pg_num = *steps.last().unwrap();
    for o in 0..2 {
        let held = c.osds[&o].pg_stats().len();
        assert!(held <= pg_num as usize, "osd.{o} holds {held} PGs of {pg_num}");
    }
    check_all(&mut c, "after the restart");
    // and the split is persistent: another restart finds the children on the store
    c.stop(1);
    restart(&mut c, replay);
    c.settle(3);
    check_all(&mut c, "after a second restart");
    assert!(
        !c.logs.iter().any(|l| l.contains("not routed")),
        "{:?}",
        c.logs
            .iter()
            .filter(|l| l.contains("not routed"))
            .collect::<Vec<_>>()
    );
}

#[test]
fn restart_over_one_split() {
    restart_over_split(&[8], false);
}

#[test]
fn restart_over_two_splits_to_an_uneven_pg_num() {
    restart_over_split(&[6, 16, 23], false);
}

#[test]
fn restart_over_two_splits() {
    restart_over_split(&[8, 32], false);
}

/// The same restarts replaying every epoch missed: the stored PGs split at each pg_num change in turn.
#[test]
fn restart_replaying_two_splits() {
    restart_over_split(&[8, 32], true);
    restart_over_split(&[6, 16, 23], true);
}
