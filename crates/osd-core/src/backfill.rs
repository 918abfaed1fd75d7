// SPDX-License-Identifier: LGPL-3.0-or-later
//! Backfill of one PG, primary and target side (Ceph's `PrimaryLogPG::recover_backfill`, `do_scan`,
//! `do_backfill`, `do_backfill_remove` semantics, sans-IO).
//!
//! Primary ([`Backfill::start`] on peering's `StartBackfill`): first every target grants a backfill slot
//! (MBackfillReserve REQUEST → GRANT; REJECT_TOOFULL/REVOKE are asked again after `osd_backfill_retry_interval`;
//! RELEASE after FINISH_ACK). Then it walks its objects in hobject order from a
//! cursor (`last_backfill_started`) and, for each target, the target's objects as MOSDPGScan digests report
//! them (`osd_backfill_scan_max` per scan). An object the primary has that a target lacks or holds at another
//! version is pushed (the push machinery of [`crate::recovery`]; a copy written in the current interval is
//! pushed even at the same version, see `step`); an object a target has that the primary does
//! not is removed with MOSDPGBackfillRemove. At most `osd_recovery_max_active` objects are in flight per PG.
//! As objects complete, each target gets MOSDPGBackfill PROGRESS with its new `last_backfill` (every object up
//! to it is in sync); at the end MOSDPGBackfill FINISH, and the target's FINISH_ACK completes it
//! ([`RecoveryEvent::BackfillDone`]).
//!
//! The primary's own objects are read fresh from the store at every step (one ordered lookup after the
//! cursor), so client writes during backfill are seen: writes to objects after the cursor are not replicated to
//! targets (see [`Backfill::should_send_op`]) and are picked up when the cursor reaches them; writes at or
//! before the cursor are replicated. Writes to an object being pushed must wait ([`Backfill::is_backfilling`]).
//!
//! Target: answers scans from its store, applies removes, records `last_backfill`
//! ([`RecoveryEvent::LastBackfill`]) and acknowledges FINISH. Incoming MBackfillReserve requests are granted.
//!
//! `osd_max_backfills` is a per-shard limit: the core gates [`Backfill::start`] with a [`Reserver`] (Ceph's
//! local reservation).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use ceph_msgs::CephMessage;
use ceph_msgs::osd_rep::{
    MBackfillReserve, MOSDPGBackfill, MOSDPGBackfillRemove, MOSDPGPush, MOSDPGPushReply, MOSDPGScan,
    backfill_op, backfill_reserve, rep_msg, scan_op,
};
use denc::{Encode, Encoder, Eversion, HObject, PgShard, ShardId, SpgId};
use ferrostore::Device;
use osd_types::pg_stat::PgStat;

use crate::recovery::{self, Progress, PushState, Replies, Reservations, ReserveKind, Retry, earliest};
use crate::{CoreError, RecoveryCtx, RecoveryEvent};

/// `osd_backfill_scan_max` (512): objects per scan digest.
pub const BACKFILL_SCAN_MAX: usize = 512;
/// Unconfirmed backfill removes on a target that start a confirming scan before the next forward scan.
const REMOVE_CONFIRM_BATCH: usize = 64;
/// `osd_backfill_retry_interval` (30 s): how long a rejected backfill reservation waits before asking again.
pub const BACKFILL_RETRY_INTERVAL: Duration = Duration::from_secs(30);

/// What the primary knows of one target.
#[derive(Debug, Clone)]
struct Target {
    /// Scanned objects of the target not yet compared, in hobject order.
    interval: BTreeMap<HObject, Eversion>,
    /// Where the next scan starts (`max_value`: the target has been listed to the end).
    end: HObject,
    /// A scan from `end` is outstanding (sent again while unanswered).
    scanning: Option<Retry>,
    /// The last `last_backfill` sent.
    reported: HObject,
    /// FINISH was sent; sent again while the target has not acknowledged it.
    finish: Option<Retry>,
    done: bool,
    /// Objects removed with MOSDPGBackfillRemove, not sent yet.
    to_remove: Vec<(HObject, Eversion)>,
    /// Removes sent and not yet confirmed by a scan of the target (MOSDPGBackfillRemove has no answer).
    /// (object, (the target's version, the batch that sent it)).
    removing: BTreeMap<HObject, (Eversion, u64)>,
    /// Remove batches sent to the target.
    remove_seq: u64,
    /// The confirming scan outstanding: where it starts (sent again while unanswered) and the last batch
    /// it judges (later ones may reach the target after it).
    verify: Option<(HObject, Retry, u64)>,
    /// Confirming scans in a row that found removes not applied and none applied (a lost remove is sent
    /// again each time, a bounded number of times).
    verify_rounds: u32,
    /// A forward scan was sent since the last confirming scan (removes are confirmed along with it).
    confirm_due: bool,
}

