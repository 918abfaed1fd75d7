// SPDX-License-Identifier: LGPL-3.0-or-later
//! PG log records: `pg_log_entry_t`, `pg_log_dup_t`, `pg_log_op_return_item_t` and the parts they embed
//! (`ObjectModDesc`, `ObjectCleanRegions`), plus the pgmeta omap key names Ceph stores them under.

use std::collections::BTreeMap;

use bytes::Bytes;
use denc::{Decode, DecodeError, Decoder, Encode, Encoder, Eversion, HObject, LegacyHeader, OsdReqId, Utime};

use crate::snapset::IntervalSet;

/// `pg_log_entry_t::op`.
pub mod log_op {
    pub const MODIFY: i32 = 1;
    pub const CLONE: i32 = 2;
    pub const DELETE: i32 = 3;
    pub const LOST_REVERT: i32 = 5;
    pub const LOST_DELETE: i32 = 6;
    pub const LOST_MARK: i32 = 7;
    pub const PROMOTE: i32 = 8;
    pub const CLEAN: i32 = 9;
    pub const ERROR: i32 = 10;
}

/// `eversion_t::get_key_name()`: `%010u.%020llu`, the pgmeta omap key of a log entry.
pub fn eversion_key(v: Eversion) -> String {
    key_with_prefix("", v)
}

/// The pgmeta omap key of a dup entry (`dup_` + the version's key name).
pub fn dup_key(v: Eversion) -> String {
    key_with_prefix("dup_", v)
}

/// `prefix` + `%010u.%020llu` (every write makes a few of these keys: digits by hand, not through `format!`).
fn key_with_prefix(prefix: &str, v: Eversion) -> String {
    fn digits(out: &mut [u8], mut n: u64) {
        for d in out.iter_mut().rev() {
            *d = b'0' + (n % 10) as u8;
            n /= 10;
        }
    }
    let mut k = [0u8; 31];
    digits(&mut k[..10], u64::from(v.epoch));
    k[10] = b'.';
    digits(&mut k[11..], v.version);
    // bytes, not chars: pushing 31 chars one at a time cost ~1000 instructions per key
    let mut s = Vec::with_capacity(prefix.len() + k.len());
    s.extend_from_slice(prefix.as_bytes());
    s.extend_from_slice(&k);
    // only ASCII digits and a dot were added to a str
    String::from_utf8(s).unwrap_or_default()
}

/// `pg_log_op_return_item_t`: one op's return value and output, kept for dup replies.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OpReturnItem {
    pub rval: i32,
    pub bl: Bytes,
}

impl Encode for OpReturnItem {
    fn encode(&self, e: &mut Encoder) {
        e.i32(self.rval);
        e.bytes(&self.bl);
    }
}
impl Decode for OpReturnItem {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        Ok(OpReturnItem {
            rval: d.i32()?,
            bl: d.bufferlist()?,
        })
    }
}

/// `ObjectModDesc`: how to roll an entry back (EC pools); replicated pools mark it unrollbackable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectModDesc {
    pub max_required_version: u8,
    /// The header's compat version. Ceph writes it equal to `max_required_version`; one decoded from the wire
    /// keeps the value read, so re-encoding gives back bytes our decoder (and Ceph's) accepts even when a peer
    /// wrote a version above 2 with a compat we understand.
    pub compat: u8,
    pub can_local_rollback: bool,
    pub rollback_info_completed: bool,
    pub bl: Bytes,
}

impl Default for ObjectModDesc {
    fn default() -> Self {
        ObjectModDesc {
            max_required_version: 1,
            compat: 1,
            can_local_rollback: true,
            rollback_info_completed: false,
            bl: Bytes::new(),
        }
    }
}

impl ObjectModDesc {
    /// `mark_unrollbackable()`.
    pub fn unrollbackable() -> Self {
        ObjectModDesc {
            can_local_rollback: false,
            ..Default::default()
        }
    }
}

