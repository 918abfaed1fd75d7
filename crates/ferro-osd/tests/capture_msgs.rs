// SPDX-License-Identifier: LGPL-3.0-or-later
//! Real Pacific OSD traffic (../shared/captures/crc): every MOSDBoot, MOSDAlive, MOSDBeacon, MOSDPGCreated,
//! MPGStats, MMgrOpen, MMgrConfigure and MMgrReport decodes with ceph-msgs' `osd` module and re-encodes to the same
//! front bytes; the OSDSuperblock, osd_stat_t, pg_stat_t and store_statfs_t inside them decode with osd-types and
//! re-encode identically. Skips when the capture or `xz` is absent.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;

use bytes::Bytes;
use ceph_msgs::CephMessage;
use ceph_msgs::osd::{
    MMgrConfigure, MMgrOpen, MMgrReport, MOSDAlive, MOSDBeacon, MOSDBoot, MOSDPGCreated, MPGStats, osd_msg,
};
use denc::{Decode, Decoder, Encode, Encoder};
use osd_types::osd_stat::OsdStat;
use osd_types::pg_stat::PgStat;
use osd_types::statfs::StoreStatfs;
use osd_types::superblock::{OsdSuperblock, osd_compat_set};

fn roundtrip<T: CephMessage + std::fmt::Debug>(m: &ceph_msgs::Message) -> T {
    let t = T::from_message(m).unwrap_or_else(|e| panic!("{}: {e}", T::NAME));
    let back = t.to_message(u64::MAX);
    assert_eq!(back.front, m.front, "{} front differs: {t:?}", T::NAME);
    assert_eq!(
        (back.version, back.compat_version),
        (m.version, m.compat_version),
        "{}",
        T::NAME
    );
    t
}

fn struct_roundtrip<T: Decode + Encode + std::fmt::Debug>(b: &Bytes) -> T {
    let mut d = Decoder::new(b.clone());
    let t: T = d.decode().unwrap();
    assert_eq!(d.remaining(), 0);
    let mut e = Encoder::new(u64::MAX);
    t.encode(&mut e);
    assert_eq!(e.into_bytes(), *b, "{t:?}");
    t
}

#[test]
fn osd_daemon_messages_reencode_identically() {
    let Some(all) = common::all_messages() else { return };
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut pgs_seen = 0;
    for (_, _, m) in &all {
        match m.msg_type {
            osd_msg::OSD_BOOT => {
                let b: MOSDBoot = roundtrip(m);
                let sb: OsdSuperblock = struct_roundtrip(&b.sb);
                assert_eq!(
                    sb.compat_features,
                    osd_compat_set(),
                    "our compat set is ceph-osd's"
                );
                assert_eq!(
                    b.metadata.get("osd_objectstore").map(String::as_str),
                    Some("bluestore")
                );
                *counts.entry("boot").or_default() += 1;
            }
            osd_msg::OSD_ALIVE => {
                roundtrip::<MOSDAlive>(m);
                *counts.entry("alive").or_default() += 1;
            }
            osd_msg::OSD_BEACON => {
                roundtrip::<MOSDBeacon>(m);
                *counts.entry("beacon").or_default() += 1;
            }
            osd_msg::OSD_PG_CREATED => {
                roundtrip::<MOSDPGCreated>(m);
                *counts.entry("pg_created").or_default() += 1;
            }
            osd_msg::PGSTATS => {
                let s: MPGStats = roundtrip(m);
                let _: OsdStat = struct_roundtrip(&s.osd_stat);
                for v in s.pg_stat.values() {
                    let _: PgStat = struct_roundtrip(v);
                    pgs_seen += 1;
                }
                for v in s.pool_stat.values() {
                    let _: StoreStatfs = struct_roundtrip(v);
                }
                *counts.entry("pg_stats").or_default() += 1;
            }
            osd_msg::OSD_PING => {
                roundtrip::<ceph_msgs::osd::MOSDPing>(m);
                *counts.entry("ping").or_default() += 1;
            }
            osd_msg::MGR_OPEN => {
                roundtrip::<MMgrOpen>(m);
                *counts.entry("mgr_open").or_default() += 1;
            }
            osd_msg::MGR_CONFIGURE => {
                roundtrip::<MMgrConfigure>(m);
                *counts.entry("mgr_configure").or_default() += 1;
            }
            osd_msg::MGR_REPORT => {
                roundtrip::<MMgrReport>(m);
                *counts.entry("mgr_report").or_default() += 1;
            }
            _ => {}
        }
    }
    eprintln!("{counts:?}, {pgs_seen} pg_stat_t");
    for k in [
        "boot",
        "alive",
        "beacon",
        "pg_created",
        "pg_stats",
        "mgr_open",
        "mgr_configure",
        "mgr_report",
    ] {
        assert!(counts.contains_key(k), "no {k} in the capture: {counts:?}");
    }
    assert!(pgs_seen > 20);
}

