// SPDX-License-Identifier: LGPL-3.0-or-later
//! Issue 6, map history: a restarted ferro-osd catches up through every OSDMap epoch it missed (live throwaway
//! cluster, crate testcluster: classic mon + mgr, three ferro-osds, a size-3 pool on class `ferro`). osd.2 is
//! stopped (noout); while it is down the map moves on by several epochs (osd.1 marked out and in again, a pool
//! created, osd.2 marked down); osd.2 restarts, subscribes to the osdmap from the epoch after the newest it
//! stored and hands each epoch to its cores in order (its log says so), and the cluster returns to active+clean
//! with every object byte-exact. Skips when Ceph or python3-rados is missing.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use testcluster::Cluster;

mod live;
use live::{ferro_two_shards, split_objects, three_osds_and_pool, wait_active_clean};

const OBJECTS: u32 = 60;

fn objects(c: &Cluster, pool: &str, mode: &str) -> String {
    split_objects(c, pool, mode, OBJECTS, Duration::from_secs(90))
}

fn epoch(c: &Cluster) -> u64 {
    let v = c.ceph_json(&["osd", "dump"]).unwrap();
    v["epoch"].as_u64().unwrap_or(0)
}

#[test]
fn restarted_osd_replays_every_missed_epoch() {
    let t0 = Instant::now();
    let f = ferro_two_shards();
    let pool = "catchup";
    let Some((c, ids)) = three_osds_and_pool(&f, pool, 8) else {
        return;
    };
    let out = objects(&c, pool, "write");
    assert!(out.contains(&format!("wrote {OBJECTS}")), "{out}");

    // osd.2 stops; the map moves on without it
    let down = ids[2];
    let name = format!("osd.{down}");
    c.ceph(&["osd", "set", "noout"]).unwrap();
    c.kill_daemon(&name).unwrap();
    c.ceph(&["osd", "down", &down.to_string()]).unwrap();
    let before = epoch(&c);
    c.ceph(&["osd", "out", &ids[1].to_string()]).unwrap();
    c.ceph(&["osd", "in", &ids[1].to_string()]).unwrap();
    c.ceph(&["osd", "pool", "create", "catchup2", "4", "4", "replicated", "r3"])
        .unwrap();
    let after = epoch(&c);
    assert!(after >= before + 3, "the map moved only {before} -> {after}");
    let log_before = std::fs::read_to_string(c.log_path(&name)).unwrap_or_default();

    c.restart_osd(down, &f).unwrap();
    c.ceph(&["osd", "unset", "noout"]).unwrap();
    wait_active_clean(&c, Duration::from_secs(120));
    let out = objects(&c, pool, "verify");
    assert!(
        out.contains(&format!("verified {OBJECTS} objects, 0 bad")),
        "after the restart: {out}"
    );

    // its log: the subscription started after its stored epoch, and it went through every epoch since
    let log = std::fs::read_to_string(c.log_path(&name)).unwrap_or_default();
    let new: &str = match log.strip_prefix(log_before.as_str()) {
        Some(rest) => rest,
        None => &log,
    };
    let start = new
        .lines()
        .find_map(|l| {
            let rest = l.split("stored osdmap epoch ").nth(1)?;
            let (stored, from) = rest.split_once(": subscribing to osdmap from epoch ")?;
            Some((stored.parse::<u64>().ok()?, from.trim().parse::<u64>().ok()?))
        })
        .unwrap_or_else(|| panic!("osd.{down} did not log its subscription start:\n{new}"));
    assert_eq!(start.1, start.0 + 1, "subscription start");
    assert!(
        start.0 < after,
        "stored epoch {} is not older than {after}",
        start.0
    );
    let caught_up: Vec<u64> = new
        .lines()
        .filter_map(|l| {
            l.split("catching up: osdmap epoch ")
                .nth(1)?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .collect();
    for e in start.1..after {
        assert!(
            caught_up.contains(&e),
            "osd.{down} did not replay epoch {e} (stored {}, replayed {caught_up:?})",
            start.0
        );
    }
    assert!(!new.contains("osdmap jumps"), "the monitor trimmed: {new}");
    eprintln!(
        "osd.{down}: stored epoch {}, replayed {} epochs up to {after}; active+clean and {OBJECTS} objects intact \
         after {:.1} s",
        start.0,
        caught_up.len(),
        t0.elapsed().as_secs_f64()
    );
    c.stop().unwrap();
}
