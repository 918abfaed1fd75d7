// SPDX-License-Identifier: LGPL-3.0-or-later
//! Every sample of every denc type in Ceph's object corpus decodes; 16.2 samples re-encode byte-identically;
//! newer samples decode or are refused cleanly. Skips (passing) when ../shared/corpus is absent.

use ceph_corpus::{PACIFIC_FEATURES, Summary, check_type};
use denc::*;

fn check<T: Decode + Encode>(name: &str) -> Summary {
    let s = check_type::<T>(name, PACIFIC_FEATURES);
    if !s.skipped {
        let t = s.total();
        assert!(t.samples > 0, "no corpus samples for {name}");
        assert_eq!(t.decoded + t.refused, t.samples);
    }
    s
}

/// The 16.2 samples must all decode and re-encode identically.
fn check_ours<T: Decode + Encode>(name: &str) {
    let s = check::<T>(name);
    for v in s
        .versions
        .iter()
        .filter(|v| ceph_corpus::is_our_release(&v.version))
    {
        assert_eq!(v.decoded, v.samples, "{name} {}", v.version);
        assert_eq!(v.identical, v.samples, "{name} {}", v.version);
    }
}

#[test]
fn utime_t() {
    check_ours::<Utime>("utime_t");
}
#[test]
fn uuid_d() {
    check_ours::<Uuid>("uuid_d");
}
#[test]
fn entity_name_t() {
    check_ours::<EntityNameT>("entity_name_t");
}
#[test]
fn entity_name() {
    check_ours::<EntityName>("EntityName");
}
#[test]
fn entity_addr_t() {
    check_ours::<EntityAddr>("entity_addr_t");
}
#[test]
fn entity_addrvec_t() {
    check_ours::<EntityAddrvec>("entity_addrvec_t");
}
#[test]
fn entity_inst_t() {
    check_ours::<EntityInst>("entity_inst_t");
}
#[test]
fn eversion_t() {
    check_ours::<Eversion>("eversion_t");
}
#[test]
fn osd_reqid_t() {
    check_ours::<OsdReqId>("osd_reqid_t");
}
#[test]
fn pg_t() {
    check_ours::<PgId>("pg_t");
}
#[test]
fn spg_t() {
    check_ours::<SpgId>("spg_t");
}
#[test]
fn pg_shard_t() {
    check_ours::<PgShard>("pg_shard_t");
}
#[test]
fn shard_id_t() {
    check_ours::<ShardId>("shard_id_t");
}
#[test]
fn object_locator_t() {
    check_ours::<ObjectLocator>("object_locator_t");
}
#[test]
fn object_t() {
    check_ours::<ObjectName>("object_t");
}
#[test]
fn sobject_t() {
    // Only newer versions have samples.
    check::<SObject>("sobject_t");
}
#[test]
fn hobject_t() {
    check_ours::<HObject>("hobject_t");
}
#[test]
fn ghobject_t() {
    check_ours::<GHObject>("ghobject_t");
}
#[test]
fn coll_t() {
    check_ours::<Coll>("coll_t");
}
#[test]
fn real_time_wrappers() {
    check_ours::<Utime>("real_time_wrapper");
    check_ours::<Utime>("coarse_real_time_wrapper");
}
#[test]
fn timespan_wrapper() {
    check_ours::<Timespan>("timespan_wrapper");
}
#[test]
fn sha256_digest_t() {
    check_ours::<[u8; 32]>("sha256_digest_t");
}
#[test]
fn errorcode32_t() {
    // Linux errnos are Ceph's wire errnos, so the value is a plain le32.
    check_ours::<i32>("errorcode32_t");
}
