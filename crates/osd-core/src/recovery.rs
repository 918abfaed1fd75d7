// SPDX-License-Identifier: LGPL-3.0-or-later
//! Log-based recovery of one PG, primary and replica side (Ceph's `ReplicatedBackend` push/pull and
//! `PrimaryLogPG::recover_primary`/`recover_replicas` semantics, sans-IO).
//!
//! Primary: peering's `StartRecovery` names the objects each OSD misses ([`Recovery::start`]). Every other up
//! acting OSD first grants a recovery slot (MRecoveryReserve REQUEST → GRANT; RELEASE when done). Objects are
//! taken in need-version order (a client op waiting for one moves it to the front: [`Recovery::prioritize`]),
//! at most `osd_recovery_max_active` at a time per PG. For each object:
//! * the primary misses it → MOSDPGPull to an up OSD that has it; the answer is MOSDPGPush with the object in
//!   chunks of at most `osd_recovery_max_chunk` bytes (more MOSDPGPull follow for later chunks); applied
//!   locally (a multi-chunk object goes to a temp object that is renamed over the target at the end, as Ceph
//!   does); once durable: [`RecoveryEvent::Recovered`] for the primary;
//! * replicas miss it → MOSDPGPush chunk by chunk, each acknowledged with MOSDPGPushReply after the replica's
//!   transaction is durable; after the last chunk: `Recovered` for that replica;
//! * the newest log entry is a delete → the primary removes its copy, replicas get MOSDPGRecoveryDelete and
//!   answer MOSDPGRecoveryDeleteReply once the removal is durable.
//!
//! Replica (and pull source): [`Recovery::handle_message`] applies pushes and recovery deletes, answers after
//! durability ([`Recovery::on_durable`]), and answers pulls from its own store. MRecoveryReserve requests from
//! a primary are granted at once (no local reservation slots on the replica side yet).
//!
//! The store side is the `pg` crate's recovery primitives (build a `PushOp`, apply one, remove, scan in hobject
//! order), wrapped at the end of this file with the checks a peer's message needs; backfill uses them too.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use bytes::Bytes;
use ceph_msgs::CephMessage;
use ceph_msgs::osd_rep::{
    MBackfillReserve, MOSDPGPull, MOSDPGPush, MOSDPGPushReply, MOSDPGRecoveryDelete,
    MOSDPGRecoveryDeleteReply, MRecoveryReserve, backfill_reserve, recovery_reserve, rep_msg,
};
use denc::{Decode, Decoder, Eversion, HObject, PgShard, ShardId, SpgId};
use ferrostore::{Device, Op, Store, StoreError, Transaction};
use osd_types::pg_missing::PgMissing;
use osd_types::recovery::{ObjectRecoveryInfo, ObjectRecoveryProgress, PullOp, PushOp, PushReplyOp};
use osd_types::snapset::IntervalSet;

use crate::{CoreError, RecoveryCtx, RecoveryEvent};

/// `osd_push_per_object_cost` (1000): the fixed part of a push's queue cost.
const PUSH_PER_OBJECT_COST: u64 = 1000;

/// Recovery and backfill counters of one PG, for `pg_stat_t` (degraded/misplaced/unfound object counts,
/// `num_objects_recovered`, `num_bytes_recovered`, `num_keys_recovered`) and for tests of the throttles.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Object copies still missing on acting OSDs (recovery not finished for them), Ceph's
    /// `num_objects_degraded` without the undersized part (the core adds `(size - acting) * objects`).
    pub objects_degraded: u64,
    /// Objects a backfill target does not hold yet (`num_objects_misplaced`), summed over targets.
    pub objects_misplaced: u64,
    /// Objects missing on the primary that no up OSD could provide (`num_objects_unfound`).
    pub objects_unfound: u64,
    /// Objects recovered or backfilled so far (per object and target).
    pub objects_recovered: u64,
    pub bytes_recovered: u64,
    pub keys_recovered: u64,
    /// Objects in flight now, and the most ever in flight at once (the throttle's high-water mark).
    pub ops_in_flight: u64,
    pub max_ops_in_flight: u64,
}

impl Progress {
    /// Sum of two PGs' (or recovery's and backfill's) counters; the high-water mark is the larger one.
    pub fn add(&mut self, o: &Progress) {
        self.objects_degraded += o.objects_degraded;
        self.objects_misplaced += o.objects_misplaced;
        self.objects_unfound += o.objects_unfound;
        self.objects_recovered += o.objects_recovered;
        self.bytes_recovered += o.bytes_recovered;
        self.keys_recovered += o.keys_recovered;
        self.ops_in_flight += o.ops_in_flight;
        self.max_ops_in_flight = self.max_ops_in_flight.max(o.max_ops_in_flight);
    }
}

/// The first resend of a request a peer has not answered (Ceph relies on lossless sessions; a message lost
/// with a connection would otherwise hold its object until the next interval).
pub(crate) const RETRY_BASE: Duration = Duration::from_secs(5);
/// Resends back off, doubling up to this interval.
pub(crate) const RETRY_MAX: Duration = Duration::from_secs(60);
/// At most this many resends of one request (about 6 minutes in all); then it waits for the next interval.
pub(crate) const RETRY_ATTEMPTS: u32 = 8;

/// When a request waiting for a peer's answer is sent again (bounded, with exponential backoff).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Retry {
    due: Duration,
    attempts: u32,
}

impl Retry {
    /// A request sent at `now`.
    pub(crate) fn new(now: Duration) -> Self {
        Retry {
            due: now + RETRY_BASE,
            attempts: 0,
        }
    }

    /// Ask again at `at` (a peer's rejection: not a lost message, so the resend budget starts over).
    pub(crate) fn at(at: Duration) -> Self {
        Retry { due: at, attempts: 0 }
    }

    /// When the next resend is due (`None` once the budget is spent).
    pub(crate) fn due(&self) -> Option<Duration> {
        (self.attempts < RETRY_ATTEMPTS).then_some(self.due)
    }

    /// Whether to resend now: the time has come, or `force` (the connection to the peer was reset). Schedules
    /// the next resend.
    pub(crate) fn fire(&mut self, now: Duration, force: bool) -> bool {
        if self.attempts >= RETRY_ATTEMPTS || (!force && now < self.due) {
            return false;
        }
        self.attempts += 1;
        let backoff = RETRY_BASE.saturating_mul(1 << self.attempts.min(8));
        self.due = now + backoff.min(RETRY_MAX);
        true
    }
}

/// The earliest of some optional deadlines.
pub(crate) fn earliest(ts: impl IntoIterator<Item = Option<Duration>>) -> Option<Duration> {
    ts.into_iter().flatten().min()
}

/// Which reservation message a [`Reservations`] speaks: MRecoveryReserve (log recovery) or MBackfillReserve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReserveKind {
    Recovery,
    Backfill,
}

/// Ceph's `OSD_RECOVERY_PRIORITY_BASE` and `OSD_BACKFILL_PRIORITY_BASE`.
const RECOVERY_PRIORITY: u32 = 180;
const BACKFILL_PRIORITY: u32 = 100;

