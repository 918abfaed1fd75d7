// SPDX-License-Identifier: LGPL-3.0-or-later
//! The sans-IO OSD core: everything one core (one ferrostore shard) of one OSD does for the PGs placed on it.
//!
//! Both drivers — the real daemon (ferro-osd on the io_uring reactor) and the deterministic simulator — own one
//! [`OsdShard`] per ferrostore shard and drive it the same way, like quinn-proto's `Connection`:
//!
//! * [`OsdShard::handle`] with the time (monotonic since the OSD started, plus the wall clock for object
//!   mtimes and watch timers) and an [`Input`]: every OSDMap epoch in order, client ops, peer messages from
//!   other OSDs (cluster network), connection resets, store durability events and timer ticks;
//! * then drain [`OsdShard::poll_output`]: client replies and notifies, messages for other OSDs, and requests
//!   for the monitor (up_thru, pg_temp, PG created);
//! * [`OsdShard::poll_timeout`] says when the next [`Input::Tick`] is due;
//! * the driver polls/waits the store through [`OsdShard::store_mut`] and feeds each
//!   `ferrostore::Event::Durable(seq)` back as [`Input::Durable`] and each `ferrostore::Event::Prefetched(t)`
//!   as [`Input::Prefetched`] (client reads wait for their data without blocking the core: src/prefetch.rs);
//!   it keeps polling while `Store::unacked() > 0 || Store::has_background_work()`.
//!
//! The core never blocks, never reads a clock and never touches a socket or a file: the same inputs give the
//! same outputs, which is what lets the simulator replay a whole cluster from a seed.
//!
//! What a PG does (Ceph's semantics): it is created (or loaded after a restart) when a map places it on this
//! OSD and this shard ([`PgRouter`]: a PG lives on one shard for its whole life, split children with their
//! parent); `peering` decides primary/replica, activation, recovery and backfill;
//! client ops wait (never fail) while the PG is not active or below `min_size`; the primary executes an op
//! (`pg` crate), applies the transaction locally and sends it as `MOSDRepOp` to every acting replica; the
//! client reply leaves only when the local transaction is durable and every acting replica answered
//! `MOSDRepOpReply` ONDISK.

mod backfill;
mod glue;
mod history;
mod mapstore;
mod meta;
mod pgstate;
mod prefetch;
mod recovery;
mod repl;
mod route;
mod shard;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use ceph_msgs::osd_op::{MOSDOp, MOSDOpReply, MWatchNotify};
use denc::{EntityAddr, EntityNameT, Eversion, PgId, SpgId, Utime};
use ferrostore::{Device, Store};
use osdmap::OsdMap;
use pg::{ConnId, OsdCap, PgStats};

pub use backfill::Backfill;
pub use mapstore::{MapStoreError, load_newest_map};
pub use recovery::Recovery;
pub use route::{PgRouter, RouteConflict, RouteDelta};

use crate::pgstate::PgState;

/// The features we encode peer (OSD↔OSD) messages with: Pacific's full set, as a 16.2 ceph-osd announces.
pub const PEER_FEATURES: u64 = denc::CEPH_FEATURES_ALL;

/// Ops waiting for a map epoch we do not have yet are bounded (Ceph bounds its waiting_for_map by memory;
/// past this the oldest are dropped and the clients resend after their connection resets).
pub const MAX_WAITING_FOR_MAP: usize = 4096;
/// Ops queued on one PG while it is not active (peering, below min_size) are bounded the same way.
pub const MAX_WAITING_PER_PG: usize = 4096;

/// Settings of one shard (Ceph's option names in the comments).
#[derive(Debug, Clone)]
pub struct ShardConfig {
    /// This OSD's id (`osd.N`).
    pub whoami: i32,
    /// Which ferrostore shard this core owns, of `shards` (fixed at mkfs).
    pub shard: u32,
    pub shards: u32,
    /// The op engine's settings (`pg::PgConfig::osd_id` is overwritten with `whoami`).
    pub pg: pg::PgConfig,
    /// Peering's settings (read leases).
    pub peering: peering::Config,
    /// `osd_recovery_max_active` (3 for SSDs in Pacific: `osd_recovery_max_active_ssd`): recovery ops in
    /// flight per OSD shard.
    pub osd_recovery_max_active: u32,
    /// `osd_max_backfills` (1): backfills a shard drives at once.
    pub osd_max_backfills: u32,
    /// `osd_recovery_max_chunk` (8 MiB): bytes per push.
    pub osd_recovery_max_chunk: u64,
    /// Features to encode peer messages with (an OSD's cluster connection features; [`PEER_FEATURES`]).
    pub peer_features: u64,
}

