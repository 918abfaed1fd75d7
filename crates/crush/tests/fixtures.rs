// SPDX-License-Identifier: LGPL-3.0-or-later
//! Checks that need no Ceph tools: recorded crushtool fixtures (see testdata/README.md), feature-dependent
//! encodings, structural round trips and hostile input.

use std::collections::BTreeMap;
use std::path::Path;

use bytes::Bytes;
use crush::{Bucket, BucketKind, ChooseArg, CrushMap, Rule, RuleStep, Tunables, op};
use denc::{Decoder, Encoder};
use proptest::prelude::*;

use ceph_corpus::PACIFIC_FEATURES;

fn fixture(name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata").join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn encode(map: &CrushMap, features: u64) -> Bytes {
    let mut e = Encoder::new(features);
    map.encode(&mut e);
    e.into_bytes()
}

/// Compare with `crushtool --test --show-mappings` output recorded in a fixture.
fn check_recorded(bin: &str, mappings: &str, reweights: &[(usize, u32)]) -> usize {
    let map = CrushMap::decode_bytes(fixture(bin)).expect("decode fixture");
    let mut weights = vec![0x10000u32; map.max_devices as usize];
    for &(d, w) in reweights {
        weights[d] = w;
    }
    let text = String::from_utf8(fixture(mappings)).expect("utf-8");
    let mut n = 0;
    for line in text.lines() {
        let rest = line.strip_prefix("CRUSH rule ").expect("mapping line");
        let (rule, rest) = rest.split_once(" x ").expect("x");
        let (x, list) = rest.split_once(' ').expect("list");
        let expect: Vec<i32> = list
            .trim_matches(|c| c == '[' || c == ']')
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().expect("item"))
            .collect();
        let ours = map.do_rule(
            rule.parse().expect("rule"),
            x.parse().expect("x"),
            4,
            &weights,
            Some(-1),
        );
        assert_eq!(ours, expect, "{bin}: {line}");
        n += 1;
    }
    n
}

#[test]
fn recorded_crushtool_mappings() {
    // --weight 23 0.5 --weight 6 0 in the recording.
    let a = check_recorded("mixed.bin", "mixed.mappings", &[(23, 0x8000), (6, 0)]);
    let b = check_recorded("choose_args.bin", "choose_args.mappings", &[]);
    assert_eq!(a, 15 * 16);
    assert_eq!(b, 15 * 16);
}

#[test]
fn fixtures_reencode_identically_and_decode_what_crushtool_wrote() {
    for name in ["mixed.bin", "choose_args.bin"] {
        let bytes = fixture(name);
        let map = CrushMap::decode_bytes(bytes.clone()).expect("decode");
        assert_eq!(&encode(&map, PACIFIC_FEATURES)[..], &bytes[..], "{name}");
    }
    let map = CrushMap::decode_bytes(fixture("mixed.bin")).expect("decode");
    assert_eq!(map.max_devices, 48);
    assert_eq!(
        map.tunables,
        Tunables {
            allowed_bucket_algs: 62,
            ..Tunables::OPTIMAL
        }
    );
    let ht0 = map.bucket(-4).expect("ht0");
    assert!(matches!(ht0.kind, BucketKind::Tree { num_nodes: 16, .. }));
    assert_eq!(ht0.item_weight(1), 3 * 0x10000);
    assert_eq!(map.names[&-4], "ht0");
    assert_eq!(map.class_names.values().collect::<Vec<_>>(), ["hdd", "ssd"]);
    // 19 real buckets plus a shadow copy per class of the 5 buckets under croot (the only class-aware subtree).
    assert_eq!(map.buckets.iter().flatten().count(), 19 + 5 * 2);
    let ssd = map
        .class_names
        .iter()
        .find(|(_, n)| *n == "ssd")
        .map(|(id, _)| *id)
        .expect("ssd");
    assert_eq!(map.class_buckets[&-19][&ssd], -219);
    assert_eq!(map.rule_id_by_name("ec_hdd"), Some(10));
    assert_eq!(map.item_id_by_name("osd.7"), Some(7));
    assert_eq!(map.rule(3).expect("rule 3").steps.len(), 6);
}

