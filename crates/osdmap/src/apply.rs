// SPDX-License-Identifier: LGPL-3.0-or-later
//! `OSDMap::apply_incremental`: move a full map one epoch forward, then check the result against the monitor's
//! `full_crc` the way an OSD does (a mismatch means "fetch the full map").

use bytes::Bytes;
use denc::{Decode, DecodeError};

use crate::features;
use crate::inc::{Incremental, allow_crimson};
use crate::map::{DEFAULT_PRIMARY_AFFINITY, OsdInfo, OsdMap, OsdXinfo, map_flag, release, state};
use crate::types::{EntityAddrvec, Uuid};

/// `ceph_release_t` ordering: values that are negative as `i8` (0xff = "unset") sort below everything.
pub fn release_lt(a: u8, b: u8) -> bool {
    if (a as i8) < 0 {
        true
    } else if (b as i8) < 0 {
        false
    } else {
        a < b
    }
}
pub fn release_gt(a: u8, b: u8) -> bool {
    if (a as i8) < 0 {
        false
    } else if (b as i8) < 0 {
        true
    } else {
        a > b
    }
}
pub fn release_ge(a: u8, b: u8) -> bool {
    !release_lt(a, b)
}

/// Why an incremental could not be applied.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApplyError {
    #[error("incremental for fsid {got} does not match map fsid {want}")]
    FsidMismatch { want: Uuid, got: Uuid },
    #[error("incremental epoch {got} does not follow map epoch {have}")]
    EpochGap { have: u32, got: u32 },
    #[error("embedded full map: {0}")]
    FullMap(DecodeError),
    #[error("osd.{osd} is beyond max_osd {max_osd}")]
    OsdOutOfRange { osd: i32, max_osd: i32 },
    #[error("max_osd {0} exceeds our limit {MAX_OSD}")]
    TooManyOsds(i32),
}

/// The largest `max_osd` we accept from an incremental: per-OSD vectors are sized by it, so a hostile value must
/// not allocate gigabytes. Real clusters stay far below (the biggest known run a few tens of thousands of OSDs).
pub const MAX_OSD: i32 = 1 << 17;

impl ApplyError {
    /// The errno Ceph returns for this failure.
    pub fn errno(&self) -> i32 {
        match self {
            ApplyError::FsidMismatch { .. } => -22, // EINVAL
            ApplyError::EpochGap { .. } => -22,
            ApplyError::FullMap(_) => -5, // EIO
            ApplyError::OsdOutOfRange { .. } => -22,
            ApplyError::TooManyOsds(_) => -22,
        }
    }
}

/// What applying produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CrcCheck {
    /// The re-encoded map has the monitor's `full_crc`; `OsdMap::raw` now holds those exact bytes.
    Match,
    /// The re-encoded map differs from the monitor's: fetch the full map for this epoch.
    Mismatch { expected: u32, actual: u32 },
    /// The incremental carried no crc (or replaced the whole map); nothing to compare.
    NotChecked,
}

impl OsdMap {
    fn slot(&self, osd: i32) -> Result<usize, ApplyError> {
        if osd >= 0 && osd < self.max_osd && (osd as usize) < self.osd_state.len() {
            Ok(osd as usize)
        } else {
            Err(ApplyError::OsdOutOfRange {
                osd,
                max_osd: self.max_osd,
            })
        }
    }

    /// `set_primary_affinity`: materialises the per-OSD vector on first use, as Ceph does.
    pub fn set_primary_affinity(&mut self, osd: usize, a: u32) {
        let n = self.max_osd.max(0) as usize;
        let v = self
            .osd_primary_affinity
            .get_or_insert_with(|| vec![DEFAULT_PRIMARY_AFFINITY; n]);
        if let Some(slot) = v.get_mut(osd) {
            *slot = a;
        }
    }

