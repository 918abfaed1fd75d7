// SPDX-License-Identifier: LGPL-3.0-or-later
//! `pg_history_t` and `pg_info_t`: a PG's epochs of interest and its summary (what peering exchanges and what
//! the pgmeta object's `_info` key holds).

use bytes::Bytes;
use denc::{
    Decode, DecodeError, Decoder, Encode, Encoder, Eversion, HObject, LegacyHeader, PgId, ShardId, Utime,
};

use crate::pg_stat::PgStat;

/// `pg_history_t`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PgHistory {
    pub epoch_created: u32,
    pub epoch_pool_created: u32,
    pub last_epoch_started: u32,
    pub last_interval_started: u32,
    pub last_epoch_clean: u32,
    pub last_interval_clean: u32,
    pub last_epoch_split: u32,
    pub last_epoch_marked_full: u32,
    pub same_up_since: u32,
    pub same_interval_since: u32,
    pub same_primary_since: u32,
    pub last_scrub: Eversion,
    pub last_deep_scrub: Eversion,
    pub last_scrub_stamp: Utime,
    pub last_deep_scrub_stamp: Utime,
    pub last_clean_scrub_stamp: Utime,
    /// `prior_readable_until_ub` (a signed span, nanoseconds).
    pub prior_readable_until_ub_ns: i64,
}

impl Encode for PgHistory {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(10, 4, |e| {
            e.u32(self.epoch_created);
            e.u32(self.last_epoch_started);
            e.u32(self.last_epoch_clean);
            e.u32(self.last_epoch_split);
            e.u32(self.same_interval_since);
            e.u32(self.same_up_since);
            e.u32(self.same_primary_since);
            e.encode(&self.last_scrub);
            e.encode(&self.last_scrub_stamp);
            e.encode(&self.last_deep_scrub);
            e.encode(&self.last_deep_scrub_stamp);
            e.encode(&self.last_clean_scrub_stamp);
            e.u32(self.last_epoch_marked_full);
            e.u32(self.last_interval_started);
            e.u32(self.last_interval_clean);
            e.u32(self.epoch_pool_created);
            e.i64(self.prior_readable_until_ub_ns);
        })
    }
}

impl Decode for PgHistory {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct_legacy("pg_history_t", 10, LegacyHeader::new(4, 4), |h, d| {
            let v = h.version;
            let mut x = PgHistory {
                epoch_created: d.u32()?,
                last_epoch_started: d.u32()?,
                ..Default::default()
            };
            x.last_epoch_clean = if v >= 3 { d.u32()? } else { x.last_epoch_started };
            x.last_epoch_split = d.u32()?;
            x.same_interval_since = d.u32()?;
            x.same_up_since = d.u32()?;
            x.same_primary_since = d.u32()?;
            if v >= 2 {
                x.last_scrub = d.decode()?;
                x.last_scrub_stamp = d.decode()?;
            }
            if v >= 5 {
                x.last_deep_scrub = d.decode()?;
                x.last_deep_scrub_stamp = d.decode()?;
            }
            if v >= 6 {
                x.last_clean_scrub_stamp = d.decode()?;
            }
            if v >= 7 {
                x.last_epoch_marked_full = d.u32()?;
            }
            if v >= 8 {
                x.last_interval_started = d.u32()?;
                x.last_interval_clean = d.u32()?;
            } else {
                x.last_interval_started = x.last_epoch_started;
                x.last_interval_clean = x.last_epoch_clean;
            }
            x.epoch_pool_created = if v >= 9 { d.u32()? } else { x.epoch_created };
            if v >= 10 {
                x.prior_readable_until_ub_ns = d.i64()?;
            }
            Ok(x)
        })
    }
}

/// A versioned struct kept as its encoded bytes (header included), for fields we carry but do not interpret.
fn raw_struct(d: &mut Decoder) -> Result<Bytes, DecodeError> {
    let rest = d.peek_rest();
    if rest.len() < 6 {
        return Err(DecodeError::Truncated {
            offset: d.offset(),
            needed: 6,
            remaining: rest.len(),
        });
    }
    let len = u32::from_le_bytes([rest[2], rest[3], rest[4], rest[5]]) as usize;
    d.take_bytes(
        len.checked_add(6)
            .ok_or(DecodeError::invalid("struct", "length overflow"))?,
    )
}

