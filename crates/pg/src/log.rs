// SPDX-License-Identifier: LGPL-3.0-or-later
//! The PG log: `pg_log_entry_t`s in the pgmeta object's omap (keys `%010u.%020u`, values with a crc, as Ceph
//! writes them), trimmed into `pg_log_dup_t`s (keys `dup_…`); an in-memory index by reqid finds the original
//! result of a resent request, whether its entry is still in the log or only a dup.

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;
use denc::{Decode, Decoder, Encode, Encoder, Eversion, OsdReqId, SpgId};
use ferrostore::{CollectionId, Device, ObjectKey, Op, Store, Transaction};
use osd_types::owned::Owned;
use osd_types::pg_log::{dup_key, eversion_key};
use osd_types::{OpReturnItem, PgLogDup, PgLogEntry};

use crate::{PgConfig, PgError, keys};

/// The record earlier versions kept instead of pg_info_t (last_update, last_user_version); read, never written.
const LEGACY_INFO_KEY: &[u8] = b"_ferro_info";

/// How a log append trims the oldest entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trim {
    /// The primary's policy (`calc_trim_to`).
    Policy,
    /// Up to this version (a replica follows its primary's `pg_trim_to`).
    To(Eversion),
}

/// What a reqid lookup finds: the original outcome of the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub version: Eversion,
    pub user_version: u64,
    pub return_code: i32,
    pub op_returns: Vec<OpReturnItem>,
}

#[derive(Debug, Default)]
pub(crate) struct PgLog {
    /// `last_update`.
    pub head: Eversion,
    /// `log_tail`: the version of the newest trimmed entry (entries are newer).
    pub tail: Eversion,
    /// `last_complete` (durable).
    pub complete: Eversion,
    pub last_user_version: u64,
    /// Entries and dups in version order; they own their bytes (`Owned::own_buffers`), so a long log never
    /// keeps the messages it came from alive.
    entries: VecDeque<PgLogEntry>,
    dups: VecDeque<PgLogDup>,
    /// reqid → version of its entry or dup (found there by binary search: the outcome is stored once).
    index: HashMap<OsdReqId, Eversion, ferrostore::hash::SeededKeys>,
    /// (store seq, version) of entries not yet durable.
    pending: VecDeque<(u64, Eversion)>,
    min_entries: usize,
    max_entries: usize,
    max_dups: usize,
    trim_min: usize,
}

/// `osd_pg_log_trim_max`: at most this many entries are trimmed by one write.
const OSD_PG_LOG_TRIM_MAX: usize = 10_000;

fn is_entry_key(k: &[u8]) -> bool {
    k.len() == 31 && k[10] == b'.' && k.iter().enumerate().all(|(i, c)| i == 10 || c.is_ascii_digit())
}

impl PgLog {
    pub fn new(cfg: &PgConfig) -> Self {
        PgLog {
            min_entries: cfg.osd_min_pg_log_entries.max(1),
            max_entries: cfg.osd_max_pg_log_entries.max(cfg.osd_min_pg_log_entries.max(1)),
            max_dups: cfg.osd_pg_log_dups_tracked,
            trim_min: cfg.osd_pg_log_trim_min,
            ..Default::default()
        }
    }

    /// The transaction that creates the PG's collection and pgmeta object with the given omap keys.
    pub fn create_txn(
        &self,
        spgid: &SpgId,
        cid: &CollectionId,
        pg_num: u32,
        kvs: Vec<(Bytes, Bytes)>,
    ) -> Transaction {
        let mut t = Transaction::new();
        let bits = spgid.pgid.get_split_bits(pg_num);
        t.push(Op::CreateCollection {
            cid: cid.clone(),
            bits,
        });
        let meta = keys::pgmeta_key(spgid);
        t.push(Op::Touch {
            cid: cid.clone(),
            oid: meta.clone(),
        });
        t.push(Op::OmapSetKeys {
            cid: cid.clone(),
            oid: meta,
            kvs,
        });
        t
    }

