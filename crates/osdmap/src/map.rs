// SPDX-License-Identifier: LGPL-3.0-or-later
//! The full OSDMap (`OSDMap::encode/decode` in src/osd/OSDMap.cc): a wrapper (8/7) holding a client-usable block,
//! an OSD-only block and a crc32c over the whole encoding.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use crush::CrushMap;
use denc::{Decode, DecodeError, Decoder, Encode, Encoder, Result};

use crate::features::{self, has};
use crate::pool::PgPool;
use crate::types::{EntityAddr, EntityAddrvec, IntervalSet, PgId, Utime, Uuid};

/// OSD state bits (`CEPH_OSD_*` in rados.h).
pub mod state {
    pub const EXISTS: u32 = 1 << 0;
    pub const UP: u32 = 1 << 1;
    pub const AUTOOUT: u32 = 1 << 2;
    pub const NEW: u32 = 1 << 3;
    pub const FULL: u32 = 1 << 4;
    pub const NEARFULL: u32 = 1 << 5;
    pub const BACKFILLFULL: u32 = 1 << 6;
    pub const DESTROYED: u32 = 1 << 7;
    pub const NOUP: u32 = 1 << 8;
    pub const NODOWN: u32 = 1 << 9;
    pub const NOIN: u32 = 1 << 10;
    pub const NOOUT: u32 = 1 << 11;
    pub const STOP: u32 = 1 << 12;
}

/// Map-wide flags (`CEPH_OSDMAP_*`).
pub mod map_flag {
    pub const REQUIRE_JEWEL: u32 = 1 << 16;
    pub const REQUIRE_KRAKEN: u32 = 1 << 17;
    pub const REQUIRE_LUMINOUS: u32 = 1 << 18;
    pub const RECOVERY_DELETES: u32 = 1 << 19;
    pub const PGLOG_HARDLIMIT: u32 = 1 << 22;
    pub const LEGACY_REQUIRE_FLAGS: u32 = REQUIRE_JEWEL | REQUIRE_KRAKEN | REQUIRE_LUMINOUS;
}

/// `ceph_release_t` values the maps compare against.
pub mod release {
    pub const UNKNOWN: u8 = 0;
    pub const JEWEL: u8 = 10;
    pub const KRAKEN: u8 = 11;
    pub const LUMINOUS: u8 = 12;
    pub const MIMIC: u8 = 13;
    pub const NAUTILUS: u8 = 14;
    pub const OCTOPUS: u8 = 15;
    pub const PACIFIC: u8 = 16;
}

/// Weight of an OSD that is fully in (16.16 fixed point); 0 is out.
pub const OSD_IN: u32 = 0x10000;
pub const OSD_OUT: u32 = 0;
/// Default (and maximum) primary affinity.
pub const DEFAULT_PRIMARY_AFFINITY: u32 = 0x10000;

/// `osd_info_t`: the epochs that bound an OSD's intervals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OsdInfo {
    pub last_clean_begin: u32,
    pub last_clean_end: u32,
    pub up_from: u32,
    pub up_thru: u32,
    pub down_at: u32,
    pub lost_at: u32,
}

impl Decode for OsdInfo {
    fn decode(d: &mut Decoder) -> Result<Self> {
        let _v = d.u8()?;
        Ok(OsdInfo {
            last_clean_begin: d.u32()?,
            last_clean_end: d.u32()?,
            up_from: d.u32()?,
            up_thru: d.u32()?,
            down_at: d.u32()?,
            lost_at: d.u32()?,
        })
    }
}

impl Encode for OsdInfo {
    fn encode(&self, e: &mut Encoder) {
        e.u8(1);
        for x in [
            self.last_clean_begin,
            self.last_clean_end,
            self.up_from,
            self.up_thru,
            self.down_at,
            self.lost_at,
        ] {
            e.u32(x);
        }
    }
}

