// SPDX-License-Identifier: LGPL-3.0-or-later
//! The PG's own state in its pgmeta object, keyed as classic OSDs key it (see `osd_types::pgmeta`): info,
//! past intervals, epoch, missing set; applying peering's store writes ([`peering::Persist`]) and reading them back
//! after a restart.

use std::collections::BTreeMap;

use bytes::Bytes;
use denc::{Decode, Decoder, Encode, Eversion, HObject, SpgId};
use ferrostore::{Device, Op, Store, Transaction};
use osd_types::past_intervals::PastIntervals;
use osd_types::pg_info::PgInfo;
use osd_types::pg_log_t::PgLog as PgLogT;
use osd_types::pg_missing::{PgMissing, PgMissingItem};
use osd_types::pg_stat::PgStat;
use osd_types::pgmeta::{
    BIGINFO_KEY, EPOCH_KEY, FASTINFO_KEY, INFO_KEY, INFOVER_KEY, MAY_INCLUDE_DELETES_KEY, MISSING_PREFIX,
    PG_LATEST_STRUCT_V, PgFastInfo, decode_biginfo, encode_biginfo, encode_info, missing_key,
};

use crate::log::Trim;
use crate::{Pg, PgError, keys};

/// What a PG keeps about itself, as loaded from pgmeta: enough to build `peering::Pg::new` after a restart.
#[derive(Debug, Clone, PartialEq)]
pub struct PgMeta {
    pub info: PgInfo,
    pub past_intervals: PastIntervals,
    pub log: PgLogT,
    pub missing: PgMissing,
}

/// The pg_info_t of a PG that has nothing yet.
pub(crate) fn new_info(spgid: &SpgId) -> PgInfo {
    let mut i = PgInfo {
        pgid: spgid.pgid,
        shard: spgid.shard,
        ..Default::default()
    };
    i.stats.parent_split_bits = 0;
    i
}

fn k(s: &'static str) -> Bytes {
    Bytes::from_static(s.as_bytes())
}

/// The pgmeta keys of a new PG (`init_pg_ondisk` + the first `write_if_dirty`).
pub(crate) fn create_kvs(info: &PgInfo, pi: &PastIntervals, epoch: u32) -> Vec<(Bytes, Bytes)> {
    vec![
        (k(INFOVER_KEY), Bytes::from(vec![PG_LATEST_STRUCT_V])),
        (k(EPOCH_KEY), epoch.to_bytes(0)),
        (k(INFO_KEY), encode_info(info, denc::CEPH_FEATURES_ALL)),
        (k(BIGINFO_KEY), encode_biginfo(pi, &info.purged_snaps)),
        // Pacific OSD maps carry recovery_deletes: a new PG's missing set may hold deletes
        (k(MAY_INCLUDE_DELETES_KEY), Bytes::new()),
    ]
}

/// Parsed non-log pgmeta keys.
#[derive(Default)]
pub(crate) struct Parsed {
    pub info: Option<PgInfo>,
    pub past_intervals: Option<PastIntervals>,
    pub missing: PgMissing,
}

/// Interpret the pgmeta keys that are not log entries or dups (as `PG::read_info` and
/// `PGLog::read_log_and_missing` do).
pub(crate) fn parse(kvs: Vec<(Bytes, Bytes)>) -> Result<Parsed, PgError> {
    let mut p = Parsed::default();
    let mut fast = None;
    let mut purged = None;
    p.missing.may_include_deletes = false;
    let corrupt = |what: &str, e: denc::DecodeError| PgError::Corrupt(format!("{what}: {e}"));
    for (key, v) in kvs {
        if &key[..] == INFO_KEY.as_bytes() {
            p.info = Some(PgInfo::decode_all(v).map_err(|e| corrupt(INFO_KEY, e))?);
        } else if &key[..] == BIGINFO_KEY.as_bytes() {
            let (pi, ps) = decode_biginfo(v).map_err(|e| corrupt(BIGINFO_KEY, e))?;
            p.past_intervals = Some(pi);
            purged = Some(ps);
        } else if &key[..] == FASTINFO_KEY.as_bytes() {
            fast = Some(PgFastInfo::decode_all(v).map_err(|e| corrupt(FASTINFO_KEY, e))?);
        } else if &key[..] == INFOVER_KEY.as_bytes() {
            if v.first().is_some_and(|x| *x < PG_LATEST_STRUCT_V) {
                return Err(PgError::Corrupt(format!(
                    "pg struct_v {:?} is too old",
                    v.first()
                )));
            }
        } else if &key[..] == MAY_INCLUDE_DELETES_KEY.as_bytes() {
            p.missing.may_include_deletes = true;
        } else if key.starts_with(MISSING_PREFIX.as_bytes()) {
            let mut d = Decoder::new(v);
            let oid: HObject = d.decode().map_err(|e| corrupt("missing oid", e))?;
            let item: PgMissingItem = d.decode().map_err(|e| corrupt("missing item", e))?;
            p.missing.missing.insert(oid, item);
        }
    }
    if let Some(info) = &mut p.info {
        if let Some(ps) = purged {
            info.purged_snaps = ps;
        }
        if let Some(f) = fast {
            f.try_apply_to(info);
        }
    }
    Ok(p)
}

