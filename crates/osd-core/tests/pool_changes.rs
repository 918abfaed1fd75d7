// SPDX-License-Identifier: LGPL-3.0-or-later
//! PG life cycle from pool changes in the map: pg_num growth splits PGs on every OSD (objects stay readable,
//! replicas stay identical), a size change takes replicas in, a deleted pool's PGs are removed from the store.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::Cluster;
use osd_core::state_string;

fn primary_states(c: &Cluster) -> Vec<String> {
    c.osds
        .values()
        .flat_map(|s| s.pg_stats())
        .filter(|r| r.primary)
        .map(|r| state_string(r.state))
        .collect()
}

#[test]
fn pg_num_growth_splits_pgs_and_objects_stay_readable() {
    let mut c = Cluster::new(3, 3, 2, 4);
    let mut tids = Vec::new();
    for i in 0..40 {
        tids.push(c.write_full(&format!("s{i}"), format!("split {i}").as_bytes()));
    }
    c.run();
    for t in &tids {
        assert_eq!(c.reply(*t).unwrap().result, 0);
    }
    c.publish(|b| {
        b.set_pg_num(1, 8).unwrap();
    });
    c.run();
    c.advance_time(Duration::from_secs(1));
    for s in c.osds.values() {
        assert_eq!(s.pg_stats().len(), 8, "every OSD holds the 8 PGs after the split");
    }
    let states = primary_states(&c);
    assert_eq!(states.len(), 8);
    assert!(
        states.iter().all(|s| s == "active+clean"),
        "{states:?}\n{:?}",
        &c.logs[c.logs.len().saturating_sub(20)..]
    );
    for i in 0..40 {
        let r = c.read(&format!("s{i}"));
        c.run();
        assert_eq!(
            c.read_data(r).expect("object lost in the split"),
            format!("split {i}").as_bytes()
        );
    }
    // writes go on in the children
    let w = c.write_full("s0", b"after split");
    c.run();
    assert_eq!(c.reply(w).unwrap().result, 0);
}

#[test]
fn deleted_pool_pgs_are_removed() {
    let mut c = Cluster::new(3, 3, 2, 4);
    let w = c.write_full("gone", b"bye");
    c.run();
    assert_eq!(c.reply(w).unwrap().result, 0);
    c.publish(|b| {
        b.delete_pool(1).unwrap();
    });
    c.run();
    for (o, s) in c.osds.iter_mut() {
        assert!(s.pg_stats().is_empty(), "osd.{o} still holds PGs");
        let left = pg::stored_pgs(s.store_mut()).unwrap();
        assert!(left.is_empty(), "osd.{o} still stores {left:?}");
    }
}

#[test]
fn size_growth_takes_replicas_in() {
    let mut c = Cluster::new(3, 1, 1, 4);
    let mut tids = Vec::new();
    for i in 0..16 {
        tids.push(c.write_full(&format!("g{i}"), format!("grow {i}").as_bytes()));
    }
    c.run();
    for t in &tids {
        assert_eq!(c.reply(*t).unwrap().result, 0);
    }
    c.publish(|b| {
        b.set_pool_size(1, 3, 2).unwrap();
    });
    c.run();
    for _ in 0..20 {
        c.advance_time(Duration::from_secs(1));
        if primary_states(&c).iter().all(|s| s == "active+clean") {
            break;
        }
    }
    let states = primary_states(&c);
    assert!(
        states.iter().all(|s| s == "active+clean"),
        "{states:?}\n{:?}",
        &c.logs[c.logs.len().saturating_sub(20)..]
    );
    for i in 0..16 {
        let name = format!("g{i}");
        let (spgid, _, _) = c.locate(&name);
        let acting = c.map.pg_to_up_acting_osds(spgid.pgid).unwrap().acting;
        assert_eq!(acting.len(), 3);
        let d0 = c.dump_pg(acting[0], spgid);
        for &o in &acting[1..] {
            assert!(
                d0 == c.dump_pg(o, spgid),
                "pg {spgid}: osd.{o} differs from osd.{}",
                acting[0]
            );
        }
        let r = c.read(&name);
        c.run();
        assert_eq!(c.read_data(r).unwrap(), format!("grow {i}").as_bytes());
    }
}