/// Backfill state of one PG (primary or target side).
#[derive(Debug)]
pub struct Backfill {
    spgid: SpgId,
    interval: u32,
    targets: BTreeMap<i32, Target>,
    /// `last_backfill_started`: every object up to here was compared (pushed, removed, or in sync).
    cursor: Option<HObject>,
    /// Neither the primary nor any target has objects after the cursor.
    exhausted: bool,
    in_flight: BTreeMap<HObject, BTreeMap<i32, PushState>>,
    /// Objects compared whose completion has not been reported in a `last_backfill` yet.
    started: BTreeSet<HObject>,
    /// Primary objects at start and how many the cursor has passed (for the misplaced count).
    total_objects: u64,
    passed_objects: u64,
    replies: Replies,
    /// Backfill slots on the targets (MBackfillReserve); nothing is scanned or copied before every target
    /// granted one.
    reservations: Reservations,
    progress: Progress,
}

impl Backfill {
    pub fn new(spgid: SpgId) -> Self {
        Backfill {
            spgid,
            interval: 0,
            targets: BTreeMap::new(),
            cursor: None,
            exhausted: false,
            in_flight: BTreeMap::new(),
            started: BTreeSet::new(),
            total_objects: 0,
            passed_objects: 0,
            replies: Replies::default(),
            reservations: Reservations::default(),
            progress: Progress::default(),
        }
    }

    /// The PG this state belongs to.
    pub fn spgid(&self) -> SpgId {
        self.spgid
    }

    /// Peering's `Output::StartBackfill` on the primary: backfill these targets from the beginning (objects a
    /// target already holds at the right version are compared, not copied).
    pub fn start<D: Device>(&mut self, ctx: &mut RecoveryCtx<'_, D>, targets: Vec<i32>) {
        self.reset();
        self.interval = ctx.same_interval_since;
        for t in targets {
            if t == ctx.whoami {
                continue;
            }
            self.targets.insert(
                t,
                Target {
                    interval: BTreeMap::new(),
                    end: HObject::default(),
                    scanning: None,
                    reported: HObject::default(),
                    finish: None,
                    done: false,
                    to_remove: Vec::new(),
                    removing: BTreeMap::new(),
                    remove_seq: 0,
                    verify: None,
                    verify_rounds: 0,
                    confirm_due: false,
                },
            );
        }
        let targets: Vec<i32> = self.targets.keys().copied().collect();
        self.reservations.request(ctx, ReserveKind::Backfill, targets);
        self.total_objects = match recovery::count_objects(ctx.store, &ctx.spgid) {
            Ok(n) => n,
            Err(e) => {
                self.log(ctx, format!("counting objects: {e}"));
                0
            }
        };
        self.kick(ctx);
    }