impl ReserveKind {
    fn send<D: Device>(self, ctx: &mut RecoveryCtx<'_, D>, to: i32, request: bool) {
        let pgid = SpgId::new(ctx.spgid.pgid, ShardId::NO_SHARD);
        let msg = match self {
            ReserveKind::Recovery => MRecoveryReserve {
                pgid,
                query_epoch: ctx.epoch,
                reserve_type: if request {
                    recovery_reserve::REQUEST
                } else {
                    recovery_reserve::RELEASE
                },
                priority: RECOVERY_PRIORITY,
            }
            .to_message(ctx.cfg.peer_features),
            ReserveKind::Backfill => {
                let bytes = i64::try_from(ctx.pg.stats().num_bytes).unwrap_or(i64::MAX);
                MBackfillReserve {
                    pgid,
                    query_epoch: ctx.epoch,
                    reserve_type: if request {
                        backfill_reserve::REQUEST
                    } else {
                        backfill_reserve::RELEASE
                    },
                    priority: BACKFILL_PRIORITY,
                    primary_num_bytes: bytes,
                    shard_num_bytes: bytes,
                }
                .to_message(ctx.cfg.peer_features)
            }
        };
        ctx.out.push(RecoveryEvent::Send { to, msg });
    }
}

/// The remote reservations of one recovery or backfill (Ceph's remote reserver handshake): every peer grants
/// a slot before anything is copied, unanswered requests are resent ([`Retry`]), a rejection is asked again
/// later, and granted slots are released at the end.
#[derive(Debug, Clone, Default)]
pub(crate) struct Reservations {
    /// Peers asked and not granted yet, with when to ask again.
    asking: BTreeMap<i32, Retry>,
    granted: BTreeSet<i32>,
}

impl Reservations {
    /// Ask every peer of `peers` for a slot.
    pub(crate) fn request<D: Device>(
        &mut self,
        ctx: &mut RecoveryCtx<'_, D>,
        kind: ReserveKind,
        peers: impl IntoIterator<Item = i32>,
    ) {
        for o in peers {
            self.granted.remove(&o);
            self.asking.insert(o, Retry::new(ctx.now));
            kind.send(ctx, o, true);
        }
    }

    /// `from` granted; true if it was being asked.
    pub(crate) fn grant(&mut self, from: i32) -> bool {
        if self.asking.remove(&from).is_none() {
            return false;
        }
        self.granted.insert(from);
        true
    }

    /// `from` refused or took its slot back: ask again at `at`. False if it is not one of ours.
    pub(crate) fn ask_again_at(&mut self, from: i32, at: Duration) -> bool {
        if !self.granted.remove(&from) && !self.asking.contains_key(&from) {
            return false;
        }
        self.asking.insert(from, Retry::at(at));
        true
    }

    pub(crate) fn all_granted(&self) -> bool {
        self.asking.is_empty()
    }

    /// Release `o`'s slot if it granted one.
    pub(crate) fn release<D: Device>(&mut self, ctx: &mut RecoveryCtx<'_, D>, kind: ReserveKind, o: i32) {
        if self.granted.remove(&o) {
            kind.send(ctx, o, false);
        }
    }

    pub(crate) fn release_all<D: Device>(&mut self, ctx: &mut RecoveryCtx<'_, D>, kind: ReserveKind) {
        for o in std::mem::take(&mut self.granted) {
            kind.send(ctx, o, false);
        }
    }

    /// Send the requests that are due again (all of `reset`'s at once: its connection was reset).
    pub(crate) fn resend<D: Device>(
        &mut self,
        ctx: &mut RecoveryCtx<'_, D>,
        kind: ReserveKind,
        reset: Option<i32>,
    ) {
        let now = ctx.now;
        let due: Vec<i32> = self
            .asking
            .iter_mut()
            .filter_map(|(&o, r)| r.fire(now, reset == Some(o)).then_some(o))
            .collect();
        for o in due {
            kind.send(ctx, o, true);
        }
    }

    pub(crate) fn poll_timeout(&self) -> Option<Duration> {
        earliest(self.asking.values().map(Retry::due))
    }

    /// Forget everything (a new interval: peers drop reservations of an ended interval themselves).
    pub(crate) fn clear(&mut self) {
        self.asking.clear();
        self.granted.clear();
    }
}

/// One push to one peer: what is being sent and how far the last sent chunk got.
#[derive(Debug, Clone)]
pub(crate) struct PushState {
    pub(crate) info: ObjectRecoveryInfo,
    /// `before_progress` of the last chunk sent (what a resend rebuilds).
    pub(crate) sent_from: ObjectRecoveryProgress,
    /// `after_progress` of the last chunk sent (`data_complete` once the last chunk is out).
    pub(crate) progress: ObjectRecoveryProgress,
    pub(crate) retry: Retry,
}

impl PushState {
    /// Send the first chunk of the local copy described by `info` to `to` (recovery and backfill alike).
    pub(crate) fn start<D: Device>(
        ctx: &mut RecoveryCtx<'_, D>,
        info: &ObjectRecoveryInfo,
        to: i32,
        progress: &mut Progress,
    ) -> Result<PushState, CoreError> {
        let mut ps = PushState {
            info: info.clone(),
            sent_from: ObjectRecoveryProgress::default(),
            progress: ObjectRecoveryProgress::default(),
            retry: Retry::new(ctx.now),
        };
        ps.send_chunk(ctx, to, ObjectRecoveryProgress::default(), progress)?;
        Ok(ps)
    }

    fn send_chunk<D: Device>(
        &mut self,
        ctx: &mut RecoveryCtx<'_, D>,
        to: i32,
        from: ObjectRecoveryProgress,
        progress: &mut Progress,
    ) -> Result<(), CoreError> {
        let pop = build_push_op(ctx, &self.info, &from)?;
        progress.bytes_recovered += pop.data.len() as u64;
        progress.keys_recovered += pop.omap_entries.len() as u64;
        if from.first {
            // the source fills in what it learned (size, object_info, snapset) with the first chunk
            self.info = pop.recovery_info.clone();
        }
        self.sent_from = from;
        self.progress = pop.after_progress.clone();
        self.retry = Retry::new(ctx.now);
        send_pushes(ctx, to, vec![pop]);
        Ok(())
    }

    /// `to` acknowledged the last chunk sent: true when that was the last one (the object is complete there),
    /// else the next chunk is sent.
    pub(crate) fn on_reply<D: Device>(
        &mut self,
        ctx: &mut RecoveryCtx<'_, D>,
        to: i32,
        progress: &mut Progress,
    ) -> Result<bool, CoreError> {
        if self.progress.data_complete {
            return Ok(true);
        }
        let next = self.progress.clone();
        self.send_chunk(ctx, to, next, progress)?;
        Ok(false)
    }

    /// Send the last chunk again if its answer is overdue (or `force`: the connection was reset). Chunks go
    /// out in order on one session, so a repeat only ever follows the chunk it repeats; the target applies a
    /// repeated chunk idempotently and answers it again.
    pub(crate) fn maybe_resend<D: Device>(
        &mut self,
        ctx: &mut RecoveryCtx<'_, D>,
        to: i32,
        force: bool,
    ) -> Result<bool, CoreError> {
        if !self.retry.fire(ctx.now, force) {
            return Ok(false);
        }
        let pop = build_push_op(ctx, &self.info, &self.sent_from)?;
        send_pushes(ctx, to, vec![pop]);
        Ok(true)
    }
}