/// `pg_hit_set_history_t` as Pacific writes it for pools without hit sets.
fn empty_hit_set() -> Bytes {
    let mut e = Encoder::new(0);
    e.versioned(1, 1, |e| {
        e.encode(&Eversion::default());
        e.encode(&Utime::default()); // dummy stamp
        e.versioned(1, 1, |e| {
            // dummy pg_hit_set_info_t: begin, end, version, using_gmt
            e.encode(&Utime::default());
            e.encode(&Utime::default());
            e.encode(&Eversion::default());
            e.bool(true);
        });
        e.u32(0); // history
    });
    e.into_bytes()
}

/// `pg_info_t`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgInfo {
    pub pgid: PgId,
    pub shard: ShardId,
    pub last_update: Eversion,
    pub last_complete: Eversion,
    pub log_tail: Eversion,
    /// The retired nibblewise last_backfill (written as the min object).
    pub old_last_backfill: HObject,
    pub stats: PgStat,
    pub history: PgHistory,
    /// `interval_set<snapid_t>` as (start, len) pairs.
    pub purged_snaps: Vec<(u64, u64)>,
    pub last_epoch_started: u32,
    pub last_user_version: u64,
    /// `pg_hit_set_history_t`, encoded.
    pub hit_set: Bytes,
    pub last_backfill: HObject,
    pub last_backfill_bitwise: bool,
    pub last_interval_started: u32,
}

impl Default for PgInfo {
    fn default() -> Self {
        PgInfo {
            pgid: PgId::default(),
            shard: ShardId::NO_SHARD,
            last_update: Eversion::default(),
            last_complete: Eversion::default(),
            log_tail: Eversion::default(),
            old_last_backfill: HObject::default(),
            stats: PgStat::default(),
            history: PgHistory::default(),
            purged_snaps: Vec::new(),
            last_epoch_started: 0,
            last_user_version: 0,
            hit_set: empty_hit_set(),
            last_backfill: HObject::max_value(),
            last_backfill_bitwise: true,
            last_interval_started: 0,
        }
    }
}

impl Encode for PgInfo {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(32, 26, |e| {
            e.encode(&self.pgid);
            e.encode(&self.last_update);
            e.encode(&self.last_complete);
            e.encode(&self.log_tail);
            e.encode(&self.old_last_backfill);
            e.encode(&self.stats);
            e.encode(&self.history);
            e.encode(&self.purged_snaps);
            e.u32(self.last_epoch_started);
            e.u64(self.last_user_version);
            e.raw(&self.hit_set);
            e.encode(&self.shard);
            e.encode(&self.last_backfill);
            e.bool(self.last_backfill_bitwise);
            e.u32(self.last_interval_started);
        })
    }
}

impl Decode for PgInfo {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct_legacy("pg_info_t", 32, LegacyHeader::new(26, 26), |h, d| {
            if h.version < 26 {
                return Err(DecodeError::TooOld {
                    type_name: "pg_info_t",
                    version: h.version,
                    oldest: 26,
                });
            }
            let v = h.version;
            let mut x = PgInfo {
                pgid: d.decode()?,
                last_update: d.decode()?,
                last_complete: d.decode()?,
                log_tail: d.decode()?,
                old_last_backfill: d.decode()?,
                stats: d.decode()?,
                history: d.decode()?,
                purged_snaps: d.decode()?,
                ..Default::default()
            };
            x.last_epoch_started = if v >= 27 {
                d.u32()?
            } else {
                x.history.last_epoch_started
            };
            x.last_user_version = if v >= 28 { d.u64()? } else { x.last_update.version };
            if v >= 29 {
                x.hit_set = raw_struct(d)?;
            }
            if v >= 30 {
                x.shard = d.decode()?;
            }
            if v >= 31 {
                x.last_backfill = d.decode()?;
                x.last_backfill_bitwise = d.bool()?;
            } else {
                x.last_backfill = x.old_last_backfill.clone();
                x.last_backfill_bitwise = false;
            }
            x.last_interval_started = if v >= 32 { d.u32()? } else { x.last_epoch_started };
            Ok(x)
        })
    }
}
