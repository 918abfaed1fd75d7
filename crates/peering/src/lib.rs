// SPDX-License-Identifier: LGPL-3.0-or-later
//! Ceph PG peering for replicated pools as a sans-IO state machine (the semantics of `PeeringState.cc`, shaped
//! like quinn-proto: events in, outputs out, no clock, sockets or disk).
//!
//! One [`Pg`] per PG shard an OSD holds. The driver (the OSD, or a deterministic simulator) calls
//! [`Pg::handle`] with the current monotonic time and an [`Event`] (a new OSDMap epoch reduced to this PG's
//! [`MapView`], a decoded peer message, a recovery/backfill completion, a timer tick) and then drains
//! [`Pg::poll_output`]: messages to send ([`PeerMsg`] wraps Ceph's own messages, so the same driver can talk to
//! classic OSDs), store writes (pg info, log changes, missing set, objects to delete), MOSDAlive and pg_temp
//! requests for the monitor, recovery and backfill work, and state changes. [`Pg::poll_timeout`] says when the
//! next [`Event::Tick`] is due (lease renewal).
//!
//! Primary flow (Ceph's state names): `Started/Primary/Peering/GetInfo` (query every shard of the prior set) →
//! `GetLog` (pick the authoritative log with `find_best_info`'s rules, fetch it if another shard has it) →
//! `GetMissing` (fetch the logs of shards whose `last_update` is not in the authoritative history, compute every
//! shard's missing set) → `WaitUpThru` (the monitor must have recorded our `up_thru` for this interval) →
//! `Active/Activating` (send each replica its log and missing set, wait for their acks) → `Active/Recovering` →
//! `Active/Backfilling` → `Active/Clean`. If the best acting set differs from the map's, the primary asks for a
//! pg_temp first (`WaitActingChange`); shards that cannot recover from the log are backfilled while a pg_temp keeps
//! complete shards acting. Replicas: `Started/Stray` → `Started/ReplicaActive`.

pub mod interval;
pub mod pglog;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use ceph_msgs::osd_rep::{MOSDPGInfo2, MOSDPGLease, MOSDPGLeaseAck, MOSDPGLog, MOSDPGNotify2, MOSDPGQuery2};
use denc::{Eversion, HObject, PgId, ShardId, SpgId, Timespan};
use osd_types::past_intervals::PastIntervals;
use osd_types::pg_info::PgInfo;
use osd_types::pg_log::PgLogEntry;
use osd_types::pg_log_t::PgLog;
use osd_types::pg_missing::PgMissing;
use osd_types::pg_peering::{PgLease, PgLeaseAck, PgNotify, PgQuery, query_type};

use crate::interval::{check_new_interval, prior_set};
use crate::pglog::{NeedMore, Reconciled, reconcile};

/// The pool parameters peering depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolView {
    pub size: u32,
    pub min_size: u32,
}

/// One OSDMap epoch as this PG sees it (plain data, so peering does not depend on the full OSDMap).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapView {
    pub epoch: u32,
    pub pool: PoolView,
    pub up: Vec<i32>,
    pub up_primary: i32,
    pub acting: Vec<i32>,
    pub acting_primary: i32,
    /// `up_thru` of each OSD (osd_info_t).
    pub up_thru: BTreeMap<i32, u32>,
    /// The OSDs up in this epoch.
    pub up_osds: BTreeSet<i32>,
}

impl MapView {
    pub fn is_up(&self, osd: i32) -> bool {
        self.up_osds.contains(&osd)
    }
}

/// Peer messages peering sends and receives: Ceph's own.
#[derive(Debug, Clone, PartialEq)]
pub enum PeerMsg {
    Notify(Box<MOSDPGNotify2>),
    Query(MOSDPGQuery2),
    Info(Box<MOSDPGInfo2>),
    Log(Box<MOSDPGLog>),
    Lease(MOSDPGLease),
    LeaseAck(MOSDPGLeaseAck),
}

impl PeerMsg {
    /// The wire message for a peer with `features` (what the driver hands to msgr2).
    pub fn to_message(&self, features: u64) -> ceph_msgs::Message {
        use ceph_msgs::CephMessage;
        match self {
            PeerMsg::Notify(m) => m.to_message(features),
            PeerMsg::Query(m) => m.to_message(features),
            PeerMsg::Info(m) => m.to_message(features),
            PeerMsg::Log(m) => m.to_message(features),
            PeerMsg::Lease(m) => m.to_message(features),
            PeerMsg::LeaseAck(m) => m.to_message(features),
        }
    }

    /// A received message, if it is one peering handles (`Ok(None)` for other types).
    pub fn from_message(m: &ceph_msgs::Message) -> Result<Option<PeerMsg>, ceph_msgs::MsgError> {
        use ceph_msgs::CephMessage;
        use ceph_msgs::osd_rep::rep_msg;
        Ok(Some(match m.msg_type {
            rep_msg::PG_NOTIFY2 => PeerMsg::Notify(Box::new(MOSDPGNotify2::from_message(m)?)),
            rep_msg::PG_QUERY2 => PeerMsg::Query(MOSDPGQuery2::from_message(m)?),
            rep_msg::PG_INFO2 => PeerMsg::Info(Box::new(MOSDPGInfo2::from_message(m)?)),
            rep_msg::PG_LOG => PeerMsg::Log(Box::new(MOSDPGLog::from_message(m)?)),
            rep_msg::PG_LEASE => PeerMsg::Lease(MOSDPGLease::from_message(m)?),
            rep_msg::PG_LEASE_ACK => PeerMsg::LeaseAck(MOSDPGLeaseAck::from_message(m)?),
            _ => return Ok(None),
        }))
    }

    /// The PG a message is about.
    pub fn spgid(&self) -> SpgId {
        match self {
            PeerMsg::Notify(m) => m.spgid,
            PeerMsg::Query(m) => m.spgid,
            PeerMsg::Info(m) => m.spgid,
            PeerMsg::Log(m) => m.spgid(),
            PeerMsg::Lease(m) => m.spgid,
            PeerMsg::LeaseAck(m) => m.spgid,
        }
    }
}

/// What the driver feeds in.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A new OSDMap epoch (in order, one per epoch the OSD processes).
    AdvanceMap(MapView),
    /// A peering message from OSD `from`.
    Peer { from: i32, msg: PeerMsg },
    /// The driver recovered `oid` at `version` on `shard` (pushed to a replica, or pulled to the primary).
    ObjectRecovered {
        osd: i32,
        oid: HObject,
        version: Eversion,
    },
    /// Backfill of a target finished (every object copied).
    BackfillDone { osd: i32 },
    /// A timer fired (see [`Pg::poll_timeout`]).
    Tick,
}

