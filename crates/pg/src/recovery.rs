// SPDX-License-Identifier: LGPL-3.0-or-later
//! Recovery and backfill primitives, storage side (`ReplicatedBackend::build_push_op` / `submit_push_data` /
//! `submit_push_complete`, `PrimaryLogPG::scan_range`): a [`PushOp`] for an object (data, every xattr including
//! `_` and `snapset`, omap header and entries, `ObjectRecoveryInfo`/`ObjectRecoveryProgress`, in chunks of at
//! most `osd_recovery_max_chunk`), applying one (a multi-chunk object is assembled in a temp object and renamed
//! into place with the last chunk, as Ceph does), deleting an object, listing a PG in hobject order with
//! versions for backfill, and one object's version.

use std::collections::BTreeMap;

use bytes::Bytes;
use denc::{Coll, Decode, Eversion, GHObject, HObject, NO_GEN};
use ferrostore::{Device, Op, Store, StoreError};
use osd_types::recovery::{ObjectRecoveryInfo, ObjectRecoveryProgress, PushOp};
use osd_types::snapset::IntervalSet;
use osd_types::transaction::Transaction;
use osd_types::{ObjectInfo, SnapSet};

use crate::{Pg, PgError, keys, txn};

/// `osd_recovery_max_chunk` (8 MiB): the most data and omap bytes one PushOp carries.
pub const OSD_RECOVERY_MAX_CHUNK: u64 = 8 << 20;
/// `osd_recovery_max_omap_entries_per_chunk`.
pub const OSD_RECOVERY_MAX_OMAP_ENTRIES_PER_CHUNK: usize = 8096;

const OI_ATTR: &[u8] = b"_";
const SS_ATTR: &[u8] = b"snapset";

/// What applying a push did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PushApplied {
    /// The store transaction (answer the push / count the object recovered once durable).
    pub seq: u64,
    /// The object is complete at its version (the last chunk was applied).
    pub complete: bool,
}

fn interval_end(s: &IntervalSet) -> u64 {
    s.iter().map(|(o, l)| o.saturating_add(*l)).max().unwrap_or(0)
}

/// `a ∩ b` for interval sets (offset → length).
fn intersect(a: &IntervalSet, b: &IntervalSet) -> IntervalSet {
    let mut out = IntervalSet::new();
    for (&ao, &al) in a {
        let ae = ao.saturating_add(al);
        for (&bo, &bl) in b.range(..ae) {
            let (s, e) = (ao.max(bo), ae.min(bo.saturating_add(bl)));
            if s < e {
                out.insert(s, e - s);
            }
        }
    }
    out
}

/// `a \ b`.
fn subtract(a: &IntervalSet, b: &IntervalSet) -> IntervalSet {
    let mut out = IntervalSet::new();
    for (&ao, &al) in a {
        let mut cur = ao;
        let ae = ao.saturating_add(al);
        for (&bo, &bl) in b.range(..ae) {
            let be = bo.saturating_add(bl);
            if be <= cur {
                continue;
            }
            if bo > cur {
                out.insert(cur, bo - cur);
            }
            cur = cur.max(be);
        }
        if cur < ae {
            out.insert(cur, ae - cur);
        }
    }
    out
}

/// Ceph's `span_of`: the first `len` bytes of `s` at or after `start`.
fn span_of(s: &IntervalSet, start: u64, mut len: u64) -> IntervalSet {
    let mut out = IntervalSet::new();
    for (&o, &l) in s {
        if len == 0 {
            break;
        }
        let e = o.saturating_add(l);
        if e <= start {
            continue;
        }
        let b = o.max(start);
        let take = (e - b).min(len);
        out.insert(b, take);
        len -= take;
    }
    out
}

impl Pg {
    fn gh(&self, oid: &HObject) -> GHObject {
        keys::ghobject(oid, &self.spgid)
    }
    fn coll(&self) -> Coll {
        Coll::pg(self.spgid)
    }