impl ShardConfig {
    /// Defaults for `osd.<whoami>`, shard `shard` of `shards`.
    pub fn new(whoami: i32, shard: u32, shards: u32) -> Self {
        ShardConfig {
            whoami,
            shard,
            shards: shards.max(1),
            pg: pg::PgConfig {
                osd_id: whoami,
                ..pg::PgConfig::default()
            },
            peering: peering::Config::default(),
            osd_recovery_max_active: 3,
            osd_max_backfills: 1,
            osd_recovery_max_chunk: 8 << 20,
            peer_features: PEER_FEATURES,
        }
    }
}

/// A client op and what the PG needs to know about its sender (as ferro-osd's worker receives it today).
#[derive(Debug, Clone)]
pub struct ClientOp {
    /// The connection it came on (replies go back there).
    pub conn: ConnId,
    pub msg: MOSDOp,
    /// The sender's entity name (reqids and watchers are keyed by it).
    pub client: EntityNameT,
    /// The address the client announced (reported by list-watchers and lock owners).
    pub client_addr: EntityAddr,
    /// The client's OSD caps (from its cephx ticket), parsed once per connection.
    pub caps: Arc<OsdCap>,
    /// Features of the client's connection (reply encodings depend on them).
    pub features: u64,
}

/// What the driver feeds in.
#[derive(Debug)]
pub enum Input {
    /// An OSDMap epoch. Feed every epoch in order; the driver may skip epochs it never had (the core then sees
    /// a jump, as a restarted ceph-osd does when the monitor has trimmed the maps it missed). After a restart
    /// start with the map [`load_newest_map`] found on the store (the shard ignores older ones), then every
    /// later epoch: the shard stores each map it handles (src/mapstore.rs).
    Map(Arc<OsdMap>),
    /// The driver is about to feed every epoch up to this one (a restart catching up, or a monitor message with
    /// several epochs): PGs record the intervals of the older epochs without peering on them, and peer on this
    /// epoch (Ceph's `advance_pg` through each epoch, then `handle_activate_map`).
    MapsPending(u32),
    /// The route table for the next [`Input::Map`] (its epoch): which shard of this OSD holds each PG. A driver
    /// with more than one shard per OSD computes one [`PgRouter`] per OSD and feeds it before every map;
    /// without it (one shard) the shard keeps its own.
    Routes(Arc<PgRouter>),
    /// A client op (MOSDOp) for a PG of this shard ([`PgRouter::route`]).
    ClientOp(Box<ClientOp>),
    /// A client connection closed (its watches start timing out).
    ClientReset(ConnId),
    /// A message from `osd.<from>` on the cluster network for a PG of this shard ([`route_peer_message`],
    /// [`PgRouter::route`]).
    Peer { from: i32, msg: ceph_msgs::Message },
    /// The cluster connection to `osd.<osd>` broke: messages not acknowledged by it are resent (peering
    /// re-queries as Ceph does; replicated writes waiting on it are resent on the new connection).
    PeerReset(i32),
    /// `ferrostore::Event::Durable(seq)` of this shard's store (all transactions up to `seq` are durable).
    Durable(u64),
    /// `ferrostore::Event::Prefetched(token)` of this shard's store: the data a parked client read waits for is
    /// in memory (src/prefetch.rs). Every input also picks up completed prefetches, but a driver must feed this
    /// one (or some input) after the store reported it, or the read waits.
    Prefetched(u64),
    /// The time from [`OsdShard::poll_timeout`] has come (or any time: ticks are idempotent).
    Tick,
}