#[test]
fn find_rule_follows_the_mask() {
    let map = CrushMap::decode_bytes(fixture("mixed.bin")).expect("decode");
    // Rule 2 is erasure with min_size 3: no match for size 2, a match for size 3.
    assert_eq!(map.find_rule(2, 3, 2), None);
    assert_eq!(map.find_rule(2, 3, 3), Some(2));
    assert_eq!(map.find_rule(2, 1, 3), None);
    assert_eq!(map.find_rule(0, 1, 3), Some(0));
    assert_eq!(map.find_rule(99, 1, 3), None);
}

#[test]
fn indep_rules_leave_holes_and_firstn_shifts() {
    let map = CrushMap::decode_bytes(fixture("mixed.bin")).expect("decode");
    let weights = vec![0x10000u32; 48];
    // Rule 13 chooses indep among the 4 OSDs of host hu0: asking for 6 leaves two NONE holes.
    let out = map.do_rule(13, 5, 6, &weights, None);
    assert_eq!(out.len(), 6);
    assert_eq!(out.iter().filter(|&&o| o == crush::CRUSH_ITEM_NONE).count(), 2);
    // Rule 14 (firstn) over the 3 OSDs of hu1 returns just 3 for 6.
    assert_eq!(map.do_rule(14, 5, 6, &weights, None).len(), 3);
    // Missing rule ids map to nothing.
    assert!(map.do_rule(99, 5, 3, &weights, None).is_empty());
}

#[test]
fn encoding_follows_peer_features() {
    let map = CrushMap::decode_bytes(fixture("choose_args.bin")).expect("decode");
    let full = encode(&map, PACIFIC_FEATURES);
    // Without TUNABLES5 the chooseleaf_stable byte is gone; without SERVER_LUMINOUS the classes and choose_args.
    let no_t5 = encode(&map, PACIFIC_FEATURES & !crush::FEATURE_CRUSH_TUNABLES5);
    let old = encode(
        &map,
        PACIFIC_FEATURES & !crush::FEATURE_CRUSH_TUNABLES5 & !crush::FEATUREMASK_SERVER_LUMINOUS,
    );
    assert_eq!(full.len(), no_t5.len() + 1);
    let back = CrushMap::decode_bytes(old).expect("decode legacy encoding");
    assert_eq!(
        back.tunables.chooseleaf_stable, 0,
        "absent field keeps its legacy value"
    );
    assert!(back.choose_args.is_empty() && back.class_map.is_empty());
    // The first choose_args set (-1) baked its position-0 weights into the straw2 buckets it covers.
    let Some(BucketKind::Straw2 { item_weights }) = back.bucket(-7).map(|b| b.kind.clone()) else {
        panic!("hw0 is straw2");
    };
    assert_eq!(item_weights, map.choose_args[&-1][&6].weight_set[0]);
}

#[test]
fn truncations_of_a_real_map_are_errors_or_shorter_maps() {
    let bytes = fixture("choose_args.bin");
    for cut in 0..bytes.len() {
        // Ceph treats the sections after the rule names as optional, so some prefixes are valid older maps.
        if let Ok(m) = CrushMap::decode_bytes(bytes[..cut].to_vec()) {
            let again = CrushMap::decode_bytes(encode(&m, PACIFIC_FEATURES)).expect("re-decode");
            assert_eq!(again.buckets, m.buckets);
        }
    }
}

/// Tunables a hostile map may set so high that mapping would take hours; clamp them before mapping fuzzed maps.
fn tame(map: &mut CrushMap) {
    let t = &mut map.tunables;
    t.choose_total_tries = t.choose_total_tries.min(60);
    t.choose_local_tries = t.choose_local_tries.min(5);
    t.choose_local_fallback_tries = t.choose_local_fallback_tries.min(5);
    for r in map.rules.iter_mut().flatten() {
        for s in &mut r.steps {
            if (op::SET_CHOOSE_TRIES..=op::SET_CHOOSE_LOCAL_FALLBACK_TRIES).contains(&s.op) {
                s.arg1 = s.arg1.min(60);
            }
            if matches!(
                s.op,
                op::CHOOSE_FIRSTN | op::CHOOSE_INDEP | op::CHOOSELEAF_FIRSTN | op::CHOOSELEAF_INDEP
            ) {
                s.arg1 = s.arg1.min(16);
            }
        }
    }
}