    /// Read the log, dups and the other pgmeta keys (returned raw for the caller: `_info`, `missing/…`).
    pub fn load<D: Device>(
        store: &mut Store<D>,
        spgid: &SpgId,
        cid: &CollectionId,
        cfg: &PgConfig,
    ) -> Result<(Self, Vec<(Bytes, Bytes)>), PgError> {
        let mut log = PgLog::new(cfg);
        let mut other = Vec::new();
        let meta = keys::pgmeta_key(spgid);
        let mut start: Vec<u8> = Vec::new();
        loop {
            let batch = store.omap_iterate(cid, &meta, &start, 1024)?;
            let Some((last, _)) = batch.last() else { break };
            let mut next = last.to_vec();
            next.push(0);
            for (k, v) in batch {
                if is_entry_key(&k) {
                    let mut e =
                        PgLogEntry::decode_with_checksum(&mut Decoder::new(v.clone())).map_err(|e| {
                            PgError::Corrupt(format!("log entry {}: {e}", String::from_utf8_lossy(&k)))
                        })?;
                    e.own_buffers();
                    log.entries.push_back(e);
                } else if k.starts_with(b"dup_") {
                    let mut d = PgLogDup::decode_all(v.clone())
                        .map_err(|e| PgError::Corrupt(format!("dup {}: {e}", String::from_utf8_lossy(&k))))?;
                    d.own_buffers();
                    log.dups.push_back(d);
                } else if &k[..] == LEGACY_INFO_KEY {
                    // written by earlier versions of this crate instead of pg_info_t
                    let mut d = Decoder::new(v.clone());
                    let (head, luv) = d
                        .decode_struct("ferro_info", 1, |_, d| Ok((d.decode::<Eversion>()?, d.u64()?)))
                        .map_err(|e| PgError::Corrupt(format!("info: {e}")))?;
                    log.head = head;
                    log.last_user_version = luv;
                } else {
                    other.push((k, v));
                }
            }
            start = next;
        }
        for e in &log.entries {
            log.head = log.head.max(e.version);
            log.last_user_version = log.last_user_version.max(e.user_version);
        }
        log.sort_and_index();
        log.complete = log.head;
        Ok((log, other))
    }

    /// The log as peering ships it (`pg_log_t`).
    pub fn to_pg_log_t(&self) -> osd_types::pg_log_t::PgLog {
        osd_types::pg_log_t::PgLog {
            head: self.head,
            tail: self.tail,
            log: self.entries.iter().cloned().collect(),
            can_rollback_to: self.head,
            rollback_info_trimmed_to: self.head,
            dups: self.dups.iter().cloned().collect(),
        }
    }

    /// Forget entries (divergent ones peering drops); returns the omap keys to remove. `last_update` falls back
    /// to the newest entry left (or the tail).
    pub fn remove_versions(&mut self, versions: &[Eversion]) -> Vec<Bytes> {
        let mut keys = Vec::new();
        self.entries.retain(|e| {
            if versions.contains(&e.version) {
                keys.push(Bytes::from(eversion_key(e.version)));
                false
            } else {
                true
            }
        });
        self.sort_and_index();
        self.head = self.entries.back().map_or(self.tail, |e| e.version);
        self.complete = self.complete.min(self.head);
        self.pending.retain(|(_, v)| !versions.contains(v));
        keys
    }

    /// Take the entries (and a copy of the dups) that belong to a child PG after a split (`split_out_child`).
    pub fn split_out(&mut self, child_seed: u32, bits: u32) -> (Vec<PgLogEntry>, Vec<PgLogDup>) {
        let mask = if bits >= 32 { u32::MAX } else { !(u32::MAX << bits) };
        let mut child = Vec::new();
        let mut keep = VecDeque::new();
        for e in self.entries.drain(..) {
            if e.soid.hash & mask == child_seed & mask {
                child.push(e);
            } else {
                keep.push_back(e);
            }
        }
        self.entries = keep;
        self.index.retain(|_, v| !child.iter().any(|e| e.version == *v));
        (child, self.dups.iter().cloned().collect())
    }

