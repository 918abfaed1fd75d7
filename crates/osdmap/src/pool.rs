// SPDX-License-Identifier: LGPL-3.0-or-later
//! `pg_pool_t` and the types inside it (`pool_snap_info_t`, `pool_opts_t`, `HitSet::Params`, `pg_merge_meta_t`),
//! with Ceph's feature-dependent encodings (src/osd/osd_types.cc, src/osd/HitSet.h).

use std::collections::{BTreeMap, BTreeSet};

use denc::{Decode, DecodeError, Decoder, Encode, Encoder, Result};

use crate::features::{self, has};
use crate::types::{Eversion, IntervalSet, PgId, Utime};

/// Pool types.
pub const TYPE_REPLICATED: u8 = 1;
pub const TYPE_ERASURE: u8 = 3;

/// Pool flags (`pg_pool_t::FLAG_*`).
pub mod flag {
    pub const HASHPSPOOL: u64 = 1 << 0;
    pub const FULL: u64 = 1 << 1;
    pub const EC_OVERWRITES: u64 = 1 << 2;
    pub const INCOMPLETE_CLONES: u64 = 1 << 3;
    pub const NODELETE: u64 = 1 << 4;
    pub const NOPGCHANGE: u64 = 1 << 5;
    pub const NOSIZECHANGE: u64 = 1 << 6;
    pub const WRITE_FADVISE_DONTNEED: u64 = 1 << 7;
    pub const NOSCRUB: u64 = 1 << 8;
    pub const NODEEP_SCRUB: u64 = 1 << 9;
    pub const FULL_QUOTA: u64 = 1 << 10;
    pub const NEARFULL: u64 = 1 << 11;
    pub const BACKFILLFULL: u64 = 1 << 12;
    pub const SELFMANAGED_SNAPS: u64 = 1 << 13;
    pub const POOL_SNAPS: u64 = 1 << 14;
    pub const CREATING: u64 = 1 << 15;
}

/// `pool_snap_info_t`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolSnapInfo {
    pub snapid: u64,
    pub stamp: Utime,
    pub name: String,
}

impl Decode for PoolSnapInfo {
    fn decode(d: &mut Decoder) -> Result<Self> {
        // DECODE_START_LEGACY_COMPAT_LEN(2, 2, 2): version 1 had no compat byte and no length.
        fn body(b: &mut Decoder) -> Result<PoolSnapInfo> {
            Ok(PoolSnapInfo {
                snapid: b.u64()?,
                stamp: b.decode()?,
                name: b.string()?,
            })
        }
        if d.peek_rest().first().is_some_and(|v| *v >= 2) {
            body(&mut d.start_struct("pool_snap_info_t", 2)?.1)
        } else {
            d.u8()?;
            body(d)
        }
    }
}

impl Encode for PoolSnapInfo {
    fn encode(&self, e: &mut Encoder) {
        let body = |e: &mut Encoder| {
            e.u64(self.snapid);
            self.stamp.encode(e);
            e.string(&self.name);
        };
        if e.features() & features::PGPOOL3 == 0 {
            e.u8(1);
            body(e);
        } else {
            e.versioned(2, 2, body);
        }
    }
}

/// A typed pool option value (`pool_opts_t::value_t`).
#[derive(Debug, Clone, PartialEq)]
pub enum PoolOptValue {
    Str(String),
    Int(i64),
    Double(f64),
}

/// Pool option keys (`pool_opts_t::key_t`), in Ceph's numbering.
pub mod opt {
    pub const SCRUB_MIN_INTERVAL: i32 = 0;
    pub const SCRUB_MAX_INTERVAL: i32 = 1;
    pub const DEEP_SCRUB_INTERVAL: i32 = 2;
    pub const RECOVERY_PRIORITY: i32 = 3;
    pub const RECOVERY_OP_PRIORITY: i32 = 4;
    pub const SCRUB_PRIORITY: i32 = 5;
    pub const COMPRESSION_MODE: i32 = 6;
    pub const COMPRESSION_ALGORITHM: i32 = 7;
    pub const COMPRESSION_REQUIRED_RATIO: i32 = 8;
    pub const COMPRESSION_MAX_BLOB_SIZE: i32 = 9;
    pub const COMPRESSION_MIN_BLOB_SIZE: i32 = 10;
    pub const CSUM_TYPE: i32 = 11;
    pub const CSUM_MAX_BLOCK: i32 = 12;
    pub const CSUM_MIN_BLOCK: i32 = 13;
    pub const FINGERPRINT_ALGORITHM: i32 = 14;
    pub const PG_NUM_MIN: i32 = 15;
    pub const TARGET_SIZE_BYTES: i32 = 16;
    pub const TARGET_SIZE_RATIO: i32 = 17;
    pub const PG_AUTOSCALE_BIAS: i32 = 18;
    pub const READ_LEASE_INTERVAL: i32 = 19;
    pub const DEDUP_TIER: i32 = 20;
    pub const DEDUP_CHUNK_ALGORITHM: i32 = 21;
    pub const DEDUP_CDC_CHUNK_SIZE: i32 = 22;
    pub const PG_NUM_MAX: i32 = 23;
}

