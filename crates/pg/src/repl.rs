// SPDX-License-Identifier: LGPL-3.0-or-later
//! Replication, storage side: the primary's write as a Ceph transaction plus log entries ([`RepOp`], what
//! MOSDRepOp carries), the reply gate that waits for every replica's commit, and the replica applying rep ops
//! (`ReplicatedBackend::do_repop` + `log_operation`: the transaction, the log entries appended to the pgmeta log,
//! the log trimmed to the primary's `pg_trim_to`, `last_update` advanced, `_fastinfo` written).

use std::collections::BTreeSet;

use bytes::Bytes;
use ceph_msgs::osd_rep::{CEPH_OSD_FLAG_ONDISK, MOSDRepOp, TraceInfo};
use denc::{Eversion, HObject, OsdReqId, PgShard};
use ferrostore::{Device, Op, Store};
use osd_types::PgLogEntry;
use osd_types::transaction::Transaction;

use crate::log::Trim;
use crate::{Outputs, Pg, PgError, keys, txn};

/// One replicated write, as the primary made it: enough to build `MOSDRepOp` (see [`RepOp::to_message`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RepOp {
    /// The object written (`poid`).
    pub soid: HObject,
    pub reqid: OsdReqId,
    /// The version of the last log entry (`version`).
    pub at_version: Eversion,
    /// The primary trimmed its log up to here (`pg_trim_to`); replicas trim the same.
    pub trim_to: Eversion,
    /// The log entries (`logbl`), oldest first: a CLONE entry may precede the op's own.
    pub log_entries: Vec<PgLogEntry>,
    /// The object changes (`op_t`); empty for a write that only logs (an error entry).
    pub txn: Transaction,
    /// `txn` encoded (MOSDRepOp's data segment) as a chain of buffers: the write payload pieces are the
    /// client's own `Bytes` (no copy); shared by every replica, and sent as the message's data rope
    /// (`Message::data` + `data_tail`). [`RepOp::txn_bytes`] flattens it (tests).
    pub txn_data: Vec<Bytes>,
    flat: std::sync::OnceLock<Bytes>,
    /// `log_entries` encoded (MOSDRepOp's `logbl`): the same for every replica, so encoded once.
    logbl: std::sync::OnceLock<Bytes>,
    /// The first encoded MOSDRepOp front and what it was built for: every replica of a write gets the same
    /// front (same epochs, sender and features), so the second one reuses it.
    front: std::sync::OnceLock<(FrontKey, Bytes)>,
    /// The replicas it must reach; the client reply waits for each one's [`Pg::on_rep_commit`].
    pub replicas: Vec<i32>,
    /// The primary's own store transaction for it.
    pub seq: u64,
}

impl RepOp {
    /// The encoded transaction in one buffer, built on first use; this concatenation copies the payload, so
    /// messages carry `txn_data` as a rope instead.
    pub fn txn_bytes(&self) -> Bytes {
        self.flat
            .get_or_init(|| match self.txn_data.as_slice() {
                [one] => one.clone(),
                many => {
                    let mut m = bytes::BytesMut::with_capacity(many.iter().map(Bytes::len).sum());
                    for p in many {
                        m.extend_from_slice(p);
                    }
                    m.freeze()
                }
            })
            .clone()
    }

    /// The log entries as MOSDRepOp carries them (`logbl`), encoded on first use.
    pub fn logbl(&self) -> &Bytes {
        self.logbl.get_or_init(|| {
            osd_types::encode_sized(
                &self.log_entries,
                denc::CEPH_FEATURES_ALL,
                16 + 320 * self.log_entries.len(),
            )
        })
    }

