// SPDX-License-Identifier: LGPL-3.0-or-later
//! Scrub between a PG's primary and its replicas, in the versions Ceph 16.2.15 sends: the scrub reservation
//! (`MOSDScrubReserve`, 92), the primary's request for a chunk's scrub map (`MOSDRepScrub`, 93) and the replica's
//! answer (`MOSDRepScrubMap`, 117). The operator's request that starts a scrub (`MOSDScrub2`, from the mgr) is in
//! [`crate::osd`]. Checked byte for byte against real Pacific traffic (tests/capture_classic.rs).

use bytes::Bytes;
use denc::{Decode, DecodeError, Decoder, Encode, Encoder, Eversion, HObject, PgId, PgShard, ShardId, SpgId};

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

/// `ScrubMap::object` (v10/7): what a replica found for one object. A shallow scrub fills size and attributes; a
/// deep scrub also the data and omap digests and omap sizes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScrubObject {
    pub size: u64,
    /// The object is gone (incremental maps only).
    pub negative: bool,
    /// `map<string, bufferptr>` of xattrs (`_` object_info_t, `snapset`, `_user.*`, `hinfo_key`), in wire order.
    pub attrs: Vec<(Bytes, Bytes)>,
    /// crc32c of the data (deep scrub).
    pub digest: u32,
    pub digest_present: bool,
    pub omap_digest: u32,
    pub omap_digest_present: bool,
    pub stat_error: bool,
    pub read_error: bool,
    pub ec_hash_mismatch: bool,
    pub ec_size_mismatch: bool,
    pub large_omap_object_found: bool,
    pub large_omap_object_key_count: u64,
    pub large_omap_object_value_size: u64,
    pub object_omap_bytes: u64,
    pub object_omap_keys: u64,
}

impl Encode for ScrubObject {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(10, 7, |e| {
            e.u64(self.size);
            e.bool(self.negative);
            e.encode(&self.attrs);
            e.u32(self.digest);
            e.bool(self.digest_present);
            e.u32(0); // obsolete nlinks
            e.u32(0); // obsolete snapcolls (an empty set)
            e.u32(self.omap_digest);
            e.bool(self.omap_digest_present);
            // Pre-Luminous readers see any read problem as one flag.
            e.bool(self.read_error || self.ec_hash_mismatch || self.ec_size_mismatch);
            e.bool(self.stat_error);
            e.bool(self.read_error);
            e.bool(self.ec_hash_mismatch);
            e.bool(self.ec_size_mismatch);
            e.bool(self.large_omap_object_found);
            e.u64(self.large_omap_object_key_count);
            e.u64(self.large_omap_object_value_size);
            e.u64(self.object_omap_bytes);
            e.u64(self.object_omap_keys);
        });
    }
}

impl Decode for ScrubObject {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        // v10 is what Nautilus and later write; older layouts are not read.
        let (_, mut d) = d.start_struct_min("ScrubMap::object", 10, 10)?;
        let size = d.u64()?;
        let negative = d.bool()?;
        let attrs = d.decode()?;
        let digest = d.u32()?;
        let digest_present = d.bool()?;
        let _nlinks = d.u32()?;
        let _snapcolls: Vec<u64> = d.decode()?;
        let omap_digest = d.u32()?;
        let omap_digest_present = d.bool()?;
        let compat_read_error = d.bool()?;
        let stat_error = d.bool()?;
        let read_error = d.bool()?;
        let ec_hash_mismatch = d.bool()?;
        let ec_size_mismatch = d.bool()?;
        if compat_read_error != (read_error || ec_hash_mismatch || ec_size_mismatch) {
            // Ceph always derives it; anything else would not re-encode to the same bytes.
            return Err(DecodeError::invalid(
                "ScrubMap::object",
                "inconsistent compat read_error",
            ));
        }
        Ok(ScrubObject {
            size,
            negative,
            attrs,
            digest,
            digest_present,
            omap_digest,
            omap_digest_present,
            stat_error,
            read_error,
            ec_hash_mismatch,
            ec_size_mismatch,
            large_omap_object_found: d.bool()?,
            large_omap_object_key_count: d.u64()?,
            large_omap_object_value_size: d.u64()?,
            object_omap_bytes: d.u64()?,
            object_omap_keys: d.u64()?,
        })
    }
}

/// `ScrubMap` (v3/2): a replica's objects of one scrub chunk, as of `valid_through`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScrubMap {
    /// `map<hobject_t, object>`, in wire (Ceph's hobject) order.
    pub objects: Vec<(HObject, ScrubObject)>,
    pub valid_through: Eversion,
    pub incr_since: Eversion,
}

impl Encode for ScrubMap {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(3, 2, |e| {
            e.encode(&self.objects);
            e.u32(0); // deprecated attrs map
            e.u32(0); // unused old log bufferlist
            e.encode(&self.valid_through);
            e.encode(&self.incr_since);
        });
    }
}

impl Decode for ScrubMap {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        // v2 keyed objects by pre-bitwise hobjects (pre-Jewel); not read.
        let (_, mut d) = d.start_struct_min("ScrubMap", 3, 3)?;
        let objects = d.decode()?;
        let old_attrs: Vec<(Bytes, Bytes)> = d.decode()?;
        let old_log = d.bufferlist()?;
        if !old_attrs.is_empty() || !old_log.is_empty() {
            return Err(DecodeError::invalid(
                "ScrubMap",
                "deprecated attrs or log present",
            ));
        }
        Ok(ScrubMap {
            objects,
            valid_through: d.decode()?,
            incr_since: d.decode()?,
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
    /// The typed scrub map.
    pub fn decode_scrub_map(&self) -> Result<ScrubMap, DecodeError> {
        ScrubMap::decode_all(self.scrub_map.clone())
    }
    /// Sets the data segment from a typed scrub map.
    pub fn set_scrub_map(&mut self, map: &ScrubMap) {
        self.scrub_map = map.to_bytes(u64::MAX);
    }
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
