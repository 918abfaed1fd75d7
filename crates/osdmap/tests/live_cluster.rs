// SPDX-License-Identifier: LGPL-3.0-or-later
//! Maps from a live Ceph 16.2 cluster (1 mon, 1 mgr, 3 classic OSDs; a replicated and an EC pool):
//! * `ceph mon getmap` decodes, matches `monmaptool --print` and re-encodes byte-identically;
//! * `ceph osd getmap` decodes, re-encodes byte-identically with the monitor's encoding features and matches
//!   `osdmaptool --print`; its CRUSH map equals `ceph osd getcrushmap`'s;
//! * our placement equals the cluster's for every PG (`ceph pg dump pgs_brief`) and for objects
//!   (`ceph osd map POOL OBJ [NSPACE]`), namespaces and locator-less names included.
//!
//! Skips when Ceph is not installed, unless FERRO_REQUIRE_CLUSTER is set.

#![allow(clippy::unwrap_used)] // test helpers

mod common;

use std::process::Command;
use std::time::Duration;

use denc::{Decode, Encode, ObjectLocator};
use osdmap::{OsdMap, PgId, features};
use testcluster::{ClusterSpec, start_or_skip};

fn ints(v: &serde_json::Value) -> Vec<i64> {
    v.as_array()
        .map(|a| a.iter().filter_map(|x| x.as_i64()).collect())
        .unwrap_or_default()
}

fn widen(v: &[i32]) -> Vec<i64> {
    v.iter().map(|x| i64::from(*x)).collect()
}