    /// A backfill message for this PG from `osd.<from>`: MOSDPGScan, MOSDPGBackfill, MOSDPGBackfillRemove,
    /// MBackfillReserve, and MOSDPGPushReply for backfill pushes (MOSDPGPush is applied as on any replica).
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
        let current = self.interval == ctx.same_interval_since;
        match msg.msg_type {
            rep_msg::PG_SCAN => {
                let m = MOSDPGScan::from_message(msg).map_err(dec_err)?;
                if m.query_epoch < ctx.same_interval_since {
                    return Ok(());
                }
                match m.op {
                    scan_op::GET_DIGEST => self.answer_scan(ctx, from, &m)?,
                    scan_op::DIGEST if current => {
                        let objects = recovery::decode_digest(&m.data).map_err(|e| CoreError::Decode {
                            from,
                            msg_type: msg.msg_type,
                            err: e.to_string(),
                        })?;
                        let cursor = self.cursor.clone();
                        // only the answer to the outstanding scan (a repeated one is dropped)
                        if let Some(t) = self.targets.get_mut(&from)
                            && t.scanning.is_some()
                            && m.begin == t.end
                        {
                            t.scanning = None;
                            t.interval = objects
                                .into_iter()
                                .filter(|(o, _)| cursor.as_ref().is_none_or(|c| o > c))
                                .collect();
                            t.end = m.end;
                            self.kick(ctx);
                        } else if self
                            .targets
                            .get(&from)
                            .is_some_and(|t| t.verify.as_ref().is_some_and(|(b, _, _)| *b == m.begin))
                        {
                            self.verified(ctx, from, &m.begin, &m.end, &objects);
                            self.kick(ctx);
                        }
                    }
                    _ => {}
                }
            }
            rep_msg::PG_BACKFILL => {
                let m = MOSDPGBackfill::from_message(msg).map_err(dec_err)?;
                if m.query_epoch < ctx.same_interval_since {
                    return Ok(());
                }
                match m.op {
                    backfill_op::PROGRESS => ctx.out.push(RecoveryEvent::LastBackfill(m.last_backfill)),
                    backfill_op::FINISH => {
                        ctx.out.push(RecoveryEvent::LastBackfill(HObject::max_value()));
                        let ack = MOSDPGBackfill {
                            op: backfill_op::FINISH_ACK,
                            map_epoch: ctx.epoch,
                            query_epoch: m.query_epoch,
                            pgid: SpgId::new(ctx.spgid.pgid, ShardId::NO_SHARD),
                            last_backfill: HObject::default(),
                            stats: PgStat::default(),
                        };
                        ctx.out.push(RecoveryEvent::Send {
                            to: from,
                            msg: ack.to_message(ctx.cfg.peer_features),
                        });
                    }
                    backfill_op::FINISH_ACK if current => {
                        if let Some(t) = self.targets.get_mut(&from)
                            && t.finish.is_some()
                            && !t.done
                        {
                            t.done = true;
                            t.finish = None;
                            ctx.out.push(RecoveryEvent::BackfillDone { osd: from });
                            self.reservations.release(ctx, ReserveKind::Backfill, from);
                        }
                    }
                    _ => {}
                }
            }
            rep_msg::PG_BACKFILL_REMOVE => {
                let m = MOSDPGBackfillRemove::from_message(msg).map_err(dec_err)?;
                if m.map_epoch < ctx.same_interval_since {
                    return Ok(());
                }
                let oids: Vec<HObject> = m.ls.iter().map(|(o, _)| o.clone()).collect();
                if let Some(seq) = recovery::remove_objects(ctx, &oids)? {
                    ctx.out.push(RecoveryEvent::WaitDurable(seq));
                }
            }
            rep_msg::PG_PUSH => {
                let m = MOSDPGPush::from_message(msg).map_err(dec_err)?;
                if m.min_epoch < ctx.same_interval_since {
                    return Ok(());
                }
                for pop in &m.pushes {
                    recovery::handle_replica_push(ctx, &mut self.replies, from, pop)?;
                }
            }
            rep_msg::PG_PUSH_REPLY => {
                let m = MOSDPGPushReply::from_message(msg).map_err(dec_err)?;
                if m.min_epoch < ctx.same_interval_since || !current {
                    return Ok(());
                }
                for r in &m.replies {
                    self.push_reply(ctx, from, &r.soid)?;
                }
                self.kick(ctx);
            }
            rep_msg::BACKFILL_RESERVE => {
                let m = MBackfillReserve::from_message(msg).map_err(dec_err)?;
                let current = current && m.query_epoch >= ctx.same_interval_since;
                match m.reserve_type {
                    // target side: granted at once (no target-side slot limit yet)
                    backfill_reserve::REQUEST => {
                        let grant = MBackfillReserve {
                            pgid: m.pgid,
                            query_epoch: m.query_epoch,
                            reserve_type: backfill_reserve::GRANT,
                            priority: m.priority,
                            primary_num_bytes: 0,
                            shard_num_bytes: 0,
                        };
                        ctx.out.push(RecoveryEvent::Send {
                            to: from,
                            msg: grant.to_message(ctx.cfg.peer_features),
                        });
                    }
                    backfill_reserve::GRANT if current && self.reservations.grant(from) => self.kick(ctx),
                    // too full, or the target wants its slot back: ask again later (`osd_backfill_retry_interval`)
                    backfill_reserve::REJECT_TOOFULL
                    | backfill_reserve::REVOKE_TOOFULL
                    | backfill_reserve::REVOKE
                        if current && self.targets.get(&from).is_some_and(|t| !t.done) =>
                    {
                        self.reservations
                            .ask_again_at(from, ctx.now + BACKFILL_RETRY_INTERVAL);
                    }
                    _ => {}
                }
            }
            t => self.log(ctx, format!("backfill ignores message type {t} from osd.{from}")),
        }
        Ok(())
    }

    /// Store transaction `seq` (and all before it) is durable.
    pub fn on_durable<D: Device>(&mut self, ctx: &mut RecoveryCtx<'_, D>, seq: u64) {
        self.replies.on_durable(seq, ctx.out, ctx.whoami);
    }

    /// Continue work (after inputs that may have freed throttle slots, and on ticks): rejected reservations
    /// are asked for again when due, unanswered requests sent again.
    pub fn tick<D: Device>(&mut self, ctx: &mut RecoveryCtx<'_, D>) {
        self.resend(ctx, None);
        self.kick(ctx);
    }

    /// The connection to `osd` was reset: what it has not answered goes again now.
    pub fn peer_reset<D: Device>(&mut self, ctx: &mut RecoveryCtx<'_, D>, osd: i32) {
        self.resend(ctx, Some(osd));
    }

    /// When a reservation is asked for again or an unanswered request is sent again (none: nothing waits).
    pub fn poll_timeout(&self) -> Option<Duration> {
        let targets = self.targets.values().flat_map(|t| {
            [
                t.scanning.and_then(|r| r.due()),
                t.finish.and_then(|r| r.due()),
                t.verify.as_ref().and_then(|(_, r, _)| r.due()),
            ]
        });
        let pushes = self
            .in_flight
            .values()
            .flat_map(|p| p.values().map(|p| p.retry.due()));
        earliest(
            std::iter::once(self.reservations.poll_timeout())
                .chain(targets)
                .chain(pushes),
        )
    }

    /// Send again reservation requests, scans, pushes (the last chunk) and FINISH that are overdue (all of
    /// `reset`'s: its connection broke).
    fn resend<D: Device>(&mut self, ctx: &mut RecoveryCtx<'_, D>, reset: Option<i32>) {
        if self.interval != ctx.same_interval_since || self.targets.is_empty() {
            return;
        }
        self.reservations.resend(ctx, ReserveKind::Backfill, reset);
        let now = ctx.now;
        let mut scans = Vec::new();
        let mut finishes = Vec::new();
        for (&osd, t) in self.targets.iter_mut() {
            if let Some(r) = t.scanning.as_mut()
                && r.fire(now, reset == Some(osd))
            {
                scans.push((osd, t.end.clone()));
            }
            if let Some(r) = t.finish.as_mut()
                && r.fire(now, reset == Some(osd))
            {
                finishes.push(osd);
            }
            if let Some((begin, r, _)) = t.verify.as_mut()
                && r.fire(now, reset == Some(osd))
            {
                scans.push((osd, begin.clone()));
            }
        }
        for (osd, begin) in scans {
            send_scan(ctx, osd, begin);
        }
        for osd in finishes {
            self.send_backfill(ctx, osd, backfill_op::FINISH, HObject::max_value());
        }
        let mut failed = Vec::new();
        for (oid, pushes) in self.in_flight.iter_mut() {
            for (&to, ps) in pushes.iter_mut() {
                if let Err(e) = ps.maybe_resend(ctx, to, reset == Some(to)) {
                    failed.push(format!("resending {oid} to osd.{to}: {e}"));
                }
            }
        }
        for f in failed {
            self.log(ctx, f);
        }
    }

    /// A new interval (or the PG stops): drop everything in flight.
    pub fn reset(&mut self) {
        self.targets.clear();
        self.reservations.clear();
        self.cursor = None;
        self.exhausted = false;
        self.in_flight.clear();
        self.started.clear();
        self.total_objects = 0;
        self.passed_objects = 0;
        self.progress.ops_in_flight = 0;
    }

    /// Whether backfill work is pending or in flight (on the primary): some target has not acknowledged FINISH.
    pub fn is_active(&self) -> bool {
        self.targets.values().any(|t| !t.done)
    }

    /// Ceph's `should_send_op`: whether a write to `oid` goes to `target` with its transaction (true) or as
    /// log entries with an empty transaction (false). `backfill_targets` are peering's backfill targets of
    /// this interval (in the acting set or not). A backfill target gets the data only for objects at or
    /// before `last_backfill_started` (the cursor: every object up to it is in sync or being copied, and
    /// writes to objects being copied wait) or once its backfill is complete; later objects are copied when
    /// the cursor reaches them, and before this PG's backfill started (waiting for a slot or reservations)
    /// nothing is in sync yet. Any other OSD always gets the data.
    pub fn should_send_op(&self, backfill_targets: &BTreeSet<i32>, target: i32, oid: &HObject) -> bool {
        match self.targets.get(&target) {
            Some(t) if !t.done => self.cursor.as_ref().is_some_and(|c| oid <= c) || t.reported.is_max(),
            Some(_) => true,
            None => !backfill_targets.contains(&target),
        }
    }

    /// Whether `oid` is being pushed to a target now, or removed from one without confirmation yet (writes
    /// to it wait until it is done).
    pub fn is_backfilling(&self, oid: &HObject) -> bool {
        self.in_flight.contains_key(oid)
            || self
                .targets
                .values()
                .any(|t| t.removing.contains_key(oid) || t.to_remove.iter().any(|(o, _)| o == oid))
    }

    /// Counters for pg_stat.
    pub fn progress(&self) -> Progress {
        let mut p = self.progress;
        let pending = self
            .targets
            .values()
            .filter(|t| !t.done && t.finish.is_none())
            .count() as u64;
        p.objects_misplaced = pending * self.total_objects.saturating_sub(self.passed_objects);
        p.ops_in_flight = self.in_flight.len() as u64;
        p
    }

    // ---- target side ----

    fn answer_scan<D: Device>(
        &mut self,
        ctx: &mut RecoveryCtx<'_, D>,
        from: i32,
        m: &MOSDPGScan,
    ) -> Result<(), CoreError> {
        let (objects, end) = recovery::scan_range(ctx, &m.begin, BACKFILL_SCAN_MAX)?;
        let mut e = Encoder::new(ctx.cfg.peer_features);
        objects.encode(&mut e);
        let reply = MOSDPGScan {
            op: scan_op::DIGEST,
            map_epoch: ctx.epoch,
            query_epoch: m.query_epoch,
            from: PgShard::new(ctx.whoami, ctx.spgid.shard),
            pgid: SpgId::new(ctx.spgid.pgid, ShardId::NO_SHARD),
            begin: m.begin.clone(),
            end,
            data: e.into_bytes(),
        };
        ctx.out.push(RecoveryEvent::Send {
            to: from,
            msg: reply.to_message(ctx.cfg.peer_features),
        });
        Ok(())
    }

    // ---- primary side ----

    fn log<D: Device>(&self, ctx: &mut RecoveryCtx<'_, D>, s: String) {
        ctx.out
            .push(RecoveryEvent::Log(format!("pg {}: backfill: {s}", self.spgid)));
    }

    fn kick<D: Device>(&mut self, ctx: &mut RecoveryCtx<'_, D>) {
        if self.targets.is_empty() || self.interval != ctx.same_interval_since {
            return;
        }
        if let Err(e) = self.step(ctx) {
            self.log(ctx, format!("stopped: {e}"));
        }
        self.flush_removes(ctx);
        self.report(ctx);
        self.progress.max_ops_in_flight = self.progress.max_ops_in_flight.max(self.in_flight.len() as u64);
    }

    /// Compare and start work until the throttle is full, a scan is outstanding, or everything is compared.
    fn step<D: Device>(&mut self, ctx: &mut RecoveryCtx<'_, D>) -> Result<(), CoreError> {
        if !self.reservations.all_granted() {
            return Ok(());
        }
        let max = (ctx.cfg.osd_recovery_max_active as usize).max(1);
        while !self.exhausted && self.in_flight.len() < max {
            // every target needs objects listed past the cursor (or to be listed to the end)
            let mut waiting = false;
            let mut scans = Vec::new();
            for (&osd, t) in self
                .targets
                .iter_mut()
                .filter(|(_, t)| !t.done && t.finish.is_none())
            {
                if t.interval.is_empty() && !t.end.is_max() {
                    if t.scanning.is_none() {
                        t.scanning = Some(Retry::new(ctx.now));
                        t.confirm_due = true;
                        scans.push((osd, t.end.clone()));
                    }
                    waiting = true;
                }
            }
            for (osd, begin) in scans {
                send_scan(ctx, osd, begin);
            }
            if waiting {
                return Ok(());
            }
            let peer_first: Option<HObject> = self
                .targets
                .values()
                .filter(|t| !t.done && t.finish.is_none())
                .filter_map(|t| t.interval.keys().next().cloned())
                .min();
            let local = recovery::next_object(ctx, self.cursor.as_ref())?;
            let remove_first = match (&local, &peer_first) {
                (None, None) => {
                    self.exhausted = true;
                    continue;
                }
                (_, Some(pf)) => local.as_ref().is_none_or(|(l, _)| pf < l),
                (Some(_), None) => false,
            };
            if remove_first {
                // targets hold an object the primary does not have: remove it there
                let Some(pf) = peer_first else { continue };
                for t in self.targets.values_mut() {
                    if t.interval.keys().next() == Some(&pf)
                        && let Some(v) = t.interval.remove(&pf)
                    {
                        t.to_remove.push((pf.clone(), v));
                    }
                }
                self.started.insert(pf.clone());
                self.cursor = Some(pf);
            } else if let Some((obj, version)) = local {
                let mut need = Vec::new();
                // A copy written in this interval is not trusted even at the same version: before this backfill
                // started (the PG may have waited for a slot) a write could have reached the target whole or
                // as a partial object carrying the new version. Older versions were written before the target
                // became a backfill target and compare exactly.
                let recent = version.epoch >= ctx.same_interval_since;
                for (&osd, t) in self
                    .targets
                    .iter_mut()
                    .filter(|(_, t)| !t.done && t.finish.is_none())
                {
                    match t.interval.keys().next() {
                        Some(first) if *first == obj => {
                            let theirs = t.interval.remove(&obj);
                            if theirs != Some(version) || recent {
                                need.push(osd);
                            }
                        }
                        _ => need.push(osd),
                    }
                }
                self.passed_objects += 1;
                self.started.insert(obj.clone());
                self.cursor = Some(obj.clone());
                if !need.is_empty() {
                    self.start_pushes(ctx, &obj, &need)?;
                }
            }
        }
        Ok(())
    }

    fn start_pushes<D: Device>(
        &mut self,
        ctx: &mut RecoveryCtx<'_, D>,
        obj: &HObject,
        targets: &[i32],
    ) -> Result<(), CoreError> {
        let info = recovery::local_push_info(ctx, obj)?;
        let mut pushes = BTreeMap::new();
        for &t in targets {
            pushes.insert(t, PushState::start(ctx, &info, t, &mut self.progress)?);
        }
        self.in_flight.insert(obj.clone(), pushes);
        Ok(())
    }

    fn push_reply<D: Device>(
        &mut self,
        ctx: &mut RecoveryCtx<'_, D>,
        from: i32,
        oid: &HObject,
    ) -> Result<(), CoreError> {
        let Some(pushes) = self.in_flight.get_mut(oid) else {
            return Ok(());
        };
        let Some(ps) = pushes.get_mut(&from) else {
            return Ok(());
        };
        if ps.on_reply(ctx, from, &mut self.progress)? {
            pushes.remove(&from);
            self.progress.objects_recovered += 1;
            if pushes.is_empty() {
                self.in_flight.remove(oid);
            }
        }
        Ok(())
    }

    /// Send the removes of this step. MOSDPGBackfillRemove has no answer, so each batch is followed by a scan
    /// of the target from its first unconfirmed remove: the target handles messages in order, so the digest
    /// shows whether the removes were applied ([`Backfill::verified`]).
    fn flush_removes<D: Device>(&mut self, ctx: &mut RecoveryCtx<'_, D>) {
        for (&osd, t) in self.targets.iter_mut() {
            if t.to_remove.is_empty() {
                continue;
            }
            let ls = std::mem::take(&mut t.to_remove);
            t.remove_seq += 1;
            let seq = t.remove_seq;
            t.removing.extend(ls.iter().map(|(o, v)| (o.clone(), (*v, seq))));
            send_remove(ctx, osd, ls);
        }
        // Confirm in batches: with the next forward scan, after REMOVE_CONFIRM_BATCH removes, or at the end
        // (FINISH waits for it). Until then the target's `last_backfill` stays before the first one.
        let exhausted = self.exhausted;
        for (&osd, t) in self.targets.iter_mut() {
            if t.verify.is_some() || t.done || t.verify_rounds > recovery::RETRY_ATTEMPTS {
                continue;
            }
            let Some(first) = t.removing.keys().next().cloned() else {
                continue;
            };
            if exhausted || t.confirm_due || t.removing.len() >= REMOVE_CONFIRM_BATCH {
                t.confirm_due = false;
                t.verify = Some((first.clone(), Retry::new(ctx.now), t.remove_seq));
                send_scan(ctx, osd, first);
            }
        }
    }

    /// The digest of a confirming scan from `begin` (objects up to `end`, exclusive), judging the removes
    /// sent before the scan: those whose objects are gone are confirmed; those still there at the version
    /// removed were lost and go again, followed by another confirming scan. Judged removes past `end` are
    /// confirmed by a scan from `end`.
    fn verified<D: Device>(
        &mut self,
        ctx: &mut RecoveryCtx<'_, D>,
        from: i32,
        begin: &HObject,
        end: &HObject,
        objects: &BTreeMap<HObject, Eversion>,
    ) {
        let Some(t) = self.targets.get_mut(&from) else {
            return;
        };
        let Some((_, _, judged)) = t.verify.take() else {
            return;
        };
        let covered: Vec<(HObject, Eversion)> = t
            .removing
            .iter()
            .filter(|(o, (_, seq))| *seq <= judged && *o >= begin && (end.is_max() || *o < end))
            .map(|(o, (v, _))| (o.clone(), *v))
            .collect();
        let mut again = Vec::new();
        let n = covered.len();
        for (o, v) in covered {
            // still there, and not newer than what was removed (a newer copy cannot appear while the remove
            // is unconfirmed: writes to the object wait)
            if objects.get(&o).is_some_and(|have| *have <= v) {
                again.push((o, v));
            } else {
                t.removing.remove(&o);
            }
        }
        if again.len() < n {
            t.verify_rounds = 0;
        }
        let resent = !again.is_empty();
        if resent {
            t.verify_rounds += 1;
            if t.verify_rounds > recovery::RETRY_ATTEMPTS {
                // the target does not apply them: backfill waits for the next interval (as a push whose
                // resends are used up), its `last_backfill` before them
                let n = again.len();
                self.log(
                    ctx,
                    format!("osd.{from} did not apply {n} backfill removes; waiting for the next interval"),
                );
                return;
            }
            t.remove_seq += 1;
            for (o, _) in &again {
                if let Some(e) = t.removing.get_mut(o) {
                    e.1 = t.remove_seq;
                }
            }
            send_remove(ctx, from, again);
        }
        let beyond = !end.is_max() && t.removing.iter().any(|(o, (_, seq))| *seq <= judged && o >= end);
        let next = match t.removing.keys().next() {
            Some(first) if resent => first.clone(),
            // everything before `end` is judged: continue after it
            Some(_) if beyond => end.clone(),
            _ => return,
        };
        t.verify = Some((next.clone(), Retry::new(ctx.now), t.remove_seq));
        send_scan(ctx, from, next);
    }

    /// Send each target its new `last_backfill`: the last compared object before the first one still in
    /// flight; FINISH once everything is compared and nothing is in flight.
    fn report<D: Device>(&mut self, ctx: &mut RecoveryCtx<'_, D>) {
        let first_removing = self
            .targets
            .values()
            .filter_map(|t| t.removing.keys().next())
            .min()
            .cloned();
        let all_done = self.exhausted && self.in_flight.is_empty() && first_removing.is_none();
        let new_lb = if all_done {
            Some(HObject::max_value())
        } else {
            let first_busy = match (self.in_flight.keys().next().cloned(), first_removing) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let lb = match &first_busy {
                Some(b) => self.started.range(..b.clone()).next_back().cloned(),
                None => self.started.iter().next_back().cloned(),
            };
            match &first_busy {
                Some(b) => self.started = self.started.split_off(b),
                None => self.started.clear(),
            }
            lb
        };
        let Some(new_lb) = new_lb else { return };
        let mut msgs = VecDeque::new();
        for (&osd, t) in self
            .targets
            .iter_mut()
            .filter(|(_, t)| !t.done && t.finish.is_none())
        {
            if new_lb.is_max() {
                t.finish = Some(Retry::new(ctx.now));
                t.reported = new_lb.clone();
                msgs.push_back((osd, backfill_op::FINISH, new_lb.clone()));
            } else if t.reported < new_lb {
                t.reported = new_lb.clone();
                msgs.push_back((osd, backfill_op::PROGRESS, new_lb.clone()));
            }
        }
        for (osd, op, lb) in msgs {
            self.send_backfill(ctx, osd, op, lb);
        }
    }

    /// MOSDPGBackfill PROGRESS or FINISH to a target.
    fn send_backfill<D: Device>(&self, ctx: &mut RecoveryCtx<'_, D>, to: i32, op: u32, lb: HObject) {
        let m = MOSDPGBackfill {
            op,
            map_epoch: ctx.epoch,
            query_epoch: ctx.same_interval_since,
            pgid: SpgId::new(ctx.spgid.pgid, ShardId::NO_SHARD),
            last_backfill: lb,
            // a classic target adopts these as its pg_stat (keeping its own byte count until FINISH)
            stats: ctx.peering.info().stats.clone(),
        };
        ctx.out.push(RecoveryEvent::Send {
            to,
            msg: m.to_message(ctx.cfg.peer_features),
        });
    }
}

