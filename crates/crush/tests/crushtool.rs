// SPDX-License-Identifier: LGPL-3.0-or-later
//! Bit-exactness against the real `crushtool` (Ceph 16.2.15): maps are built (`--build`) or compiled (`-c`) by
//! crushtool itself, decoded by us, and every mapping `crushtool --test --show-mappings` prints is compared with
//! [`CrushMap::do_rule`]. Decoded names, ids, weights and rule steps are compared with `crushtool -d`.
//!
//! Without crushtool on PATH these tests print a "skipping" line, unless `FERRO_REQUIRE_CLUSTER` is set (then they
//! fail).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crush::hash::{CRUSH_HASH_RJENKINS1, crush_hash32_2};
use crush::{BucketKind, CrushMap, op};
use denc::Encoder;

use ceph_corpus::PACIFIC_FEATURES;
const MAX_X: u32 = 1023;

mod common;
use common::{run, testdata};

fn crushtool() -> Option<PathBuf> {
    common::tool("crushtool")
}

/// A scratch directory unique to this test process and test name.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ferro-crush-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

fn load(path: &Path) -> CrushMap {
    let bytes = std::fs::read(path).expect("read map");
    let map = CrushMap::decode_bytes(bytes.clone()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    // Everything crushtool writes must also re-encode byte-identically.
    let mut e = Encoder::new(PACIFIC_FEATURES);
    map.encode(&mut e);
    assert!(
        e.as_slice() == &bytes[..],
        "{}: re-encoding differs",
        path.display()
    );
    map
}

/// `CRUSH rule R x X [a,b,c]` lines -> ((rule, x), mapping).
fn parse_mappings(text: &str) -> Vec<((usize, u32), Vec<i32>)> {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("CRUSH rule ")?;
            let (rule, rest) = rest.split_once(" x ")?;
            let (x, list) = rest.split_once(' ')?;
            let list = list.trim().strip_prefix('[')?.strip_suffix(']')?;
            let items = if list.is_empty() {
                Vec::new()
            } else {
                list.split(',').map(|v| v.parse().expect("item")).collect()
            };
            Some(((rule.parse().ok()?, x.parse().ok()?), items))
        })
        .collect()
}

/// One `crushtool --test` run over x in 0..=MAX_X for every rule, compared with ours. Returns mappings compared
/// per rule.
fn compare(
    tool: &Path,
    bin: &Path,
    map: &CrushMap,
    num_rep: usize,
    reweights: &[(i32, f32)],
    pool_id: Option<i64>,
) -> BTreeMap<usize, usize> {
    let bin_s = bin.to_str().expect("utf-8 path");
    let nrep = num_rep.to_string();
    let max_x = MAX_X.to_string();
    let mut args = vec![
        "-i",
        bin_s,
        "--test",
        "--show-mappings",
        "--num-rep",
        &nrep,
        "--min-x",
        "0",
        "--max-x",
        &max_x,
    ];
    let rw: Vec<(String, String)> = reweights
        .iter()
        .map(|(d, w)| (d.to_string(), w.to_string()))
        .collect();
    for (d, w) in &rw {
        args.extend(["--weight", d, w]);
    }
    let pool = pool_id.map(|p| p.to_string());
    if let Some(p) = &pool {
        args.extend(["--pool-id", p]);
    }
    let text = run(tool, &args);
    let theirs = parse_mappings(&text);
    assert!(!theirs.is_empty(), "crushtool printed no mappings for {args:?}");

    // CrushTester's weight vector: 1.0 for every device, overridden by --weight (float * 0x10000, truncated).
    let mut weights = vec![0x10000u32; map.max_devices.max(0) as usize];
    for (d, w) in reweights {
        weights[*d as usize] = (*w * 0x10000 as f32) as u32;
    }
    let mut per_rule = BTreeMap::new();
    for ((rule, x), expect) in theirs {
        // With --pool-id, crushtool maps hash(x, pool), but it always uses the default choose_args set (-1); pool
        // specific sets are checked against osdmaptool in tests/osdmaptool.rs.
        let real_x = match pool_id {
            Some(p) => crush_hash32_2(CRUSH_HASH_RJENKINS1, x, p as u32),
            None => x,
        };
        let ours = map.do_rule(rule, real_x, num_rep, &weights, Some(-1));
        assert_eq!(
            ours,
            expect,
            "{}: rule {rule} x {x} num_rep {num_rep} reweights {reweights:?} pool {pool_id:?}",
            bin.display()
        );
        *per_rule.entry(rule).or_insert(0) += 1;
    }
    per_rule
}