/// `pool_opts_t`: key → typed value, ordered by key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PoolOpts {
    pub opts: BTreeMap<i32, PoolOptValue>,
}

const OPT_STR: i32 = 0;
const OPT_INT: i32 = 1;
const OPT_DOUBLE: i32 = 2;

impl Decode for PoolOpts {
    fn decode(d: &mut Decoder) -> Result<Self> {
        let (h, mut b) = d.start_struct("pool_opts_t", 2)?;
        let n = b.length("pool_opts_t", 8)?;
        let mut opts = BTreeMap::new();
        for _ in 0..n {
            let k = b.i32()?;
            let t = b.i32()?;
            let v = match t {
                OPT_STR => PoolOptValue::Str(b.string()?),
                OPT_INT if h.version >= 2 => PoolOptValue::Int(b.i64()?),
                OPT_INT => PoolOptValue::Int(b.i32()? as i64),
                OPT_DOUBLE => PoolOptValue::Double(b.f64()?),
                t => {
                    return Err(DecodeError::invalid("pool_opts_t", format!("value type {t}")));
                }
            };
            opts.insert(k, v);
        }
        Ok(PoolOpts { opts })
    }
}

impl Encode for PoolOpts {
    fn encode(&self, e: &mut Encoder) {
        let nautilus = has(e.features(), features::MASK_SERVER_NAUTILUS);
        e.versioned(if nautilus { 2 } else { 1 }, 1, |e| {
            e.length(self.opts.len());
            for (k, v) in &self.opts {
                e.i32(*k);
                match v {
                    PoolOptValue::Str(s) => {
                        e.i32(OPT_STR);
                        e.string(s);
                    }
                    PoolOptValue::Int(i) => {
                        e.i32(OPT_INT);
                        if nautilus { e.i64(*i) } else { e.i32(*i as i32) }
                    }
                    PoolOptValue::Double(x) => {
                        e.i32(OPT_DOUBLE);
                        e.f64(*x);
                    }
                }
            }
        });
    }
}

/// `HitSet::Params`: which hit-set implementation a cache tier uses, with its parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum HitSetParams {
    #[default]
    None,
    ExplicitHash,
    ExplicitObject,
    Bloom {
        fpp_micro: u32,
        target_size: u64,
        seed: u64,
    },
}

impl Decode for HitSetParams {
    fn decode(d: &mut Decoder) -> Result<Self> {
        let (_, mut b) = d.start_struct("HitSet::Params", 1)?;
        Ok(match b.u8()? {
            0 => HitSetParams::None,
            // The explicit kinds have no parameters and write nothing, not even a struct header.
            1 => HitSetParams::ExplicitHash,
            2 => HitSetParams::ExplicitObject,
            3 => {
                let (_, mut p) = b.start_struct("BloomHitSet::Params", 1)?;
                HitSetParams::Bloom {
                    fpp_micro: p.u32()?,
                    target_size: p.u64()?,
                    seed: p.u64()?,
                }
            }
            t => {
                return Err(DecodeError::invalid("HitSet::Params", format!("type {t}")));
            }
        })
    }
}

impl Encode for HitSetParams {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(1, 1, |e| match self {
            HitSetParams::None => e.u8(0),
            HitSetParams::ExplicitHash => e.u8(1),
            HitSetParams::ExplicitObject => e.u8(2),
            HitSetParams::Bloom {
                fpp_micro,
                target_size,
                seed,
            } => {
                e.u8(3);
                e.versioned(1, 1, |e| {
                    e.u32(*fpp_micro);
                    e.u64(*target_size);
                    e.u64(*seed);
                });
            }
        });
    }
}