/// `osd_xinfo_t`: extended per-OSD information.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OsdXinfo {
    pub down_stamp: Utime,
    /// Kept as Ceph keeps it (a float) so that re-encoding reproduces Ceph's rounding exactly.
    pub laggy_probability: f32,
    pub laggy_interval: u32,
    pub features: u64,
    pub old_weight: u32,
    pub last_purged_snaps_scrub: Utime,
    pub dead_epoch: u32,
}

// 0xffffffff as a float rounds to 2^32; Ceph scales by exactly that.
const LAGGY_SCALE: f32 = 4_294_967_296.0;

impl Decode for OsdXinfo {
    fn decode(d: &mut Decoder) -> Result<Self> {
        let (h, mut b) = d.start_struct("osd_xinfo_t", 4)?;
        let mut x = OsdXinfo {
            down_stamp: b.decode()?,
            laggy_probability: b.u32()? as f32 / LAGGY_SCALE,
            laggy_interval: b.u32()?,
            ..OsdXinfo::default()
        };
        if h.version >= 2 {
            x.features = b.u64()?;
        }
        if h.version >= 3 {
            x.old_weight = b.u32()?;
        }
        if h.version >= 4 {
            x.last_purged_snaps_scrub = b.decode()?;
            x.dead_epoch = b.u32()?;
        }
        Ok(x)
    }
}

impl Encode for OsdXinfo {
    fn encode(&self, e: &mut Encoder) {
        let v = if has(e.features(), features::MASK_SERVER_OCTOPUS) {
            4
        } else {
            3
        };
        e.versioned(v, 1, |e| {
            self.down_stamp.encode(e);
            e.u32((self.laggy_probability * LAGGY_SCALE) as u32);
            e.u32(self.laggy_interval);
            e.u64(self.features);
            e.u32(self.old_weight);
            if v >= 4 {
                self.last_purged_snaps_scrub.encode(e);
                e.u32(self.dead_epoch);
            }
        });
    }
}

/// The full OSD map of one epoch.
#[derive(Debug, Clone, PartialEq)]
pub struct OsdMap {
    pub fsid: Uuid,
    pub epoch: u32,
    pub created: Utime,
    pub modified: Utime,
    pub pools: BTreeMap<i64, PgPool>,
    pub pool_name: BTreeMap<i64, String>,
    pub pool_max: i32,
    pub flags: u32,
    pub max_osd: i32,
    pub osd_state: Vec<u32>,
    pub osd_weight: Vec<u32>,
    pub client_addrs: Vec<EntityAddrvec>,
    pub pg_temp: BTreeMap<PgId, Vec<i32>>,
    pub primary_temp: BTreeMap<PgId, i32>,
    /// `None` when every OSD has the default affinity (Ceph then encodes an empty vector).
    pub osd_primary_affinity: Option<Vec<u32>>,
    /// The embedded CRUSH map, exactly as encoded (CrushWrapper::encode); re-encoding writes these bytes back.
    pub crush: Bytes,
    /// `crush`, decoded for placement; `None` if our CRUSH decoder refused it (placement then fails cleanly).
    pub crush_map: Option<Arc<CrushMap>>,
    pub erasure_code_profiles: BTreeMap<String, BTreeMap<String, String>>,
    pub pg_upmap: BTreeMap<PgId, Vec<i32>>,
    pub pg_upmap_items: BTreeMap<PgId, Vec<(i32, i32)>>,
    /// Reef and later (client block v10).
    pub pg_upmap_primaries: BTreeMap<PgId, i32>,
    pub crush_version: i32,
    pub new_removed_snaps: BTreeMap<i64, IntervalSet>,
    pub new_purged_snaps: BTreeMap<i64, IntervalSet>,
    pub last_up_change: Utime,
    pub last_in_change: Utime,
    // OSD-only part.
    pub hb_back_addrs: Vec<EntityAddrvec>,
    pub osd_info: Vec<OsdInfo>,
    pub blocklist: BTreeMap<EntityAddr, Utime>,
    pub cluster_addrs: Vec<EntityAddrvec>,
    pub cluster_snapshot_epoch: u32,
    pub cluster_snapshot: String,
    pub osd_uuid: Vec<Uuid>,
    pub osd_xinfo: Vec<OsdXinfo>,
    pub hb_front_addrs: Vec<EntityAddrvec>,
    pub nearfull_ratio: f32,
    pub full_ratio: f32,
    pub backfillfull_ratio: f32,
    pub require_min_compat_client: u8,
    pub require_osd_release: u8,
    pub removed_snaps_queue: BTreeMap<i64, IntervalSet>,
    pub crush_node_flags: BTreeMap<i32, u32>,
    pub device_class_flags: BTreeMap<i32, u32>,
    pub stretch_mode_enabled: bool,
    pub stretch_bucket_count: u32,
    pub degraded_stretch_mode: u32,
    pub recovering_stretch_mode: u32,
    pub stretch_mode_bucket: i32,
    pub range_blocklist: BTreeMap<EntityAddr, Utime>,
    pub allow_crimson: bool,
    /// The crc stored in the decoded encoding (verified on decode).
    pub crc: u32,
    /// The exact bytes this map was decoded from, for forwarding without re-encoding. Cleared by mutation through
    /// [`OsdMap::apply_incremental`] unless the incremental carried a full map.
    pub raw: Option<Bytes>,
}