/// MOSDPGBackfillRemove of `ls` (object, the target's version) to `to`.
fn send_remove<D: Device>(ctx: &mut RecoveryCtx<'_, D>, to: i32, ls: Vec<(HObject, Eversion)>) {
    let m = MOSDPGBackfillRemove {
        pgid: SpgId::new(ctx.spgid.pgid, ShardId::NO_SHARD),
        map_epoch: ctx.epoch,
        ls,
    };
    ctx.out.push(RecoveryEvent::Send {
        to,
        msg: m.to_message(ctx.cfg.peer_features),
    });
}

/// MOSDPGScan GET_DIGEST from `begin`.
fn send_scan<D: Device>(ctx: &mut RecoveryCtx<'_, D>, to: i32, begin: HObject) {
    let m = MOSDPGScan {
        op: scan_op::GET_DIGEST,
        map_epoch: ctx.epoch,
        query_epoch: ctx.same_interval_since,
        from: PgShard::new(ctx.whoami, ctx.spgid.shard),
        pgid: SpgId::new(ctx.spgid.pgid, ShardId::NO_SHARD),
        begin,
        end: HObject::default(),
        data: bytes::Bytes::new(),
    };
    ctx.out.push(RecoveryEvent::Send {
        to,
        msg: m.to_message(ctx.cfg.peer_features),
    });
}

