// SPDX-License-Identifier: LGPL-3.0-or-later
//! `OSDMap::Incremental`: the change from one epoch to the next. Wrapper 8/7 with a client block, an OSD-only
//! block, then `inc_crc` (over everything else) and `full_crc` (the crc of the resulting full map).

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use denc::{Decode, Decoder, Encode, Encoder, Result};

use crate::features::{self, has};
use crate::map::{OsdXinfo, decode_enveloped, encode_enveloped, legacy_required_release, map_flag, release};
use crate::pool::PgPool;
use crate::types::{EntityAddr, EntityAddrvec, IntervalSet, PgId, Utime, Uuid};

/// `mutate_allow_crimson_t` (Tentacle).
pub mod allow_crimson {
    pub const NONE: u8 = 0;
    pub const SET: u8 = 1;
    pub const CLEAR: u8 = 2;
}

#[derive(Debug, Clone, PartialEq)]
pub struct Incremental {
    pub fsid: Uuid,
    pub epoch: u32,
    pub modified: Utime,
    pub new_pool_max: i64,
    pub new_flags: i32,
    /// A whole map that replaces the current one, when non-empty.
    pub fullmap: Bytes,
    /// A new CRUSH map, when non-empty.
    pub crush: Bytes,
    pub new_max_osd: i32,
    pub new_pools: BTreeMap<i64, PgPool>,
    pub new_pool_names: BTreeMap<i64, String>,
    pub old_pools: BTreeSet<i64>,
    pub new_up_client: BTreeMap<i32, EntityAddrvec>,
    /// XORed into the OSD state; 0 means "toggle UP" (legacy).
    pub new_state: BTreeMap<i32, u32>,
    pub new_weight: BTreeMap<i32, u32>,
    /// An empty vector removes the entry.
    pub new_pg_temp: BTreeMap<PgId, Vec<i32>>,
    /// -1 removes the entry.
    pub new_primary_temp: BTreeMap<PgId, i32>,
    pub new_primary_affinity: BTreeMap<i32, u32>,
    pub new_erasure_code_profiles: BTreeMap<String, BTreeMap<String, String>>,
    pub old_erasure_code_profiles: Vec<String>,
    pub new_pg_upmap: BTreeMap<PgId, Vec<i32>>,
    pub old_pg_upmap: BTreeSet<PgId>,
    pub new_pg_upmap_items: BTreeMap<PgId, Vec<(i32, i32)>>,
    pub old_pg_upmap_items: BTreeSet<PgId>,
    pub new_removed_snaps: BTreeMap<i64, IntervalSet>,
    pub new_purged_snaps: BTreeMap<i64, IntervalSet>,
    pub new_last_up_change: Utime,
    pub new_last_in_change: Utime,
    /// Reef and later (client block v9).
    pub new_pg_upmap_primary: BTreeMap<PgId, i32>,
    pub old_pg_upmap_primary: BTreeSet<PgId>,
    // OSD-only part.
    pub new_hb_back_up: BTreeMap<i32, EntityAddrvec>,
    pub new_up_thru: BTreeMap<i32, u32>,
    pub new_last_clean_interval: BTreeMap<i32, (u32, u32)>,
    pub new_lost: BTreeMap<i32, u32>,
    pub new_blocklist: BTreeMap<EntityAddr, Utime>,
    pub old_blocklist: Vec<EntityAddr>,
    pub new_up_cluster: BTreeMap<i32, EntityAddrvec>,
    pub cluster_snapshot: String,
    pub new_uuid: BTreeMap<i32, Uuid>,
    pub new_xinfo: BTreeMap<i32, OsdXinfo>,
    pub new_hb_front_up: BTreeMap<i32, EntityAddrvec>,
    /// The features the monitor encoded this incremental (and the resulting full map) with.
    pub encode_features: u64,
    pub new_nearfull_ratio: f32,
    pub new_full_ratio: f32,
    pub new_backfillfull_ratio: f32,
    pub new_require_min_compat_client: u8,
    pub new_require_osd_release: u8,
    pub new_crush_node_flags: BTreeMap<i32, u32>,
    pub new_device_class_flags: BTreeMap<i32, u32>,
    pub change_stretch_mode: bool,
    pub new_stretch_bucket_count: u32,
    pub new_degraded_stretch_mode: u32,
    pub new_recovering_stretch_mode: u32,
    pub new_stretch_mode_bucket: i32,
    pub stretch_mode_enabled: bool,
    pub new_range_blocklist: BTreeMap<EntityAddr, Utime>,
    pub old_range_blocklist: Vec<EntityAddr>,
    pub mutate_allow_crimson: u8,
    pub inc_crc: u32,
    /// The crc the full map must have after this incremental is applied.
    pub full_crc: u32,
    /// Whether the encoding carried crcs (wrapper v8+).
    pub have_crc: bool,
    /// The exact bytes this incremental was decoded from.
    pub raw: Option<Bytes>,
}

