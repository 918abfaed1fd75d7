// SPDX-License-Identifier: LGPL-3.0-or-later
//! Object → PG → OSDs, step for step as `OSDMap::_pg_to_up_acting_osds`: CRUSH, upmaps, down/nonexistent OSDs,
//! primary affinity, then pg_temp/primary_temp.

use crush::hash::{CRUSH_HASH_RJENKINS1, ceph_str_hash, crush_hash32_2};
use denc::ObjectLocator;

use crate::CRUSH_ITEM_NONE;
use crate::map::{DEFAULT_PRIMARY_AFFINITY, OsdMap};
use crate::pool::{PgPool, ceph_stable_mod, flag};
use crate::types::PgId;

/// Why a placement question has no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    #[error("pool {0} does not exist")]
    NoPool(i64),
    #[error("the map's CRUSH map could not be decoded")]
    NoCrush,
}

impl PlacementError {
    /// The errno Ceph answers with.
    pub fn errno(&self) -> i32 {
        match self {
            PlacementError::NoPool(_) => -2, // ENOENT
            PlacementError::NoCrush => -22,  // EINVAL
        }
    }
}

/// The OSDs serving a PG.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpActing {
    pub up: Vec<i32>,
    pub up_primary: i32,
    pub acting: Vec<i32>,
    pub acting_primary: i32,
}

impl PgPool {
    /// `hash_key`: the object's placement hash; the namespace, when set, is prefixed with a 0x1f separator.
    pub fn hash_key(&self, key: &[u8], ns: &[u8]) -> u32 {
        // Ceph returns -1 for an unknown hash type.
        let h = |b: &[u8]| ceph_str_hash(self.object_hash, b).unwrap_or(u32::MAX);
        if ns.is_empty() {
            return h(key);
        }
        let mut buf = Vec::with_capacity(ns.len() + 1 + key.len());
        buf.extend_from_slice(ns);
        buf.push(0x1f);
        buf.extend_from_slice(key);
        h(&buf)
    }

    /// `raw_pg_to_pps`: the CRUSH input for a PG, mixing in the pool id so pools do not overlap.
    pub fn raw_pg_to_pps(&self, pg: PgId) -> u32 {
        let ps = ceph_stable_mod(pg.seed, self.pgp_num, self.pgp_num_mask);
        if self.flags & flag::HASHPSPOOL != 0 {
            crush_hash32_2(CRUSH_HASH_RJENKINS1, ps, pg.pool as u32)
        } else {
            // Legacy: pools overlap (0.5 == 1.4 == ...).
            ps.wrapping_add(pg.pool as u32)
        }
    }
}

impl OsdMap {
    pub fn pool(&self, id: i64) -> Option<&PgPool> {
        self.pools.get(&id)
    }

    /// `map_to_pg`: hash an object name (or its locator key) within a namespace into a raw PG of `pool`.
    pub fn map_to_pg(
        &self,
        pool: i64,
        name: &[u8],
        key: &[u8],
        nspace: &[u8],
    ) -> Result<PgId, PlacementError> {
        let p = self.pool(pool).ok_or(PlacementError::NoPool(pool))?;
        let ps = if key.is_empty() {
            p.hash_key(name, nspace)
        } else {
            p.hash_key(key, nspace)
        };
        Ok(PgId::new(pool as u64, ps))
    }

    /// `object_locator_to_pg`: the raw PG (full 32-bit seed) of an object. An explicit locator hash wins.
    pub fn object_locator_to_pg(&self, oid: &[u8], loc: &ObjectLocator) -> Result<PgId, PlacementError> {
        if loc.hash >= 0 {
            if self.pool(loc.pool).is_none() {
                return Err(PlacementError::NoPool(loc.pool));
            }
            return Ok(PgId::new(loc.pool as u64, loc.hash as u32));
        }
        self.map_to_pg(loc.pool, oid, &loc.key, &loc.nspace)
    }