/// A pull from one source.
#[derive(Debug, Clone)]
struct PullState {
    from: i32,
    info: ObjectRecoveryInfo,
    /// The progress the outstanding MOSDPGPull asked from (an answer to anything else is a repeat).
    requested: ObjectRecoveryProgress,
    retry: Retry,
}

/// One object being recovered.
#[derive(Debug, Clone)]
struct Obj {
    need: Eversion,
    /// The newest log entry deletes it.
    delete: bool,
    /// The primary lacks it (pull first).
    primary_missing: bool,
    /// Replicas that lack it (push, or recovery-delete, once the primary has it).
    peers: BTreeSet<i32>,
    started: bool,
    pull: Option<PullState>,
    /// Sources that could not provide it.
    tried: BTreeSet<i32>,
    /// The local transaction that completes the primary's copy (pull or delete), until durable.
    local_seq: Option<u64>,
    pushes: BTreeMap<i32, PushState>,
    /// Replicas sent MOSDPGRecoveryDelete and not answered yet.
    deletes: BTreeMap<i32, Retry>,
}

/// A message to send once a local transaction is durable (replica answers), and what it recovered.
#[derive(Debug)]
struct Deferred {
    seq: u64,
    to: i32,
    msg: ceph_msgs::Message,
    recovered: Vec<(HObject, Eversion)>,
}

/// Answers the replica side sends after durability (shared with backfill).
#[derive(Debug, Default)]
pub(crate) struct Replies {
    pending: VecDeque<Deferred>,
}

impl Replies {
    fn push(&mut self, d: Deferred) {
        self.pending.push_back(d);
    }
    /// Everything waiting for transactions up to `seq` (ferrostore acknowledges in order).
    pub(crate) fn on_durable(&mut self, seq: u64, out: &mut Vec<RecoveryEvent>, whoami: i32) {
        while self.pending.front().is_some_and(|d| d.seq <= seq) {
            let Some(d) = self.pending.pop_front() else { break };
            for (oid, version) in d.recovered {
                out.push(RecoveryEvent::Recovered {
                    osd: whoami,
                    oid,
                    version,
                });
            }
            out.push(RecoveryEvent::Send { to: d.to, msg: d.msg });
        }
    }
}

/// Recovery state of one PG (primary or replica side).
#[derive(Debug)]
pub struct Recovery {
    spgid: SpgId,
    /// `same_interval_since` when recovery started; work from another interval is dropped.
    interval: u32,
    objs: BTreeMap<HObject, Obj>,
    /// Objects not started yet, in need-version order.
    queue: BTreeSet<(Eversion, HObject)>,
    /// Objects a client op waits for: started before the queue.
    front: VecDeque<HObject>,
    active: BTreeSet<HObject>,
    /// Missing sets as peering gave them (pull sources must not be missing the object).
    missing: BTreeMap<i32, PgMissing>,
    unfound: BTreeSet<HObject>,
    /// Objects whose local copy completes with a store transaction, by its sequence number.
    local_waits: BTreeMap<u64, HObject>,
    replies: Replies,
    /// Recovery slots on the other OSDs (MRecoveryReserve); nothing is started before every one is granted.
    reservations: Reservations,
    /// The interval whose leftover temp objects were removed (see [`clear_temp_objects`]).
    temp_cleared: Option<u32>,
    progress: Progress,
}

impl Recovery {
    pub fn new(spgid: SpgId) -> Self {
        Recovery {
            spgid,
            interval: 0,
            objs: BTreeMap::new(),
            queue: BTreeSet::new(),
            front: VecDeque::new(),
            active: BTreeSet::new(),
            missing: BTreeMap::new(),
            unfound: BTreeSet::new(),
            local_waits: BTreeMap::new(),
            reservations: Reservations::default(),
            replies: Replies::default(),
            temp_cleared: None,
            progress: Progress::default(),
        }
    }

    /// The PG this state belongs to.
    pub fn spgid(&self) -> SpgId {
        self.spgid
    }

    /// Peering's `Output::StartRecovery` on the primary: the objects each OSD (the primary included) misses.
    /// Replaces any recovery in progress (peering only restarts recovery in a new interval).
    pub fn start<D: Device>(&mut self, ctx: &mut RecoveryCtx<'_, D>, missing: BTreeMap<i32, PgMissing>) {
        self.reset();
        self.interval = ctx.same_interval_since;
        self.clear_temp(ctx);
        for (osd, m) in &missing {
            for (oid, item) in &m.missing {
                let o = self.objs.entry(oid.clone()).or_insert_with(|| Obj {
                    need: item.need,
                    delete: item.is_delete(),
                    primary_missing: false,
                    peers: BTreeSet::new(),
                    started: false,
                    pull: None,
                    tried: BTreeSet::new(),
                    local_seq: None,
                    pushes: BTreeMap::new(),
                    deletes: BTreeMap::new(),
                });
                if item.need > o.need {
                    o.need = item.need;
                    o.delete = item.is_delete();
                }
                if *osd == ctx.whoami {
                    o.primary_missing = true;
                } else {
                    o.peers.insert(*osd);
                }
            }
        }
        for (oid, o) in &self.objs {
            self.queue.insert((o.need, oid.clone()));
        }
        // Ceph's remote recovery reservation: every other acting OSD (and every OSD that misses objects) grants a
        // slot before anything is copied
        if !self.objs.is_empty()
            && let Some(map) = ctx.peering.last_map()
        {
            let backfill = ctx.peering.backfill_targets();
            let peers: BTreeSet<i32> = map
                .acting
                .iter()
                .copied()
                .chain(missing.keys().copied())
                .filter(|&o| o != ctx.whoami && o >= 0 && map.is_up(o) && !backfill.contains(&o))
                .collect();
            self.reservations.request(ctx, ReserveKind::Recovery, peers);
        }
        self.missing = missing;
        self.kick(ctx);
    }

