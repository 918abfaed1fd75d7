// SPDX-License-Identifier: LGPL-3.0-or-later
//! One PG held by a shard: the op engine (`pg::Pg`), peering (`peering::Pg`), recovery/backfill state and the
//! replication bookkeeping that ties them together.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use ceph_msgs::osd_rep::MOSDRepOp;
use denc::{Eversion, HObject, SnapId, SpgId, Utime};
use ferrostore::{Device, Store};
use peering::{Event, MapView, PeerMsg, Persist};
use pg::{ConnId, OpContext};

use crate::repl::{self, RepGather, RepOpData};
use crate::{
    Backfill, ClientOp, MAX_WAITING_PER_PG, Output, PgReport, Recovery, RecoveryCtx, RecoveryEvent,
    ShardConfig, glue,
};

/// Peering messages kept per peer for a resend after a connection reset (the newest of this interval).
const RESEND_KEEP: usize = 16;
/// Replies of requeued ops that the op engine may still release (dropped when they come out), bounded.
const SUPPRESS_MAX: usize = 4096;

/// A client reply waiting for replicated writes it depends on.
#[derive(Debug)]
struct Held {
    conn: ConnId,
    reply: Box<ceph_msgs::osd_op::MOSDOpReply>,
    deps: BTreeSet<u64>,
    op: Box<ClientOp>,
    order: u64,
}

/// An op dispatched to the engine whose reply has not come out yet and that waits on replicated writes.
#[derive(Debug)]
struct Pending {
    deps: BTreeSet<u64>,
    op: Box<ClientOp>,
    order: u64,
}

/// Everything the shard lends a PG for one call.
pub(crate) struct Cx<'a, D: Device> {
    pub cfg: &'a ShardConfig,
    pub store: &'a mut Store<D>,
    pub out: &'a mut VecDeque<Output>,
    pub now: Duration,
    pub wall: Utime,
    pub epoch: u32,
    pub errors: &'a mut u64,
}

impl<D: Device> Cx<'_, D> {
    fn log(&mut self, msg: String) {
        self.out.push_back(Output::Log(msg));
    }
    fn error(&mut self, msg: String) {
        *self.errors += 1;
        self.log(msg);
    }
}

pub(crate) struct PgState {
    pub spgid: SpgId,
    pub pg: pg::Pg,
    pub peering: peering::Pg,
    recovery: Recovery,
    backfill: Backfill,
    /// This PG's view of the newest map.
    pub view: Option<MapView>,
    /// `pg_pool_t::last_force_op_resend` of the newest map (ops older than it are discarded).
    force_resend: u32,
    /// Client ops waiting for the PG to be active/readable, in arrival order.
    waiting: VecDeque<Box<ClientOp>>,
    /// Client ops waiting for an object to be recovered (missing on the primary or degraded on a replica).
    waiting_for_object: BTreeMap<HObject, Vec<Box<ClientOp>>>,
    /// Replicated writes in flight, by id.
    repops: BTreeMap<u64, RepGather>,
    next_repop: u64,
    /// Replies of dispatched ops whose engine reply has not come out yet and that wait on repops.
    pending: BTreeMap<(ConnId, u64), Pending>,
    /// Replies that came out of the engine but wait on repops.
    held: Vec<Held>,
    /// Engine replies to drop (ops requeued at an interval change whose first reply may still come out).
    suppress: BTreeMap<(ConnId, u64), u32>,
    /// Dispatch order counter (requeued ops keep their order).
    order: u64,
    /// Replica side: ONDISK replies waiting for their store sequence number.
    replica_pending: VecDeque<(u64, i32, ceph_msgs::Message)>,
    /// Highest store sequence number this PG queued (replica dup answers wait for it).
    last_seq: u64,
    /// Peering messages sent this interval, per peer (resent after a connection reset).
    sent: BTreeMap<i32, VecDeque<ceph_msgs::Message>>,
    /// Created by this OSD and not yet reported to the monitor as created.
    pub report_created: bool,
    pub created_epoch: u32,
    /// The epoch the current interval started (pg_stat_t::mapping_epoch).
    pub mapping_epoch: u32,
}