    /// Fold a raw PG into its pool's pg_num (the PG that actually stores the object).
    pub fn raw_pg_to_pg(&self, pg: PgId) -> Result<PgId, PlacementError> {
        let p = self
            .pool(pg.pool as i64)
            .ok_or(PlacementError::NoPool(pg.pool as i64))?;
        Ok(p.raw_pg_to_pg(pg))
    }

    fn remove_nonexistent_osds(&self, pool: &PgPool, osds: &mut Vec<i32>) {
        if pool.can_shift_osds() {
            osds.retain(|o| self.exists(*o));
        } else {
            for o in osds.iter_mut() {
                if !self.exists(*o) {
                    *o = CRUSH_ITEM_NONE;
                }
            }
        }
    }

    /// `_pg_to_raw_osds`: what CRUSH says, minus OSDs that do not exist. Returns the OSDs and the pps.
    fn pg_to_raw_osds_inner(&self, pool: &PgPool, pg: PgId) -> Result<(Vec<i32>, u32), PlacementError> {
        let crush = self.crush_map.as_deref().ok_or(PlacementError::NoCrush)?;
        let pps = pool.raw_pg_to_pps(pg);
        let size = i32::from(pool.size);
        let mut osds = match crush.find_rule(i32::from(pool.crush_rule), i32::from(pool.type_), size) {
            Some(rule) => crush.do_rule(
                rule,
                pps,
                usize::from(pool.size),
                &self.osd_weight,
                Some(pg.pool as i64),
            ),
            None => Vec::new(),
        };
        self.remove_nonexistent_osds(pool, &mut osds);
        Ok((osds, pps))
    }

    fn pick_primary(osds: &[i32]) -> i32 {
        osds.iter().copied().find(|o| *o != CRUSH_ITEM_NONE).unwrap_or(-1)
    }

    fn target_out(&self, osd: i32) -> bool {
        osd != CRUSH_ITEM_NONE && osd >= 0 && osd < self.max_osd && self.weight(osd) == 0
    }

    /// `_apply_upmap`: explicit remaps, ignored where their target is marked out.
    fn apply_upmap(&self, pool: &PgPool, raw_pg: PgId, raw: &mut Vec<i32>) {
        let pg = pool.raw_pg_to_pg(raw_pg);
        if let Some(targets) = self.pg_upmap.get(&pg)
            && !targets.iter().any(|o| self.target_out(*o))
        {
            raw.clone_from(targets);
        }
        if let Some(items) = self.pg_upmap_items.get(&pg) {
            // One pass per pair; a swap [[1,2],[2,1]] is not possible by design.
            for &(from, to) in items {
                let mut exists = false;
                let mut pos = None;
                for (i, &osd) in raw.iter().enumerate() {
                    if osd == to {
                        exists = true;
                        break;
                    }
                    if osd == from && pos.is_none() && !self.target_out(to) {
                        pos = Some(i);
                    }
                }
                if let (false, Some(i)) = (exists, pos) {
                    raw[i] = to;
                }
            }
        }
        // Reef's pg_upmap_primaries: only present in maps from newer monitors.
        if let Some(&prim) = self.pg_upmap_primaries.get(&pg)
            && prim != CRUSH_ITEM_NONE
            && prim >= 0
            && prim < self.max_osd
            && self.weight(prim) != 0
            && let Some(i) = raw.iter().skip(1).position(|o| *o == prim).map(|i| i + 1)
        {
            raw[i] = raw[0];
            raw[0] = prim;
        }
    }

    /// `_raw_to_up_osds`: drop down or nonexistent OSDs (replicated pools shift, EC pools keep holes).
    fn raw_to_up_osds(&self, pool: &PgPool, raw: &[i32]) -> Vec<i32> {
        if pool.can_shift_osds() {
            raw.iter()
                .copied()
                .filter(|o| self.exists(*o) && self.is_up(*o))
                .collect()
        } else {
            raw.iter()
                .map(|o| {
                    if self.exists(*o) && self.is_up(*o) {
                        *o
                    } else {
                        CRUSH_ITEM_NONE
                    }
                })
                .collect()
        }
    }

