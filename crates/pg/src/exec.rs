// SPDX-License-Identifier: LGPL-3.0-or-later
//! Op execution with PrimaryLogPG's semantics (16.2): `do_op` checks, `do_osd_ops` per op, then
//! `prepare_transaction`/`finish_ctx` (object info, snapset, log entry) and `execute_ctx`'s reply rules.
//!
//! Reads inside an op see the object as it is in the store before the op (as Ceph's do); the op's own changes
//! are collected into one ferrostore transaction, applied only if the whole op succeeds.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use ceph_msgs::osd_op::{MOSDOp, MOSDOpReply, OSDOp, cmpxattr, flag, op, op_flag, watch_op};
use denc::{
    Decode, Decoder, Encode, Encoder, EntityAddr, EntityNameT, Eversion, HObject, OsdReqId, SnapId, Utime,
};
use ferrostore::{CollectionId, Device, ObjectKey, Op, Store, StoreError, Transaction};
use osd_types::{
    ListObject, ObjListWatchResponse, ObjectCleanRegions, ObjectInfo, ObjectModDesc, OpReturnItem,
    PgLogEntry, PgNlsResponse, SnapSet, WatchInfo, WatchItem, log_op, oi_flag,
};

use crate::caps::{CapNeed, ClassCall};
use crate::watch::Msgs;
use crate::{ConnId, OpContext, Outputs, Pg, PgError, PgStats, cls, keys};

const MAX_ERRNO: i32 = 4095;
const OSD_MAX_PGLS: u64 = 1024;
const OSD_MAX_ATTR_NAME_LEN: u32 = 100;
/// `osd_max_write_op_reply_len`: 64 since 16.2.15 (pr#53470).
const OSD_MAX_WRITE_OP_REPLY_LEN: usize = 64;
const HIT_SET_NAMESPACE: &[u8] = b".ceph-internal";
/// `librados::all_nspaces`.
const ALL_NSPACES: &[u8] = b"\x01";
const OI_ATTR: &[u8] = b"_";
const SS_ATTR: &[u8] = b"snapset";

fn store_errno(e: &StoreError) -> i32 {
    -e.errno()
}

fn kb(n: u64) -> i64 {
    n.div_ceil(1024) as i64
}

/// Ceph's OpInfo for a request.
struct OpInfo {
    read: bool,
    write: bool,
    pg_op: bool,
    class_read: bool,
    class_write: bool,
    classes: Vec<ClassCall>,
}

impl OpInfo {
    fn may_write(&self) -> bool {
        self.write || self.class_write
    }
}

/// `OpInfo::set_from_op`.
fn op_info(m: &MOSDOp) -> Result<OpInfo, i32> {
    let mut i = OpInfo {
        read: false,
        write: false,
        pg_op: false,
        class_read: false,
        class_write: false,
        classes: Vec::new(),
    };
    let mut any = false;
    for o in &m.ops {
        if o.op == op::WATCH && o.watch().op == watch_op::PING {
            // a ping is ordered with writes but is not one
        } else if op::is_write(o.op) {
            i.write = true;
            any = true;
        }
        if op::is_read(o.op) {
            i.read = true;
            any = true;
        }
        if op::is_pg_op(o.op) {
            i.pg_op = true;
            any = true;
        }
        if o.op & op::MODE_CACHE != 0 {
            any = true;
        }
        match o.op {
            op::CALL => {
                let a = o.cls();
                let (cl, ml) = (usize::from(a.class_len), usize::from(a.method_len));
                let c = o.indata.get(..cl).ok_or(-libc::EINVAL)?;
                let me = o.indata.get(cl..cl + ml).ok_or(-libc::EINVAL)?;
                let flags = cls::method_flags(c, me).ok_or_else(|| cls::unknown_call_errno(c))?;
                let (r, w) = (flags & cls::CLS_METHOD_RD != 0, flags & cls::CLS_METHOD_WR != 0);
                i.class_read |= r;
                i.class_write |= w;
                any |= r || w;
                i.classes.push(ClassCall {
                    class: String::from_utf8_lossy(c).into_owned(),
                    method: String::from_utf8_lossy(me).into_owned(),
                    read: r,
                    write: w,
                    allowed: true,
                });
            }
            op::WATCH => {
                i.read = true;
                any = true;
            }
            _ => {}
        }
    }
    if !any {
        return Err(-libc::EINVAL);
    }
    Ok(i)
}

/// `reply_op_error`: a reply with no data, the given versions and per-op results.
pub(crate) fn reply_error(
    m: &MOSDOp,
    err: i32,
    epoch: u32,
    v: Eversion,
    uv: u64,
    op_returns: &[OpReturnItem],
) -> MOSDOpReply {
    let mut r = MOSDOpReply::for_request(m, err, epoch, m.flags & (flag::ACK | flag::ONDISK));
    r.set_reply_versions(v, uv);
    if !op_returns.is_empty() {
        r.ops.resize(op_returns.len(), OSDOp::default());
        for (o, ret) in r.ops.iter_mut().zip(op_returns) {
            o.rval = ret.rval;
            o.outdata = ret.bl.clone();
        }
    }
    r
}

