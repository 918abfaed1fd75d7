// SPDX-License-Identifier: LGPL-3.0-or-later
//! What a PG keeps in its pgmeta object's omap, as classic OSDs key it (PG.cc / PGLog.cc, 16.2): `_infover`,
//! `_info` (pg_info_t without purged_snaps), `_biginfo` (PastIntervals + purged_snaps), `_epoch`, `_fastinfo`
//! (`pg_fast_info_t`, the fields most writes change), log entries under their version's key name, dups under
//! `dup_` + key name, missing items under `missing/` + `hobject_t::to_str()`, and
//! `may_include_deletes_in_missing` (empty value) as a flag.

use denc::{Decode, DecodeError, Decoder, Encode, Encoder, Eversion, HObject, SnapId, Utime};

use crate::pg_info::PgInfo;

pub const INFOVER_KEY: &str = "_infover";
pub const INFO_KEY: &str = "_info";
pub const BIGINFO_KEY: &str = "_biginfo";
pub const EPOCH_KEY: &str = "_epoch";
pub const FASTINFO_KEY: &str = "_fastinfo";
pub const MAY_INCLUDE_DELETES_KEY: &str = "may_include_deletes_in_missing";
pub const MISSING_PREFIX: &str = "missing/";
pub const CAN_ROLLBACK_TO_KEY: &str = "can_rollback_to";
pub const ROLLBACK_INFO_TRIMMED_TO_KEY: &str = "rollback_info_trimmed_to";
pub const DIVERGENT_PRIORS_KEY: &str = "divergent_priors";

/// `pg_latest_struct_v` (= `pg_compat_struct_v`): the `_infover` value Pacific writes and requires.
pub const PG_LATEST_STRUCT_V: u8 = 10;

/// `hobject_t::to_str()`: the text that names a missing item's key (`missing/` + this). Pool as 16 upper-case
/// hex digits, the nibble-reversed hash as 8, the snap (`head`, `snapdir` or lower-case hex), then name, locator
/// key and namespace with `%` → `%p`, `.` → `%e`, `_` → `%u`.
pub fn hobject_to_str(h: &HObject) -> String {
    String::from_utf8_lossy(&to_str_bytes(h)).into_owned()
}

/// The omap key of a missing item, as bytes (object names need not be UTF-8).
pub fn missing_key(h: &HObject) -> Vec<u8> {
    let mut k = MISSING_PREFIX.as_bytes().to_vec();
    k.extend_from_slice(&to_str_bytes(h));
    k
}

fn to_str_bytes(h: &HObject) -> Vec<u8> {
    let mut out = format!("{:016X}.{:08X}", h.pool as u64, h.get_nibblewise_key() as u32).into_bytes();
    if h.snap == SnapId::NOSNAP {
        out.extend_from_slice(b".head");
    } else if h.snap == SnapId::SNAPDIR {
        out.extend_from_slice(b".snapdir");
    } else {
        out.extend_from_slice(format!(".{:x}", h.snap.0).as_bytes());
    }
    for part in [&h.oid.0[..], &h.key[..], &h.nspace[..]] {
        out.push(b'.');
        for &b in part {
            match b {
                b'%' => out.extend_from_slice(b"%p"),
                b'.' => out.extend_from_slice(b"%e"),
                b'_' => out.extend_from_slice(b"%u"),
                _ => out.push(b),
            }
        }
    }
    out
}

/// `pg_fast_info_t` (v1): the pg_info_t fields ordinary writes change, written as `_fastinfo` so a write does not
/// re-encode the whole info.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PgFastInfo {
    pub last_update: Eversion,
    pub last_complete: Eversion,
    pub last_user_version: u64,
    pub stats_version: Eversion,
    pub reported_seq: u64,
    pub last_fresh: Utime,
    pub last_active: Utime,
    pub last_peered: Utime,
    pub last_clean: Utime,
    pub last_unstale: Utime,
    pub last_undegraded: Utime,
    pub last_fullsized: Utime,
    pub log_size: i64,
    pub num_bytes: i64,
    pub num_objects: i64,
    pub num_object_copies: i64,
    pub num_rd: i64,
    pub num_rd_kb: i64,
    pub num_wr: i64,
    pub num_wr_kb: i64,
    pub num_objects_dirty: i64,
}

impl PgFastInfo {
    /// `populate_from`.
    pub fn from_info(i: &PgInfo) -> Self {
        let s = &i.stats;
        let sum = &s.stats.sum;
        PgFastInfo {
            last_update: i.last_update,
            last_complete: i.last_complete,
            last_user_version: i.last_user_version,
            stats_version: s.version,
            reported_seq: s.reported_seq,
            last_fresh: s.last_fresh,
            last_active: s.last_active,
            last_peered: s.last_peered,
            last_clean: s.last_clean,
            last_unstale: s.last_unstale,
            last_undegraded: s.last_undegraded,
            last_fullsized: s.last_fullsized,
            log_size: s.log_size,
            num_bytes: sum.num_bytes,
            num_objects: sum.num_objects,
            num_object_copies: sum.num_object_copies,
            num_rd: sum.num_rd,
            num_rd_kb: sum.num_rd_kb,
            num_wr: sum.num_wr,
            num_wr_kb: sum.num_wr_kb,
            num_objects_dirty: sum.num_objects_dirty,
        }
    }