impl Default for OsdMap {
    fn default() -> Self {
        OsdMap {
            fsid: Uuid::default(),
            epoch: 0,
            created: Utime::default(),
            modified: Utime::default(),
            pools: BTreeMap::new(),
            pool_name: BTreeMap::new(),
            pool_max: -1,
            flags: 0,
            max_osd: 0,
            osd_state: Vec::new(),
            osd_weight: Vec::new(),
            client_addrs: Vec::new(),
            pg_temp: BTreeMap::new(),
            primary_temp: BTreeMap::new(),
            osd_primary_affinity: None,
            crush: Bytes::new(),
            crush_map: None,
            erasure_code_profiles: BTreeMap::new(),
            pg_upmap: BTreeMap::new(),
            pg_upmap_items: BTreeMap::new(),
            pg_upmap_primaries: BTreeMap::new(),
            crush_version: 1,
            new_removed_snaps: BTreeMap::new(),
            new_purged_snaps: BTreeMap::new(),
            last_up_change: Utime::default(),
            last_in_change: Utime::default(),
            hb_back_addrs: Vec::new(),
            osd_info: Vec::new(),
            blocklist: BTreeMap::new(),
            cluster_addrs: Vec::new(),
            cluster_snapshot_epoch: 0,
            cluster_snapshot: String::new(),
            osd_uuid: Vec::new(),
            osd_xinfo: Vec::new(),
            hb_front_addrs: Vec::new(),
            nearfull_ratio: 0.0,
            full_ratio: 0.0,
            backfillfull_ratio: 0.0,
            require_min_compat_client: release::UNKNOWN,
            require_osd_release: release::UNKNOWN,
            removed_snaps_queue: BTreeMap::new(),
            crush_node_flags: BTreeMap::new(),
            device_class_flags: BTreeMap::new(),
            stretch_mode_enabled: false,
            stretch_bucket_count: 0,
            degraded_stretch_mode: 0,
            recovering_stretch_mode: 0,
            stretch_mode_bucket: 0,
            range_blocklist: BTreeMap::new(),
            allow_crimson: false,
            crc: 0,
            raw: None,
        }
    }
}

/// Newest block versions this decoder reads.
const CLIENT_MAX: u8 = 10;
const OSD_ONLY_MAX: u8 = 12;

/// Ceph's crc convention (CRC-32C with no pre/post inversion, seed -1), shared with every other crate.
pub(crate) use ceph_crc::ceph_crc32c;

/// Encode one address vector per slot, as a single legacy address each when the peer predates addrvecs.
pub(crate) fn encode_addrvecs(v: &[EntityAddrvec], e: &mut Encoder, as_addr: bool) {
    if as_addr {
        e.length(v.len());
        for a in v {
            a.legacy_addr().encode(e);
        }
    } else {
        v.encode(e);
    }
}