    /// A recovery message for this PG from `osd.<from>`: MOSDPGPush, MOSDPGPushReply, MOSDPGPull,
    /// MOSDPGRecoveryDelete(+Reply), MRecoveryReserve. Malformed input is an error (the core logs and drops it);
    /// messages of an older interval are ignored.
    pub fn handle_message<D: Device>(
        &mut self,
        ctx: &mut RecoveryCtx<'_, D>,
        from: i32,
        msg: &ceph_msgs::Message,
    ) -> Result<(), CoreError> {
        let dec_err = |e: ceph_msgs::MsgError| CoreError::Decode {
            from,
            msg_type: msg.msg_type,
            err: e.to_string(),
        };
        match msg.msg_type {
            rep_msg::PG_PUSH => {
                let m = MOSDPGPush::from_message(msg).map_err(dec_err)?;
                if m.min_epoch < ctx.same_interval_since {
                    return Ok(());
                }
                self.clear_temp(ctx);
                let current = self.interval == ctx.same_interval_since;
                for pop in m.pushes {
                    let pulling = self
                        .objs
                        .get(&pop.soid)
                        .filter(|o| current && o.primary_missing)
                        .map(|o| o.pull.as_ref().is_some_and(|p| p.from == from));
                    match pulling {
                        Some(true) => self.pull_response(ctx, from, pop)?,
                        // a repeated answer of a source given up on: never applied as a replica push
                        Some(false) => {}
                        None => handle_replica_push(ctx, &mut self.replies, from, &pop)?,
                    }
                }
            }
            rep_msg::PG_PUSH_REPLY => {
                let m = MOSDPGPushReply::from_message(msg).map_err(dec_err)?;
                if m.min_epoch < ctx.same_interval_since || self.interval != ctx.same_interval_since {
                    return Ok(());
                }
                for r in m.replies {
                    self.push_reply(ctx, from, &r.soid)?;
                }
            }
            rep_msg::PG_PULL => {
                let m = MOSDPGPull::from_message(msg).map_err(dec_err)?;
                // Ceph's old_peering_msg: the sender's map epoch against our last peering reset (a stray source
                // may have reset later than the primary's interval began; answering is a read either way)
                if m.map_epoch < ctx.same_interval_since {
                    return Ok(());
                }
                let mut pushes = Vec::new();
                for pull in &m.pulls {
                    pushes.push(answer_pull(ctx, pull)?);
                }
                send_pushes(ctx, from, pushes);
            }
            rep_msg::PG_RECOVERY_DELETE => {
                let m = MOSDPGRecoveryDelete::from_message(msg).map_err(dec_err)?;
                if m.min_epoch < ctx.same_interval_since {
                    return Ok(());
                }
                let mut txn = Transaction::new();
                let cid = pg::keys::collection_id(&ctx.spgid);
                let mut recovered = Vec::new();
                for (oid, v) in &m.objects {
                    let key = pg::keys::object_key(oid, &ctx.spgid);
                    if is_pg_object(&ctx.spgid, oid) && ctx.store.exists(&cid, &key)? {
                        txn.push(Op::Remove {
                            cid: cid.clone(),
                            oid: key,
                        });
                    }
                    if ctx.peering.missing().is_missing(oid) {
                        recovered.push((oid.clone(), *v));
                    }
                }
                let reply = MOSDPGRecoveryDeleteReply {
                    from: PgShard::new(ctx.whoami, ctx.spgid.shard),
                    pgid: SpgId::new(ctx.spgid.pgid, ShardId::NO_SHARD),
                    map_epoch: ctx.epoch,
                    min_epoch: m.min_epoch,
                    objects: m.objects.clone(),
                }
                .to_message(ctx.cfg.peer_features);
                let seq = queue(ctx, &txn)?;
                self.replies.push(Deferred {
                    seq,
                    to: from,
                    msg: reply,
                    recovered,
                });
            }
            rep_msg::PG_RECOVERY_DELETE_REPLY => {
                let m = MOSDPGRecoveryDeleteReply::from_message(msg).map_err(dec_err)?;
                if m.min_epoch < ctx.same_interval_since || self.interval != ctx.same_interval_since {
                    return Ok(());
                }
                for (oid, _) in &m.objects {
                    let Some(o) = self.objs.get_mut(oid) else { continue };
                    if o.deletes.remove(&from).is_some() {
                        o.peers.remove(&from);
                        ctx.out.push(RecoveryEvent::Recovered {
                            osd: from,
                            oid: oid.clone(),
                            version: o.need,
                        });
                        self.progress.objects_recovered += 1;
                        self.maybe_finish(oid);
                    }
                }
                self.kick(ctx);
            }
            rep_msg::RECOVERY_RESERVE => {
                let m = MRecoveryReserve::from_message(msg).map_err(dec_err)?;
                let current =
                    self.interval == ctx.same_interval_since && m.query_epoch >= ctx.same_interval_since;
                match m.reserve_type {
                    // replica side: granted at once (no replica-side slot limit yet)
                    recovery_reserve::REQUEST => {
                        let grant = MRecoveryReserve {
                            pgid: m.pgid,
                            query_epoch: m.query_epoch,
                            reserve_type: recovery_reserve::GRANT,
                            priority: m.priority,
                        };
                        ctx.out.push(RecoveryEvent::Send {
                            to: from,
                            msg: grant.to_message(ctx.cfg.peer_features),
                        });
                    }
                    recovery_reserve::GRANT if current && self.reservations.grant(from) => {
                        self.kick(ctx);
                    }
                    // the replica wants its slot back: stop starting objects until it grants again
                    recovery_reserve::REVOKE if current && self.reservations.ask_again_at(from, ctx.now) => {
                        self.reservations.resend(ctx, ReserveKind::Recovery, None);
                    }
                    _ => {}
                }
            }
            t => {
                ctx.out.push(RecoveryEvent::Log(format!(
                    "pg {}: recovery ignores message type {t} from osd.{from}",
                    self.spgid
                )));
            }
        }
        Ok(())
    }

    /// Store transaction `seq` (and all before it) is durable.
    pub fn on_durable<D: Device>(&mut self, ctx: &mut RecoveryCtx<'_, D>, seq: u64) {
        self.replies.on_durable(seq, ctx.out, ctx.whoami);
        if self.interval != ctx.same_interval_since {
            return;
        }
        let later = self.local_waits.split_off(&seq.saturating_add(1));
        let done = std::mem::replace(&mut self.local_waits, later);
        for (_, oid) in done {
            if let Err(e) = self.local_recovered(ctx, &oid) {
                ctx.out.push(RecoveryEvent::Log(format!(
                    "pg {}: recovery of {oid} after the local copy: {e}",
                    self.spgid
                )));
            }
        }
        self.kick(ctx);
    }

    /// Continue work (called after every input that may have freed throttle slots, and on ticks): requests
    /// whose answer is overdue are sent again.
    pub fn tick<D: Device>(&mut self, ctx: &mut RecoveryCtx<'_, D>) {
        self.resend(ctx, None);
        self.kick(ctx);
    }

    /// The connection to `osd` was reset: what it has not answered goes again now.
    pub fn peer_reset<D: Device>(&mut self, ctx: &mut RecoveryCtx<'_, D>, osd: i32) {
        self.resend(ctx, Some(osd));
    }

    /// When the next overdue request is to be sent again ([`Recovery::tick`] then).
    pub fn poll_timeout(&self) -> Option<Duration> {
        let objs = self.active.iter().filter_map(|oid| self.objs.get(oid));
        let per_object = objs.flat_map(|o| {
            let pull = o.pull.as_ref().and_then(|p| p.retry.due());
            let pushes = o.pushes.values().map(|p| p.retry.due());
            let deletes = o.deletes.values().map(Retry::due);
            std::iter::once(pull).chain(pushes).chain(deletes)
        });
        earliest(std::iter::once(self.reservations.poll_timeout()).chain(per_object))
    }

    /// Send again what peers have not answered in time (or everything `reset` has not: its connection broke):
    /// reservation requests, pulls (a repeated answer is recognised by its progress), pushes (the last chunk)
    /// and recovery deletes.
    fn resend<D: Device>(&mut self, ctx: &mut RecoveryCtx<'_, D>, reset: Option<i32>) {
        if self.interval != ctx.same_interval_since || self.objs.is_empty() {
            return;
        }
        self.reservations.resend(ctx, ReserveKind::Recovery, reset);
        let now = ctx.now;
        let mut failed = Vec::new();
        for oid in &self.active {
            let Some(o) = self.objs.get_mut(oid) else { continue };
            if let Some(p) = o.pull.as_mut()
                && p.retry.fire(now, reset == Some(p.from))
            {
                let pull = PullOp {
                    soid: oid.clone(),
                    recovery_info: p.info.clone(),
                    recovery_progress: p.requested.clone(),
                };
                send_pulls(ctx, p.from, vec![pull]);
            }
            for (&to, r) in o.deletes.iter_mut() {
                if r.fire(now, reset == Some(to)) {
                    send_recovery_delete(ctx, to, oid, o.need);
                }
            }
            for (&to, ps) in o.pushes.iter_mut() {
                if let Err(e) = ps.maybe_resend(ctx, to, reset == Some(to)) {
                    failed.push(format!("pg {}: resending {oid} to osd.{to}: {e}", self.spgid));
                }
            }
        }
        for f in failed {
            ctx.out.push(RecoveryEvent::Log(f));
        }
    }

