// SPDX-License-Identifier: LGPL-3.0-or-later
//! `pg_stat_t` (ENCODE 26/22) and `object_stat_collection_t` (2/2): what an OSD reports per PG to the mgr.

use std::collections::{BTreeMap, BTreeSet};

use denc::{Decode, DecodeError, Decoder, Encode, Encoder, Eversion, PgId, PgShard, Utime};

use crate::object_stat::ObjectStatSum;

/// `PG_STATE_*` bits (osd_types.h).
pub mod pg_state {
    pub const CREATING: u64 = 1 << 0;
    pub const ACTIVE: u64 = 1 << 1;
    pub const CLEAN: u64 = 1 << 2;
    pub const DOWN: u64 = 1 << 4;
    pub const RECOVERY_UNFOUND: u64 = 1 << 5;
    pub const BACKFILL_UNFOUND: u64 = 1 << 6;
    pub const PREMERGE: u64 = 1 << 7;
    pub const SCRUBBING: u64 = 1 << 8;
    pub const DEGRADED: u64 = 1 << 10;
    pub const INCONSISTENT: u64 = 1 << 11;
    pub const PEERING: u64 = 1 << 12;
    pub const REPAIR: u64 = 1 << 13;
    pub const RECOVERING: u64 = 1 << 14;
    pub const BACKFILL_WAIT: u64 = 1 << 15;
    pub const INCOMPLETE: u64 = 1 << 16;
    pub const STALE: u64 = 1 << 17;
    pub const REMAPPED: u64 = 1 << 18;
    pub const DEEP_SCRUB: u64 = 1 << 19;
    pub const BACKFILLING: u64 = 1 << 20;
    pub const BACKFILL_TOOFULL: u64 = 1 << 21;
    pub const RECOVERY_WAIT: u64 = 1 << 22;
    pub const UNDERSIZED: u64 = 1 << 23;
    pub const ACTIVATING: u64 = 1 << 24;
    pub const PEERED: u64 = 1 << 25;
    pub const SNAPTRIM: u64 = 1 << 26;
    pub const SNAPTRIM_WAIT: u64 = 1 << 27;
    pub const RECOVERY_TOOFULL: u64 = 1 << 28;
    pub const SNAPTRIM_ERROR: u64 = 1 << 29;
    pub const FORCED_RECOVERY: u64 = 1 << 30;
    pub const FORCED_BACKFILL: u64 = 1 << 31;
    pub const FAILED_REPAIR: u64 = 1 << 32;
    pub const LAGGY: u64 = 1 << 33;
    pub const WAIT: u64 = 1 << 34;
}

/// `object_stat_collection_t`: the sum (the per-category map was retired; always encoded empty).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ObjectStatCollection {
    pub sum: ObjectStatSum,
}

impl Encode for ObjectStatCollection {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(2, 2, |e| {
            self.sum.encode(e);
            e.u32(0);
        })
    }
}

impl Decode for ObjectStatCollection {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("object_stat_collection_t", 2, |_, d| {
            let sum = d.decode()?;
            let n = d.u32()?;
            if n != 0 {
                return Err(DecodeError::invalid(
                    "object_stat_collection_t",
                    "legacy category map not empty",
                ));
            }
            Ok(ObjectStatCollection { sum })
        })
    }
}

/// `pg_stat_t`, Pacific's fields in encoding order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PgStat {
    pub version: Eversion,
    pub reported_seq: u64,
    pub reported_epoch: u32,
    /// All 64 state bits (encoded split: low 32 first, high 32 near the end).
    pub state: u64,
    pub log_start: Eversion,
    pub ondisk_log_start: Eversion,
    pub created: u32,
    pub last_epoch_clean: u32,
    pub parent: PgId,
    pub parent_split_bits: u32,
    pub last_scrub: Eversion,
    pub last_scrub_stamp: Utime,
    pub stats: ObjectStatCollection,
    pub log_size: i64,
    pub ondisk_log_size: i64,
    pub up: Vec<i32>,
    pub acting: Vec<i32>,
    pub last_fresh: Utime,
    pub last_change: Utime,
    pub last_active: Utime,
    pub last_clean: Utime,
    pub last_unstale: Utime,
    pub mapping_epoch: u32,
    pub last_deep_scrub: Eversion,
    pub last_deep_scrub_stamp: Utime,
    pub stats_invalid: bool,
    pub last_clean_scrub_stamp: Utime,
    pub last_became_active: Utime,
    pub dirty_stats_invalid: bool,
    pub up_primary: i32,
    pub acting_primary: i32,
    pub omap_stats_invalid: bool,
    pub hitset_stats_invalid: bool,
    pub blocked_by: Vec<i32>,
    pub last_undegraded: Utime,
    pub last_fullsized: Utime,
    pub hitset_bytes_stats_invalid: bool,
    pub last_peered: Utime,
    pub last_became_peered: Utime,
    pub pin_stats_invalid: bool,
    pub snaptrimq_len: u32,
    /// `interval_set<snapid_t>` as (start, len) pairs.
    pub purged_snaps: Vec<(u64, u64)>,
    pub manifest_stats_invalid: bool,
    pub avail_no_missing: Vec<PgShard>,
    pub object_location_counts: BTreeMap<BTreeSet<PgShard>, i32>,
}