// The envelope shared by full and incremental maps: `ENCODE_START(8, 7)`, the client block, the osd-only block,
// then (v8+) a le32 crc and whatever the map type appends. The crc covers the whole envelope except its own four
// bytes.

/// CRC-32C (Ceph's convention) of `buf[..end]` without the four bytes at `crc_at`.
fn crc_skipping(buf: &[u8], crc_at: usize, end: usize) -> u32 {
    let head = ceph_crc32c(u32::MAX, buf.get(..crc_at).unwrap_or_default());
    ceph_crc32c(head, buf.get(crc_at + 4..end).unwrap_or_default())
}

/// Encode the envelope for a peer with `features`: `blocks` writes the client and osd-only blocks, `tail` what
/// follows the crc. Returns the bytes with the crc patched in, and the crc.
pub(crate) fn encode_enveloped(
    features: u64,
    blocks: impl FnOnce(&mut Encoder),
    tail: impl FnOnce(&mut Encoder),
) -> (Bytes, u32) {
    // legacy_addr() fallbacks aside, the features written are those passed, minus the sentinel bit.
    let mut e = Encoder::new(features & !features::RESERVED);
    let mut crc_at = 0;
    e.versioned(8, 7, |e| {
        blocks(e);
        crc_at = e.len();
        e.u32(0);
        tail(e);
    });
    let mut buf = e.into_inner();
    let crc = crc_skipping(&buf, crc_at, buf.len());
    buf[crc_at..crc_at + 4].copy_from_slice(&crc.to_le_bytes());
    (buf.freeze(), crc)
}

/// Decode the envelope: `blocks` reads the client and osd-only blocks into a `T`, `tail` what follows the crc.
/// With `verify_crc`, a v8+ envelope whose crc does not match is an error. Returns the value, the stored crc (v8+)
/// and the envelope's raw bytes.
pub(crate) fn decode_enveloped<T>(
    d: &mut Decoder,
    name: &'static str,
    verify_crc: bool,
    blocks: impl FnOnce(&mut Decoder) -> Result<T>,
    tail: impl FnOnce(&mut Decoder, &mut T) -> Result<()>,
) -> Result<(T, Option<u32>, Bytes)> {
    let start = d.clone();
    let (h, mut w) = d.start_struct_min(name, 8, 7)?;
    let mut value = blocks(&mut w)?;
    let total = 6 + h.len as usize;
    let mut stored = None;
    if h.version >= 8 {
        let crc_at = 6 + (h.len as usize - w.remaining());
        let crc = w.u32()?;
        tail(&mut w, &mut value)?;
        let actual = crc_skipping(start.peek_rest(), crc_at, total);
        if verify_crc && actual != crc {
            return Err(DecodeError::invalid(
                name,
                format!("bad crc: computed {actual:#x}, stored {crc:#x}"),
            ));
        }
        stored = Some(crc);
    }
    let mut s = start;
    let raw = s.take_bytes(total)?;
    Ok((value, stored, raw))
}

/// The release a pre-v5 (map) / pre-v6 (incremental) osd-only block implies with its legacy `REQUIRE_*` flags.
pub(crate) fn legacy_required_release(flags: u32) -> Option<u8> {
    if flags & map_flag::REQUIRE_LUMINOUS != 0 {
        Some(release::LUMINOUS)
    } else if flags & map_flag::REQUIRE_KRAKEN != 0 {
        Some(release::KRAKEN)
    } else if flags & map_flag::REQUIRE_JEWEL != 0 {
        Some(release::JEWEL)
    } else {
        None
    }
}