/// Recovery's view of a PG, borrowing disjoint fields (so recovery/backfill state stays usable beside it).
macro_rules! rctx {
    ($s:ident, $cx:ident, $evs:expr) => {
        RecoveryCtx {
            whoami: $cx.cfg.whoami,
            spgid: $s.spgid,
            epoch: $cx.epoch,
            same_interval_since: $s.peering.info().history.same_interval_since,
            now: $cx.now,
            cfg: $cx.cfg,
            store: &mut *$cx.store,
            pg: &mut $s.pg,
            peering: &$s.peering,
            out: $evs,
        }
    };
}

/// The object an op addresses (its head).
fn op_object(op: &ceph_msgs::osd_op::MOSDOp) -> HObject {
    HObject::new(
        op.oid.0.clone(),
        op.oloc.key.clone(),
        SnapId::NOSNAP,
        op.hash,
        op.pgid.pgid.pool as i64,
        op.oloc.nspace.clone(),
    )
}

impl PgState {
    pub fn new(
        spgid: SpgId,
        pg: pg::Pg,
        peering: peering::Pg,
        created_epoch: u32,
        report_created: bool,
    ) -> Self {
        PgState {
            spgid,
            pg,
            peering,
            recovery: Recovery::new(spgid),
            backfill: Backfill::new(spgid),
            view: None,
            force_resend: 0,
            waiting: VecDeque::new(),
            waiting_for_object: BTreeMap::new(),
            repops: BTreeMap::new(),
            next_repop: 1,
            pending: BTreeMap::new(),
            held: Vec::new(),
            suppress: BTreeMap::new(),
            order: 0,
            replica_pending: VecDeque::new(),
            last_seq: 0,
            sent: BTreeMap::new(),
            report_created,
            created_epoch,
            mapping_epoch: created_epoch,
        }
    }

    pub fn is_primary(&self, whoami: i32) -> bool {
        self.view.as_ref().is_some_and(|v| v.acting_primary == whoami)
    }

    fn same_interval_since(&self) -> u32 {
        self.peering.info().history.same_interval_since
    }

    /// Whether client ops may run now (Ceph: active, at least min_size, lease readable).
    fn can_serve(&self, now: Duration) -> bool {
        self.peering.is_active() && self.peering.is_readable(now)
    }

    pub fn note_seq(&mut self, seq: u64) {
        self.last_seq = self.last_seq.max(seq);
    }

    // ---- maps ----

    /// A new map epoch for this PG.
    pub fn advance<D: Device>(
        &mut self,
        cx: &mut Cx<'_, D>,
        view: MapView,
        pool: pg::PoolInfo,
        force_resend: u32,
    ) {
        let old_interval = self.same_interval_since();
        let had_view = self.view.is_some();
        if pool != *self.pg.pool() {
            self.pg.set_pool(pool);
        }
        self.force_resend = force_resend;
        self.view = Some(view.clone());
        self.peering.handle(cx.now, Event::AdvanceMap(view));
        let new_interval = !had_view || self.same_interval_since() != old_interval;
        if new_interval {
            self.on_new_interval(cx);
        }
        let h = &self.peering.info().history;
        self.pg
            .set_discard_before(h.same_primary_since.max(self.force_resend));
        self.drain(cx, false);
        if !self.is_primary(cx.cfg.whoami) {
            // Not (or no longer) the primary: clients resend what they have not seen answered on their new map.
            self.waiting.clear();
            self.waiting_for_object.clear();
        }
        self.dispatch(cx);
    }