fn report(label: &str, counts: &BTreeMap<usize, usize>) -> usize {
    let total: usize = counts.values().sum();
    eprintln!("{label}: {total} mappings identical (per rule: {counts:?})");
    total
}

fn merge(into: &mut BTreeMap<usize, usize>, from: BTreeMap<usize, usize>) {
    for (k, v) in from {
        *into.entry(k).or_insert(0) += v;
    }
}

#[test]
fn built_maps_match_crushtool() {
    let Some(tool) = crushtool() else { return };
    let dir = scratch("built");
    let layouts: &[(&str, &[&str])] = &[
        (
            "straw2-rack",
            &[
                "--num_osds",
                "24",
                "host",
                "straw2",
                "4",
                "rack",
                "straw2",
                "3",
                "root",
                "straw2",
                "0",
            ],
        ),
        (
            "straw",
            &["--num_osds", "30", "host", "straw", "5", "root", "straw", "0"],
        ),
        (
            "uniform-list",
            &[
                "--num_osds",
                "27",
                "host",
                "uniform",
                "3",
                "rack",
                "list",
                "3",
                "root",
                "straw2",
                "0",
            ],
        ),
        (
            "tree",
            &["--num_osds", "16", "host", "tree", "4", "root", "straw2", "0"],
        ),
        (
            "list-uniform",
            &["--num_osds", "20", "host", "list", "4", "root", "uniform", "0"],
        ),
    ];
    let mut grand = 0;
    for (name, layout) in layouts {
        let base = dir.join(format!("{name}.base"));
        let bin = dir.join(format!("{name}.bin"));
        let mut args = vec!["--build", "-o", base.to_str().expect("path")];
        args.extend_from_slice(layout);
        run(&tool, &args);
        // Add an erasure-style rule (chooseleaf indep over hosts) next to the default replicated one.
        run(
            &tool,
            &[
                "-i",
                base.to_str().expect("path"),
                "--create-simple-rule",
                "ec_host",
                "root",
                "host",
                "indep",
                "-o",
                bin.to_str().expect("path"),
            ],
        );
        let map = load(&bin);
        let mut counts = BTreeMap::new();
        for num_rep in [1, 3, 5] {
            merge(&mut counts, compare(&tool, &bin, &map, num_rep, &[], None));
        }
        merge(
            &mut counts,
            compare(
                &tool,
                &bin,
                &map,
                4,
                &[(0, 0.5), (3, 0.0), (5, 0.25), (7, 0.75), (11, 0.0)],
                None,
            ),
        );
        grand += report(&format!("built {name}"), &counts);
    }
    eprintln!("built maps: {grand} mappings identical");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The mixed map with classes, compiled, plus copies with other tunable profiles.
#[test]
fn mixed_map_and_tunable_profiles_match_crushtool() {
    let Some(tool) = crushtool() else { return };
    let dir = scratch("mixed");
    let txt = dir.join("mixed.txt");
    std::fs::write(&txt, testdata("mixed.txt")).expect("write");
    let bin = dir.join("mixed.bin");
    run(
        &tool,
        &[
            "-c",
            txt.to_str().expect("path"),
            "-o",
            bin.to_str().expect("path"),
        ],
    );

    let profiles: &[(&str, &[&str])] = &[
        ("optimal", &[]),
        ("vary_r-0", &["--set-chooseleaf-vary-r", "0"]),
        ("stable-0", &["--set-chooseleaf-stable", "0"]),
        ("descend_once-0", &["--set-chooseleaf-descend-once", "0"]),
        (
            "legacy",
            &[
                "--set-choose-local-tries",
                "2",
                "--set-choose-local-fallback-tries",
                "5",
                "--set-choose-total-tries",
                "19",
                "--set-chooseleaf-descend-once",
                "0",
                "--set-chooseleaf-vary-r",
                "0",
                "--set-chooseleaf-stable",
                "0",
            ],
        ),
    ];
    let mut grand = 0;
    for (name, flags) in profiles {
        let out = if flags.is_empty() {
            bin.clone()
        } else {
            let out = dir.join(format!("{name}.bin"));
            let mut args = vec!["-i", bin.to_str().expect("path")];
            args.extend_from_slice(flags);
            args.extend(["-o", out.to_str().expect("path")]);
            run(&tool, &args);
            out
        };
        let map = load(&out);
        let mut counts = BTreeMap::new();
        for num_rep in [2, 4, 7] {
            merge(&mut counts, compare(&tool, &out, &map, num_rep, &[], None));
        }
        merge(
            &mut counts,
            compare(
                &tool,
                &out,
                &map,
                3,
                &[
                    (23, 0.5),
                    (6, 0.0),
                    (33, 0.25),
                    (10, 0.75),
                    (42, 0.0),
                    (12, 0.125),
                ],
                None,
            ),
        );
        grand += report(&format!("mixed {name}"), &counts);
    }
    eprintln!("mixed map profiles: {grand} mappings identical");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn choose_args_match_crushtool() {
    let Some(tool) = crushtool() else { return };
    let dir = scratch("choose-args");
    // Pacific's compiler loses the class information of a map that also has choose_args, so the class rules
    // become plain takes here.
    let text = testdata("mixed.txt")
        .replace("step take croot class ssd", "step take croot")
        .replace("step take croot class hdd", "step take croot")
        + &testdata("choose_args.txt");
    let txt = dir.join("ca.txt");
    std::fs::write(&txt, text).expect("write");
    let bin = dir.join("ca.bin");
    run(
        &tool,
        &[
            "-c",
            txt.to_str().expect("path"),
            "-o",
            bin.to_str().expect("path"),
        ],
    );
    let map = load(&bin);
    assert_eq!(map.choose_args.len(), 2);
    assert_eq!(map.choose_args[&-1][&6].ids, vec![-300, -301, -302, -303]);
    assert_eq!(map.choose_args[&7][&13].weight_set.len(), 3);

    let mut counts = BTreeMap::new();
    // crushtool applies the default set (-1) whatever the pool id; the pool id only changes the input x.
    for pool in [None, Some(7)] {
        for num_rep in [3, 5] {
            merge(&mut counts, compare(&tool, &bin, &map, num_rep, &[], pool));
        }
    }
    report("choose_args", &counts);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A decompiled bucket: (id, alg, [(item name, weight text)]).
type DecompiledBucket = (i32, String, Vec<(String, String)>);

/// What `crushtool -d` says about buckets and rules, parsed loosely.
#[derive(Debug, Default)]
struct Decompiled {
    devices: BTreeMap<i32, (String, Option<String>)>,
    types: BTreeMap<i32, String>,
    /// name -> (id, alg, [(item name, weight text)])
    buckets: BTreeMap<String, DecompiledBucket>,
    /// id -> (name, type text, steps text)
    rules: BTreeMap<i32, (String, String, Vec<String>)>,
    tunables: BTreeMap<String, u32>,
}

fn parse_decompiled(text: &str) -> Decompiled {
    let mut d = Decompiled::default();
    let mut bucket: Option<(String, DecompiledBucket)> = None;
    let mut rule: Option<(String, i32, String, Vec<String>)> = None;
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["tunable", name, v] => {
                d.tunables.insert(name.to_string(), v.parse().expect("tunable"));
            }
            ["device", id, name, rest @ ..] => {
                let class = match rest {
                    ["class", c] => Some(c.to_string()),
                    _ => None,
                };
                d.devices
                    .insert(id.parse().expect("id"), (name.to_string(), class));
            }
            ["type", id, name] => {
                d.types.insert(id.parse().expect("id"), name.to_string());
            }
            ["rule", name, "{"] => rule = Some((name.to_string(), 0, String::new(), Vec::new())),
            [_, name, "{"] => bucket = Some((name.to_string(), (0, String::new(), Vec::new()))),
            ["id", id] => {
                if let Some((_, b)) = bucket.as_mut() {
                    b.0 = id.parse().expect("id");
                } else if let Some(r) = rule.as_mut() {
                    r.1 = id.parse().expect("id");
                }
            }
            ["alg", a] => {
                if let Some((_, b)) = bucket.as_mut() {
                    b.1 = a.to_string();
                }
            }
            ["item", name, "weight", w] | ["item", name, "weight", w, "pos", _] => {
                if let Some((_, b)) = bucket.as_mut() {
                    b.2.push((name.to_string(), w.to_string()));
                }
            }
            ["type", t] => {
                if let Some(r) = rule.as_mut() {
                    r.2 = t.to_string();
                }
            }
            ["step", ..] => {
                if let Some(r) = rule.as_mut() {
                    r.3.push(words[1..].join(" "));
                }
            }
            ["}"] => {
                if let Some((name, b)) = bucket.take() {
                    d.buckets.insert(name, b);
                }
                if let Some((name, id, t, steps)) = rule.take() {
                    d.rules.insert(id, (name, t, steps));
                }
            }
            _ => {}
        }
    }
    d
}

fn alg_name(kind: &BucketKind) -> &'static str {
    match kind {
        BucketKind::Uniform { .. } => "uniform",
        BucketKind::List { .. } => "list",
        BucketKind::Tree { .. } => "tree",
        BucketKind::Straw { .. } => "straw",
        BucketKind::Straw2 { .. } => "straw2",
    }
}