pub(crate) fn handle_op<D: Device>(pg: &mut Pg, store: &mut Store<D>, mut ctx: OpContext<'_>) -> Outputs {
    let mut out = Outputs::default();
    let m = &ctx.msg;
    let epoch = ctx.epoch;
    let send_now = |out: &mut Outputs, r: MOSDOpReply| out.replies.push((ctx.conn, r));

    if m.osdmap_epoch < pg.discard_before {
        return out;
    }
    // an object this PG does not hold (a client with an old map): Ceph drops the op; the client resends
    let head = HObject::new(
        m.oid.0.clone(),
        m.oloc.key.clone(),
        SnapId::NOSNAP,
        m.hash,
        pg.spgid.pgid.pool as i64,
        m.oloc.nspace.clone(),
    );
    if !m.ops.iter().any(|o| op::is_pg_op(o.op))
        && !pg
            .spgid
            .pgid
            .contains(pg.spgid.pgid.get_split_bits(pg.pool.pg_num), &head)
    {
        return out;
    }

    if m.has_flag(flag::PARALLELEXEC) {
        send_now(
            &mut out,
            reply_error(m, -libc::EINVAL, epoch, Eversion::default(), 0, &[]),
        );
        return out;
    }
    let info = match op_info(m) {
        Ok(i) => i,
        Err(e) => {
            send_now(&mut out, reply_error(m, e, epoch, Eversion::default(), 0, &[]));
            return out;
        }
    };
    // caps: the object is named by its locator key when it has one
    let cap_obj: &[u8] = if m.oloc.key.is_empty() {
        m.oid.as_bytes()
    } else {
        &m.oloc.key
    };
    let need = CapNeed {
        read: info.read,
        write: info.write,
        classes: info.classes.clone(),
    };
    if !ctx.caps.is_capable(
        &pg.pool.name,
        &m.oloc.nspace,
        &pg.pool.applications,
        cap_obj,
        &need,
    ) {
        send_now(
            &mut out,
            reply_error(m, -libc::EPERM, epoch, Eversion::default(), 0, &[]),
        );
        return out;
    }
    if info.pg_op {
        let r = do_pg_op(pg, store, &ctx);
        send_now(&mut out, r);
        return out;
    }
    let name_err = if m.oid.as_bytes().len() > pg.cfg.osd_max_object_name_len
        || m.oloc.key.len() > pg.cfg.osd_max_object_name_len
        || m.oloc.nspace.len() > pg.cfg.osd_max_object_namespace_len
    {
        Some(-libc::ENAMETOOLONG)
    } else if m.oid.is_empty() {
        Some(-libc::EINVAL)
    } else {
        None
    };
    let soid = HObject::new(
        m.oid.0.clone(),
        m.oloc.key.clone(),
        SnapId::NOSNAP,
        m.hash,
        pg.spgid.pgid.pool as i64,
        m.oloc.nspace.clone(),
    );
    let gobj = keys::ghobject(&soid, &pg.spgid);
    let okey = ferrostore::ObjectKey::new(soid.hash, gobj.to_sort_key());
    pg.op_object = Some((okey.name.clone(), gobj));
    // the store's key limit stands in for validate_hobject_key
    let name_err = name_err
        .or_else(|| (okey.name.len() > ferrostore::keys::MAX_NAME_LEN).then_some(-libc::ENAMETOOLONG));
    if let Some(e) = name_err {
        send_now(&mut out, reply_error(m, e, epoch, Eversion::default(), 0, &[]));
        return out;
    }
    let may_write = info.may_write();
    if may_write {
        if m.snapid != SnapId::NOSNAP {
            send_now(
                &mut out,
                reply_error(m, -libc::EINVAL, epoch, Eversion::default(), 0, &[]),
            );
            return out;
        }
        let data_len: u64 = m.ops.iter().map(|o| o.indata.len() as u64).sum();
        if pg.cfg.osd_max_write_size > 0 && data_len > pg.cfg.osd_max_write_size {
            send_now(
                &mut out,
                reply_error(m, -libc::EMSGSIZE, epoch, Eversion::default(), 0, &[]),
            );
            return out;
        }
        // dup: answer with the original outcome, once it is durable
        let reqid = m.effective_reqid(ctx.client);
        if let Some(f) = pg.log.lookup(&reqid) {
            let r = reply_error(m, f.return_code, epoch, f.version, f.user_version, &f.op_returns);
            // committed = durable here and on every replica
            let seq = pg.log.seq_for(f.version).unwrap_or(0);
            pg.hold(seq, f.version, ctx.conn, r, &mut out);
            return out;
        }
    }

    // the object context
    let (loaded, head_in_store) = match pg.load_context(store, &okey) {
        Ok(x) => x,
        Err(e) => {
            send_now(&mut out, reply_error(m, e, epoch, Eversion::default(), 0, &[]));
            return out;
        }
    };
    let Some((exists, oi, snapset)) = (match loaded {
        Some((oi, ss)) => Some((true, oi, ss)),
        // (with its own copy of the name: the info may stay in the object context cache)
        None if may_write => Some((
            false,
            ObjectInfo::new(crate::repl::owned_hobject(&soid)),
            SnapSet::default(),
        )),
        None => None,
    }) else {
        send_now(
            &mut out,
            reply_error(m, -libc::ENOENT, epoch, Eversion::default(), 0, &[]),
        );
        return out;
    };
    // snapshots (find_object_context / make_writeable): a read at a snap older than the object's last write is
    // served by the clone that covers it; a write under a snap context newer than the object clones the head
    let (snap_seq, snaps): (u64, Vec<u64>) = match &pg.pool_snapc {
        Some((seq, snaps)) => (*seq, snaps.clone()),
        None => (m.snap_seq.0, m.snaps.iter().map(|s| s.0).collect()),
    };
    let mut soid = soid;
    let mut okey = okey;
    let (mut exists, mut oi) = (exists, oi);
    let clone = match clone_for_read(&snapset, m.snapid) {
        Ok(c) => c,
        Err(()) => {
            send_now(
                &mut out,
                reply_error(m, -libc::ENOENT, epoch, Eversion::default(), 0, &[]),
            );
            return out;
        }
    };
    if let Some(c) = clone {
        soid.snap = c;
        okey = keys::object_key(&soid, &pg.spgid);
        match pg.load_context(store, &okey).map(|(x, _)| x) {
            Ok(Some((coi, _))) => {
                exists = true;
                oi = coi;
            }
            Ok(None) => {
                send_now(
                    &mut out,
                    reply_error(m, -libc::ENOENT, epoch, Eversion::default(), 0, &[]),
                );
                return out;
            }
            Err(e) => {
                send_now(&mut out, reply_error(m, e, epoch, Eversion::default(), 0, &[]));
                return out;
            }
        }
    }
    // reads of a whiteout (a head deleted while clones remain) find nothing
    if !may_write && exists && oi.test_flag(oi_flag::WHITEOUT) && m.snapid != SnapId::SNAPDIR {
        send_now(
            &mut out,
            reply_error(m, -libc::ENOENT, epoch, Eversion::default(), 0, &[]),
        );
        return out;
    }
    let clone_needed = may_write
        && exists
        && !oi.test_flag(oi_flag::WHITEOUT)
        && snaps.first().is_some_and(|s| *s > snapset.seq.0);
    let snap_whiteout = !snapset.clones.is_empty() || snaps.first().is_some_and(|s| *s > snapset.seq.0);
    if exists && !oi.watchers.is_empty() {
        let ws: Vec<(u64, EntityNameT, u32)> = oi
            .watchers
            .iter()
            .map(|((c, n), w)| (*c, *n, w.timeout_seconds))
            .collect();
        pg.watch.populate(&okey.name, &soid, &ws, ctx.now);
    }

    // the op's own ops from here on (the reply is built from them): taken, not copied
    let mut ops = std::mem::take(&mut ctx.msg.ops);
    let m = &ctx.msg;
    let returnvec = m.has_flag(flag::RETURNVEC);
    let mut c = Ctx {
        store,
        cid: pg.cid.clone(),
        okey: okey.clone(),
        orig_exists: exists,
        orig_oi: oi.clone(),
        exists,
        oi,
        snapset,
        t: Vec::new(),
        touched: false,
        modify: false,
        user_modify: false,
        removed: false,
        attrs: BTreeMap::new(),
        delta: PgStats::default(),
        d_objects: 0,
        d_bytes: 0,
        num_read: 0,
        num_write: 0,
        watch_connects: Vec::new(),
        watch_disconnects: Vec::new(),
        notifies: Vec::new(),
        acks: Vec::new(),
        client: ctx.client,
        client_addr: ctx.client_addr,
        features: ctx.conn_features,
        now: ctx.now,
        pool_erasure: pg.pool.erasure,
        cfg: &pg.cfg,
        rng: &mut pg.rng,
        epoch,
        snap_whiteout,
        okey_obj: soid.clone(),
        spgid: pg.spgid,
        modified: Vec::new(),
        pg_watch: &mut pg.watch,
    };
    let mut result = do_osd_ops(&mut c, &mut ops);

    // prepare_transaction
    let mut at_version = pg.log.next_version(epoch);
    let mut clone_entry: Option<PgLogEntry> = None;
    let mut user_at_version = c.orig_oi.user_version;
    let mut update_log_only = false;
    let mut log_entry = None;
    if result < 0 || (!c.touched && !c.modify) {
        // errors and no-op writes are still logged (dup detection), nothing else happens
        update_log_only = may_write;
    } else {
        // make_writeable: every written object is marked dirty; the snapset follows the writer's snap context
        if c.exists {
            if !c.orig_oi.test_flag(oi_flag::DIRTY) {
                c.oi.set_flag(oi_flag::DIRTY);
            }
        } else if c.orig_oi.test_flag(oi_flag::DIRTY) {
            c.oi.clear_flag(oi_flag::DIRTY);
        }
        if clone_needed {
            // _make_clone: the head as it was becomes clone `snap_seq`, holding the snaps newer than the
            // snapset; its log entry takes this version, the head's the next one
            let mut coid = soid.clone();
            coid.snap = SnapId(snap_seq);
            let ckey = keys::object_key(&coid, &pg.spgid);
            let csnaps: Vec<SnapId> = snaps
                .iter()
                .take_while(|s| **s > c.snapset.seq.0)
                .map(|s| SnapId(*s))
                .collect();
            let mut coi = ObjectInfo::new(coid.clone());
            coi.version = at_version;
            coi.prior_version = c.orig_oi.version;
            coi.size = c.orig_oi.size;
            coi.mtime = c.orig_oi.mtime;
            coi.local_mtime = c.orig_oi.local_mtime;
            coi.last_reqid = c.orig_oi.last_reqid;
            coi.truncate_seq = c.orig_oi.truncate_seq;
            coi.truncate_size = c.orig_oi.truncate_size;
            coi.flags = c.orig_oi.flags;
            coi.user_version = c.orig_oi.user_version;
            coi.data_digest = c.orig_oi.data_digest;
            coi.omap_digest = c.orig_oi.omap_digest;
            let mut pre = vec![
                Op::Clone {
                    cid: c.cid.clone(),
                    src: c.okey.clone(),
                    dst: ckey.clone(),
                },
                Op::SetAttrs {
                    cid: c.cid.clone(),
                    oid: ckey.clone(),
                    attrs: vec![(Bytes::from_static(OI_ATTR), coi.to_bytes(denc::CEPH_FEATURES_ALL))],
                },
            ];
            if c.store.getattr(&c.cid, &c.okey, SS_ATTR).is_ok() {
                pre.push(Op::RmAttr {
                    cid: c.cid.clone(),
                    oid: ckey,
                    name: Bytes::from_static(SS_ATTR),
                });
            }
            pre.append(&mut c.t);
            c.t = pre;
            c.d_objects += 1;
            // the clone's bytes count as scan_stats counts them after a restart
            c.d_bytes += c.orig_oi.size as i64;
            let cs = coid.snap;
            c.snapset.clones.push(cs);
            c.snapset.clone_size.insert(cs, c.orig_oi.size);
            c.snapset.clone_snaps.insert(cs, csnaps.clone());
            let mut ov = osd_types::snapset::IntervalSet::new();
            if c.orig_oi.size > 0 {
                ov.insert(0, c.orig_oi.size);
            }
            c.snapset.clone_overlap.insert(cs, ov);
            let mut e = PgLogEntry {
                version: at_version,
                prior_version: c.orig_oi.version,
                user_version: c.orig_oi.user_version,
                mtime: c.oi.mtime,
                ..PgLogEntry::unrollbackable(log_op::CLONE, coid)
            };
            e.snaps = csnaps.to_bytes(0);
            clone_entry = Some(e);
            at_version.version += 1;
        }
        // the newest clone no longer shares what this op changed
        if let Some((_, ov)) = c.snapset.clone_overlap.iter_mut().next_back() {
            for (off, len) in std::mem::take(&mut c.modified) {
                interval_subtract(ov, off, len);
            }
        }
        c.snapset.seq = SnapId(snap_seq);
        c.snapset.snaps.clear();
        // finish_ctx
        if c.user_modify {
            user_at_version = pg.log.last_user_version.max(c.oi.user_version) + 1;
            if at_version.version > user_at_version {
                user_at_version = at_version.version;
            }
            c.oi.user_version = user_at_version;
        }
        let reqid = m.effective_reqid(ctx.client);
        if c.exists {
            c.oi.version = at_version;
            c.oi.prior_version = c.orig_oi.version;
            c.oi.last_reqid = reqid;
            if !m.mtime.is_zero() {
                c.oi.mtime = m.mtime;
                c.oi.local_mtime = ctx.now;
            }
            let oi_bl = osd_types::encode_sized(&c.oi, denc::CEPH_FEATURES_ALL, 320);
            let ss_bl = osd_types::encode_sized(&c.snapset, 0, 64);
            // the object context cache keeps the decoded values: they must be what a load would decode
            debug_assert_eq!(ObjectInfo::decode_all(oi_bl.clone()).ok().as_ref(), Some(&c.oi));
            debug_assert_eq!(SnapSet::decode_all(ss_bl.clone()).ok().as_ref(), Some(&c.snapset));
            c.t.push(Op::SetAttrs {
                cid: c.cid.clone(),
                oid: c.okey.clone(),
                attrs: vec![
                    (Bytes::from_static(OI_ATTR), oi_bl),
                    (Bytes::from_static(SS_ATTR), ss_bl),
                ],
            });
        }
        let op = if c.exists { log_op::MODIFY } else { log_op::DELETE };
        let mut e = PgLogEntry {
            version: at_version,
            prior_version: c.orig_oi.version,
            user_version: user_at_version,
            reqid,
            mtime: m.mtime,
            return_code: if returnvec { result } else { 0 },
            ..PgLogEntry::unrollbackable(op, soid.clone())
        };
        if returnvec {
            e.op_returns = op_returns(&ops);
        }
        log_entry = Some(e);
    }

    // execute_ctx: the reply
    let successful_write = log_entry.is_some() && may_write && result >= 0;
    let mut ignore_out_data = false;
    if successful_write {
        if returnvec {
            for o in ops.iter_mut() {
                if o.outdata.len() > OSD_MAX_WRITE_OP_REPLY_LEN {
                    result = -libc::EOVERFLOW;
                    o.rval = -libc::EOVERFLOW;
                    o.outdata = Bytes::new();
                }
            }
        } else {
            ignore_out_data = true;
            result = 0;
        }
    }
    let mut reply = MOSDOpReply::for_request_ops(m, &ops, result, epoch, 0);
    for (r, o) in reply.ops.iter_mut().zip(&ops) {
        r.op = o.op;
        r.args = o.args;
        r.rval = o.rval;
        if !ignore_out_data {
            r.outdata = o.outdata.clone();
        }
    }
    let effects = Effects {
        connects: std::mem::take(&mut c.watch_connects),
        disconnects: std::mem::take(&mut c.watch_disconnects),
        notifies: std::mem::take(&mut c.notifies),
        acks: std::mem::take(&mut c.acks),
    };
    let delta = c.delta;
    let (d_objects, d_bytes) = (c.d_objects, c.d_bytes);
    let obj_txn = std::mem::take(&mut c.t);
    let user_version_now = c.oi.user_version;
    let omap_before = c.orig_exists && c.orig_oi.test_flag(oi_flag::OMAP);
    let omap_after = c.exists && c.oi.test_flag(oi_flag::OMAP);
    // the head as a successful write leaves it (deletes are left to the cache's forgetting)
    let written = (c.exists && log_entry.is_some() && result >= 0)
        .then(|| (std::mem::take(&mut c.oi), std::mem::take(&mut c.snapset)));
    drop(c);
    pg.epoch = pg.epoch.max(epoch);
    let ack = flag::ACK | flag::ONDISK;
    reply.flags |= i64::from(ack);
    pg.stats.num_rd += delta.num_rd;
    pg.stats.num_rd_kb += delta.num_rd_kb;

    if update_log_only {
        if result == -libc::ENOENT {
            reply.set_enoent_reply_versions(pg.log.head, pg.log.last_user_version);
        }
        // record_write_error: an ERROR entry so a resend gets the same answer
        let mut e = PgLogEntry {
            op: log_op::ERROR,
            soid: soid.clone(),
            version: at_version,
            reqid: m.effective_reqid(ctx.client),
            return_code: result,
            mod_desc: ObjectModDesc::default(),
            clean_regions: ObjectCleanRegions::default(),
            ..Default::default()
        };
        if returnvec {
            e.op_returns = op_returns(&ops);
        }
        if submit(
            pg,
            store,
            Transaction::new(),
            (None, e),
            None,
            None,
            ctx.conn,
            reply,
            &mut out,
        ) && result >= 0
        {
            let mut msgs = Msgs::new();
            apply_effects(pg, &ctx, &okey, &soid, effects, user_version_now, &mut msgs);
            out.notifies.append(&mut msgs);
        }
        return out;
    }
    if log_entry.is_none() || result < 0 {
        // a read (or a failed read): complete_read_ctx
        let mut result = result;
        if result >= 0 {
            for o in &ops {
                if o.rval < 0 && o.flags & op_flag::FAILOK == 0 {
                    result = o.rval;
                    break;
                }
            }
        }
        if result >= 0 {
            let mut msgs = Msgs::new();
            apply_effects(pg, &ctx, &okey, &soid, effects, user_version_now, &mut msgs);
            out.notifies.append(&mut msgs);
            reply.set_reply_versions(Eversion::default(), user_version_now);
        } else if result == -libc::ENOENT {
            reply.set_enoent_reply_versions(pg.log.head, pg.log.last_user_version);
        }
        reply.result = result;
        // answer after any write to this object that is not durable yet
        match pg.dirty.get(&okey.name) {
            Some(&(seq, v)) => pg.hold(seq, v, ctx.conn, reply, &mut out),
            None => out.replies.push((ctx.conn, reply)),
        }
        return out;
    }

    // a write
    reply.set_reply_versions(at_version, user_at_version);
    let mut t = Transaction::new();
    t.ops = obj_txn;
    let Some(e) = log_entry else { return out };
    if submit(
        pg,
        store,
        t,
        (clone_entry, e),
        Some(okey.name.clone()),
        head_in_store.map(|k| (okey.clone(), k)),
        ctx.conn,
        reply,
        &mut out,
    ) {
        if let Some(w) = written {
            pg.obc.put(&okey.name, Some(w));
        }
        pg.stats.num_objects = (pg.stats.num_objects as i64 + d_objects).max(0) as u64;
        pg.stats.num_bytes = (pg.stats.num_bytes as i64 + d_bytes).max(0) as u64;
        pg.stats.num_wr += delta.num_wr;
        pg.stats.num_wr_kb += delta.num_wr_kb;
        match (omap_before, omap_after) {
            (false, true) => pg.stats.num_omap_objects += 1,
            (true, false) => pg.stats.num_omap_objects = pg.stats.num_omap_objects.saturating_sub(1),
            _ => {}
        }
        let mut msgs = Msgs::new();
        apply_effects(pg, &ctx, &okey, &soid, effects, user_version_now, &mut msgs);
        out.notifies.append(&mut msgs);
    }
    out
}