/// `pg_merge_meta_t`: what the last PG merge looked like.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PgMergeMeta {
    pub source_pgid: PgId,
    pub ready_epoch: u32,
    pub last_epoch_started: u32,
    pub last_epoch_clean: u32,
    pub source_version: Eversion,
    pub target_version: Eversion,
}

impl Decode for PgMergeMeta {
    fn decode(d: &mut Decoder) -> Result<Self> {
        let (_, mut b) = d.start_struct("pg_merge_meta_t", 1)?;
        Ok(PgMergeMeta {
            source_pgid: b.decode()?,
            ready_epoch: b.u32()?,
            last_epoch_started: b.u32()?,
            last_epoch_clean: b.u32()?,
            source_version: b.decode()?,
            target_version: b.decode()?,
        })
    }
}

impl Encode for PgMergeMeta {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(1, 1, |e| {
            self.source_pgid.encode(e);
            e.u32(self.ready_epoch);
            e.u32(self.last_epoch_started);
            e.u32(self.last_epoch_clean);
            self.source_version.encode(e);
            self.target_version.encode(e);
        });
    }
}

/// `pg_autoscale_mode_t`.
pub mod autoscale {
    pub const OFF: u8 = 0;
    pub const WARN: u8 = 1;
    pub const ON: u8 = 2;
    pub const UNKNOWN: u8 = u8::MAX;
}

/// The newest `pg_pool_t` version this decoder understands.
pub const POOL_MAX_VERSION: u8 = 32;

/// `pg_pool_t`: a pool's placement, snapshot, tiering and tuning parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct PgPool {
    pub type_: u8,
    pub size: u8,
    pub crush_rule: u8,
    pub object_hash: u8,
    pub pg_num: u32,
    pub pgp_num: u32,
    pub last_change: u32,
    pub snap_seq: u64,
    pub snap_epoch: u32,
    pub snaps: BTreeMap<u64, PoolSnapInfo>,
    pub removed_snaps: IntervalSet,
    pub auid: u64,
    pub flags: u64,
    pub min_size: u8,
    pub quota_max_bytes: u64,
    pub quota_max_objects: u64,
    pub tiers: BTreeSet<u64>,
    pub tier_of: i64,
    pub cache_mode: u8,
    pub read_tier: i64,
    pub write_tier: i64,
    pub properties: BTreeMap<String, String>,
    pub hit_set_params: HitSetParams,
    pub hit_set_period: u32,
    pub hit_set_count: u32,
    pub stripe_width: u32,
    pub target_max_bytes: u64,
    pub target_max_objects: u64,
    pub cache_target_dirty_ratio_micro: u32,
    pub cache_target_full_ratio_micro: u32,
    pub cache_min_flush_age: u32,
    pub cache_min_evict_age: u32,
    pub erasure_code_profile: String,
    pub last_force_op_resend_preluminous: u32,
    pub min_read_recency_for_promote: u32,
    pub expected_num_objects: u64,
    pub cache_target_dirty_high_ratio_micro: u32,
    pub min_write_recency_for_promote: u32,
    pub use_gmt_hitset: bool,
    pub fast_read: bool,
    pub hit_set_grade_decay_rate: u32,
    pub hit_set_search_last_n: u32,
    pub opts: PoolOpts,
    pub last_force_op_resend_prenautilus: u32,
    pub application_metadata: BTreeMap<String, BTreeMap<String, String>>,
    pub create_time: Utime,
    pub pg_num_target: u32,
    pub pgp_num_target: u32,
    pub pg_num_pending: u32,
    pub last_force_op_resend: u32,
    pub pg_autoscale_mode: u8,
    pub last_pg_merge_meta: PgMergeMeta,
    /// Stretch-mode peering constraints (v30+; zero count = not a stretch pool).
    pub peering_crush_bucket_count: u32,
    pub peering_crush_bucket_target: u32,
    pub peering_crush_bucket_barrier: u32,
    pub peering_crush_mandatory_member: u32,
    /// Tentacle (v32): EC shards that never act as primary, as the two 64-bit words of a 128-bit set.
    pub nonprimary_shards: [u64; 2],
    /// Derived: `(1 << bits(pg_num - 1)) - 1` and likewise for pgp_num.
    pub pg_num_mask: u32,
    pub pgp_num_mask: u32,
}