    /// Peering learnt a new source (`peering::Output::NewRecoverySource`: a stray's or a returning OSD's missing
    /// set): the objects no up OSD had are tried again, every candidate included.
    pub fn retry_unfound<D: Device>(&mut self, ctx: &mut RecoveryCtx<'_, D>) {
        if self.interval != ctx.same_interval_since || self.unfound.is_empty() {
            return;
        }
        for oid in std::mem::take(&mut self.unfound) {
            if let Some(o) = self.objs.get_mut(&oid) {
                o.started = false;
                o.tried.clear();
                self.active.remove(&oid);
                self.queue.insert((o.need, oid));
            }
        }
        self.kick(ctx);
    }

    /// A client op waits for `oid` (missing on the primary or degraded on a replica): recover it next.
    pub fn prioritize(&mut self, oid: &HObject) {
        if self.objs.get(oid).is_some_and(|o| !o.started) && !self.front.contains(oid) {
            self.front.push_back(oid.clone());
        }
    }

    /// A new interval (or the PG stops): drop everything in flight; peering starts recovery again. Answers a
    /// replica still owes (pushes being made durable) are kept: they are harmless to an old primary.
    pub fn reset(&mut self) {
        self.objs.clear();
        self.queue.clear();
        self.front.clear();
        self.active.clear();
        self.missing.clear();
        self.unfound.clear();
        self.local_waits.clear();
        // replicas drop reservations of an ended interval themselves
        self.reservations.clear();
        self.progress.ops_in_flight = 0;
    }

    /// Whether recovery work is pending or in flight (on the primary).
    pub fn is_active(&self) -> bool {
        !self.objs.is_empty()
    }

    /// Whether the primary lacks `oid` (reads and writes of it must wait for [`RecoveryEvent::Recovered`]).
    pub fn is_missing_on_primary(&self, oid: &HObject) -> bool {
        self.objs.get(oid).is_some_and(|o| o.primary_missing)
    }

    /// Whether some acting replica lacks `oid` or it is being pushed (writes to it wait, as Ceph's
    /// `is_degraded_or_backfilling_object`).
    pub fn is_degraded(&self, oid: &HObject) -> bool {
        self.objs.contains_key(oid)
    }

    /// Counters for pg_stat.
    pub fn progress(&self) -> Progress {
        let mut p = self.progress;
        p.objects_degraded = self
            .objs
            .values()
            .map(|o| o.peers.len() as u64 + u64::from(o.primary_missing))
            .sum();
        p.objects_unfound = self.unfound.len() as u64;
        p.ops_in_flight = self.active.len() as u64;
        p
    }

    /// Once per interval, before the first push of it is applied here: remove temp objects of pushes an
    /// earlier interval left half done (Ceph clears them when a PG changes interval).
    fn clear_temp<D: Device>(&mut self, ctx: &mut RecoveryCtx<'_, D>) {
        if self.temp_cleared == Some(ctx.same_interval_since) {
            return;
        }
        self.temp_cleared = Some(ctx.same_interval_since);
        match clear_temp_objects(ctx.store, &ctx.spgid) {
            Ok(Some(seq)) => ctx.out.push(RecoveryEvent::WaitDurable(seq)),
            Ok(None) => {}
            Err(e) => ctx.out.push(RecoveryEvent::Log(format!(
                "pg {}: removing leftover temp objects: {e}",
                self.spgid
            ))),
        }
    }

    // ---- primary side ----

    fn kick<D: Device>(&mut self, ctx: &mut RecoveryCtx<'_, D>) {
        if self.interval != ctx.same_interval_since {
            return;
        }
        let max = (ctx.cfg.osd_recovery_max_active as usize).max(1);
        // Objects a client op waits for start at once, before the reservations are granted and past the
        // throttle by up to another `osd_recovery_max_active` (Ceph's maybe_kick_recovery recovers them
        // directly); the rest waits for the reservations and a free slot.
        let granted = self.reservations.all_granted();
        loop {
            let urgent = self.active.len() < 2 * max;
            let next = loop {
                if !urgent {
                    break None;
                }
                match self.front.pop_front() {
                    Some(oid) => {
                        if self.objs.get(&oid).is_some_and(|o| !o.started) {
                            break Some(oid);
                        }
                    }
                    None => break None,
                }
            };
            let next = next.or_else(|| {
                if !granted || self.active.len() >= max {
                    return None;
                }
                self.queue
                    .iter()
                    .find(|(_, oid)| self.objs.get(oid).is_some_and(|o| !o.started))
                    .map(|(_, oid)| oid.clone())
            });
            let Some(oid) = next else { break };
            if let Some(o) = self.objs.get(&oid) {
                self.queue.remove(&(o.need, oid.clone()));
            }
            if let Err(e) = self.start_object(ctx, &oid) {
                ctx.out.push(RecoveryEvent::Log(format!(
                    "pg {}: recovery of {oid} failed to start: {e}",
                    self.spgid
                )));
                // keep it out of the way; a new interval retries it
                self.active.remove(&oid);
                self.unfound.insert(oid);
            }
        }
        self.progress.max_ops_in_flight = self.progress.max_ops_in_flight.max(self.active.len() as u64);
        if self.objs.is_empty() {
            self.reservations.release_all(ctx, ReserveKind::Recovery);
        }
    }

    fn start_object<D: Device>(
        &mut self,
        ctx: &mut RecoveryCtx<'_, D>,
        oid: &HObject,
    ) -> Result<(), CoreError> {
        let Some(o) = self.objs.get_mut(oid) else {
            return Ok(());
        };
        o.started = true;
        self.active.insert(oid.clone());
        if !o.primary_missing {
            return self.start_pushes(ctx, oid);
        }
        if o.delete {
            let seq = remove_objects(ctx, std::slice::from_ref(oid))?;
            match seq {
                Some(seq) => {
                    o.local_seq = Some(seq);
                    self.local_waits.insert(seq, oid.clone());
                    ctx.out.push(RecoveryEvent::WaitDurable(seq));
                    Ok(())
                }
                None => self.local_recovered(ctx, oid),
            }
        } else {
            self.send_pull(ctx, oid)
        }
    }