/// Our rendering of a step, in crushtool's words.
fn step_text(map: &CrushMap, s: &crush::RuleStep) -> String {
    let type_name = |t: i32| map.type_names.get(&t).cloned().unwrap_or_else(|| t.to_string());
    let item_name = |id: i32| -> String {
        // A shadow bucket prints as "<original> class <class>".
        for (orig, by_class) in &map.class_buckets {
            for (class, shadow) in by_class {
                if *shadow == id {
                    return format!("{} class {}", map.names[orig], map.class_names[class]);
                }
            }
        }
        map.names.get(&id).cloned().unwrap_or_else(|| id.to_string())
    };
    let choose = |kind: &str, mode: &str| format!("{kind} {mode} {} type {}", s.arg1, type_name(s.arg2));
    match s.op {
        op::TAKE => format!("take {}", item_name(s.arg1)),
        op::EMIT => "emit".into(),
        op::CHOOSE_FIRSTN => choose("choose", "firstn"),
        op::CHOOSE_INDEP => choose("choose", "indep"),
        op::CHOOSELEAF_FIRSTN => choose("chooseleaf", "firstn"),
        op::CHOOSELEAF_INDEP => choose("chooseleaf", "indep"),
        op::SET_CHOOSE_TRIES => format!("set_choose_tries {}", s.arg1),
        op::SET_CHOOSELEAF_TRIES => format!("set_chooseleaf_tries {}", s.arg1),
        op::SET_CHOOSE_LOCAL_TRIES => format!("set_choose_local_tries {}", s.arg1),
        op::SET_CHOOSE_LOCAL_FALLBACK_TRIES => format!("set_choose_local_fallback_tries {}", s.arg1),
        op::SET_CHOOSELEAF_VARY_R => format!("set_chooseleaf_vary_r {}", s.arg1),
        op::SET_CHOOSELEAF_STABLE => format!("set_chooseleaf_stable {}", s.arg1),
        other => format!("op {other}"),
    }
}