impl Default for PgPool {
    fn default() -> Self {
        PgPool {
            type_: 0,
            size: 0,
            crush_rule: 0,
            object_hash: 0,
            pg_num: 0,
            pgp_num: 0,
            last_change: 0,
            snap_seq: 0,
            snap_epoch: 0,
            snaps: BTreeMap::new(),
            removed_snaps: IntervalSet::default(),
            auid: 0,
            flags: 0,
            min_size: 0,
            quota_max_bytes: 0,
            quota_max_objects: 0,
            tiers: BTreeSet::new(),
            tier_of: -1,
            cache_mode: 0,
            read_tier: -1,
            write_tier: -1,
            properties: BTreeMap::new(),
            hit_set_params: HitSetParams::None,
            hit_set_period: 0,
            hit_set_count: 0,
            stripe_width: 0,
            target_max_bytes: 0,
            target_max_objects: 0,
            cache_target_dirty_ratio_micro: 0,
            cache_target_full_ratio_micro: 0,
            cache_min_flush_age: 0,
            cache_min_evict_age: 0,
            erasure_code_profile: String::new(),
            last_force_op_resend_preluminous: 0,
            min_read_recency_for_promote: 0,
            expected_num_objects: 0,
            cache_target_dirty_high_ratio_micro: 0,
            min_write_recency_for_promote: 0,
            use_gmt_hitset: true,
            fast_read: false,
            hit_set_grade_decay_rate: 0,
            hit_set_search_last_n: 0,
            opts: PoolOpts::default(),
            last_force_op_resend_prenautilus: 0,
            application_metadata: BTreeMap::new(),
            create_time: Utime::default(),
            pg_num_target: 0,
            pgp_num_target: 0,
            pg_num_pending: 0,
            last_force_op_resend: 0,
            pg_autoscale_mode: autoscale::UNKNOWN,
            last_pg_merge_meta: PgMergeMeta::default(),
            peering_crush_bucket_count: 0,
            peering_crush_bucket_target: 0,
            peering_crush_bucket_barrier: 0,
            peering_crush_mandatory_member: crate::CRUSH_ITEM_NONE as u32,
            nonprimary_shards: [0; 2],
            pg_num_mask: 0,
            pgp_num_mask: 0,
        }
    }
}

/// Number of significant bits (`cbits`).
fn cbits(v: u32) -> u32 {
    32 - v.leading_zeros()
}

/// `ceph_stable_mod`: map `x` into `[0, b)` so that growing `b` moves as few values as possible.
pub fn ceph_stable_mod(x: u32, b: u32, bmask: u32) -> u32 {
    if (x & bmask) < b {
        x & bmask
    } else {
        x & (bmask >> 1)
    }
}

impl PgPool {
    pub fn is_replicated(&self) -> bool {
        self.type_ == TYPE_REPLICATED
    }
    pub fn is_erasure(&self) -> bool {
        self.type_ == TYPE_ERASURE
    }
    /// Replicated pools compact their OSD lists; EC pools keep positions (shards).
    pub fn can_shift_osds(&self) -> bool {
        self.type_ == TYPE_REPLICATED
    }
    pub fn has_flag(&self, f: u64) -> bool {
        self.flags & f != 0
    }
    pub fn is_stretch_pool(&self) -> bool {
        self.peering_crush_bucket_count != 0
    }

    pub fn calc_pg_masks(&mut self) {
        self.pg_num_mask = mask_for(self.pg_num);
        self.pgp_num_mask = mask_for(self.pgp_num);
    }

    pub fn set_pg_num(&mut self, n: u32) {
        self.pg_num = n;
        self.pg_num_pending = n;
        self.calc_pg_masks();
    }
    pub fn set_pgp_num(&mut self, n: u32) {
        self.pgp_num = n;
        self.calc_pg_masks();
    }

    /// `raw_pg_to_pg`: fold a full-precision seed into this pool's pg_num.
    pub fn raw_pg_to_pg(&self, pg: PgId) -> PgId {
        PgId::new(pg.pool, ceph_stable_mod(pg.seed, self.pg_num, self.pg_num_mask))
    }

