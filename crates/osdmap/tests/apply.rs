// SPDX-License-Identifier: LGPL-3.0-or-later
//! `apply_incremental`: Ceph's semantics field by field, the full_crc check, and the error cases.

use denc::{Decode, Encode, EntityAddr, EntityAddrvec, Utime};
use osdmap::map::{DEFAULT_PRIMARY_AFFINITY, OSD_IN, state};
use osdmap::pool::{PgPool, TYPE_REPLICATED, flag};
use osdmap::{ApplyError, CrcCheck, Incremental, OsdMap, PgId, features};

fn addrs(port: u16) -> EntityAddrvec {
    EntityAddrvec(vec![EntityAddr::new(
        EntityAddr::TYPE_MSGR2,
        std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        1234,
    )])
}

fn base() -> OsdMap {
    let mut m = OsdMap {
        epoch: 10,
        require_osd_release: osdmap::map::release::PACIFIC,
        ..OsdMap::default()
    };
    m.set_max_osd(4);
    for i in 0..3 {
        m.osd_state[i] = state::EXISTS | state::UP;
        m.osd_weight[i] = OSD_IN;
        m.client_addrs[i] = addrs(6800 + i as u16);
    }
    let mut p = PgPool {
        type_: TYPE_REPLICATED,
        size: 3,
        min_size: 2,
        object_hash: 2,
        flags: flag::HASHPSPOOL,
        ..PgPool::default()
    };
    p.set_pg_num(8);
    p.set_pgp_num(8);
    m.pools.insert(1, p);
    m.pool_name.insert(1, "rbd".into());
    m.pool_max = 1;
    m
}

#[test]
fn apply_matches_direct_edit_and_crc() {
    let before = base();
    let mut inc = Incremental::new(11);
    inc.fsid = before.fsid;
    inc.modified = Utime::new(1000, 5);
    inc.encode_features = features::OSDMAP_SIGNIFICANT;
    inc.new_state.insert(1, state::UP); // osd.1 goes down
    inc.new_weight.insert(2, 0); // osd.2 out
    inc.new_up_client.insert(3, addrs(6803)); // osd.3 boots
    inc.new_hb_back_up.insert(3, addrs(6903));
    inc.new_hb_front_up.insert(3, addrs(7003));
    inc.new_up_cluster.insert(3, addrs(7103));
    inc.new_up_thru.insert(0, 9);
    inc.new_primary_affinity.insert(0, 0x8000);
    inc.new_pg_temp.insert(PgId::new(1, 2), vec![0, 3]);
    inc.new_pg_upmap_items.insert(PgId::new(1, 4), vec![(0, 3)]);
    let mut newpool = before.pools[&1].clone();
    newpool.size = 2;
    inc.new_pools.insert(2, newpool);
    inc.new_pool_names.insert(2, "two".into());
    inc.new_pool_max = 2;

    // The same change made by hand, as the monitor's pending map would be.
    let mut want = before.clone();
    want.epoch = 11;
    want.modified = inc.modified;
    want.osd_state[1] ^= state::UP;
    want.osd_info[1].down_at = 11;
    want.osd_xinfo[1].down_stamp = inc.modified;
    want.osd_weight[2] = 0;
    want.osd_state[3] = state::EXISTS | state::UP;
    want.client_addrs[3] = addrs(6803);
    want.hb_back_addrs[3] = addrs(6903);
    want.hb_front_addrs[3] = addrs(7003);
    want.cluster_addrs[3] = addrs(7103);
    want.osd_info[3].up_from = 11;
    want.osd_info[0].up_thru = 9;
    let mut aff = vec![DEFAULT_PRIMARY_AFFINITY; 4];
    aff[0] = 0x8000;
    want.osd_primary_affinity = Some(aff);
    want.pg_temp.insert(PgId::new(1, 2), vec![0, 3]);
    want.pg_upmap_items.insert(PgId::new(1, 4), vec![(0, 3)]);
    let mut p2 = inc.new_pools[&2].clone();
    p2.last_change = 11;
    want.pools.insert(2, p2);
    want.pool_name.insert(2, "two".into());
    want.pool_max = 2;
    want.require_osd_release = osdmap::map::release::PACIFIC;
    inc.new_require_osd_release = 0xff; // "unchanged", as monitors send it

    let (want_bytes, want_crc) = want.encode_with_crc(inc.encode_features | features::RESERVED);
    inc.full_crc = want_crc;
    inc.have_crc = true;

    // Through the wire and back, as an OSD receives it.
    let inc = Incremental::decode_all(inc.to_bytes(inc.encode_features)).unwrap();
    let mut got = before.clone();
    let check = got.apply_incremental(&inc).unwrap();
    let raw = got.raw.take();
    got.crc = 0;
    assert_eq!(got, want);
    assert_eq!(check, CrcCheck::Match);
    assert_eq!(
        raw.as_deref(),
        Some(&want_bytes[..]),
        "raw bytes are the monitor's full map"
    );

    // A monitor whose map differs (here: a wrong crc) makes the OSD ask for the full map.
    let mut bad = inc.clone();
    bad.full_crc ^= 1;
    let mut m = before.clone();
    assert!(matches!(
        m.apply_incremental(&bad).unwrap(),
        CrcCheck::Mismatch { .. }
    ));

    // Epoch gaps and foreign fsids are refused.
    let mut m = before.clone();
    let gap = Incremental {
        epoch: 13,
        ..inc.clone()
    };
    assert!(matches!(
        m.apply_incremental(&gap),
        Err(ApplyError::EpochGap { have: 10, got: 13 })
    ));
    let foreign = Incremental {
        fsid: denc::Uuid([7; 16]),
        ..inc.clone()
    };
    assert_eq!(m.apply_incremental(&foreign).unwrap_err().errno(), -22);
}