    /// Pick an up OSD that holds `oid` and ask it for the first chunk.
    fn send_pull<D: Device>(&mut self, ctx: &mut RecoveryCtx<'_, D>, oid: &HObject) -> Result<(), CoreError> {
        let Some(o) = self.objs.get_mut(oid) else {
            return Ok(());
        };
        let Some(from) = pull_source(ctx, &self.missing, oid, &o.tried) else {
            ctx.out.push(RecoveryEvent::Log(format!(
                "pg {}: {oid} {} is unfound (no up OSD has it)",
                self.spgid, o.need
            )));
            o.started = false;
            self.active.remove(oid);
            self.unfound.insert(oid.clone());
            return Ok(());
        };
        let mut copy_subset = IntervalSet::new();
        copy_subset.insert(0, u64::MAX);
        let have = self
            .missing
            .get(&ctx.whoami)
            .and_then(|m| m.missing.get(oid))
            .map(|i| i.have)
            .unwrap_or_default();
        let info = ObjectRecoveryInfo {
            soid: oid.clone(),
            version: o.need,
            // unknown until the source answers (Ceph's `(uint64_t)-1`)
            size: u64::MAX,
            copy_subset,
            object_exist: have != Eversion::default(),
            ..Default::default()
        };
        o.pull = Some(PullState {
            from,
            info: info.clone(),
            requested: ObjectRecoveryProgress::default(),
            retry: Retry::new(ctx.now),
        });
        let pull = PullOp {
            soid: oid.clone(),
            recovery_info: info,
            recovery_progress: ObjectRecoveryProgress::default(),
        };
        send_pulls(ctx, from, vec![pull]);
        Ok(())
    }

    /// A chunk the primary pulled.
    fn pull_response<D: Device>(
        &mut self,
        ctx: &mut RecoveryCtx<'_, D>,
        from: i32,
        pop: PushOp,
    ) -> Result<(), CoreError> {
        let oid = pop.soid.clone();
        let Some(o) = self.objs.get_mut(&oid) else {
            return Ok(());
        };
        if pop.version == Eversion::default() || pop.version < o.need {
            // the source does not have it (a blank push) or has an older copy: try another one
            o.tried.insert(from);
            o.pull = None;
            return self.send_pull(ctx, &oid);
        }
        let Some(pull) = o.pull.as_mut() else {
            return Ok(());
        };
        if pop.before_progress != pull.requested {
            // a repeated answer (the pull was sent again): the first one was applied
            return Ok(());
        }
        if pull.info.size == u64::MAX {
            pull.info.size = pop.recovery_info.size;
            pull.info.copy_subset = pop.recovery_info.copy_subset.clone();
            pull.info.oi = pop.recovery_info.oi.clone();
            pull.info.ss = pop.recovery_info.ss.clone();
        }
        let seq = apply_push(ctx, &pop)?;
        self.progress.bytes_recovered += pop.data.len() as u64;
        self.progress.keys_recovered += pop.omap_entries.len() as u64;
        if pop.after_progress.data_complete {
            o.pull = None;
            o.local_seq = Some(seq);
            self.local_waits.insert(seq, oid.clone());
            ctx.out.push(RecoveryEvent::WaitDurable(seq));
        } else {
            pull.requested = pop.after_progress.clone();
            pull.retry = Retry::new(ctx.now);
            let next = PullOp {
                soid: oid,
                recovery_info: pull.info.clone(),
                recovery_progress: pop.after_progress.clone(),
            };
            send_pulls(ctx, from, vec![next]);
        }
        Ok(())
    }

    /// The primary's copy is complete and durable: report it, then serve the replicas.
    fn local_recovered<D: Device>(
        &mut self,
        ctx: &mut RecoveryCtx<'_, D>,
        oid: &HObject,
    ) -> Result<(), CoreError> {
        let Some(o) = self.objs.get_mut(oid) else {
            return Ok(());
        };
        o.local_seq = None;
        o.primary_missing = false;
        ctx.out.push(RecoveryEvent::Recovered {
            osd: ctx.whoami,
            oid: oid.clone(),
            version: o.need,
        });
        self.progress.objects_recovered += 1;
        self.start_pushes(ctx, oid)
    }

    fn start_pushes<D: Device>(
        &mut self,
        ctx: &mut RecoveryCtx<'_, D>,
        oid: &HObject,
    ) -> Result<(), CoreError> {
        let Some(o) = self.objs.get_mut(oid) else {
            return Ok(());
        };
        let peers: Vec<i32> = o.peers.iter().copied().collect();
        if o.delete {
            for p in peers {
                o.deletes.insert(p, Retry::new(ctx.now));
                send_recovery_delete(ctx, p, oid, o.need);
            }
        } else if !peers.is_empty() {
            let info = local_push_info(ctx, oid)?;
            if info.version < o.need {
                return Err(CoreError::Other(format!(
                    "local copy of {oid} is {} but {} is needed",
                    info.version, o.need
                )));
            }
            for p in peers {
                let ps = PushState::start(ctx, &info, p, &mut self.progress)?;
                o.pushes.insert(p, ps);
            }
        }
        self.maybe_finish(oid);
        Ok(())
    }

    fn push_reply<D: Device>(
        &mut self,
        ctx: &mut RecoveryCtx<'_, D>,
        from: i32,
        oid: &HObject,
    ) -> Result<(), CoreError> {
        let Some(o) = self.objs.get_mut(oid) else {
            return Ok(());
        };
        let Some(ps) = o.pushes.get_mut(&from) else {
            return Ok(());
        };
        if ps.on_reply(ctx, from, &mut self.progress)? {
            o.pushes.remove(&from);
            o.peers.remove(&from);
            ctx.out.push(RecoveryEvent::Recovered {
                osd: from,
                oid: oid.clone(),
                version: o.need,
            });
            self.progress.objects_recovered += 1;
            self.maybe_finish(oid);
            self.kick(ctx);
        }
        Ok(())
    }

    fn maybe_finish(&mut self, oid: &HObject) {
        let done = self.objs.get(oid).is_some_and(|o| {
            o.started && !o.primary_missing && o.local_seq.is_none() && o.pull.is_none() && o.peers.is_empty()
        });
        if done {
            self.objs.remove(oid);
            self.active.remove(oid);
        }
    }
}

// ---- message helpers ----

fn my_shard(ctx_whoami: i32, spgid: &SpgId) -> PgShard {
    PgShard::new(ctx_whoami, spgid.shard)
}

pub(crate) fn send_pushes<D: Device>(ctx: &mut RecoveryCtx<'_, D>, to: i32, pushes: Vec<PushOp>) {
    if pushes.is_empty() {
        return;
    }
    let cost = pushes
        .iter()
        .map(|p| p.data.len() as u64 + PUSH_PER_OBJECT_COST)
        .sum();
    let m = MOSDPGPush {
        from: my_shard(ctx.whoami, &ctx.spgid),
        pgid: SpgId::new(ctx.spgid.pgid, ShardId::NO_SHARD),
        map_epoch: ctx.epoch,
        min_epoch: ctx.same_interval_since,
        pushes,
        cost,
        is_repair: false,
    };
    ctx.out.push(RecoveryEvent::Send {
        to,
        msg: m.to_message(ctx.cfg.peer_features),
    });
}

fn send_recovery_delete<D: Device>(ctx: &mut RecoveryCtx<'_, D>, to: i32, oid: &HObject, need: Eversion) {
    let m = MOSDPGRecoveryDelete {
        from: PgShard::new(ctx.whoami, ctx.spgid.shard),
        pgid: SpgId::new(ctx.spgid.pgid, ShardId::NO_SHARD),
        map_epoch: ctx.epoch,
        min_epoch: ctx.same_interval_since,
        cost: PUSH_PER_OBJECT_COST,
        objects: vec![(oid.clone(), need)],
    };
    ctx.out.push(RecoveryEvent::Send {
        to,
        msg: m.to_message(ctx.cfg.peer_features),
    });
}

