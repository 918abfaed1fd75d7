// SPDX-License-Identifier: MPL-2.0
#![allow(clippy::unwrap_used, clippy::expect_used)] // test harness
//! ferro-rados against a throwaway real Ceph 16.2 cluster (crates/testcluster: 1 mon, 1 mgr, 3 classic OSDs,
//! cephx), once with every mon connection mode set to `secure` and once to `crc`.
//!
//! Scope of the placement comparison (secure test; the crc test does the initial state only), at each of four
//! map states (initial pools; after a pg_num change; after `ceph osd pg-upmap-items`; after a primary-affinity
//! change):
//! * **every PG of every pool**: our up/up_primary/acting/acting_primary and raw CRUSH set against
//!   `osdmaptool --test-map-pgs-dump-all` run on the monitor's map of the *same epoch* (`ceph osd getmap E`);
//! * **100 object names per pool** (plus 10 in a namespace): our `ceph osd map` answer (JSON) against the
//!   monitor's own answer to the `osd map` command at the same epoch, sent through our session;
//! * **1 name per pool through the real CLIs** (initial and upmap states): `ferro-rados osd-map` stdout
//!   byte-identical to `ceph osd map` (text and `--format json`);
//! * once at the end, every PG against `ceph pg dump pgs_brief` (the mgr's view, which lags the map; retried).
//!
//! Pools: replicated size 3 (pg_num 32 → 48), replicated size 2 (pg_num 16, with an upmap), erasure k=2 m=1
//! (pg_num 16). `status` and `lspools` are checked against `ceph` too. Skipped when Ceph is not installed.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferro_rados::{Cluster, ConnectOptions, map_object_in};
use osdmap::{OsdMap, PgId};
use testcluster::{ClusterSpec, start_or_skip};

/// Names per pool and phase compared with the monitor's answer. CI keeps it small; the acceptance run
/// (docs/ferro-rados.md) sets `FERRO_OSDMAP_NAMES_PER_POOL` so that more than 10,000 names are compared.
const NAMES_PER_POOL: usize = 100;

fn names_per_pool() -> usize {
    std::env::var("FERRO_OSDMAP_NAMES_PER_POOL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(NAMES_PER_POOL)
}
const CLI_NAMES_PER_POOL: usize = 1;

fn spec(mode: &str) -> ClusterSpec {
    // A faster mgr tick: it is the mgr that raises a pool's pg_num towards a new target.
    let mut s = ClusterSpec::default()
        .classic_osds(3)
        .conf("mgr", "mgr_tick_period", "1");
    for k in ["ms_mon_cluster_mode", "ms_mon_service_mode", "ms_mon_client_mode"] {
        s = s.conf("global", k, mode);
    }
    s
}

fn connect(tc: &testcluster::Cluster) -> Cluster {
    let opts = ConnectOptions {
        conf: Some(tc.conf_path().display().to_string()),
        timeout: Duration::from_secs(30),
        ..ConnectOptions::default()
    };
    Cluster::connect(&opts).unwrap()
}

/// Object names: a fixed seed, so a failure replays; varied lengths and characters.
fn names(seed: u64, n: usize) -> Vec<String> {
    let mut x = seed;
    (0..n)
        .map(|i| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let len = 1 + (x >> 58) as usize;
            let s: String = (0..len)
                .map(|j| char::from(b'a' + ((x >> (j * 2 % 56)) % 26) as u8))
                .collect();
            format!("{s}-{i}")
        })
        .collect()
}

/// Parse `[0,1,NONE]` (osdmaptool prints holes as NONE or 2147483647).
fn parse_vec(s: &str) -> Vec<i32> {
    let inner = s.trim().trim_start_matches('[').trim_end_matches(']');
    inner
        .split(',')
        .filter(|t| !t.trim().is_empty())
        .map(|t| {
            if t.trim() == "NONE" {
                osdmap::CRUSH_ITEM_NONE
            } else {
                t.trim().parse().unwrap()
            }
        })
        .collect()
}

/// `2.1f raw ([0,1], p0) up ([0,1], p0) acting ([0,1], p0)` → pgid → (raw, up, up_p, acting, acting_p).
type Row = (Vec<i32>, Vec<i32>, i32, Vec<i32>, i32);
fn parse_dump_all(text: &str) -> BTreeMap<String, Row> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((pg, rest)) = line.split_once(" raw (") else {
            continue;
        };
        let parts: Vec<&str> = rest.split(") up (").flat_map(|p| p.split(") acting (")).collect();
        assert_eq!(parts.len(), 3, "{line}");
        let vp = |p: &str| {
            let p = p.trim_end_matches(')');
            let (v, prim) = p.rsplit_once(", p").unwrap();
            (parse_vec(v), prim.parse::<i32>().unwrap())
        };
        let (raw, _) = vp(parts[0]);
        let (up, upp) = vp(parts[1]);
        let (act, actp) = vp(parts[2]);
        out.insert(pg.to_string(), (raw, up, upp, act, actp));
    }
    out
}