impl Encode for ObjectModDesc {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(self.max_required_version, self.compat, |e| {
            e.bool(self.can_local_rollback);
            e.bool(self.rollback_info_completed);
            e.bytes(&self.bl);
        })
    }
}
impl Decode for ObjectModDesc {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("ObjectModDesc", 2, |h, d| {
            Ok(ObjectModDesc {
                max_required_version: h.version,
                compat: h.compat,
                can_local_rollback: d.bool()?,
                rollback_info_completed: d.bool()?,
                bl: d.bufferlist()?,
            })
        })
    }
}

/// `ObjectCleanRegions`: which parts of the object an entry left unmodified (for partial recovery).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectCleanRegions {
    pub clean_offsets: IntervalSet,
    pub clean_omap: bool,
    pub new_object: bool,
}

impl Default for ObjectCleanRegions {
    fn default() -> Self {
        ObjectCleanRegions {
            clean_offsets: BTreeMap::from([(0, u64::MAX)]),
            clean_omap: true,
            new_object: false,
        }
    }
}

impl ObjectCleanRegions {
    /// `mark_fully_dirty()`.
    pub fn fully_dirty() -> Self {
        ObjectCleanRegions {
            clean_offsets: BTreeMap::new(),
            clean_omap: false,
            new_object: false,
        }
    }
}

impl Encode for ObjectCleanRegions {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(1, 1, |e| {
            e.encode(&self.clean_offsets);
            e.bool(self.clean_omap);
            e.bool(self.new_object);
        })
    }
}
impl Decode for ObjectCleanRegions {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("ObjectCleanRegions", 1, |_, d| {
            Ok(ObjectCleanRegions {
                clean_offsets: d.decode()?,
                clean_omap: d.bool()?,
                new_object: d.bool()?,
            })
        })
    }
}

/// `pg_log_entry_t`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PgLogEntry {
    pub op: i32,
    pub soid: HObject,
    pub version: Eversion,
    pub prior_version: Eversion,
    pub reverting_to: Eversion,
    pub user_version: u64,
    pub reqid: OsdReqId,
    pub extra_reqids: Vec<(OsdReqId, u64)>,
    pub extra_reqid_return_codes: BTreeMap<u32, i32>,
    pub mtime: Utime,
    pub return_code: i32,
    pub op_returns: Vec<OpReturnItem>,
    /// Encoded snap vector (CLONE entries).
    pub snaps: Bytes,
    pub mod_desc: ObjectModDesc,
    pub clean_regions: ObjectCleanRegions,
}

impl PgLogEntry {
    pub fn is_error(&self) -> bool {
        self.op == log_op::ERROR
    }
    /// `encode_with_checksum`: the entry as a bufferlist followed by its crc32c (seed 0); the pgmeta omap value.
    pub fn encode_with_checksum(&self, e: &mut Encoder) {
        e.raw(&self.to_checksummed(e.features(), 256));
    }
    /// [`PgLogEntry::encode_with_checksum`] as a buffer of its own (the pgmeta omap value every write adds),
    /// encoded in place: the entry goes straight into the value after a length patched in afterwards, not into a
    /// buffer of its own that is then copied. `cap`: the buffer's first size (at least the usual entry's).
    pub fn to_checksummed(&self, features: u64, cap: usize) -> Bytes {
        let mut e = Encoder::with_capacity(features, cap);
        e.u32(0);
        self.encode(&mut e);
        let mut b = e.into_inner();
        let len = (b.len() - 4) as u32;
        if let Some(l) = b.get_mut(..4) {
            l.copy_from_slice(&len.to_le_bytes());
        }
        let crc = ceph_crc32c(b.get(4..).unwrap_or_default());
        b.extend_from_slice(&crc.to_le_bytes());
        b.freeze()
    }
    /// An entry of `op` on `soid`, every other field empty, its object wholly dirty and the change not
    /// rollbackable: what a primary's write logs (without building the default clean-region map first only to
    /// replace it).
    pub fn unrollbackable(op: i32, soid: HObject) -> Self {
        PgLogEntry {
            op,
            soid,
            version: Eversion::default(),
            prior_version: Eversion::default(),
            reverting_to: Eversion::default(),
            user_version: 0,
            reqid: OsdReqId::default(),
            extra_reqids: Vec::new(),
            extra_reqid_return_codes: BTreeMap::new(),
            mtime: Utime::default(),
            return_code: 0,
            op_returns: Vec::new(),
            snaps: Bytes::new(),
            mod_desc: ObjectModDesc::unrollbackable(),
            clean_regions: ObjectCleanRegions::fully_dirty(),
        }
    }
    /// Decode an omap value written by [`PgLogEntry::encode_with_checksum`], verifying the checksum.
    pub fn decode_with_checksum(d: &mut Decoder) -> Result<Self, DecodeError> {
        let b = d.bufferlist()?;
        let crc = d.u32()?;
        if ceph_crc32c(&b) != crc {
            return Err(DecodeError::invalid("pg_log_entry_t", "checksum mismatch"));
        }
        PgLogEntry::decode_all(b)
    }
}