/// Queue `t` plus the log entries `es` (in version order) through the Ceph transaction path and hold `reply`
/// until it is committed (durable here and on every replica); true if queued. A store failure answers with its
/// errno at once; the object changes nothing (ferrostore transactions are all or nothing) and the log keeps at
/// most a clone entry it made for the op (never a client's reqid).
#[allow(clippy::too_many_arguments)]
fn submit<D: Device>(
    pg: &mut Pg,
    store: &mut Store<D>,
    t: Transaction,
    es: (Option<PgLogEntry>, PgLogEntry),
    obj: Option<Bytes>,
    known: Option<(ObjectKey, bool)>,
    conn: ConnId,
    mut reply: MOSDOpReply,
    out: &mut Outputs,
) -> bool {
    let version = es.1.version;
    match pg.commit_write(store, t.ops, es, known) {
        Ok((seq, rep)) => {
            if let Some(o) = obj {
                pg.dirty.insert(o, (seq, version));
            }
            if let Some(r) = rep {
                out.repops.push(r);
            }
            pg.hold(seq, version, conn, reply, out);
            true
        }
        Err(err) => {
            reply.result = err.errno();
            reply.set_reply_versions(Eversion::default(), 0);
            for o in reply.ops.iter_mut() {
                o.outdata = Bytes::new();
            }
            out.replies.push((conn, reply));
            false
        }
    }
}

fn op_returns(ops: &[OSDOp]) -> Vec<OpReturnItem> {
    ops.iter()
        .map(|o| OpReturnItem {
            rval: o.rval,
            bl: o.outdata.clone(),
        })
        .collect()
}

struct NotifyReq {
    cookie: u64,
    timeout: u32,
    payload: Bytes,
    id: u64,
}

struct Effects {
    connects: Vec<(WatchInfo, bool)>,
    disconnects: Vec<(u64, EntityNameT, bool)>,
    notifies: Vec<NotifyReq>,
    acks: Vec<(u64, Option<u64>, Bytes)>,
}

/// `do_osd_op_effects`: watch connects/disconnects, notifies, notify acks.
fn apply_effects(
    pg: &mut Pg,
    ctx: &OpContext<'_>,
    okey: &ObjectKey,
    soid: &HObject,
    e: Effects,
    user_version: u64,
    msgs: &mut Msgs,
) {
    for (cookie, entity, send) in e.disconnects {
        pg.watch.remove(&(okey.name.clone(), cookie, entity), send, msgs);
    }
    for (w, will_ping) in e.connects {
        pg.watch.connect(
            (okey.name.clone(), w.cookie, ctx.client),
            soid,
            w.timeout_seconds,
            ctx.conn,
            will_ping,
            ctx.now,
            msgs,
        );
    }
    for n in e.notifies {
        pg.watch.start_notify(
            &okey.name,
            n.id,
            ctx.conn,
            ctx.client.num as u64,
            n.cookie,
            user_version,
            n.payload,
            n.timeout,
            ctx.now,
            msgs,
        );
    }
    for (id, cookie, bl) in e.acks {
        pg.watch.ack(&okey.name, ctx.client, cookie, id, bl, msgs);
    }
}

impl Pg {
    /// [`load_oi_known`] through the object context cache.
    fn load_context<D: Device>(
        &mut self,
        store: &mut Store<D>,
        key: &ObjectKey,
    ) -> Result<(Option<Loaded>, Option<bool>), i32> {
        if let Some(v) = self.obc.get(&key.name) {
            let known = Some(v.is_some());
            return Ok((v, known));
        }
        let r = load_oi_known(store, &self.cid, key)?;
        if r.1.is_some() {
            self.obc.put(&key.name, r.0.clone());
        }
        Ok(r)
    }
}

/// An object's info and snapset.
type Loaded = (ObjectInfo, SnapSet);

/// Which object serves a read at `snapid` (find_object_context): `Ok(None)` the head (a head read, SNAPDIR, or a
/// snapshot newer than the object's last change), `Ok(Some(c))` clone `c`, `Err(())` none (ENOENT).
fn clone_for_read(snapset: &SnapSet, snapid: SnapId) -> Result<Option<SnapId>, ()> {
    if snapid == SnapId::NOSNAP || snapid == SnapId::SNAPDIR || snapid.0 > snapset.seq.0 {
        return Ok(None);
    }
    let clone = snapset.clones.iter().copied().find(|c| c.0 >= snapid.0);
    clone
        .filter(|c| {
            snapset.clone_snaps.get(c).is_some_and(|s| {
                let (first, last) = (s.last().map_or(u64::MAX, |x| x.0), s.first().map_or(0, |x| x.0));
                !s.is_empty() && snapid.0 >= first && snapid.0 <= last
            })
        })
        .map(Some)
        .ok_or(())
}

impl Pg {
    /// The store object a read-only op at snapshot `m.snapid` will read its data from: the clone that covers the
    /// snapshot, or the head when the object has not changed since. `None` when that cannot be told without
    /// running the op (no such object, no clone covers it, an undecodable object info, SNAPDIR); the op then
    /// simply runs and answers for itself. Lets the OSD start a snapshot read's device reads before it runs.
    pub fn snap_read_object<D: Device>(&mut self, store: &mut Store<D>, m: &MOSDOp) -> Option<ObjectKey> {
        if m.snapid == SnapId::SNAPDIR {
            return None;
        }
        let mut soid = HObject::new(
            m.oid.0.clone(),
            m.oloc.key.clone(),
            SnapId::NOSNAP,
            m.hash,
            self.spgid.pgid.pool as i64,
            m.oloc.nspace.clone(),
        );
        let head = keys::object_key(&soid, &self.spgid);
        let (Some((_, snapset)), _) = self.load_context(store, &head).ok()? else {
            return None;
        };
        match clone_for_read(&snapset, m.snapid).ok()? {
            None => Some(head),
            Some(c) => {
                soid.snap = c;
                Some(keys::object_key(&soid, &self.spgid))
            }
        }
    }
}

/// [`load_oi`], plus whether the store holds the object at all when that is known for sure (an object without
/// object info is there, but treated as absent).
fn load_oi_known<D: Device>(
    store: &mut Store<D>,
    cid: &CollectionId,
    key: &ObjectKey,
) -> Result<(Option<Loaded>, Option<bool>), i32> {
    match store.getattr(cid, key, OI_ATTR) {
        Ok(bl) => {
            let oi = ObjectInfo::decode_all(bl).map_err(|_| -libc::EIO)?;
            let ss = match store.getattr(cid, key, SS_ATTR) {
                Ok(b) => SnapSet::decode_all(b).map_err(|_| -libc::EIO)?,
                Err(_) => SnapSet::default(),
            };
            Ok((Some((oi, ss)), Some(true)))
        }
        Err(StoreError::NotFound) => Ok((None, Some(false))),
        // an object without object info (not written by an OSD) is treated as absent
        Err(StoreError::NoData) => Ok((None, None)),
        Err(e) => Err(store_errno(&e)),
    }
}