    /// `_apply_primary_affinity`: OSDs with affinity below 1 decline primaryship for a hashed share of PGs.
    fn apply_primary_affinity(&self, seed: u32, pool: &PgPool, osds: &mut [i32], primary: &mut i32) {
        let Some(aff) = &self.osd_primary_affinity else {
            return;
        };
        let affinity = |o: i32| -> u32 {
            usize::try_from(o)
                .ok()
                .and_then(|i| aff.get(i))
                .copied()
                .unwrap_or(DEFAULT_PRIMARY_AFFINITY)
        };
        if !osds
            .iter()
            .any(|o| *o != CRUSH_ITEM_NONE && affinity(*o) != DEFAULT_PRIMARY_AFFINITY)
        {
            return;
        }
        let mut pos: Option<usize> = None;
        for (i, &o) in osds.iter().enumerate() {
            if o == CRUSH_ITEM_NONE {
                continue;
            }
            let a = affinity(o);
            if a < DEFAULT_PRIMARY_AFFINITY
                && (crush_hash32_2(CRUSH_HASH_RJENKINS1, seed, o as u32) >> 16) >= a
            {
                // Declined; remember it as a fallback in case nobody accepts.
                if pos.is_none() {
                    pos = Some(i);
                }
            } else {
                pos = Some(i);
                break;
            }
        }
        let Some(pos) = pos else { return };
        *primary = osds[pos];
        if pool.can_shift_osds() && pos > 0 {
            osds[..=pos].rotate_right(1);
        }
    }

    /// `_get_temp_osds`: the pg_temp override (down OSDs dropped or holed) and its primary.
    fn get_temp_osds(&self, pool: &PgPool, raw_pg: PgId) -> (Vec<i32>, i32) {
        let pg = pool.raw_pg_to_pg(raw_pg);
        let mut temp = Vec::new();
        if let Some(v) = self.pg_temp.get(&pg) {
            for &o in v {
                if !self.exists(o) || self.is_down(o) {
                    if !pool.can_shift_osds() {
                        temp.push(CRUSH_ITEM_NONE);
                    }
                } else {
                    temp.push(o);
                }
            }
        }
        let primary = match self.primary_temp.get(&pg) {
            Some(p) => *p,
            None => Self::pick_primary(&temp),
        };
        (temp, primary)
    }

    /// `pg_to_raw_osds`: CRUSH's answer for a PG and its first OSD.
    pub fn pg_to_raw_osds(&self, pg: PgId) -> Result<(Vec<i32>, i32), PlacementError> {
        let pool = self
            .pool(pg.pool as i64)
            .ok_or(PlacementError::NoPool(pg.pool as i64))?;
        let (raw, _) = self.pg_to_raw_osds_inner(pool, pg)?;
        let p = Self::pick_primary(&raw);
        Ok((raw, p))
    }

    /// `pg_to_raw_upmap`: CRUSH's answer and the same after upmaps.
    pub fn pg_to_raw_upmap(&self, pg: PgId) -> Result<(Vec<i32>, Vec<i32>), PlacementError> {
        let pool = self
            .pool(pg.pool as i64)
            .ok_or(PlacementError::NoPool(pg.pool as i64))?;
        let (raw, _) = self.pg_to_raw_osds_inner(pool, pg)?;
        let mut up = raw.clone();
        self.apply_upmap(pool, pg, &mut up);
        Ok((raw, up))
    }