/// crc32c with seed 0 as `bufferlist::crc32c(0)` computes it (Ceph's non-inverted convention).
fn ceph_crc32c(b: &[u8]) -> u32 {
    ceph_crc::ceph_crc32c(0, b)
}

impl Encode for PgLogEntry {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(14, 4, |e| {
            e.i32(self.op);
            e.encode(&self.soid);
            e.encode(&self.version);
            if self.op == log_op::LOST_REVERT {
                e.encode(&self.reverting_to);
            } else {
                e.encode(&self.prior_version);
            }
            e.encode(&self.reqid);
            e.encode(&self.mtime);
            if self.op == log_op::LOST_REVERT {
                e.encode(&self.prior_version);
            }
            e.bytes(&self.snaps);
            e.u64(self.user_version);
            e.encode(&self.mod_desc);
            e.encode(&self.extra_reqids);
            if self.op == log_op::ERROR {
                e.i32(self.return_code);
            }
            if !self.extra_reqids.is_empty() {
                e.encode(&self.extra_reqid_return_codes);
            }
            e.encode(&self.clean_regions);
            if self.op != log_op::ERROR {
                e.i32(self.return_code);
            }
            e.encode(&self.op_returns);
        })
    }
}

impl Decode for PgLogEntry {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct_legacy("pg_log_entry_t", 14, LegacyHeader::new(4, 4), |h, d| {
            let v = h.version;
            if v < 8 {
                return Err(DecodeError::TooOld {
                    type_name: "pg_log_entry_t",
                    version: v,
                    oldest: 8,
                });
            }
            let mut x = PgLogEntry {
                op: d.i32()?,
                soid: d.decode()?,
                version: d.decode()?,
                ..Default::default()
            };
            if x.op == log_op::LOST_REVERT {
                x.reverting_to = d.decode()?;
            } else {
                x.prior_version = d.decode()?;
            }
            x.reqid = d.decode()?;
            x.mtime = d.decode()?;
            if x.op == log_op::LOST_REVERT {
                x.prior_version = d.decode()?;
            }
            x.snaps = d.bufferlist()?;
            x.user_version = d.u64()?;
            x.mod_desc = if v >= 9 {
                d.decode()?
            } else {
                ObjectModDesc::unrollbackable()
            };
            if v >= 10 {
                x.extra_reqids = d.decode()?;
            }
            if v >= 11 && x.op == log_op::ERROR {
                x.return_code = d.i32()?;
            }
            if v >= 12 && !x.extra_reqids.is_empty() {
                x.extra_reqid_return_codes = d.decode()?;
            }
            x.clean_regions = if v >= 13 {
                d.decode()?
            } else {
                ObjectCleanRegions::fully_dirty()
            };
            if v >= 14 {
                if x.op != log_op::ERROR {
                    x.return_code = d.i32()?;
                }
                x.op_returns = d.decode()?;
            }
            Ok(x)
        })
    }
}