/// Store writes peering asks for (the driver applies them in order, durably, before sending what follows them).
#[derive(Debug, Clone, PartialEq)]
pub enum Persist {
    /// The pgmeta `_info` and `_past_intervals` (the driver may write the encoded `pg_info_t` as Ceph does).
    Info {
        info: Box<PgInfo>,
        past_intervals: PastIntervals,
    },
    /// Drop divergent log entries (the pgmeta omap keys of these versions).
    LogRemove(Vec<Eversion>),
    /// Append log entries.
    LogAppend(Vec<PgLogEntry>),
    /// The local missing set.
    Missing(PgMissing),
    /// Delete a local object that only divergent writes created.
    RemoveObject(HObject),
}

/// Ceph's `PG_STATE_*` flags this machine sets (pg_stat_t state bits, osd_types.h).
pub mod pg_state {
    pub const ACTIVE: u64 = 1 << 1;
    pub const CLEAN: u64 = 1 << 2;
    pub const DOWN: u64 = 1 << 4;
    pub const DEGRADED: u64 = 1 << 10;
    pub const PEERING: u64 = 1 << 12;
    pub const RECOVERING: u64 = 1 << 14;
    pub const INCOMPLETE: u64 = 1 << 16;
    pub const STALE: u64 = 1 << 17;
    pub const REMAPPED: u64 = 1 << 18;
    pub const BACKFILLING: u64 = 1 << 20;
    pub const UNDERSIZED: u64 = 1 << 23;
    pub const ACTIVATING: u64 = 1 << 24;
    pub const PEERED: u64 = 1 << 25;
}

/// A state change: Ceph's state-machine path and the `pg_stat_t` state flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateChange {
    pub name: &'static str,
    pub flags: u64,
}

/// What the driver must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    Send {
        to: i32,
        msg: PeerMsg,
    },
    Persist(Persist),
    State(StateChange),
    /// Ask the monitor to record `up_thru >= epoch` for this OSD (MOSDAlive).
    NeedUpThru {
        epoch: u32,
    },
    /// Ask the monitor for a pg_temp mapping (empty: remove it) (MOSDPGTemp).
    RequestPgTemp {
        pgid: PgId,
        acting: Vec<i32>,
    },
    /// Objects to recover: for each OSD (the primary included), the objects it misses.
    StartRecovery {
        missing: BTreeMap<i32, PgMissing>,
    },
    /// Backfill these targets (scan + push every object; MOSDPGScan/MOSDPGBackfill).
    StartBackfill {
        targets: Vec<i32>,
    },
    /// While active: `osd`'s log and missing set are now known (a stray or an OSD that came back), and it may
    /// hold objects no other up OSD had; recovery retries the objects it could not find (Ceph's
    /// `search_for_missing` followed by `DoRecovery`). Pull sources are [`Pg::peer_missing`]'s peers.
    NewRecoverySource {
        osd: i32,
    },
}

/// Settings (Ceph's option names in the comments).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// `osd_pool_default_read_lease_ratio` × `osd_heartbeat_grace` (0.8 × 20 s).
    pub lease_interval: Duration,
    /// How often the primary renews leases (a quarter of the interval, as Ceph's `lease_interval / 4`).
    pub lease_renew: Duration,
    /// Fault injection for the simulator (issue 8's seeded bugs; never set it otherwise): `find_best_info`
    /// picks the complete shard with the oldest `last_update` as authoritative instead of the newest. Default off.
    pub fault_pick_worst_log: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            lease_interval: Duration::from_secs(16),
            lease_renew: Duration::from_secs(4),
            fault_pick_worst_log: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Initial,
    GetInfo,
    GetLog,
    GetMissing,
    WaitUpThru,
    WaitActingChange,
    Down,
    Incomplete,
    Activating,
    Recovering,
    Backfilling,
    Recovered,
    Clean,
    Stray,
    ReplicaActive,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Initial => "Initial",
            Phase::GetInfo => "Started/Primary/Peering/GetInfo",
            Phase::GetLog => "Started/Primary/Peering/GetLog",
            Phase::GetMissing => "Started/Primary/Peering/GetMissing",
            Phase::WaitUpThru => "Started/Primary/Peering/WaitUpThru",
            Phase::WaitActingChange => "Started/Primary/WaitActingChange",
            Phase::Down => "Started/Primary/Peering/Down",
            Phase::Incomplete => "Started/Primary/Peering/Incomplete",
            Phase::Activating => "Started/Primary/Active/Activating",
            Phase::Recovering => "Started/Primary/Active/Recovering",
            Phase::Backfilling => "Started/Primary/Active/Backfilling",
            Phase::Recovered => "Started/Primary/Active/Recovered",
            Phase::Clean => "Started/Primary/Active/Clean",
            Phase::Stray => "Started/Stray",
            Phase::ReplicaActive => "Started/ReplicaActive",
        }
    }
}

/// What the primary knows about one peer.
#[derive(Debug, Clone, Default)]
struct Peer {
    info: Option<PgInfo>,
    log: Option<PgLog>,
    missing: PgMissing,
    /// `missing` was computed from the peer's log (Ceph's `peer_missing` has an entry): it is a known source
    /// for every object it does not list.
    missing_known: bool,
    /// A FULLLOG query for its missing set is out (Ceph's `peer_missing_requested`).
    missing_requested: bool,
    activated: bool,
    backfill: bool,
    lease_ack_ub: Option<Timespan>,
}

/// One PG shard's peering state.
#[derive(Debug)]
pub struct Pg {
    pgid: SpgId,
    whoami: i32,
    cfg: Config,
    map: Option<MapView>,
    phase: Phase,
    // local durable state
    info: PgInfo,
    log: PgLog,
    missing: PgMissing,
    past_intervals: PastIntervals,
    // primary's peering state for this interval
    peers: BTreeMap<i32, Peer>,
    probing: BTreeSet<i32>,
    auth: Option<i32>,
    backfill_targets: BTreeSet<i32>,
    /// OSDs that may hold objects nobody else has (Ceph's `might_have_unfound`): every member of a past
    /// interval, and every peer that told us about itself.
    might_have_unfound: BTreeSet<i32>,
    // leases (times are the primary's monotonic clock as a span since the OSD started)
    now: Duration,
    readable_until: Duration,
    next_lease: Option<Duration>,
    outputs: VecDeque<Output>,
    /// Not yet peered since construction: the first map starts peering even within the same interval (Ceph's
    /// Initial → Reset on load).
    fresh: bool,
    /// The driver is replaying epochs older than the newest it has ([`Pg::set_catching_up`]): maps only record
    /// intervals; peering starts on the first map after it ends.
    catching_up: bool,
    /// This interval's authoritative log could not be merged into ours: we must be backfilled.
    self_needs_backfill: bool,
}

impl Pg {
    /// A PG shard with its persisted state (a new PG: `PgInfo { pgid, ..Default }` and empty log/missing).
    pub fn new(
        whoami: i32,
        pgid: SpgId,
        info: PgInfo,
        log: PgLog,
        missing: PgMissing,
        past_intervals: PastIntervals,
        cfg: Config,
    ) -> Self {
        Pg {
            pgid,
            whoami,
            cfg,
            map: None,
            phase: Phase::Initial,
            info,
            log,
            missing,
            past_intervals,
            peers: BTreeMap::new(),
            probing: BTreeSet::new(),
            auth: None,
            backfill_targets: BTreeSet::new(),
            might_have_unfound: BTreeSet::new(),
            now: Duration::ZERO,
            readable_until: Duration::ZERO,
            next_lease: None,
            outputs: VecDeque::new(),
            fresh: true,
            catching_up: false,
            self_needs_backfill: false,
        }
    }