    /// The version `encode` emits for `features` (Pacific: 29, or 30 for stretch pools).
    pub fn encoding_version(&self, f: u64) -> u8 {
        if f & features::PGPOOL3 == 0 {
            2
        } else if f & features::OSDENC == 0 {
            4
        } else if f & features::OSD_POOLRESEND == 0 {
            14
        } else if f & features::NEW_OSDOP_ENCODING == 0 {
            21
        } else if !has(f, features::MASK_SERVER_LUMINOUS) {
            24
        } else if !has(f, features::MASK_SERVER_MIMIC) {
            26
        } else if !has(f, features::MASK_SERVER_NAUTILUS) {
            27
        } else if !self.is_stretch_pool() {
            29
        } else {
            30
        }
    }

    fn encode_head(&self, e: &mut Encoder) {
        e.u8(self.type_);
        e.u8(self.size);
        e.u8(self.crush_rule);
        e.u8(self.object_hash);
        e.u32(self.pg_num);
        e.u32(self.pgp_num);
        e.u32(0); // lpg_num: localized PGs never existed in practice
        e.u32(0); // lpgp_num
        e.u32(self.last_change);
        e.u64(self.snap_seq);
        e.u32(self.snap_epoch);
    }

    fn encode_legacy_v2(&self, e: &mut Encoder) {
        e.u8(2);
        self.encode_head(e);
        e.length(self.snaps.len());
        e.length(self.removed_snaps.m.len());
        e.u64(self.auid);
        for (k, v) in &self.snaps {
            e.u64(*k);
            v.encode(e);
        }
        for (s, l) in &self.removed_snaps.m {
            e.u64(*s);
            e.u64(*l);
        }
    }

    fn encode_body(&self, e: &mut Encoder, v: u8) {
        self.encode_head(e);
        self.snaps.encode(e);
        self.removed_snaps.encode(e);
        e.u64(self.auid);
        if v == 4 || v == 14 || v >= 27 {
            e.u64(self.flags);
        } else {
            e.u64(self.flags & !(flag::SELFMANAGED_SNAPS | flag::POOL_SNAPS | flag::CREATING));
        }
        e.u32(0); // crash_replay_interval, retired
        if v == 4 {
            return;
        }
        e.u8(self.min_size);
        e.u64(self.quota_max_bytes);
        e.u64(self.quota_max_objects);
        self.tiers.encode(e);
        e.i64(self.tier_of);
        e.u8(self.cache_mode);
        e.i64(self.read_tier);
        e.i64(self.write_tier);
        self.properties.encode(e);
        self.hit_set_params.encode(e);
        e.u32(self.hit_set_period);
        e.u32(self.hit_set_count);
        e.u32(self.stripe_width);
        e.u64(self.target_max_bytes);
        e.u64(self.target_max_objects);
        e.u32(self.cache_target_dirty_ratio_micro);
        e.u32(self.cache_target_full_ratio_micro);
        e.u32(self.cache_min_flush_age);
        e.u32(self.cache_min_evict_age);
        e.string(&self.erasure_code_profile);
        if v == 14 {
            return;
        }
        e.u32(self.last_force_op_resend_preluminous);
        e.u32(self.min_read_recency_for_promote);
        e.u64(self.expected_num_objects);
        if v >= 19 {
            e.u32(self.cache_target_dirty_high_ratio_micro);
        }
        if v >= 20 {
            e.u32(self.min_write_recency_for_promote);
        }
        if v >= 21 {
            e.bool(self.use_gmt_hitset);
        }
        if v >= 22 {
            e.bool(self.fast_read);
        }
        if v >= 23 {
            e.u32(self.hit_set_grade_decay_rate);
            e.u32(self.hit_set_search_last_n);
        }
        if v >= 24 {
            self.opts.encode(e);
        }
        if v >= 25 {
            e.u32(self.last_force_op_resend_prenautilus);
        }
        if v >= 26 {
            self.application_metadata.encode(e);
        }
        if v >= 27 {
            self.create_time.encode(e);
        }
        if v >= 28 {
            e.u32(self.pg_num_target);
            e.u32(self.pgp_num_target);
            e.u32(self.pg_num_pending);
            e.u32(0); // pg_num_dec_last_epoch_started, from 14.1.0/1 only
            e.u32(0); // pg_num_dec_last_epoch_clean
            e.u32(self.last_force_op_resend);
            e.u8(self.pg_autoscale_mode);
        }
        if v >= 29 {
            self.last_pg_merge_meta.encode(e);
        }
        if v == 30 {
            e.u32(self.peering_crush_bucket_count);
            e.u32(self.peering_crush_bucket_target);
            e.u32(self.peering_crush_bucket_barrier);
            e.u32(self.peering_crush_mandatory_member);
        }
    }
}