impl Default for Incremental {
    fn default() -> Self {
        Incremental {
            fsid: Uuid::default(),
            epoch: 0,
            modified: Utime::default(),
            new_pool_max: -1,
            new_flags: -1,
            fullmap: Bytes::new(),
            crush: Bytes::new(),
            new_max_osd: -1,
            new_pools: BTreeMap::new(),
            new_pool_names: BTreeMap::new(),
            old_pools: BTreeSet::new(),
            new_up_client: BTreeMap::new(),
            new_state: BTreeMap::new(),
            new_weight: BTreeMap::new(),
            new_pg_temp: BTreeMap::new(),
            new_primary_temp: BTreeMap::new(),
            new_primary_affinity: BTreeMap::new(),
            new_erasure_code_profiles: BTreeMap::new(),
            old_erasure_code_profiles: Vec::new(),
            new_pg_upmap: BTreeMap::new(),
            old_pg_upmap: BTreeSet::new(),
            new_pg_upmap_items: BTreeMap::new(),
            old_pg_upmap_items: BTreeSet::new(),
            new_removed_snaps: BTreeMap::new(),
            new_purged_snaps: BTreeMap::new(),
            new_last_up_change: Utime::default(),
            new_last_in_change: Utime::default(),
            new_pg_upmap_primary: BTreeMap::new(),
            old_pg_upmap_primary: BTreeSet::new(),
            new_hb_back_up: BTreeMap::new(),
            new_up_thru: BTreeMap::new(),
            new_last_clean_interval: BTreeMap::new(),
            new_lost: BTreeMap::new(),
            new_blocklist: BTreeMap::new(),
            old_blocklist: Vec::new(),
            new_up_cluster: BTreeMap::new(),
            cluster_snapshot: String::new(),
            new_uuid: BTreeMap::new(),
            new_xinfo: BTreeMap::new(),
            new_hb_front_up: BTreeMap::new(),
            encode_features: 0,
            new_nearfull_ratio: -1.0,
            new_full_ratio: -1.0,
            new_backfillfull_ratio: -1.0,
            new_require_min_compat_client: release::UNKNOWN,
            new_require_osd_release: release::UNKNOWN,
            new_crush_node_flags: BTreeMap::new(),
            new_device_class_flags: BTreeMap::new(),
            change_stretch_mode: false,
            new_stretch_bucket_count: 0,
            new_degraded_stretch_mode: 0,
            new_recovering_stretch_mode: 0,
            new_stretch_mode_bucket: 0,
            stretch_mode_enabled: false,
            new_range_blocklist: BTreeMap::new(),
            old_range_blocklist: Vec::new(),
            mutate_allow_crimson: allow_crimson::NONE,
            inc_crc: 0,
            full_crc: 0,
            have_crc: false,
            raw: None,
        }
    }
}

const CLIENT_MAX: u8 = 9;
const OSD_ONLY_MAX: u8 = 12;

/// Encode `map<int32, addrvec>` as `map<int32, entity_addr_t>` for peers that predate addrvecs.
fn encode_addrvec_map(m: &BTreeMap<i32, EntityAddrvec>, e: &mut Encoder, as_addr: bool) {
    if as_addr {
        e.length(m.len());
        for (k, v) in m {
            e.i32(*k);
            v.legacy_addr().encode(e);
        }
    } else {
        m.encode(e);
    }
}

impl Incremental {
    pub fn new(epoch: u32) -> Self {
        Incremental {
            epoch,
            ..Incremental::default()
        }
    }

    fn client_version(&self, f: u64) -> u8 {
        if !self.new_pg_upmap_primary.is_empty() || !self.old_pg_upmap_primary.is_empty() {
            return CLIENT_MAX;
        }
        if !has(f, features::MASK_SERVER_LUMINOUS) {
            3
        } else if !has(f, features::MASK_SERVER_MIMIC) {
            5
        } else if !has(f, features::MASK_SERVER_NAUTILUS) {
            6
        } else {
            8
        }
    }

    fn osd_only_version(&self, f: u64) -> u8 {
        let mut v = if !has(f, features::MASK_SERVER_LUMINOUS) {
            2
        } else if !has(f, features::MASK_SERVER_NAUTILUS) {
            6
        } else {
            9
        };
        if self.change_stretch_mode {
            v = v.max(10);
        }
        if !self.new_range_blocklist.is_empty() || !self.old_range_blocklist.is_empty() {
            v = v.max(11);
        }
        if self.mutate_allow_crimson != allow_crimson::NONE {
            v = v.max(12);
        }
        v
    }