/// What the driver must do.
#[derive(Debug)]
pub enum Output {
    /// Send an op reply on a client connection (encode it with that connection's features).
    ClientReply { conn: ConnId, reply: Box<MOSDOpReply> },
    /// Send a watch-notify message on a client connection. Notifies come before replies produced by the same
    /// input (Ceph runs an op's effects before a read's reply).
    ClientNotify { conn: ConnId, msg: Box<MWatchNotify> },
    /// Send a message to `osd.<osd>` on the cluster network (already encoded with `peer_features`).
    ToOsd { osd: i32, msg: ceph_msgs::Message },
    /// Ask the monitor to record `up_thru >= epoch` for this OSD (MOSDAlive). Core 0 of the daemon sends it;
    /// several shards may ask for the same epoch.
    NeedUpThru { epoch: u32 },
    /// Ask the monitor for a pg_temp mapping (MOSDPGTemp); an empty `acting` removes it.
    PgTemp { pgid: PgId, acting: Vec<i32> },
    /// A PG this OSD created as primary (MOSDPGCreated to the monitor).
    PgCreated { pgid: PgId },
    /// An op for a PG this shard does not serve at an epoch at which it should have been sent elsewhere:
    /// Ceph drops it (the client resends on its newer map). The driver logs/counts it.
    Misdirected { conn: ConnId, msg: Box<MOSDOp> },
    /// A diagnostic line for the driver's log (malformed peer messages, store errors, PG life-cycle events).
    Log(String),
}

/// A PG's state for MPGStats / MMgrReport (`pg_stat_t`) and the admin socket.
#[derive(Debug, Clone, PartialEq)]
pub struct PgReport {
    pub spgid: SpgId,
    /// Whether this OSD is the acting primary (only primaries report a PG to the mgr).
    pub primary: bool,
    /// Ceph's `PG_STATE_*` flags (`pg_stat_t::state`).
    pub state: u64,
    /// Ceph's state-machine path, e.g. `Started/Primary/Active/Clean`.
    pub state_name: &'static str,
    pub up: Vec<i32>,
    pub up_primary: i32,
    pub acting: Vec<i32>,
    pub acting_primary: i32,
    /// Object/byte counters and log sizes of the local copy.
    pub stats: PgStats,
    /// `pg_info_t::last_update` / `last_complete` as peering tracks them.
    pub last_update: Eversion,
    pub last_complete: Eversion,
    /// `pg_history_t`: epoch created, same interval since, last epoch started/clean.
    pub created: u32,
    pub same_interval_since: u32,
    pub last_epoch_started: u32,
    pub last_epoch_clean: u32,
    /// The epoch the PG's current mapping started (`pg_stat_t::mapping_epoch`).
    pub mapping_epoch: u32,
    /// Objects missing on some acting shard (primary's view) and object copies not on their up OSD.
    pub num_objects_missing: u64,
    pub num_objects_degraded: u64,
    pub num_objects_misplaced: u64,
    /// Objects missing on the primary that no up OSD could provide.
    pub num_objects_unfound: u64,
    /// Client ops queued on the PG (not active, below min_size) and replicated writes in flight.
    pub ops_waiting: usize,
    pub repops_in_flight: usize,
}

/// A summary of the shard for the admin socket (`status`) and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardStatus {
    /// The newest map epoch processed.
    pub epoch: u32,
    pub num_pgs: usize,
    pub num_primary: usize,
    /// PG count by Ceph's state string (`active+clean`, `peering`, ...).
    pub by_state: BTreeMap<String, usize>,
    /// Ops waiting for a newer map, ops queued on inactive PGs, replicated writes in flight.
    pub ops_waiting_for_map: usize,
    pub ops_waiting_for_active: usize,
    pub repops_in_flight: usize,
    /// Malformed or unexpected peer messages dropped, and store/engine errors seen.
    pub peer_msgs_dropped: u64,
    pub errors: u64,
    /// Replicated writes sent again to a replica that left them unanswered too long (a loss no connection
    /// reset reported; 0 in a healthy cluster).
    pub repops_resent_overdue: u64,
    /// PGs holding one of the shard's `osd_max_backfills` slots now, and the most ever at once.
    pub backfills_active: usize,
    pub backfills_max_seen: usize,
}

/// The PG a peer message is about (MOSDRepOp(Reply), peering, push/pull/scan/backfill, trim, ...), for routing
/// with [`PgRouter::route`]. `None` for messages that are not about one PG or that do not decode (the driver drops
/// those; a message that decodes here may still be rejected by the core).
pub fn route_peer_message(msg: &ceph_msgs::Message) -> Option<SpgId> {
    repl::route(msg)
}