fn check_against_decompile(tool: &Path, bin: &Path) -> (usize, usize, usize) {
    let map = load(bin);
    let text = run(tool, &["-d", bin.to_str().expect("path")]);
    let d = parse_decompiled(&text);

    for (id, (name, class)) in &d.devices {
        assert_eq!(map.names.get(id), Some(name), "device {id}");
        let ours = map.class_map.get(id).and_then(|c| map.class_names.get(c));
        assert_eq!(ours, class.as_ref(), "class of device {id}");
    }
    for (id, name) in &d.types {
        if *id != 0 || map.type_names.contains_key(id) {
            assert_eq!(map.type_names.get(id), Some(name), "type {id}");
        }
    }
    for (name, (id, alg, items)) in &d.buckets {
        let b = map
            .bucket(*id)
            .unwrap_or_else(|| panic!("bucket {name} ({id}) missing"));
        assert_eq!(map.names.get(id), Some(name));
        assert_eq!(alg_name(&b.kind), alg, "alg of {name}");
        let ours: Vec<(String, String)> = b
            .items
            .iter()
            .enumerate()
            .map(|(pos, item)| {
                (
                    map.names[item].clone(),
                    format!("{:.3}", f64::from(b.item_weight(pos)) / 65536.0),
                )
            })
            .collect();
        assert_eq!(&ours, items, "items of {name}");
    }
    // Real buckets; shadow (per-class) buckets are named "<bucket>~<class>" and not printed by crushtool -d.
    let named_buckets = map
        .buckets
        .iter()
        .flatten()
        .filter(|b| map.names.get(&b.id).is_some_and(|n| !n.contains('~')))
        .count();
    assert_eq!(named_buckets, d.buckets.len());
    for (id, (name, t, steps)) in &d.rules {
        let r = map.rule(*id as usize).expect("rule");
        assert_eq!(map.rule_names.get(id), Some(name));
        let t_ours = match r.rule_type {
            1 => "replicated",
            3 => "erasure",
            _ => "other",
        };
        assert_eq!(t_ours, t, "type of rule {name}");
        let ours: Vec<String> = r.steps.iter().map(|s| step_text(&map, s)).collect();
        assert_eq!(&ours, steps, "steps of rule {name}");
    }
    assert_eq!(map.rules.iter().flatten().count(), d.rules.len());
    let t = &map.tunables;
    let expect = [
        ("choose_local_tries", t.choose_local_tries),
        ("choose_local_fallback_tries", t.choose_local_fallback_tries),
        ("choose_total_tries", t.choose_total_tries),
        ("chooseleaf_descend_once", t.chooseleaf_descend_once),
        ("chooseleaf_vary_r", u32::from(t.chooseleaf_vary_r)),
        ("chooseleaf_stable", u32::from(t.chooseleaf_stable)),
        ("straw_calc_version", u32::from(t.straw_calc_version)),
        ("allowed_bucket_algs", t.allowed_bucket_algs),
    ];
    // crushtool prints only the tunables that differ from the legacy profile.
    for (name, v) in expect {
        if let Some(theirs) = d.tunables.get(name) {
            assert_eq!(*theirs, v, "tunable {name}");
        }
    }
    (d.devices.len(), d.buckets.len(), d.rules.len())
}