impl Encode for PgStat {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(26, 22, |e| {
            self.version.encode(e);
            e.u64(self.reported_seq);
            e.u32(self.reported_epoch);
            e.u32(self.state as u32);
            self.log_start.encode(e);
            self.ondisk_log_start.encode(e);
            e.u32(self.created);
            e.u32(self.last_epoch_clean);
            self.parent.encode(e);
            e.u32(self.parent_split_bits);
            self.last_scrub.encode(e);
            self.last_scrub_stamp.encode(e);
            self.stats.encode(e);
            e.i64(self.log_size);
            e.i64(self.ondisk_log_size);
            self.up.encode(e);
            self.acting.encode(e);
            for t in [
                self.last_fresh,
                self.last_change,
                self.last_active,
                self.last_clean,
                self.last_unstale,
            ] {
                t.encode(e);
            }
            e.u32(self.mapping_epoch);
            self.last_deep_scrub.encode(e);
            self.last_deep_scrub_stamp.encode(e);
            e.bool(self.stats_invalid);
            self.last_clean_scrub_stamp.encode(e);
            self.last_became_active.encode(e);
            e.bool(self.dirty_stats_invalid);
            e.i32(self.up_primary);
            e.i32(self.acting_primary);
            e.bool(self.omap_stats_invalid);
            e.bool(self.hitset_stats_invalid);
            self.blocked_by.encode(e);
            self.last_undegraded.encode(e);
            self.last_fullsized.encode(e);
            e.bool(self.hitset_bytes_stats_invalid);
            self.last_peered.encode(e);
            self.last_became_peered.encode(e);
            e.bool(self.pin_stats_invalid);
            e.u32(self.snaptrimq_len);
            e.u32((self.state >> 32) as u32);
            e.u32(self.purged_snaps.len() as u32);
            for (s, l) in &self.purged_snaps {
                e.u64(*s);
                e.u64(*l);
            }
            e.bool(self.manifest_stats_invalid);
            self.avail_no_missing.encode(e);
            self.object_location_counts.encode(e);
        })
    }
}

impl PgStat {
    /// `pg_stat_t` up to and including `stats` (the object counts, all a replica takes from a rep op's
    /// `pg_stats`); the other fields default and the rest of the encoding is skipped by the struct's length, so
    /// nothing is allocated for the vectors and maps after the counts. The full [`Decode`] starts the same way.
    pub fn decode_prefix(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("pg_stat_t", 26, Self::prefix_fields)
    }

    /// The fields up to and including `stats`, read from the body of an open `pg_stat_t` struct.
    fn prefix_fields(h: denc::StructHeader, d: &mut Decoder) -> Result<Self, DecodeError> {
        if h.version < 26 {
            return Err(DecodeError::TooOld {
                type_name: "pg_stat_t",
                version: h.version,
                oldest: 26,
            });
        }
        Ok(PgStat {
            version: d.decode()?,
            reported_seq: d.u64()?,
            reported_epoch: d.u32()?,
            state: u64::from(d.u32()?),
            log_start: d.decode()?,
            ondisk_log_start: d.decode()?,
            created: d.u32()?,
            last_epoch_clean: d.u32()?,
            parent: d.decode()?,
            parent_split_bits: d.u32()?,
            last_scrub: d.decode()?,
            last_scrub_stamp: d.decode()?,
            stats: d.decode()?,
            ..PgStat::default()
        })
    }
}

impl Decode for PgStat {
    /// Versions 26 and later (Pacific and newer senders); trailing fields of newer versions are skipped.
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("pg_stat_t", 26, |h, d| {
            let mut s = PgStat::prefix_fields(h, d)?;
            s.log_size = d.i64()?;
            s.ondisk_log_size = d.i64()?;
            s.up = d.decode()?;
            s.acting = d.decode()?;
            s.last_fresh = d.decode()?;
            s.last_change = d.decode()?;
            s.last_active = d.decode()?;
            s.last_clean = d.decode()?;
            s.last_unstale = d.decode()?;
            s.mapping_epoch = d.u32()?;
            s.last_deep_scrub = d.decode()?;
            s.last_deep_scrub_stamp = d.decode()?;
            s.stats_invalid = d.bool()?;
            s.last_clean_scrub_stamp = d.decode()?;
            s.last_became_active = d.decode()?;
            s.dirty_stats_invalid = d.bool()?;
            s.up_primary = d.i32()?;
            s.acting_primary = d.i32()?;
            s.omap_stats_invalid = d.bool()?;
            s.hitset_stats_invalid = d.bool()?;
            s.blocked_by = d.decode()?;
            s.last_undegraded = d.decode()?;
            s.last_fullsized = d.decode()?;
            s.hitset_bytes_stats_invalid = d.bool()?;
            s.last_peered = d.decode()?;
            s.last_became_peered = d.decode()?;
            s.pin_stats_invalid = d.bool()?;
            s.snaptrimq_len = d.u32()?;
            s.state |= u64::from(d.u32()?) << 32;
            let n = d.length("pg_stat_t purged_snaps", 16)?;
            for _ in 0..n {
                s.purged_snaps.push((d.u64()?, d.u64()?));
            }
            s.manifest_stats_invalid = d.bool()?;
            s.avail_no_missing = d.decode()?;
            s.object_location_counts = d.decode()?;
            Ok(s)
        })
    }
}