fn ours_for_all_pgs(m: &OsdMap) -> BTreeMap<String, Row> {
    let mut out = BTreeMap::new();
    for (&pool, p) in &m.pools {
        for seed in 0..p.pg_num {
            let pg = PgId::new(pool as u64, seed);
            let ua = m.pg_to_up_acting_osds(pg).unwrap();
            let (raw, _) = m.pg_to_raw_osds(pg).unwrap();
            out.insert(
                format!("{pool}.{seed:x}"),
                (raw, ua.up, ua.up_primary, ua.acting, ua.acting_primary),
            );
        }
    }
    out
}

/// The epoch in a `ceph osd map` answer, text (`osdmap e12 ...`) or JSON (`{"epoch":12,...`).
fn epoch_of(s: &str) -> Option<u32> {
    let s = s.trim_start();
    let rest = s
        .strip_prefix("osdmap e")
        .or_else(|| s.strip_prefix("{\"epoch\":"))?;
    rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// A mon command through our session that must succeed.
fn mon(c: &mut Cluster, json: &str) {
    let r = c.mon_command(json, Bytes::new()).unwrap();
    assert_eq!(r.rc, 0, "{json}: {}", r.outs);
}

struct Ctx<'a> {
    tc: &'a testcluster::Cluster,
    client: Cluster,
    pools: Vec<String>,
    /// The monitor's full maps by epoch (raw bytes from `osd getmap`, and our decoding of them): answers from
    /// the monitor or the ceph CLI are checked against the map of *their* epoch, so a map that moves on while
    /// we compare (the mgr stepping pg_num, for example) needs no retries.
    raw: BTreeMap<u32, Bytes>,
    maps: BTreeMap<u32, OsdMap>,
    compared_pgs: usize,
    compared_names: usize,
    compared_cli: usize,
}

