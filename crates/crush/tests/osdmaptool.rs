// SPDX-License-Identifier: LGPL-3.0-or-later
//! Placement through an OSDMap, against the real `osdmaptool` (Ceph 16.2.15): per-pool choose_args (which
//! crushtool cannot select), the PG placement seed (`ceph_stable_mod` + `crush_hash32_2`), and object names to
//! PGs (`ceph_str_hash_rjenkins`).
//!
//! Without osdmaptool/crushtool on PATH these tests print a "skipping" line, unless `FERRO_REQUIRE_CLUSTER` is set
//! (then they fail).

use std::path::PathBuf;

use crush::CrushMap;
use crush::hash::{CRUSH_HASH_RJENKINS1, ceph_stable_mod, ceph_str_hash_rjenkins, crush_hash32_2};

mod common;
use common::{run, testdata, tool};

/// The pool fields placement needs, from `osdmaptool --dump plain`.
struct Pool {
    id: u32,
    size: usize,
    crush_rule: i32,
    pg_num: u32,
    pgp_num: u32,
}

fn mask_for(n: u32) -> u32 {
    // pg_pool_t::calc_pg_masks: the smallest 2^k - 1 covering n - 1.
    let bits = 32 - n.saturating_sub(1).leading_zeros();
    ((1u64 << bits) - 1) as u32
}

fn parse_pool(dump: &str, id: u32) -> Pool {
    let line = dump
        .lines()
        .find(|l| l.starts_with(&format!("pool {id} ")))
        .expect("pool line");
    let words: Vec<&str> = line.split_whitespace().collect();
    let field = |name: &str| -> &str {
        let i = words.iter().position(|w| *w == name).expect("field");
        words[i + 1]
    };
    assert!(line.contains("hashpspool"), "test assumes a HASHPSPOOL pool");
    Pool {
        id,
        size: field("size").parse().expect("size"),
        crush_rule: field("crush_rule").parse().expect("rule"),
        pg_num: field("pg_num").parse().expect("pg_num"),
        pgp_num: field("pgp_num").parse().expect("pgp_num"),
    }
}

/// `OSDMap::raw_pg_to_pps` for a HASHPSPOOL pool, then CRUSH with the pool's choose_args.
fn map_pg(map: &CrushMap, pool: &Pool, ps: u32, weights: &[u32]) -> Vec<i32> {
    let pps = crush_hash32_2(
        CRUSH_HASH_RJENKINS1,
        ceph_stable_mod(ps, pool.pgp_num, mask_for(pool.pgp_num)),
        pool.id,
    );
    let rule = map
        .find_rule(pool.crush_rule, 1, pool.size as i32)
        .expect("rule for pool");
    map.do_rule(rule, pps, pool.size, weights, Some(i64::from(pool.id)))
}

