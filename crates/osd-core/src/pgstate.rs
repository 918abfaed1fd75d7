// SPDX-License-Identifier: LGPL-3.0-or-later
//! One PG held by a shard: the op engine (`pg::Pg`), peering (`peering::Pg`), recovery/backfill state and the
//! replication bookkeeping that ties them together.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use ceph_msgs::osd_op::MOSDOpReply;
use ceph_msgs::osd_rep::MOSDRepOp;
use denc::{Eversion, HObject, SnapId, SpgId, Utime};
use ferrostore::{Device, Store};
use peering::{Event, MapView, PeerMsg, Persist};
use pg::{ConnId, OpContext};

use crate::glue::RepOp;
use crate::repl;
use crate::{
    Backfill, ClientOp, MAX_WAITING_PER_PG, Output, PgReport, Recovery, RecoveryCtx, RecoveryEvent,
    ShardConfig, glue,
};

/// Peering messages kept per peer for a resend after a connection reset (the newest of this interval).
const RESEND_KEEP: usize = 16;
/// Replies of an ended primary term that the op engine may still release (dropped when they come out).
const SUPPRESS_MAX: usize = 4096;
/// Ops handed to the engine and not answered yet that are remembered (past this the set restarts).
const OUTSTANDING_MAX: usize = 65_536;
/// A replicated write a replica has not answered this long is sent to it again, then after twice as long, up to
/// [`REPOP_RESEND_MAX`]. A connection reset is what normally triggers a resend; this covers a loss that nothing
/// reported (the replica answers a duplicate from its log, so a resend is harmless).
const REPOP_RESEND_AFTER: Duration = Duration::from_secs(5);
const REPOP_RESEND_MAX: Duration = Duration::from_secs(30);

/// A replicated write waiting for replicas' commits.
struct InFlight {
    op: RepOp,
    /// Replicas that have not answered.
    waiting: BTreeSet<i32>,
    /// When it is sent again to those that still have not answered, and how long it waited before that.
    resend_at: Duration,
    wait: Duration,
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
    /// Replicated writes sent again because a replica left them unanswered too long.
    pub repops_resent_overdue: &'a mut u64,
    /// The shard's `osd_max_backfills` slots; PGs granted a slot by a release are listed in `granted`.
    pub reserver: &'a mut crate::backfill::Reserver,
    pub granted: &'a mut Vec<SpgId>,
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
    #[allow(clippy::vec_box)] // ops move between the queues as boxes, without copying the op
    waiting_for_object: BTreeMap<HObject, Vec<Box<ClientOp>>>,
    /// Read ops whose data the store is prefetching, and the ops on the same objects behind them (prefetch.rs).
    parked: crate::prefetch::Parked,
    /// Replicated writes of this interval not yet committed by every replica (resent after a connection reset).
    inflight: BTreeMap<Eversion, InFlight>,
    /// Ops handed to the engine whose reply has not come out yet (dropped if this OSD stops being primary).
    outstanding: BTreeSet<(ConnId, u64)>,
    /// Engine replies to drop: ops of a primary term that ended (the clients resend to the new primary).
    suppress: BTreeMap<(ConnId, u64), u32>,
    /// Replica side: ONDISK replies waiting for their store sequence number.
    replica_pending: VecDeque<(u64, i32, ceph_msgs::Message)>,
    /// Peering messages that follow a persist, waiting for it to be durable (peering's rule).
    deferred: VecDeque<(u64, i32, ceph_msgs::Message)>,
    /// Highest store sequence number this PG queued, and the highest known durable.
    last_seq: u64,
    durable: u64,
    /// Peering messages sent this interval, per peer (resent after a connection reset).
    sent: BTreeMap<i32, VecDeque<ceph_msgs::Message>>,
    /// Backfill peering asked for, waiting for one of the shard's `osd_max_backfills` slots.
    pending_backfill: Option<Vec<i32>>,
    /// Active as primary in this interval already (the engine's replicas are set at activation).
    active_in_interval: bool,
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
            parked: Default::default(),
            inflight: BTreeMap::new(),
            outstanding: BTreeSet::new(),
            suppress: BTreeMap::new(),
            replica_pending: VecDeque::new(),
            deferred: VecDeque::new(),
            last_seq: 0,
            durable: 0,
            sent: BTreeMap::new(),
            active_in_interval: false,
            pending_backfill: None,
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