/// The state of one op execution (Ceph's OpContext, restricted to what these ops use).
struct Ctx<'a, D: Device> {
    store: &'a mut Store<D>,
    cid: CollectionId,
    okey: ObjectKey,
    orig_exists: bool,
    orig_oi: ObjectInfo,
    exists: bool,
    oi: ObjectInfo,
    snapset: SnapSet,
    /// Store operations of this op (applied only if the op succeeds).
    t: Vec<Op>,
    /// `op_t` is not empty (Ceph's `t->nop()` also counts).
    touched: bool,
    modify: bool,
    user_modify: bool,
    /// The object was removed by this op (its stored attrs no longer count).
    removed: bool,
    /// User-visible attr changes made by this op (full store names), None = removed.
    attrs: BTreeMap<Bytes, Option<Bytes>>,
    delta: PgStats,
    d_objects: i64,
    d_bytes: i64,
    num_read: u32,
    num_write: u32,
    watch_connects: Vec<(WatchInfo, bool)>,
    watch_disconnects: Vec<(u64, EntityNameT, bool)>,
    notifies: Vec<NotifyReq>,
    acks: Vec<(u64, Option<u64>, Bytes)>,
    client: EntityNameT,
    client_addr: EntityAddr,
    features: u64,
    now: Utime,
    pool_erasure: bool,
    cfg: &'a crate::PgConfig,
    rng: &'a mut u64,
    epoch: u32,
    /// A delete must leave a whiteout head (clones exist or are being made).
    snap_whiteout: bool,
    /// The head object (for finding its clones) and the PG (for their keys).
    okey_obj: HObject,
    spgid: denc::SpgId,
    /// Byte ranges this op changed (for the newest clone's overlap).
    modified: Vec<(u64, u64)>,
    pg_watch: &'a mut crate::watch::WatchState,
}

impl<D: Device> Ctx<'_, D> {
    fn push(&mut self, o: Op) {
        self.touched = true;
        self.t.push(o);
    }
    fn nop(&mut self) {
        self.touched = true;
    }
    /// `maybe_create_new_object`.
    fn maybe_create(&mut self) {
        if !self.exists {
            self.d_objects += 1;
            self.exists = true;
            self.oi.set_data_digest(u32::MAX);
            self.oi.set_omap_digest(u32::MAX);
            let (cid, oid) = (self.cid.clone(), self.okey.clone());
            self.push(Op::Touch { cid, oid });
        } else if self.oi.test_flag(oi_flag::WHITEOUT) {
            self.oi.clear_flag(oi_flag::WHITEOUT);
        }
    }
    fn set_size(&mut self, new_size: u64) {
        let (a, b) = (new_size.min(self.oi.size), new_size.max(self.oi.size));
        if b > a {
            self.modified.push((a, b - a));
        }
        self.d_bytes += new_size as i64 - self.oi.size as i64;
        self.oi.size = new_size;
    }
    /// A read of the stored object (pre-op state).
    fn read(&mut self, off: u64, len: u64) -> Result<Bytes, i32> {
        if !self.orig_exists || self.removed {
            return Ok(Bytes::new());
        }
        if len == 0 {
            return Ok(Bytes::new());
        }
        self.store
            .read(&self.cid, &self.okey, off, len)
            .map_err(|e| store_errno(&e))
    }
    fn getattr(&mut self, full: &[u8]) -> Result<Bytes, i32> {
        if !self.orig_exists {
            return Err(-libc::ENOENT);
        }
        self.store
            .getattr(&self.cid, &self.okey, full)
            .map_err(|e| store_errno(&e))
    }
    /// User xattrs (names without the `_` prefix) of the stored object.
    fn user_attrs(&mut self) -> Result<BTreeMap<Bytes, Bytes>, i32> {
        if !self.orig_exists {
            return Err(-libc::ENOENT);
        }
        let all = self
            .store
            .getattrs(&self.cid, &self.okey)
            .map_err(|e| store_errno(&e))?;
        Ok(all
            .into_iter()
            .filter(|(k, _)| k.len() > 1 && k[0] == b'_')
            .map(|(k, v)| (k.slice(1..), v))
            .collect())
    }
    fn attr_exists(&mut self, full: &[u8]) -> bool {
        if let Some(v) = self.attrs.get(full) {
            return v.is_some();
        }
        !self.removed && self.orig_exists && self.store.getattr(&self.cid, &self.okey, full).is_ok()
    }
    fn setattr(&mut self, full: Bytes, v: Bytes) {
        self.attrs.insert(full.clone(), Some(v.clone()));
        let (cid, oid) = (self.cid.clone(), self.okey.clone());
        self.push(Op::SetAttrs {
            cid,
            oid,
            attrs: vec![(full, v)],
        });
    }
    fn rmattr(&mut self, full: Bytes) {
        let present = self.attr_exists(&full);
        self.attrs.insert(full.clone(), None);
        if present {
            let (cid, oid) = (self.cid.clone(), self.okey.clone());
            self.push(Op::RmAttr { cid, oid, name: full });
        } else {
            self.nop();
        }
    }
    fn omap_iter(
        &mut self,
        start_after: &[u8],
        prefix: &[u8],
        max: u64,
    ) -> Result<(Vec<(Bytes, Bytes)>, bool), i32> {
        let mut out = Vec::new();
        let mut bytes = 0u64;
        if !self.oi.test_flag(oi_flag::OMAP) || !self.orig_exists {
            return Ok((out, false));
        }
        // upper_bound(start_after), then lower_bound(prefix) if the prefix sorts later
        let mut start = start_after.to_vec();
        start.push(0);
        if prefix > start_after {
            start = prefix.to_vec();
        }
        loop {
            // Ask for no more than the reply can hold plus one (the one tells whether the listing is truncated):
            // a 16-key listing used to copy 256 entries out of the store.
            let want = max.saturating_sub(out.len() as u64).saturating_add(1).min(256) as usize;
            let batch = self
                .store
                .omap_iterate(&self.cid, &self.okey, &start, want)
                .map_err(|e| store_errno(&e))?;
            // a short batch is the end of the object's omap: no second call to find nothing
            let last = batch.len() < want;
            for (k, v) in batch {
                if !k.starts_with(prefix) {
                    return Ok((out, false));
                }
                if out.len() as u64 >= max || bytes >= self.cfg.osd_max_omap_bytes_per_request {
                    return Ok((out, true));
                }
                bytes += (k.len() + v.len() + 8) as u64;
                start.clear();
                start.extend_from_slice(&k);
                start.push(0);
                out.push((k, v));
            }
            if last {
                return Ok((out, false));
            }
        }
    }
}

/// `do_osd_ops`: run the ops in order; the first failure (not FAILOK) stops the op.
fn do_osd_ops<D: Device>(c: &mut Ctx<'_, D>, ops: &mut [OSDOp]) -> i32 {
    let mut result = 0;
    for o in ops.iter_mut() {
        // user-visible modification?
        if o.op != op::WATCH && op::is_write(o.op) {
            c.user_modify = true;
        }
        let mut x = o.extent();
        if matches!(
            o.op,
            op::READ
                | op::SPARSE_READ
                | op::SYNC_READ
                | op::WRITE
                | op::WRITEFULL
                | op::ZERO
                | op::APPEND
                | op::TRUNCATE
                | op::TRIMTRUNC
                | op::CMPEXT
                | op::MAPEXT
                | op::MASKTRUNC
        ) && x.truncate_seq == 1
            && x.truncate_size == u64::MAX
        {
            x.truncate_seq = 0;
            x.truncate_size = 0;
            o.set_extent(x);
        }
        // munge ZERO to the end into TRUNCATE (or a no-op beyond the end)
        let max = c.cfg.osd_max_object_size;
        if o.op == op::ZERO
            && c.exists
            && x.offset < max
            && x.length >= 1
            && x.length <= max
            && x.offset + x.length >= c.oi.size
        {
            if x.offset >= c.oi.size {
                o.rval = 0;
                continue;
            }
            o.op = op::TRUNCATE;
        }
        result = match do_one(c, o) {
            Ok(()) => 0,
            Err(e) => e,
        };
        o.rval = result;
        if result < 0 && o.flags & op_flag::FAILOK != 0 {
            result = 0;
        }
        if result < 0 {
            break;
        }
    }
    result
}

fn check_offset_and_length(off: u64, len: u64, max: u64) -> Result<(), i32> {
    if off >= max || len > max || off.saturating_add(len) > max {
        return Err(-libc::EFBIG);
    }
    Ok(())
}

/// Object data digests: a received write's data (or a store read's) carries the crcs of its pages, so a 4 MiB
/// object's digest is a combine per page, not a second pass over the data.
fn crc32c(seed: u32, b: &[u8]) -> u32 {
    ceph_crc::blocks::ceph_crc32c(seed, b)
}