    /// The version of an object as stored here (`object_info_t::version`), None if it is absent.
    pub fn object_version<D: Device>(
        &self,
        store: &mut Store<D>,
        oid: &HObject,
    ) -> Result<Option<Eversion>, PgError> {
        let okey = keys::object_key(oid, &self.spgid);
        match store.getattr(&self.cid, &okey, OI_ATTR) {
            Ok(bl) => Ok(Some(
                ObjectInfo::decode_all(bl)
                    .map_err(|e| PgError::Corrupt(format!("object_info_t of {oid}: {e}")))?
                    .version,
            )),
            Err(StoreError::NotFound | StoreError::NoData) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The `ObjectRecoveryInfo` of a whole object as stored here (what the first push of it carries).
    pub fn recovery_info<D: Device>(
        &self,
        store: &mut Store<D>,
        oid: &HObject,
    ) -> Result<ObjectRecoveryInfo, PgError> {
        let okey = keys::object_key(oid, &self.spgid);
        let oi = match store.getattr(&self.cid, &okey, OI_ATTR) {
            Ok(bl) => ObjectInfo::decode_all(bl)
                .map_err(|e| PgError::Corrupt(format!("object_info_t of {oid}: {e}")))?,
            Err(StoreError::NotFound | StoreError::NoData) => return Err(PgError::NotFound(oid.to_string())),
            Err(e) => return Err(e.into()),
        };
        let ss = match store.getattr(&self.cid, &okey, SS_ATTR) {
            Ok(bl) => {
                SnapSet::decode_all(bl).map_err(|e| PgError::Corrupt(format!("snapset of {oid}: {e}")))?
            }
            Err(_) => SnapSet::default(),
        };
        let mut copy_subset = IntervalSet::new();
        if oi.size > 0 {
            copy_subset.insert(0, oi.size);
        }
        Ok(ObjectRecoveryInfo {
            soid: oid.clone(),
            version: oi.version,
            size: oi.size,
            oi,
            ss,
            copy_subset,
            clone_subset: BTreeMap::new(),
            object_exist: true,
        })
    }

    /// The next PushOp of an object from `progress` (`ObjectRecoveryProgress::default()` for the first): attrs and
    /// omap header with the first chunk, then omap entries and data up to `max_chunk` bytes
    /// ([`OSD_RECOVERY_MAX_CHUNK`] by default). Push again with `after_progress` until it is `data_complete`.
    /// Fails with `PgError::Transaction` if the object changed version since `info` was taken.
    pub fn build_push<D: Device>(
        &self,
        store: &mut Store<D>,
        info: &ObjectRecoveryInfo,
        progress: &ObjectRecoveryProgress,
        max_chunk: u64,
    ) -> Result<PushOp, PgError> {
        let oid = &info.soid;
        let okey = keys::object_key(oid, &self.spgid);
        let mut op = PushOp {
            soid: oid.clone(),
            version: info.version,
            recovery_info: info.clone(),
            before_progress: progress.clone(),
            ..Default::default()
        };
        let mut newp = progress.clone();
        if progress.first {
            op.omap_header = match store.omap_get_header(&self.cid, &okey) {
                Ok(h) => h,
                Err(StoreError::NotFound) => return Err(PgError::NotFound(oid.to_string())),
                Err(e) => return Err(e.into()),
            };
            op.attrset = store.getattrs(&self.cid, &okey)?.into_iter().collect();
            let oi = op
                .attrset
                .get(OI_ATTR)
                .map(|b| ObjectInfo::decode_all(b.clone()))
                .transpose()
                .map_err(|e| PgError::Corrupt(format!("object_info_t of {oid}: {e}")))?;
            if oi.is_none_or(|oi| oi.version != info.version) {
                return Err(PgError::Transaction(format!(
                    "{oid} is no longer at {}",
                    info.version
                )));
            }
            newp.first = false;
        }
        let mut available = max_chunk.max(1);
        if !progress.omap_complete {
            let mut start = progress.omap_recovered_to.to_vec();
            'omap: loop {
                let batch = store.omap_iterate(&self.cid, &okey, &start, 256)?;
                if batch.is_empty() {
                    newp.omap_complete = true;
                    break;
                }
                for (k, v) in batch {
                    let n = (k.len() + v.len()) as u64;
                    if !op.omap_entries.is_empty()
                        && (op.omap_entries.len() >= OSD_RECOVERY_MAX_OMAP_ENTRIES_PER_CHUNK
                            || available <= n)
                    {
                        newp.omap_recovered_to = k.clone();
                        break 'omap;
                    }
                    available = available.saturating_sub(n);
                    start = k.to_vec();
                    start.push(0);
                    op.omap_entries.insert(k, v);
                }
            }
        }
        let end = interval_end(&info.copy_subset);
        if available > 0 && !info.copy_subset.is_empty() {
            // only the ranges the object really has (holes are not sent; the receiver zeroes them)
            let mapped: IntervalSet = store.fiemap(&self.cid, &okey, 0, end)?.into_iter().collect();
            let subset = intersect(&info.copy_subset, &mapped);
            let included = span_of(&subset, progress.data_recovered_to, available);
            newp.data_recovered_to =
                if included.is_empty() || interval_end(&included) == interval_end(&subset) {
                    end
                } else {
                    interval_end(&included)
                };
            let mut data = bytes::BytesMut::new();
            for (&o, &l) in &included {
                let b = store.read(&self.cid, &okey, o, l)?;
                if b.len() as u64 != l {
                    return Err(PgError::Transaction(format!("{oid}: short read at {o}+{l}")));
                }
                data.extend_from_slice(&b);
            }
            op.data = data.freeze();
            op.data_included = included;
        }
        if newp.data_recovered_to >= end && newp.omap_complete {
            newp.data_complete = true;
        }
        op.after_progress = newp;
        Ok(op)
    }

    /// The temp object a multi-chunk push is assembled in (`get_temp_recovery_object`).
    fn temp_recovery_object(&self, target: &HObject, version: Eversion) -> HObject {
        let name = format!(
            "temp_recovering_{}_{}_{}_{}",
            self.spgid, version, self.info.history.same_interval_since, target.snap
        );
        target.make_temp_hobject(name)
    }

    /// The Ceph transaction that applies one PushOp (`submit_push_data` + `submit_push_complete`).
    pub fn push_transaction<D: Device>(
        &self,
        store: &mut Store<D>,
        p: &PushOp,
    ) -> Result<Transaction, PgError> {
        let info = &p.recovery_info;
        let first = p.before_progress.first;
        let complete = p.after_progress.data_complete;
        let c = self.coll();
        let target = if first && complete {
            info.soid.clone()
        } else {
            self.temp_recovery_object(&info.soid, info.version)
        };
        let tg = self.gh(&target);
        let mut t = Transaction::new();
        if first {
            let exists_here = store.exists(&self.cid, &keys::object_key(&info.soid, &self.spgid))?;
            if !complete || !info.object_exist || !exists_here {
                t.remove(c, &tg);
                t.touch(c, &tg);
            } else {
                t.rmattrs(c, &tg);
                if !p.before_progress.omap_complete {
                    t.omap_clear(c, &tg);
                }
            }
            t.truncate(c, &tg, info.size);
            if !p.omap_header.is_empty() {
                t.omap_setheader(c, &tg, &p.omap_header);
            }
        }
        // what this chunk covers but does not carry is a hole: zero it (`data_zeros`)
        let (from, to) = (
            p.before_progress.data_recovered_to,
            p.after_progress.data_recovered_to,
        );
        if to > from {
            let mut span = IntervalSet::new();
            span.insert(from, to - from);
            let zeros = subtract(&intersect(&span, &info.copy_subset), &p.data_included);
            for (&o, &l) in &zeros {
                t.zero(c, &tg, o, l);
            }
        }
        let mut off = 0usize;
        for (start, len) in &p.data_included {
            let short = || PgError::Transaction("push data shorter than data_included".into());
            let l = usize::try_from(*len).map_err(|_| short())?;
            let end = off.checked_add(l).ok_or_else(short)?;
            let chunk = p.data.get(off..end).ok_or_else(short)?;
            t.write(c, &tg, *start, &p.data.slice_ref(chunk), 0);
            off += l;
        }
        if !p.omap_entries.is_empty() {
            t.omap_setkeys(c, &tg, &p.omap_entries);
        }
        if !p.attrset.is_empty() {
            t.setattrs(c, &tg, &p.attrset);
        }
        if complete && !first {
            let dst = self.gh(&info.soid);
            t.remove(c, &dst);
            t.collection_move_rename(c, &tg, c, &dst);
        }
        Ok(t)
    }

    /// Apply one PushOp (primary after a pull, or replica/backfill target) as one store transaction. With the
    /// last chunk the object leaves the missing set (its pgmeta key too).
    pub fn apply_push<D: Device>(
        &mut self,
        store: &mut Store<D>,
        p: &PushOp,
    ) -> Result<PushApplied, PgError> {
        let ceph = self.push_transaction(store, p)?;
        let complete = p.after_progress.data_complete;
        let oid = p.recovery_info.soid.clone();
        let before = self.object_footprint(store, &oid)?;
        let mut t = txn::translate(store, &ceph)?;
        if complete && self.missing.is_missing(&oid) {
            t.push(Op::OmapRmKeys {
                cid: self.cid.clone(),
                oid: keys::pgmeta_key(&self.spgid),
                keys: vec![Bytes::from(osd_types::pgmeta::missing_key(&oid))],
            });
        }
        let seq = self.queue(store, &t)?;
        if complete {
            self.missing.got(&oid, p.recovery_info.version);
            if self.missing.is_missing(&oid) {
                // still behind: keep the item on disk (it was removed above)
                self.missing.rm(&oid);
            }
            let after = self.object_footprint(store, &oid)?;
            self.stats_change(before, after);
        }
        Ok(PushApplied { seq, complete })
    }

    /// Delete an object (recovery delete, backfill remove); a missing-set entry for it goes too. Returns the
    /// store sequence number (None if there was nothing to do).
    pub fn remove_object<D: Device>(
        &mut self,
        store: &mut Store<D>,
        oid: &HObject,
    ) -> Result<Option<u64>, PgError> {
        let okey = keys::object_key(oid, &self.spgid);
        let exists = store.exists(&self.cid, &okey)?;
        let was_missing = self.missing.is_missing(oid);
        if !exists && !was_missing {
            return Ok(None);
        }
        let before = self.object_footprint(store, oid)?;
        let mut ceph = Transaction::new();
        ceph.remove(self.coll(), &self.gh(oid));
        let mut t = txn::translate(store, &ceph)?;
        if was_missing {
            t.push(Op::OmapRmKeys {
                cid: self.cid.clone(),
                oid: keys::pgmeta_key(&self.spgid),
                keys: vec![Bytes::from(osd_types::pgmeta::missing_key(oid))],
            });
        }
        let seq = self.queue(store, &t)?;
        self.missing.rm(oid);
        self.stats_remove(before);
        Ok(Some(seq))
    }

    /// Objects of this PG from `from` (inclusive; `HObject::default()` for the start) in hobject order with their
    /// versions, at most `max` (for MOSDPGScan digests and backfill). The second value is where to continue
    /// (`HObject::max_value()` at the end).
    pub fn scan<D: Device>(
        &self,
        store: &mut Store<D>,
        from: &HObject,
        max: usize,
    ) -> Result<(Vec<(HObject, Eversion)>, HObject), PgError> {
        let (objs, next) = self.list_objects(store, from, max)?;
        let mut out = Vec::with_capacity(objs.len());
        for o in objs {
            let v = self.object_version(store, &o)?.unwrap_or_default();
            out.push((o, v));
        }
        Ok((out, next))
    }
}

/// The generation-less ghobject of an object in a PG (for callers building transactions by hand).
pub fn ghobject(oid: &HObject, spgid: &denc::SpgId) -> GHObject {
    GHObject::new(oid.clone(), NO_GEN, spgid.shard)
}