    /// Where writes go and whose commits the client reply waits for: Ceph's `acting_recovery_backfill`
    /// (the acting set and the backfill targets) without this OSD.
    fn acting_replicas(&self, whoami: i32) -> Vec<i32> {
        let Some(v) = self.view.as_ref() else {
            return Vec::new();
        };
        repl::acting_recovery_backfill(&v.acting, self.peering.backfill_targets(), whoami)
    }

    /// Start peering over as for a new PG after a split at `epoch`: the next map starts a new interval here, as
    /// on every OSD holding a copy. The interval the PG was in until then is recorded first (it may have gone
    /// read-write on OSDs a later primary must probe).
    pub fn restart_peering(&mut self, cfg: &ShardConfig, epoch: u32) {
        let last = self.peering.last_map().cloned();
        let d = glue::peering_state(&self.pg);
        self.peering = peering::Pg::new(
            cfg.whoami,
            self.spgid,
            d.info,
            d.log,
            d.missing,
            d.past_intervals,
            cfg.peering,
        );
        if let Some(l) = last {
            self.peering.close_interval_for_split(&l, epoch);
        }
        self.view = None;
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
        let me = cx.cfg.whoami;
        let old_interval = self.same_interval_since();
        let had_view = self.view.is_some();
        if pool != *self.pg.pool() {
            self.pg.set_pool(pool);
        }
        self.force_resend = force_resend;
        // Writes without replicas (size 1, or alone while undersized) are logged by the engine only: before a
        // new map can start an interval, rebuild peering's copy of info/log/missing from the engine's.
        if had_view && self.peering.info().last_update < glue::last_update(&self.pg) {
            let d = glue::peering_state(&self.pg);
            let last = self.peering.last_map().cloned();
            let mut p = peering::Pg::new(
                me,
                self.spgid,
                d.info,
                d.log,
                d.missing,
                d.past_intervals,
                cx.cfg.peering,
            );
            if let Some(l) = last {
                p = p.with_last_map(l);
            }
            self.peering = p;
        }
        self.view = Some(view.clone());
        self.peering.handle(cx.now, Event::AdvanceMap(view));
        let new_interval = !had_view || self.same_interval_since() != old_interval;
        if new_interval {
            self.on_new_interval(cx);
        }
        let primary = self.is_primary(me);
        if primary != self.pg.is_primary() || !had_view {
            if !primary {
                // this primary term ended: replies the engine still holds are dropped; clients resend
                for k in std::mem::take(&mut self.outstanding) {
                    if self.suppress.len() < SUPPRESS_MAX {
                        *self.suppress.entry(k).or_default() += 1;
                    }
                }
                self.waiting.clear();
                self.waiting_for_object.clear();
                self.parked.take_all(cx.store);
            }
            glue::set_role(&mut self.pg, primary);
            if !primary {
                let out = glue::set_replicas(&mut self.pg, Vec::new());
                self.emit(cx, out);
            }
        }
        let h = &self.peering.info().history;
        self.pg
            .set_discard_before(h.same_primary_since.max(self.force_resend));
        self.drain(cx, false);
        self.dispatch(cx);
    }

    /// The interval changed: recovery restarts from peering; writes of the old interval are no longer resent
    /// (their replies stay held until the new interval activates, when every acting replica has persisted the
    /// log, as Ceph answers requeued writes as dups after re-peering).
    fn on_new_interval<D: Device>(&mut self, cx: &mut Cx<'_, D>) {
        self.mapping_epoch = cx.epoch;
        self.recovery.reset();
        self.backfill.reset();
        self.release_backfill_slot(cx);
        self.sent.clear();
        self.inflight.clear();
        self.active_in_interval = false;
        for ops in std::mem::take(&mut self.waiting_for_object).into_values().rev() {
            for op in ops.into_iter().rev() {
                self.waiting.push_front(op);
            }
        }
        for op in self.parked.take_all(cx.store).into_iter().rev() {
            self.waiting.push_front(op);
        }
    }