    /// A log made of given entries and dups (a split child), with the parent's head and tail.
    pub fn from_parts(
        cfg: &PgConfig,
        head: Eversion,
        tail: Eversion,
        entries: Vec<PgLogEntry>,
        dups: Vec<PgLogDup>,
    ) -> Self {
        let mut log = PgLog::new(cfg);
        log.head = head;
        log.tail = tail;
        log.complete = head;
        log.entries = entries.into();
        log.dups = dups.into();
        for e in log.entries.iter_mut() {
            e.own_buffers();
            log.last_user_version = log.last_user_version.max(e.user_version);
        }
        for d in log.dups.iter_mut() {
            d.own_buffers();
        }
        log.sort_and_index();
        log
    }

    /// The omap keys and values of every entry and dup (for writing a whole log, e.g. a split child's).
    pub fn all_kvs(&self) -> Vec<(Bytes, Bytes)> {
        let mut kvs = Vec::with_capacity(self.entries.len() + self.dups.len());
        for e in &self.entries {
            let mut val = Encoder::new(denc::CEPH_FEATURES_ALL);
            e.encode_with_checksum(&mut val);
            kvs.push((Bytes::from(eversion_key(e.version)), val.into_bytes()));
        }
        for d in &self.dups {
            kvs.push((Bytes::from(dup_key(d.version)), d.to_bytes(0)));
        }
        kvs
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn next_version(&self, epoch: u32) -> Eversion {
        Eversion::new(epoch.max(self.head.epoch), self.head.version + 1)
    }

    /// The original outcome of request `reqid`, if the log or its dups still know it.
    pub fn lookup(&self, reqid: &OsdReqId) -> Option<Found> {
        let v = *self.index.get(reqid)?;
        if let Ok(i) = self.entries.binary_search_by(|e| e.version.cmp(&v)) {
            return self.entries.get(i).map(found_entry);
        }
        let i = self.dups.binary_search_by(|d| d.version.cmp(&v)).ok()?;
        self.dups.get(i).map(found_dup)
    }

    /// Keep entries and dups in version order (binary search) and rebuild the reqid index from them (an
    /// entry's reqid wins over a dup's).
    fn sort_and_index(&mut self) {
        self.entries.make_contiguous().sort_by_key(|e| e.version);
        self.dups.make_contiguous().sort_by_key(|d| d.version);
        self.index.clear();
        for d in &self.dups {
            self.index.insert(d.reqid, d.version);
        }
        for e in &self.entries {
            if e.reqid != OsdReqId::default() {
                self.index.insert(e.reqid, e.version);
            }
        }
    }

    /// The store operations that append `e` (version already assigned): the entry and the trimming of the oldest
    /// entries into dups (`trim`: as the primary's policy decides, or up to a version the primary sent). Nothing
    /// changes here until [`PgLog::record`], so a transaction the store refuses leaves the log as it was.
    pub fn write_ops(
        &self,
        e: &PgLogEntry,
        cid: &CollectionId,
        meta: &ObjectKey,
        t: &mut Transaction,
        trim: Trim,
    ) {
        let val = e.to_checksummed(denc::CEPH_FEATURES_ALL, 320);
        // (room for `_fastinfo`, which the PG adds to this op: see `add_meta_kv`)
        let mut kvs = Vec::with_capacity(2);
        kvs.push((Bytes::from(eversion_key(e.version)), val));
        let mut rm = Vec::new();
        let (trim, dup_trim) = self.trim_counts(trim);
        for old in self.entries.iter().take(trim) {
            rm.push(Bytes::from(eversion_key(old.version)));
            if old.reqid != OsdReqId::default() && self.max_dups > 0 {
                let d = PgLogDup::from_entry(old);
                kvs.push((Bytes::from(dup_key(d.version)), d.to_bytes(0)));
            }
        }
        // dups beyond the tracked number go, oldest first (possibly ones added just now)
        if dup_trim > 0 {
            let new_dups = self
                .entries
                .iter()
                .take(trim)
                .filter(|o| o.reqid != OsdReqId::default() && self.max_dups > 0)
                .map(|o| o.version);
            let gone: std::collections::HashSet<Bytes> = self
                .dups
                .iter()
                .map(|d| d.version)
                .chain(new_dups)
                .take(dup_trim)
                .map(|v| Bytes::from(dup_key(v)))
                .collect();
            kvs.retain(|(x, _)| !gone.contains(x));
            rm.extend(gone);
        }
        t.push(Op::OmapSetKeys {
            cid: cid.clone(),
            oid: meta.clone(),
            kvs,
        });
        if !rm.is_empty() {
            t.push(Op::OmapRmKeys {
                cid: cid.clone(),
                oid: meta.clone(),
                keys: rm,
            });
        }
    }

    /// (entries to trim, dups to drop) when one more entry is appended. As Ceph's calc_trim_to: the log is kept
    /// at its target length (`osd_min_pg_log_entries`), trimmed in batches of at least `osd_pg_log_trim_min`
    /// entries, and never longer than `osd_max_pg_log_entries`.
    fn trim_counts(&self, how: Trim) -> (usize, usize) {
        let trim = match how {
            Trim::Policy => {
                let n = self.entries.len() + 1;
                let over = n.saturating_sub(self.min_entries);
                if over >= self.trim_min.max(1) || n > self.max_entries {
                    over.min(OSD_PG_LOG_TRIM_MAX)
                } else {
                    0
                }
            }
            Trim::To(v) => self.entries.iter().take_while(|e| e.version <= v).count(),
        };
        let new_dups = if self.max_dups > 0 {
            self.entries
                .iter()
                .take(trim)
                .filter(|o| o.reqid != OsdReqId::default())
                .count()
        } else {
            0
        };
        let dups = self.dups.len() + new_dups;
        (trim, dups.saturating_sub(self.max_dups))
    }

    /// `e`, whose [`PgLog::write_ops`] went into store transaction `seq`, is now part of the log.
    pub fn record(&mut self, mut e: PgLogEntry, seq: u64, how: Trim) {
        debug_assert!(e.version > self.head, "log versions must grow");
        // the entry stays for hundreds of writes: it must not keep its message's buffers alive
        e.own_buffers();
        let (trim, dup_trim) = self.trim_counts(how);
        self.head = e.version;
        if e.user_version > self.last_user_version {
            self.last_user_version = e.user_version;
        }
        if e.reqid != OsdReqId::default() {
            self.index.insert(e.reqid, e.version);
        }
        self.entries.push_back(e);
        for _ in 0..trim {
            let Some(old) = self.entries.pop_front() else {
                break;
            };
            self.tail = old.version;
            if old.reqid != OsdReqId::default() && self.max_dups > 0 {
                self.dups.push_back(PgLogDup::from_entry(&old));
            } else if self.index.get(&old.reqid).is_some_and(|v| *v == old.version) {
                self.index.remove(&old.reqid);
            }
        }
        for _ in 0..dup_trim {
            let Some(d) = self.dups.pop_front() else { break };
            if self.index.get(&d.reqid).is_some_and(|v| *v == d.version) {
                self.index.remove(&d.reqid);
            }
        }
        self.pending.push_back((seq, self.head));
    }

    /// Re-label pending entries recorded with a provisional sequence number.
    pub fn fix_pending(&mut self, from: u64, to: u64) {
        for p in self.pending.iter_mut() {
            if p.0 == from {
                p.0 = to;
            }
        }
    }

    pub fn on_durable(&mut self, seq: u64) {
        while self.pending.front().is_some_and(|(s, _)| *s <= seq) {
            if let Some((_, v)) = self.pending.pop_front() {
                self.complete = self.complete.max(v);
            }
        }
    }

    /// Store sequence number that makes `v` durable, if it is still pending.
    pub fn seq_for(&self, v: Eversion) -> Option<u64> {
        self.pending.iter().find(|(_, pv)| *pv >= v).map(|(s, _)| *s)
    }
}

fn found_entry(e: &PgLogEntry) -> Found {
    Found {
        version: e.version,
        user_version: e.user_version,
        return_code: e.return_code,
        op_returns: e.op_returns.clone(),
    }
}

fn found_dup(d: &PgLogDup) -> Found {
    Found {
        version: d.version,
        user_version: d.user_version,
        return_code: d.return_code,
        op_returns: d.op_returns.clone(),
    }
}