/// The map epoch a peer message was sent at, for the messages that can open a PG here (MOSDRepOp and the
/// peering messages): a driver whose route table is older waits for the newer table before routing it. `None`
/// for the other messages (they belong to an interval the PG is already routed in).
pub fn peer_message_epoch(msg: &ceph_msgs::Message) -> Option<u32> {
    if msg.msg_type == ceph_msgs::osd_rep::rep_msg::REPOP {
        return repl::epoch_prefix(msg);
    }
    if repl::kind(msg.msg_type) == repl::Kind::Peering {
        return peering::PeerMsg::from_message(msg)
            .ok()
            .flatten()
            .map(|p| repl::peer_msg_epoch(&p));
    }
    None
}

/// Failures inside the core (logged as [`Output::Log`] and counted; never a panic, never shown to clients).
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    #[error("decoding message type {msg_type} from osd.{from}: {err}")]
    Decode { from: i32, msg_type: u16, err: String },
    #[error("store: {0}")]
    Store(#[from] ferrostore::StoreError),
    #[error("pg: {0}")]
    Pg(#[from] pg::PgError),
    #[error("{0}")]
    Other(String),
}

/// What recovery and backfill (src/recovery.rs, src/backfill.rs) get to work with for one PG: the store, the
/// op engine's PG, peering's view, and where to put what they produce.
pub struct RecoveryCtx<'a, D: Device> {
    pub whoami: i32,
    pub spgid: SpgId,
    /// The current map epoch and the epoch this PG's interval started (messages carry them).
    pub epoch: u32,
    pub same_interval_since: u32,
    pub now: Duration,
    pub cfg: &'a ShardConfig,
    pub store: &'a mut Store<D>,
    pub pg: &'a mut pg::Pg,
    pub peering: &'a peering::Pg,
    /// Where recovery/backfill put their effects (the core turns them into outputs and peering events).
    pub out: &'a mut Vec<RecoveryEvent>,
}

/// Effects of recovery/backfill work.
#[derive(Debug)]
pub enum RecoveryEvent {
    /// Send a message to another OSD (MOSDPGPush, MOSDPGPull, MOSDPGPushReply, MOSDPGScan, ...).
    Send { to: i32, msg: ceph_msgs::Message },
    /// An object is recovered on `osd` at `version` (peering's `Event::ObjectRecovered`). On a replica,
    /// `osd` is the replica itself (its missing set shrinks).
    Recovered {
        osd: i32,
        oid: denc::HObject,
        version: Eversion,
    },
    /// Backfill of `osd` finished (peering's `Event::BackfillDone`).
    BackfillDone { osd: i32 },
    /// A backfill target's progress (`peering::Pg::set_last_backfill` on the target).
    LastBackfill(denc::HObject),
    /// Recovery is waiting for store transaction `seq` to become durable before it may continue (the core
    /// calls `on_durable` on the recovery/backfill state with every durable sequence number anyway).
    WaitDurable(u64),
    /// A diagnostic line.
    Log(String),
}

/// Everything one core (one ferrostore shard) of one OSD does for the PGs placed on it.
pub struct OsdShard<D: Device> {
    cfg: ShardConfig,
    store: Store<D>,
    /// The newest map processed.
    map: Option<Arc<OsdMap>>,
    pgs: BTreeMap<SpgId, PgState>,
    /// The PG of each store collection a prefetch completed for (parsing `1.7_head` cost ~1,200 instructions
    /// per read); a pure function of the name, so never stale. Cleared when it reaches `COLL_PGS_MAX`.
    coll_pgs: ferrostore::hash::SeededMap<ferrostore::CollectionId, Option<SpgId>>,
    /// `handle_prefetched`'s list of completed prefetches, kept with its capacity between calls.
    prefetched: Vec<(u64, ferrostore::CollectionId)>,
    /// PG collections found on the store at start that no map has placed yet (loaded when one does).
    on_disk: BTreeSet<SpgId>,
    /// Which shard holds each PG ([`Input::Routes`], or kept here when the driver gives none); `own_routes`:
    /// this shard computes it itself from the maps.
    routes: Arc<PgRouter>,
    own_routes: bool,
    /// Each PG's history from the maps this shard has seen: its last mapping with an acting set and the
    /// intervals before it that may have gone read-write (the history a PG newly placed here starts from: see
    /// `shard::OsdShard::open_pg`).
    last_placed: BTreeMap<SpgId, history::Placed>,
    /// `last_placed` is persisted (src/history.rs): whether its store object exists yet.
    history_created: bool,
    /// The newest map handled is persisted (src/mapstore.rs): whether its store object exists yet, and the
    /// epoch found on the store at start (older maps are ignored: the PGs are past them).
    superblock_created: bool,
    stored_epoch: u32,
    /// [`Input::MapsPending`]: epochs before this one are replayed without peering.
    catch_up_to: u32,
    /// Ops whose epoch is newer than our map (Ceph's waiting_for_map), in arrival order.
    waiting_for_map: VecDeque<Box<ClientOp>>,
    /// Replicated writes from an epoch newer than our map (their interval may not have started here).
    peer_waiting_for_map: VecDeque<(i32, ceph_msgs::Message)>,
    outputs: VecDeque<Output>,
    now: Duration,
    wall: Utime,
    peer_msgs_dropped: u64,
    errors: u64,
    repops_resent_overdue: u64,
    /// `osd_max_backfills` slots of this shard, PGs just granted one, and the most ever granted at once.
    reserver: backfill::Reserver,
    granted: Vec<SpgId>,
    max_backfills_seen: usize,
}