    /// The interval changed: writes in flight go back to the queue (the requeued op is answered as a dup from
    /// the log once the PG is active again, as Ceph requeues them), recovery restarts from peering.
    fn on_new_interval<D: Device>(&mut self, cx: &mut Cx<'_, D>) {
        self.mapping_epoch = cx.epoch;
        self.recovery.reset();
        self.backfill.reset();
        self.sent.clear();
        let mut requeue: BTreeMap<u64, Box<ClientOp>> = BTreeMap::new();
        self.repops.clear();
        for (key, p) in std::mem::take(&mut self.pending) {
            // its engine reply has not come out yet: drop it when it does (the requeued op answers instead)
            if self.suppress.len() < SUPPRESS_MAX {
                *self.suppress.entry(key).or_default() += 1;
            }
            requeue.insert(p.order, p.op);
        }
        for h in std::mem::take(&mut self.held) {
            requeue.insert(h.order, h.op);
        }
        for ops in std::mem::take(&mut self.waiting_for_object).into_values() {
            for op in ops {
                self.order += 1;
                requeue.insert(u64::MAX / 2 + self.order, op);
            }
        }
        for op in requeue.into_values().rev() {
            self.waiting.push_front(op);
        }
    }

    // ---- client ops ----

    /// A client op for this PG (its epoch is not newer than ours).
    pub fn client_op<D: Device>(&mut self, cx: &mut Cx<'_, D>, op: Box<ClientOp>) {
        if !self.is_primary(cx.cfg.whoami) {
            let h = &self.peering.info().history;
            if op.msg.osdmap_epoch < h.same_primary_since.max(self.force_resend) {
                return; // Ceph's can_discard_op: the client resends on its newer map
            }
            cx.out.push_back(Output::Misdirected {
                conn: op.conn,
                msg: Box::new(op.msg),
            });
            return;
        }
        if self.waiting.len() >= MAX_WAITING_PER_PG {
            cx.log(format!(
                "pg {}: op queue full, dropping an op (the client resends)",
                self.spgid
            ));
            return;
        }
        self.waiting.push_back(op);
        self.dispatch(cx);
    }

    /// Run queued ops while the PG can serve them.
    pub fn dispatch<D: Device>(&mut self, cx: &mut Cx<'_, D>) {
        if !self.is_primary(cx.cfg.whoami) {
            return;
        }
        // ops parked on objects that are no longer missing/degraded go back to the front, in order
        let ready: Vec<HObject> = self
            .waiting_for_object
            .keys()
            .filter(|o| !self.object_unavailable(o))
            .cloned()
            .collect();
        for o in ready.into_iter().rev() {
            if let Some(ops) = self.waiting_for_object.remove(&o) {
                for op in ops.into_iter().rev() {
                    self.waiting.push_front(op);
                }
            }
        }
        while self.can_serve(cx.now) {
            let Some(op) = self.waiting.pop_front() else { break };
            let oid = op_object(&op.msg);
            if self.object_unavailable(&oid) {
                self.recovery.prioritize(&oid);
                self.waiting_for_object.entry(oid).or_default().push(op);
                continue;
            }
            self.execute(cx, op, oid);
        }
    }

    /// An object missing on the primary or on an acting replica: ops on it wait for its recovery (Ceph's
    /// wait_for_unreadable_object / wait_for_degraded_object).
    fn object_unavailable(&self, oid: &HObject) -> bool {
        if self.peering.missing().is_missing(oid) {
            return true;
        }
        let Some(v) = &self.view else { return false };
        v.acting
            .iter()
            .any(|o| self.peering.peer_missing(*o).is_some_and(|m| m.is_missing(oid)))
    }