impl OsdMap {
    /// The features a monitor encodes this map with (`get_encoding_features`): the significant bits, minus those
    /// of releases newer than `require_osd_release`.
    pub fn encoding_features(&self) -> u64 {
        let mut f = features::OSDMAP_SIGNIFICANT;
        let r = self.require_osd_release;
        let lt = |b| crate::apply::release_lt(r, b);
        if lt(release::OCTOPUS) {
            f &= !(1 << 16);
        }
        if lt(release::NAUTILUS) {
            f &= !(1 << 2);
        }
        if lt(release::MIMIC) {
            f &= !(1 << 28);
        }
        if lt(release::LUMINOUS) {
            f &= !(1 << 21);
        }
        if lt(release::KRAKEN) {
            f &= !((1 << 14) | features::MSG_ADDR2);
        }
        if lt(release::JEWEL) {
            f &= !((1 << 57) | features::NEW_OSDOP_ENCODING | (1 << 58));
        }
        f
    }

    pub fn exists(&self, osd: i32) -> bool {
        osd >= 0
            && osd < self.max_osd
            && self
                .osd_state
                .get(osd as usize)
                .is_some_and(|s| s & state::EXISTS != 0)
    }
    pub fn is_up(&self, osd: i32) -> bool {
        self.exists(osd)
            && self
                .osd_state
                .get(osd as usize)
                .is_some_and(|s| s & state::UP != 0)
    }
    pub fn is_down(&self, osd: i32) -> bool {
        !self.is_up(osd)
    }
    pub fn weight(&self, osd: i32) -> u32 {
        if osd < 0 {
            return OSD_OUT;
        }
        self.osd_weight.get(osd as usize).copied().unwrap_or(OSD_OUT)
    }
    pub fn is_out(&self, osd: i32) -> bool {
        !self.exists(osd) || self.weight(osd) == OSD_OUT
    }
    pub fn is_in(&self, osd: i32) -> bool {
        !self.is_out(osd)
    }
    pub fn pool_by_name(&self, name: &str) -> Option<i64> {
        self.pool_name.iter().find(|(_, n)| *n == name).map(|(id, _)| *id)
    }

    /// Resize every per-OSD vector (`set_max_osd`).
    pub fn set_max_osd(&mut self, m: i32) {
        let n = m.max(0) as usize;
        self.max_osd = m.max(0);
        self.osd_state.resize(n, 0);
        self.osd_weight.resize(n, OSD_OUT);
        self.osd_info.resize(n, OsdInfo::default());
        self.osd_xinfo.resize(n, OsdXinfo::default());
        self.client_addrs.resize(n, EntityAddrvec::default());
        self.cluster_addrs.resize(n, EntityAddrvec::default());
        self.hb_back_addrs.resize(n, EntityAddrvec::default());
        self.hb_front_addrs.resize(n, EntityAddrvec::default());
        self.osd_uuid.resize(n, Uuid::default());
        if let Some(a) = &mut self.osd_primary_affinity {
            a.resize(n, DEFAULT_PRIMARY_AFFINITY);
        }
    }

    /// Re-read `crush` after it changed; forget device-class flags of classes that no longer exist.
    pub(crate) fn on_crush_replaced(&mut self) {
        self.crush_map = CrushMap::decode_bytes(self.crush.clone()).ok().map(Arc::new);
        if let Some(c) = &self.crush_map {
            self.device_class_flags
                .retain(|class, _| c.class_names.contains_key(class));
        }
    }

    /// Install a new CRUSH map (for building test maps).
    pub fn set_crush(&mut self, c: CrushMap) {
        let mut e = Encoder::new(features::PACIFIC);
        c.encode(&mut e);
        self.crush = e.into_bytes();
        self.crush_map = Some(Arc::new(c));
        self.raw = None;
    }

    /// The bytes to send for this epoch: the original encoding when we have it, else a fresh one for `features`.
    pub fn encoded(&self, features: u64) -> Bytes {
        match &self.raw {
            Some(b) => b.clone(),
            None => self.to_bytes(features),
        }
    }

    fn client_version(f: u64) -> u8 {
        if !has(f, features::MASK_SERVER_LUMINOUS) {
            3
        } else if !has(f, features::MASK_SERVER_MIMIC) {
            6
        } else if !has(f, features::MASK_SERVER_NAUTILUS) {
            7
        } else {
            9
        }
    }

