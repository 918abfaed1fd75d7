// SPDX-License-Identifier: LGPL-3.0-or-later
//! PG → shard routing: which ferrostore shard (core) of this OSD holds each PG.
//!
//! A PG's objects live in one ferrostore shard, and a PG split (pool `pg_num` grows) moves objects between
//! collections of *one* shard only. So the shard of a PG cannot be a fixed function of its id: a child would
//! hash elsewhere than its parent. The rule instead (Crimson's `pg_to_shard_mapping` does the same):
//!
//! * a PG found on a shard's store at start stays on that shard;
//! * a PG created by a split lives on its parent's shard (splits are always local);
//! * a PG newly placed on this OSD with no routed split parent goes to the least loaded shard (fewest PGs of its
//!   pool, then fewest PGs overall, then the lowest index), so a fresh pool spreads over every core;
//! * an entry never changes while its PG exists; entries of a deleted pool go with the pool.
//!
//! [`PgRouter`] is deterministic: the same stored PGs and the same map epochs give the same table on every
//! core. ferro-osd computes it once (core 0) and ships a snapshot with each map; the simulator does the same
//! per simulated OSD. A PG with no entry is not held by this OSD: messages about it go to
//! [`PgRouter::fallback_shard`] (the shard then answers as Ceph does for a PG it does not have).

use std::collections::BTreeMap;

use denc::{PgId, SpgId};
use osdmap::OsdMap;

/// One routed PG: its shard, and the hash bits it owned at the last epoch seen (its split bits), which say
/// which new seeds of a later, larger `pg_num` split off it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Route {
    shard: u32,
    bits: u32,
}

/// A PG found on two shards' stores at start (should not happen: a PG is created on one shard only). The
/// first shard given keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteConflict {
    pub pgid: PgId,
    pub kept: u32,
    pub ignored: u32,
}

/// What one epoch changed in the table (for logs and tests).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteDelta {
    pub epoch: u32,
    /// New entries: (PG, shard).
    pub added: Vec<(PgId, u32)>,
    /// Pools whose entries were dropped (the pool is gone from the map).
    pub removed_pools: Vec<u64>,
}

/// The PG → shard table of one OSD (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgRouter {
    whoami: i32,
    shards: u32,
    /// The newest map epoch applied (0: only stored PGs so far).
    epoch: u32,
    routes: BTreeMap<(u64, u32), Route>,
    /// Entries per shard, overall and per pool (the balance of new PGs).
    total: Vec<u32>,
    per_pool: BTreeMap<u64, Vec<u32>>,
}

/// `seed` with its highest set bit cleared: the seed it split off when `pg_num` crossed that power of two
/// (Ceph's split parent under `ceph_stable_mod`). `None` for seed 0.
fn split_parent(seed: u32) -> Option<u32> {
    if seed == 0 {
        return None;
    }
    let top = u32::BITS - 1 - seed.leading_zeros();
    Some(seed & !(1u32 << top))
}

fn mask(bits: u32) -> u32 {
    if bits >= 32 { u32::MAX } else { (1u32 << bits) - 1 }
}

impl PgRouter {
    /// An empty table for `osd.<whoami>` with `shards` shards (fixed at mkfs).
    pub fn new(whoami: i32, shards: u32) -> Self {
        let shards = shards.max(1);
        PgRouter {
            whoami,
            shards,
            epoch: 0,
            routes: BTreeMap::new(),
            total: vec![0; shards as usize],
            per_pool: BTreeMap::new(),
        }
    }

    pub fn shards(&self) -> u32 {
        self.shards
    }

    /// The newest map epoch applied: messages from a newer epoch may be about PGs this table does not know yet.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Number of routed PGs.
    pub fn len(&self) -> usize {
        self.routes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// Routed PGs per shard.
    pub fn per_shard(&self) -> &[u32] {
        &self.total
    }

    /// Every entry, in PG order.
    pub fn entries(&self) -> impl Iterator<Item = (PgId, u32)> + '_ {
        self.routes
            .iter()
            .map(|(&(pool, seed), r)| (PgId::new(pool, seed), r.shard))
    }

    /// The shard holding `pgid`, if this OSD routes it.
    pub fn shard_of(&self, pgid: PgId) -> Option<u32> {
        self.routes.get(&(pgid.pool, pgid.seed)).map(|r| r.shard)
    }

    /// Where to deliver a message about `spgid`: its shard, or for a PG this OSD does not hold a fixed shard
    /// that answers for it (misdirected op, empty notify).
    pub fn route(&self, spgid: &SpgId) -> u32 {
        self.shard_of(spgid.pgid)
            .unwrap_or_else(|| Self::fallback_shard(spgid.pgid, self.shards))
    }

