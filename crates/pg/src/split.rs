// SPDX-License-Identifier: LGPL-3.0-or-later
//! PG split (a pool's pg_num grows) and PG removal, as `OSD::split_pgs` / `PG::split_colls` /
//! `PeeringState::split_into` and the PG deletion do it.
//!
//! Split, in one store transaction: each child's collection is created with the new split bits and the objects
//! whose hash now maps to it move there (ferrostore `SplitCollection`); the child gets a pgmeta object with
//! `_infover`, the parent's history (`epoch_created` = the split epoch), past intervals and purged snaps, the
//! log entries of its own objects plus a copy of every dup (`split_out_child`), its part of the missing set,
//! and `last_update` = the parent's head; the parent keeps the rest of its log.

use bytes::Bytes;
use denc::{Encode, HObject, PgId, SpgId, ceph_stable_mod};
use ferrostore::{Device, Op, Store, Transaction};
use osd_types::pgmeta::{
    BIGINFO_KEY, EPOCH_KEY, FASTINFO_KEY, INFO_KEY, INFOVER_KEY, PG_LATEST_STRUCT_V, encode_biginfo,
    encode_info, missing_key,
};

use crate::{Pg, PgError, PoolInfo, exec, keys, log};

/// `pg_t::is_split`: the PGs that split off `parent` when the pool goes from `old_pg_num` to `new_pg_num` PGs.
pub fn split_children(parent: PgId, old_pg_num: u32, new_pg_num: u32) -> Vec<PgId> {
    let mut out = Vec::new();
    if new_pg_num <= old_pg_num || old_pg_num == 0 || parent.seed >= old_pg_num {
        return out;
    }
    let old_bits = u32::BITS - old_pg_num.leading_zeros();
    let old_mask = (1u32 << old_bits) - 1;
    for n in 1u64.. {
        let s = (n << (old_bits - 1)) | u64::from(parent.seed);
        if s < u64::from(old_pg_num) || s == u64::from(parent.seed) {
            continue;
        }
        if s >= u64::from(new_pg_num) {
            break;
        }
        let s = s as u32;
        // `n << (old_bits - 1) | seed` repeats a value when the seed has that bit set: Ceph collects into a
        // set, so a child is listed once (a repeat made the split transaction create its collection twice)
        if ceph_stable_mod(s, old_pg_num, old_mask) == parent.seed && !out.iter().any(|c| c.seed == s) {
            out.push(PgId::new(parent.pool, s));
        }
    }
    out
}