/// One op (a `case` of do_osd_ops). Ok means result 0 (outdata and extent set in `o`).
fn do_one<D: Device>(c: &mut Ctx<'_, D>, o: &mut OSDOp) -> Result<(), i32> {
    let mut bp = Decoder::new(o.indata.clone());
    let inval = |_| -libc::EINVAL;
    match o.op {
        op::SYNC_READ | op::READ => {
            if o.op == op::SYNC_READ && c.pool_erasure {
                return Err(-libc::EOPNOTSUPP);
            }
            c.num_read += 1;
            let mut x = o.extent();
            let mut size = c.oi.size;
            if c.oi.truncate_seq < u64::from(x.truncate_seq)
                && x.offset.saturating_add(x.length) > x.truncate_size
                && size > x.truncate_size
            {
                size = x.truncate_size;
            }
            if x.length == 0 {
                x.length = size;
            }
            if x.offset >= size {
                x.length = 0;
            } else if x.offset.saturating_add(x.length) > size {
                x.length = size - x.offset;
            }
            let data = c.read(x.offset, x.length)?;
            if x.offset == 0
                && data.len() as u64 == c.oi.size
                && c.oi.test_flag(oi_flag::DATA_DIGEST)
                && crc32c(u32::MAX, &data) != c.oi.data_digest
            {
                return Err(-libc::EIO);
            }
            x.length = data.len() as u64;
            o.set_extent(x);
            c.delta.num_rd_kb += kb(x.length) as u64;
            c.delta.num_rd += 1;
            o.outdata = data;
        }
        op::SPARSE_READ => {
            let mut x = o.extent();
            if x.truncate_seq != 0 {
                return Err(-libc::EINVAL);
            }
            c.num_read += 1;
            let mut map: Vec<(u64, u64)> = Vec::new();
            let mut data = BytesMut::new();
            if c.orig_exists && !c.removed && x.length > 0 {
                let ext = c
                    .store
                    .sparse_read(&c.cid, &c.okey, x.offset, x.length)
                    .map_err(|e| store_errno(&e))?;
                for (off, b) in ext {
                    map.push((off, b.len() as u64));
                    data.extend_from_slice(&b);
                }
            }
            if data.len() as u64 == c.oi.size
                && c.oi.test_flag(oi_flag::DATA_DIGEST)
                && crc32c(u32::MAX, &data) != c.oi.data_digest
            {
                return Err(-libc::EIO);
            }
            x.length = data.len() as u64;
            o.set_extent(x);
            let mut e = Encoder::new(0);
            e.u32(map.len() as u32);
            for (a, b) in &map {
                e.u64(*a);
                e.u64(*b);
            }
            e.bytes(&data);
            o.outdata = e.into_bytes();
            c.delta.num_rd_kb += kb(x.length) as u64;
            c.delta.num_rd += 1;
        }
        op::CMPEXT => {
            c.num_read += 1;
            let mut x = o.extent();
            let mut size = c.oi.size;
            if c.oi.truncate_seq < u64::from(x.truncate_seq)
                && x.offset.saturating_add(x.length) > x.truncate_size
            {
                size = x.truncate_size;
            }
            if x.offset >= size {
                x.length = 0;
            } else if x.offset.saturating_add(x.length) > size {
                x.length = size - x.offset;
            }
            o.set_extent(x);
            let read = if x.length == 0 || !c.orig_exists {
                Bytes::new()
            } else {
                let d = c.read(x.offset, x.length)?;
                c.delta.num_rd_kb += kb(d.len() as u64) as u64;
                c.delta.num_rd += 1;
                d
            };
            for (i, b) in o.indata.iter().enumerate() {
                if *b != read.get(i).copied().unwrap_or(0) {
                    return Err(-MAX_ERRNO - i as i32);
                }
            }
        }
        op::STAT => {
            if c.exists && !c.oi.test_flag(oi_flag::WHITEOUT) {
                let mut e = Encoder::new(0);
                e.u64(c.oi.size);
                e.encode(&c.oi.mtime);
                o.outdata = e.into_bytes();
            } else {
                return Err(-libc::ENOENT);
            }
            c.delta.num_rd += 1;
        }
        op::ASSERT_VER => {
            c.num_read += 1;
            let ver = o.assert_ver();
            if ver == 0 {
                return Err(-libc::EINVAL);
            } else if ver < c.oi.user_version {
                return Err(-libc::ERANGE);
            } else if ver > c.oi.user_version {
                return Err(-libc::EOVERFLOW);
            }
        }
        op::LIST_WATCHERS => {
            c.num_read += 1;
            let resp = ObjListWatchResponse {
                entries: c
                    .oi
                    .watchers
                    .iter()
                    .map(|((_, n), w)| WatchItem {
                        name: *n,
                        cookie: w.cookie,
                        timeout_seconds: w.timeout_seconds,
                        addr: w.addr,
                    })
                    .collect(),
            };
            o.outdata = resp.to_bytes(c.features);
            c.delta.num_rd += 1;
        }
        op::NOTIFY => {
            c.num_read += 1;
            let parsed = (|| -> Result<(u32, Bytes), denc::DecodeError> {
                let _ver = bp.u32()?;
                let timeout = bp.u32()?;
                Ok((timeout, bp.bufferlist()?))
            })();
            let (timeout, payload) = parsed.unwrap_or((0, Bytes::new()));
            let timeout = if timeout == 0 {
                c.cfg.osd_default_notify_timeout
            } else {
                timeout
            };
            let id = c.pg_watch.reserve_notify_id(c.epoch);
            c.notifies.push(NotifyReq {
                cookie: o.notify_cookie(),
                timeout,
                payload,
                id,
            });
            o.outdata = id.to_bytes(0);
        }
        op::NOTIFY_ACK => {
            c.num_read += 1;
            let parsed = (|| -> Result<(u64, u64, Bytes), denc::DecodeError> {
                let id = bp.u64()?;
                let cookie = bp.u64()?;
                let bl = if bp.is_empty() {
                    Bytes::new()
                } else {
                    bp.bufferlist()?
                };
                Ok((id, cookie, bl))
            })();
            match parsed {
                Ok((id, cookie, bl)) => c.acks.push((id, Some(cookie), bl)),
                // historical form: the notify id in the watch cookie field
                Err(_) => c.acks.push((o.watch().cookie, None, Bytes::new())),
            }
        }
        op::WATCH => {
            c.num_write += 1;
            if !c.exists {
                return Err(-libc::ENOENT);
            }
            let w = o.watch();
            let timeout = if w.timeout == 0 {
                c.cfg.osd_client_watch_timeout
            } else {
                w.timeout
            };
            let info = WatchInfo {
                cookie: w.cookie,
                timeout_seconds: timeout,
                addr: c.client_addr,
            };
            let key = (w.cookie, c.client);
            match w.op {
                watch_op::WATCH | watch_op::LEGACY_WATCH => {
                    if let std::collections::btree_map::Entry::Vacant(v) = c.oi.watchers.entry(key) {
                        v.insert(info.clone());
                        c.nop();
                    }
                    c.watch_connects.push((info, w.op == watch_op::WATCH));
                }
                watch_op::RECONNECT => {
                    if !c.oi.watchers.contains_key(&key) {
                        return Err(-libc::ENOTCONN);
                    }
                    c.watch_connects.push((info, true));
                }
                watch_op::PING => {
                    if !c.oi.watchers.contains_key(&key) {
                        return Err(-libc::ENOTCONN);
                    }
                    c.pg_watch
                        .ping(&(c.okey.name.clone(), w.cookie, c.client), c.now)?;
                }
                watch_op::UNWATCH => {
                    if c.oi.watchers.remove(&key).is_some() {
                        c.nop();
                        c.watch_disconnects.push((w.cookie, c.client, false));
                    }
                }
                _ => return Err(-libc::EINVAL),
            }
        }
        op::WRITE => {
            c.num_write += 1;
            let mut x = o.extent();
            if x.length != o.indata.len() as u64 {
                return Err(-libc::EINVAL);
            }
            let seq = c.oi.truncate_seq;
            let mut data = o.indata.clone();
            if seq != 0 && seq > u64::from(x.truncate_seq) && x.offset.saturating_add(x.length) > c.oi.size {
                // an old write arriving after a trimtrunc
                x.length = c.oi.size.saturating_sub(x.offset);
                data = data.slice(..x.length as usize);
            }
            if u64::from(x.truncate_seq) > seq {
                if c.exists && !c.oi.test_flag(oi_flag::WHITEOUT) {
                    let (cid, oid) = (c.cid.clone(), c.okey.clone());
                    c.push(Op::Truncate {
                        cid,
                        oid,
                        size: x.truncate_size,
                    });
                    c.oi.truncate_seq = u64::from(x.truncate_seq);
                    c.oi.truncate_size = x.truncate_size;
                    if c.oi.size > x.truncate_size {
                        c.oi.clear_data_digest();
                    }
                    if x.truncate_size != c.oi.size {
                        c.set_size(x.truncate_size);
                    }
                } else {
                    c.oi.truncate_seq = u64::from(x.truncate_seq);
                    c.oi.truncate_size = x.truncate_size;
                }
            }
            check_offset_and_length(x.offset, x.length, c.cfg.osd_max_object_size)?;
            c.maybe_create();
            if x.length == 0 {
                if x.offset > c.oi.size {
                    let (cid, oid) = (c.cid.clone(), c.okey.clone());
                    c.push(Op::Truncate {
                        cid,
                        oid,
                        size: x.offset,
                    });
                    c.set_size(x.offset);
                } else {
                    c.nop();
                }
            } else {
                let (cid, oid) = (c.cid.clone(), c.okey.clone());
                c.modified.push((x.offset, x.length));
                c.push(Op::Write {
                    cid,
                    oid,
                    offset: x.offset,
                    data: data.clone(),
                });
            }
            if x.offset == 0 && x.length >= c.oi.size {
                c.oi.set_data_digest(crc32c(u32::MAX, &data));
            } else if x.offset == c.oi.size && c.oi.test_flag(oi_flag::DATA_DIGEST) {
                let d = c.oi.data_digest;
                c.oi.set_data_digest(crc32c(d, &data));
            } else {
                c.oi.clear_data_digest();
            }
            if x.length > 0 && x.offset + x.length > c.oi.size {
                c.set_size(x.offset + x.length);
            }
            c.delta.num_wr += 1;
            c.delta.num_wr_kb += kb(x.length) as u64;
            o.set_extent(x);
        }
        op::WRITEFULL => {
            c.num_write += 1;
            let x = o.extent();
            if x.length != o.indata.len() as u64 {
                return Err(-libc::EINVAL);
            }
            check_offset_and_length(0, x.length, c.cfg.osd_max_object_size)?;
            c.maybe_create();
            let (cid, oid) = (c.cid.clone(), c.okey.clone());
            if x.length < c.oi.size {
                c.push(Op::Truncate {
                    cid: cid.clone(),
                    oid: oid.clone(),
                    size: x.length,
                });
            }
            c.modified.push((0, x.length.max(c.oi.size)));
            if x.length > 0 {
                c.push(Op::Write {
                    cid,
                    oid,
                    offset: 0,
                    data: o.indata.clone(),
                });
            } else {
                c.nop();
            }
            c.oi.set_data_digest(crc32c(u32::MAX, &o.indata));
            c.set_size(x.length);
            c.delta.num_wr += 1;
            c.delta.num_wr_kb += kb(x.length) as u64;
        }
        op::APPEND => {
            let mut nop = OSDOp::new(op::WRITE).with_indata(o.indata.clone());
            nop.set_extent(ceph_msgs::osd_op::Extent {
                offset: c.oi.size,
                length: o.extent().length,
                truncate_size: 0,
                truncate_seq: c.oi.truncate_seq as u32,
            });
            let r = do_osd_ops(c, std::slice::from_mut(&mut nop));
            o.outdata = nop.outdata;
            if r < 0 {
                return Err(r);
            }
        }
        op::ZERO => {
            c.num_write += 1;
            let x = o.extent();
            check_offset_and_length(x.offset, x.length, c.cfg.osd_max_object_size)?;
            if x.length > 0 && c.exists && !c.oi.test_flag(oi_flag::WHITEOUT) {
                let (cid, oid) = (c.cid.clone(), c.okey.clone());
                c.modified.push((x.offset, x.length));
                c.push(Op::Zero {
                    cid,
                    oid,
                    offset: x.offset,
                    len: x.length,
                });
                c.delta.num_wr += 1;
                c.oi.clear_data_digest();
            }
        }
        op::TRUNCATE => {
            c.num_write += 1;
            if !c.exists || c.oi.test_flag(oi_flag::WHITEOUT) {
                return Ok(());
            }
            let x = o.extent();
            check_offset_and_length(x.offset, x.length, c.cfg.osd_max_object_size)?;
            if x.truncate_seq != 0 {
                if x.offset != x.truncate_size {
                    return Err(-libc::EINVAL);
                }
                if u64::from(x.truncate_seq) <= c.oi.truncate_seq {
                    return Ok(());
                }
                c.oi.truncate_seq = u64::from(x.truncate_seq);
                c.oi.truncate_size = x.truncate_size;
            }
            c.maybe_create();
            let (cid, oid) = (c.cid.clone(), c.okey.clone());
            c.push(Op::Truncate {
                cid,
                oid,
                size: x.offset,
            });
            if x.offset != c.oi.size {
                c.set_size(x.offset);
            }
            c.delta.num_wr += 1;
            c.oi.clear_data_digest();
        }
        op::DELETE => {
            if !c.exists || (c.oi.test_flag(oi_flag::WHITEOUT) && c.snap_whiteout) {
                return Err(-libc::ENOENT);
            }
            let (cid, oid) = (c.cid.clone(), c.okey.clone());
            c.push(Op::Remove {
                cid: cid.clone(),
                oid: oid.clone(),
            });
            c.removed = true;
            c.attrs.clear();
            c.delta.num_wr += 1;
            if c.oi.test_flag(oi_flag::DIRTY) {
                c.oi.clear_flag(oi_flag::DIRTY);
            }
            c.set_size(0);
            c.oi.set_data_digest(u32::MAX);
            c.oi.set_omap_digest(u32::MAX);
            let ws: Vec<(u64, EntityNameT)> = c.oi.watchers.keys().copied().collect();
            for (cookie, n) in ws {
                c.watch_disconnects.push((cookie, n, true));
            }
            c.oi.watchers.clear();
            c.oi.clear_flag(oi_flag::OMAP);
            if c.snap_whiteout {
                // the head stays, empty, as a whiteout: its clones still need its snapset
                c.oi.set_flag(oi_flag::WHITEOUT);
                c.push(Op::Touch { cid, oid });
                return Ok(());
            }
            c.d_objects -= 1;
            c.exists = false;
        }
        op::ROLLBACK => {
            c.num_write += 1;
            let snapid = o.snapid();
            // find_object_context for (head, snapid)
            let target = if snapid > c.snapset.seq.0 {
                Some(None) // the head itself
            } else {
                c.snapset
                    .clones
                    .iter()
                    .copied()
                    .find(|cl| cl.0 >= snapid)
                    .filter(|cl| {
                        c.snapset.clone_snaps.get(cl).is_some_and(|s| {
                            !s.is_empty()
                                && snapid >= s.last().map_or(u64::MAX, |x| x.0)
                                && snapid <= s.first().map_or(0, |x| x.0)
                        })
                    })
                    .map(Some)
            };
            match target {
                Some(None) => {
                    if !c.exists || c.oi.test_flag(oi_flag::WHITEOUT) {
                        // no object at that snap: the head goes
                        if !c.oi.watchers.is_empty() {
                            return Err(-libc::EBUSY);
                        }
                        let mut d = OSDOp::new(op::DELETE);
                        let _ = do_one(c, &mut d);
                    } else {
                        c.modify = true;
                    }
                }
                None => {
                    if !c.oi.watchers.is_empty() {
                        return Err(-libc::EBUSY);
                    }
                    let mut d = OSDOp::new(op::DELETE);
                    let _ = do_one(c, &mut d);
                }
                Some(Some(cl)) => {
                    let mut coid = c.okey_obj.clone();
                    coid.snap = cl;
                    let ckey = keys::object_key(&coid, &c.spgid);
                    let coi = match c.store.getattr(&c.cid, &ckey, OI_ATTR) {
                        Ok(b) => ObjectInfo::decode_all(b).map_err(|_| -libc::EIO)?,
                        Err(e) => return Err(store_errno(&e)),
                    };
                    let (cid, oid) = (c.cid.clone(), c.okey.clone());
                    if c.exists {
                        c.push(Op::Remove {
                            cid: cid.clone(),
                            oid: oid.clone(),
                        });
                    } else {
                        c.d_objects += 1;
                        c.exists = true;
                    }
                    c.push(Op::Clone {
                        cid,
                        src: ckey,
                        dst: oid,
                    });
                    c.removed = true;
                    c.attrs.clear();
                    c.oi.clear_flag(oi_flag::WHITEOUT);
                    c.modified.push((0, c.oi.size.max(coi.size)));
                    c.set_size(coi.size);
                    if coi.test_flag(oi_flag::DATA_DIGEST) {
                        c.oi.set_data_digest(coi.data_digest);
                    } else {
                        c.oi.clear_data_digest();
                    }
                    if coi.test_flag(oi_flag::OMAP_DIGEST) {
                        c.oi.set_omap_digest(coi.omap_digest);
                    } else {
                        c.oi.clear_omap_digest();
                    }
                    if coi.test_flag(oi_flag::OMAP) {
                        c.oi.set_flag(oi_flag::OMAP);
                    } else {
                        c.oi.clear_flag(oi_flag::OMAP);
                    }
                }
            }
        }
        op::CREATE => {
            c.num_write += 1;
            if c.exists && !c.oi.test_flag(oi_flag::WHITEOUT) && o.flags & op_flag::EXCL != 0 {
                return Err(-libc::EEXIST);
            }
            if !o.indata.is_empty() {
                bp.bufferlist().map_err(inval)?; // category, ignored
            }
            c.maybe_create();
            c.nop();
        }
        op::SETALLOCHINT => {
            c.num_write += 1;
            c.maybe_create();
            let h = o.alloc_hint();
            c.oi.expected_object_size = h.expected_object_size;
            c.oi.expected_write_size = h.expected_write_size;
            c.oi.alloc_hint_flags = h.flags;
            c.nop();
        }
        op::SETXATTR => {
            c.num_write += 1;
            let a = o.xattr();
            if c.cfg.osd_max_attr_size > 0 && u64::from(a.value_len) > c.cfg.osd_max_attr_size {
                return Err(-libc::EFBIG);
            }
            if a.name_len > OSD_MAX_ATTR_NAME_LEN {
                return Err(-libc::ENAMETOOLONG);
            }
            c.maybe_create();
            let name = bp.take_bytes(a.name_len as usize).map_err(inval)?;
            let val = bp.take_bytes(a.value_len as usize).map_err(inval)?;
            let mut full = BytesMut::with_capacity(name.len() + 1);
            full.extend_from_slice(b"_");
            full.extend_from_slice(&name);
            c.setattr(full.freeze(), val);
            c.delta.num_wr += 1;
        }
        op::RMXATTR => {
            c.num_write += 1;
            let a = o.xattr();
            let name = bp.take_bytes(a.name_len as usize).map_err(inval)?;
            if !c.exists || c.oi.test_flag(oi_flag::WHITEOUT) {
                return Err(-libc::ENOENT);
            }
            let mut full = BytesMut::with_capacity(name.len() + 1);
            full.extend_from_slice(b"_");
            full.extend_from_slice(&name);
            c.rmattr(full.freeze());
            c.delta.num_wr += 1;
        }
        op::GETXATTR => {
            c.num_read += 1;
            let a = o.xattr();
            let name = bp.take_bytes(a.name_len as usize).map_err(inval)?;
            let mut full = b"_".to_vec();
            full.extend_from_slice(&name);
            c.delta.num_rd += 1;
            let v = c.getattr(&full)?;
            let mut a2 = a;
            a2.value_len = v.len() as u32;
            o.set_xattr(a2);
            c.delta.num_rd_kb += kb(v.len() as u64) as u64;
            o.outdata = v;
        }
        op::GETXATTRS => {
            c.num_read += 1;
            let attrs = c.user_attrs()?;
            let bl = attrs.to_bytes(0);
            c.delta.num_rd_kb += kb(bl.len() as u64) as u64;
            c.delta.num_rd += 1;
            o.outdata = bl;
        }
        op::CMPXATTR => {
            c.num_read += 1;
            let a = o.xattr();
            let name = bp.take_bytes(a.name_len as usize).map_err(inval)?;
            let mut full = b"_".to_vec();
            full.extend_from_slice(&name);
            let xattr = match c.getattr(&full) {
                Ok(v) => v,
                Err(e) if e == -libc::ENODATA || e == -libc::EEXIST => Bytes::new(),
                Err(e) => return Err(e),
            };
            c.delta.num_rd += 1;
            c.delta.num_rd_kb += kb(xattr.len() as u64) as u64;
            let r = match a.cmp_mode {
                cmpxattr::MODE_STRING => {
                    let v = bp.take_bytes(a.value_len as usize).map_err(inval)?;
                    cmp_result(a.cmp_op, v.as_ref().cmp(xattr.as_ref()))
                }
                cmpxattr::MODE_U64 => {
                    let v1 = bp.u64().map_err(inval)?;
                    let v2 = strtoull(&xattr);
                    cmp_result(a.cmp_op, v1.cmp(&v2))
                }
                _ => Err(-libc::EINVAL),
            }?;
            if !r {
                return Err(-libc::ECANCELED);
            }
        }
        op::OMAPGETKEYS | op::OMAPGETVALS => {
            c.num_read += 1;
            let start_after = bp.bufferlist().map_err(inval)?;
            let max_return = bp
                .u64()
                .map_err(inval)?
                .min(c.cfg.osd_max_omap_entries_per_request);
            let prefix = if o.op == op::OMAPGETVALS {
                bp.bufferlist().map_err(inval)?
            } else {
                Bytes::new()
            };
            let (kvs, truncated) = c.omap_iter(&start_after, &prefix, max_return)?;
            let mut e = Encoder::new(0);
            e.u32(kvs.len() as u32);
            for (k, v) in &kvs {
                e.bytes(k);
                if o.op == op::OMAPGETVALS {
                    e.bytes(v);
                }
            }
            e.bool(truncated);
            o.outdata = e.into_bytes();
            c.delta.num_rd_kb += kb(o.outdata.len() as u64) as u64;
            c.delta.num_rd += 1;
        }
        op::OMAPGETHEADER => {
            if !c.oi.test_flag(oi_flag::OMAP) || !c.orig_exists {
                return Ok(());
            }
            c.num_read += 1;
            o.outdata = c
                .store
                .omap_get_header(&c.cid, &c.okey)
                .map_err(|e| store_errno(&e))?;
            c.delta.num_rd_kb += kb(o.outdata.len() as u64) as u64;
            c.delta.num_rd += 1;
        }
        op::OMAPGETVALSBYKEYS => {
            c.num_read += 1;
            let want: std::collections::BTreeSet<Bytes> = bp.decode().map_err(inval)?;
            let mut found: BTreeMap<Bytes, Bytes> = BTreeMap::new();
            if c.oi.test_flag(oi_flag::OMAP) && c.orig_exists {
                let want: Vec<Bytes> = want.into_iter().collect();
                for (k, v) in c
                    .store
                    .omap_get_values(&c.cid, &c.okey, &want)
                    .map_err(|e| store_errno(&e))?
                {
                    found.insert(k, v);
                }
            }
            o.outdata = found.to_bytes(0);
            c.delta.num_rd_kb += kb(o.outdata.len() as u64) as u64;
            c.delta.num_rd += 1;
        }
        op::OMAP_CMP => {
            c.num_read += 1;
            if !c.exists || c.oi.test_flag(oi_flag::WHITEOUT) {
                return Err(-libc::ENOENT);
            }
            let assertions: BTreeMap<Bytes, (Bytes, i32)> = bp.decode().map_err(inval)?;
            let mut found: BTreeMap<Bytes, Bytes> = BTreeMap::new();
            if c.oi.test_flag(oi_flag::OMAP) && c.orig_exists {
                let want: Vec<Bytes> = assertions.keys().cloned().collect();
                for (k, v) in c
                    .store
                    .omap_get_values(&c.cid, &c.okey, &want)
                    .map_err(|e| store_errno(&e))?
                {
                    found.insert(k, v);
                }
            }
            c.delta.num_rd += 1;
            for (k, (val, cmp)) in &assertions {
                let have = found.get(k).cloned().unwrap_or_default();
                let ord = signed_cmp(&have, val);
                let ok = match *cmp {
                    1 => ord == std::cmp::Ordering::Equal,
                    5 => ord == std::cmp::Ordering::Less,
                    3 => ord == std::cmp::Ordering::Greater,
                    _ => return Err(-libc::EINVAL),
                };
                if !ok {
                    return Err(-libc::ECANCELED);
                }
            }
        }
        op::OMAPSETVALS | op::OMAPSETHEADER | op::OMAPCLEAR | op::OMAPRMKEYS | op::OMAPRMKEYRANGE
            if c.pool_erasure =>
        {
            return Err(-libc::EOPNOTSUPP);
        }
        op::OMAPSETVALS => {
            c.num_write += 1;
            c.maybe_create();
            let kvs: BTreeMap<Bytes, Bytes> = bp.decode().map_err(inval)?;
            let len: u64 = kvs
                .iter()
                .map(|(k, v)| (k.len() + v.len() + 8) as u64)
                .sum::<u64>()
                + 4;
            let (cid, oid) = (c.cid.clone(), c.okey.clone());
            c.push(Op::OmapSetKeys {
                cid,
                oid,
                kvs: kvs.into_iter().collect(),
            });
            c.delta.num_wr += 1;
            c.delta.num_wr_kb += kb(len) as u64;
            c.oi.set_flag(oi_flag::OMAP);
            c.oi.clear_omap_digest();
        }
        op::OMAPSETHEADER => {
            c.num_write += 1;
            c.maybe_create();
            let (cid, oid) = (c.cid.clone(), c.okey.clone());
            c.push(Op::OmapSetHeader {
                cid,
                oid,
                header: o.indata.clone(),
            });
            c.delta.num_wr += 1;
            c.oi.set_flag(oi_flag::OMAP);
            c.oi.clear_omap_digest();
        }
        op::OMAPCLEAR => {
            c.num_write += 1;
            if !c.exists || c.oi.test_flag(oi_flag::WHITEOUT) {
                return Err(-libc::ENOENT);
            }
            if c.oi.test_flag(oi_flag::OMAP) {
                let (cid, oid) = (c.cid.clone(), c.okey.clone());
                c.push(Op::OmapClear { cid, oid });
                c.delta.num_wr += 1;
                c.oi.clear_omap_digest();
                c.oi.clear_flag(oi_flag::OMAP);
            }
        }
        op::OMAPRMKEYS => {
            c.num_write += 1;
            if !c.exists || c.oi.test_flag(oi_flag::WHITEOUT) {
                return Err(-libc::ENOENT);
            }
            let keys: std::collections::BTreeSet<Bytes> = bp.decode().map_err(inval)?;
            let (cid, oid) = (c.cid.clone(), c.okey.clone());
            c.push(Op::OmapRmKeys {
                cid,
                oid,
                keys: keys.into_iter().collect(),
            });
            c.delta.num_wr += 1;
            c.oi.clear_omap_digest();
        }
        op::OMAPRMKEYRANGE => {
            c.num_write += 1;
            if !c.exists || c.oi.test_flag(oi_flag::WHITEOUT) {
                return Err(-libc::ENOENT);
            }
            let first = bp.bufferlist().map_err(inval)?;
            let last = bp.bufferlist().map_err(inval)?;
            let (cid, oid) = (c.cid.clone(), c.okey.clone());
            c.push(Op::OmapRmKeyRange {
                cid,
                oid,
                first,
                last,
            });
            c.delta.num_wr += 1;
            c.oi.clear_omap_digest();
        }
        op::CALL => {
            let a = o.cls();
            let cname = bp.take_bytes(usize::from(a.class_len)).map_err(inval)?;
            let mname = bp.take_bytes(usize::from(a.method_len)).map_err(inval)?;
            let input = bp.take_bytes(a.indata_len as usize).map_err(inval)?;
            let Some(flags) = cls::method_flags(&cname, &mname) else {
                return Err(-libc::EOPNOTSUPP);
            };
            if flags & cls::CLS_METHOD_WR != 0 {
                c.user_modify = true;
            }
            if flags & cls::CLS_METHOD_RD != 0 && !c.exists && flags & cls::CLS_METHOD_WR == 0 {
                return Err(-libc::ENOENT);
            }
            let (prev_rd, prev_wr) = (c.num_read, c.num_write);
            let outdata = cls::call(c, &cname, &mname, input)?;
            if c.num_read > prev_rd && flags & cls::CLS_METHOD_RD == 0 {
                return Err(-libc::EIO);
            }
            if c.num_write > prev_wr && flags & cls::CLS_METHOD_WR == 0 {
                return Err(-libc::EIO);
            }
            let mut x = o.extent();
            x.length = outdata.len() as u64;
            o.set_extent(x);
            o.outdata = outdata;
        }
        op::WRITESAME => {
            c.num_write += 1;
            let (offset, length, data_length) = o.writesame();
            if length == 0 {
                return Ok(());
            }
            if data_length == 0 || length % data_length != 0 || data_length != o.indata.len() as u64 {
                return Err(-libc::EINVAL);
            }
            // bounded before anything is allocated
            check_offset_and_length(offset, length, c.cfg.osd_max_object_size)?;
            let mut data = BytesMut::with_capacity(length as usize);
            while (data.len() as u64) < length {
                data.extend_from_slice(&o.indata);
            }
            let mut w = OSDOp::new(op::WRITE).with_indata(data.freeze());
            w.set_extent(ceph_msgs::osd_op::Extent {
                offset,
                length,
                ..Default::default()
            });
            let r = do_osd_ops(c, std::slice::from_mut(&mut w));
            if r < 0 {
                return Err(r);
            }
        }
        op::CHECKSUM => {
            c.num_read += 1;
            let mut a = o.checksum();
            if a.chunk_size > 0 && (a.length == 0 || !a.length.is_multiple_of(u64::from(a.chunk_size))) {
                return Err(-libc::EINVAL);
            }
            if a.offset == 0 && a.length == 0 {
                a.length = c.oi.size;
            } else if a.offset >= c.oi.size {
                return Ok(());
            } else if a.offset.saturating_add(a.length) > c.oi.size {
                a.length = c.oi.size - a.offset;
                if a.chunk_size > 0 && !a.length.is_multiple_of(u64::from(a.chunk_size)) {
                    return Err(-libc::EINVAL);
                }
            }
            let mut x = o.extent();
            x.length = a.length;
            o.set_extent(x);
            // CEPH_OSD_CHECKSUM_OP_TYPE_CRC32C only; the xxhash types are not implemented here
            if a.ty != 2 {
                return Err(if a.ty <= 1 {
                    -libc::EOPNOTSUPP
                } else {
                    -libc::EINVAL
                });
            }
            let init = bp.u32().map_err(inval)?;
            let data = if a.length > 0 {
                let mut r = OSDOp::new(op::READ).with_extent(a.offset, a.length);
                let res = do_osd_ops(c, std::slice::from_mut(&mut r));
                if res < 0 {
                    return Err(res);
                }
                r.outdata
            } else {
                Bytes::new()
            };
            if a.length > 0 && data.len() as u64 != a.length {
                return Err(-libc::EINVAL);
            }
            let chunk = if a.chunk_size != 0 {
                a.chunk_size as usize
            } else {
                data.len()
            };
            let count = data.len().checked_div(chunk).unwrap_or(0);
            let mut e = Encoder::new(0);
            e.u32(count as u32);
            for i in 0..count {
                e.u32(crc32c(init, &data[i * chunk..(i + 1) * chunk]));
            }
            o.outdata = e.into_bytes();
        }
        op::LIST_SNAPS => {
            c.num_read += 1;
            // head only: this OSD makes no clones yet
            let mut e = Encoder::new(0);
            e.versioned(2, 1, |e| {
                let head_ok = c.exists && !c.oi.test_flag(oi_flag::WHITEOUT);
                let head = usize::from(head_ok);
                e.u32((c.snapset.clones.len() + head) as u32);
                for cl in &c.snapset.clones {
                    e.versioned(1, 1, |e| {
                        e.encode(cl);
                        e.encode(&c.snapset.clone_snaps.get(cl).cloned().unwrap_or_default());
                        let ov: Vec<(u64, u64)> = c
                            .snapset
                            .clone_overlap
                            .get(cl)
                            .map(|m| m.iter().map(|(a, b)| (*a, *b)).collect())
                            .unwrap_or_default();
                        e.encode(&ov);
                        e.u64(c.snapset.clone_size.get(cl).copied().unwrap_or(0));
                    });
                }
                if head_ok {
                    e.versioned(1, 1, |e| {
                        e.encode(&SnapId::NOSNAP);
                        e.u32(0);
                        e.u32(0);
                        e.u64(c.oi.size);
                    });
                }
                e.encode(&c.snapset.seq);
            });
            o.outdata = e.into_bytes();
            c.delta.num_rd += 1;
        }
        op::STARTSYNC => {}
        _ => return Err(-libc::EOPNOTSUPP),
    }
    Ok(())
}