    /// Catch-up mode: while set, [`Event::AdvanceMap`] only records the epoch (a finished interval goes into
    /// `past_intervals` and is persisted) and does not start peering; the first map after it is cleared starts
    /// peering if any replayed epoch began a new interval or changed which OSDs are up. This is how Ceph's OSD
    /// advances a PG through every epoch of a map batch (`advance_pg`: `handle_advance_map` per epoch) and
    /// activates it on the newest only (`handle_activate_map`): a restarted OSD replays every epoch it missed,
    /// so intervals that began and ended while it was down are known, without peering on epochs long gone.
    pub fn set_catching_up(&mut self, on: bool) {
        self.catching_up = on;
    }

    /// The last map this PG processed before a restart (persisted by the driver with the PG): the next
    /// [`Event::AdvanceMap`] is then compared with it, so intervals missed while down are recorded as Ceph does
    /// when it replays maps. Feed every epoch in between for exact past intervals.
    pub fn with_last_map(mut self, map: MapView) -> Self {
        self.map = Some(map);
        self
    }

    /// A split at `epoch` ends the interval this PG was in at `last` (its last map before the split; a child's
    /// is its parent's). For a peering state rebuilt from the store at the split (the parent's, or a child's
    /// copy of it), which has no last map and starts its interval at the next map: without this the interval
    /// since `same_interval_since` was never recorded, so a later primary's prior set could miss an OSD that
    /// acknowledged writes in it and activate without them (Ceph's `is_new_interval` ends the interval on a
    /// pg_num change and records it).
    pub fn close_interval_for_split(&mut self, last: &MapView, epoch: u32) {
        interval::close_interval(last, epoch, &mut self.info.history, &mut self.past_intervals);
    }

    /// The last map processed (to persist with the PG).
    pub fn last_map(&self) -> Option<&MapView> {
        self.map.as_ref()
    }