    fn osd_only_version(&self, f: u64) -> u8 {
        let mut v = if !has(f, features::MASK_SERVER_LUMINOUS) {
            1
        } else if !has(f, features::MASK_SERVER_MIMIC) {
            5
        } else if !has(f, features::MASK_SERVER_NAUTILUS) {
            6
        } else {
            9
        };
        if self.stretch_mode_enabled {
            v = v.max(10);
        }
        if !self.range_blocklist.is_empty() {
            v = v.max(11);
        }
        if self.allow_crimson {
            v = v.max(12);
        }
        v
    }

    fn encode_client(&self, e: &mut Encoder) {
        let f = e.features();
        let v = if self.pg_upmap_primaries.is_empty() {
            Self::client_version(f)
        } else {
            // Ceph only writes pg_upmap_primaries from v10 (Reef); keep them if we decoded some.
            CLIENT_MAX
        };
        e.versioned(v, 1, |e| {
            self.fsid.encode(e);
            e.u32(self.epoch);
            self.created.encode(e);
            self.modified.encode(e);
            self.pools.encode(e);
            self.pool_name.encode(e);
            e.i32(self.pool_max);
            if v < 4 {
                let mut fl = self.flags;
                if crate::apply::release_ge(self.require_osd_release, release::LUMINOUS) {
                    fl |= map_flag::REQUIRE_LUMINOUS | map_flag::RECOVERY_DELETES;
                } else if self.require_osd_release == release::KRAKEN {
                    fl |= map_flag::REQUIRE_KRAKEN;
                } else if self.require_osd_release == release::JEWEL {
                    fl |= map_flag::REQUIRE_JEWEL;
                }
                e.u32(fl);
            } else {
                e.u32(self.flags);
            }
            e.i32(self.max_osd);
            if v >= 5 {
                self.osd_state.encode(e);
            } else {
                e.length(self.osd_state.len());
                for s in &self.osd_state {
                    e.u8(*s as u8);
                }
            }
            self.osd_weight.encode(e);
            encode_addrvecs(&self.client_addrs, e, v < 8);
            self.pg_temp.encode(e);
            self.primary_temp.encode(e);
            match &self.osd_primary_affinity {
                Some(a) => a.encode(e),
                None => e.u32(0),
            }
            e.bytes(&self.crush);
            self.erasure_code_profiles.encode(e);
            if v >= 4 {
                self.pg_upmap.encode(e);
                self.pg_upmap_items.encode(e);
            }
            if v >= 6 {
                e.i32(self.crush_version);
            }
            if v >= 7 {
                self.new_removed_snaps.encode(e);
                self.new_purged_snaps.encode(e);
            }
            if v >= 9 {
                self.last_up_change.encode(e);
                self.last_in_change.encode(e);
            }
            if v >= 10 {
                self.pg_upmap_primaries.encode(e);
            }
        });
    }

    fn encode_osd_only(&self, e: &mut Encoder) {
        let v = self.osd_only_version(e.features());
        e.versioned(v, 1, |e| {
            encode_addrvecs(&self.hb_back_addrs, e, v < 7);
            self.osd_info.encode(e);
            self.blocklist.encode(e);
            encode_addrvecs(&self.cluster_addrs, e, v < 7);
            e.u32(self.cluster_snapshot_epoch);
            e.string(&self.cluster_snapshot);
            self.osd_uuid.encode(e);
            self.osd_xinfo.encode(e);
            encode_addrvecs(&self.hb_front_addrs, e, v < 7);
            if v >= 2 {
                e.f32(self.nearfull_ratio);
                e.f32(self.full_ratio);
                e.f32(self.backfillfull_ratio);
            }
            if v >= 5 {
                e.u8(self.require_min_compat_client);
                e.u8(self.require_osd_release);
            }
            if v >= 6 {
                self.removed_snaps_queue.encode(e);
            }
            if v >= 8 {
                self.crush_node_flags.encode(e);
            }
            if v >= 9 {
                self.device_class_flags.encode(e);
            }
            if v >= 10 {
                e.bool(self.stretch_mode_enabled);
                e.u32(self.stretch_bucket_count);
                e.u32(self.degraded_stretch_mode);
                e.u32(self.recovering_stretch_mode);
                e.i32(self.stretch_mode_bucket);
            }
            if v >= 11 {
                self.range_blocklist.encode(e);
            }
            if v >= 12 {
                e.bool(self.allow_crimson);
            }
        });
    }