impl Ctx<'_> {
    fn raw_map(&mut self, e: u32) -> Bytes {
        if let Some(b) = self.raw.get(&e) {
            return b.clone();
        }
        let r = self
            .client
            .mon_command(
                &format!(r#"{{"prefix": "osd getmap", "epoch": {e}}}"#),
                Bytes::new(),
            )
            .unwrap();
        assert_eq!(r.rc, 0, "osd getmap {e}: {}", r.outs);
        self.raw.insert(e, r.outbl.clone());
        r.outbl
    }

    fn map_at(&mut self, e: u32) -> OsdMap {
        if let Some(m) = self.maps.get(&e) {
            return m.clone();
        }
        let m = <OsdMap as denc::Decode>::decode_all(self.raw_map(e)).unwrap();
        assert_eq!(m.epoch, e);
        self.maps.insert(e, m.clone());
        m
    }

    /// Run every comparison against the current map.
    fn compare_all(&mut self, phase: &str, seed: u64, with_cli: bool) {
        let t = Instant::now();
        // 1. Every PG of the client's live map (kept current by incrementals) against osdmaptool run on the
        //    monitor's map of the same epoch.
        let live = self.client.osd_map().unwrap().clone();
        let e = live.epoch;
        let dir = self.tc.dir().join(format!("cmp-{phase}"));
        std::fs::create_dir_all(&dir).unwrap();
        let map_file = dir.join(format!("osdmap.{e}"));
        std::fs::write(&map_file, self.raw_map(e)).unwrap();
        let out = Command::new("osdmaptool")
            .arg(&map_file)
            .arg("--test-map-pgs-dump-all")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "osdmaptool: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let theirs = parse_dump_all(&String::from_utf8_lossy(&out.stdout));
        let ours = ours_for_all_pgs(&live);
        assert_eq!(ours.len(), theirs.len(), "{phase} e{e}: PG count");
        for (pg, t) in &theirs {
            assert_eq!(
                ours.get(pg),
                Some(t),
                "{phase} e{e}: PG {pg} (raw, up, up_primary, acting, acting_primary)"
            );
        }
        self.compared_pgs += theirs.len();
        self.maps.insert(e, live);

        // 2. Object names against the monitor's own `osd map` answer, at the answer's epoch.
        for (pi, pool) in self.pools.clone().iter().enumerate() {
            let mut ns_names: Vec<(String, &str)> = names(seed ^ pi as u64, names_per_pool())
                .into_iter()
                .map(|n| (n, ""))
                .collect();
            ns_names.extend(names(seed.wrapping_add(99), 10).into_iter().map(|n| (n, "ns1")));
            for (name, ns) in &ns_names {
                let mut cmd =
                    serde_json::json!({"prefix": "osd map", "pool": pool, "object": name, "format": "json"});
                if !ns.is_empty() {
                    cmd["nspace"] = serde_json::json!(ns);
                }
                let r = self.client.mon_command(&cmd.to_string(), Bytes::new()).unwrap();
                assert_eq!(r.rc, 0, "{}", r.outs);
                let mon: serde_json::Value = serde_json::from_slice(&r.outbl).unwrap();
                let m = self.map_at(mon["epoch"].as_u64().unwrap() as u32);
                let ours = map_object_in(&m, pool, name, ns).unwrap();
                let ours: serde_json::Value = serde_json::from_str(&ours.to_json()).unwrap();
                assert_eq!(ours, mon, "{phase}: pool {pool} object {ns}/{name}");
                self.compared_names += 1;
            }
        }

        // 3. A few names through both command-line tools: each one's stdout must be, byte for byte, what we
        //    compute from the map of the epoch it answered for (so the two agree whenever their epochs do).
        //    The ceph CLI takes ~0.5 s a call, so only in some phases.
        if with_cli {
            let bin = env!("CARGO_BIN_EXE_ferro-rados");
            for pool in self.pools.clone() {
                for name in names(seed ^ 0xc11, CLI_NAMES_PER_POOL) {
                    for json in [false, true] {
                        let mut args = vec!["osd", "map", pool.as_str(), name.as_str()];
                        if json {
                            args.extend(["--format", "json"]);
                        }
                        let theirs = self.tc.ceph(&args).unwrap();
                        let mut cmd = Command::new(bin);
                        cmd.arg("-c")
                            .arg(self.tc.conf_path())
                            .args(["osd-map", &pool, &name]);
                        if json {
                            cmd.arg("--json");
                        }
                        let ours = cmd.output().unwrap();
                        assert!(ours.status.success(), "{}", String::from_utf8_lossy(&ours.stderr));
                        let ours = String::from_utf8_lossy(&ours.stdout).into_owned();
                        for (who, out) in [("ceph", &theirs), ("ferro-rados", &ours)] {
                            let m = self.map_at(epoch_of(out).unwrap());
                            let a = map_object_in(&m, &pool, &name, "").unwrap();
                            let want = if json {
                                format!("\n{}", a.to_json())
                            } else {
                                format!("{}\n", a.to_text())
                            };
                            assert_eq!(out, &want, "{phase}: {who} CLI output for {pool}/{name}");
                        }
                        if epoch_of(&theirs) == epoch_of(&ours) {
                            assert_eq!(ours, theirs);
                        }
                        self.compared_cli += 1;
                    }
                }
            }
        }
        eprintln!("{phase}: compared at e{e} in {:.1} s", t.elapsed().as_secs_f64());
    }
}