fn send_pulls<D: Device>(ctx: &mut RecoveryCtx<'_, D>, to: i32, pulls: Vec<PullOp>) {
    let m = MOSDPGPull {
        from: my_shard(ctx.whoami, &ctx.spgid),
        pgid: SpgId::new(ctx.spgid.pgid, ShardId::NO_SHARD),
        map_epoch: ctx.epoch,
        min_epoch: ctx.same_interval_since,
        cost: PUSH_PER_OBJECT_COST * pulls.len() as u64,
        pulls,
    };
    ctx.out.push(RecoveryEvent::Send {
        to,
        msg: m.to_message(ctx.cfg.peer_features),
    });
}

fn queue<D: Device>(ctx: &mut RecoveryCtx<'_, D>, txn: &Transaction) -> Result<u64, CoreError> {
    let seq = ctx.store.queue_transaction(txn)?;
    ctx.out.push(RecoveryEvent::WaitDurable(seq));
    Ok(seq)
}

/// An up OSD that may hold `oid` at the needed version: acting members first, then up members and any other
/// OSD peering knows holds the PG (a stray that is not in `missing` may still be behind: the source checks the
/// version and answers a blank push, and the next candidate is tried). Never a backfill target, an OSD already
/// `tried`, or one whose missing set lists the object.
fn pull_source<D: Device>(
    ctx: &RecoveryCtx<'_, D>,
    missing: &BTreeMap<i32, PgMissing>,
    oid: &HObject,
    tried: &BTreeSet<i32>,
) -> Option<i32> {
    let map = ctx.peering.last_map()?;
    let strays = map
        .up_osds
        .iter()
        .copied()
        .filter(|&o| ctx.peering.peer_missing(o).is_some());
    let mut candidates: Vec<i32> = Vec::new();
    for o in map
        .acting
        .iter()
        .chain(map.up.iter())
        .copied()
        .chain(missing.keys().copied())
        .chain(strays)
    {
        if !candidates.contains(&o) {
            candidates.push(o);
        }
    }
    let backfill = ctx.peering.backfill_targets();
    candidates.into_iter().find(|&o| {
        o != ctx.whoami
            && o >= 0
            && map.is_up(o)
            && !backfill.contains(&o)
            && !tried.contains(&o)
            && !missing.get(&o).is_some_and(|m| m.is_missing(oid))
            && !ctx.peering.peer_missing(o).is_some_and(|m| m.is_missing(oid))
    })
}

/// The replica side of a push (recovery or backfill): apply the chunk, answer MOSDPGPushReply once durable,
/// and report the object recovered when it completes something peering had in our missing set.
pub(crate) fn handle_replica_push<D: Device>(
    ctx: &mut RecoveryCtx<'_, D>,
    replies: &mut Replies,
    from: i32,
    pop: &PushOp,
) -> Result<(), CoreError> {
    let reply = MOSDPGPushReply {
        from: my_shard(ctx.whoami, &ctx.spgid),
        pgid: SpgId::new(ctx.spgid.pgid, ShardId::NO_SHARD),
        map_epoch: ctx.epoch,
        min_epoch: ctx.same_interval_since,
        replies: vec![PushReplyOp {
            soid: pop.soid.clone(),
        }],
        cost: PUSH_PER_OBJECT_COST,
    }
    .to_message(ctx.cfg.peer_features);
    let recovered = if pop.after_progress.data_complete && ctx.peering.missing().is_missing(&pop.soid) {
        vec![(pop.soid.clone(), pop.version)]
    } else {
        Vec::new()
    };
    if already_applied(ctx, pop)? {
        // a chunk sent again (e.g. after a reconnect) whose effect is already here: answer once what applied it
        // is durable (the first answer reports the object recovered)
        match replies.pending.back().map(|d| d.seq) {
            Some(seq) => replies.push(Deferred {
                seq,
                to: from,
                msg: reply,
                recovered: Vec::new(),
            }),
            None => ctx.out.push(RecoveryEvent::Send { to: from, msg: reply }),
        }
        return Ok(());
    }
    let seq = apply_push(ctx, pop)?;
    ctx.out.push(RecoveryEvent::WaitDurable(seq));
    replies.push(Deferred {
        seq,
        to: from,
        msg: reply,
        recovered,
    });
    Ok(())
}

/// A last chunk (of several) for an object already at the pushed version: it was applied before.
fn already_applied<D: Device>(ctx: &mut RecoveryCtx<'_, D>, pop: &PushOp) -> Result<bool, CoreError> {
    if pop.before_progress.first || !pop.after_progress.data_complete {
        return Ok(false);
    }
    // one version has one content: an object already at the pushed version needs nothing more
    Ok(object_version(ctx, &pop.soid)? == Some(pop.version))
}

/// A pull source's answer: the next chunk of the object, or a blank push when it does not have the version
/// asked for (the puller then tries another source).
fn answer_pull<D: Device>(ctx: &mut RecoveryCtx<'_, D>, pull: &PullOp) -> Result<PushOp, CoreError> {
    let blank = PushOp {
        soid: pull.soid.clone(),
        ..Default::default()
    };
    let mut info = pull.recovery_info.clone();
    let progress = &pull.recovery_progress;
    if !is_pg_object(&ctx.spgid, &pull.soid) {
        return Ok(blank);
    }
    let cid = pg::keys::collection_id(&ctx.spgid);
    let key = pg::keys::object_key(&pull.soid, &ctx.spgid);
    let st = match ctx.store.stat(&cid, &key) {
        Ok(st) => st,
        Err(StoreError::NotFound) => return Ok(blank),
        Err(e) => return Err(e.into()),
    };
    if progress.first && info.size == u64::MAX {
        info.size = st.size;
        info.copy_subset = intersect(&info.copy_subset, &range_set(0, st.size));
    }
    match object_version(ctx, &pull.soid)? {
        Some(v) if v == info.version => {}
        _ => return Ok(blank),
    }
    build_push_op(ctx, &info, progress)
}

// ---- store primitives (shared with backfill) ----

/// A client object of this PG's pool: not the pgmeta object, not a temp object, not the max sentinel (a
/// peer's message must not be able to write or delete anything else).
fn is_pg_object(spgid: &SpgId, oid: &HObject) -> bool {
    !oid.is_max()
        && !oid.is_temp()
        && oid.pool == spgid.pgid.pool as i64
        && !pg::keys::ghobject(oid, spgid).is_pgmeta()
}

fn range_set(off: u64, len: u64) -> IntervalSet {
    let mut s = IntervalSet::new();
    if len > 0 {
        s.insert(off, len);
    }
    s
}

/// The intersection of two interval sets.
fn intersect(a: &IntervalSet, b: &IntervalSet) -> IntervalSet {
    let mut out = IntervalSet::new();
    for (&ao, &al) in a {
        let ae = ao.saturating_add(al);
        for (&bo, &bl) in b {
            let be = bo.saturating_add(bl);
            let s = ao.max(bo);
            let e = ae.min(be);
            if s < e {
                out.insert(s, e - s);
            }
        }
    }
    out
}

// The storage side is the `pg` crate's (`Pg::build_push`, `apply_push`, `remove_object`, `scan`, ...), which
// also keeps the op engine's missing set and object statistics in step; these wrappers add the checks a
// message from a peer needs and the shapes recovery and backfill use.