    /// The wire MOSDRepOp for one replica: the front of [`RepOp::to_message`] (encoded once per rep op while the
    /// epochs, sender and features stay the same) and, `with_data`, the shared transaction bytes as the data
    /// segment (without it the transaction is empty: log entries only, for a backfill target the cursor has
    /// not passed yet).
    #[allow(clippy::too_many_arguments)] // the MOSDRepOp fields that vary per send
    pub fn message(
        &self,
        pg: &Pg,
        map_epoch: u32,
        min_epoch: u32,
        from: PgShard,
        min_last_complete_ondisk: Eversion,
        features: u64,
        with_data: bool,
    ) -> ceph_msgs::Message {
        use ceph_msgs::CephMessage as _;
        let key = FrontKey {
            map_epoch,
            min_epoch,
            from,
            min_last_complete_ondisk,
            features,
        };
        let encode = || {
            let m = self.message_front(pg, map_epoch, min_epoch, from, min_last_complete_ondisk);
            m.to_message(features)
        };
        let mut msg = match self.front.get() {
            Some((k, front)) if *k == key => ceph_msgs::Message {
                msg_type: MOSDRepOp::TYPE,
                version: MOSDRepOp::HEAD_VERSION,
                compat_version: MOSDRepOp::COMPAT_VERSION,
                priority: MOSDRepOp::PRIORITY,
                tid: 0,
                front: front.clone(),
                middle: Bytes::new(),
                data: Bytes::new(),
                data_tail: Vec::new(),
                data_off: 0,
            },
            Some(_) => encode(),
            None => {
                let msg = encode();
                let _ = self.front.set((key, msg.front.clone()));
                msg
            }
        };
        // without data the segment holds an empty transaction, as MOSDRepOp's encoding of one
        if with_data {
            // the rope by reference: the client's payload is not copied for the replicas
            let mut pieces = self.txn_data.iter();
            msg.data = pieces.next().cloned().unwrap_or_default();
            msg.data_tail = pieces.cloned().collect();
            msg.data_off = self.data_off();
        } else {
            use denc::Encode as _;
            msg.data = Transaction::default().to_bytes(features);
        }
        msg
    }

    /// `ceph_msg_header2::data_off` for the data segment, as Ceph's primary sets it
    /// (`Transaction::get_data_alignment`): the page offset at which the segment must start for the largest
    /// write payload in it to start a page, so the replica receives that payload page-aligned and writes it
    /// without a bounce copy. 0 without write data.
    pub fn data_off(&self) -> u16 {
        let d = &self.txn.data;
        if d.largest_data_len == 0 {
            return 0;
        }
        // the payload follows the transaction's struct header (v, compat, le32 length) and data_bl's le32 length
        let at = d.largest_data_off_in_data_bl as usize + 1 + 1 + 4 + 4;
        ((PAGE_SIZE - at % PAGE_SIZE) % PAGE_SIZE) as u16
    }

    /// [`RepOp::to_message`] without the transaction (no copy of it: the data segment carries it).
    fn message_front(
        &self,
        pg: &Pg,
        map_epoch: u32,
        min_epoch: u32,
        from: PgShard,
        min_last_complete_ondisk: Eversion,
    ) -> MOSDRepOp {
        MOSDRepOp {
            map_epoch,
            min_epoch,
            trace: TraceInfo::default(),
            reqid: self.reqid,
            pgid: pg.spgid(),
            poid: self.soid.clone(),
            acks_wanted: CEPH_OSD_FLAG_ONDISK,
            version: self.at_version,
            logbl: self.logbl().clone(),
            pg_stats: pg.info_stats(),
            pg_trim_to: self.trim_to,
            new_temp_oid: HObject::default(),
            discard_temp_oid: HObject::default(),
            from,
            updated_hit_set_history: None,
            min_last_complete_ondisk,
            op_t: Transaction::default(),
        }
    }

    /// The `MOSDRepOp` for one replica (`pg_stats` from [`Pg::info`]; `from` is the primary's shard).
    pub fn to_message(
        &self,
        pg: &Pg,
        map_epoch: u32,
        min_epoch: u32,
        from: PgShard,
        min_last_complete_ondisk: Eversion,
    ) -> MOSDRepOp {
        MOSDRepOp {
            op_t: self.txn.clone(),
            ..self.message_front(pg, map_epoch, min_epoch, from, min_last_complete_ondisk)
        }
    }
}

/// `CEPH_PAGE_SIZE`: the alignment `data_off` asks the receiver for.
const PAGE_SIZE: usize = 4096;

/// What an encoded MOSDRepOp front depends on besides the rep op itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FrontKey {
    map_epoch: u32,
    min_epoch: u32,
    from: PgShard,
    min_last_complete_ondisk: Eversion,
    features: u64,
}

/// Before/after of one object for statistics: (exists, size, has omap).
pub(crate) type Footprint = Option<(u64, bool)>;

impl Pg {
    /// Make this PG a primary (executes client ops; the default) or a replica (never executes client ops:
    /// [`Pg::handle_op`] drops them; applies [`Pg::apply_rep_op`]).
    pub fn set_primary(&mut self, primary: bool) {
        if primary != self.primary {
            // a replica's objects may have been changed by recovery code outside the PG: start afresh
            self.obc.clear();
        }
        self.primary = primary;
    }
    pub fn is_primary(&self) -> bool {
        self.primary
    }

