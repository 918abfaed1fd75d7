// SPDX-License-Identifier: LGPL-3.0-or-later
//! OSDMap, OSDMap::Incremental, pg_pool_t and MonMap decode arbitrary bytes without panicking (the map decoders
//! with and without crc verification, so the fuzzer gets past the crc), and whatever decodes re-encodes to bytes
//! that decode again and re-encode identically. Placement and apply_incremental on a decoded map never panic.

#![no_main]

use bytes::Bytes;
use denc::{Decode, Decoder, Encode, ObjectLocator};
use libfuzzer_sys::fuzz_target;
use osdmap::{Incremental, OsdMap, PgId, PgPool, features};

const F: u64 = features::PACIFIC | features::RESERVED;

fn stable<T: Decode + Encode>(v: &T, what: &str) {
    let first = v.to_bytes(F);
    let again = T::decode_all(first.clone()).unwrap_or_else(|e| panic!("{what}: our encoding does not decode: {e}"));
    assert_eq!(again.to_bytes(F), first, "{what}: encode/decode not stable");
}

fuzz_target!(|data: &[u8]| {
    let data = Bytes::copy_from_slice(data);
    if let Ok(p) = PgPool::decode(&mut Decoder::new(data.clone())) {
        stable(&p, "pg_pool_t");
    }
    if let Ok(m) = monmap::MonMap::decode(&mut Decoder::new(data.clone())) {
        stable(&m, "MonMap");
    }
    let _ = OsdMap::decode(&mut Decoder::new(data.clone()));
    let _ = Incremental::decode(&mut Decoder::new(data.clone()));
    if let Ok(mut m) = OsdMap::decode_ignoring_crc(&mut Decoder::new(data.clone())) {
        stable(&m, "OSDMap");
        // CRUSH (like Ceph's) retries up to numrep × choose_total_tries times; a rule asking for 65k replicas
        // is slow by design, not a bug here, so placement is only exercised on plausible rules.
        let plausible = m.crush_map.as_ref().is_some_and(|c| {
            c.tunables.choose_total_tries <= 100
                && c.rules.iter().flatten().all(|r| r.steps.iter().all(|s| s.arg1 <= 64 && s.arg2 <= 64))
        });
        for (&pool, p) in m.pools.iter().filter(|_| plausible) {
            for seed in 0..p.pg_num.min(8) {
                let _ = m.pg_to_up_acting_osds(PgId::new(pool as u64, seed));
            }
            let loc = ObjectLocator { pool, ..ObjectLocator::default() };
            let _ = m.object_to_up_acting(b"fuzz", &loc);
        }
        // Feed the same bytes as an incremental for the next epoch.
        if let Ok(mut inc) = Incremental::decode_ignoring_crc(&mut Decoder::new(data.clone())) {
            inc.epoch = m.epoch.wrapping_add(1);
            inc.fsid = m.fsid;
            let _ = m.apply_incremental(&inc);
        }
    }
    if let Ok(inc) = Incremental::decode_ignoring_crc(&mut Decoder::new(data)) {
        stable(&inc, "OSDMap::Incremental");
    }
});