/// `pg_log_dup_t`: a reqid remembered after its log entry was trimmed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PgLogDup {
    pub reqid: OsdReqId,
    pub version: Eversion,
    pub user_version: u64,
    pub return_code: i32,
    pub op_returns: Vec<OpReturnItem>,
}

impl PgLogDup {
    pub fn from_entry(e: &PgLogEntry) -> Self {
        PgLogDup {
            reqid: e.reqid,
            version: e.version,
            user_version: e.user_version,
            return_code: e.return_code,
            op_returns: e.op_returns.clone(),
        }
    }
}

impl Encode for PgLogDup {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(2, 1, |e| {
            e.encode(&self.reqid);
            e.encode(&self.version);
            e.u64(self.user_version);
            e.i32(self.return_code);
            e.encode(&self.op_returns);
        })
    }
}
impl Decode for PgLogDup {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("pg_log_dup_t", 2, |h, d| {
            Ok(PgLogDup {
                reqid: d.decode()?,
                version: d.decode()?,
                user_version: d.u64()?,
                return_code: d.i32()?,
                op_returns: if h.version >= 2 { d.decode()? } else { Vec::new() },
            })
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn checksummed_value_is_length_entry_crc() {
        let mut e = PgLogEntry {
            version: Eversion::new(7, 42),
            user_version: 42,
            mtime: Utime::new(5, 6),
            ..PgLogEntry::unrollbackable(
                log_op::MODIFY,
                HObject::new("obj", "", denc::SnapId::NOSNAP, 9, 1, ""),
            )
        };
        e.reqid.tid = 3;
        let body = e.to_bytes(denc::CEPH_FEATURES_ALL);
        let mut want = (body.len() as u32).to_le_bytes().to_vec();
        want.extend_from_slice(&body);
        want.extend_from_slice(&ceph_crc32c(&body).to_le_bytes());
        // whatever the first buffer size, and through the Encoder form
        for cap in [0, 16, 320] {
            assert_eq!(&e.to_checksummed(denc::CEPH_FEATURES_ALL, cap)[..], &want[..]);
        }
        let mut enc = Encoder::new(denc::CEPH_FEATURES_ALL);
        enc.u8(0xee);
        e.encode_with_checksum(&mut enc);
        assert_eq!(enc.as_slice().first(), Some(&0xee));
        assert_eq!(enc.as_slice().get(1..), Some(&want[..]));
        let back = PgLogEntry::decode_with_checksum(&mut Decoder::new(Bytes::from(want))).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn keys_are_printf_formatted() {
        for (e, v) in [(0, 0), (7, 42), (u32::MAX, u64::MAX), (123_456, 9_876_543_210)] {
            let ev = Eversion::new(e, v);
            assert_eq!(eversion_key(ev), format!("{e:010}.{v:020}"));
            assert_eq!(dup_key(ev), format!("dup_{e:010}.{v:020}"));
        }
    }

    /// A header written with version 5 and compat 2 (found by the ceph-msgs fuzzer through
    /// MOSDPGUpdateLogMissing) decodes, and must re-encode into bytes that decode again, unchanged.
    #[test]
    fn mod_desc_keeps_the_compat_it_read() {
        let wire = Bytes::from_static(&[5, 2, 6, 0, 0, 0, 1, 0, 0, 0, 0, 0]);
        let m = ObjectModDesc::decode_all(wire.clone()).unwrap();
        assert_eq!((m.max_required_version, m.compat), (5, 2));
        let again = m.to_bytes(u64::MAX);
        assert_eq!(again, wire);
        assert_eq!(ObjectModDesc::decode_all(again).unwrap(), m);
        // what we build is Ceph's encoding: version == compat
        let ours = ObjectModDesc::unrollbackable().to_bytes(u64::MAX);
        assert_eq!(&ours[..2], &[1, 1]);
    }
}