impl<D: Device> OsdShard<D> {
    /// A shard core on a mounted store. Finds the PG collections already on it (a restart); they are loaded
    /// when the first map places them here.
    pub fn new(mut cfg: ShardConfig, mut store: Store<D>) -> Self {
        cfg.pg.osd_id = cfg.whoami;
        let mut on_disk = BTreeSet::new();
        let mut outputs = VecDeque::new();
        let mut errors = 0;
        let mut routes = PgRouter::new(cfg.whoami, cfg.shards);
        match stored_pgs(&mut store) {
            Ok(pgs) => {
                routes.add_stored(cfg.shard, pgs.iter().map(|(s, bits)| (s.pgid, *bits)));
                on_disk.extend(pgs.into_iter().map(|(s, _)| s));
            }
            Err(e) => {
                errors += 1;
                outputs.push_back(Output::Log(format!("listing collections: {e}")));
            }
        }
        // the placements remembered before a restart (a PG newly placed here starts from its real history)
        let (last_placed, history_created) = match history::load(&mut store) {
            Ok((h, bad)) => {
                if bad > 0 {
                    errors += 1;
                    outputs.push_back(Output::Log(format!(
                        "placement history: {bad} records unreadable"
                    )));
                }
                let created = !h.is_empty();
                (h, created)
            }
            Err(e) => {
                errors += 1;
                outputs.push_back(Output::Log(format!("loading the placement history: {e}")));
                (BTreeMap::new(), false)
            }
        };
        // the newest map handled before a restart: maps older than it are not fed again
        let stored_epoch = match mapstore::load_newest_map(&mut store) {
            Ok(m) => m.map_or(0, |m| m.epoch),
            Err(e) => {
                errors += 1;
                outputs.push_back(Output::Log(format!("loading the newest map: {e}")));
                0
            }
        };
        OsdShard {
            store,
            coll_pgs: Default::default(),
            prefetched: Vec::new(),
            map: None,
            superblock_created: stored_epoch > 0,
            stored_epoch,
            catch_up_to: 0,
            pgs: BTreeMap::new(),
            on_disk,
            routes: Arc::new(routes),
            own_routes: true,
            last_placed,
            history_created,
            waiting_for_map: VecDeque::new(),
            peer_waiting_for_map: VecDeque::new(),
            outputs,
            now: Duration::ZERO,
            wall: Utime::default(),
            peer_msgs_dropped: 0,
            errors,
            repops_resent_overdue: 0,
            reserver: backfill::Reserver::new(cfg.osd_max_backfills as usize),
            granted: Vec::new(),
            max_backfills_seen: 0,
            cfg,
        }
    }

    /// The shard's settings.
    pub fn config(&self) -> &ShardConfig {
        &self.cfg
    }

    /// The newest map epoch processed (0 before the first).
    pub fn epoch(&self) -> u32 {
        self.map.as_ref().map_or(0, |m| m.epoch)
    }

    /// Feed one input. `now` is monotonic time since the OSD started (leases, timers); `wall` the wall clock
    /// (object mtimes, watch timeouts).
    pub fn handle(&mut self, now: Duration, wall: Utime, input: Input) {
        self.now = self.now.max(now);
        self.wall = wall;
        match input {
            Input::Routes(r) => self.handle_routes(r),
            Input::Map(m) => self.handle_map(m),
            Input::MapsPending(e) => self.catch_up_to = self.catch_up_to.max(e),
            Input::ClientOp(op) => self.handle_client_op(op),
            Input::ClientReset(conn) => self.handle_client_reset(conn),
            Input::Peer { from, msg } => self.handle_peer(from, msg),
            Input::PeerReset(osd) => self.handle_peer_reset(osd),
            Input::Durable(seq) => self.handle_durable(seq),
            Input::Prefetched(_) => {}
            Input::Tick => self.handle_tick(),
        }
        if self.store.has_prefetched() {
            self.handle_prefetched();
        }
        self.start_granted_backfills();
    }