#[test]
fn destroy_clear_and_fullmap() {
    let before = base();
    // new_state with EXISTS on an existing OSD destroys it; 0 toggles UP (legacy).
    let mut inc = Incremental::new(11);
    inc.new_state.insert(0, state::EXISTS | state::UP);
    inc.new_state.insert(2, 0);
    inc.new_pg_temp.insert(PgId::new(1, 1), vec![1, 2]);
    let mut m = before.clone();
    assert_eq!(m.apply_incremental(&inc).unwrap(), CrcCheck::NotChecked);
    assert_eq!(m.osd_state[0], 0);
    assert!(m.client_addrs[0].is_empty());
    assert_eq!(m.osd_state[2], state::EXISTS);
    assert_eq!(m.osd_info[2].down_at, 11);
    // Then an empty pg_temp vector removes the entry, -1 removes a primary_temp.
    let mut inc2 = Incremental::new(12);
    inc2.new_pg_temp.insert(PgId::new(1, 1), vec![]);
    inc2.new_primary_temp.insert(PgId::new(1, 1), -1);
    inc2.old_pools.insert(1);
    m.apply_incremental(&inc2).unwrap();
    assert!(m.pg_temp.is_empty() && m.pools.is_empty() && m.pool_name.is_empty());

    // A full map inside an incremental replaces everything, bytes included.
    let mut target = base();
    target.epoch = 13;
    let full = target.to_bytes(features::PACIFIC);
    let mut inc3 = Incremental::new(13);
    inc3.fullmap = full.clone();
    m.apply_incremental(&inc3).unwrap();
    assert_eq!(m.epoch, 13);
    assert_eq!(m.raw.as_deref(), Some(&full[..]));
    assert_eq!(m.pools.len(), 1);
}

#[test]
fn out_of_range_osd_is_an_error_not_a_panic() {
    let mut m = base();
    let mut inc = Incremental::new(11);
    inc.new_weight.insert(99, 0);
    assert!(matches!(
        m.apply_incremental(&inc),
        Err(ApplyError::OsdOutOfRange { osd: 99, .. })
    ));
}

/// Found by fuzzing: a hostile new_max_osd must not size per-OSD vectors to gigabytes.
#[test]
fn huge_max_osd_is_refused() {
    let mut m = base();
    let mut inc = Incremental::new(11);
    inc.new_max_osd = i32::MAX;
    assert_eq!(m.apply_incremental(&inc), Err(ApplyError::TooManyOsds(i32::MAX)));
}