/// Shard-wide `osd_max_backfills` slots (Ceph's local reservation): the core asks for a slot before calling
/// [`Backfill::start`] and releases it when the PG's backfill is no longer active (or the PG changes interval).
#[derive(Debug, Clone)]
pub struct Reserver {
    max: usize,
    granted: BTreeSet<SpgId>,
    waiting: VecDeque<SpgId>,
}

impl Reserver {
    /// `max` slots (`osd_max_backfills`).
    pub fn new(max: usize) -> Self {
        Reserver {
            max: max.max(1),
            granted: BTreeSet::new(),
            waiting: VecDeque::new(),
        }
    }

    /// Ask for a slot: true when granted now, else the PG waits in line (see [`Reserver::release`]).
    pub fn request(&mut self, pg: SpgId) -> bool {
        if self.granted.contains(&pg) {
            return true;
        }
        if self.granted.len() < self.max && self.waiting.is_empty() {
            self.granted.insert(pg);
            return true;
        }
        if !self.waiting.contains(&pg) {
            self.waiting.push_back(pg);
        }
        false
    }

    /// Give back `pg`'s slot (or leave the line); returns the PGs granted a slot by that, in order.
    pub fn release(&mut self, pg: SpgId) -> Vec<SpgId> {
        self.granted.remove(&pg);
        self.waiting.retain(|p| *p != pg);
        let mut out = Vec::new();
        while self.granted.len() < self.max {
            let Some(next) = self.waiting.pop_front() else {
                break;
            };
            self.granted.insert(next);
            out.push(next);
        }
        out
    }

    /// PGs holding a slot.
    pub fn granted(&self) -> usize {
        self.granted.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use denc::PgId;

    #[test]
    fn reservation_slots() {
        let a = SpgId::new(PgId::new(1, 0), ShardId::NO_SHARD);
        let b = SpgId::new(PgId::new(1, 1), ShardId::NO_SHARD);
        let c = SpgId::new(PgId::new(1, 2), ShardId::NO_SHARD);
        let mut r = Reserver::new(1);
        assert!(r.request(a));
        assert!(!r.request(b));
        assert!(!r.request(c));
        assert!(r.request(a));
        assert_eq!(r.granted(), 1);
        assert_eq!(r.release(a), vec![b]);
        assert_eq!(r.release(c), Vec::<SpgId>::new());
        assert_eq!(r.release(b), Vec::<SpgId>::new());
        assert_eq!(r.granted(), 0);
    }
}