    /// The acting replicas (OSD ids, not this one) every later write is sent to; the client reply of each write
    /// waits for all of them ([`Pg::on_rep_commit`]). Writes still waiting for replicas that are no longer in
    /// the set stop waiting for them (a new interval: peering makes those replicas consistent).
    pub fn set_replicas(&mut self, replicas: Vec<i32>) -> Outputs {
        let keep: BTreeSet<i32> = replicas.iter().copied().collect();
        for w in self.waiting.values_mut() {
            w.retain(|o| keep.contains(o));
        }
        self.waiting.retain(|_, w| !w.is_empty());
        self.replicas = replicas;
        let mut out = Outputs::default();
        self.release(&mut out);
        out
    }
    pub fn replicas(&self) -> &[i32] {
        &self.replicas
    }

    /// Replica `from` reports the rep op at `version` committed (MOSDRepOpReply ONDISK): replies whose writes
    /// every replica has now committed (and that are durable here) are released.
    pub fn on_rep_commit(&mut self, from: i32, version: Eversion) -> Outputs {
        if let Some(w) = self.waiting.get_mut(&version) {
            w.remove(&from);
            if w.is_empty() {
                self.waiting.remove(&version);
            }
        }
        let mut out = Outputs::default();
        self.release(&mut out);
        out
    }

    /// Replicated writes not yet committed by every replica.
    pub fn unreplicated(&self) -> usize {
        self.waiting.len()
    }

    /// Primary: queue object ops + log entries (a CLONE entry first if the op made one, then the op's own) as
    /// one store transaction through the Ceph transaction ops, and make the rep op. The op's entry is recorded
    /// only if the store takes the transaction (a CLONE entry already is).
    pub(crate) fn commit_write<D: Device>(
        &mut self,
        store: &mut Store<D>,
        obj_ops: Vec<Op>,
        (first, last): (Option<PgLogEntry>, PgLogEntry),
        known: Option<(ferrostore::ObjectKey, bool)>,
    ) -> Result<(u64, Option<RepOp>), PgError> {
        let op_object = self.op_object.take();
        let coll = denc::Coll::pg(self.spgid);
        // the store names of the PG's collection and of the op's object are known here: no parsing or rebuilding
        // them (seeds as slices of at most one: no vectors per write)
        let obj_seed = op_object.as_slice();
        let txops = txn::to_txops_seeded(&obj_ops, &[(self.cid.clone(), coll)], obj_seed)?;
        drop(obj_ops);
        // the Ceph encoding only for replicas: the primary applies the ops as they are
        let ceph = (!self.replicas.is_empty()).then(|| Transaction::from_ops(&txops));
        let known = known.map(|(k, e)| (self.cid.clone(), k, e));
        let key_seed = op_object.map(|(name, g)| {
            let k = ferrostore::ObjectKey::new(g.hobj.hash, name);
            (g, k)
        });
        let mut t = txn::translate_ops(
            store,
            txops,
            known.as_slice(),
            &[(coll, self.cid.clone())],
            key_seed.as_slice(),
        )?;
        let meta = self.meta_key.clone();
        let mut all = Vec::with_capacity(if self.replicas.is_empty() { 0 } else { 2 });
        if let Some(e) = first {
            self.log.write_ops(&e, &self.cid, &meta, &mut t, Trim::Policy);
            all.push(e.clone());
            self.log.record(e, u64::MAX, Trim::Policy);
        }
        let provisional = !all.is_empty();
        self.log.write_ops(&last, &self.cid, &meta, &mut t, Trim::Policy);
        let luv = self.log.last_user_version.max(last.user_version);
        let fast = self.fastinfo_kv(last.version, luv);
        add_meta_kv(&mut t, &self.cid, &meta, fast);
        match self.queue(store, &t) {
            Ok(seq) => {
                if provisional {
                    self.log.fix_pending(u64::MAX, seq);
                }
                let (soid, reqid, version) = (last.soid.clone(), last.reqid, last.version);
                if ceph.is_some() {
                    all.push(last.clone());
                }
                self.log.record(last, seq, Trim::Policy);
                let rep = if let Some(ceph) = ceph {
                    // The seeded bug (`PgConfig::fault_ack_before_replicas`) skips the wait for replicas.
                    if !self.cfg.fault_ack_before_replicas {
                        self.waiting
                            .insert(version, self.replicas.iter().copied().collect());
                    }
                    Some(RepOp {
                        soid,
                        reqid,
                        at_version: version,
                        trim_to: self.log.tail,
                        log_entries: all,
                        txn_data: ceph.encode_rope(),
                        flat: std::sync::OnceLock::new(),
                        logbl: std::sync::OnceLock::new(),
                        front: std::sync::OnceLock::new(),
                        txn: ceph,
                        replicas: self.replicas.clone(),
                        seq,
                    })
                } else {
                    None
                };
                Ok((seq, rep))
            }
            Err(e) => {
                if provisional {
                    self.log.fix_pending(u64::MAX, 0);
                }
                Err(e.into())
            }
        }
    }