/// Ceph's `denc_varint`: 7 bits per byte, low bits first, high bit = more.
fn varint(d: &mut Decoder) -> Result<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = d.u8()?;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(DecodeError::invalid("varint", "longer than 10 bytes"))
}

fn mask_for(n: u32) -> u32 {
    let bits = cbits(n.wrapping_sub(1));
    if bits >= 32 { u32::MAX } else { (1u32 << bits) - 1 }
}

impl Encode for PgPool {
    fn encode(&self, e: &mut Encoder) {
        let v = self.encoding_version(e.features());
        match v {
            2 => self.encode_legacy_v2(e),
            4 => {
                e.u8(4);
                self.encode_body(e, 4);
            }
            _ => e.versioned(v, 5, |e| self.encode_body(e, v)),
        }
    }
}

impl Decode for PgPool {
    fn decode(d: &mut Decoder) -> Result<Self> {
        // DECODE_START_LEGACY_COMPAT_LEN(32, 5, 5): versions before 5 (pre-2012) have no envelope; refuse them.
        let (h, mut b) = d.start_struct_min("pg_pool_t", POOL_MAX_VERSION, 5)?;
        let v = h.version;
        let mut p = PgPool {
            type_: b.u8()?,
            size: b.u8()?,
            crush_rule: b.u8()?,
            object_hash: b.u8()?,
            pg_num: b.u32()?,
            pgp_num: b.u32()?,
            ..PgPool::default()
        };
        let _lpg_num = b.u32()?;
        let _lpgp_num = b.u32()?;
        p.last_change = b.u32()?;
        p.snap_seq = b.u64()?;
        p.snap_epoch = b.u32()?;
        p.snaps = b.decode()?;
        p.removed_snaps = b.decode()?;
        p.auid = b.u64()?;
        p.flags = b.u64()?;
        let _crash_replay_interval = b.u32()?;
        // Upgrade path from before the snap-mode flags existed.
        if p.snap_seq > 0 && p.flags & (flag::SELFMANAGED_SNAPS | flag::POOL_SNAPS) == 0 {
            p.flags |= if p.removed_snaps.is_empty() {
                flag::POOL_SNAPS
            } else {
                flag::SELFMANAGED_SNAPS
            };
        }
        p.min_size = if v >= 7 { b.u8()? } else { p.size - p.size / 2 };
        if v >= 8 {
            p.quota_max_bytes = b.u64()?;
            p.quota_max_objects = b.u64()?;
        }
        if v >= 9 {
            p.tiers = b.decode()?;
            p.tier_of = b.i64()?;
            p.cache_mode = b.u8()?;
            p.read_tier = b.i64()?;
            p.write_tier = b.i64()?;
        }
        if v >= 10 {
            p.properties = b.decode()?;
        }
        if v >= 11 {
            p.hit_set_params = b.decode()?;
            p.hit_set_period = b.u32()?;
            p.hit_set_count = b.u32()?;
        }
        if v >= 12 {
            p.stripe_width = b.u32()?;
        }
        if v >= 13 {
            p.target_max_bytes = b.u64()?;
            p.target_max_objects = b.u64()?;
            p.cache_target_dirty_ratio_micro = b.u32()?;
            p.cache_target_full_ratio_micro = b.u32()?;
            p.cache_min_flush_age = b.u32()?;
            p.cache_min_evict_age = b.u32()?;
        }
        if v >= 14 {
            p.erasure_code_profile = b.string()?;
        }
        if v >= 15 {
            p.last_force_op_resend_preluminous = b.u32()?;
        }
        p.min_read_recency_for_promote = if v >= 16 { b.u32()? } else { 1 };
        if v >= 17 {
            p.expected_num_objects = b.u64()?;
        }
        p.cache_target_dirty_high_ratio_micro = if v >= 19 {
            b.u32()?
        } else {
            p.cache_target_dirty_ratio_micro
        };
        p.min_write_recency_for_promote = if v >= 20 { b.u32()? } else { 1 };
        p.use_gmt_hitset = if v >= 21 { b.bool()? } else { false };
        if v >= 22 {
            p.fast_read = b.bool()?;
        }
        if v >= 23 {
            p.hit_set_grade_decay_rate = b.u32()?;
            p.hit_set_search_last_n = b.u32()?;
        } else {
            p.hit_set_search_last_n = 1;
        }
        if v >= 24 {
            p.opts = b.decode()?;
        }
        p.last_force_op_resend_prenautilus = if v >= 25 {
            b.u32()?
        } else {
            p.last_force_op_resend_preluminous
        };
        if v >= 26 {
            p.application_metadata = b.decode()?;
        }
        if v >= 27 {
            p.create_time = b.decode()?;
        }
        if v >= 28 {
            p.pg_num_target = b.u32()?;
            p.pgp_num_target = b.u32()?;
            p.pg_num_pending = b.u32()?;
            let old_les = b.u32()?;
            let old_lec = b.u32()?;
            p.last_force_op_resend = b.u32()?;
            p.pg_autoscale_mode = b.u8()?;
            if v >= 29 {
                p.last_pg_merge_meta = b.decode()?;
            } else {
                p.last_pg_merge_meta.last_epoch_started = old_les;
                p.last_pg_merge_meta.last_epoch_clean = old_lec;
            }
        } else {
            p.pg_num_target = p.pg_num;
            p.pgp_num_target = p.pgp_num;
            p.pg_num_pending = p.pg_num;
            p.last_force_op_resend = p.last_force_op_resend_prenautilus;
            p.pg_autoscale_mode = autoscale::WARN;
        }
        if v == 30 {
            p.peering_crush_bucket_count = b.u32()?;
            p.peering_crush_bucket_target = b.u32()?;
            p.peering_crush_bucket_barrier = b.u32()?;
            p.peering_crush_mandatory_member = b.u32()?;
        }
        if v >= 31 && b.bool()? {
            p.peering_crush_bucket_count = b.u32()?;
            p.peering_crush_bucket_target = b.u32()?;
            p.peering_crush_bucket_barrier = b.u32()?;
            p.peering_crush_mandatory_member = b.u32()?;
        }
        if v >= 32 {
            // shard_id_set: a 128-bit set written as two varint words.
            p.nonprimary_shards = [varint(&mut b)?, varint(&mut b)?];
        }
        p.calc_pg_masks();
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_mod_and_masks() {
        let mut p = PgPool::default();
        p.set_pg_num(12);
        p.set_pgp_num(12);
        assert_eq!(p.pg_num_mask, 15);
        // 13 & 15 = 13 >= 12, so fold with mask 7.
        assert_eq!(ceph_stable_mod(13, 12, 15), 5);
        assert_eq!(ceph_stable_mod(11, 12, 15), 11);
        p.set_pg_num(1);
        assert_eq!(p.pg_num_mask, 0);
        p.set_pg_num(16);
        assert_eq!(p.pg_num_mask, 15);
    }

    #[test]
    fn pacific_pool_round_trips_as_v29() {
        let mut p = PgPool {
            type_: TYPE_ERASURE,
            size: 4,
            min_size: 3,
            crush_rule: 1,
            object_hash: 2,
            flags: flag::HASHPSPOOL,
            erasure_code_profile: "default".into(),
            hit_set_params: HitSetParams::Bloom {
                fpp_micro: 50_000,
                target_size: 1000,
                seed: 7,
            },
            ..PgPool::default()
        };
        p.set_pg_num(32);
        p.set_pgp_num(32);
        p.opts.opts.insert(opt::PG_NUM_MIN, PoolOptValue::Int(8));
        p.opts
            .opts
            .insert(opt::COMPRESSION_MODE, PoolOptValue::Str("aggressive".into()));
        let b = p.to_bytes(features::PACIFIC);
        assert_eq!(&b[..2], &[29, 5]);
        let q = PgPool::decode_all(b.clone()).unwrap();
        assert_eq!(q, p);
        assert_eq!(q.to_bytes(features::PACIFIC), b);
        // A stretch pool needs v30.
        let s = PgPool {
            peering_crush_bucket_count: 2,
            ..p
        };
        assert_eq!(s.to_bytes(features::PACIFIC)[0], 30);
    }
}
