// SPDX-License-Identifier: LGPL-3.0-or-later
//! Scrub between a PG's primary and its replicas, in the versions Ceph 16.2.15 sends: the scrub reservation
//! (`MOSDScrubReserve`, 92), the primary's request for a chunk's scrub map (`MOSDRepScrub`, 93) and the replica's
//! answer (`MOSDRepScrubMap`, 117). The operator's request that starts a scrub (`MOSDScrub2`, from the mgr) is in
//! [`crate::osd`]. Checked byte for byte against real Pacific traffic (tests/capture_classic.rs).

use bytes::Bytes;
use denc::{DecodeError, Decoder, Encoder, Eversion, HObject, PgId, PgShard, ShardId, SpgId};

use crate::prio;

/// Message type numbers of this module (`MSG_OSD_*` in Message.h).
pub mod scrub_msg {
    pub const SCRUB_RESERVE: u16 = 92;
    pub const REP_SCRUB: u16 = 93;
    pub const REP_SCRUBMAP: u16 = 117;
}

/// `MOSDScrubReserve::type` values.
pub mod scrub_reserve {
    pub const REQUEST: i32 = 0;
    pub const GRANT: i32 = 1;
    pub const RELEASE: i32 = 2;
    pub const REJECT: i32 = 3;
}

/// `MOSDScrubReserve` (92, v1): the primary asks each replica for a scrub slot; replicas grant or reject; the
/// primary releases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MOSDScrubReserve {
    pub pgid: SpgId,
    pub map_epoch: u32,
    /// One of [`scrub_reserve`].
    pub reserve_type: i32,
    pub from: PgShard,
}
impl MOSDScrubReserve {
    fn enc(&self, e: &mut Encoder) {
        e.encode(&self.pgid);
        e.u32(self.map_epoch);
        e.i32(self.reserve_type);
        e.encode(&self.from);
    }
    fn dec(d: &mut Decoder, _: &Bytes) -> Result<Self, DecodeError> {
        Ok(MOSDScrubReserve {
            pgid: d.decode()?,
            map_epoch: d.u32()?,
            reserve_type: d.i32()?,
            from: d.decode()?,
        })
    }
}

/// `MOSDRepScrub` (93, v9/6): build and send the scrub map of objects `[start, end)` as of `scrub_to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MOSDRepScrub {
    /// Encoded as `pg_t` first and the shard later (historical order).
    pub pgid: SpgId,
    pub scrub_from: Eversion,
    pub scrub_to: Eversion,
    pub map_epoch: u32,
    pub chunky: bool,
    pub start: HObject,
    pub end: HObject,
    pub deep: bool,
    /// Obsolete; Pacific sends `u32::MAX`.
    pub seed: u32,
    pub min_epoch: u32,
    pub allow_preemption: bool,
    pub priority: i32,
    pub high_priority: bool,
}
impl MOSDRepScrub {
    fn enc(&self, e: &mut Encoder) {
        e.encode(&self.pgid.pgid);
        e.encode(&self.scrub_from);
        e.encode(&self.scrub_to);
        e.u32(self.map_epoch);
        e.bool(self.chunky);
        e.encode(&self.start);
        e.encode(&self.end);
        e.bool(self.deep);
        e.encode(&self.pgid.shard);
        e.u32(self.seed);
        e.u32(self.min_epoch);
        e.bool(self.allow_preemption);
        e.i32(self.priority);
        e.bool(self.high_priority);
    }
    fn dec(d: &mut Decoder, _: &Bytes) -> Result<Self, DecodeError> {
        let pg: PgId = d.decode()?;
        let scrub_from = d.decode()?;
        let scrub_to = d.decode()?;
        let map_epoch = d.u32()?;
        let chunky = d.bool()?;
        let start = d.decode()?;
        let end = d.decode()?;
        let deep = d.bool()?;
        let shard: ShardId = d.decode()?;
        Ok(MOSDRepScrub {
            pgid: SpgId::new(pg, shard),
            scrub_from,
            scrub_to,
            map_epoch,
            chunky,
            start,
            end,
            deep,
            seed: d.u32()?,
            min_epoch: d.u32()?,
            allow_preemption: d.bool()?,
            priority: d.i32()?,
            high_priority: d.bool()?,
        })
    }
}

/// `MOSDRepScrubMap` (117, v2/1): a replica's scrub map for the requested chunk. The `ScrubMap` itself travels in
/// the data segment and is kept encoded here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MOSDRepScrubMap {
    pub pgid: SpgId,
    pub map_epoch: u32,
    pub from: PgShard,
    /// The replica gave up the chunk because a write arrived (the primary retries).
    pub preempted: bool,
    /// The encoded `ScrubMap` (data segment).
    pub scrub_map: Bytes,
}
impl MOSDRepScrubMap {
    fn enc(&self, e: &mut Encoder) {
        e.encode(&self.pgid);
        e.u32(self.map_epoch);
        e.encode(&self.from);
        e.bool(self.preempted);
    }
    fn data_segment(&self) -> Bytes {
        self.scrub_map.clone()
    }
    fn dec(d: &mut Decoder, data: &Bytes) -> Result<Self, DecodeError> {
        Ok(MOSDRepScrubMap {
            pgid: d.decode()?,
            map_epoch: d.u32()?,
            from: d.decode()?,
            preempted: d.bool()?,
            scrub_map: data.clone(),
        })
    }
}

no_data!(MOSDScrubReserve, MOSDRepScrub);
message!(
    MOSDScrubReserve,
    scrub_msg::SCRUB_RESERVE,
    1,
    1,
    "MOSDScrubReserve",
    prio::DEFAULT
);
message!(
    MOSDRepScrub,
    scrub_msg::REP_SCRUB,
    9,
    6,
    "replica scrub",
    prio::DEFAULT
);
message!(
    MOSDRepScrubMap,
    scrub_msg::REP_SCRUBMAP,
    2,
    1,
    "rep_scrubmap",
    prio::DEFAULT
);