    /// Replica: apply a rep op (its Ceph transaction and log entries; the log trimmed to `trim_to`) as one
    /// store transaction. Returns the store sequence number: answer MOSDRepOpReply ONDISK once it is durable.
    /// An empty transaction means the primary did not send the object changes (this shard misses the object):
    /// the entries are logged and the object stays missing at the newer version. If the store refuses the
    /// transaction, the PG's state is reloaded from the store (nothing of the rep op remains) and the error
    /// returned.
    pub fn apply_rep_op<D: Device>(
        &mut self,
        store: &mut Store<D>,
        txn: &Transaction,
        log_entries: &[PgLogEntry],
        trim_to: Eversion,
    ) -> Result<u64, PgError> {
        self.apply_rep_op_stats(store, txn, log_entries, trim_to, None)
    }

    /// [`Pg::apply_rep_op`]; with `primary_stats` (MOSDRepOp's `pg_stats`) the object counts are the
    /// primary's, as a Ceph replica takes them (`update_stats`), instead of looking every written object up
    /// before and after (two getattrs and two `object_info_t` decodes per object).
    fn apply_rep_op_stats<D: Device>(
        &mut self,
        store: &mut Store<D>,
        txn: &Transaction,
        log_entries: &[PgLogEntry],
        trim_to: Eversion,
        primary_stats: Option<&osd_types::pg_stat::PgStat>,
    ) -> Result<u64, PgError> {
        if !log_entries.is_empty() && log_entries.iter().all(|e| e.version <= self.log.head) {
            // a rep op this shard already applied (a resend): nothing to do but answer again
            return Ok(store.queue_transaction(&ferrostore::Transaction::new())?);
        }
        let mut t = txn::translate_seeded(
            store,
            txn,
            &[],
            &[(denc::Coll::pg(self.spgid), self.cid.clone())],
            &[],
        )?;
        let meta = self.meta_key.clone();
        let objs: BTreeSet<HObject> = match primary_stats {
            Some(_) => BTreeSet::new(),
            None => log_entries.iter().map(|e| e.soid.clone()).collect(),
        };
        let mut before = Vec::with_capacity(objs.len());
        for o in &objs {
            before.push(self.object_footprint(store, o)?);
        }
        let entries: Vec<&PgLogEntry> = log_entries.iter().filter(|e| e.version > self.log.head).collect();
        for e in &entries {
            self.log.write_ops(e, &self.cid, &meta, &mut t, Trim::To(trim_to));
            // record below, after the store took the transaction; write_ops of the next entry must see this
            // one trimmed the same way, so record provisionally now
            self.log.record((*e).clone(), u64::MAX, Trim::To(trim_to));
        }
        let applied = !txn.is_empty();
        let mut missing_changed = Vec::new();
        for e in &entries {
            if e.is_error() {
                continue;
            }
            if !applied || self.missing.is_missing(&e.soid) {
                self.missing.add(
                    owned_hobject(&e.soid),
                    e.version,
                    e.prior_version,
                    e.op == osd_types::log_op::DELETE,
                );
                missing_changed.push(e.soid.clone());
            }
        }
        if !missing_changed.is_empty() {
            let mut kvs = Vec::new();
            for oid in &missing_changed {
                if let Some(item) = self.missing.missing.get(oid) {
                    let mut en = denc::Encoder::new(denc::features::MASK_SERVER_OCTOPUS);
                    en.encode(oid);
                    en.encode(item);
                    kvs.push((Bytes::from(osd_types::pgmeta::missing_key(oid)), en.into_bytes()));
                }
            }
            t.push(Op::OmapSetKeys {
                cid: self.cid.clone(),
                oid: meta.clone(),
                kvs,
            });
        }
        // (a refused transaction reloads everything, stats included, from the store)
        if let Some(st) = primary_stats {
            let sum = &st.stats.sum;
            let n = |v: i64| v.max(0) as u64;
            self.stats.num_objects = n(sum.num_objects);
            self.stats.num_bytes = n(sum.num_bytes);
            self.stats.num_omap_objects = n(sum.num_objects_omap);
            self.stats.num_rd = n(sum.num_rd);
            self.stats.num_rd_kb = n(sum.num_rd_kb);
            self.stats.num_wr = n(sum.num_wr);
            self.stats.num_wr_kb = n(sum.num_wr_kb);
        }
        let fast = self.fastinfo_kv(self.log.head, self.log.last_user_version);
        add_meta_kv(&mut t, &self.cid, &meta, fast);
        let seq = match self.queue(store, &t) {
            Ok(seq) => seq,
            Err(e) => {
                // the log and missing set took the entries already: go back to what the store holds
                self.load(store)?;
                return Err(e.into());
            }
        };
        self.log.fix_pending(u64::MAX, seq);
        for (o, b) in objs.iter().zip(before) {
            let a = self.object_footprint(store, o)?;
            self.stats_change(b, a);
        }
        Ok(seq)
    }