    /// `pg_to_up_acting_osds`: the up set (CRUSH + upmaps + liveness + primary affinity) and the acting set
    /// (pg_temp/primary_temp when present, else up). `pg` may be a raw PG (any seed); it is folded as Ceph does.
    pub fn pg_to_up_acting_osds(&self, pg: PgId) -> Result<UpActing, PlacementError> {
        let pool = self
            .pool(pg.pool as i64)
            .ok_or(PlacementError::NoPool(pg.pool as i64))?;
        let (mut acting, mut acting_primary) = self.get_temp_osds(pool, pg);
        let (mut raw, pps) = self.pg_to_raw_osds_inner(pool, pg)?;
        self.apply_upmap(pool, pg, &mut raw);
        let mut up = self.raw_to_up_osds(pool, &raw);
        let mut up_primary = Self::pick_primary(&up);
        self.apply_primary_affinity(pps, pool, &mut up, &mut up_primary);
        if acting.is_empty() {
            acting = up.clone();
            if acting_primary == -1 {
                acting_primary = up_primary;
            }
        }
        Ok(UpActing {
            up,
            up_primary,
            acting,
            acting_primary,
        })
    }

    /// Object name + locator straight to its (folded) PG and OSDs.
    pub fn object_to_up_acting(
        &self,
        oid: &[u8],
        loc: &ObjectLocator,
    ) -> Result<(PgId, UpActing), PlacementError> {
        let raw = self.object_locator_to_pg(oid, loc)?;
        let ua = self.pg_to_up_acting_osds(raw)?;
        Ok((self.raw_pg_to_pg(raw)?, ua))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::TYPE_REPLICATED;

    fn pool16() -> PgPool {
        let mut p = PgPool {
            type_: TYPE_REPLICATED,
            size: 3,
            object_hash: crush::hash::CEPH_STR_HASH_RJENKINS,
            flags: flag::HASHPSPOOL,
            ..PgPool::default()
        };
        p.set_pg_num(16);
        p.set_pgp_num(16);
        p
    }

    /// Vectors checked against `ceph osd map` on a 16-PG pool 2 (shared/reference/ceph-wire-map.md 5.3).
    #[test]
    fn object_hash_and_fold() {
        let p = pool16();
        for (name, hash, ps) in [
            ("obj1", 0x6cf8_deffu32, 0xf),
            ("foo", 0x7fc1_f406, 0x6),
            ("rbd_header.abc", 0x913a_bdc2, 0x2),
        ] {
            let h = p.hash_key(name.as_bytes(), b"");
            assert_eq!(h, hash, "{name}");
            assert_eq!(p.raw_pg_to_pg(PgId::new(2, h)).seed, ps, "{name}");
        }
        assert_eq!(p.raw_pg_to_pps(PgId::new(2, 0x6cf8_deff)), 3_857_594_580);
        assert_eq!(p.raw_pg_to_pps(PgId::new(2, 0x7fc1_f406)), 938_945_696);
        // A namespace is hashed as "ns\x1fkey".
        assert_eq!(p.hash_key(b"obj1", b"ns"), p.hash_key(b"ns\x1fobj1", b""));
        assert_ne!(p.hash_key(b"obj1", b"ns"), p.hash_key(b"obj1", b""));
    }

    #[test]
    fn locator_rules() {
        let mut m = OsdMap::default();
        m.pools.insert(2, pool16());
        // An explicit hash wins over the name; a locator key replaces the name.
        let loc = ObjectLocator {
            pool: 2,
            hash: 5,
            ..ObjectLocator::default()
        };
        assert_eq!(m.object_locator_to_pg(b"whatever", &loc), Ok(PgId::new(2, 5)));
        let loc = ObjectLocator {
            pool: 2,
            key: bytes::Bytes::from_static(b"foo"),
            ..ObjectLocator::default()
        };
        assert_eq!(
            m.object_locator_to_pg(b"other", &loc),
            Ok(PgId::new(2, 0x7fc1_f406))
        );
        let missing = ObjectLocator {
            pool: 9,
            ..ObjectLocator::default()
        };
        assert_eq!(
            m.object_locator_to_pg(b"x", &missing).map_err(|e| e.errno()),
            Err(-2)
        );
        // No CRUSH map: a clean error, not a panic.
        assert_eq!(
            m.pg_to_up_acting_osds(PgId::new(2, 1)),
            Err(PlacementError::NoCrush)
        );
    }
}