/// Remove `[off, off + len)` from an interval set (offset → length).
fn interval_subtract(set: &mut osd_types::snapset::IntervalSet, off: u64, len: u64) {
    if len == 0 {
        return;
    }
    let end = off.saturating_add(len);
    let hits: Vec<(u64, u64)> = set
        .iter()
        .filter(|(s, l)| **s < end && s.saturating_add(**l) > off)
        .map(|(s, l)| (*s, *l))
        .collect();
    for (s, l) in hits {
        set.remove(&s);
        let e = s + l;
        if s < off {
            set.insert(s, off - s);
        }
        if e > end {
            set.insert(end, e - end);
        }
    }
}

/// `bufferlist` comparison as Ceph does it: bytewise on (signed) `char`.
fn signed_cmp(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    for (x, y) in a.iter().zip(b) {
        let o = (*x as i8).cmp(&(*y as i8));
        if o != std::cmp::Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

fn cmp_result(op: u8, o: std::cmp::Ordering) -> Result<bool, i32> {
    use std::cmp::Ordering::*;
    Ok(match op {
        cmpxattr::OP_EQ => o == Equal,
        cmpxattr::OP_NE => o != Equal,
        cmpxattr::OP_GT => o == Greater,
        cmpxattr::OP_GTE => o != Less,
        cmpxattr::OP_LT => o == Less,
        cmpxattr::OP_LTE => o != Greater,
        _ => return Err(-libc::EINVAL),
    })
}

/// `strtoull(s, NULL, 10)`: leading blanks, an optional sign, then digits; 0 if none.
fn strtoull(s: &[u8]) -> u64 {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    let mut v: u64 = 0;
    let mut overflow = false;
    while i < s.len() && s[i].is_ascii_digit() {
        match v
            .checked_mul(10)
            .and_then(|x| x.checked_add(u64::from(s[i] - b'0')))
        {
            Some(n) => v = n,
            None => overflow = true,
        }
        i += 1;
    }
    if overflow {
        return u64::MAX;
    }
    if neg { v.wrapping_neg() } else { v }
}

impl<D: Device> cls::ClsHost for Ctx<'_, D> {
    fn getxattr(&mut self, name: &[u8]) -> Result<Bytes, i32> {
        self.num_read += 1;
        self.delta.num_rd += 1;
        let mut full = b"_".to_vec();
        full.extend_from_slice(name);
        self.getattr(&full)
    }
    fn setxattr(&mut self, name: &[u8], v: Bytes) -> Result<(), i32> {
        self.num_write += 1;
        self.maybe_create();
        let mut full = BytesMut::with_capacity(name.len() + 1);
        full.extend_from_slice(b"_");
        full.extend_from_slice(name);
        self.setattr(full.freeze(), v);
        self.delta.num_wr += 1;
        Ok(())
    }
    fn getxattrs(&mut self) -> Result<BTreeMap<Bytes, Bytes>, i32> {
        self.num_read += 1;
        self.delta.num_rd += 1;
        self.user_attrs()
    }
    fn remove(&mut self) -> Result<(), i32> {
        self.num_write += 1;
        let mut o = OSDOp::new(op::DELETE);
        do_one(self, &mut o)
    }
    fn origin(&self) -> (EntityNameT, EntityAddr) {
        (self.client, self.client_addr)
    }
    fn now(&self) -> Utime {
        self.now
    }
    fn client_features(&self) -> u64 {
        self.features
    }
    fn random_bytes(&mut self, out: &mut [u8]) {
        for b in out.iter_mut() {
            // xorshift64*: deterministic per PG (sans-IO), good enough for version tags
            let mut x = *self.rng;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            *self.rng = x;
            *b = (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8;
        }
    }
}

/// `do_pg_op`: PGNLS listing (and EINVAL for the other PG ops, which Pacific clients do not send).
fn do_pg_op<D: Device>(pg: &mut Pg, store: &mut Store<D>, ctx: &OpContext<'_>) -> MOSDOpReply {
    let m = &ctx.msg;
    let mut ops = m.ops.clone();
    let mut result = 0;
    for o in ops.iter_mut() {
        match o.op {
            op::PGNLS => {
                if m.snapid != SnapId::NOSNAP {
                    result = -libc::EINVAL;
                    break;
                }
                match pgnls(pg, store, m, o) {
                    Ok(r) => result = r,
                    Err(e) => result = e,
                }
            }
            _ => result = -libc::EINVAL,
        }
        if result < 0 {
            break;
        }
    }
    let mut reply = MOSDOpReply::for_request(m, result, ctx.epoch, flag::ACK | flag::ONDISK);
    for (r, o) in reply.ops.iter_mut().zip(&ops) {
        r.outdata = o.outdata.clone();
    }
    reply.set_reply_versions(pg.log.head, pg.log.last_user_version);
    reply
}

fn pg_hobj_start(pg: &Pg) -> HObject {
    HObject::new(
        "",
        "",
        SnapId(0),
        pg.spgid.pgid.seed,
        pg.spgid.pgid.pool as i64,
        "",
    )
}

fn pg_hobj_end(pg: &Pg) -> HObject {
    let bits = pg.spgid.pgid.get_split_bits(pg.pool.pg_num);
    let rev_start = u64::from(pg.spgid.pgid.seed.reverse_bits());
    let rev_end = (rev_start | (0xffff_ffffu64 >> bits)) + 1;
    if rev_end >= 1 << 32 {
        HObject::max_value()
    } else {
        HObject::new(
            "",
            "",
            SnapId::NOSNAP,
            (rev_end as u32).reverse_bits(),
            pg.spgid.pgid.pool as i64,
            "",
        )
    }
}

fn pgnls<D: Device>(pg: &mut Pg, store: &mut Store<D>, m: &MOSDOp, o: &mut OSDOp) -> Result<i32, i32> {
    let (count, _) = o.pgls();
    let list_size = OSD_MAX_PGLS.min(count) as usize;
    let mut bp = Decoder::new(o.indata.clone());
    let lower_bound: HObject = bp.decode().map_err(|_| -libc::EINVAL)?;
    let pg_start = pg_hobj_start(pg);
    let pg_end = pg_hobj_end(pg);
    if (!lower_bound.is_max() && lower_bound >= pg_end) || (!lower_bound.is_min() && lower_bound < pg_start) {
        return Err(-libc::EINVAL);
    }
    // objects_list_partial from lower_bound (generation 0: the smallest)
    let mut start = if lower_bound.is_min() {
        Vec::new()
    } else {
        denc::GHObject::new(lower_bound.clone(), 0, pg.spgid.shard).to_sort_key()
    };
    let mut sentries: Vec<HObject> = Vec::new();
    let mut next = HObject::max_value();
    let mut exhausted = false;
    while sentries.len() < list_size && !exhausted {
        let want = list_size - sentries.len();
        let got = store
            .list_objects(&pg.cid, &start, None, want + 1)
            .map_err(|e| store_errno(&e))?;
        if got.len() <= want {
            exhausted = true;
        }
        for (i, k) in got.iter().enumerate() {
            let Some(g) = keys::from_key(k) else { continue };
            if i == want {
                next = g.hobj.clone();
                start = k.name.to_vec();
                break;
            }
            if g.is_pgmeta() || g.hobj.is_temp() || !g.is_no_gen() {
                continue;
            }
            sentries.push(g.hobj);
        }
        if exhausted {
            next = HObject::max_value();
        }
    }
    let mut resp = PgNlsResponse::default();
    let mut consumed_all = true;
    for (i, cand) in sentries.iter().enumerate() {
        if resp.entries.len() == list_size {
            next = cand.clone();
            consumed_all = i == sentries.len();
            break;
        }
        if cand.snap != SnapId::NOSNAP || cand.nspace.as_ref() == HIT_SET_NAMESPACE {
            continue;
        }
        if m.oloc.nspace.as_ref() != ALL_NSPACES && cand.nspace != m.oloc.nspace {
            continue;
        }
        resp.entries.push(ListObject {
            nspace: cand.nspace.clone(),
            oid: cand.oid.0.clone(),
            locator: cand.key.clone(),
        });
    }
    let result = if next.is_max() && consumed_all {
        resp.handle = pg_end;
        1
    } else {
        resp.handle = next;
        0
    };
    o.outdata = resp.to_bytes(0);
    Ok(result)
}

pub(crate) fn handle_timeout<D: Device>(pg: &mut Pg, store: &mut Store<D>, now: Utime) -> Outputs {
    let mut out = Outputs::default();
    let mut msgs = Msgs::new();
    let expired = pg.watch.expire(now, &mut msgs);
    out.notifies.append(&mut msgs);
    for ((okey, cookie, entity), soid) in expired {
        // handle_watch_timeout: drop the watcher from the object info with a log entry of its own
        let key = ObjectKey::new(soid.hash, okey.clone());
        let Ok((Some((mut oi, _)), _)) = pg.load_context(store, &key) else {
            continue;
        };
        if oi.watchers.remove(&(cookie, entity)).is_none() {
            continue;
        }
        let at_version = pg.log.next_version(pg.epoch);
        oi.prior_version = oi.version;
        oi.version = at_version;
        let ops = vec![Op::SetAttrs {
            cid: pg.cid.clone(),
            oid: key.clone(),
            attrs: vec![(Bytes::from_static(OI_ATTR), oi.to_bytes(denc::CEPH_FEATURES_ALL))],
        }];
        let e = PgLogEntry {
            op: log_op::MODIFY,
            soid: soid.clone(),
            version: at_version,
            prior_version: oi.prior_version,
            reqid: OsdReqId::default(),
            mod_desc: ObjectModDesc::unrollbackable(),
            clean_regions: ObjectCleanRegions::fully_dirty(),
            ..Default::default()
        };
        if let Ok((seq, rep)) = pg.commit_write(store, ops, (None, e), None) {
            pg.dirty.insert(okey, (seq, at_version));
            if let Some(r) = rep {
                out.repops.push(r);
            }
        }
    }
    out
}

/// Count objects and bytes of a PG collection (at load).
pub(crate) fn scan_stats<D: Device>(store: &mut Store<D>, cid: &CollectionId) -> Result<PgStats, PgError> {
    let mut s = PgStats::default();
    let mut start: Vec<u8> = Vec::new();
    loop {
        let batch = store.list_objects(cid, &start, None, 1024)?;
        let Some(last) = batch.last() else { break };
        start = last.name.to_vec();
        start.push(0);
        for k in &batch {
            let Some(g) = keys::from_key(k) else { continue };
            if g.is_pgmeta() || g.hobj.is_temp() {
                continue;
            }
            s.num_objects += 1;
            if let Ok(bl) = store.getattr(cid, k, OI_ATTR)
                && let Ok(oi) = ObjectInfo::decode_all(bl)
            {
                s.num_bytes += oi.size;
                if oi.test_flag(oi_flag::OMAP) {
                    s.num_omap_objects += 1;
                }
            }
        }
    }
    Ok(s)
}