    /// [`Pg::apply_rep_op`] for a received `MOSDRepOp`.
    pub fn apply_rep_op_msg<D: Device>(
        &mut self,
        store: &mut Store<D>,
        m: &MOSDRepOp,
    ) -> Result<u64, PgError> {
        let entries = m
            .log_entries()
            .map_err(|e| PgError::Transaction(format!("log entries: {e}")))?;
        self.apply_rep_op_entries(store, m, &entries)
    }

    /// [`Pg::apply_rep_op_msg`] with `m.logbl` already decoded into `entries` (a caller that keeps the entries
    /// for its own log decodes them once).
    pub fn apply_rep_op_entries<D: Device>(
        &mut self,
        store: &mut Store<D>,
        m: &MOSDRepOp,
        entries: &[PgLogEntry],
    ) -> Result<u64, PgError> {
        self.apply_rep_op_stats(store, &m.op_t, entries, m.pg_trim_to, Some(&m.pg_stats))
    }

    /// (size, has omap) of an object as stored, None if absent.
    pub(crate) fn object_footprint<D: Device>(
        &self,
        store: &mut Store<D>,
        oid: &HObject,
    ) -> Result<Footprint, PgError> {
        let okey = keys::object_key(oid, &self.spgid);
        match store.getattr(&self.cid, &okey, b"_") {
            Ok(bl) => match osd_types::ObjectInfo::decode_all(bl) {
                Ok(oi) => Ok(Some((oi.size, oi.test_flag(osd_types::oi_flag::OMAP)))),
                Err(_) => Ok(Some((0, false))),
            },
            Err(ferrostore::StoreError::NotFound | ferrostore::StoreError::NoData) => Ok(store
                .exists(&self.cid, &okey)
                .unwrap_or(false)
                .then_some((0, false))),
            Err(e) => Err(e.into()),
        }
    }

    pub(crate) fn stats_change(&mut self, before: Footprint, after: Footprint) {
        self.stats_remove(before);
        if let Some((size, omap)) = after {
            self.stats.num_objects += 1;
            self.stats.num_bytes += size;
            if omap {
                self.stats.num_omap_objects += 1;
            }
        }
    }

    pub(crate) fn stats_remove(&mut self, before: Footprint) {
        if let Some((size, omap)) = before {
            self.stats.num_objects = self.stats.num_objects.saturating_sub(1);
            self.stats.num_bytes = self.stats.num_bytes.saturating_sub(size);
            if omap {
                self.stats.num_omap_objects = self.stats.num_omap_objects.saturating_sub(1);
            }
        }
    }
}

use denc::Decode as _;

/// Add one pgmeta omap key to the transaction's last pgmeta `OmapSetKeys` (every write sets the log entry and
/// `_fastinfo`: one store op, one onode lookup, instead of two), or as an op of its own.
fn add_meta_kv(
    t: &mut ferrostore::Transaction,
    cid: &ferrostore::CollectionId,
    meta: &ferrostore::ObjectKey,
    kv: (Bytes, Bytes),
) {
    for op in t.ops.iter_mut().rev() {
        if let Op::OmapSetKeys { cid: c, oid, kvs } = op
            && c == cid
            && oid == meta
        {
            kvs.push(kv);
            return;
        }
    }
    t.push(Op::OmapSetKeys {
        cid: cid.clone(),
        oid: meta.clone(),
        kvs: vec![kv],
    });
}

/// A copy of `o` that shares no buffer (see `osd_types::owned`).
pub(crate) fn owned_hobject(o: &HObject) -> HObject {
    use osd_types::owned::Owned as _;
    let mut o = o.clone();
    o.own_buffers();
    o
}