fn tool(tool: &str, args: &[&str]) -> String {
    let out = Command::new(tool).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{tool} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn live_maps_and_placement() {
    let spec = ClusterSpec::default()
        .classic_osds(3)
        .conf("global", "osd pool default size", "3")
        .conf("global", "osd pool default min size", "2");
    let Some(cluster) = start_or_skip(spec) else {
        return;
    };
    let rep = cluster.create_pool("rep", 16).unwrap();
    let ec = cluster.create_ec_pool("ec", 8, 2, 1).unwrap();
    // Give one OSD a reweight and another a primary affinity so those paths run on live data.
    cluster.ceph(&["osd", "reweight", "1", "0.8"]).unwrap();
    cluster.ceph(&["osd", "primary-affinity", "2", "0.5"]).unwrap();
    // The reweight leaves some PGs remapped through pg_temp, or undersized, for good (3 OSDs, size 3): wait for
    // every PG to be active and not peering, so the maps are stable.
    cluster
        .wait_for("all PGs active and settled", Duration::from_secs(60), || {
            let dump = cluster.ceph_json(&["pg", "dump", "pgs_brief"])?;
            let stats = dump.get("pg_stats").cloned().unwrap_or(dump);
            let states: Vec<String> = stats
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|p| p["state"].as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            let settled = !states.is_empty()
                && states
                    .iter()
                    .all(|n| n.starts_with("active+clean") && !n.contains("peering"));
            Ok(settled.then_some(()))
        })
        .unwrap();
    let dir = cluster.dir().join("tmp");
    std::fs::create_dir_all(&dir).unwrap();

    // MonMap.
    let mon_bytes = cluster.mon_map_bytes().unwrap();
    let mon = monmap_decode(&mon_bytes);
    let mon_file = dir.join("monmap");
    std::fs::write(&mon_file, &mon_bytes).unwrap();
    let printed = tool("monmaptool", &["--print", mon_file.to_str().unwrap()]);
    assert!(printed.contains(&format!("fsid {}", cluster.fsid())), "{printed}");
    assert!(printed.contains(&format!("epoch {}", mon.0)), "{printed}");
    for line in &mon.1 {
        assert!(printed.contains(line.as_str()), "missing {line:?} in {printed}");
    }

    // OSDMap and CRUSH.
    let om_bytes = cluster.osd_map_bytes(None).unwrap();
    let m = OsdMap::decode_all(om_bytes.clone()).unwrap();
    assert_eq!(m.fsid.to_string(), cluster.fsid());
    assert_eq!(
        m.to_bytes(m.encoding_features() | features::RESERVED),
        om_bytes,
        "the monitor's full map must re-encode byte-identically"
    );
    let om_file = dir.join("osdmap");
    std::fs::write(&om_file, &om_bytes).unwrap();
    let printed = tool("osdmaptool", &["--print", om_file.to_str().unwrap()]);
    assert!(
        printed.lines().any(|l| l == format!("epoch {}", m.epoch)),
        "{printed}"
    );
    assert!(
        printed.lines().any(|l| l == format!("max_osd {}", m.max_osd)),
        "{printed}"
    );
    for (id, name) in &m.pool_name {
        assert!(printed.contains(&format!("pool {id} '{name}'")), "{printed}");
    }
    let fields = common::compare_with_dump(&m, &cluster.ceph_json(&["osd", "dump"]).unwrap());
    eprintln!("live: ceph osd dump: {fields} values equal ours");
    let crush_bytes = cluster.crush_map_bytes().unwrap();
    let crush = crush::CrushMap::decode_bytes(crush_bytes).unwrap();
    assert_eq!(
        Some(&crush),
        m.crush_map.as_deref(),
        "getcrushmap and the map's embedded CRUSH agree"
    );

    // Every PG, as the cluster reports it. The mgr's PG stats trail the OSDMap (a PG reports its new up/acting
    // only after it re-peers on the new epoch), so compare a freshly fetched map with `pg dump` until the mgr has
    // caught up; every PG must then agree exactly. On timeout the last disagreement is the failure.
    let mut last_mismatch = String::new();
    let compared = cluster.wait_for(
        "pg dump to agree with our placement",
        Duration::from_secs(90),
        || {
            let m = OsdMap::decode_all(cluster.osd_map_bytes(None).unwrap()).unwrap();
            let dump = cluster.ceph_json(&["pg", "dump", "pgs_brief"]).unwrap();
            let stats = dump.get("pg_stats").cloned().unwrap_or(dump.clone());
            let mut pgs = 0;
            for pg in stats.as_array().unwrap() {
                let id = pg["pgid"].as_str().unwrap();
                let (pool, seed) = id.split_once('.').unwrap();
                let pgid = PgId::new(pool.parse().unwrap(), u32::from_str_radix(seed, 16).unwrap());
                let ua = m.pg_to_up_acting_osds(pgid).unwrap();
                let ours = (
                    widen(&ua.up),
                    widen(&ua.acting),
                    i64::from(ua.up_primary),
                    i64::from(ua.acting_primary),
                );
                let theirs = (
                    ints(&pg["up"]),
                    ints(&pg["acting"]),
                    pg["up_primary"].as_i64().unwrap(),
                    pg["acting_primary"].as_i64().unwrap(),
                );
                if ours != theirs {
                    last_mismatch = format!(
                        "e{}: {id}: ours (up, acting, up_primary, acting_primary) {ours:?}, mgr {theirs:?}",
                        m.epoch
                    );
                    return Ok(None);
                }
                pgs += 1;
            }
            let expected: u32 = m.pools.values().map(|p| p.pg_num).sum();
            Ok((pgs == expected as usize).then_some(pgs))
        },
    );
    let pgs = compared.unwrap_or_else(|e| panic!("{e}; last mismatch: {last_mismatch}"));
    eprintln!("live: {pgs} PGs: up, acting and primaries equal the cluster's");
    // The cluster has settled on this map (the mgr agrees with it): the object checks below use it.
    let m = OsdMap::decode_all(cluster.osd_map_bytes(None).unwrap()).unwrap();

    // Objects, with and without a namespace.
    let mut objects = 0;
    for (pool_name, pool_id) in [("rep", rep), ("ec", ec)] {
        for i in 0..6 {
            let name = format!("live-{i}-{}", i * 104_729);
            let ns = if i % 3 == 0 { "tenant" } else { "" };
            let mut args = vec!["osd", "map", pool_name, name.as_str()];
            if !ns.is_empty() {
                args.push(ns);
            }
            args.extend(["--format", "json"]);
            let j = cluster.ceph_json(&args).unwrap();
            let loc = ObjectLocator {
                pool: pool_id,
                nspace: bytes::Bytes::from(ns.to_string()),
                ..ObjectLocator::default()
            };
            // Compare with the map of the epoch the monitor answered at.
            let answered = j["epoch"].as_u64().unwrap() as u32;
            let at_epoch;
            let m = if answered == m.epoch {
                &m
            } else {
                at_epoch = OsdMap::decode_all(cluster.osd_map_bytes(Some(answered)).unwrap()).unwrap();
                &at_epoch
            };
            let raw = m.object_locator_to_pg(name.as_bytes(), &loc).unwrap();
            let (pg, ua) = m.object_to_up_acting(name.as_bytes(), &loc).unwrap();
            assert_eq!(pg.to_string(), j["pgid"].as_str().unwrap(), "pg of {name}");
            assert_eq!(
                raw.to_string(),
                j["raw_pgid"].as_str().unwrap(),
                "raw pg of {name}"
            );
            assert_eq!(widen(&ua.up), ints(&j["up"]), "up of {name}");
            assert_eq!(widen(&ua.acting), ints(&j["acting"]), "acting of {name}");
            objects += 1;
        }
    }
    eprintln!(
        "live: {pgs} PGs and {objects} objects identical to the cluster (epoch {})",
        m.epoch
    );

    // The monitor's own history: every stored incremental applied to the previous stored full map must give the
    // monitor's crc and exactly its stored bytes. The store is copied (the running mon holds its lock).
    let store = dir.join("store-copy");
    let status = Command::new("cp")
        .args(["-r"])
        .arg(cluster.dir().join("mon.a/store.db"))
        .arg(&store)
        .status()
        .unwrap();
    assert!(status.success());
    let kv = |key: String| -> Vec<u8> {
        let out = dir.join(format!("kv-{key}"));
        let st = Command::new("ceph-kvstore-tool")
            .args(["rocksdb", store.to_str().unwrap(), "get", "osdmap", &key, "out"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(st.status.success(), "ceph-kvstore-tool get osdmap {key}");
        std::fs::read(&out).unwrap()
    };
    let last = u64::from_le_bytes(kv("last_committed".into())[..8].try_into().unwrap()) as u32;
    let first = u64::from_le_bytes(kv("first_committed".into())[..8].try_into().unwrap()) as u32;
    let start = first.max(last.saturating_sub(12)).max(1);
    let mut chain = OsdMap::decode_all(kv(format!("full_{start}"))).unwrap();
    for e in start + 1..=last {
        let inc = osdmap::Incremental::decode_all(kv(e.to_string())).unwrap();
        let check = chain.apply_incremental(&inc).unwrap();
        assert_eq!(check, osdmap::CrcCheck::Match, "epoch {e}");
        assert_eq!(
            chain.raw.as_deref(),
            Some(&kv(format!("full_{e}"))[..]),
            "epoch {e}: bytes differ"
        );
    }
    eprintln!("live: incrementals {}..={last} applied byte-exactly", start + 1);
}

/// Decode a MonMap and return (epoch, the per-mon lines `monmaptool --print` shows).
fn monmap_decode(bytes: &[u8]) -> (u32, Vec<String>) {
    let m = monmap::MonMap::decode_all(bytes.to_vec()).unwrap();
    assert_eq!(
        m.to_bytes(features::PACIFIC),
        bytes,
        "monmap must re-encode byte-identically"
    );
    let lines = m
        .print()
        .lines()
        .filter(|l| l.contains(" mon."))
        .map(String::from)
        .collect();
    (m.epoch, lines)
}