    fn encode_client(&self, e: &mut Encoder) {
        let v = self.client_version(e.features());
        e.versioned(v, 1, |e| {
            self.fsid.encode(e);
            e.u32(self.epoch);
            self.modified.encode(e);
            e.i64(self.new_pool_max);
            e.i32(self.new_flags);
            e.bytes(&self.fullmap);
            e.bytes(&self.crush);
            e.i32(self.new_max_osd);
            self.new_pools.encode(e);
            self.new_pool_names.encode(e);
            self.old_pools.encode(e);
            encode_addrvec_map(&self.new_up_client, e, v < 7);
            if v >= 5 {
                self.new_state.encode(e);
            } else {
                // Legacy u8 states: skip entries whose bits do not fit, as Ceph does.
                let legacy: BTreeMap<i32, u8> = self
                    .new_state
                    .iter()
                    .filter(|(_, s)| **s == 0 || (**s as u8) != 0)
                    .map(|(k, s)| (*k, *s as u8))
                    .collect();
                legacy.encode(e);
            }
            self.new_weight.encode(e);
            self.new_pg_temp.encode(e);
            self.new_primary_temp.encode(e);
            self.new_primary_affinity.encode(e);
            self.new_erasure_code_profiles.encode(e);
            self.old_erasure_code_profiles.encode(e);
            if v >= 4 {
                self.new_pg_upmap.encode(e);
                self.old_pg_upmap.encode(e);
                self.new_pg_upmap_items.encode(e);
                self.old_pg_upmap_items.encode(e);
            }
            if v >= 6 {
                self.new_removed_snaps.encode(e);
                self.new_purged_snaps.encode(e);
            }
            if v >= 8 {
                self.new_last_up_change.encode(e);
                self.new_last_in_change.encode(e);
            }
            if v >= 9 {
                self.new_pg_upmap_primary.encode(e);
                self.old_pg_upmap_primary.encode(e);
            }
        });
    }

    fn encode_osd_only(&self, e: &mut Encoder) {
        let v = self.osd_only_version(e.features());
        e.versioned(v, 1, |e| {
            encode_addrvec_map(&self.new_hb_back_up, e, v < 7);
            self.new_up_thru.encode(e);
            self.new_last_clean_interval.encode(e);
            self.new_lost.encode(e);
            self.new_blocklist.encode(e);
            self.old_blocklist.encode(e);
            encode_addrvec_map(&self.new_up_cluster, e, v < 7);
            e.string(&self.cluster_snapshot);
            self.new_uuid.encode(e);
            self.new_xinfo.encode(e);
            encode_addrvec_map(&self.new_hb_front_up, e, v < 7);
            // The features argument, not the member: this records what the map was encoded for.
            e.u64(e.features());
            if v >= 3 {
                e.f32(self.new_nearfull_ratio);
                e.f32(self.new_full_ratio);
                e.f32(self.new_backfillfull_ratio);
            }
            if v >= 6 {
                e.u8(self.new_require_min_compat_client);
                e.u8(self.new_require_osd_release);
            }
            if v >= 8 {
                self.new_crush_node_flags.encode(e);
            }
            if v >= 9 {
                self.new_device_class_flags.encode(e);
            }
            if v >= 10 {
                e.bool(self.change_stretch_mode);
                e.u32(self.new_stretch_bucket_count);
                e.u32(self.new_degraded_stretch_mode);
                e.u32(self.new_recovering_stretch_mode);
                e.i32(self.new_stretch_mode_bucket);
                e.bool(self.stretch_mode_enabled);
            }
            if v >= 11 {
                self.new_range_blocklist.encode(e);
                self.old_range_blocklist.encode(e);
            }
            if v >= 12 {
                e.u8(self.mutate_allow_crimson);
            }
        });
    }

    /// Encode for a peer with `features`; returns the bytes and the computed `inc_crc`.
    pub fn encode_with_crc(&self, features: u64) -> (Bytes, u32) {
        encode_enveloped(
            features,
            |e| {
                self.encode_client(e);
                self.encode_osd_only(e);
            },
            |e| e.u32(self.full_crc),
        )
    }

