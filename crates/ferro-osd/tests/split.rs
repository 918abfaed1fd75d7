// SPDX-License-Identifier: LGPL-3.0-or-later
//! Issue 5: PG splits on ferro-osds with two shards (cores) each, on a live throwaway cluster (crate
//! testcluster: classic mon + mgr, three ferro-osds, a size-3 pool on class `ferro`). The pool grows from 8 to 32
//! PGs (pg_num and pgp_num) under 200 objects: every object reads back byte-exact and `rados ls` lists each once,
//! after the split, after restarting every OSD, and after a restart that jumps over a split (an OSD is down while
//! pg_num grows again). A split child lives on its parent's core (osd-core's `PgRouter`); before it, a child
//! hashed to the other core lost its objects. Skips when Ceph or python3-rados is missing.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use testcluster::Cluster;

mod live;
use live::{ferro_two_shards, split_objects, three_osds_and_pool, wait_active_clean};

const OBJECTS: u32 = 200;

fn objects(c: &Cluster, pool: &str, mode: &str) -> String {
    split_objects(c, pool, mode, OBJECTS, Duration::from_secs(120))
}

/// Every object byte-exact, and `rados ls` lists exactly the objects written.
fn check(c: &Cluster, pool: &str, when: &str) {
    let t0 = Instant::now();
    let out = objects(c, pool, "verify");
    assert!(
        out.contains(&format!("verified {OBJECTS} objects, 0 bad")),
        "{when}: {out}"
    );
    let ls = c.rados(&["-p", pool, "ls"], Duration::from_secs(60)).unwrap();
    let names: Vec<&str> = ls.lines().filter(|l| !l.is_empty()).collect();
    let set: BTreeSet<&str> = names.iter().copied().collect();
    let want: BTreeSet<String> = (0..OBJECTS).map(|i| format!("split-{i}")).collect();
    let want: BTreeSet<&str> = want.iter().map(String::as_str).collect();
    assert_eq!(names.len(), set.len(), "{when}: rados ls lists an object twice");
    assert_eq!(set, want, "{when}: rados ls");
    eprintln!(
        "{when}: {OBJECTS} objects intact and listed ({:.1} s)",
        t0.elapsed().as_secs_f64()
    );
}

fn pool_get(c: &Cluster, pool: &str, key: &str) -> u64 {
    let v = c.ceph_json(&["osd", "pool", "get", pool, key]).unwrap();
    v[key].as_u64().unwrap_or(0)
}

/// pg_num and pgp_num at `n` (the mgr walks them up), then every PG active+clean.
fn wait_split(c: &Cluster, pool: &str, n: u64, timeout: Duration) {
    let t0 = Instant::now();
    c.wait_for(&format!("pool {pool} at pg_num/pgp_num {n}"), timeout, || {
        Ok((pool_get(c, pool, "pg_num") == n && pool_get(c, pool, "pgp_num") == n).then_some(()))
    })
    .unwrap();
    wait_active_clean(c, timeout);
    eprintln!(
        "pg_num {n} and active+clean after {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

fn set_pg_num(c: &Cluster, pool: &str, n: u32) {
    let n = n.to_string();
    c.ceph(&["osd", "pool", "set", pool, "pg_num", &n]).unwrap();
    c.ceph(&["osd", "pool", "set", pool, "pgp_num", &n]).unwrap();
}

#[test]
fn pg_split_with_two_shards_per_osd() {
    let f = ferro_two_shards();
    let pool = "split";
    let Some((c, ids)) = three_osds_and_pool(&f, pool, 8) else {
        return;
    };
    let out = objects(&c, pool, "write");
    assert!(out.contains(&format!("wrote {OBJECTS}")), "{out}");
    check(&c, pool, "before the split");

    set_pg_num(&c, pool, 32);
    wait_split(&c, pool, 32, Duration::from_secs(180));
    check(&c, pool, "after pg_num 8 -> 32");

    for &id in &ids {
        c.kill_daemon(&format!("osd.{id}")).unwrap();
        c.restart_osd(id, &f).unwrap();
    }
    wait_active_clean(&c, Duration::from_secs(180));
    check(&c, pool, "after restarting every OSD");

    // A restart over a split: osd.2 is down (noout: it stays in) while pg_num grows; its first map after the
    // restart is past the split, and its stored PGs split on load.
    c.ceph(&["osd", "set", "noout"]).unwrap();
    let last = *ids.last().unwrap();
    c.kill_daemon(&format!("osd.{last}")).unwrap();
    c.ceph(&["osd", "down", &last.to_string()]).unwrap();
    set_pg_num(&c, pool, 48);
    c.wait_for("pg_num 48 with one OSD down", Duration::from_secs(120), || {
        Ok((pool_get(&c, pool, "pg_num") == 48).then_some(()))
    })
    .unwrap();
    c.restart_osd(last, &f).unwrap();
    c.ceph(&["osd", "unset", "noout"]).unwrap();
    wait_split(&c, pool, 48, Duration::from_secs(180));
    check(&c, pool, "after a restart over pg_num 32 -> 48");
    let log = std::fs::read_to_string(c.log_path(&format!("osd.{last}"))).unwrap_or_default();
    eprintln!(
        "osd.{last}: {} PGs split on load",
        log.lines().filter(|l| l.contains("split bits")).count()
    );
    c.stop().unwrap();
}