#[test]
fn decoded_maps_match_decompiled_text() {
    let Some(tool) = crushtool() else { return };
    let dir = scratch("decompile");
    let txt = dir.join("mixed.txt");
    std::fs::write(&txt, testdata("mixed.txt")).expect("write");
    let bin = dir.join("mixed.bin");
    run(
        &tool,
        &[
            "-c",
            txt.to_str().expect("path"),
            "-o",
            bin.to_str().expect("path"),
        ],
    );
    let legacy = dir.join("legacy.bin");
    run(
        &tool,
        &[
            "-i",
            bin.to_str().expect("path"),
            "--set-choose-local-tries",
            "2",
            "--set-chooseleaf-vary-r",
            "0",
            "-o",
            legacy.to_str().expect("path"),
        ],
    );
    let mut checked = vec![bin, legacy];
    // Corpus maps too, where present. Newer ones (Reef, Squid, Tentacle) cannot re-encode identically with
    // Pacific features, but Pacific's crushtool maps them, and so must we.
    let mut corpus_mappings = 0;
    let mut newer = Vec::new();
    let mut from_corpus = Vec::new();
    for v in ceph_corpus::versions() {
        let paths = ceph_corpus::samples(&v, "CrushWrapper")
            .into_iter()
            .map(|(p, _)| p);
        if v.starts_with("16.2") {
            from_corpus.extend(paths);
        } else {
            newer.extend(paths);
        }
    }
    checked.extend(from_corpus.iter().cloned());
    for bin in &newer {
        let bytes = std::fs::read(bin).expect("read");
        let map = CrushMap::decode_bytes(bytes).unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
        if map.rules.iter().flatten().next().is_some() && map.max_devices > 0 {
            corpus_mappings += compare(&tool, bin, &map, 3, &[], None).values().sum::<usize>();
        }
    }
    for bin in &checked {
        let (devices, buckets, rules) = check_against_decompile(&tool, bin);
        eprintln!(
            "{}: {devices} devices, {buckets} buckets, {rules} rules agree with crushtool -d",
            bin.display()
        );
        // The corpus maps are small; map them too.
        let map = load(bin);
        if from_corpus.contains(bin) && map.rules.iter().flatten().next().is_some() && map.max_devices > 0 {
            corpus_mappings += compare(&tool, bin, &map, 3, &[], None).values().sum::<usize>();
        }
    }
    eprintln!("corpus maps: {corpus_mappings} mappings identical");
    let _ = std::fs::remove_dir_all(&dir);
}

/// straw buckets compiled with `straw_calc_version 0` get different straws (the legacy, buggy calculation); the
/// mapper must use the encoded straws either way.
#[test]
fn straw_calc_version_0_maps_match_crushtool() {
    let Some(tool) = crushtool() else { return };
    let dir = scratch("straw-v0");
    let txt = dir.join("v0.txt");
    std::fs::write(
        &txt,
        testdata("mixed.txt").replace("tunable straw_calc_version 1", "tunable straw_calc_version 0"),
    )
    .expect("write");
    let bin = dir.join("v0.bin");
    run(
        &tool,
        &[
            "-c",
            txt.to_str().expect("path"),
            "-o",
            bin.to_str().expect("path"),
        ],
    );
    let map = load(&bin);
    assert_eq!(map.tunables.straw_calc_version, 0);
    let mut counts = BTreeMap::new();
    for num_rep in [3, 4] {
        merge(
            &mut counts,
            compare(&tool, &bin, &map, num_rep, &[(17, 0.5)], None),
        );
    }
    report("straw_calc_version 0", &counts);
    let _ = std::fs::remove_dir_all(&dir);
}