    /// Apply `inc` (which must be for epoch `self.epoch + 1`) and verify the result against `inc.full_crc`.
    /// On error the map may be partly updated; callers discard it and fetch a full map, as an OSD would.
    pub fn apply_incremental(&mut self, inc: &Incremental) -> Result<CrcCheck, ApplyError> {
        if inc.epoch == 1 {
            self.fsid = inc.fsid;
        } else if inc.fsid != self.fsid {
            return Err(ApplyError::FsidMismatch {
                want: self.fsid,
                got: inc.fsid,
            });
        }
        if inc.epoch != self.epoch.wrapping_add(1) {
            return Err(ApplyError::EpochGap {
                have: self.epoch,
                got: inc.epoch,
            });
        }
        if inc.new_max_osd > MAX_OSD {
            return Err(ApplyError::TooManyOsds(inc.new_max_osd));
        }
        if !inc.fullmap.is_empty() {
            *self = OsdMap::decode_all(inc.fullmap.clone()).map_err(ApplyError::FullMap)?;
            return Ok(CrcCheck::NotChecked);
        }
        self.raw = None;
        self.epoch = inc.epoch;
        self.modified = inc.modified;
        let epoch = self.epoch;

        if inc.new_flags >= 0 {
            self.flags = inc.new_flags as u32;
            if self.flags & map_flag::REQUIRE_KRAKEN != 0 {
                if release_lt(self.require_osd_release, release::KRAKEN) {
                    self.require_osd_release = release::KRAKEN;
                }
            } else if self.flags & map_flag::REQUIRE_JEWEL != 0
                && release_lt(self.require_osd_release, release::JEWEL)
            {
                self.require_osd_release = release::JEWEL;
            }
        }
        if inc.new_max_osd >= 0 {
            self.set_max_osd(inc.new_max_osd);
        }
        if inc.new_pool_max != -1 {
            self.pool_max = inc.new_pool_max as i32;
        }
        for (id, p) in &inc.new_pools {
            let mut p = p.clone();
            p.last_change = epoch;
            self.pools.insert(*id, p);
        }
        self.new_removed_snaps = inc.new_removed_snaps.clone();
        self.new_purged_snaps = inc.new_purged_snaps.clone();
        for (pool, s) in &self.new_removed_snaps {
            self.removed_snaps_queue.entry(*pool).or_default().union_of(s);
        }
        for (pool, s) in &self.new_purged_snaps {
            // Ceph asserts the pool is queued; a hostile map gets ignored instead.
            if let Some(q) = self.removed_snaps_queue.get_mut(pool) {
                q.subtract(s);
                if q.is_empty() {
                    self.removed_snaps_queue.remove(pool);
                }
            }
        }
        if !inc.new_last_up_change.is_zero() {
            self.last_up_change = inc.new_last_up_change;
        }
        if !inc.new_last_in_change.is_zero() {
            self.last_in_change = inc.new_last_in_change;
        }
        for (id, name) in &inc.new_pool_names {
            self.pool_name.insert(*id, name.clone());
        }
        for id in &inc.old_pools {
            self.pools.remove(id);
            self.pool_name.remove(id);
        }
        for (osd, w) in &inc.new_weight {
            let i = self.slot(*osd)?;
            self.osd_weight[i] = *w;
            // A non-zero weight implies the OSD exists (`set_weight`); marking in clears AUTOOUT and NEW and
            // forgets the pre-out weight.
            if *w != 0 {
                self.osd_state[i] |= state::EXISTS;
                self.osd_state[i] &= !(state::AUTOOUT | state::NEW);
                self.osd_xinfo[i].old_weight = 0;
            }
        }
        for (osd, a) in &inc.new_primary_affinity {
            let i = self.slot(*osd)?;
            self.set_primary_affinity(i, *a);
        }
        for name in &inc.old_erasure_code_profiles {
            self.erasure_code_profiles.remove(name);
        }
        for (name, prof) in &inc.new_erasure_code_profiles {
            self.erasure_code_profiles.insert(name.clone(), prof.clone());
        }
        for (osd, st) in &inc.new_state {
            let i = self.slot(*osd)?;
            let s = if *st == 0 { state::UP } else { *st };
            if self.osd_state[i] & state::UP != 0 && s & state::UP != 0 {
                self.osd_info[i].down_at = epoch;
                self.osd_xinfo[i].down_stamp = self.modified;
            }
            if self.osd_state[i] & state::EXISTS != 0 && s & state::EXISTS != 0 {
                // The OSD is destroyed: forget everything about it.
                self.osd_uuid[i] = Uuid::default();
                self.osd_info[i] = OsdInfo::default();
                self.osd_xinfo[i] = OsdXinfo::default();
                self.set_primary_affinity(i, DEFAULT_PRIMARY_AFFINITY);
                self.client_addrs[i] = EntityAddrvec::default();
                self.cluster_addrs[i] = EntityAddrvec::default();
                self.hb_front_addrs[i] = EntityAddrvec::default();
                self.hb_back_addrs[i] = EntityAddrvec::default();
                self.osd_state[i] = 0;
            } else {
                self.osd_state[i] ^= s;
            }
        }
        for (osd, addrs) in &inc.new_up_client {
            let i = self.slot(*osd)?;
            self.osd_state[i] |= state::EXISTS | state::UP;
            self.osd_state[i] &= !state::STOP;
            self.client_addrs[i] = addrs.clone();
            self.hb_back_addrs[i] = inc.new_hb_back_up.get(osd).cloned().unwrap_or_default();
            self.hb_front_addrs[i] = inc.new_hb_front_up.get(osd).cloned().unwrap_or_default();
            self.osd_info[i].up_from = epoch;
        }
        for (osd, addrs) in &inc.new_up_cluster {
            let i = self.slot(*osd)?;
            self.cluster_addrs[i] = addrs.clone();
        }
        for (osd, e) in &inc.new_up_thru {
            let i = self.slot(*osd)?;
            self.osd_info[i].up_thru = *e;
        }
        for (osd, (b, e)) in &inc.new_last_clean_interval {
            let i = self.slot(*osd)?;
            self.osd_info[i].last_clean_begin = *b;
            self.osd_info[i].last_clean_end = *e;
        }
        for (osd, e) in &inc.new_lost {
            let i = self.slot(*osd)?;
            self.osd_info[i].lost_at = *e;
        }
        for (osd, x) in &inc.new_xinfo {
            let i = self.slot(*osd)?;
            self.osd_xinfo[i] = *x;
        }
        for (osd, u) in &inc.new_uuid {
            let i = self.slot(*osd)?;
            self.osd_uuid[i] = *u;
        }
        for (pg, v) in &inc.new_pg_temp {
            if v.is_empty() {
                self.pg_temp.remove(pg);
            } else {
                self.pg_temp.insert(*pg, v.clone());
            }
        }
        for (pg, p) in &inc.new_primary_temp {
            if *p == -1 {
                self.primary_temp.remove(pg);
            } else {
                self.primary_temp.insert(*pg, *p);
            }
        }
        for (pg, v) in &inc.new_pg_upmap {
            self.pg_upmap.insert(*pg, v.clone());
        }
        for pg in &inc.old_pg_upmap {
            self.pg_upmap.remove(pg);
        }
        for (pg, v) in &inc.new_pg_upmap_items {
            self.pg_upmap_items.insert(*pg, v.clone());
        }
        for pg in &inc.old_pg_upmap_items {
            self.pg_upmap_items.remove(pg);
        }
        for (pg, p) in &inc.new_pg_upmap_primary {
            self.pg_upmap_primaries.insert(*pg, *p);
        }
        for pg in &inc.old_pg_upmap_primary {
            self.pg_upmap_primaries.remove(pg);
        }
        for (a, t) in &inc.new_blocklist {
            self.blocklist.insert(*a, *t);
        }
        for a in &inc.old_blocklist {
            self.blocklist.remove(a);
        }
        for (a, t) in &inc.new_range_blocklist {
            self.range_blocklist.insert(*a, *t);
        }
        for a in &inc.old_range_blocklist {
            self.range_blocklist.remove(a);
        }
        for (k, v) in &inc.new_crush_node_flags {
            if *v != 0 {
                self.crush_node_flags.insert(*k, *v);
            } else {
                self.crush_node_flags.remove(k);
            }
        }
        for (k, v) in &inc.new_device_class_flags {
            if *v != 0 {
                self.device_class_flags.insert(*k, *v);
            } else {
                self.device_class_flags.remove(k);
            }
        }
        if !inc.cluster_snapshot.is_empty() {
            self.cluster_snapshot = inc.cluster_snapshot.clone();
            self.cluster_snapshot_epoch = inc.epoch;
        } else {
            self.cluster_snapshot.clear();
            self.cluster_snapshot_epoch = 0;
        }
        if inc.new_nearfull_ratio >= 0.0 {
            self.nearfull_ratio = inc.new_nearfull_ratio;
        }
        if inc.new_backfillfull_ratio >= 0.0 {
            self.backfillfull_ratio = inc.new_backfillfull_ratio;
        }
        if inc.new_full_ratio >= 0.0 {
            self.full_ratio = inc.new_full_ratio;
        }
        if release_gt(inc.new_require_min_compat_client, release::UNKNOWN) {
            self.require_min_compat_client = inc.new_require_min_compat_client;
        }
        if release_ge(inc.new_require_osd_release, release::UNKNOWN) {
            self.require_osd_release = inc.new_require_osd_release;
            if release_ge(self.require_osd_release, release::LUMINOUS) {
                self.flags &= !map_flag::LEGACY_REQUIRE_FLAGS;
                self.flags |= map_flag::RECOVERY_DELETES;
            }
            if release_ge(self.require_osd_release, release::NAUTILUS) {
                self.flags |= map_flag::PGLOG_HARDLIMIT;
            }
        }
        // The new CRUSH map goes last, after the up/down changes.
        if !inc.crush.is_empty() {
            self.crush = inc.crush.clone();
            if release_ge(self.require_osd_release, release::LUMINOUS) {
                self.crush_version = self.crush_version.wrapping_add(1);
            }
            self.on_crush_replaced();
        }
        if inc.change_stretch_mode {
            self.stretch_mode_enabled = inc.stretch_mode_enabled;
            self.stretch_bucket_count = inc.new_stretch_bucket_count;
            self.degraded_stretch_mode = inc.new_degraded_stretch_mode;
            self.recovering_stretch_mode = inc.new_recovering_stretch_mode;
            self.stretch_mode_bucket = inc.new_stretch_mode_bucket;
        }
        match inc.mutate_allow_crimson {
            allow_crimson::SET => self.allow_crimson = true,
            allow_crimson::CLEAR => self.allow_crimson = false,
            _ => {}
        }

        if !inc.have_crc {
            return Ok(CrcCheck::NotChecked);
        }
        let (bytes, actual) = self.encode_with_crc(inc.encode_features | features::RESERVED);
        self.crc = actual;
        if actual == inc.full_crc {
            self.raw = Some(bytes);
            Ok(CrcCheck::Match)
        } else {
            Ok(CrcCheck::Mismatch {
                expected: inc.full_crc,
                actual,
            })
        }
    }

    /// Install a full map received for the next epoch, keeping its bytes.
    pub fn replace_with(&mut self, raw: Bytes) -> Result<(), DecodeError> {
        *self = OsdMap::decode_all(raw)?;
        Ok(())
    }
}
