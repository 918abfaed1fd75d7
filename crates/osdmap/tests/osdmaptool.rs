// SPDX-License-Identifier: LGPL-3.0-or-later
//! Cross-checks against the real `osdmaptool` and `crushtool` (Ceph 16.2):
//! * maps made by `osdmaptool --createsimple` decode to what `--print` shows and re-encode byte-identically;
//! * maps we edit and encode are accepted by osdmaptool, and its placement (`--test-map-pgs-dump-all`,
//!   `--test-map-object`) equals ours for every PG, with down/out/reweighted OSDs, primary affinity, upmaps,
//!   pg_temp and primary_temp, replicated and EC pools.
//!
//! Skips when the tools are absent, unless FERRO_REQUIRE_CLUSTER is set.

#![allow(clippy::unwrap_used)] // test helpers

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use denc::{Decode, Encode, ObjectLocator};
use osdmap::map::{OSD_IN, state};
use osdmap::pool::{PgPool, TYPE_ERASURE, TYPE_REPLICATED, flag};
use osdmap::{OsdMap, PgId, features};

fn tools_available() -> bool {
    let ok = ["osdmaptool", "crushtool"]
        .iter()
        .all(|t| Command::new(t).arg("--help").output().is_ok());
    if !ok {
        assert!(
            std::env::var_os("FERRO_REQUIRE_CLUSTER").is_none(),
            "osdmaptool/crushtool not found but FERRO_REQUIRE_CLUSTER is set"
        );
        eprintln!("skipping: osdmaptool or crushtool not found");
    }
    ok
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ferro-osdmap-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run(tool: &str, args: &[&str]) -> String {
    let out = Command::new(tool).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{tool} {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn createsimple(dir: &Path, n: u32, pg_bits: u32) -> PathBuf {
    let f = dir.join(format!("om-{n}-{pg_bits}"));
    let fs = f.to_str().unwrap();
    run(
        "osdmaptool",
        &[
            "--createsimple",
            &n.to_string(),
            "--clobber",
            "--with-default-pool",
            "--pg_bits",
            &pg_bits.to_string(),
            fs,
        ],
    );
    f
}

#[test]
fn createsimple_decodes_prints_and_reencodes() {
    if !tools_available() {
        return;
    }
    let dir = scratch("simple");
    for (n, bits) in [(1, 6), (3, 6), (6, 4), (12, 3), (40, 2)] {
        let f = createsimple(&dir, n, bits);
        let bytes = std::fs::read(&f).unwrap();
        let m = OsdMap::decode_all(bytes.clone()).unwrap();
        assert_eq!(
            m.to_bytes(features::PACIFIC | features::RESERVED),
            bytes,
            "createsimple {n}: re-encoding differs"
        );
        let print = run("osdmaptool", &[f.to_str().unwrap(), "--print"]);
        let has_line =
            |want: String| assert!(print.lines().any(|l| l == want), "missing {want:?} in\n{print}");
        has_line(format!("epoch {}", m.epoch));
        has_line(format!("fsid {}", m.fsid));
        has_line(format!("max_osd {}", m.max_osd));
        has_line(format!("crush_version {}", m.crush_version));
        assert_eq!(m.max_osd, n as i32);
        let pool = m.pools.get(&1).unwrap();
        let line = format!(
            "pool 1 '{}' replicated size {} min_size {} crush_rule {} object_hash rjenkins pg_num {} pgp_num {}",
            m.pool_name[&1], pool.size, pool.min_size, pool.crush_rule, pool.pg_num, pool.pgp_num
        );
        assert!(print.contains(&line), "missing {line:?} in\n{print}");
        assert_eq!(pool.pg_num, n << bits);
        let dump: serde_json::Value =
            serde_json::from_str(&run("osdmaptool", &[f.to_str().unwrap(), "--dump", "json"])).unwrap();
        common::compare_with_dump(&m, &dump);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A 12-OSD map over 4 hosts with a replicated and an EC rule, edited to exercise every placement step.
fn build_test_map(dir: &Path) -> OsdMap {
    let crush_txt = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/crush4x3.txt");
    let crush_bin = dir.join("crush4x3");
    run(
        "crushtool",
        &[
            "-c",
            crush_txt.to_str().unwrap(),
            "-o",
            crush_bin.to_str().unwrap(),
        ],
    );
    let f = createsimple(dir, 12, 3);
    run(
        "osdmaptool",
        &[f.to_str().unwrap(), "--import-crush", crush_bin.to_str().unwrap()],
    );
    let mut m = OsdMap::decode_all(std::fs::read(&f).unwrap()).unwrap();
    assert!(
        m.crush_map.is_some(),
        "our CRUSH decoder must read crushtool's map"
    );

    for i in 0..12 {
        m.osd_state[i] = state::EXISTS | state::UP;
        m.osd_weight[i] = OSD_IN;
    }
    m.osd_state[3] = state::EXISTS; // down, still in
    m.osd_weight[7] = 0; // up, out
    m.osd_weight[5] = 0x8000; // reweighted to 0.5
    m.osd_state[10] = state::EXISTS; // down and out
    m.osd_weight[10] = 0;
    m.set_primary_affinity(0, 0x4000);
    m.set_primary_affinity(4, 0);
    m.set_primary_affinity(8, 0xc000);

    let mut ec = PgPool {
        type_: TYPE_ERASURE,
        size: 4,
        min_size: 3,
        crush_rule: 1,
        object_hash: 2,
        flags: flag::HASHPSPOOL,
        erasure_code_profile: "default".into(),
        stripe_width: 8192,
        pg_autoscale_mode: osdmap::pool::autoscale::OFF,
        ..PgPool::default()
    };
    ec.set_pg_num(32);
    ec.set_pgp_num(32);
    ec.pg_num_target = 32;
    ec.pgp_num_target = 32;
    let mut odd = PgPool {
        type_: TYPE_REPLICATED,
        size: 2,
        min_size: 1,
        crush_rule: 0,
        object_hash: 2,
        flags: flag::HASHPSPOOL,
        ..PgPool::default()
    };
    odd.set_pg_num(12);
    odd.set_pgp_num(10);
    let mut legacy = odd.clone();
    legacy.flags = 0; // no HASHPSPOOL: pps = stable_mod + pool
    legacy.size = 3;
    m.pools.insert(2, ec);
    m.pools.insert(3, odd);
    m.pools.insert(4, legacy);
    m.pool_name.insert(2, "ecpool".into());
    m.pool_name.insert(3, "odd".into());
    m.pool_name.insert(4, "legacy".into());
    m.pool_max = 4;
    let mut profile = std::collections::BTreeMap::new();
    for (k, v) in [
        ("k", "2"),
        ("m", "2"),
        ("plugin", "jerasure"),
        ("technique", "reed_sol_van"),
    ] {
        profile.insert(k.to_string(), v.to_string());
    }
    m.erasure_code_profiles.insert("default".into(), profile);

    m.pg_upmap.insert(PgId::new(1, 3), vec![1, 2, 4]);
    m.pg_upmap.insert(PgId::new(1, 4), vec![7, 1, 2]); // 7 is out: ignored
    m.pg_upmap.insert(PgId::new(2, 1), vec![0, 3, 6, 9]);
    for s in 5..40 {
        m.pg_upmap_items
            .insert(PgId::new(1, s), vec![(0, 9), (1, 11), (2, 7)]);
    }
    for s in 0..16 {
        m.pg_upmap_items.insert(PgId::new(2, s), vec![(4, 5), (6, 8)]);
    }
    m.pg_temp.insert(PgId::new(1, 20), vec![2, 3, 4]);
    m.pg_temp.insert(PgId::new(1, 21), vec![6, 1]);
    m.primary_temp.insert(PgId::new(1, 21), 1);
    m.primary_temp.insert(PgId::new(1, 22), 9);
    m.pg_temp.insert(PgId::new(2, 2), vec![0, 3, 6, 9]);
    m.epoch += 1;
    m.raw = None;
    m
}

fn parse_set(s: &str) -> Vec<i64> {
    s.trim_matches(|c| c == '[' || c == ']')
        .split(',')
        .filter(|x| !x.is_empty())
        .map(|x| x.trim().parse().unwrap())
        .collect()
}

/// An OSD set and its primary, as osdmaptool prints them.
type SetAndPrimary = (Vec<i64>, i64);

/// Parse `1.5 raw ([4,1], p4) up ([4,1], p4) acting ([4,1], p4)`.
fn parse_dump_all(line: &str) -> Option<(String, [SetAndPrimary; 3])> {
    let (pg, rest) = line.split_once(' ')?;
    let mut sets = Vec::new();
    for part in rest.split(") ") {
        let inner = part.split_once('(')?.1.trim_end_matches(')');
        let (set, p) = inner.rsplit_once(", p")?;
        sets.push((parse_set(set), p.parse().ok()?));
    }
    let sets: [SetAndPrimary; 3] = sets.try_into().ok()?;
    Some((pg.to_string(), sets))
}

fn widen(v: &[i32]) -> Vec<i64> {
    v.iter().map(|x| i64::from(*x)).collect()
}

#[test]
fn placement_matches_osdmaptool() {
    if !tools_available() {
        return;
    }
    let dir = scratch("placement");
    let m = build_test_map(&dir);
    let f = dir.join("edited");
    std::fs::write(&f, m.to_bytes(features::PACIFIC | features::RESERVED)).unwrap();
    let fs = f.to_str().unwrap();
    // osdmaptool must accept our encoding (it verifies the crc) and see our edits, field by field.
    let dump: serde_json::Value = serde_json::from_str(&run("osdmaptool", &[fs, "--dump", "json"])).unwrap();
    let fields = common::compare_with_dump(&m, &dump);
    eprintln!("osdmaptool --dump json: {fields} values equal ours");
    let print = run("osdmaptool", &[fs, "--print"]);
    assert!(print.contains("pool 2 'ecpool' erasure"), "{print}");
    assert!(print.contains("pg_upmap_items 1.5 [0,9,1,11,2,7]"), "{print}");

    let (compared, [remapped, temp, holes, affinity]) = compare_all_pgs(&m, fs);
    eprintln!(
        "placement: remapped {remapped}, temp {temp}, EC holes {holes}, affinity-moved primaries {affinity}"
    );
    assert!(
        remapped > 0 && temp > 0 && holes > 0,
        "the edited map must exercise upmap, temp and EC holes"
    );
    let expected: u32 = m.pools.values().map(|p| p.pg_num).sum();
    assert_eq!(compared, expected as usize, "every PG of every pool compared");
    eprintln!("placement: {compared} PGs identical to osdmaptool");

    // Objects: name -> pg -> acting, for a sample of names in each pool.
    let mut objects = 0;
    for pool in [1i64, 2, 3] {
        for i in 0..12 {
            let name = format!("obj-{pool}-{i}-{}", i * 7919);
            let out = run(
                "osdmaptool",
                &[fs, "--test-map-object", &name, "--pool", &pool.to_string()],
            );
            let line = out.lines().find(|l| l.contains("object '")).unwrap();
            // " object 'NAME' -> 1.6 -> [3]"
            let mut parts = line.rsplit(" -> ");
            let acting = parse_set(parts.next().unwrap());
            let pg = parts.next().unwrap().to_string();
            let loc = ObjectLocator {
                pool,
                ..ObjectLocator::default()
            };
            let (our_pg, ua) = m.object_to_up_acting(name.as_bytes(), &loc).unwrap();
            assert_eq!(our_pg.to_string(), pg, "pg of {name}");
            assert_eq!(widen(&ua.acting), acting, "acting of {name}");
            objects += 1;
        }
    }
    eprintln!("placement: {objects} objects identical to osdmaptool");

    // Let Ceph's balancer add pg_upmap_items and write the map itself: we must decode Ceph's encoding of all our
    // edits, re-encode it byte for byte, and still place like osdmaptool.
    let upmap_cmds = dir.join("upmap.txt");
    run(
        "osdmaptool",
        &[
            fs,
            "--upmap",
            upmap_cmds.to_str().unwrap(),
            "--upmap-deviation",
            "1",
            "--upmap-max",
            "40",
            "--save",
        ],
    );
    let saved = std::fs::read(&f).unwrap();
    let m2 = OsdMap::decode_all(saved.clone()).unwrap();
    assert_eq!(
        m2.to_bytes(features::PACIFIC | features::RESERVED),
        saved,
        "osdmaptool's map re-encodes identically"
    );
    let changes = std::fs::read_to_string(&upmap_cmds).unwrap().lines().count();
    assert!(
        changes > 0 && m2.pg_upmap_items != m.pg_upmap_items,
        "the balancer changed nothing"
    );
    let (n, _) = compare_all_pgs(&m2, fs);
    eprintln!("placement: after osdmaptool --upmap ({changes} upmap changes): {n} PGs identical");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Compare every PG of every pool of `m` with `osdmaptool FILE --test-map-pgs-dump-all`; returns the number of
/// PGs compared and counts of PGs that were remapped by upmaps, had a temp mapping, had EC holes, or had a primary
/// that is not the first OSD.
fn compare_all_pgs(m: &OsdMap, file: &str) -> (usize, [usize; 4]) {
    let mut compared = 0;
    let (mut remapped, mut temp, mut holes, mut affinity) = (0, 0, 0, 0);
    for &pool in m.pools.keys() {
        let out = run(
            "osdmaptool",
            &[file, "--test-map-pgs-dump-all", "--pool", &pool.to_string()],
        );
        for line in out.lines().filter(|l| l.starts_with(&format!("{pool}."))) {
            let (pg, [raw, up, acting]) = parse_dump_all(line).unwrap_or_else(|| panic!("unparsed: {line}"));
            let seed = u32::from_str_radix(pg.split_once('.').unwrap().1, 16).unwrap();
            let pgid = PgId::new(pool as u64, seed);
            let (our_raw, our_raw_p) = m.pg_to_raw_osds(pgid).unwrap();
            let ua = m.pg_to_up_acting_osds(pgid).unwrap();
            assert_eq!(
                (widen(&our_raw), i64::from(our_raw_p)),
                raw,
                "{file}: raw of {pg}"
            );
            assert_eq!(
                (widen(&ua.up), i64::from(ua.up_primary)),
                up,
                "{file}: up of {pg}"
            );
            assert_eq!(
                (widen(&ua.acting), i64::from(ua.acting_primary)),
                acting,
                "{file}: acting of {pg}"
            );
            compared += 1;
            remapped += usize::from(up.0 != raw.0 && !up.0.is_empty());
            temp += usize::from(acting != up);
            holes += usize::from(ua.up.contains(&osdmap::CRUSH_ITEM_NONE));
            affinity += usize::from(ua.up_primary != ua.up.first().copied().unwrap_or(-1));
        }
    }
    (compared, [remapped, temp, holes, affinity])
}

/// Real maps from Ceph's corpus (test clusters of 16.2 and later): where osdmaptool 16.2 reads them, its placement
/// of every PG equals ours.
#[test]
fn corpus_maps_place_like_osdmaptool() {
    if !tools_available() {
        return;
    }
    if ceph_corpus::root().is_none() {
        eprintln!("skipping: ../shared/corpus not found");
        return;
    }
    let (mut maps, mut pgs, mut skipped) = (0, 0, 0);
    for version in ceph_corpus::versions() {
        for (path, bytes) in ceph_corpus::samples(&version, "OSDMap") {
            let m = OsdMap::decode_all(bytes).unwrap();
            let p = path.to_str().unwrap();
            // osdmaptool 16.2 may refuse newer maps (e.g. CRUSH MSR rules); those are not comparable.
            let ok = Command::new("osdmaptool")
                .args([p, "--print"])
                .output()
                .unwrap()
                .status
                .success();
            if !ok || m.pools.is_empty() || m.crush_map.is_none() {
                skipped += 1;
                continue;
            }
            let (n, _) = compare_all_pgs(&m, p);
            pgs += n;
            maps += 1;
        }
    }
    eprintln!("corpus: {maps} real maps, {pgs} PGs identical to osdmaptool ({skipped} maps skipped)");
    assert!(maps > 0);
}