/// The version in an object's `object_info_t` (`None` when the object or its `_` attribute is absent).
pub(crate) fn object_version<D: Device>(
    ctx: &mut RecoveryCtx<'_, D>,
    oid: &HObject,
) -> Result<Option<Eversion>, CoreError> {
    Ok(ctx.pg.object_version(ctx.store, oid)?)
}

/// What the primary pushes of its own copy of `oid` (version, size, `object_info_t`, SnapSet, whole object).
pub(crate) fn local_push_info<D: Device>(
    ctx: &mut RecoveryCtx<'_, D>,
    oid: &HObject,
) -> Result<ObjectRecoveryInfo, CoreError> {
    Ok(ctx.pg.recovery_info(ctx.store, oid)?)
}

/// Ceph's `build_push_op`: the next chunk of `info.soid` from `progress`, at most `osd_recovery_max_chunk`
/// bytes (attributes and omap header with the first, then omap entries and data).
pub(crate) fn build_push_op<D: Device>(
    ctx: &mut RecoveryCtx<'_, D>,
    info: &ObjectRecoveryInfo,
    progress: &ObjectRecoveryProgress,
) -> Result<PushOp, CoreError> {
    Ok(ctx
        .pg
        .build_push(ctx.store, info, progress, ctx.cfg.osd_recovery_max_chunk)?)
}

/// Ceph's `submit_push_data`: apply one chunk as one store transaction (a multi-chunk object is assembled in a
/// temp object renamed over the object with the last chunk). Refuses what no honest peer sends: objects that
/// are not this PG's client objects, extents that do not add up to the data or reach past
/// `osd_max_object_size`.
pub(crate) fn apply_push<D: Device>(ctx: &mut RecoveryCtx<'_, D>, pop: &PushOp) -> Result<u64, CoreError> {
    let max_object_size = ctx.cfg.pg.osd_max_object_size;
    if !is_pg_object(&ctx.spgid, &pop.soid) || pop.recovery_info.soid != pop.soid {
        return Err(CoreError::Other(format!(
            "push of {}: not an object of pg {}",
            pop.soid, ctx.spgid
        )));
    }
    let mut total = 0u64;
    for (&o, &l) in &pop.data_included {
        total = total.saturating_add(l);
        if o.checked_add(l).is_none_or(|e| e > max_object_size) {
            return Err(CoreError::Other(format!(
                "push of {}: extent {o}+{l} beyond the object size limit",
                pop.soid
            )));
        }
    }
    if total != pop.data.len() as u64 {
        return Err(CoreError::Other(format!(
            "push of {}: {} data bytes for extents of {total}",
            pop.soid,
            pop.data.len()
        )));
    }
    if pop.before_progress.first && pop.recovery_info.size > max_object_size {
        return Err(CoreError::Other(format!(
            "push of {}: size {} beyond the object size limit",
            pop.soid, pop.recovery_info.size
        )));
    }
    Ok(ctx.pg.apply_push(ctx.store, pop)?.seq)
}

/// Remove the objects that exist (recovery delete, backfill remove); the last store sequence number, `None`
/// when there was nothing to remove. Objects that are not this PG's client objects are skipped.
pub(crate) fn remove_objects<D: Device>(
    ctx: &mut RecoveryCtx<'_, D>,
    oids: &[HObject],
) -> Result<Option<u64>, CoreError> {
    let mut last = None;
    for oid in oids.iter().filter(|o| is_pg_object(&ctx.spgid, o)) {
        if let Some(seq) = ctx.pg.remove_object(ctx.store, oid)? {
            last = Some(seq);
        }
    }
    Ok(last)
}

/// Up to `max` objects of the PG from `begin` (inclusive) in hobject order with their versions, and where the
/// next scan starts (`max_value` at the end).
pub(crate) fn scan_range<D: Device>(
    ctx: &mut RecoveryCtx<'_, D>,
    begin: &HObject,
    max: usize,
) -> Result<(BTreeMap<HObject, Eversion>, HObject), CoreError> {
    let (objects, next) = ctx.pg.scan(ctx.store, begin, max.max(1))?;
    Ok((objects.into_iter().collect(), next))
}

/// The first object strictly after `after` (`None`: the first object), with its version.
pub(crate) fn next_object<D: Device>(
    ctx: &mut RecoveryCtx<'_, D>,
    after: Option<&HObject>,
) -> Result<Option<(HObject, Eversion)>, CoreError> {
    let start = after.cloned().unwrap_or_default();
    let (objects, _) = ctx.pg.scan(ctx.store, &start, 2)?;
    Ok(objects.into_iter().find(|(o, _)| after.is_none_or(|a| o > a)))
}

/// Remove every temp object of the PG (leftovers of multi-chunk pushes); `None` when there were none.
pub(crate) fn clear_temp_objects<D: Device>(
    store: &mut Store<D>,
    spgid: &SpgId,
) -> Result<Option<u64>, CoreError> {
    let cid = pg::keys::collection_id(spgid);
    let mut from = Vec::new();
    let mut txn = Transaction::new();
    loop {
        let batch = store.list_objects(&cid, &from, None, 256)?;
        if batch.is_empty() {
            break;
        }
        for k in &batch {
            if pg::keys::from_key(k).is_some_and(|g| g.hobj.is_temp()) {
                txn.push(Op::Remove {
                    cid: cid.clone(),
                    oid: k.clone(),
                });
            }
        }
        let Some(last) = batch.last() else { break };
        from = last.name.to_vec();
        from.push(0);
    }
    if txn.is_empty() {
        return Ok(None);
    }
    Ok(Some(store.queue_transaction(&txn)?))
}

/// Number of objects in the PG (pgmeta and temp objects not counted).
pub(crate) fn count_objects<D: Device>(store: &mut Store<D>, spgid: &SpgId) -> Result<u64, CoreError> {
    let cid = pg::keys::collection_id(spgid);
    let mut from = Vec::new();
    let mut n = 0u64;
    loop {
        let batch = store.list_objects(&cid, &from, None, 1024)?;
        if batch.is_empty() {
            return Ok(n);
        }
        for k in &batch {
            if let Some(g) = pg::keys::from_key(k)
                && !g.is_pgmeta()
                && !g.hobj.is_temp()
            {
                n += 1;
            }
        }
        let Some(last) = batch.last() else { return Ok(n) };
        from = last.name.to_vec();
        from.push(0);
    }
}

/// Decode a `map<hobject_t, eversion_t>` (a backfill scan digest) from a message's data segment.
pub(crate) fn decode_digest(data: &Bytes) -> Result<BTreeMap<HObject, Eversion>, denc::DecodeError> {
    let mut d = Decoder::new(data.clone());
    BTreeMap::<HObject, Eversion>::decode(&mut d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intersect_interval_sets() {
        let mut s = IntervalSet::new();
        s.insert(0, 10);
        s.insert(20, 10);
        let b = intersect(&s, &range_set(8, 15));
        assert_eq!(b.into_iter().collect::<Vec<_>>(), vec![(8, 2), (20, 3)]);
        let mut all = IntervalSet::new();
        all.insert(0, u64::MAX);
        assert_eq!(
            intersect(&all, &range_set(0, 7)).into_iter().collect::<Vec<_>>(),
            vec![(0, 7)]
        );
    }
}