    fn execute<D: Device>(&mut self, cx: &mut Cx<'_, D>, op: Box<ClientOp>, oid: HObject) {
        self.order += 1;
        let order = self.order;
        let key = (op.conn, op.msg.tid);
        // a reply on an object with replicated writes in flight waits for them (reads never see data that is
        // not on every acting replica yet)
        let mut deps: BTreeSet<u64> = self
            .repops
            .values()
            .filter(|r| r.data.oid.oid == oid.oid && r.data.oid.nspace == oid.nspace)
            .map(|r| r.id)
            .collect();
        let keep = op.clone();
        let mut out = self.pg.handle_op(
            cx.store,
            OpContext {
                msg: op.msg,
                conn: op.conn,
                client: op.client,
                client_addr: op.client_addr,
                caps: &op.caps,
                conn_features: op.features,
                epoch: cx.epoch,
                now: cx.wall,
            },
        );
        let repops = glue::take_repops(&mut out);
        for r in repops {
            let id = self.start_repop(cx, r);
            if let Some(id) = id {
                deps.insert(id);
            }
        }
        if !deps.is_empty() {
            self.pending.insert(
                key,
                Pending {
                    deps,
                    op: keep,
                    order,
                },
            );
        }
        self.emit(cx, out);
    }

    /// Send a replicated write to every acting replica. Returns its id when it has replicas to wait for.
    fn start_repop<D: Device>(&mut self, cx: &mut Cx<'_, D>, r: RepOpData) -> Option<u64> {
        self.peering.append_log(&r.log_entries);
        // the engine wrote these log entries with the write itself
        self.drain(cx, true);
        let view = self.view.clone()?;
        let me = cx.cfg.whoami;
        let replicas: BTreeSet<i32> = view
            .acting
            .iter()
            .copied()
            .filter(|&o| o != me && o >= 0)
            .collect();
        if replicas.is_empty() {
            return None;
        }
        let id = self.next_repop;
        self.next_repop += 1;
        let lc = self.peering.info().last_complete;
        for &o in &replicas {
            let msg = repl::build_repop(
                &r,
                self.spgid,
                me,
                cx.epoch,
                self.same_interval_since(),
                lc,
                cx.cfg.peer_features,
            );
            cx.out.push_back(Output::ToOsd { osd: o, msg });
        }
        self.repops.insert(
            id,
            RepGather {
                id,
                data: r,
                waiting_on: replicas,
            },
        );
        Some(id)
    }