fn map_everything(map: &CrushMap) {
    let weights: Vec<u32> = (0..64u32)
        .map(|i| if i % 7 == 0 { 0x8000 } else { 0x10000 })
        .collect();
    for rule in 0..map.rules.len().min(32) {
        for x in 0..4 {
            for args in [None, Some(-1)] {
                let out = map.do_rule(rule, x, 5, &weights, args);
                assert!(out.len() <= 5);
            }
        }
    }
}

fn arb_bucket(id: i32) -> impl Strategy<Value = Bucket> {
    let items = proptest::collection::vec(-6i32..40, 0..6);
    (items, 0u16..4, 0u8..2, any::<u32>(), 0u8..5).prop_flat_map(move |(items, t, hash, weight, alg)| {
        let n = items.len();
        let kind = match alg {
            0 => any::<u32>()
                .prop_map(|w| BucketKind::Uniform { item_weight: w })
                .boxed(),
            1 => (
                proptest::collection::vec(any::<u32>(), n),
                proptest::collection::vec(any::<u32>(), n),
            )
                .prop_map(|(a, b)| BucketKind::List {
                    item_weights: a,
                    sum_weights: b,
                })
                .boxed(),
            2 => (0u8..20)
                .prop_flat_map(|nn| {
                    proptest::collection::vec(any::<u32>(), usize::from(nn)).prop_map(move |w| (nn, w))
                })
                .prop_map(|(num_nodes, node_weights)| BucketKind::Tree {
                    num_nodes,
                    node_weights,
                })
                .boxed(),
            3 => (
                proptest::collection::vec(any::<u32>(), n),
                proptest::collection::vec(any::<u32>(), n),
            )
                .prop_map(|(a, b)| BucketKind::Straw {
                    item_weights: a,
                    straws: b,
                })
                .boxed(),
            _ => proptest::collection::vec(0u32..0x40000, n)
                .prop_map(|w| BucketKind::Straw2 { item_weights: w })
                .boxed(),
        };
        kind.prop_map(move |kind| Bucket {
            id,
            bucket_type: t,
            hash,
            weight,
            items: items.clone(),
            kind,
        })
    })
}

fn arb_step() -> impl Strategy<Value = RuleStep> {
    (0u32..14, -8i32..8, -2i32..4).prop_map(|(op, arg1, arg2)| RuleStep { op, arg1, arg2 })
}

