// SPDX-License-Identifier: LGPL-3.0-or-later
//! Every `CrushWrapper` sample of Ceph's object corpus: 16.2 samples decode and re-encode byte-identically with
//! Pacific's features; newer samples decode (their extra trailing fields are recognised) or are refused with an
//! error, never a panic.

use std::path::PathBuf;

use bytes::Bytes;
use ceph_corpus::PACIFIC_FEATURES;
use crush::CrushMap;
use denc::Encoder;

/// Every CrushWrapper sample as `(version, path, bytes)`, versions oldest first.
fn samples() -> Vec<(String, PathBuf, Bytes)> {
    ceph_corpus::versions()
        .into_iter()
        .flat_map(|v| {
            ceph_corpus::samples(&v, "CrushWrapper")
                .into_iter()
                .map(move |(p, b)| (v.clone(), p, b))
        })
        .collect()
}

#[test]
fn corpus_crush_maps() {
    let all = samples();
    if all.is_empty() {
        eprintln!("skipping: ../shared/corpus not found (or has no CrushWrapper samples)");
        return;
    }
    let (mut pacific_identical, mut newer_decoded, mut newer_refused, mut with_msr) = (0, 0, 0, 0);
    for (version, path, bytes) in &all {
        let decoded = CrushMap::decode_bytes(bytes.clone());
        if version.starts_with("16.2") {
            let map = decoded.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let mut e = Encoder::new(PACIFIC_FEATURES);
            map.encode(&mut e);
            assert_eq!(
                e.as_slice(),
                &bytes[..],
                "{}: re-encoding differs",
                path.display()
            );
            // The decoded map is self-consistent: mapping every rule does not panic.
            let weights = vec![0x10000u32; map.max_devices.max(0) as usize];
            for (id, r) in map.rules.iter().enumerate() {
                if r.is_some() {
                    for x in 0..64 {
                        let out = map.do_rule(id, x, 3, &weights, Some(-1));
                        assert!(out.len() <= 3);
                    }
                }
            }
            pacific_identical += 1;
        } else {
            match decoded {
                Ok(map) => {
                    newer_decoded += 1;
                    // Squid and later append the MSR tunables (the reason 19.2 marks CrushWrapper
                    // forward-incompatible); none of the corpus rules uses MSR steps.
                    if map.msr_tunables.is_some() {
                        with_msr += 1;
                    }
                    assert!(!map.has_unknown_rule_ops(), "{}", path.display());
                    // Re-encoding what we understood must decode again to the same map.
                    let mut e = Encoder::new(PACIFIC_FEATURES);
                    map.encode(&mut e);
                    let again = CrushMap::decode_bytes(e.into_bytes())
                        .unwrap_or_else(|err| panic!("{}: re-decode: {err}", path.display()));
                    let mut expect = map.clone();
                    expect.msr_tunables = None;
                    assert_eq!(again, expect, "{}", path.display());
                }
                Err(err) => {
                    eprintln!("{} {}: refused: {err}", version, path.display());
                    newer_refused += 1;
                }
            }
        }
    }
    eprintln!(
        "CrushWrapper corpus: {pacific_identical} Pacific samples re-encoded identically, \
         {newer_decoded} newer decoded ({with_msr} with Squid's MSR tunables), {newer_refused} newer refused"
    );
    assert!(pacific_identical > 0);
}

/// The project's shared corpus checker agrees (exact consumption, identical 16.2 re-encoding, newer samples decoded
/// or cleanly refused).
#[test]
fn shared_corpus_checker() {
    let summary = ceph_corpus::check_type::<CrushMap>("CrushWrapper", ceph_corpus::PACIFIC_FEATURES);
    if !summary.skipped {
        let t = summary.total();
        assert_eq!(t.decoded + t.refused, t.samples);
        assert!(t.identical >= 10);
    }
}