    /// Where to deliver a message about `spgid` sent at map `epoch`, or `None` if it must wait for a newer table:
    /// a PG with no entry may be one that epoch places here, and guessing its shard would misroute it for good.
    pub fn route_at(&self, spgid: &SpgId, epoch: u32) -> Option<u32> {
        match self.shard_of(spgid.pgid) {
            Some(s) => Some(s),
            None if epoch > self.epoch => None,
            None => Some(Self::fallback_shard(spgid.pgid, self.shards)),
        }
    }

    /// A fixed shard for PGs without an entry (a hash of the PG id).
    pub fn fallback_shard(pgid: PgId, shards: u32) -> u32 {
        let h = pgid.pool.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(pgid.seed);
        (h % u64::from(shards.max(1))) as u32
    }

    fn insert(&mut self, pgid: PgId, shard: u32, bits: u32) {
        let shard = shard.min(self.shards - 1);
        self.routes.insert((pgid.pool, pgid.seed), Route { shard, bits });
        self.total[shard as usize] += 1;
        let n = self.shards as usize;
        self.per_pool.entry(pgid.pool).or_insert_with(|| vec![0; n])[shard as usize] += 1;
    }

    /// PGs found on `shard`'s store at start, with their collection's split bits
    /// (`ferrostore::Store::collection_bits`). Call for every shard before the first map.
    pub fn add_stored(
        &mut self,
        shard: u32,
        pgs: impl IntoIterator<Item = (PgId, u32)>,
    ) -> Vec<RouteConflict> {
        let mut conflicts = Vec::new();
        for (pgid, bits) in pgs {
            match self.shard_of(pgid) {
                Some(kept) if kept != shard => conflicts.push(RouteConflict {
                    pgid,
                    kept,
                    ignored: shard,
                }),
                Some(_) => {}
                None => self.insert(pgid, shard, bits),
            }
        }
        conflicts
    }

    /// The least loaded shard for a new PG of `pool`.
    fn balanced(&self, pool: u64) -> u32 {
        let per = self.per_pool.get(&pool);
        (0..self.shards)
            .min_by_key(|&s| {
                let p = per.and_then(|v| v.get(s as usize)).copied().unwrap_or(0);
                (p, self.total[s as usize], s)
            })
            .unwrap_or(0)
    }

    /// The shard of the routed PG that `seed` splits off at `pg_num`, if any: the nearest routed seed up the
    /// highest-bit chain whose owned hash bits `seed` matches.
    fn split_source(&self, pool: u64, seed: u32) -> Option<u32> {
        let mut s = seed;
        while let Some(p) = split_parent(s) {
            if let Some(r) = self.routes.get(&(pool, p))
                && seed & mask(r.bits) == p
            {
                return Some(r.shard);
            }
            s = p;
        }
        None
    }