    fn decode_client(&mut self, d: &mut Decoder) -> Result<()> {
        let (h, mut b) = d.start_struct("OSDMap::Incremental client data", CLIENT_MAX)?;
        let v = h.version;
        self.fsid = b.decode()?;
        self.epoch = b.u32()?;
        self.modified = b.decode()?;
        self.new_pool_max = b.i64()?;
        self.new_flags = b.i32()?;
        self.fullmap = b.bufferlist()?;
        self.crush = b.bufferlist()?;
        self.new_max_osd = b.i32()?;
        self.new_pools = b.decode()?;
        self.new_pool_names = b.decode()?;
        self.old_pools = b.decode()?;
        self.new_up_client = b.decode()?;
        if v >= 5 {
            self.new_state = b.decode()?;
        } else {
            let legacy: BTreeMap<i32, u8> = b.decode()?;
            self.new_state = legacy.into_iter().map(|(k, s)| (k, u32::from(s))).collect();
        }
        self.new_weight = b.decode()?;
        self.new_pg_temp = b.decode()?;
        self.new_primary_temp = b.decode()?;
        if v >= 2 {
            self.new_primary_affinity = b.decode()?;
        }
        if v >= 3 {
            self.new_erasure_code_profiles = b.decode()?;
            self.old_erasure_code_profiles = b.decode()?;
        }
        if v >= 4 {
            self.new_pg_upmap = b.decode()?;
            self.old_pg_upmap = b.decode()?;
            self.new_pg_upmap_items = b.decode()?;
            self.old_pg_upmap_items = b.decode()?;
        }
        if v >= 6 {
            self.new_removed_snaps = b.decode()?;
            self.new_purged_snaps = b.decode()?;
        }
        if v >= 8 {
            self.new_last_up_change = b.decode()?;
            self.new_last_in_change = b.decode()?;
        }
        if v >= 9 {
            self.new_pg_upmap_primary = b.decode()?;
            self.old_pg_upmap_primary = b.decode()?;
        }
        Ok(())
    }

    fn decode_osd_only(&mut self, d: &mut Decoder) -> Result<()> {
        let (h, mut b) = d.start_struct("OSDMap::Incremental osd-only data", OSD_ONLY_MAX)?;
        let v = h.version;
        self.new_hb_back_up = b.decode()?;
        self.new_up_thru = b.decode()?;
        self.new_last_clean_interval = b.decode()?;
        self.new_lost = b.decode()?;
        self.new_blocklist = b.decode()?;
        self.old_blocklist = b.decode()?;
        self.new_up_cluster = b.decode()?;
        self.cluster_snapshot = b.string()?;
        self.new_uuid = b.decode()?;
        self.new_xinfo = b.decode()?;
        self.new_hb_front_up = b.decode()?;
        self.encode_features = if v >= 2 {
            b.u64()?
        } else {
            features::PGID64 | features::OSDMAP_ENC
        };
        if v >= 3 {
            self.new_nearfull_ratio = b.f32()?;
            self.new_full_ratio = b.f32()?;
        }
        if v >= 4 {
            self.new_backfillfull_ratio = b.f32()?;
        }
        if v == 5 {
            let _ = b.bufferlist()?;
        }
        if v >= 6 {
            self.new_require_min_compat_client = b.u8()?;
            self.new_require_osd_release = b.u8()?;
        } else if self.new_flags >= 0 {
            let fl = self.new_flags as u32;
            if let Some(r) = legacy_required_release(fl) {
                self.new_require_osd_release = r;
                if r == release::LUMINOUS {
                    self.new_flags = (fl & !map_flag::LEGACY_REQUIRE_FLAGS) as i32;
                }
            }
        }
        if v >= 8 {
            self.new_crush_node_flags = b.decode()?;
        }
        if v >= 9 {
            self.new_device_class_flags = b.decode()?;
        }
        if v >= 10 {
            self.change_stretch_mode = b.bool()?;
            self.new_stretch_bucket_count = b.u32()?;
            self.new_degraded_stretch_mode = b.u32()?;
            self.new_recovering_stretch_mode = b.u32()?;
            self.new_stretch_mode_bucket = b.i32()?;
            self.stretch_mode_enabled = b.bool()?;
        }
        if v >= 11 {
            self.new_range_blocklist = b.decode()?;
            self.old_range_blocklist = b.decode()?;
        }
        if v >= 12 {
            self.mutate_allow_crimson = b.u8()?;
        }
        Ok(())
    }
}

impl Encode for Incremental {
    fn encode(&self, e: &mut Encoder) {
        let (b, _) = self.encode_with_crc(e.features());
        e.raw(&b);
    }
}

impl Incremental {
    /// Decode without verifying `inc_crc` (for fuzzing and for inspecting damaged incrementals).
    pub fn decode_ignoring_crc(d: &mut Decoder) -> Result<Self> {
        Self::decode_inner(d, false)
    }

    fn decode_inner(d: &mut Decoder, verify_crc: bool) -> Result<Self> {
        let (mut inc, crc, raw) = decode_enveloped(
            d,
            "OSDMap::Incremental",
            verify_crc,
            |w| {
                let mut inc = Incremental::default();
                inc.decode_client(w)?;
                inc.decode_osd_only(w)?;
                Ok(inc)
            },
            |w, inc| {
                inc.full_crc = w.u32()?;
                Ok(())
            },
        )?;
        if let Some(crc) = crc {
            inc.inc_crc = crc;
            inc.have_crc = true;
        }
        inc.raw = Some(raw);
        Ok(inc)
    }
}

impl Decode for Incremental {
    fn decode(d: &mut Decoder) -> Result<Self> {
        Self::decode_inner(d, true)
    }
}
