// SPDX-License-Identifier: LGPL-3.0-or-later
//! A restart that jumps over PG splits: the OSD was down while its pool's pg_num grew (once or twice), and the
//! first map it sees after the restart is already past the split. Its stored PGs still have the old split; they
//! must split on load, before the children are created, or the objects that moved to a child are lost (the
//! simulator's `finding_split_across_restart_loses_objects_seed1`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::Cluster;

fn restart_over_split(steps: &[u32]) {
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
    c.restart(1);
    for _ in 0..5 {
        c.advance_time(Duration::from_secs(1));
    }
    let pg_num = *steps.last().unwrap();
    for o in 0..2 {
        let held = c.osds[&o].pg_stats().len();
        assert!(held <= pg_num as usize, "osd.{o} holds {held} PGs of {pg_num}");
    }
    for i in 0..48 {
        let r = c.read(&format!("r{i}"));
        c.run();
        for _ in 0..5 {
            if c.reply(r).is_some() {
                break;
            }
            c.advance_time(Duration::from_secs(1));
        }
        let (pg, _, primary) = c.locate(&format!("r{i}"));
        assert_eq!(
            c.read_data(r).unwrap_or_else(|| panic!(
                "r{i} in {pg} on osd.{primary}: {:?}; {:?}",
                c.reply(r).map(|x| x.result),
                &c.logs[c.logs.len().saturating_sub(30)..]
            )),
            format!("restart {i}").as_bytes(),
            "r{i} {:?}",
            &c.logs[c.logs.len().saturating_sub(30)..]
        );
    }
    // and the split is persistent: another restart finds the children on the store
    c.stop(1);
    c.restart(1);
    for _ in 0..3 {
        c.advance_time(Duration::from_secs(1));
    }
    for i in 0..48 {
        let r = c.read(&format!("r{i}"));
        c.run();
        for _ in 0..5 {
            if c.reply(r).is_some() {
                break;
            }
            c.advance_time(Duration::from_secs(1));
        }
        assert_eq!(
            c.read_data(r).expect("object lost after a second restart"),
            format!("restart {i}").as_bytes()
        );
    }
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
    restart_over_split(&[8]);
}

#[test]
fn restart_over_two_splits_to_an_uneven_pg_num() {
    restart_over_split(&[6, 16, 23]);
}

#[test]
fn restart_over_two_splits() {
    restart_over_split(&[8, 32]);
}