    /// `try_apply_to`: only a newer `last_update` overrides the full info.
    pub fn try_apply_to(&self, i: &mut PgInfo) -> bool {
        if self.last_update <= i.last_update {
            return false;
        }
        i.last_update = self.last_update;
        i.last_complete = self.last_complete;
        i.last_user_version = self.last_user_version;
        let s = &mut i.stats;
        s.version = self.stats_version;
        s.reported_seq = self.reported_seq;
        s.last_fresh = self.last_fresh;
        s.last_active = self.last_active;
        s.last_peered = self.last_peered;
        s.last_clean = self.last_clean;
        s.last_unstale = self.last_unstale;
        s.last_undegraded = self.last_undegraded;
        s.last_fullsized = self.last_fullsized;
        s.log_size = self.log_size;
        s.ondisk_log_size = self.log_size;
        let sum = &mut s.stats.sum;
        sum.num_bytes = self.num_bytes;
        sum.num_objects = self.num_objects;
        sum.num_object_copies = self.num_object_copies;
        sum.num_rd = self.num_rd;
        sum.num_rd_kb = self.num_rd_kb;
        sum.num_wr = self.num_wr;
        sum.num_wr_kb = self.num_wr_kb;
        sum.num_objects_dirty = self.num_objects_dirty;
        true
    }
}

impl Encode for PgFastInfo {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(1, 1, |e| {
            e.encode(&self.last_update);
            e.encode(&self.last_complete);
            e.u64(self.last_user_version);
            e.encode(&self.stats_version);
            e.u64(self.reported_seq);
            for t in [
                &self.last_fresh,
                &self.last_active,
                &self.last_peered,
                &self.last_clean,
                &self.last_unstale,
                &self.last_undegraded,
                &self.last_fullsized,
            ] {
                e.encode(t);
            }
            for v in [
                self.log_size,
                self.num_bytes,
                self.num_objects,
                self.num_object_copies,
                self.num_rd,
                self.num_rd_kb,
                self.num_wr,
                self.num_wr_kb,
                self.num_objects_dirty,
            ] {
                e.i64(v);
            }
        })
    }
}

impl Decode for PgFastInfo {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("pg_fast_info_t", 1, |_, d| {
            Ok(PgFastInfo {
                last_update: d.decode()?,
                last_complete: d.decode()?,
                last_user_version: d.u64()?,
                stats_version: d.decode()?,
                reported_seq: d.u64()?,
                last_fresh: d.decode()?,
                last_active: d.decode()?,
                last_peered: d.decode()?,
                last_clean: d.decode()?,
                last_unstale: d.decode()?,
                last_undegraded: d.decode()?,
                last_fullsized: d.decode()?,
                log_size: d.i64()?,
                num_bytes: d.i64()?,
                num_objects: d.i64()?,
                num_object_copies: d.i64()?,
                num_rd: d.i64()?,
                num_rd_kb: d.i64()?,
                num_wr: d.i64()?,
                num_wr_kb: d.i64()?,
                num_objects_dirty: d.i64()?,
            })
        })
    }
}

/// The `_info` value: `pg_info_t` with `purged_snaps` left out (it lives in `_biginfo`).
pub fn encode_info(info: &PgInfo, features: u64) -> bytes::Bytes {
    let mut i = info.clone();
    i.purged_snaps.clear();
    i.to_bytes(features)
}

/// The `_biginfo` value: `PastIntervals` then `purged_snaps`.
pub fn encode_biginfo(
    past_intervals: &crate::past_intervals::PastIntervals,
    purged_snaps: &[(u64, u64)],
) -> bytes::Bytes {
    let mut e = Encoder::new(u64::MAX);
    e.encode(past_intervals);
    e.encode(&purged_snaps.to_vec());
    e.into_bytes()
}

/// Decode `_biginfo`.
pub fn decode_biginfo(
    b: bytes::Bytes,
) -> Result<(crate::past_intervals::PastIntervals, Vec<(u64, u64)>), DecodeError> {
    let mut d = Decoder::new(b);
    let pi = d.decode()?;
    let ps = d.decode()?;
    Ok((pi, ps))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use bytes::Bytes;

    #[test]
    fn hobject_to_str_matches_ceph() {
        // pool 1, hash 0x12345678 (nibble-reversed 87654321), head, name with every escaped character
        let h = HObject::new("a.b_c%d", "", SnapId::NOSNAP, 0x1234_5678, 1, "ns");
        assert_eq!(
            hobject_to_str(&h),
            "0000000000000001.87654321.head.a%eb%uc%pd..ns"
        );
        let mut c = h.clone();
        c.snap = SnapId(0x1f);
        c.pool = -1;
        assert!(hobject_to_str(&c).starts_with("FFFFFFFFFFFFFFFF.87654321.1f."));
        assert_eq!(
            missing_key(&h),
            [b"missing/".as_slice(), hobject_to_str(&h).as_bytes()].concat()
        );
    }

    #[test]
    fn fast_info_round_trips_and_applies() {
        let mut i = PgInfo {
            last_update: Eversion::new(5, 10),
            ..Default::default()
        };
        let mut f = PgFastInfo::from_info(&i);
        f.last_update = Eversion::new(5, 11);
        f.num_objects = 3;
        let b = f.to_bytes(0);
        // header, 3 eversions (12 bytes each), 2 u64, 7 utimes, 9 i64
        assert_eq!(b.len(), 6 + 3 * 12 + 2 * 8 + 7 * 8 + 9 * 8);
        let back = PgFastInfo::decode_all(b).unwrap();
        assert_eq!(back, f);
        assert!(back.try_apply_to(&mut i));
        assert_eq!(i.last_update, Eversion::new(5, 11));
        assert_eq!(i.stats.stats.sum.num_objects, 3);
        assert!(!back.try_apply_to(&mut i));
        let big = encode_biginfo(&Default::default(), &[(2, 3)]);
        let (pi, ps) = decode_biginfo(Bytes::from(big.to_vec())).unwrap();
        assert!(pi.rep.is_none());
        assert_eq!(ps, vec![(2, 3)]);
    }
}