impl Pg {
    /// The info, past intervals, log and missing set as stored (what `peering::Pg::new` takes).
    pub fn meta(&self) -> PgMeta {
        PgMeta {
            info: self.info(),
            past_intervals: self.past_intervals.clone(),
            log: self.log.to_pg_log_t(),
            missing: self.missing.clone(),
        }
    }

    /// The current `pg_info_t` (last_update, last_complete, log tail, user version and object counts kept
    /// current by writes).
    pub fn info(&self) -> PgInfo {
        let mut i = self.info.clone();
        i.stats = self.info_stats();
        i.last_update = self.log.head;
        i.last_complete = if self.missing.is_empty() {
            self.log.complete
        } else {
            i.last_complete.min(self.log.complete)
        };
        i.log_tail = self.log.tail;
        i.last_user_version = self.log.last_user_version;
        i
    }

    /// `info().stats` without copying the rest of the info (what every MOSDRepOp carries as `pg_stats`).
    pub fn info_stats(&self) -> PgStat {
        let mut st = self.info.stats.clone();
        let sum = &mut st.stats.sum;
        sum.num_objects = self.stats.num_objects as i64;
        sum.num_bytes = self.stats.num_bytes as i64;
        sum.num_objects_omap = self.stats.num_omap_objects as i64;
        sum.num_rd = self.stats.num_rd as i64;
        sum.num_rd_kb = self.stats.num_rd_kb as i64;
        sum.num_wr = self.stats.num_wr as i64;
        sum.num_wr_kb = self.stats.num_wr_kb as i64;
        st.log_size = self.log.len() as i64;
        st.ondisk_log_size = st.log_size;
        st.version = self.log.head;
        st
    }

    /// The local missing set.
    pub fn missing(&self) -> &PgMissing {
        &self.missing
    }

    /// The `_fastinfo` key/value for the state after a write (last_update = `head`); built from the fields
    /// directly (a write must not clone the whole pg_info_t).
    pub(crate) fn fastinfo_kv(&self, head: Eversion, luv: u64) -> (Bytes, Bytes) {
        let st = &self.info.stats;
        let f = PgFastInfo {
            last_update: head,
            last_complete: if self.missing.is_empty() {
                head
            } else {
                self.info.last_complete.min(self.log.complete)
            },
            last_user_version: self.log.last_user_version.max(luv),
            stats_version: head,
            reported_seq: st.reported_seq,
            last_fresh: st.last_fresh,
            last_active: st.last_active,
            last_peered: st.last_peered,
            last_clean: st.last_clean,
            last_unstale: st.last_unstale,
            last_undegraded: st.last_undegraded,
            last_fullsized: st.last_fullsized,
            log_size: self.log.len() as i64,
            num_bytes: self.stats.num_bytes as i64,
            num_objects: self.stats.num_objects as i64,
            num_object_copies: st.stats.sum.num_object_copies,
            num_rd: self.stats.num_rd as i64,
            num_rd_kb: self.stats.num_rd_kb as i64,
            num_wr: self.stats.num_wr as i64,
            num_wr_kb: self.stats.num_wr_kb as i64,
            num_objects_dirty: st.stats.sum.num_objects_dirty,
        };
        (k(FASTINFO_KEY), osd_types::encode_sized(&f, 0, 256))
    }