fn k(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

impl Pg {
    /// Split this PG for the pool's new `pg_num` (at map `epoch`): returns the child PGs (ready to use, like
    /// after [`Pg::load`]) and the store sequence number of the one transaction that did it. This PG's pool
    /// info is updated to `new_pg_num`. No children (pg_num did not grow, or none splits off this PG): `(vec![],
    /// None)`.
    pub fn split<D: Device>(
        &mut self,
        store: &mut Store<D>,
        new_pg_num: u32,
        epoch: u32,
    ) -> Result<(Vec<Pg>, Option<u64>), PgError> {
        let old_pg_num = self.pool.pg_num;
        let children = split_children(self.spgid.pgid, old_pg_num, new_pg_num);
        let mut pool = self.pool.clone();
        pool.pg_num = new_pg_num;
        if children.is_empty() {
            self.pool = pool;
            return Ok((Vec::new(), None));
        }
        let mut t = Transaction::new();
        let parent_meta = keys::pgmeta_key(&self.spgid);
        let mut parent_rm: Vec<Bytes> = Vec::new();
        let mut out = Vec::with_capacity(children.len());
        let parent_info = self.info();
        for child in children {
            let cspg = SpgId::new(child, self.spgid.shard);
            let bits = child.get_split_bits(new_pg_num);
            let mut c = Pg::new(cspg, pool.clone(), self.cfg.clone());
            c.primary = self.primary;
            c.discard_before = epoch;
            t.push(Op::CreateCollection {
                cid: c.cid.clone(),
                bits,
            });
            t.push(Op::SplitCollection {
                src: self.cid.clone(),
                dst: c.cid.clone(),
                bits,
                rem: child.seed,
            });
            // the log: the child's objects' entries move, every dup is copied
            let (entries, dups) = self.log.split_out(child.seed, bits);
            for e in &entries {
                parent_rm.push(Bytes::from(osd_types::pg_log::eversion_key(e.version)));
            }
            c.log = log::PgLog::from_parts(&self.cfg, self.log.head, self.log.tail, entries, dups);
            c.log.last_user_version = self.log.last_user_version;
            // the missing set
            let moved: Vec<HObject> = self
                .missing
                .missing
                .keys()
                .filter(|o| o.match_hash(bits, child.seed))
                .cloned()
                .collect();
            for o in moved {
                if let Some(item) = self.missing.missing.remove(&o) {
                    parent_rm.push(Bytes::from(missing_key(&o)));
                    c.missing.missing.insert(o, item);
                }
            }
            c.missing.may_include_deletes = self.missing.may_include_deletes;
            // info: the parent's history and stats, created now
            let mut ci = parent_info.clone();
            ci.pgid = child;
            ci.last_update = c.log.head;
            ci.last_complete = parent_info.last_complete;
            ci.log_tail = c.log.tail;
            ci.history.epoch_created = epoch;
            ci.stats.parent_split_bits = bits;
            ci.stats.stats_invalid = true;
            ci.stats.parent = self.spgid.pgid;
            c.info = ci;
            c.past_intervals = self.past_intervals.clone();
            c.epoch = epoch;
            let cmeta = keys::pgmeta_key(&cspg);
            t.push(Op::Touch {
                cid: c.cid.clone(),
                oid: cmeta.clone(),
            });
            let mut kvs = vec![
                (k(INFOVER_KEY), Bytes::from(vec![PG_LATEST_STRUCT_V])),
                (k(EPOCH_KEY), epoch.to_bytes(0)),
                (k(INFO_KEY), encode_info(&c.info, denc::CEPH_FEATURES_ALL)),
                (
                    k(BIGINFO_KEY),
                    encode_biginfo(&c.past_intervals, &c.info.purged_snaps),
                ),
            ];
            kvs.extend(c.log.all_kvs());
            for (o, item) in &c.missing.missing {
                let mut e = denc::Encoder::new(denc::features::MASK_SERVER_OCTOPUS);
                e.encode(o);
                e.encode(item);
                kvs.push((Bytes::from(missing_key(o)), e.into_bytes()));
            }
            if c.missing.may_include_deletes {
                kvs.push((k(osd_types::pgmeta::MAY_INCLUDE_DELETES_KEY), Bytes::new()));
            }
            t.push(Op::OmapSetKeys {
                cid: c.cid.clone(),
                oid: cmeta,
                kvs,
            });
            out.push(c);
        }
        // the parent: what moved out of its log and missing set, and its info (stats are recounted below)
        self.pool = pool;
        self.info.stats.stats_invalid = true;
        self.info.history.last_epoch_split = epoch;
        let pinfo = self.info();
        parent_rm.push(k(FASTINFO_KEY));
        t.push(Op::OmapSetKeys {
            cid: self.cid.clone(),
            oid: parent_meta.clone(),
            kvs: vec![
                (k(EPOCH_KEY), epoch.to_bytes(0)),
                (k(INFO_KEY), encode_info(&pinfo, denc::CEPH_FEATURES_ALL)),
            ],
        });
        t.push(Op::OmapRmKeys {
            cid: self.cid.clone(),
            oid: parent_meta,
            keys: parent_rm,
        });
        let ceph = crate::txn::to_ceph(&t.ops)?;
        let local = crate::txn::translate(store, &ceph)?;
        let seq = self.queue(store, &local)?;
        self.stats = exec::scan_stats(store, &self.cid)?;
        for c in &mut out {
            c.stats = exec::scan_stats(store, &c.cid)?;
            c.durable_seq = self.durable_seq;
        }
        Ok((out, Some(seq)))
    }

    /// Remove this PG from the store: every object, the pgmeta object and the collection, in transactions of
    /// at most `batch` objects (the last one removes the collection). Returns the last sequence number.
    pub fn remove<D: Device>(self, store: &mut Store<D>, batch: usize) -> Result<u64, PgError> {
        let batch = batch.max(1);
        loop {
            let objs = store.list_objects(&self.cid, &[], None, batch)?;
            let done = objs.len() < batch;
            let mut t = Transaction::new();
            for o in objs {
                t.push(Op::Remove {
                    cid: self.cid.clone(),
                    oid: o,
                });
            }
            if done {
                t.push(Op::RemoveCollection {
                    cid: self.cid.clone(),
                });
            }
            // the PG goes away with its cache: no need to keep it exact
            let seq = store.queue_transaction(&t)?;
            if done {
                return Ok(seq);
            }
        }
    }

    /// The pool parameters after a split (for callers that build children themselves).
    pub fn pool_info(&self) -> &PoolInfo {
        &self.pool
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::collections::BTreeSet;

    #[test]
    fn children_as_ceph_computes_them() {
        let p = |s| PgId::new(1, s);
        assert_eq!(split_children(p(0), 1, 2), vec![p(1)]);
        assert_eq!(split_children(p(0), 1, 4), vec![p(1), p(2), p(3)]);
        assert_eq!(split_children(p(1), 2, 4), vec![p(3)]);
        assert_eq!(split_children(p(0), 4, 6), vec![p(4)]);
        assert_eq!(split_children(p(2), 4, 6), Vec::<PgId>::new());
        assert_eq!(split_children(p(3), 8, 16), vec![p(11)]);
        assert!(split_children(p(0), 8, 8).is_empty());
        let all: BTreeSet<u32> = (0..8)
            .flat_map(|s| split_children(p(s), 8, 32))
            .map(|c| c.seed)
            .collect();
        assert_eq!(all, (8..32).collect());
        // a seed with the bit `n << (old_bits - 1)` would set already set: 1.5 from 6 to 16 PGs has one child
        assert_eq!(split_children(p(5), 6, 16), vec![p(13)]);
        // every child once, over uneven pg_num steps
        for (old, new) in [(3, 16), (6, 16), (12, 23), (23, 64), (5, 100)] {
            let kids: Vec<u32> = (0..old)
                .flat_map(|s| split_children(p(s), old, new))
                .map(|c| c.seed)
                .collect();
            let set: BTreeSet<u32> = kids.iter().copied().collect();
            assert_eq!(kids.len(), set.len(), "{old} -> {new}: {kids:?}");
            assert_eq!(set, (old..new).collect(), "{old} -> {new}");
        }
    }
}
