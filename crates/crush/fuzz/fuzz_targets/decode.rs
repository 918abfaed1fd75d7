// SPDX-License-Identifier: LGPL-3.0-or-later
//! Fuzz the CRUSH map decoder and, for maps that decode, the re-encoder and the mapper.
//!
//! Run: `cd crates/crush/fuzz && cargo fuzz run decode` (seed it with `../testdata/*.bin`).
#![no_main]

use crush::{CrushMap, op};
use denc::Encoder;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(mut map) = CrushMap::decode_bytes(data.to_vec()) else {
        return;
    };
    // Whatever decodes must re-encode to something that decodes to the same buckets and rules.
    let mut e = Encoder::new(u64::MAX);
    map.encode(&mut e);
    let again = CrushMap::decode_bytes(e.into_bytes()).expect("re-decode of our own encoding");
    assert_eq!(again.buckets, map.buckets);
    assert_eq!(again.rules, map.rules);

    // Hostile retry and replica counts make mapping slow rather than wrong (in Ceph too); clamp them so each input
    // stays fast.
    map.tunables.choose_total_tries = map.tunables.choose_total_tries.min(60);
    map.tunables.choose_local_tries = map.tunables.choose_local_tries.min(5);
    map.tunables.choose_local_fallback_tries = map.tunables.choose_local_fallback_tries.min(5);
    for r in map.rules.iter_mut().flatten() {
        for s in &mut r.steps {
            if (op::SET_CHOOSE_TRIES..=op::SET_CHOOSE_LOCAL_FALLBACK_TRIES).contains(&s.op) {
                s.arg1 = s.arg1.min(60);
            }
            // A huge replica count makes firstn try every "replica" up to it (as Ceph does).
            let choose = [op::CHOOSE_FIRSTN, op::CHOOSE_INDEP, op::CHOOSELEAF_FIRSTN, op::CHOOSELEAF_INDEP];
            if choose.contains(&s.op) {
                s.arg1 = s.arg1.min(16);
            }
        }
    }
    let weights = [0x10000u32, 0x8000, 0, 0x10000, 0x4000, 0x10000, 0x10000, 0x10000];
    for rule in 0..map.rules.len().min(8) {
        for x in 0..2 {
            let out = map.do_rule(rule, x, 4, &weights, Some(-1));
            assert!(out.len() <= 4);
        }
    }
});