    /// Apply peering's store writes, in order, as one store transaction (keys as Ceph's `write_if_dirty` writes
    /// them). Returns the store sequence number; peering's next messages may go once it is durable.
    pub fn persist<D: Device>(
        &mut self,
        store: &mut Store<D>,
        ps: &[peering::Persist],
        epoch: u32,
    ) -> Result<u64, PgError> {
        let meta = self.meta_key.clone();
        let mut t = Transaction::new();
        // pgmeta key changes in order, the last one for a key wins (log entries go into `t` directly)
        let mut kv: BTreeMap<Bytes, Option<Bytes>> = BTreeMap::new();
        // the log changed without a new info: write the info too (Ceph's dirty_info), so `_info` never claims a
        // last_update the log no longer has
        let mut dirty_info = false;
        for p in ps {
            match p {
                peering::Persist::Info { info, past_intervals } => {
                    self.info = (**info).clone();
                    self.past_intervals = past_intervals.clone();
                    self.epoch = self.epoch.max(epoch);
                    kv.insert(k(EPOCH_KEY), Some(epoch.to_bytes(0)));
                    kv.insert(
                        k(INFO_KEY),
                        Some(encode_info(&self.info, denc::CEPH_FEATURES_ALL)),
                    );
                    kv.insert(
                        k(BIGINFO_KEY),
                        Some(encode_biginfo(&self.past_intervals, &self.info.purged_snaps)),
                    );
                    // the full info supersedes the fast one
                    kv.insert(k(FASTINFO_KEY), None);
                    if self.info.last_update > self.log.head {
                        self.log.head = self.info.last_update;
                    }
                    self.log.last_user_version = self.log.last_user_version.max(self.info.last_user_version);
                    if self.info.log_tail > self.log.tail {
                        self.log.tail = self.info.log_tail;
                    }
                    dirty_info = false;
                }
                peering::Persist::LogRemove(vs) => {
                    for key in self.log.remove_versions(vs) {
                        kv.insert(key, None);
                    }
                    self.info.last_update = self.log.head;
                    dirty_info = true;
                }
                peering::Persist::LogAppend(entries) => {
                    for e in entries {
                        if e.version <= self.log.head {
                            continue;
                        }
                        self.log.write_ops(e, &self.cid, &meta, &mut t, Trim::Policy);
                        self.log.record(e.clone(), u64::MAX, Trim::Policy);
                        kv.remove(osd_types::pg_log::eversion_key(e.version).as_bytes());
                        dirty_info = true;
                    }
                }
                peering::Persist::Missing(m) => {
                    for oid in self.missing.missing.keys() {
                        if !m.missing.contains_key(oid) {
                            kv.insert(Bytes::from(missing_key(oid)), None);
                        }
                    }
                    for (oid, item) in &m.missing {
                        if self.missing.missing.get(oid) != Some(item) {
                            let mut e = denc::Encoder::new(denc::features::MASK_SERVER_OCTOPUS);
                            e.encode(oid);
                            e.encode(item);
                            kv.insert(Bytes::from(missing_key(oid)), Some(e.into_bytes()));
                        }
                    }
                    if m.may_include_deletes && !self.missing.may_include_deletes {
                        kv.insert(k(MAY_INCLUDE_DELETES_KEY), Some(Bytes::new()));
                    }
                    self.missing = m.clone();
                    osd_types::owned::Owned::own_buffers(&mut self.missing);
                }
                peering::Persist::RemoveObject(oid) => {
                    let okey = keys::object_key(oid, &self.spgid);
                    if store.exists(&self.cid, &okey)? {
                        let before = self.object_footprint(store, oid)?;
                        self.stats_remove(before);
                        t.push(Op::Remove {
                            cid: self.cid.clone(),
                            oid: okey,
                        });
                    }
                }
            }
        }
        if dirty_info {
            let info = self.info();
            kv.insert(k(INFO_KEY), Some(encode_info(&info, denc::CEPH_FEATURES_ALL)));
            kv.insert(k(FASTINFO_KEY), None);
        }
        let (mut set, mut rm) = (Vec::new(), Vec::new());
        for (key, v) in kv {
            match v {
                Some(v) => set.push((key, v)),
                None => rm.push(key),
            }
        }
        if !set.is_empty() {
            t.push(Op::OmapSetKeys {
                cid: self.cid.clone(),
                oid: meta.clone(),
                kvs: set,
            });
        }
        if !rm.is_empty() {
            t.push(Op::OmapRmKeys {
                cid: self.cid.clone(),
                oid: meta,
                keys: rm,
            });
        }
        let seq = self.queue(store, &t)?;
        self.log.fix_pending(u64::MAX, seq);
        Ok(seq)
    }
}