    // ---- accessors ----
    pub fn info(&self) -> &PgInfo {
        &self.info
    }
    pub fn log(&self) -> &PgLog {
        &self.log
    }
    pub fn missing(&self) -> &PgMissing {
        &self.missing
    }
    pub fn past_intervals(&self) -> &PastIntervals {
        &self.past_intervals
    }
    /// Ceph's state path, e.g. `Started/Primary/Active/Clean`.
    pub fn state_name(&self) -> &'static str {
        self.phase.name()
    }
    pub fn state_flags(&self) -> u64 {
        self.flags()
    }
    pub fn is_primary(&self) -> bool {
        self.map.as_ref().is_some_and(|m| m.acting_primary == self.whoami)
    }
    pub fn is_active(&self) -> bool {
        // `flags() & ACTIVE` without the rest of `flags` (degraded walks every peer's missing set): asked
        // several times per client op.
        let active = self.map.as_ref().is_some_and(|m| {
            matches!(
                self.phase,
                Phase::Recovered
                    | Phase::Recovering
                    | Phase::Backfilling
                    | Phase::Clean
                    | Phase::ReplicaActive
            ) && (m.acting.len() as u32) >= m.pool.min_size
        });
        debug_assert_eq!(active, self.flags() & pg_state::ACTIVE != 0);
        active
    }
    pub fn is_clean(&self) -> bool {
        self.phase == Phase::Clean
    }
    /// The OSD whose log was chosen as authoritative in this interval.
    pub fn auth_osd(&self) -> Option<i32> {
        self.auth
    }
    /// The primary's view of a peer's missing set.
    pub fn peer_missing(&self, osd: i32) -> Option<&PgMissing> {
        self.peers.get(&osd).map(|p| &p.missing)
    }
    pub fn backfill_targets(&self) -> &BTreeSet<i32> {
        &self.backfill_targets
    }
    /// Whether reads may be served now: active, and (on the primary) every acting replica acknowledged a lease
    /// that is still running.
    pub fn is_readable(&self, now: Duration) -> bool {
        self.is_active() && now < self.readable_until
    }

    /// The next output, if any.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }
    /// When the driver should deliver the next [`Event::Tick`].
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.next_lease
    }

    fn flags(&self) -> u64 {
        use pg_state::*;
        let Some(map) = &self.map else { return 0 };
        let undersized = (map.acting.len() as u32) < map.pool.size;
        let remapped = map.acting != map.up;
        let degraded =
            undersized || !self.missing.is_empty() || self.acting_peers().any(|(_, p)| !p.missing.is_empty());
        let base = match self.phase {
            Phase::Initial | Phase::Stray => 0,
            Phase::GetInfo
            | Phase::GetLog
            | Phase::GetMissing
            | Phase::WaitUpThru
            | Phase::WaitActingChange => PEERING,
            Phase::Down => DOWN | PEERING,
            Phase::Incomplete => INCOMPLETE | PEERING,
            Phase::Activating => ACTIVATING,
            Phase::Recovered => ACTIVE,
            Phase::Recovering => ACTIVE | RECOVERING,
            Phase::Backfilling => ACTIVE | BACKFILLING,
            Phase::Clean => ACTIVE | CLEAN,
            Phase::ReplicaActive => ACTIVE,
        };
        let mut f = base;
        if base & ACTIVE != 0 && (map.acting.len() as u32) < map.pool.min_size {
            f = (f & !ACTIVE) | PEERED;
        }
        if self.is_primary() && base & (ACTIVE | ACTIVATING) != 0 {
            if undersized {
                f |= UNDERSIZED;
            }
            if degraded {
                f |= DEGRADED;
            }
            if remapped {
                f |= REMAPPED;
            }
        }
        f
    }

    fn set_phase(&mut self, p: Phase) {
        if self.phase != p {
            self.phase = p;
            let flags = self.flags();
            self.outputs.push_back(Output::State(StateChange {
                name: p.name(),
                flags,
            }));
        }
    }

    fn epoch(&self) -> u32 {
        self.map.as_ref().map_or(0, |m| m.epoch)
    }
    fn send(&mut self, to: i32, msg: PeerMsg) {
        self.outputs.push_back(Output::Send { to, msg });
    }
    fn persist(&mut self, p: Persist) {
        self.outputs.push_back(Output::Persist(p));
    }
    fn persist_info(&mut self) {
        let p = Persist::Info {
            info: Box::new(self.info.clone()),
            past_intervals: self.past_intervals.clone(),
        };
        self.persist(p);
    }

    /// Feed one event.
    pub fn handle(&mut self, now: Duration, ev: Event) {
        self.now = now;
        match ev {
            Event::AdvanceMap(m) => self.advance_map(m),
            Event::Peer { from, msg } => self.peer_msg(from, msg),
            Event::ObjectRecovered { osd, oid, version } => self.recovered(osd, &oid, version),
            Event::BackfillDone { osd } => self.backfill_done(osd),
            Event::Tick => self.tick(),
        }
    }

    // ---- maps and intervals ----

    fn advance_map(&mut self, m: MapView) {
        // Ceph's `PriorSet::affected_by_map`: a down PG re-peers when some OSD came up (or went down)
        let up_changed = self.map.as_ref().is_some_and(|o| o.up_osds != m.up_osds);
        let old_up = self.map.as_ref().map(|o| o.up_osds.clone()).unwrap_or_default();
        let new_interval = match self.map.take() {
            None => {
                // No earlier map to compare with (a new PG, or a restart without `with_last_map`): the interval
                // starts here; what happened while we were away is in the peers' histories.
                let h = &mut self.info.history;
                h.same_interval_since = m.epoch;
                h.same_up_since = m.epoch;
                h.same_primary_since = m.epoch;
                if h.epoch_created == 0 {
                    h.epoch_created = m.epoch;
                    h.epoch_pool_created = m.epoch;
                }
                true
            }
            Some(old) => {
                let mut h = self.info.history.clone();
                let mut pi = self.past_intervals.clone();
                let changed = check_new_interval(&old, &m, &mut h, &mut pi);
                self.info.history = h;
                self.past_intervals = pi;
                changed
            }
        };
        self.map = Some(m);
        if self.catching_up {
            if new_interval || up_changed {
                // peer on the newest epoch; the intervals recorded so far must survive a crash meanwhile
                self.fresh = true;
            }
            if new_interval {
                self.persist_info();
            }
            return;
        }
        let fresh = std::mem::take(&mut self.fresh);
        if new_interval || fresh {
            self.start_peering_interval();
        } else if self.phase == Phase::WaitUpThru {
            self.check_up_thru();
        } else if self.phase == Phase::Down && up_changed {
            self.start_peering_interval();
        } else if up_changed && self.is_primary() && self.in_active() {
            // Ceph's Active ActMap: an OSD that came up may hold objects no other up OSD has
            self.on_up_changed(&old_up);
        }
    }

    /// Some OSD came up (or went down) within the interval while we are the active primary: peers whose missing
    /// set we know are sources again; others that may hold unfound objects are asked.
    fn on_up_changed(&mut self, old_up: &BTreeSet<i32>) {
        let Some(map) = self.map.clone() else { return };
        if !self.have_unfound() {
            return;
        }
        let back: Vec<i32> = self
            .peers
            .iter()
            .filter(|(o, p)| p.missing_known && map.is_up(**o) && !old_up.contains(o))
            .map(|(o, _)| *o)
            .collect();
        for osd in back {
            self.outputs.push_back(Output::NewRecoverySource { osd });
        }
        self.discover_all_missing();
    }

    fn start_peering_interval(&mut self) {
        self.self_needs_backfill = false;
        self.peers.clear();
        self.probing.clear();
        self.auth = None;
        self.backfill_targets.clear();
        self.might_have_unfound.clear();
        self.readable_until = Duration::ZERO;
        self.next_lease = None;
        self.persist_info();
        let Some(map) = self.map.clone() else { return };
        let in_pg = map.up.contains(&self.whoami) || map.acting.contains(&self.whoami);
        if map.acting_primary == self.whoami {
            self.start_get_info(&map);
        } else {
            self.set_phase(Phase::Stray);
            // strays and replicas introduce themselves to the new primary
            if map.acting_primary >= 0 && (in_pg || !self.info.last_update.eq(&Eversion::default())) {
                self.send_notify(map.acting_primary, self.epoch());
            }
        }
    }

    fn send_notify(&mut self, to: i32, query_epoch: u32) {
        let msg = PeerMsg::Notify(Box::new(MOSDPGNotify2 {
            spgid: self.pgid,
            notify: PgNotify {
                query_epoch,
                epoch_sent: self.epoch(),
                info: self.info.clone(),
                to: ShardId::NO_SHARD,
                from: ShardId::NO_SHARD,
                past_intervals: self.past_intervals.clone(),
            },
        }));
        self.send(to, msg);
    }

    fn query(&mut self, to: i32, qtype: i32, since: Eversion) {
        let msg = PeerMsg::Query(MOSDPGQuery2 {
            spgid: self.pgid,
            query: PgQuery {
                query_type: qtype,
                since,
                history: self.info.history.clone(),
                epoch_sent: self.epoch(),
                to: ShardId::NO_SHARD,
                from: ShardId::NO_SHARD,
            },
        });
        self.send(to, msg);
    }

    // ---- primary: GetInfo ----

    fn start_get_info(&mut self, map: &MapView) {
        self.set_phase(Phase::GetInfo);
        let ps = prior_set(map, &self.past_intervals, self.info.history.last_epoch_started);
        if ps.pg_down {
            self.set_phase(Phase::Down);
            return;
        }
        for s in ps.probe {
            if s.osd != self.whoami {
                self.probing.insert(s.osd);
                self.query(s.osd, query_type::INFO, Eversion::default());
            }
        }
        self.maybe_infos_done();
    }

    fn maybe_infos_done(&mut self) {
        if self.phase != Phase::GetInfo || !self.probing.is_empty() {
            return;
        }
        self.choose_acting_and_get_log();
    }

    /// `find_best_info` for replicated pools: among complete shards of the newest `last_epoch_started`, the newest
    /// `last_update`, then the longest log (oldest tail), then ourselves.
    fn find_best_info(&self) -> Option<i32> {
        let mut all: Vec<(i32, &PgInfo)> = vec![(self.whoami, &self.info)];
        all.extend(
            self.peers
                .iter()
                .filter_map(|(o, p)| p.info.as_ref().map(|i| (*o, i))),
        );
        let complete = |i: &PgInfo| i.last_backfill.is_max();
        if self.cfg.fault_pick_worst_log {
            // Seeded bug: the stalest complete shard wins.
            return all
                .iter()
                .filter(|(_, i)| complete(i))
                .min_by_key(|(_, i)| i.last_update)
                .map(|(o, _)| *o);
        }
        let max_les = all
            .iter()
            .filter(|(_, i)| complete(i))
            .map(|(_, i)| {
                i.last_epoch_started
                    .max(i.history.last_epoch_started.min(i.last_epoch_started))
            })
            .max()?;
        let min_lu_acceptable = all
            .iter()
            .filter(|(_, i)| complete(i) && i.last_epoch_started >= max_les)
            .map(|(_, i)| i.last_update)
            .min()?;
        let mut best: Option<(i32, &PgInfo)> = None;
        for &(o, i) in &all {
            if !complete(i) || i.last_update < min_lu_acceptable {
                continue;
            }
            let better = match best {
                None => true,
                Some((bo, b)) => {
                    if i.last_update != b.last_update {
                        i.last_update > b.last_update
                    } else if i.log_tail != b.log_tail {
                        i.log_tail < b.log_tail
                    } else {
                        o == self.whoami && bo != self.whoami
                    }
                }
            };
            if better {
                best = Some((o, i));
            }
        }
        best.map(|(o, _)| o)
    }

    fn info_of(&self, osd: i32) -> Option<&PgInfo> {
        if osd == self.whoami {
            Some(&self.info)
        } else {
            self.peers.get(&osd).and_then(|p| p.info.as_ref())
        }
    }

    /// Whether a shard can be brought up to date from the authoritative log (else it needs backfill).
    fn log_recoverable(&self, osd: i32, auth: &PgInfo) -> bool {
        if osd == self.whoami && self.self_needs_backfill {
            return false;
        }
        self.info_of(osd).is_some_and(|i| {
            i.last_backfill.is_max()
                && (i.last_update >= auth.log_tail || auth.log_tail == Eversion::default())
                && !(i.last_update == Eversion::default() && auth.log_tail > Eversion::default())
        })
    }

    /// `calc_replicated_acting`: the up set's primary if it can recover from the log, else the authoritative
    /// shard; then the up OSDs that can recover from the log (the others are backfill targets); then other
    /// complete shards until the pool's size.
    fn compute_want(&self, map: &MapView, auth: i32, auth_info: &PgInfo) -> (Vec<i32>, BTreeSet<i32>) {
        let mut want: Vec<i32> = Vec::new();
        if self.log_recoverable(map.up_primary, auth_info) && map.is_up(map.up_primary) {
            want.push(map.up_primary);
        } else {
            want.push(auth);
        }
        let mut backfill = BTreeSet::new();
        for &o in &map.up {
            if want.contains(&o) {
                continue;
            }
            if self.log_recoverable(o, auth_info) {
                want.push(o);
            } else {
                backfill.insert(o);
            }
        }
        let mut others: Vec<i32> = map.acting.clone();
        others.extend(self.peers.keys().copied());
        for o in others {
            if want.len() as u32 >= map.pool.size {
                break;
            }
            if !want.contains(&o) && map.is_up(o) && self.log_recoverable(o, auth_info) {
                want.push(o);
            }
        }
        (want, backfill)
    }

    fn choose_acting_and_get_log(&mut self) {
        let Some(map) = self.map.clone() else { return };
        let Some(auth) = self.find_best_info() else {
            self.set_phase(Phase::Incomplete);
            return;
        };
        let Some(auth_info) = self.info_of(auth).cloned() else {
            return;
        };
        let (want, backfill) = self.compute_want(&map, auth, &auth_info);
        if want != map.acting {
            // The map must change first; an empty request removes a pg_temp that is no longer needed.
            let acting = if want == map.up { Vec::new() } else { want };
            self.outputs.push_back(Output::RequestPgTemp {
                pgid: self.pgid.pgid,
                acting,
            });
            self.set_phase(Phase::WaitActingChange);
            return;
        }
        if want.first() != Some(&self.whoami) {
            self.set_phase(Phase::WaitActingChange);
            return;
        }
        // up members not acting are backfilled in this interval
        self.backfill_targets = map
            .up
            .iter()
            .copied()
            .filter(|o| !map.acting.contains(o))
            .collect();
        for o in backfill {
            self.backfill_targets.insert(o);
        }
        self.auth = Some(auth);
        self.set_phase(Phase::GetLog);
        if auth == self.whoami {
            self.got_auth_log();
        } else {
            // Ceph asks from the oldest acting last_update; the full log lets a divergent last_update always
            // be matched against shared history
            self.query(auth, query_type::FULLLOG, Eversion::default());
        }
    }

    /// Merge a log received from the authoritative shard into ours (`proc_master_log`).
    fn merge_auth_log(&mut self, olog: &PgLog, oinfo: &PgInfo) {
        let r = reconcile(olog, self.info.last_update, Some(&self.log), &self.missing);
        match r {
            Ok(r) => self.apply_local(&r, olog, oinfo),
            Err(_) => {
                // our copy is too old for the log: we need backfill ourselves; let the authoritative shard lead
                self.self_needs_backfill = true;
                self.set_phase(Phase::GetInfo);
                self.choose_acting_and_get_log();
            }
        }
    }

    fn apply_local(&mut self, r: &Reconciled, olog: &PgLog, oinfo: &PgInfo) {
        if !r.divergent.is_empty() {
            self.persist(Persist::LogRemove(
                r.divergent.iter().map(|e| e.version).collect(),
            ));
        }
        for oid in &r.remove {
            self.persist(Persist::RemoveObject(oid.clone()));
        }
        if !r.appended.is_empty() {
            self.persist(Persist::LogAppend(r.appended.clone()));
        }
        pglog::apply(&mut self.log, r);
        if olog.tail < self.log.tail {
            self.log.tail = olog.tail;
            self.info.log_tail = olog.tail;
        }
        self.missing = r.missing.clone();
        self.persist(Persist::Missing(self.missing.clone()));
        self.info.last_update = self.log.head;
        self.info.last_complete = pglog::last_complete(&self.log, &self.missing);
        self.info.last_user_version = self.info.last_user_version.max(oinfo.last_user_version);
        if oinfo.history.last_epoch_started > self.info.history.last_epoch_started {
            self.info.history.last_epoch_started = oinfo.history.last_epoch_started;
        }
        if oinfo.history.last_epoch_clean > self.info.history.last_epoch_clean {
            self.info.history.last_epoch_clean = oinfo.history.last_epoch_clean;
        }
        self.info.stats = oinfo.stats.clone();
        self.persist_info();
    }

    fn got_auth_log(&mut self) {
        self.set_phase(Phase::GetMissing);
        let Some(map) = self.map.clone() else { return };
        let auth_log = self.log.clone();
        let me = self.whoami;
        for &o in map.acting.iter().filter(|&&o| o != me) {
            let Some(pi) = self.info_of(o).cloned() else {
                continue;
            };
            let peer_log = self.peers.get(&o).and_then(|p| p.log.clone());
            let peer_missing = self.peers.get(&o).map(|p| p.missing.clone()).unwrap_or_default();
            let has_own_missing = pi.last_complete < pi.last_update;
            if has_own_missing && peer_log.is_none() {
                // its missing set is only known from its log reply
                self.probing.insert(o);
                self.query(o, query_type::LOG, pi.log_tail);
                continue;
            }
            match reconcile(&auth_log, pi.last_update, peer_log.as_ref(), &peer_missing) {
                Ok(r) => {
                    if let Some(p) = self.peers.get_mut(&o) {
                        p.missing = r.missing;
                        p.missing_known = true;
                    }
                }
                Err(NeedMore::Log) => {
                    self.probing.insert(o);
                    self.query(o, query_type::LOG, pi.log_tail);
                }
                Err(NeedMore::Backfill) => {
                    self.backfill_targets.insert(o);
                }
            }
        }
        self.maybe_missing_done();
    }

    fn maybe_missing_done(&mut self) {
        if self.phase != Phase::GetMissing || !self.probing.is_empty() {
            return;
        }
        self.set_phase(Phase::WaitUpThru);
        self.check_up_thru();
    }

    fn check_up_thru(&mut self) {
        let Some(map) = self.map.clone() else { return };
        let need = self.info.history.same_interval_since;
        if map.up_thru.get(&self.whoami).copied().unwrap_or(0) < need {
            self.outputs.push_back(Output::NeedUpThru { epoch: need });
            return;
        }
        self.activate();
    }

    // ---- activation ----

    fn activate(&mut self) {
        let Some(map) = self.map.clone() else { return };
        let epoch = map.epoch;
        self.info.last_epoch_started = epoch;
        self.info.last_interval_started = self.info.history.same_interval_since;
        self.info.history.last_epoch_started = epoch;
        self.info.history.last_interval_started = self.info.history.same_interval_since;
        self.persist_info();
        self.set_phase(Phase::Activating);
        let targets: Vec<i32> = map
            .acting
            .iter()
            .chain(self.backfill_targets.iter())
            .copied()
            .filter(|&o| o != self.whoami)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        for o in targets {
            let backfill = self.backfill_targets.contains(&o);
            let peer = self.peers.entry(o).or_default();
            peer.backfill = backfill;
            let pi = peer.info.clone().unwrap_or_default();
            let mut info = self.info.clone();
            let log = if backfill {
                // the target starts from nothing and is filled object by object
                info.last_backfill = HObject::default();
                pglog::log_since(&self.log, self.log.tail)
            } else {
                pglog::log_since(&self.log, pi.last_update.min(self.log.head))
            };
            let missing = if backfill {
                PgMissing::default()
            } else {
                peer.missing.clone()
            };
            let msg = PeerMsg::Log(Box::new(MOSDPGLog {
                epoch,
                info,
                log,
                missing,
                query_epoch: epoch,
                past_intervals: self.past_intervals.clone(),
                to: ShardId::NO_SHARD,
                from: ShardId::NO_SHARD,
                lease: Some(self.new_lease()),
            }));
            self.send(o, msg);
        }
        // objects the authoritative log needs that no acting shard has may be on a stray or an OSD of an
        // earlier interval: ask them for their missing sets now (Ceph's activate)
        self.build_might_have_unfound();
        if self.have_unfound() {
            self.discover_all_missing();
        }
        self.maybe_all_activated();
    }

    fn new_lease(&self) -> PgLease {
        let until = Timespan::from_duration(self.now + self.cfg.lease_interval);
        PgLease {
            readable_until: until,
            readable_until_ub: until,
            interval: Timespan::from_duration(self.cfg.lease_interval),
        }
    }

    fn maybe_all_activated(&mut self) {
        if self.phase != Phase::Activating {
            return;
        }
        let Some(map) = self.map.clone() else { return };
        let waiting = map
            .acting
            .iter()
            .any(|o| *o != self.whoami && !self.peers.get(o).is_some_and(|p| p.activated));
        if waiting {
            return;
        }
        // leases start once every acting replica is active
        self.recalc_readable();
        self.next_lease = Some(self.now + self.cfg.lease_renew);
        self.start_recovery_or_clean();
    }

    fn start_recovery_or_clean(&mut self) {
        let mut missing: BTreeMap<i32, PgMissing> = BTreeMap::new();
        if !self.missing.is_empty() {
            missing.insert(self.whoami, self.missing.clone());
        }
        for (o, p) in self.acting_peers() {
            if !p.missing.is_empty() && !p.backfill {
                missing.insert(o, p.missing.clone());
            }
        }
        if !missing.is_empty() {
            self.set_phase(Phase::Recovering);
            self.outputs.push_back(Output::StartRecovery { missing });
            return;
        }
        let pending: Vec<i32> = self
            .backfill_targets
            .iter()
            .copied()
            .filter(|o| self.peers.get(o).is_some_and(|p| p.backfill))
            .collect();
        if !pending.is_empty() {
            self.set_phase(Phase::Backfilling);
            self.outputs.push_back(Output::StartBackfill { targets: pending });
            return;
        }
        let Some(map) = self.map.clone() else { return };
        // with everything recovered, the best acting set may differ (a backfilled up OSD can take over from a
        // pg_temp member): ask for it, as Ceph's Recovered state re-runs choose_acting
        let info = self.info.clone();
        let (want, _) = self.compute_want(&map, self.whoami, &info);
        if want != map.acting {
            self.set_phase(Phase::Recovered);
            let acting = if want == map.up { Vec::new() } else { want };
            self.outputs.push_back(Output::RequestPgTemp {
                pgid: self.pgid.pgid,
                acting,
            });
            return;
        }
        if (map.acting.len() as u32) < map.pool.size {
            self.set_phase(Phase::Recovered); // active+undersized+degraded
            return;
        }
        self.info.history.last_epoch_clean = map.epoch;
        self.info.history.last_interval_clean = self.info.history.same_interval_since;
        self.past_intervals.trim_before(map.epoch);
        self.persist_info();
        self.set_phase(Phase::Clean);
    }

    fn recovered(&mut self, osd: i32, oid: &HObject, version: Eversion) {
        if !self.is_primary() {
            // a replica that received a push: its own missing set shrinks
            self.missing.got(oid, version);
            self.info.last_complete = pglog::last_complete(&self.log, &self.missing);
            self.persist(Persist::Missing(self.missing.clone()));
            self.persist_info();
            return;
        }
        if osd == self.whoami {
            self.missing.got(oid, version);
            self.info.last_complete = pglog::last_complete(&self.log, &self.missing);
            self.persist(Persist::Missing(self.missing.clone()));
        } else if let Some(p) = self.peers.get_mut(&osd) {
            p.missing.got(oid, version);
        }
        if self.phase == Phase::Recovering
            && self.missing.is_empty()
            && self
                .acting_peers()
                .all(|(_, p)| p.missing.is_empty() || p.backfill)
        {
            self.info.last_complete = self.info.last_update;
            self.persist_info();
            self.start_recovery_or_clean();
        }
    }

    fn backfill_done(&mut self, osd: i32) {
        let (head, tail) = (self.info.last_update, self.info.log_tail);
        if let Some(p) = self.peers.get_mut(&osd) {
            p.backfill = false;
            p.missing = PgMissing::default();
            if let Some(i) = &mut p.info {
                i.last_backfill = HObject::max_value();
                i.last_update = head;
                i.last_complete = head;
                i.log_tail = tail;
            }
        }
        if self.phase == Phase::Backfilling && self.peers.values().all(|p| !p.backfill) {
            self.start_recovery_or_clean();
        }
    }

    // ---- leases ----

    fn recalc_readable(&mut self) {
        let Some(map) = &self.map else { return };
        let mut until = self.now + self.cfg.lease_interval;
        for o in map.acting.iter().filter(|&&o| o != self.whoami) {
            match self
                .peers
                .get(o)
                .and_then(|p| p.lease_ack_ub)
                .and_then(|t| t.to_duration())
            {
                Some(t) => until = until.min(t),
                None => {
                    until = Duration::ZERO;
                }
            }
        }
        self.readable_until = until;
    }

    fn tick(&mut self) {
        let Some(at) = self.next_lease else { return };
        if self.now < at || !self.is_primary() || !self.is_active() {
            return;
        }
        let Some(map) = self.map.clone() else { return };
        let lease = self.new_lease();
        let me = self.whoami;
        for o in map.acting.iter().copied().filter(|&o| o != me) {
            let msg = PeerMsg::Lease(MOSDPGLease {
                epoch: map.epoch,
                spgid: self.pgid,
                lease,
            });
            self.send(o, msg);
        }
        if map.acting.len() == 1 {
            self.recalc_readable();
        }
        self.next_lease = Some(self.now + self.cfg.lease_renew);
    }

    // ---- messages ----

    fn stale(&self, epoch_sent: u32) -> bool {
        epoch_sent < self.info.history.same_interval_since
    }

    fn peer_msg(&mut self, from: i32, msg: PeerMsg) {
        match msg {
            PeerMsg::Query(q) => self.handle_query(from, &q.query),
            PeerMsg::Notify(n) => {
                if self.stale(n.notify.epoch_sent) || !self.is_primary() {
                    return;
                }
                if self.phase != Phase::GetInfo {
                    // Ceph's Primary/Active MNotifyRec (`proc_replica_info`): a stray that introduces itself
                    // after GetInfo may hold objects nobody else has; remember it, and while active look for
                    // unfound objects on it. A known peer's notify changes nothing (a second notify must not
                    // end a later phase's wait).
                    if self.peers.get(&from).is_some_and(|p| p.info.is_some()) {
                        return;
                    }
                    self.peers.entry(from).or_default().info = Some(n.notify.info);
                    self.might_have_unfound.insert(from);
                    if self.in_active() && self.have_unfound() {
                        self.discover_all_missing();
                    }
                    return;
                }
                self.peers.entry(from).or_default().info = Some(n.notify.info);
                self.probing.remove(&from);
                self.maybe_infos_done();
            }
            PeerMsg::Log(l) => self.handle_log(from, *l),
            PeerMsg::Info(i) => {
                if self.stale(i.epoch_sent) {
                    return;
                }
                if self.is_primary() {
                    // a replica acknowledges activation
                    if i.info.last_epoch_started >= self.info.last_epoch_started
                        && let Some(p) = self.peers.get_mut(&from)
                    {
                        p.info = Some(i.info);
                        p.activated = true;
                        if let Some(ack) = i.lease_ack {
                            p.lease_ack_ub = Some(ack.readable_until_ub);
                        }
                    }
                    self.maybe_all_activated();
                } else {
                    // the primary activates us without log changes
                    self.info.history = i.info.history.clone();
                    self.info.last_epoch_started = i.info.last_epoch_started;
                    self.replica_activated(from, i.lease);
                }
            }
            PeerMsg::Lease(l) => {
                if self.stale(l.epoch) || self.is_primary() {
                    return;
                }
                if let Some(d) = l.lease.readable_until.to_duration() {
                    self.readable_until = d;
                }
                let msg = PeerMsg::LeaseAck(MOSDPGLeaseAck {
                    epoch: self.epoch(),
                    spgid: self.pgid,
                    lease_ack: PgLeaseAck {
                        readable_until_ub: l.lease.readable_until_ub,
                    },
                });
                self.send(from, msg);
            }
            PeerMsg::LeaseAck(a) => {
                if self.stale(a.epoch) || !self.is_primary() {
                    return;
                }
                if let Some(p) = self.peers.get_mut(&from) {
                    p.lease_ack_ub = Some(a.lease_ack.readable_until_ub);
                }
                self.recalc_readable();
            }
        }
    }

    fn handle_query(&mut self, from: i32, q: &PgQuery) {
        if self.stale(q.epoch_sent) && q.epoch_sent < self.info.history.same_primary_since {
            return;
        }
        match q.query_type {
            query_type::INFO => self.send_notify(from, q.epoch_sent),
            query_type::LOG | query_type::FULLLOG => {
                let since = if q.query_type == query_type::FULLLOG {
                    self.log.tail
                } else {
                    q.since
                };
                let msg = PeerMsg::Log(Box::new(MOSDPGLog {
                    epoch: self.epoch(),
                    info: self.info.clone(),
                    log: pglog::log_since(&self.log, since),
                    missing: self.missing.clone(),
                    query_epoch: q.epoch_sent,
                    past_intervals: self.past_intervals.clone(),
                    to: ShardId::NO_SHARD,
                    from: ShardId::NO_SHARD,
                    lease: None,
                }));
                self.send(from, msg);
            }
            _ => {}
        }
    }

    fn handle_log(&mut self, from: i32, l: MOSDPGLog) {
        if self.stale(l.query_epoch) {
            return;
        }
        if self.is_primary() {
            match self.phase {
                Phase::GetLog if Some(from) == self.auth => {
                    self.merge_auth_log(&l.log, &l.info);
                    if self.phase == Phase::GetLog {
                        self.got_auth_log();
                    }
                }
                Phase::GetMissing => {
                    if !self.proc_replica_log(from, l) {
                        self.backfill_targets.insert(from);
                    }
                    self.probing.remove(&from);
                    self.maybe_missing_done();
                }
                Phase::Activating
                | Phase::Recovering
                | Phase::Backfilling
                | Phase::Recovered
                | Phase::Clean
                    if self.peers.get(&from).is_some_and(|p| p.missing_requested) =>
                {
                    // Ceph's Active MLogRec: a peer we asked for its missing set (it may hold unfound objects)
                    if let Some(p) = self.peers.get_mut(&from) {
                        p.missing_requested = false;
                    }
                    if self.proc_replica_log(from, l) {
                        self.outputs.push_back(Output::NewRecoverySource { osd: from });
                    }
                }
                _ => {}
            }
            return;
        }
        // a replica activated by its primary: adopt the authoritative log
        let backfill = !l.info.last_backfill.is_max();
        if backfill {
            // everything local is replaced object by object; start from the primary's log
            self.log = l.log.clone();
            self.missing = PgMissing::default();
            self.info.last_update = l.log.head;
            self.info.last_complete = l.log.head;
            self.info.log_tail = l.log.tail;
            self.info.last_backfill = HObject::default();
            self.persist(Persist::LogAppend(l.log.log.clone()));
        } else {
            match reconcile(&l.log, self.info.last_update, Some(&self.log), &self.missing) {
                Ok(r) => self.apply_local(&r, &l.log, &l.info),
                Err(_) => return,
            }
            // the primary's view of our missing set wins (it may know of objects our log does not show)
            for (oid, item) in &l.missing.missing {
                self.missing
                    .missing
                    .entry(oid.clone())
                    .or_insert_with(|| item.clone());
            }
            self.info.last_complete = pglog::last_complete(&self.log, &self.missing);
        }
        self.info.history = l.info.history.clone();
        self.info.last_epoch_started = l.info.last_epoch_started;
        self.info.last_interval_started = l.info.last_interval_started;
        self.replica_activated(from, l.lease);
    }

    /// `proc_replica_log`: a peer's log and missing set against our (authoritative) log give the objects it
    /// lacks. False when its log cannot be reconciled with ours (it needs backfill and is no source).
    fn proc_replica_log(&mut self, from: i32, l: MOSDPGLog) -> bool {
        let r = reconcile(&self.log, l.info.last_update, Some(&l.log), &l.missing);
        let p = self.peers.entry(from).or_default();
        let mut info = l.info;
        if let Ok(r) = &r
            && !r.divergent.is_empty()
        {
            // the peer's usable history ends where it diverged, so its activation log starts there
            info.last_update = r.common;
            info.last_complete = info.last_complete.min(r.common);
        }
        p.info = Some(info);
        p.log = Some(l.log);
        match r {
            Ok(r) => {
                p.missing = r.missing;
                p.missing_known = true;
                true
            }
            Err(_) => false,
        }
    }

    // ---- unfound objects (primary, active) ----

    /// The peers of the acting set (recovery targets; strays are only sources).
    fn acting_peers(&self) -> impl Iterator<Item = (i32, &Peer)> {
        let acting = self.map.as_ref().map(|m| m.acting.as_slice()).unwrap_or_default();
        self.peers
            .iter()
            .filter(move |(o, _)| acting.contains(o))
            .map(|(o, p)| (*o, p))
    }

    /// In Ceph's `Started/Primary/Active` (activating included).
    fn in_active(&self) -> bool {
        matches!(
            self.phase,
            Phase::Activating | Phase::Recovering | Phase::Backfilling | Phase::Recovered | Phase::Clean
        )
    }

    /// Whether some object the primary misses has no known up source: no up peer whose missing set is known
    /// holds it at the needed version (Ceph's `have_unfound` over `missing_loc`).
    fn have_unfound(&self) -> bool {
        let Some(map) = &self.map else { return false };
        self.missing.missing.iter().any(|(oid, item)| {
            !self.peers.iter().any(|(o, p)| {
                map.is_up(*o)
                    && p.missing_known
                    && !self.backfill_targets.contains(o)
                    && !p.missing.is_missing(oid)
                    && p.info
                        .as_ref()
                        .is_some_and(|i| i.last_backfill.is_max() && i.last_update >= item.need)
            })
        })
    }

    /// `discover_all_missing`: ask every up OSD that may hold unfound objects, and whose missing set we do not
    /// know yet, for its full log (the answer is handled in `handle_log`).
    fn discover_all_missing(&mut self) {
        let Some(map) = self.map.clone() else { return };
        let targets: Vec<i32> = self
            .might_have_unfound
            .iter()
            .copied()
            .filter(|&o| o != self.whoami && map.is_up(o))
            .filter(|o| {
                self.peers.get(o).is_none_or(|p| {
                    // an empty peer holds nothing
                    let empty = p
                        .info
                        .as_ref()
                        .is_some_and(|i| i.last_update == Eversion::default());
                    !(p.missing_known || p.missing_requested || empty)
                })
            })
            .collect();
        for o in targets {
            self.peers.entry(o).or_default().missing_requested = true;
            self.query(o, query_type::FULLLOG, Eversion::default());
        }
    }

    /// At activation (`build_might_have_unfound`): every OSD of a past interval and every peer heard from.
    fn build_might_have_unfound(&mut self) {
        let mut m: BTreeSet<i32> = self
            .past_intervals
            .all_participants()
            .iter()
            .map(|s| s.osd)
            .collect();
        m.extend(self.peers.keys().copied());
        m.remove(&self.whoami);
        self.might_have_unfound = m;
    }

    fn replica_activated(&mut self, primary: i32, lease: Option<PgLease>) {
        self.persist_info();
        if let Some(d) = lease.and_then(|l| l.readable_until.to_duration()) {
            self.readable_until = d;
        }
        self.set_phase(Phase::ReplicaActive);
        let msg = PeerMsg::Info(Box::new(MOSDPGInfo2 {
            spgid: self.pgid,
            epoch_sent: self.epoch(),
            min_epoch: self.epoch(),
            info: self.info.clone(),
            lease: None,
            lease_ack: lease.map(|l| PgLeaseAck {
                readable_until_ub: l.readable_until_ub,
            }),
        }));
        self.send(primary, msg);
    }

    /// The replication path appends entries (the primary as it writes, a replica as it applies MOSDRepOp):
    /// `last_update` follows, and `last_complete` too while nothing is missing.
    pub fn append_log(&mut self, entries: &[PgLogEntry]) {
        if entries.is_empty() {
            return;
        }
        self.append_log_persisted(entries.to_vec());
        self.persist(Persist::LogAppend(entries.to_vec()));
        self.persist_info();
    }

    /// [`Pg::append_log`] for entries the caller has already persisted together with the info they update (the
    /// op engine writes them with the write itself): the same state change without the persist outputs, which
    /// such a caller would only drop (they cost a copy of the entries, `pg_info_t` and the past intervals on
    /// every write).
    pub fn append_log_persisted(&mut self, entries: Vec<PgLogEntry>) {
        let Some(last) = entries.last() else { return };
        let (version, user_version) = (last.version, last.user_version);
        self.log.log.extend(entries);
        self.log.head = version;
        let caught_up = self.info.last_complete == self.info.last_update && self.missing.is_empty();
        self.info.last_update = version;
        self.info.last_user_version = self.info.last_user_version.max(user_version);
        if caught_up {
            self.info.last_complete = version;
        }
    }

    /// Trim the log up to `to` (MOSDPGTrim, or the primary's own `calc_trim_to`).
    pub fn trim_log(&mut self, to: Eversion) {
        if let Some(removed) = self.trim_log_persisted(to) {
            self.persist(Persist::LogRemove(removed));
            self.persist_info();
        }
    }

    /// [`Pg::trim_log`] for a trim the caller has already persisted (as [`Pg::append_log_persisted`]); the
    /// versions removed, None if nothing was.
    pub fn trim_log_persisted(&mut self, to: Eversion) -> Option<Vec<Eversion>> {
        let to = to.min(self.info.last_complete);
        if to <= self.log.tail {
            return None;
        }
        let removed: Vec<Eversion> = self
            .log
            .log
            .iter()
            .map(|e| e.version)
            .filter(|v| *v <= to)
            .collect();
        self.log.log.retain(|e| e.version > to);
        self.log.tail = to;
        self.info.log_tail = to;
        Some(removed)
    }

    /// Called by the driver on the backfill target as objects arrive in order: the new `last_backfill`.
    pub fn set_last_backfill(&mut self, oid: HObject) {
        self.info.last_backfill = oid;
        self.persist_info();
    }
}