    /// The next output, if any.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// When the next [`Input::Tick`] is due (monotonic, as `now` in [`OsdShard::handle`]).
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.pgs
            .values()
            .filter_map(|p| p.poll_timeout(self.now, self.wall))
            .min()
    }

    /// The store: the driver polls/waits it (`poll`, `wait`, `unacked`) and feeds `Durable` events back.
    pub fn store_mut(&mut self) -> &mut Store<D> {
        &mut self.store
    }

    /// The store back (the simulator's crash/remount; the daemon's shutdown after draining `unacked`).
    pub fn into_store(self) -> Store<D> {
        self.store
    }

    /// One report per PG held by this shard (primary or replica).
    pub fn pg_stats(&self) -> Vec<PgReport> {
        self.pgs.values().map(|p| p.report(self.cfg.whoami)).collect()
    }

    /// The route table this shard places PGs by.
    pub fn routes(&self) -> &Arc<PgRouter> {
        &self.routes
    }

    /// The PGs this shard holds.
    pub fn pgs(&self) -> Vec<SpgId> {
        self.pgs.keys().copied().collect()
    }

    /// A summary for the admin socket.
    pub fn status(&self) -> ShardStatus {
        let mut s = ShardStatus {
            epoch: self.epoch(),
            num_pgs: self.pgs.len(),
            ops_waiting_for_map: self.waiting_for_map.len(),
            peer_msgs_dropped: self.peer_msgs_dropped,
            errors: self.errors,
            repops_resent_overdue: self.repops_resent_overdue,
            backfills_active: self.reserver.granted(),
            backfills_max_seen: self.max_backfills_seen,
            ..ShardStatus::default()
        };
        for p in self.pgs.values() {
            let r = p.report(self.cfg.whoami);
            if r.primary {
                s.num_primary += 1;
            }
            *s.by_state.entry(state_string(r.state)).or_default() += 1;
            s.ops_waiting_for_active += r.ops_waiting;
            s.repops_in_flight += r.repops_in_flight;
        }
        s
    }

    fn log(&mut self, msg: String) {
        self.outputs.push_back(Output::Log(msg));
    }

    fn error(&mut self, msg: String) {
        self.errors += 1;
        self.log(msg);
    }
}

/// The PG collections on a shard's store and their split bits (what [`PgRouter::add_stored`] takes): a driver
/// lists every shard's before the shards start serving.
pub fn stored_pgs<D: Device>(store: &mut Store<D>) -> Result<Vec<(SpgId, u32)>, ferrostore::StoreError> {
    let mut out = Vec::new();
    for c in store.list_collections()? {
        if let Some(s) = glue::parse_collection(&c) {
            out.push((s, store.collection_bits(&c)?));
        }
    }
    Ok(out)
}

/// Ceph's `pg_state_string` for the flags peering sets (`active+clean`, `peering`, `undersized+degraded+peered`...).
pub fn state_string(flags: u64) -> String {
    use peering::pg_state::*;
    // the order of Ceph's pg_state_string
    const NAMES: &[(u64, &str)] = &[
        (STALE, "stale"),
        (1 << 0, "creating"),
        (ACTIVE, "active"),
        (ACTIVATING, "activating"),
        (CLEAN, "clean"),
        (1 << 22, "recovery_wait"),
        (RECOVERING, "recovering"),
        (DOWN, "down"),
        (UNDERSIZED, "undersized"),
        (DEGRADED, "degraded"),
        (REMAPPED, "remapped"),
        (PEERING, "peering"),
        (1 << 15, "backfill_wait"),
        (BACKFILLING, "backfilling"),
        (INCOMPLETE, "incomplete"),
        (PEERED, "peered"),
    ];
    let parts: Vec<&str> = NAMES
        .iter()
        .filter(|(b, _)| flags & b != 0)
        .map(|(_, n)| *n)
        .collect();
    if parts.is_empty() {
        "unknown".to_string()
    } else {
        parts.join("+")
    }
}