    /// Encode and compute the crc; returns the bytes and the crc.
    pub fn encode_with_crc(&self, features: u64) -> (Bytes, u32) {
        encode_enveloped(
            features,
            |e| {
                self.encode_client(e);
                self.encode_osd_only(e);
            },
            |_| {},
        )
    }

    fn decode_client(&mut self, d: &mut Decoder) -> Result<()> {
        let (h, mut b) = d.start_struct("OSDMap client data", CLIENT_MAX)?;
        let v = h.version;
        self.fsid = b.decode()?;
        self.epoch = b.u32()?;
        self.created = b.decode()?;
        self.modified = b.decode()?;
        self.pools = b.decode()?;
        self.pool_name = b.decode()?;
        self.pool_max = b.i32()?;
        self.flags = b.u32()?;
        self.max_osd = b.i32()?;
        if v >= 5 {
            self.osd_state = b.decode()?;
        } else {
            self.osd_state = Vec::<u8>::decode(&mut b)?.into_iter().map(u32::from).collect();
        }
        self.osd_weight = b.decode()?;
        self.client_addrs = b.decode()?;
        self.pg_temp = b.decode()?;
        self.primary_temp = b.decode()?;
        if v >= 2 {
            let a: Vec<u32> = b.decode()?;
            self.osd_primary_affinity = (!a.is_empty()).then_some(a);
        }
        self.crush = b.bufferlist()?;
        if v >= 3 {
            self.erasure_code_profiles = b.decode()?;
        }
        if v >= 4 {
            self.pg_upmap = b.decode()?;
            self.pg_upmap_items = b.decode()?;
        }
        if v >= 6 {
            self.crush_version = b.i32()?;
        }
        if v >= 7 {
            self.new_removed_snaps = b.decode()?;
            self.new_purged_snaps = b.decode()?;
        }
        if v >= 9 {
            self.last_up_change = b.decode()?;
            self.last_in_change = b.decode()?;
        }
        if v >= 10 {
            self.pg_upmap_primaries = b.decode()?;
        }
        Ok(())
    }

    fn decode_osd_only(&mut self, d: &mut Decoder) -> Result<()> {
        let (h, mut b) = d.start_struct("OSDMap osd-only data", OSD_ONLY_MAX)?;
        let v = h.version;
        self.hb_back_addrs = b.decode()?;
        self.osd_info = b.decode()?;
        self.blocklist = b.decode()?;
        self.cluster_addrs = b.decode()?;
        self.cluster_snapshot_epoch = b.u32()?;
        self.cluster_snapshot = b.string()?;
        self.osd_uuid = b.decode()?;
        self.osd_xinfo = b.decode()?;
        self.hb_front_addrs = b.decode()?;
        if v >= 2 {
            self.nearfull_ratio = b.f32()?;
            self.full_ratio = b.f32()?;
        }
        if v >= 3 {
            self.backfillfull_ratio = b.f32()?;
        }
        if v == 4 {
            // A release name string, superseded in v5; nothing we map it to.
            let _ = b.bufferlist()?;
        }
        if v >= 5 {
            self.require_min_compat_client = b.u8()?;
            self.require_osd_release = b.u8()?;
            if crate::apply::release_ge(self.require_osd_release, release::NAUTILUS) {
                self.flags |= map_flag::PGLOG_HARDLIMIT;
            }
            if crate::apply::release_ge(self.require_osd_release, release::LUMINOUS) {
                self.flags &= !map_flag::LEGACY_REQUIRE_FLAGS;
                self.flags |= map_flag::RECOVERY_DELETES;
            }
        } else if let Some(r) = legacy_required_release(self.flags) {
            self.require_osd_release = r;
            if r == release::LUMINOUS {
                self.flags &= !map_flag::LEGACY_REQUIRE_FLAGS;
                self.flags |= map_flag::RECOVERY_DELETES;
            }
        }
        if v >= 6 {
            self.removed_snaps_queue = b.decode()?;
        }
        if v >= 8 {
            self.crush_node_flags = b.decode()?;
        }
        if v >= 9 {
            self.device_class_flags = b.decode()?;
        }
        if v >= 10 {
            self.stretch_mode_enabled = b.bool()?;
            self.stretch_bucket_count = b.u32()?;
            self.degraded_stretch_mode = b.u32()?;
            self.recovering_stretch_mode = b.u32()?;
            self.stretch_mode_bucket = b.i32()?;
        }
        if v >= 11 {
            self.range_blocklist = b.decode()?;
        }
        if v >= 12 {
            self.allow_crimson = b.bool()?;
        }
        Ok(())
    }