    /// The PG became active as primary in this interval: every acting replica has persisted the log, so
    /// writes still waiting on replicas of earlier intervals are complete; later writes go to this acting set.
    fn on_activated<D: Device>(&mut self, cx: &mut Cx<'_, D>) {
        self.active_in_interval = true;
        let out = glue::set_replicas(&mut self.pg, Vec::new());
        self.emit(cx, out);
        let reps = self.acting_replicas(cx.cfg.whoami);
        let out = glue::set_replicas(&mut self.pg, reps);
        self.emit(cx, out);
        if self.report_created {
            self.report_created = false;
            cx.out.push_back(Output::PgCreated {
                pgid: self.spgid.pgid,
            });
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
        if !self.is_primary(cx.cfg.whoami) || !self.active_in_interval {
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
            // reads whose data arrived run first; the ops queued behind them go back to the front, in order
            if let Some((token, mut ops)) = self.parked.pop_ready() {
                let Some(op) = ops.pop_front() else { continue };
                let oid = op_object(&op.msg);
                if self.object_unavailable(&oid) {
                    cx.store.release_prefetch(token);
                    self.recovery.prioritize(&oid);
                    let q = self.waiting_for_object.entry(oid).or_default();
                    q.push(op);
                    q.extend(ops);
                    continue;
                }
                self.execute(cx, op);
                cx.store.release_prefetch(token);
                for op in ops.into_iter().rev() {
                    self.waiting.push_front(op);
                }
                continue;
            }
            let Some(op) = self.waiting.pop_front() else { break };
            let oid = op_object(&op.msg);
            if self.parked.holds(&oid) {
                self.parked.queue_behind(&oid, op);
                continue;
            }
            if self.object_unavailable(&oid) {
                self.recovery.prioritize(&oid);
                self.waiting_for_object.entry(oid).or_default().push(op);
                continue;
            }
            // a read whose data must come from the device waits for it without blocking the core
            match self.parked.park(cx.store, &self.spgid, &mut self.pg, &oid, op) {
                Ok(()) => {}
                Err(op) => self.execute(cx, op),
            }
        }
    }

    /// The store finished prefetch `token`: run the op parked on it (false: not this PG's).
    pub fn prefetched<D: Device>(&mut self, cx: &mut Cx<'_, D>, token: u64) -> bool {
        if !self.parked.completed(token) {
            return false;
        }
        self.dispatch(cx);
        true
    }

    /// An object missing on the primary or on an acting replica: ops on it wait for its recovery (Ceph's
    /// wait_for_unreadable_object / wait_for_degraded_object).
    fn object_unavailable(&self, oid: &HObject) -> bool {
        if self.peering.missing().is_missing(oid)
            || self.recovery.is_degraded(oid)
            || self.backfill.is_backfilling(oid)
        {
            return true;
        }
        let Some(v) = &self.view else { return false };
        v.acting
            .iter()
            .any(|o| self.peering.peer_missing(*o).is_some_and(|m| m.is_missing(oid)))
    }

    fn execute<D: Device>(&mut self, cx: &mut Cx<'_, D>, op: Box<ClientOp>) {
        if self.outstanding.len() >= OUTSTANDING_MAX {
            // ops the engine dropped without a reply (discarded as too old) would otherwise accumulate
            self.outstanding.clear();
        }
        self.outstanding.insert((op.conn, op.msg.tid));
        let op = *op;
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
        for r in glue::take_repops(&mut out) {
            self.start_repop(cx, r);
        }
        self.emit(cx, out);
    }

    /// Log a replicated write in peering's copy of the log and send it to its replicas.
    fn start_repop<D: Device>(&mut self, cx: &mut Cx<'_, D>, r: RepOp) {
        let head = self.peering.info().last_update;
        let new: Vec<_> = r
            .log_entries
            .iter()
            .filter(|e| e.version > head)
            .cloned()
            .map(owned_entry)
            .collect();
        // the engine persisted these entries and the trim with the write itself: no persist outputs
        self.peering.append_log_persisted(new);
        if r.trim_to > Eversion::default() {
            self.peering.trim_log_persisted(r.trim_to);
        }
        self.drain(cx, true);
        let me = cx.cfg.whoami;
        let replicas: BTreeSet<i32> = r.replicas.iter().copied().filter(|&o| o != me).collect();
        if replicas.is_empty() {
            return;
        }
        for &o in &replicas {
            self.send_repop(cx, &r, o);
        }
        self.inflight.insert(
            glue::repop_version(&r),
            InFlight {
                op: r,
                waiting: replicas,
                resend_at: cx.now + REPOP_RESEND_AFTER,
                wait: REPOP_RESEND_AFTER,
            },
        );
    }

    /// Route the engine's outputs: notifies first, then replies (those of ended primary terms dropped).
    fn emit<D: Device>(&mut self, cx: &mut Cx<'_, D>, out: pg::Outputs) {
        for (conn, n) in out.notifies {
            cx.out.push_back(Output::ClientNotify {
                conn,
                msg: Box::new(n),
            });
        }
        for (conn, reply) in out.replies {
            emit_reply(&mut self.suppress, &mut self.outstanding, cx.out, conn, reply);
        }
    }

    // ---- store ----

    pub fn on_durable<D: Device>(&mut self, cx: &mut Cx<'_, D>, seq: u64) {
        // Every PG of the shard sees every durable event: a PG with nothing waiting on the store returns at once
        // (its engine holds no reply, so nothing of it is in flight).
        let idle = self.last_seq <= self.durable
            && self.pg.held_replies() == 0
            && self.replica_pending.is_empty()
            && self.deferred.is_empty()
            && !self.recovery.is_active()
            && !self.backfill.is_active();
        self.durable = self.durable.max(seq);
        if idle {
            return;
        }
        // (replies straight to the output queue: no vector of them per durable event)
        let (suppress, outstanding, out) = (&mut self.suppress, &mut self.outstanding, &mut *cx.out);
        self.pg.on_commit_each(seq, |conn, reply| {
            emit_reply(suppress, outstanding, out, conn, reply)
        });
        while self.replica_pending.front().is_some_and(|(s, _, _)| *s <= seq) {
            if let Some((_, to, msg)) = self.replica_pending.pop_front() {
                cx.out.push_back(Output::ToOsd { osd: to, msg });
            }
        }
        while self.deferred.front().is_some_and(|(s, _, _)| *s <= seq) {
            if let Some((_, to, msg)) = self.deferred.pop_front() {
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
        let a = crate::recovery::earliest([
            self.peering.poll_timeout(),
            self.recovery.poll_timeout(),
            self.backfill.poll_timeout(),
        ]);
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
        self.resend_overdue_repops(cx);
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
                if let PeerMsg::Query(q) = &m
                    && q.query.query_type == osd_types::pg_peering::query_type::INFO
                    && q.query.epoch_sent < self.same_interval_since()
                    && self.view.as_ref().is_some_and(|v| v.acting_primary == from)
                {
                    // A PG loaded after a restart starts its interval history at the first map it sees, so the
                    // current primary's query from the interval's real start looks stale to peering, which
                    // would drop it and leave the primary waiting. Answer with our info (the notify is current).
                    let reply =
                        repl::notify_for(self.spgid, q, cx.epoch, &self.peering, cx.cfg.peer_features);
                    cx.out.push_back(Output::ToOsd {
                        osd: from,
                        msg: reply,
                    });
                } else {
                    self.peering.handle(cx.now, Event::Peer { from, msg: m });
                }
            }
            repl::Kind::RepOp => {
                let m = repl::decode_repop(&msg)?;
                self.replica_repop(cx, from, m)?;
            }
            repl::Kind::RepOpReply => {
                let m = repl::decode_repop_reply(&msg)?;
                // replies are matched to this interval's writes by reqid; older ones were settled by peering
                let v = self
                    .inflight
                    .iter()
                    .find(|(_, f)| f.op.reqid == m.reqid && f.waiting.contains(&from))
                    .map(|(v, _)| *v);
                if let Some(v) = v {
                    if m.result != 0 {
                        cx.log(format!(
                            "pg {}: osd.{from} answered rep op {v} with {}",
                            self.spgid, m.result
                        ));
                    }
                    if let Some(f) = self.inflight.get_mut(&v) {
                        f.waiting.remove(&from);
                        if f.waiting.is_empty() {
                            self.inflight.remove(&v);
                        }
                    }
                    let out = glue::rep_commit(&mut self.pg, from, v);
                    self.emit(cx, out);
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
            return Ok(()); // from an earlier interval: peering settles what it carried
        }
        let entries = m
            .log_entries()
            .map_err(|e| format!("MOSDRepOp log entries: {e}"))?;
        let head = self.peering.info().last_update;
        if m.version <= head {
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
            if self.last_seq <= self.durable && self.replica_pending.is_empty() {
                // already durable: no durable event is coming to send it
                cx.out.push_back(Output::ToOsd {
                    osd: from,
                    msg: reply,
                });
            } else {
                self.replica_pending.push_back((self.last_seq, from, reply));
            }
            return Ok(());
        }
        let first = entries.first().map_or(m.version, |e| e.version);
        if first.version > head.version.saturating_add(1) {
            // An earlier write is missing: its message was lost with a broken connection and the primary's
            // resend of it comes behind this one (it resends every write not yet acknowledged, in order).
            // Applying this one would leave a hole in the log; it is applied when the resend comes.
            cx.log(format!(
                "pg {}: rep op {} from osd.{from} ahead of our log head {}: dropped until resent",
                self.spgid, m.version, head
            ));
            return Ok(());
        }
        let seq = glue::apply_repop(cx.store, &mut self.pg, &m, &entries)?;
        self.note_seq(seq);
        let new: Vec<_> = entries
            .into_iter()
            .filter(|e| e.version > head)
            .map(owned_entry)
            .collect();
        // the engine persisted the entries and the trim with the transaction: no persist outputs
        self.peering.append_log_persisted(new);
        if m.pg_trim_to > Eversion::default() {
            self.peering.trim_log_persisted(m.pg_trim_to);
        }
        self.drain(cx, true);
        let reply = repl::build_reply(
            &m,
            cx.cfg.whoami,
            cx.epoch,
            sis,
            self.peering.info().last_complete,
            0,
            cx.cfg.peer_features,
        );
        self.replica_pending.push_back((seq, from, reply));
        Ok(())
    }

    /// Send replicated write `r` to replica `osd` (again: it answers a duplicate from its log once durable).
    fn send_repop<D: Device>(&self, cx: &mut Cx<'_, D>, r: &RepOp, osd: i32) {
        let with_data = self
            .backfill
            .should_send_op(self.peering.backfill_targets(), osd, &r.soid);
        let msg = glue::repop_message(
            &self.pg,
            r,
            cx.cfg.whoami,
            cx.epoch,
            self.same_interval_since(),
            self.peering.info().last_complete,
            cx.cfg.peer_features,
            with_data,
        );
        cx.out.push_back(Output::ToOsd { osd, msg });
    }

    /// Send again the replicated writes a replica has left unanswered too long ([`REPOP_RESEND_AFTER`]).
    fn resend_overdue_repops<D: Device>(&mut self, cx: &mut Cx<'_, D>) {
        let now = cx.now;
        let mut overdue = Vec::new();
        for (v, f) in self.inflight.iter_mut() {
            if f.resend_at <= now {
                overdue.push((*v, f.wait));
                f.wait = (f.wait * 2).min(REPOP_RESEND_MAX);
                f.resend_at = now + f.wait;
            }
        }
        for (v, waited) in overdue {
            let Some(f) = self.inflight.get(&v) else { continue };
            for &osd in &f.waiting {
                cx.log(format!(
                    "pg {}: rep op {v} unanswered by osd.{osd} for {} s: sent again",
                    self.spgid,
                    waited.as_secs()
                ));
                self.send_repop(cx, &f.op, osd);
                *cx.repops_resent_overdue += 1;
            }
        }
    }

    /// The connection to `osd` broke: resend what it has not acknowledged (replicated writes; and, while the
    /// PG is still peering, this interval's peering messages, which peering tolerates twice).
    pub fn peer_reset<D: Device>(&mut self, cx: &mut Cx<'_, D>, osd: i32) {
        for f in self.inflight.values() {
            if f.waiting.contains(&osd) {
                self.send_repop(cx, &f.op, osd);
            }
        }
        // recovery and backfill requests it has not answered
        let mut evs = Vec::new();
        {
            let mut rc = rctx!(self, cx, &mut evs);
            self.recovery.peer_reset(&mut rc, osd);
            self.backfill.peer_reset(&mut rc, osd);
        }
        self.recovery_events(cx, evs);
        // peering messages only while peering: once active, an old activation log resent would look
        // divergent to a replica that has applied newer writes since
        if self.peering.is_active() {
            return;
        }
        if let Some(msgs) = self.sent.get(&osd) {
            for m in msgs {
                cx.out.push_back(Output::ToOsd { osd, msg: m.clone() });
            }
        }
    }

    // ---- peering outputs ----

    /// Carry out what peering asked for: persists are batched into one store transaction, and messages that
    /// follow a persist wait until it is durable. `engine_logged`: log appends/trims (and the info they
    /// update) come from a write the op engine already persisted with its transaction.
    fn drain<D: Device>(&mut self, cx: &mut Cx<'_, D>, engine_logged: bool) {
        loop {
            let mut evs = Vec::new();
            let mut any = false;
            let mut batch: Vec<Persist> = Vec::new();
            let mut barrier: Option<u64> = None;
            while let Some(o) = self.peering.poll_output() {
                any = true;
                if let peering::Output::Persist(p) = o {
                    if !engine_logged {
                        batch.push(p);
                    }
                    continue;
                }
                if !batch.is_empty() {
                    barrier = self.flush_persist(cx, &mut batch).or(barrier);
                }
                match o {
                    peering::Output::Persist(_) => {}
                    peering::Output::Send { to, msg } => {
                        let m = msg.to_message(cx.cfg.peer_features);
                        if !matches!(msg, PeerMsg::Lease(_) | PeerMsg::LeaseAck(_)) {
                            let q = self.sent.entry(to).or_default();
                            if q.len() >= RESEND_KEEP {
                                q.pop_front();
                            }
                            q.push_back(m.clone());
                        }
                        match barrier {
                            Some(b) if b > self.durable => self.deferred.push_back((b, to, m)),
                            _ if !self.deferred.is_empty() => {
                                let b = self.deferred.back().map_or(0, |d| d.0);
                                self.deferred.push_back((b, to, m));
                            }
                            _ => cx.out.push_back(Output::ToOsd { osd: to, msg: m }),
                        }
                    }
                    peering::Output::State(s) => {
                        if s.flags & peering::pg_state::ACTIVE != 0
                            && !self.active_in_interval
                            && self.is_primary(cx.cfg.whoami)
                        {
                            self.on_activated(cx);
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
                    peering::Output::NewRecoverySource { .. } => {
                        let mut rc = rctx!(self, cx, &mut evs);
                        self.recovery.retry_unfound(&mut rc);
                    }
                    peering::Output::StartBackfill { targets } => {
                        // one of the shard's osd_max_backfills slots first (Ceph's local reservation)
                        if cx.reserver.request(self.spgid) {
                            let mut rc = rctx!(self, cx, &mut evs);
                            self.backfill.start(&mut rc, targets);
                        } else {
                            self.pending_backfill = Some(targets);
                        }
                    }
                }
            }
            if !batch.is_empty() {
                self.flush_persist(cx, &mut batch);
            }
            let more = !evs.is_empty();
            self.recovery_events(cx, evs);
            if !any && !more {
                break;
            }
        }
    }

    /// Write a batch of peering's persists as one transaction; its sequence number.
    fn flush_persist<D: Device>(&mut self, cx: &mut Cx<'_, D>, batch: &mut Vec<Persist>) -> Option<u64> {
        let ps = std::mem::take(batch);
        match glue::persist(cx.store, &mut self.pg, &ps, cx.epoch) {
            Ok(seq) => {
                self.note_seq(seq);
                Some(seq)
            }
            Err(e) => {
                cx.error(format!("pg {}: persisting peering state: {e}", self.spgid));
                None
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
                    self.peering.handle(cx.now, Event::BackfillDone { osd });
                    if !self.backfill.is_active() {
                        self.release_backfill_slot(cx);
                    }
                }
                RecoveryEvent::LastBackfill(oid) => self.peering.set_last_backfill(oid),
                RecoveryEvent::WaitDurable(seq) => self.note_seq(seq),
                RecoveryEvent::Log(s) => cx.log(s),
            }
        }
    }

    /// Give back this PG's backfill slot (backfill done, new interval, PG gone); PGs it unblocks are started
    /// by the shard.
    pub fn release_backfill_slot<D: Device>(&mut self, cx: &mut Cx<'_, D>) {
        self.pending_backfill = None;
        let granted = cx.reserver.release(self.spgid);
        cx.granted.extend(granted);
    }

    /// The shard granted this PG a backfill slot: start the backfill peering asked for.
    pub fn start_pending_backfill<D: Device>(&mut self, cx: &mut Cx<'_, D>) {
        let Some(targets) = self.pending_backfill.take() else {
            // nothing to do any more: pass the slot on
            let granted = cx.reserver.release(self.spgid);
            cx.granted.extend(granted);
            return;
        };
        let mut evs = Vec::new();
        {
            let mut rc = rctx!(self, cx, &mut evs);
            self.backfill.start(&mut rc, targets);
        }
        self.recovery_events(cx, evs);
        self.drain(cx, false);
        self.dispatch(cx);
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
        let mut progress = self.recovery.progress();
        progress.add(&self.backfill.progress());
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
            num_objects_degraded: progress.objects_degraded.max(missing) + stats.num_objects * absent,
            num_objects_misplaced: progress.objects_misplaced,
            num_objects_unfound: progress.objects_unfound,
            ops_waiting: self.waiting.len()
                + self.waiting_for_object.values().map(Vec::len).sum::<usize>()
                + self.parked.len(),
            repops_in_flight: self.inflight.len(),
        }
    }
}

/// A client reply out, unless it answers an op of an ended primary term (`suppress`: those the client resends).
fn emit_reply(
    suppress: &mut BTreeMap<(ConnId, u64), u32>,
    outstanding: &mut BTreeSet<(ConnId, u64)>,
    out: &mut VecDeque<Output>,
    conn: ConnId,
    reply: MOSDOpReply,
) {
    let key = (conn, reply.tid);
    if let Some(n) = suppress.get_mut(&key) {
        *n -= 1;
        if *n == 0 {
            suppress.remove(&key);
        }
        return;
    }
    outstanding.remove(&key);
    out.push_back(Output::ClientReply {
        conn,
        reply: Box::new(reply),
    });
}

/// A log entry for peering's copy of the log, which keeps it for hundreds of writes: its names and buffers are
/// copied out of the client op or rep op it was decoded from, so that it does not keep that message's receive
/// buffer (64 KiB or the whole message) alive.
fn owned_entry(mut e: osd_types::PgLogEntry) -> osd_types::PgLogEntry {
    osd_types::owned::Owned::own_buffers(&mut e);
    e
}