fn run(mode: &str, expect_con_mode: u32, full: bool) {
    let t0 = Instant::now();
    let Some(tc) = start_or_skip(spec(mode)) else {
        return;
    };
    eprintln!("{mode}: cluster up {:.1} s", t0.elapsed().as_secs_f64());
    // Set-up goes through our own session (a `ceph` process per command costs ~0.5 s).
    let mut client = connect(&tc);
    assert_eq!(
        client.monclient().seen.con_mode,
        expect_con_mode,
        "negotiated mon connection mode"
    );
    let profile = r#"{"prefix": "osd erasure-code-profile set", "name": "k2m1", "profile": ["k=2", "m=1", "crush-failure-domain=osd"]}"#;
    mon(&mut client, profile);
    for (pool, pg, extra) in [
        ("rep3", 32, ""),
        ("rep2", 16, ""),
        (
            "ec21",
            16,
            r#", "pool_type": "erasure", "erasure_code_profile": "k2m1""#,
        ),
    ] {
        mon(
            &mut client,
            &format!(
                r#"{{"prefix": "osd pool create", "pool": "{pool}", "pg_num": {pg}, "pgp_num": {pg}{extra}}}"#
            ),
        );
    }
    mon(
        &mut client,
        r#"{"prefix": "osd pool set", "pool": "rep3", "var": "size", "val": "3"}"#,
    );
    mon(
        &mut client,
        r#"{"prefix": "osd pool set", "pool": "rep2", "var": "size", "val": "2"}"#,
    );
    eprintln!("{mode}: pools created {:.1} s", t0.elapsed().as_secs_f64());

    // status / lspools against the ceph CLI.
    let before = tc.ceph_json(&["osd", "dump"]).unwrap()["epoch"].as_u64().unwrap();
    let st = client.status().unwrap();
    assert_eq!(st.fsid, tc.fsid());
    assert!(st.health.starts_with("HEALTH_"), "{}", st.health);
    assert_eq!((st.num_osds, st.num_up_osds, st.num_in_osds), (3, 3, 3));
    // The map may move on (the mgr works in the background): ours is at least as new as ceph's was before.
    assert!(
        u64::from(st.osdmap_epoch) >= before,
        "status epoch {} < ceph's {before}",
        st.osdmap_epoch
    );
    let lspools = tc.ceph(&["osd", "lspools"]).unwrap();
    let ours: String = client
        .pools()
        .unwrap()
        .iter()
        .map(|(id, n)| format!("{id} {n}\n"))
        .collect();
    assert_eq!(ours, lspools);
    let conf = tc.conf_path().display().to_string();
    for json in [false, true] {
        let mut args = vec!["-c", conf.as_str(), "lspools"];
        let mut theirs_args = vec!["osd", "lspools"];
        if json {
            args.extend(["-f", "json"]);
            theirs_args.extend(["-f", "json"]);
        }
        let ours = Command::new(env!("CARGO_BIN_EXE_ferro-rados"))
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&ours.stdout),
            tc.ceph(&theirs_args).unwrap(),
            "lspools json={json}"
        );
    }
    let out = Command::new(env!("CARGO_BIN_EXE_ferro-rados"))
        .arg("-c")
        .arg(tc.conf_path())
        .arg("status")
        .output()
        .unwrap();
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains(tc.fsid()));

    let set = |c: &mut Cluster, var: &str| {
        mon(
            c,
            &format!(r#"{{"prefix": "osd pool set", "pool": "rep3", "var": "{var}", "val": "48"}}"#),
        )
    };
    let mut ctx = Ctx {
        tc: &tc,
        client,
        pools: vec!["rep3".into(), "rep2".into(), "ec21".into()],
        raw: BTreeMap::new(),
        maps: BTreeMap::new(),
        compared_pgs: 0,
        compared_names: 0,
        compared_cli: 0,
    };
    let m = ctx.client.osd_map().unwrap();
    assert_eq!(m.pools[&m.pool_by_name("rep3").unwrap()].pg_num, 32);
    if full {
        // Ask for the pg_num change now: the mgr works on it while the initial state is compared (answers are
        // checked against the map of their own epoch, so a moving map is fine).
        set(&mut ctx.client, "pg_num");
    }
    ctx.compare_all("initial", 1, true);
    if !full {
        // A wrong key fails at once with EACCES, as the ceph CLI does (no hunting until the timeout).
        let bad = tc.dir().join("wrong.keyring");
        let key = cephx::CryptoKey::new_aes([7; 16], cephx::UTime::default()).to_base64();
        std::fs::write(&bad, format!("[client.admin]\n\tkey = {key}\n")).unwrap();
        let t = Instant::now();
        let opts = ConnectOptions {
            conf: Some(tc.conf_path().display().to_string()),
            keyring: Some(bad.display().to_string()),
            ..ConnectOptions::default()
        };
        let err = Cluster::connect(&opts)
            .err()
            .expect("a wrong key must not connect");
        assert_eq!(err.errno(), -13, "{err}");
        assert!(t.elapsed() < Duration::from_secs(5));
        eprintln!(
            "{mode}: compared {} PG mappings, {} object names with the mon, {} CLI outputs in {:.1} s",
            ctx.compared_pgs,
            ctx.compared_names,
            ctx.compared_cli,
            t0.elapsed().as_secs_f64()
        );
        return;
    }
    // pg_num change: wait for the mgr to raise pg_num to the new target, then move pgp_num straight to 48
    // (pgp_num_actual skips the mgr's gradual 5 % steps).
    let deadline = Instant::now() + Duration::from_secs(20);
    while {
        let m = ctx.client.osd_map().unwrap();
        m.pools[&m.pool_by_name("rep3").unwrap()].pg_num != 48
    } {
        assert!(Instant::now() < deadline, "pg_num did not reach 48");
        std::thread::sleep(Duration::from_millis(200));
    }
    set(&mut ctx.client, "pgp_num");
    set(&mut ctx.client, "pgp_num_actual");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        // Wait for the mgr to finish stepping pgp_num too, so the comparisons below see a settled map.
        let m = ctx.client.osd_map().unwrap();
        let id = m.pool_by_name("rep3").unwrap();
        let p = &m.pools[&id];
        if (p.pg_num == 48 && p.pgp_num == 48) || Instant::now() > deadline {
            assert_eq!(p.pg_num, 48, "pg_num did not reach 48");
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    eprintln!("{mode}: pg_num settled {:.1} s", t0.elapsed().as_secs_f64());
    ctx.compare_all("pg_num", 2, false);

    // upmap: move one PG of the size-2 pool from its first OSD to the OSD not in its set.
    let m = ctx.client.osd_map().unwrap().clone();
    let rep2 = m.pool_by_name("rep2").unwrap();
    let pg = PgId::new(rep2 as u64, 3);
    let up = m.pg_to_up_acting_osds(pg).unwrap().up;
    let to = (0..3).find(|o| !up.contains(o)).unwrap();
    let pgid = format!("{rep2}.3");
    mon(
        &mut ctx.client,
        &format!(
            r#"{{"prefix": "osd pg-upmap-items", "pgid": "{pgid}", "id": [{}, {to}]}}"#,
            up[0]
        ),
    );
    let m = {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let m = ctx.client.osd_map().unwrap().clone();
            if m.pg_upmap_items.contains_key(&pg) || Instant::now() > deadline {
                break m;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    assert_eq!(m.pg_upmap_items.get(&pg), Some(&vec![(up[0], to)]));
    assert!(
        m.pg_to_up_acting_osds(pg).unwrap().up.contains(&to),
        "upmap applied to the up set"
    );
    ctx.compare_all("upmap", 3, true);

    // Primary affinity 0 for osd.1: it stops being primary wherever another OSD can be.
    mon(
        &mut ctx.client,
        r#"{"prefix": "osd primary-affinity", "id": 1, "weight": 0.0}"#,
    );
    ctx.compare_all("affinity", 4, false);

    eprintln!("{mode}: before pg dump {:.1} s", t0.elapsed().as_secs_f64());
    // The mgr's view of every PG (lags the map: retried until it agrees or 30 s pass).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let m = ctx.client.osd_map().unwrap().clone();
        let dump = tc.ceph_json(&["pg", "dump", "pgs_brief"]).unwrap();
        let stats = dump["pg_stats"].as_array().cloned().unwrap_or_default();
        let ours = ours_for_all_pgs(&m);
        let agree = stats.len() == ours.len()
            && stats.iter().all(|s| {
                let v = |k: &str| {
                    s[k].as_array()
                        .unwrap()
                        .iter()
                        .map(|x| x.as_i64().unwrap() as i32)
                        .collect::<Vec<_>>()
                };
                let p = |k: &str| s[k].as_i64().unwrap() as i32;
                ours.get(s["pgid"].as_str().unwrap()).is_some_and(|o| {
                    (o.1.clone(), o.2, o.3.clone(), o.4)
                        == (v("up"), p("up_primary"), v("acting"), p("acting_primary"))
                })
            });
        if agree {
            ctx.compared_pgs += stats.len();
            break;
        }
        assert!(
            Instant::now() < deadline,
            "pg dump pgs_brief never agreed with our map e{}",
            m.epoch
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    // Every new epoch (pools, pg_num, upmap, affinity) arrived as an incremental that applied with the
    // monitor's full_crc: no map had to be refetched.
    let (mut maps, mut errors) = (0, Vec::new());
    while let Some(e) = ctx.client.monclient().poll_event() {
        match e {
            monclient::Event::OsdMap { .. } => maps += 1,
            monclient::Event::OsdMapError { epoch, error } => errors.push((epoch, error)),
            _ => {}
        }
    }
    assert!(errors.is_empty(), "{errors:?}");
    eprintln!(
        "{mode}: compared {} PG mappings, {} object names with the mon, {} CLI outputs in {:.1} s; {maps} map updates",
        ctx.compared_pgs,
        ctx.compared_names,
        ctx.compared_cli,
        t0.elapsed().as_secs_f64()
    );
}

/// Everything above, with every mon connection mode set to `secure`.
#[test]
fn osd_map_matches_ceph_with_secure_mon_sessions() {
    run("secure", msgr2::auth::CON_MODE_SECURE, true);
}

/// With every mon connection mode set to `crc`: status, lspools and the initial-state comparisons only (the
/// placement code is the same; this covers the transport), to keep each test well under a minute.
#[test]
fn osd_map_matches_ceph_with_crc_mon_sessions() {
    run("crc", msgr2::auth::CON_MODE_CRC, false);
}