    /// Route the engine's outputs: notifies now, replies now unless they wait on replicated writes.
    fn emit<D: Device>(&mut self, cx: &mut Cx<'_, D>, out: pg::Outputs) {
        for (conn, n) in out.notifies {
            cx.out.push_back(Output::ClientNotify {
                conn,
                msg: Box::new(n),
            });
        }
        for (conn, reply) in out.replies {
            let key = (conn, reply.tid);
            if let Some(n) = self.suppress.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    self.suppress.remove(&key);
                }
                continue;
            }
            if let Some(p) = self.pending.remove(&key) {
                let deps: BTreeSet<u64> = p
                    .deps
                    .into_iter()
                    .filter(|d| self.repops.contains_key(d))
                    .collect();
                if !deps.is_empty() {
                    self.held.push(Held {
                        conn,
                        reply: Box::new(reply),
                        deps,
                        op: p.op,
                        order: p.order,
                    });
                    continue;
                }
            }
            cx.out.push_back(Output::ClientReply {
                conn,
                reply: Box::new(reply),
            });
        }
    }

    /// Every acting replica answered ONDISK for repop `id`.
    fn repop_done<D: Device>(&mut self, cx: &mut Cx<'_, D>, id: u64) {
        self.repops.remove(&id);
        for p in self.pending.values_mut() {
            p.deps.remove(&id);
        }
        self.pending.retain(|_, p| !p.deps.is_empty());
        let mut i = 0;
        while i < self.held.len() {
            self.held[i].deps.remove(&id);
            if self.held[i].deps.is_empty() {
                let h = self.held.remove(i);
                cx.out.push_back(Output::ClientReply {
                    conn: h.conn,
                    reply: h.reply,
                });
            } else {
                i += 1;
            }
        }
    }

    // ---- store ----

    pub fn on_durable<D: Device>(&mut self, cx: &mut Cx<'_, D>, seq: u64) {
        let out = self.pg.on_commit(seq);
        self.emit(cx, out);
        while self.replica_pending.front().is_some_and(|(s, _, _)| *s <= seq) {
            if let Some((_, to, msg)) = self.replica_pending.pop_front() {
                cx.out.push_back(Output::ToOsd { osd: to, msg });
            }
        }
        let mut evs = Vec::new();
        {
            let mut rc = rctx!(self, cx, &mut evs);
            self.recovery.on_durable(&mut rc, seq);
            self.backfill.on_durable(&mut rc, seq);
        }
        self.recovery_events(cx, evs);
        self.drain(cx, false);
        self.dispatch(cx);
    }

    // ---- timers ----

    pub fn poll_timeout(&self, now: Duration, wall: Utime) -> Option<Duration> {
        let a = self.peering.poll_timeout();
        let b = self.pg.poll_timeout().map(|t| {
            let ahead = t.as_nanos().saturating_sub(wall.as_nanos());
            now + Duration::from_nanos(ahead)
        });
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub fn tick<D: Device>(&mut self, cx: &mut Cx<'_, D>) {
        if self.peering.poll_timeout().is_some_and(|t| t <= cx.now) {
            self.peering.handle(cx.now, Event::Tick);
        }
        if self.pg.poll_timeout().is_some_and(|t| t <= cx.wall) {
            let out = self.pg.handle_timeout(cx.store, cx.wall);
            self.emit(cx, out);
        }
        let mut evs = Vec::new();
        {
            let mut rc = rctx!(self, cx, &mut evs);
            self.recovery.tick(&mut rc);
            self.backfill.tick(&mut rc);
        }
        self.recovery_events(cx, evs);
        self.drain(cx, false);
        self.dispatch(cx);
    }

    pub fn client_reset<D: Device>(&mut self, cx: &mut Cx<'_, D>, conn: ConnId) {
        let out = self.pg.handle_disconnect(conn, cx.wall);
        self.emit(cx, out);
    }

    // ---- peers ----

    /// A message from `osd.<from>` about this PG.
    pub fn peer<D: Device>(
        &mut self,
        cx: &mut Cx<'_, D>,
        from: i32,
        msg: ceph_msgs::Message,
    ) -> Result<(), String> {
        match repl::kind(msg.msg_type) {
            repl::Kind::Peering => {
                let m = PeerMsg::from_message(&msg)
                    .map_err(|e| e.to_string())?
                    .ok_or_else(|| "not a peering message".to_string())?;
                self.peering.handle(cx.now, Event::Peer { from, msg: m });
            }
            repl::Kind::RepOp => {
                let m = repl::decode_repop(&msg)?;
                self.replica_repop(cx, from, m)?;
            }
            repl::Kind::RepOpReply => {
                let m = repl::decode_repop_reply(&msg)?;
                if m.map_epoch < self.same_interval_since() {
                    return Ok(()); // from an earlier interval: its write was requeued
                }
                let id = self
                    .repops
                    .values()
                    .find(|r| r.data.reqid == m.reqid && r.waiting_on.contains(&from))
                    .map(|r| r.id);
                if let Some(id) = id
                    && let Some(r) = self.repops.get_mut(&id)
                {
                    r.waiting_on.remove(&from);
                    if r.waiting_on.is_empty() {
                        self.repop_done(cx, id);
                    }
                }
            }
            repl::Kind::Trim => {
                let t = repl::decode_trim(&msg)?;
                if t.epoch >= self.same_interval_since() {
                    self.peering.trim_log(t.trim_to);
                }
            }
            repl::Kind::Recovery | repl::Kind::Backfill => {
                let mut evs = Vec::new();
                let to_backfill = repl::kind(msg.msg_type) == repl::Kind::Backfill
                    || (self.backfill.is_active() && !self.recovery.is_active());
                let r = {
                    let mut rc = rctx!(self, cx, &mut evs);
                    if to_backfill {
                        self.backfill.handle_message(&mut rc, from, &msg)
                    } else {
                        self.recovery.handle_message(&mut rc, from, &msg)
                    }
                };
                self.recovery_events(cx, evs);
                r.map_err(|e| e.to_string())?;
            }
            repl::Kind::Other => return Err(format!("unexpected message type {}", msg.msg_type)),
        }
        self.drain(cx, false);
        self.dispatch(cx);
        Ok(())
    }

    /// Replica side of MOSDRepOp: apply the transaction and log entries, answer ONDISK once durable.
    fn replica_repop<D: Device>(
        &mut self,
        cx: &mut Cx<'_, D>,
        from: i32,
        m: MOSDRepOp,
    ) -> Result<(), String> {
        let sis = self.same_interval_since();
        if m.map_epoch < sis || self.is_primary(cx.cfg.whoami) {
            return Ok(()); // stale: the primary requeued it at the interval change
        }
        let entries = m
            .log_entries()
            .map_err(|e| format!("MOSDRepOp log entries: {e}"))?;
        if m.version <= self.peering.info().last_update {
            // a resend after a connection reset: answer once what we have is durable
            let reply = repl::build_reply(
                &m,
                cx.cfg.whoami,
                cx.epoch,
                sis,
                self.peering.info().last_complete,
                0,
                cx.cfg.peer_features,
            );
            self.replica_pending.push_back((self.last_seq, from, reply));
            return Ok(());
        }
        let seq = glue::apply_repop(cx.store, &mut self.pg, &m, &entries)?;
        self.note_seq(seq);
        self.peering.append_log(&entries);
        if m.pg_trim_to > Eversion::default() {
            self.peering.trim_log(m.pg_trim_to);
        }
        self.drain(cx, true);
        let reply = repl::build_reply(
            &m,
            cx.cfg.whoami,
            cx.epoch,
            sis,
            self.peering.info().last_update,
            0,
            cx.cfg.peer_features,
        );
        self.replica_pending.push_back((seq, from, reply));
        Ok(())
    }

    /// The connection to `osd` broke: resend what it has not acknowledged (replicated writes, and this
    /// interval's peering messages, which peering tolerates twice).
    pub fn peer_reset<D: Device>(&mut self, cx: &mut Cx<'_, D>, osd: i32) {
        let me = cx.cfg.whoami;
        let sis = self.same_interval_since();
        let lc = self.peering.info().last_complete;
        for r in self.repops.values() {
            if r.waiting_on.contains(&osd) {
                let msg = repl::build_repop(&r.data, self.spgid, me, cx.epoch, sis, lc, cx.cfg.peer_features);
                cx.out.push_back(Output::ToOsd { osd, msg });
            }
        }
        if let Some(msgs) = self.sent.get(&osd) {
            for m in msgs {
                cx.out.push_back(Output::ToOsd { osd, msg: m.clone() });
            }
        }
    }

    // ---- peering outputs ----

    /// Carry out what peering asked for. `engine_logged`: log appends come from writes the op engine already
    /// persisted with their transaction.
    fn drain<D: Device>(&mut self, cx: &mut Cx<'_, D>, engine_logged: bool) {
        loop {
            let mut evs = Vec::new();
            let mut any = false;
            while let Some(o) = self.peering.poll_output() {
                any = true;
                match o {
                    peering::Output::Send { to, msg } => {
                        let m = msg.to_message(cx.cfg.peer_features);
                        if !matches!(msg, PeerMsg::Lease(_) | PeerMsg::LeaseAck(_)) {
                            let q = self.sent.entry(to).or_default();
                            if q.len() >= RESEND_KEEP {
                                q.pop_front();
                            }
                            q.push_back(m.clone());
                        }
                        cx.out.push_back(Output::ToOsd { osd: to, msg: m });
                    }
                    peering::Output::Persist(p) => {
                        if engine_logged && matches!(p, Persist::LogAppend(_)) {
                            continue;
                        }
                        match glue::persist(cx.store, &mut self.pg, &p) {
                            Ok(Some(seq)) => self.note_seq(seq),
                            Ok(None) => {}
                            Err(e) => cx.error(format!("pg {}: persisting peering state: {e}", self.spgid)),
                        }
                    }
                    peering::Output::State(s) => {
                        if s.flags & peering::pg_state::ACTIVE != 0
                            && self.report_created
                            && self.is_primary(cx.cfg.whoami)
                        {
                            self.report_created = false;
                            cx.out.push_back(Output::PgCreated {
                                pgid: self.spgid.pgid,
                            });
                        }
                    }
                    peering::Output::NeedUpThru { epoch } => cx.out.push_back(Output::NeedUpThru { epoch }),
                    peering::Output::RequestPgTemp { pgid, acting } => {
                        cx.out.push_back(Output::PgTemp { pgid, acting })
                    }
                    peering::Output::StartRecovery { missing } => {
                        let mut rc = rctx!(self, cx, &mut evs);
                        self.recovery.start(&mut rc, missing);
                    }
                    peering::Output::StartBackfill { targets } => {
                        let mut rc = rctx!(self, cx, &mut evs);
                        self.backfill.start(&mut rc, targets);
                    }
                }
            }
            let more = !evs.is_empty();
            self.recovery_events(cx, evs);
            if !any && !more {
                break;
            }
        }
    }

    fn recovery_events<D: Device>(&mut self, cx: &mut Cx<'_, D>, evs: Vec<RecoveryEvent>) {
        for e in evs {
            match e {
                RecoveryEvent::Send { to, msg } => cx.out.push_back(Output::ToOsd { osd: to, msg }),
                RecoveryEvent::Recovered { osd, oid, version } => {
                    self.peering
                        .handle(cx.now, Event::ObjectRecovered { osd, oid, version });
                }
                RecoveryEvent::BackfillDone { osd } => {
                    self.peering.handle(cx.now, Event::BackfillDone { osd })
                }
                RecoveryEvent::LastBackfill(oid) => self.peering.set_last_backfill(oid),
                RecoveryEvent::WaitDurable(seq) => self.note_seq(seq),
                RecoveryEvent::Log(s) => cx.log(s),
            }
        }
    }

    // ---- reports ----

    pub fn report(&self, whoami: i32) -> PgReport {
        let info = self.peering.info();
        let v = self.view.clone();
        let (up, up_primary, acting, acting_primary, size) = match &v {
            Some(v) => (
                v.up.clone(),
                v.up_primary,
                v.acting.clone(),
                v.acting_primary,
                v.pool.size,
            ),
            None => (Vec::new(), -1, Vec::new(), -1, 0),
        };
        let stats = self.pg.stats();
        let mut missing = self.peering.missing().len() as u64;
        for o in acting.iter().filter(|&&o| o != whoami) {
            missing += self.peering.peer_missing(*o).map_or(0, |m| m.len() as u64);
        }
        let absent = u64::from(size).saturating_sub(acting.len() as u64);
        let backfill = self.peering.backfill_targets().len() as u64;
        PgReport {
            spgid: self.spgid,
            primary: acting_primary == whoami,
            state: self.peering.state_flags(),
            state_name: self.peering.state_name(),
            up,
            up_primary,
            acting,
            acting_primary,
            stats,
            last_update: info.last_update,
            last_complete: info.last_complete,
            created: info.history.epoch_created.max(self.created_epoch),
            same_interval_since: info.history.same_interval_since,
            last_epoch_started: info.last_epoch_started,
            last_epoch_clean: info.history.last_epoch_clean,
            mapping_epoch: self.mapping_epoch,
            num_objects_missing: missing,
            num_objects_degraded: missing + stats.num_objects * absent,
            num_objects_misplaced: stats.num_objects * backfill,
            ops_waiting: self.waiting.len() + self.waiting_for_object.values().map(Vec::len).sum::<usize>(),
            repops_in_flight: self.repops.len(),
        }
    }
}
