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

#[test]
fn backfills_are_throttled_per_shard() {
    // a short log, so an OSD taking over copies is backfilled rather than recovered from the log
    let mut c = Cluster::with_tuning(4, 3, 2, 8, |cfg| {
        cfg.pg.osd_min_pg_log_entries = 8;
        cfg.pg.osd_pg_log_trim_min = 4;
        cfg.osd_max_backfills = 1;
    });
    for i in 0..240 {
        c.write_full(&format!("b{i}"), format!("backfill {i}").as_bytes());
        if i % 40 == 39 {
            c.run();
        }
    }
    c.run();
    // the OSD in the most acting sets goes out: several PGs of one primary need backfill at once
    let mut count = std::collections::BTreeMap::<i32, usize>::new();
    for seed in 0..8 {
        for o in c
            .map
            .pg_to_up_acting_osds(denc::PgId::new(1, seed))
            .unwrap()
            .acting
        {
            *count.entry(o).or_default() += 1;
        }
    }
    let victim = count.iter().max_by_key(|(_, n)| **n).map(|(o, _)| *o).unwrap();
    c.publish(|b| {
        b.mark_out(victim).unwrap();
    });
    for _ in 0..30 {
        c.advance_time(Duration::from_secs(1));
        if primary_states(&c).iter().all(|s| s == "active+clean") {
            break;
        }
    }
    let states = primary_states(&c);
    assert!(states.iter().all(|s| s == "active+clean"), "{states:?}");
    let seen: Vec<usize> = c.osds.values().map(|s| s.status().backfills_max_seen).collect();
    assert!(
        seen.iter().all(|&n| n <= 1),
        "a shard ran more than osd_max_backfills at once: {seen:?}"
    );
    assert!(seen.contains(&1), "no backfill happened: {seen:?}");
    assert!(
        c.osds.values().all(|s| s.status().backfills_active == 0),
        "a slot was never given back"
    );
    for i in (0..240).step_by(17) {
        let r = c.read(&format!("b{i}"));
        c.run();
        assert_eq!(c.read_data(r).unwrap(), format!("backfill {i}").as_bytes());
    }
}