    fn check_vectors(&self) -> Result<()> {
        let n = self.max_osd.max(0) as usize;
        if self.max_osd < 0
            || self.osd_state.len() != n
            || self.osd_weight.len() != n
            || self.client_addrs.len() != n
        {
            return Err(DecodeError::invalid(
                "OSDMap",
                format!(
                    "max_osd {} with {} states, {} weights, {} addrs",
                    self.max_osd,
                    self.osd_state.len(),
                    self.osd_weight.len(),
                    self.client_addrs.len()
                ),
            ));
        }
        if let Some(a) = &self.osd_primary_affinity
            && a.len() != n
        {
            return Err(DecodeError::invalid("OSDMap", "primary affinity vector length"));
        }
        Ok(())
    }

    /// Pad the OSD-only vectors to `max_osd` so lookups never go out of range (a well-formed map already is).
    fn normalize(&mut self) {
        let n = self.max_osd.max(0) as usize;
        for v in [
            &mut self.hb_back_addrs,
            &mut self.cluster_addrs,
            &mut self.hb_front_addrs,
        ] {
            if v.len() < n {
                v.resize(n, EntityAddrvec::default());
            }
        }
        if self.osd_info.len() < n {
            self.osd_info.resize(n, OsdInfo::default());
        }
        if self.osd_xinfo.len() < n {
            self.osd_xinfo.resize(n, OsdXinfo::default());
        }
        if self.osd_uuid.len() < n {
            self.osd_uuid.resize(n, Uuid::default());
        }
    }
}

impl Encode for OsdMap {
    fn encode(&self, e: &mut Encoder) {
        let (b, _) = self.encode_with_crc(e.features());
        e.raw(&b);
    }
}

impl OsdMap {
    /// Decode without verifying the crc (for fuzzing and for inspecting damaged maps). The crc field is read and
    /// kept; everything else is checked as in [`Decode`].
    pub fn decode_ignoring_crc(d: &mut Decoder) -> Result<Self> {
        Self::decode_inner(d, false)
    }

    fn decode_inner(d: &mut Decoder, verify_crc: bool) -> Result<Self> {
        let (mut m, crc, raw) = decode_enveloped(
            d,
            "OSDMap",
            verify_crc,
            |w| {
                let mut m = OsdMap::default();
                m.decode_client(w)?;
                m.decode_osd_only(w)?;
                Ok(m)
            },
            |_, _| Ok(()),
        )?;
        if let Some(crc) = crc {
            m.crc = crc;
        }
        m.check_vectors()?;
        m.normalize();
        m.crush_map = CrushMap::decode_bytes(m.crush.clone()).ok().map(Arc::new);
        m.raw = Some(raw);
        Ok(m)
    }
}

impl Decode for OsdMap {
    fn decode(d: &mut Decoder) -> Result<Self> {
        Self::decode_inner(d, true)
    }
}