/// A real OSD's MMgrReport ends like ours when it has no perf metric queries.
#[test]
fn mgr_report_tail_matches_real_osds() {
    let Some(all) = common::all_messages() else { return };
    let n = all
        .iter()
        .filter(|(_, _, m)| m.msg_type == osd_msg::MGR_REPORT)
        .filter_map(|(_, _, m)| MMgrReport::from_message(m).ok())
        .filter(|r| r.rest.as_ref() == ceph_msgs::osd::MGR_REPORT_EMPTY_REST)
        .count();
    assert!(n > 10, "{n} reports end with the empty tail");
}

/// The active mgr's address comes out of the real MgrMaps the monitor sent (nonce included: the mgr checks it).
#[test]
fn mgr_address_from_real_mgrmaps() {
    let Some(all) = common::all_messages() else { return };
    let mut found = 0;
    for (_, _, m) in &all {
        if m.msg_type == ceph_msgs::msg_type::MGR_MAP {
            let mm = ceph_msgs::MMgrMap::from_message(m).unwrap();
            if let Some((a, nonce)) = ferro_osd::daemon::mgr_active_addr(&mm.map) {
                assert!(a.ip().is_loopback() && a.port() >= 6800, "{a}");
                assert_ne!(nonce, 0);
                found += 1;
            }
        }
    }
    assert!(found > 0, "no MgrMap with an active mgr");
}

/// How a real ceph-osd packs counter values in MMgrReport, which `ferro_osd::perf::mgr_report` copies: declared
/// types accumulate per session (a std::set of paths, so sorted); `packed` is an ENCODE_START(1,1) envelope with,
/// for every declared path in sorted order, a u64 value and, for long-run averages, two u64 counts.
#[test]
fn mgr_report_packed_values_follow_the_sorted_declared_paths() {
    let Some(all) = common::all_messages() else { return };
    let mut declared: BTreeMap<String, BTreeMap<String, u8>> = BTreeMap::new();
    let mut checked = 0;
    let mut paths_seen = Vec::new();
    for (_, _, m) in &all {
        if m.msg_type != osd_msg::MGR_REPORT {
            continue;
        }
        let r = MMgrReport::from_message(m).unwrap();
        let d = declared.entry(r.daemon_name.clone()).or_default();
        for t in &r.declare_types {
            d.insert(t.path.clone(), t.type_);
            if paths_seen.len() < 3 && t.path.starts_with("osd.") {
                paths_seen.push(t.path.clone());
            }
        }
        for u in &r.undeclare_types {
            d.remove(u);
        }
        let want: usize = d
            .values()
            .map(|ty| {
                if ty & ferro_osd::perf::ty::LONGRUNAVG != 0 {
                    24
                } else {
                    8
                }
            })
            .sum();
        assert_eq!(
            r.packed.len(),
            6 + want,
            "{}: {} declared",
            r.daemon_name,
            d.len()
        );
        assert_eq!(&r.packed[..2], &[1, 1]);
        // Our encoder gives the same layout for the same declarations.
        let ours = ferro_osd::perf::pack(
            d.iter()
                .map(|(p, ty)| (p.as_str(), *ty, ferro_osd::perf::Value::U64(7))),
        );
        assert_eq!(ours.len(), r.packed.len());
        checked += 1;
    }
    assert!(checked > 10, "{checked} reports");
    assert!(
        paths_seen.iter().all(|p| p.starts_with("osd.")),
        "OSD counters are declared as osd.<name>: {paths_seen:?}"
    );
}
