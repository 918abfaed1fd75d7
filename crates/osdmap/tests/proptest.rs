// SPDX-License-Identifier: LGPL-3.0-or-later
//! Property tests: pools and incrementals round-trip exactly; no decoder panics on arbitrary bytes.

use std::collections::BTreeMap;

use denc::{Decode, Encode, EntityAddr, EntityAddrvec, Utime};
use osdmap::pool::{HitSetParams, PoolOptValue, PoolSnapInfo};
use osdmap::{Incremental, OsdMap, PgId, PgPool, features};
use proptest::prelude::*;

fn arb_pool() -> impl Strategy<Value = PgPool> {
    (
        (
            prop_oneof![Just(1u8), Just(3u8)],
            1u8..8,
            0u8..4,
            1u32..4096,
            1u32..4096,
            any::<u64>(),
        ),
        proptest::collection::btree_map(any::<u64>(), ".{0,6}", 0..3),
        proptest::collection::btree_map(
            0i32..24,
            prop_oneof![
                ".{0,5}".prop_map(PoolOptValue::Str),
                any::<i64>().prop_map(PoolOptValue::Int),
                (-1.0e9f64..1.0e9).prop_map(PoolOptValue::Double),
            ],
            0..4,
        ),
        prop_oneof![
            Just(HitSetParams::None),
            Just(HitSetParams::ExplicitHash),
            Just(HitSetParams::ExplicitObject),
            (any::<u32>(), any::<u64>(), any::<u64>()).prop_map(|(f, t, s)| HitSetParams::Bloom {
                fpp_micro: f,
                target_size: t,
                seed: s
            }),
        ],
        proptest::collection::btree_map(
            "[a-z]{1,4}",
            proptest::collection::btree_map("[a-z]{0,3}", ".{0,3}", 0..2),
            0..3,
        ),
        (any::<u32>(), 0u32..3),
    )
        .prop_map(
            |((ty, size, rule, pg, pgp, flags), snaps, opts, hs, app, (stretch, target))| {
                let mut p = PgPool {
                    type_: ty,
                    size,
                    min_size: size / 2 + 1,
                    crush_rule: rule,
                    object_hash: 2,
                    // Keep the snap-mode bits set so decode's upgrade path does not add them.
                    flags: flags | osdmap::pool::flag::POOL_SNAPS,
                    hit_set_params: hs,
                    application_metadata: app,
                    peering_crush_bucket_count: stretch % 3,
                    peering_crush_bucket_target: if stretch % 3 == 0 { 0 } else { target },
                    ..PgPool::default()
                };
                p.set_pg_num(pg);
                p.set_pgp_num(pgp.min(pg));
                p.pg_num_target = pg;
                p.pgp_num_target = pgp.min(pg);
                p.snaps = snaps
                    .into_iter()
                    .map(|(id, name)| {
                        (
                            id,
                            PoolSnapInfo {
                                snapid: id,
                                stamp: Utime::new(1, 2),
                                name,
                            },
                        )
                    })
                    .collect();
                p.opts.opts = opts;
                p
            },
        )
}

fn addr(port: u16, nonce: u32) -> EntityAddrvec {
    EntityAddrvec(vec![EntityAddr::new(
        EntityAddr::TYPE_MSGR2,
        std::net::SocketAddr::from(([10, 0, 0, 1], port)),
        nonce,
    )])
}

fn arb_inc() -> impl Strategy<Value = Incremental> {
    (
        any::<u32>(),
        proptest::collection::btree_map(0i32..64, any::<u32>(), 0..5),
        proptest::collection::btree_map(0i32..64, any::<u32>(), 0..5),
        proptest::collection::btree_map(
            (0u64..4, any::<u32>()),
            proptest::collection::vec(-1i32..64, 0..4),
            0..4,
        ),
        proptest::collection::btree_map(
            (0u64..4, any::<u32>()),
            proptest::collection::vec((0i32..64, 0i32..64), 0..3),
            0..3,
        ),
        proptest::collection::btree_map(0i32..64, (any::<u16>(), any::<u32>()), 0..3),
        proptest::collection::btree_map((any::<u16>(), any::<u32>()), any::<u32>(), 0..3),
        any::<bool>(),
    )
        .prop_map(|(epoch, state, weight, temp, items, up, bl, stretch)| {
            let mut inc = Incremental::new(epoch);
            inc.new_state = state;
            inc.new_weight = weight;
            inc.new_pg_temp = temp.into_iter().map(|((p, s), v)| (PgId::new(p, s), v)).collect();
            inc.new_pg_upmap_items = items
                .into_iter()
                .map(|((p, s), v)| (PgId::new(p, s), v))
                .collect();
            for (osd, (port, nonce)) in up {
                inc.new_up_client.insert(osd, addr(port, nonce));
                inc.new_hb_back_up.insert(osd, addr(port.wrapping_add(1), nonce));
                inc.new_hb_front_up.insert(osd, addr(port.wrapping_add(2), nonce));
            }
            inc.new_blocklist = bl
                .into_iter()
                .map(|((port, nonce), t)| (addr(port, nonce).0[0], Utime::new(t, 0)))
                .collect();
            inc.change_stretch_mode = stretch;
            inc.encode_features = features::OSDMAP_SIGNIFICANT;
            inc.full_crc = epoch.rotate_left(7);
            inc.have_crc = true;
            inc
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn pools_round_trip(p in arb_pool()) {
        let b = p.to_bytes(features::PACIFIC);
        let q = PgPool::decode_all(b.clone()).unwrap();
        prop_assert_eq!(&q, &p);
        prop_assert_eq!(q.to_bytes(features::PACIFIC), b);
        // Every older encoding we can emit decodes too.
        for f in [features::PACIFIC & !features::MASK_SERVER_NAUTILUS, features::PACIFIC & !features::NEW_OSDOP_ENCODING,
                  features::PACIFIC & !features::OSD_POOLRESEND] {
            prop_assert!(PgPool::decode_all(p.to_bytes(f)).is_ok());
        }
    }

    #[test]
    fn incrementals_round_trip(inc in arb_inc()) {
        let b = inc.to_bytes(inc.encode_features);
        let back = Incremental::decode_all(b.clone()).unwrap(); // also verifies inc_crc
        prop_assert_eq!(back.to_bytes(back.encode_features), b.clone());
        prop_assert_eq!(back.raw.as_deref(), Some(&b[..]));
        prop_assert_eq!(&back.new_pg_upmap_items, &inc.new_pg_upmap_items);
        prop_assert_eq!(&back.new_blocklist, &inc.new_blocklist);
        prop_assert_eq!(back.full_crc, inc.full_crc);
        // One flipped byte anywhere is caught (by the crc, or as malformed input), never a panic.
        let mut bad = b.to_vec();
        let i = (inc.epoch as usize) % bad.len();
        bad[i] ^= 0x40;
        prop_assert!(Incremental::decode_all(bad).is_err());
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = OsdMap::decode_all(data.clone());
        let _ = Incremental::decode_all(data.clone());
        let _ = PgPool::decode_all(data.clone());
        let _ = OsdMap::decode_ignoring_crc(&mut denc::Decoder::new(data.clone()));
        let _ = Incremental::decode_ignoring_crc(&mut denc::Decoder::new(data));
    }
}

#[test]
fn empty_map_round_trips() {
    let m = OsdMap::default();
    let b = m.to_bytes(features::PACIFIC);
    let back = OsdMap::decode_all(b.clone()).unwrap();
    assert_eq!(back.to_bytes(features::PACIFIC), b);
    let _ = BTreeMap::<i32, u32>::new();
}