/// Builds an osdmap with 48 OSDs and pool 1, imports `crush_txt` compiled, and returns (dir, osdmap path, map).
fn setup(name: &str, crush_txt: &str) -> Option<(PathBuf, PathBuf, CrushMap, PathBuf)> {
    let crushtool = tool("crushtool")?;
    let osdmaptool = tool("osdmaptool")?;
    let dir = std::env::temp_dir().join(format!("ferro-crush-osdmap-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let txt = dir.join("crush.txt");
    std::fs::write(&txt, crush_txt).expect("write");
    let bin = dir.join("crush.bin");
    run(&crushtool, &["-c", txt.to_str()?, "-o", bin.to_str()?]);
    let om = dir.join("osdmap");
    run(
        &osdmaptool,
        &[
            "--createsimple",
            "48",
            "--with-default-pool",
            "--clobber",
            om.to_str()?,
        ],
    );
    run(&osdmaptool, &[om.to_str()?, "--import-crush", bin.to_str()?]);
    // `--mark-up-in` also gives every zero-weight OSD a CRUSH weight of 1.0 before mapping, so we map with the
    // CRUSH map osdmaptool exports after that adjustment.
    let adjusted = dir.join("crush-adjusted.bin");
    run(
        &osdmaptool,
        &[om.to_str()?, "--mark-up-in", "--export-crush", adjusted.to_str()?],
    );
    let map = CrushMap::decode_bytes(std::fs::read(&adjusted).ok()?).expect("decode");
    Some((dir, om, map, osdmaptool))
}

fn choose_args_text(pool_key: &str) -> String {
    testdata("mixed.txt")
        .replace("step take croot class ssd", "step take croot")
        .replace("step take croot class hdd", "step take croot")
        + &testdata("choose_args.txt").replace("choose_args 7 {", &format!("choose_args {pool_key} {{"))
}

fn compare_pgs(name: &str, pool_key: &str, mark_out: &[i32]) -> usize {
    let Some((dir, om, map, osdmaptool)) = setup(name, &choose_args_text(pool_key)) else {
        return 0;
    };
    let om_s = om.to_str().expect("path");
    let pool = parse_pool(&run(&osdmaptool, &[om_s, "--dump", "plain"]), 1);
    let outs: Vec<String> = mark_out.iter().map(|o| o.to_string()).collect();
    let mut args = vec![om_s, "--test-map-pgs-dump", "--pool", "1", "--mark-up-in"];
    for o in &outs {
        args.extend(["--mark-out", o]);
    }
    let text = run(&osdmaptool, &args);
    let mut weights = vec![0x10000u32; 48];
    for &o in mark_out {
        weights[o as usize] = 0;
    }
    let mut compared = 0;
    for line in text.lines() {
        let mut cols = line.split('\t');
        let (Some(pg), Some(up), Some(primary)) = (cols.next(), cols.next(), cols.next()) else {
            continue;
        };
        let Some(ps) = pg.strip_prefix("1.") else { continue };
        let ps = u32::from_str_radix(ps, 16).expect("pg seed");
        let expect: Vec<i32> = up
            .trim_matches(|c| c == '[' || c == ']')
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().expect("osd"))
            .collect();
        let ours = map_pg(&map, &pool, ps, &weights);
        // Every OSD exists and is up, so the up set is the raw CRUSH result.
        assert_eq!(ours, expect, "{name}: pg {pg}");
        assert_eq!(
            ours.first().copied().unwrap_or(-1),
            primary.trim().parse::<i32>().expect("primary")
        );
        compared += 1;
    }
    assert_eq!(compared, pool.pg_num as usize, "{name}: every PG compared");
    eprintln!("{name}: {compared} PG mappings identical with osdmaptool");
    let _ = std::fs::remove_dir_all(&dir);
    compared
}

#[test]
fn pool_choose_args_match_osdmaptool() {
    // The pool's own set (key 1 = pool 1, three positions at the root, two in a host).
    compare_pgs("own-set", "1", &[]);
    // No set for pool 1: Ceph falls back to the default set (-1).
    // (osdmaptool honours only the last --mark-out, so one OSD is marked out.)
    compare_pgs("fallback", "7", &[23]);
}

#[test]
fn object_names_map_like_osdmaptool() {
    let Some((dir, om, map, osdmaptool)) = setup("objects", &testdata("mixed.txt")) else {
        return;
    };
    let om_s = om.to_str().expect("path");
    let pool = parse_pool(&run(&osdmaptool, &[om_s, "--dump", "plain"]), 1);
    let weights = vec![0x10000u32; 48];
    let mut names: Vec<String> = (1..=26)
        .map(|n| "abcdefghijklmnopqrstuvwxyz"[..n].to_string())
        .collect();
    names.extend(
        [
            "foo",
            "rbd_data.1234abcd.0000000000000000",
            "rbd_header.5e7d6b8b4567",
            "benchmark_data_host_12345_object99",
            "\u{e9}t\u{e9}-\u{fc}ber",
            "1234567890123456789012345678901234567890",
        ]
        .map(String::from),
    );
    for name in &names {
        let text = run(
            &osdmaptool,
            &[om_s, "--test-map-object", name, "--pool", "1", "--mark-up-in"],
        );
        let line = text.lines().find(|l| l.contains(" -> ")).expect("mapping line");
        // " object 'NAME' -> 1.406 -> [9,5,14]"
        let mut parts = line.rsplit(" -> ");
        let osds = parts.next().expect("osds");
        let pg = parts.next().expect("pg");
        let ps = ceph_stable_mod(
            ceph_str_hash_rjenkins(name.as_bytes()),
            pool.pg_num,
            mask_for(pool.pg_num),
        );
        assert_eq!(pg, format!("1.{ps:x}"), "object {name:?}");
        let ours = map_pg(&map, &pool, ps, &weights);
        let ours_text = format!(
            "[{}]",
            ours.iter().map(|o| o.to_string()).collect::<Vec<_>>().join(",")
        );
        assert_eq!(osds.trim(), ours_text, "object {name:?}");
    }
    eprintln!(
        "{} object names map to the same PG and OSDs as osdmaptool",
        names.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