    /// Apply map epoch `m` (epochs at or before [`PgRouter::epoch`] change nothing): drop deleted pools, give split
    /// children their parent's shard, and route PGs newly placed on this OSD.
    pub fn advance(&mut self, m: &OsdMap) -> RouteDelta {
        let mut delta = RouteDelta {
            epoch: m.epoch,
            ..RouteDelta::default()
        };
        if m.epoch <= self.epoch {
            delta.epoch = self.epoch;
            return delta;
        }
        self.epoch = m.epoch;
        let gone: Vec<u64> = self
            .per_pool
            .keys()
            .filter(|p| !m.pools.contains_key(&(**p as i64)))
            .copied()
            .collect();
        for pool in gone {
            let keys: Vec<(u64, u32)> = self
                .routes
                .range((pool, 0)..=(pool, u32::MAX))
                .map(|(k, _)| *k)
                .collect();
            for k in keys {
                if let Some(r) = self.routes.remove(&k) {
                    self.total[r.shard as usize] -= 1;
                }
            }
            self.per_pool.remove(&pool);
            delta.removed_pools.push(pool);
        }
        for (&pid, pool) in &m.pools {
            // Erasure-coded pools are not served (no EC backend): nothing to route.
            if !pool.is_replicated() || pid < 0 {
                continue;
            }
            let pool_id = pid as u64;
            let pg_num = pool.pg_num;
            // Seeds in ascending order: a split child's routed ancestors come first.
            for seed in 0..pg_num {
                if self.routes.contains_key(&(pool_id, seed)) {
                    continue;
                }
                let pgid = PgId::new(pool_id, seed);
                let shard = match self.split_source(pool_id, seed) {
                    Some(s) => s,
                    None => {
                        let Ok(ua) = m.pg_to_up_acting_osds(pgid) else {
                            continue;
                        };
                        if !ua.up.contains(&self.whoami) && !ua.acting.contains(&self.whoami) {
                            continue;
                        }
                        self.balanced(pool_id)
                    }
                };
                self.insert(pgid, shard, pgid.get_split_bits(pg_num));
                delta.added.push((pgid, shard));
            }
            // Every routed PG of the pool now owns its split bits at this pg_num (its children are routed).
            for (&(_, seed), r) in self.routes.range_mut((pool_id, 0)..=(pool_id, u32::MAX)) {
                if seed < pg_num {
                    r.bits = r.bits.max(PgId::new(pool_id, seed).get_split_bits(pg_num));
                }
            }
        }
        delta
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use osdmap::build::{FailureDomain, IncBuilder, MapBuilder, PoolSpec, advance};
    use proptest::prelude::*;

    fn map(osds: u32, pg_num: u32) -> OsdMap {
        MapBuilder::new(osds, 1)
            .failure_domain(FailureDomain::Osd)
            .pool(PoolSpec::replicated("p", 1, 1, pg_num))
            .build()
    }

    fn grow(m: &mut OsdMap, pool: i64, pg_num: u32) {
        let mut b = IncBuilder::new(m);
        b.set_pg_num(pool, pg_num).unwrap();
        let inc = b.finish().unwrap();
        advance(m, &inc).unwrap();
    }

    /// Ceph's split parent of `seed` when the pool goes from `old` to a larger pg_num.
    fn ceph_parent(seed: u32, old: u32) -> u32 {
        let bits = u32::BITS - (old - 1).leading_zeros();
        denc::ceph_stable_mod(seed, old, mask(bits))
    }

    #[test]
    fn split_parent_clears_the_top_bit() {
        assert_eq!(split_parent(0), None);
        assert_eq!(split_parent(1), Some(0));
        assert_eq!(split_parent(9), Some(1));
        assert_eq!(split_parent(13), Some(5));
        assert_eq!(split_parent(0x8000_0003), Some(3));
    }

    #[test]
    fn fresh_pool_is_balanced() {
        for pg_num in [32u32, 64, 128] {
            for shards in [2u32, 3, 4] {
                let m = map(1, pg_num);
                let mut r = PgRouter::new(0, shards);
                r.advance(&m);
                assert_eq!(r.len(), pg_num as usize);
                let per = r.per_shard();
                let (lo, hi) = (per.iter().min().unwrap(), per.iter().max().unwrap());
                assert!(hi - lo <= 1, "pg_num {pg_num} shards {shards}: {per:?}");
            }
        }
    }

    #[test]
    fn fresh_pool_on_many_osds_is_balanced_among_placed_pgs() {
        let m = map(4, 128);
        for osd in 0..4 {
            let mut r = PgRouter::new(osd, 3);
            r.advance(&m);
            assert!(r.len() > 10, "osd.{osd} routes {}", r.len());
            let per = r.per_shard();
            let (lo, hi) = (per.iter().min().unwrap(), per.iter().max().unwrap());
            assert!(hi - lo <= 1, "osd.{osd}: {per:?}");
            // only PGs placed here
            for (pgid, _) in r.entries() {
                let ua = m.pg_to_up_acting_osds(pgid).unwrap();
                assert!(ua.up.contains(&osd) || ua.acting.contains(&osd));
            }
        }
    }

    #[test]
    fn split_children_follow_their_parent() {
        let mut m = map(1, 8);
        let mut r = PgRouter::new(0, 3);
        r.advance(&m);
        let before: BTreeMap<PgId, u32> = r.entries().collect();
        grow(&mut m, 1, 32);
        let d = r.advance(&m);
        assert_eq!(d.added.len(), 24);
        for seed in 8..32 {
            let child = PgId::new(1, seed);
            let parent = PgId::new(1, ceph_parent(seed, 8));
            assert_eq!(r.shard_of(child), Some(before[&parent]), "{child} from {parent}");
        }
        // nothing moved
        for (pgid, s) in before {
            assert_eq!(r.shard_of(pgid), Some(s));
        }
    }

    #[test]
    fn stored_pgs_keep_their_shard_and_a_jump_over_splits_follows_them() {
        // A restart: 1.0-1.7 stored (pg_num 8: 3 bits), split at 8 -> 32 while down.
        let m = {
            let mut m = map(1, 8);
            grow(&mut m, 1, 32);
            m
        };
        let mut r = PgRouter::new(0, 2);
        let c = r.add_stored(0, (0..8).filter(|s| s % 3 == 0).map(|s| (PgId::new(1, s), 3)));
        assert!(c.is_empty());
        r.add_stored(1, (0..8).filter(|s| s % 3 != 0).map(|s| (PgId::new(1, s), 3)));
        r.advance(&m);
        for seed in 0..32u32 {
            let want = u32::from(seed % 8 % 3 != 0);
            assert_eq!(r.shard_of(PgId::new(1, seed)), Some(want), "seed {seed}");
        }
    }

    #[test]
    fn a_pg_on_two_shards_is_a_conflict() {
        let mut r = PgRouter::new(0, 2);
        r.add_stored(0, [(PgId::new(1, 3), 3)]);
        let c = r.add_stored(1, [(PgId::new(1, 3), 3)]);
        assert_eq!(
            c,
            vec![RouteConflict {
                pgid: PgId::new(1, 3),
                kept: 0,
                ignored: 1
            }]
        );
        assert_eq!(r.shard_of(PgId::new(1, 3)), Some(0));
    }

    #[test]
    fn deleted_pool_entries_go() {
        let mut m = map(1, 8);
        let mut r = PgRouter::new(0, 2);
        r.advance(&m);
        let mut b = IncBuilder::new(&m);
        let p2 = b.create_pool(&PoolSpec::replicated("q", 1, 1, 16));
        let inc = b.finish().unwrap();
        advance(&mut m, &inc).unwrap();
        r.advance(&m);
        assert_eq!(r.len(), 24);
        let mut b = IncBuilder::new(&m);
        b.delete_pool(1).unwrap();
        let inc = b.finish().unwrap();
        advance(&mut m, &inc).unwrap();
        let d = r.advance(&m);
        assert_eq!(d.removed_pools, vec![1]);
        assert_eq!(r.len(), 16);
        assert!(r.entries().all(|(p, _)| p.pool == p2 as u64));
        assert_eq!(r.per_shard().iter().sum::<u32>(), 16);
        // an old epoch changes nothing
        let before = r.clone();
        r.advance(&m);
        assert_eq!(r, before);
    }

    #[test]
    fn unplaced_pgs_route_to_the_fallback() {
        let r = PgRouter::new(0, 4);
        let s = SpgId::new(PgId::new(7, 5), denc::ShardId::NO_SHARD);
        assert_eq!(r.route(&s), PgRouter::fallback_shard(s.pgid, 4));
        assert!(r.route(&s) < 4);
        // a newer epoch than the table: wait
        assert_eq!(r.route_at(&s, 1), None);
        assert_eq!(r.route_at(&s, 0), Some(r.route(&s)));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Random pg_num growth on a random cluster: children always route with their Ceph split parent,
        /// entries never change, and two routers fed the same inputs agree.
        #[test]
        fn children_follow_parents_and_cores_agree(
            osds in 1u32..4,
            shards in 1u32..5,
            start in 1u32..20,
            steps in proptest::collection::vec(1u32..24, 1..4),
            stored_every in 2u32..5,
        ) {
            let mut m = map(osds, start);
            let me = 0;
            let mut a = PgRouter::new(me, shards);
            let mut b = PgRouter::new(me, shards);
            // some PGs stored at start (a restart), on shards chosen by seed
            let bits = |s: u32| PgId::new(1, s).get_split_bits(start);
            let stored: Vec<(u32, PgId, u32)> = (0..start)
                .filter(|s| s % stored_every == 0)
                .map(|s| (s % shards, PgId::new(1, s), bits(s)))
                .collect();
            for (sh, p, bt) in &stored {
                a.add_stored(*sh, [(*p, *bt)]);
                b.add_stored(*sh, [(*p, *bt)]);
            }
            a.advance(&m);
            b.advance(&m);
            prop_assert_eq!(&a, &b);
            let mut pg_num = start;
            for add in steps {
                let before: BTreeMap<PgId, u32> = a.entries().collect();
                let old = pg_num;
                pg_num += add;
                grow(&mut m, 1, pg_num);
                a.advance(&m);
                b.advance(&m);
                prop_assert_eq!(&a, &b);
                for (p, s) in &before {
                    prop_assert_eq!(a.shard_of(*p), Some(*s));
                }
                for seed in old..pg_num {
                    let parent = PgId::new(1, ceph_parent(seed, old));
                    if let Some(ps) = before.get(&parent) {
                        prop_assert_eq!(a.shard_of(PgId::new(1, seed)), Some(*ps),
                            "seed {} parent {} old {} new {}", seed, parent, old, pg_num);
                    }
                }
                // every PG placed here is routed
                for seed in 0..pg_num {
                    let p = PgId::new(1, seed);
                    let ua = m.pg_to_up_acting_osds(p).unwrap();
                    if ua.up.contains(&me) || ua.acting.contains(&me) {
                        prop_assert!(a.shard_of(p).is_some());
                    }
                }
            }
        }
    }
}