fn arb_map() -> impl Strategy<Value = CrushMap> {
    let buckets = proptest::collection::vec(proptest::option::of(Just(())), 0..6).prop_flat_map(|slots| {
        slots
            .into_iter()
            .enumerate()
            .map(|(i, s)| match s {
                Some(()) => arb_bucket(-1 - i as i32).prop_map(Some).boxed(),
                None => Just(None).boxed(),
            })
            .collect::<Vec<_>>()
    });
    let rules = proptest::collection::vec(
        proptest::option::of((any::<[u8; 4]>(), proptest::collection::vec(arb_step(), 0..8))),
        0..4,
    );
    let names = proptest::collection::btree_map(-8i32..40, "[a-z]{1,6}", 0..6);
    let tunables = (
        0u32..4,
        0u32..4,
        0u32..60,
        0u32..2,
        0u8..3,
        0u8..2,
        0u8..3,
        any::<u32>(),
    );
    (
        buckets,
        rules,
        names,
        tunables,
        proptest::collection::btree_map(0i32..40, 0i32..3, 0..4),
    )
        .prop_map(|(buckets, rules, names, t, class_map)| {
            let rules = rules
                .into_iter()
                .map(|r| {
                    r.map(|(m, steps)| Rule {
                        ruleset: m[0],
                        rule_type: m[1],
                        min_size: m[2],
                        max_size: m[3],
                        steps,
                    })
                })
                .collect();
            let mut map = CrushMap {
                buckets,
                rules,
                type_names: BTreeMap::from([(0, "osd".into()), (1, "host".into())]),
                names,
                rule_names: BTreeMap::from([(0, "r0".into())]),
                tunables: Tunables {
                    choose_local_tries: t.0,
                    choose_local_fallback_tries: t.1,
                    choose_total_tries: t.2,
                    chooseleaf_descend_once: t.3,
                    chooseleaf_vary_r: t.4,
                    chooseleaf_stable: t.5,
                    straw_calc_version: t.6,
                    allowed_bucket_algs: t.7,
                },
                class_map,
                class_names: BTreeMap::from([(0, "hdd".into()), (1, "ssd".into())]),
                ..CrushMap::default()
            };
            // A choose_args set over every straw2 bucket, with ids for the first one.
            let mut set = BTreeMap::new();
            for (slot, b) in map.buckets.iter().enumerate() {
                if let Some(b) = b
                    && let BucketKind::Straw2 { item_weights } = &b.kind
                {
                    let ids = if set.is_empty() {
                        b.items.iter().map(|i| i - 100).collect()
                    } else {
                        Vec::new()
                    };
                    let weight_set = vec![item_weights.clone(), item_weights.iter().map(|w| w / 2).collect()];
                    set.insert(slot as u32, ChooseArg { weight_set, ids });
                }
            }
            if !set.is_empty() {
                map.choose_args.insert(-1, set);
            }
            map.finalize();
            map
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn structural_round_trip(map in arb_map()) {
        let bytes = encode(&map, PACIFIC_FEATURES);
        let back = CrushMap::decode(&mut Decoder::new(bytes.clone())).expect("decode own encoding");
        prop_assert_eq!(&back, &map);
        prop_assert_eq!(encode(&back, PACIFIC_FEATURES), bytes);
        let mut tamed = back;
        tame(&mut tamed);
        map_everything(&tamed);
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..256)) {
        let mut with_magic = vec![0, 0, 1, 0];
        with_magic.extend_from_slice(&data);
        let _ = CrushMap::decode_bytes(data);
        if let Ok(mut m) = CrushMap::decode_bytes(with_magic) {
            tame(&mut m);
            map_everything(&m);
        }
    }

    #[test]
    fn mutated_real_maps_never_panic(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        which in any::<bool>(),
    ) {
        let mut bytes = fixture(if which { "mixed.bin" } else { "choose_args.bin" });
        for (at, v) in edits {
            let i = at.index(bytes.len());
            bytes[i] = v;
        }
        if let Ok(mut m) = CrushMap::decode_bytes(bytes) {
            let again = CrushMap::decode_bytes(encode(&m, PACIFIC_FEATURES)).expect("re-decode");
            prop_assert_eq!(&again.buckets, &m.buckets);
            tame(&mut m);
            map_everything(&m);
        }
    }
}

/// A map whose rule-name map holds an empty name in the legacy 64-bit-key form: decoding it would produce a map
/// that re-encodes to undecodable bytes (Ceph has the same trap), so it is refused. Found by the fuzz target.
#[test]
fn empty_names_are_refused() {
    let mut e = Encoder::new(PACIFIC_FEATURES);
    e.u32(crush::CRUSH_MAGIC);
    e.i32(0); // max_buckets
    e.u32(0); // max_rules
    e.i32(0); // max_devices
    e.u32(0); // type names
    e.u32(0); // item names
    e.u32(1); // rule names: one entry
    e.i32(0);
    e.u32(0); // "64-bit key" marker ...
    e.u32(0); // ... followed by an empty string
    let err = CrushMap::decode_bytes(e.into_bytes()).expect_err("empty name");
    assert!(err.to_string().contains("empty name"), "{err}");
}
