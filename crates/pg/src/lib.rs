// SPDX-License-Identifier: LGPL-3.0-or-later
//! The placement-group op engine: executes client `MOSDOp`s on a ferrostore [`Store`] with the semantics of
//! Ceph's PrimaryLogPG (16.2), sans-IO.
//!
//! How the daemon drives a [`Pg`]:
//! * [`Pg::create`] (a new PG: collection + pgmeta object) or [`Pg::load`] (after restart) once;
//! * [`Pg::handle_op`] for every client `MOSDOp` addressed to this PG. Reads are answered at once (unless they
//!   touch an object with a write that is not durable yet); writes are applied to the store as one ferrostore
//!   transaction and their replies are held until [`Pg::on_commit`] reports that transaction durable
//!   ("durable before ack");
//! * [`Pg::on_commit`] with every `Event::Durable(seq)` of the store (PGs ignore sequence numbers they did not
//!   issue; ferrostore acknowledges in order, so `seq` means "everything up to seq");
//! * [`Pg::handle_timeout`] when the time from [`Pg::poll_timeout`] has come (watch and notify timeouts);
//! * [`Pg::handle_disconnect`] when a client connection goes away (its watches start timing out);
//! * [`Outputs`] says what to send where: op replies and watch-notify messages, each for a connection id.
//!
//! Objects are stored exactly where classic OSDs keep them: the `_` xattr holds `object_info_t`, `snapset` the
//! SnapSet, user xattrs are prefixed with `_`, omap is the object's omap; the PG log lives in the pgmeta object's
//! omap. Object names map to ferrostore keys through `ghobject_t`'s order-preserving sort key, so the store's
//! listing order is Ceph's (hash-bitwise) order.

pub mod caps;
mod cls;
mod exec;
pub mod keys;
mod log;
mod meta;
mod obc;
pub mod recovery;
mod repl;
mod split;
pub mod txn;
mod watch;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::Bytes;
use ceph_msgs::osd_op::{MOSDOp, MOSDOpReply, MWatchNotify};
use denc::{EntityAddr, EntityNameT, Eversion, SpgId, Utime};
use ferrostore::{Device, Store};
use osd_types::past_intervals::PastIntervals;
use osd_types::pg_info::PgInfo;
use osd_types::pg_missing::PgMissing;

pub use caps::{CapParseError, OsdCap};
pub use meta::PgMeta;
pub use obc::ObcStats;
pub use recovery::{OSD_RECOVERY_MAX_CHUNK, PushApplied};
pub use repl::RepOp;
pub use split::split_children;
pub use txn::{apply_ceph_transaction, translate as translate_ceph_transaction};

/// Ceph's `reply_op_error` for an op the daemon answers itself (e.g. -ENXIO for a misdirected op, -EAGAIN):
/// the request's flags and ops without data, `errno` (negative) as the result, no versions.
pub fn error_reply(msg: &MOSDOp, errno: i32, epoch: u32) -> MOSDOpReply {
    exec::reply_error(msg, errno, epoch, Eversion::default(), 0, &[])
}

/// The PGs that have a collection on `store` (what an OSD shard finds after a restart), in order.
pub fn stored_pgs<D: Device>(store: &mut Store<D>) -> Result<Vec<SpgId>, PgError> {
    let mut out = Vec::new();
    for c in store.list_collections()? {
        if let Some(spgid) = txn::coll_of(&c).ok().and_then(|c| c.pg_id()) {
            out.push(spgid);
        }
    }
    out.sort();
    Ok(out)
}

/// Identifies a client connection in the daemon (what replies and notifies are sent on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ConnId(pub u64);

/// What the PG needs to know about its pool (from the OSDMap's `pg_pool_t`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolInfo {
    pub id: i64,
    pub name: String,
    pub pg_num: u32,
    /// Erasure-coded pools have no omap (ops answer EOPNOTSUPP).
    pub erasure: bool,
    /// `application_metadata` keys (for `tag` caps; unused by the caps we check now).
    pub applications: Vec<String>,
}

/// Tunables with Ceph's defaults (the option names are Ceph's).
#[derive(Debug, Clone)]
pub struct PgConfig {
    /// This OSD's id (for watcher listings and logs).
    pub osd_id: i32,
    /// `osd_max_object_size` (128 MiB): writes beyond answer EFBIG.
    pub osd_max_object_size: u64,
    /// `osd_max_write_size` in bytes (90 MiB): larger requests answer EMSGSIZE... (checked by the daemon too).
    pub osd_max_write_size: u64,
    /// `osd_max_object_name_len` (2048); ferrostore's key limit may be lower (ENAMETOOLONG either way).
    pub osd_max_object_name_len: usize,
    /// `osd_max_object_namespace_len` (256).
    pub osd_max_object_namespace_len: usize,
    /// `osd_max_attr_size` (0 = unlimited).
    pub osd_max_attr_size: u64,
    /// `osd_max_omap_entries_per_request` (131072).
    pub osd_max_omap_entries_per_request: u64,
    /// `osd_max_omap_bytes_per_request` (1 GiB).
    pub osd_max_omap_bytes_per_request: u64,
    /// `osd_min_pg_log_entries` / `osd_max_pg_log_entries`: the log's target length and its hard limit (Ceph
    /// derives the target from `osd_target_pg_log_entries_per_osd` / PGs, within these bounds).
    pub osd_min_pg_log_entries: usize,
    pub osd_max_pg_log_entries: usize,
    /// `osd_pg_log_dups_tracked` (3000): reqids remembered after their entries are trimmed.
    pub osd_pg_log_dups_tracked: usize,
    /// `osd_pg_log_trim_min` (100): the log is trimmed in batches of at least this many entries.
    pub osd_pg_log_trim_min: usize,
    /// `osd_client_watch_timeout` seconds (30): a watch's timeout when the client gives 0.
    pub osd_client_watch_timeout: u32,
    /// `osd_default_notify_timeout` seconds (30).
    pub osd_default_notify_timeout: u32,
    /// `osd_pg_object_context_cache_count`: objects whose decoded info and snapset the PG keeps (an LRU; 0
    /// turns the cache off). Ceph's default is 64; ours is larger because ferrostore has no onode cache of its
    /// own yet (each miss costs two B-tree lookups and a decode).
    pub osd_pg_object_context_cache_count: usize,
    /// Bound on the (estimated) memory of that cache per PG, in bytes.
    pub obc_cache_max_bytes: usize,
    /// Fault injection for the simulator (issue 8's seeded bugs; never set it otherwise): a write's client
    /// reply is released once it is durable here, without waiting for the replicas' commits. Default off.
    pub fault_ack_before_replicas: bool,
}

impl Default for PgConfig {
    fn default() -> Self {
        PgConfig {
            osd_id: 0,
            osd_max_object_size: 128 << 20,
            osd_max_write_size: 90 << 20,
            osd_max_object_name_len: 2048,
            osd_max_object_namespace_len: 256,
            osd_max_attr_size: 0,
            osd_max_omap_entries_per_request: 131_072,
            osd_max_omap_bytes_per_request: 1 << 30,
            osd_min_pg_log_entries: 250,
            osd_max_pg_log_entries: 10_000,
            osd_pg_log_dups_tracked: 3000,
            osd_pg_log_trim_min: 100,
            osd_client_watch_timeout: 30,
            osd_default_notify_timeout: 30,
            osd_pg_object_context_cache_count: 256,
            obc_cache_max_bytes: 128 << 10,
            fault_ack_before_replicas: false,
        }
    }
}

/// One client op as the daemon hands it over.
#[derive(Debug, Clone)]
pub struct OpContext<'a> {
    pub msg: MOSDOp,
    /// The connection it arrived on (replies go back there; watches are bound to it).
    pub conn: ConnId,
    /// The sender's entity name (`client.4123`): reqids and watchers are keyed by it.
    pub client: EntityNameT,
    /// The sender's address (reported by list-watchers).
    pub client_addr: EntityAddr,
    /// The client's OSD caps (from its cephx ticket).
    pub caps: &'a OsdCap,
    /// Features of the client's connection (encodings of some replies depend on them).
    pub conn_features: u64,
    /// The OSD's current osdmap epoch (replies carry it; versions use it).
    pub epoch: u32,
    /// Wall-clock time now (object mtimes when the client sends none, watch timers).
    pub now: Utime,
}

/// What the daemon must send after a call into the PG.
#[derive(Debug, Default)]
pub struct Outputs {
    /// Op replies, each on the connection the op came from. Only ever contains replies whose effects are durable.
    pub replies: Vec<(ConnId, MOSDOpReply)>,
    /// Watch-notify messages (notifies to watchers, completions to notifiers, disconnects).
    pub notifies: Vec<(ConnId, MWatchNotify)>,
    /// Replicated writes to send (as MOSDRepOp) to every replica set with [`Pg::set_replicas`], in version order.
    /// Empty while the PG has no replicas.
    pub repops: Vec<RepOp>,
}

impl Outputs {
    pub fn is_empty(&self) -> bool {
        self.replies.is_empty() && self.notifies.is_empty() && self.repops.is_empty()
    }
    #[allow(dead_code)]
    fn append(&mut self, mut o: Outputs) {
        self.replies.append(&mut o.replies);
        self.notifies.append(&mut o.notifies);
        self.repops.append(&mut o.repops);
    }
}

/// Object and byte counts of the PG (for `pg_stat_t`'s `object_stat_sum_t`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PgStats {
    pub num_objects: u64,
    pub num_bytes: u64,
    pub num_omap_objects: u64,
    pub num_rd: u64,
    pub num_rd_kb: u64,
    pub num_wr: u64,
    pub num_wr_kb: u64,
    /// Highest version applied (`pg_info_t::last_update`).
    pub last_update: Eversion,
    /// Highest version durable (`last_complete` for a size-1 PG).
    pub last_complete: Eversion,
    pub log_size: u64,
    pub ondisk_log_size: u64,
}

/// Failures of PG setup (not of client ops, which answer with errno values).
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    #[error("store: {0}")]
    Store(#[from] ferrostore::StoreError),
    #[error("corrupt PG metadata: {0}")]
    Corrupt(String),
    /// A Ceph transaction that cannot be applied (undecodable, or an op BlueStore would refuse).
    #[error("transaction: {0}")]
    Transaction(String),
    /// A request this implementation does not support yet.
    #[error("unsupported: {0}")]
    Unsupported(&'static str),
    /// The object (or PG) is not there.
    #[error("not found: {0}")]
    NotFound(String),
}

impl PgError {
    /// The (negative) errno Ceph would answer with.
    pub fn errno(&self) -> i32 {
        match self {
            PgError::Store(e) => -e.errno(),
            PgError::Corrupt(_) | PgError::Transaction(_) => -libc::EIO,
            PgError::Unsupported(_) => -libc::EOPNOTSUPP,
            PgError::NotFound(_) => -libc::ENOENT,
        }
    }
}

/// A reply waiting for its transaction to become durable (and, with replicas, for their commits up to
/// `version`).
#[derive(Debug)]
struct Held {
    seq: u64,
    version: Eversion,
    conn: ConnId,
    reply: MOSDOpReply,
}

/// One placement group shard: the primary (executes client ops, emits [`RepOp`]s) or a replica (applies them).
pub struct Pg {
    spgid: SpgId,
    pool: PoolInfo,
    cfg: PgConfig,
    cid: ferrostore::CollectionId,
    /// The pgmeta object's store key (every write adds its log entry there).
    meta_key: ferrostore::ObjectKey,
    log: log::PgLog,
    stats: PgStats,
    /// Replies held until their store transaction is durable, in seq order.
    held: std::collections::VecDeque<Held>,
    /// Per object (sort key): the newest write not committed yet (store seq, version).
    dirty: HashMap<Bytes, (u64, Eversion), ferrostore::hash::SeededKeys>,
    watch: watch::WatchState,
    /// Highest store sequence number known durable.
    durable_seq: u64,
    /// Deterministic randomness (cls version tags).
    rng: u64,
    /// Ops sent with an older map are dropped (the client resends them).
    discard_before: u32,
    /// The newest OSD map epoch seen (versions of entries the PG makes on its own, e.g. watch timeouts).
    epoch: u32,
    /// The pool's snap context when the pool is in pool-snapshot mode (seq, snaps newest first).
    pool_snapc: Option<(u64, Vec<u64>)>,
    /// `pg_info_t` as kept in pgmeta (`_info` + `_fastinfo`).
    info: PgInfo,
    past_intervals: PastIntervals,
    /// The local missing set (pgmeta `missing/…`).
    missing: PgMissing,
    /// Primary (executes client ops) or replica (applies rep ops only).
    primary: bool,
    /// The acting replicas writes are sent to (not this OSD).
    replicas: Vec<i32>,
    /// Replicated writes not yet committed by every replica: version → replicas still to answer.
    waiting: BTreeMap<Eversion, BTreeSet<i32>>,
    /// The current client op's object (store key name, ghobject), so the Ceph transaction need not parse its
    /// key back; taken by the op's write.
    op_object: Option<(Bytes, denc::GHObject)>,
    /// Decoded object infos and snapsets of recently used objects (kept exact by [`Pg::queue`]).
    obc: obc::ObcCache,
}

impl Pg {
    /// A PG object for `spgid` in `pool` (no store access; call [`Pg::create`] or [`Pg::load`] next).
    pub fn new(spgid: SpgId, pool: PoolInfo, cfg: PgConfig) -> Self {
        let cid = keys::collection_id(&spgid);
        let log = log::PgLog::new(&cfg);
        let obc = obc::ObcCache::new(cfg.osd_pg_object_context_cache_count, cfg.obc_cache_max_bytes);
        Pg {
            spgid,
            pool,
            cfg,
            cid,
            meta_key: keys::pgmeta_key(&spgid),
            log,
            stats: PgStats::default(),
            held: Default::default(),
            dirty: HashMap::default(),
            watch: watch::WatchState::default(),
            durable_seq: 0,
            rng: 0x9e37_79b9_7f4a_7c15 ^ (u64::from(spgid.pgid.seed) << 20) ^ spgid.pgid.pool,
            discard_before: 0,
            epoch: 0,
            pool_snapc: None,
            info: meta::new_info(&spgid),
            past_intervals: PastIntervals::new_compact(),
            missing: PgMissing::default(),
            primary: true,
            replicas: Vec::new(),
            waiting: BTreeMap::new(),
            op_object: None,
            obc,
        }
    }

    pub fn spgid(&self) -> SpgId {
        self.spgid
    }
    pub fn pool(&self) -> &PoolInfo {
        &self.pool
    }
    /// New pool parameters from a newer OSDMap (name, pg_num, applications).
    pub fn set_pool(&mut self, pool: PoolInfo) {
        self.pool = pool;
    }
    /// Ceph's `can_discard_op` floor: ops whose map epoch is older than
    /// max(`same_primary_since`, `last_epoch_split`, the pool's `last_force_op_resend`) are dropped without a
    /// reply, because the client resends them after it sees the newer map. The daemon sets it on map changes.
    pub fn set_discard_before(&mut self, epoch: u32) {
        self.discard_before = epoch;
    }

    /// The pool's snap context (`pg_pool_t::snap_seq` and its snaps, newest first) for pools with pool snapshots;
    /// an empty `snaps` means self-managed (the client's snap context applies). Writes that would need a clone of
    /// the head are answered -EOPNOTSUPP: clones are not implemented yet.
    pub fn set_pool_snap_context(&mut self, seq: u64, snaps: Vec<u64>) {
        self.pool_snapc = if snaps.is_empty() {
            None
        } else {
            Some((seq, snaps))
        };
    }

    /// The ferrostore collection of this PG (`coll_t` text form, e.g. `1.7_head`).
    pub fn collection(&self) -> &ferrostore::CollectionId {
        &self.cid
    }

    /// Create the PG on the store: its collection (with `bits` = the PG's split bits) and its pgmeta object with
    /// `_infover`, `_info` (an empty `pg_info_t`, `epoch_created` = `epoch`), `_biginfo` and `_epoch`. Returns the
    /// store sequence number (durable once `on_commit` sees it).
    pub fn create<D: Device>(&mut self, store: &mut Store<D>, epoch: u32) -> Result<u64, PgError> {
        self.info.history.epoch_created = self.info.history.epoch_created.max(epoch);
        self.info.history.epoch_pool_created = self.info.history.epoch_pool_created.max(epoch);
        let kvs = meta::create_kvs(&self.info, &self.past_intervals, epoch);
        let txn = self.log.create_txn(&self.spgid, &self.cid, self.pool.pg_num, kvs);
        Ok(self.queue(store, &txn)?)
    }

    /// [`Pg::new`] + [`Pg::load`]: a PG as stored.
    pub fn open<D: Device>(
        store: &mut Store<D>,
        spgid: SpgId,
        pool: PoolInfo,
        cfg: PgConfig,
    ) -> Result<Pg, PgError> {
        let mut pg = Pg::new(spgid, pool, cfg);
        pg.load(store)?;
        Ok(pg)
    }

    /// Load an existing PG (after a restart): its info, past intervals, log, dups, missing set and object
    /// statistics. Creates nothing.
    pub fn load<D: Device>(&mut self, store: &mut Store<D>) -> Result<(), PgError> {
        let (log, other) = log::PgLog::load(store, &self.spgid, &self.cid, &self.cfg)?;
        self.log = log;
        self.obc.clear();
        let m = meta::parse(other)?;
        if let Some(info) = m.info {
            self.info = info;
        }
        if let Some(pi) = m.past_intervals {
            self.past_intervals = pi;
        }
        self.missing = m.missing;
        osd_types::owned::Owned::own_buffers(&mut self.missing);
        // the log is the authority for last_update (older stores have no pg_info_t at all)
        if self.info.last_update > self.log.head {
            self.log.head = self.info.last_update;
        }
        self.info.last_update = self.log.head;
        self.log.tail = self.info.log_tail.max(self.log.tail);
        self.log.last_user_version = self.log.last_user_version.max(self.info.last_user_version);
        self.info.last_user_version = self.log.last_user_version;
        self.log.complete = self.log.head;
        self.stats = exec::scan_stats(store, &self.cid)?;
        self.stats.last_update = self.log.head;
        self.stats.last_complete = self.log.head;
        self.stats.log_size = self.log.len() as u64;
        self.stats.ondisk_log_size = self.stats.log_size;
        Ok(())
    }

    /// Execute one client op. The returned outputs hold replies that may be sent now (reads, errors, dups of
    /// durable writes); writes' replies come from a later [`Pg::on_commit`].
    /// A replica ([`Pg::set_primary`] false) never executes client ops: it drops them (the client resends to
    /// the primary once it has the newer map).
    pub fn handle_op<D: Device>(&mut self, store: &mut Store<D>, ctx: OpContext<'_>) -> Outputs {
        if !self.primary {
            return Outputs::default();
        }
        let out = exec::handle_op(self, store, ctx);
        // a read leaves its object here (only writes take it): it must not keep the message alive
        self.op_object = None;
        out
    }

    /// The store reports transaction `seq` (and all before it) durable: release the replies waiting for it.
    pub fn on_commit(&mut self, seq: u64) -> Outputs {
        let mut out = Outputs::default();
        self.on_commit_each(seq, |conn, r| out.replies.push((conn, r)));
        out
    }

    /// [`Pg::on_commit`] handing each released reply to `f` (in order) instead of collecting them: a shard
    /// sends them on at once, without a vector of replies per durable event.
    pub fn on_commit_each(&mut self, seq: u64, f: impl FnMut(ConnId, MOSDOpReply)) {
        if seq <= self.durable_seq && self.held.front().is_none_or(|h| h.seq > seq) {
            return;
        }
        self.durable_seq = self.durable_seq.max(seq);
        self.log.on_durable(seq);
        self.stats.last_complete = self.log.complete;
        self.release_each(f);
    }

    /// Whether every replica committed every replicated write up to `v`.
    fn replicated(&self, v: Eversion) -> bool {
        self.waiting.range(..=v).next().is_none()
    }

    /// Send the held replies whose writes are durable here and committed by the replicas, in order.
    fn release(&mut self, out: &mut Outputs) {
        self.release_each(|conn, r| out.replies.push((conn, r)));
    }

    fn release_each(&mut self, mut f: impl FnMut(ConnId, MOSDOpReply)) {
        while let Some(h) = self.held.front() {
            if h.seq > self.durable_seq || !self.replicated(h.version) {
                break;
            }
            if let Some(h) = self.held.pop_front() {
                f(h.conn, h.reply);
            }
        }
        let (durable, waiting) = (self.durable_seq, &self.waiting);
        self.dirty
            .retain(|_, (s, v)| *s > durable || waiting.range(..=*v).next().is_some());
    }

    /// The earliest time [`Pg::handle_timeout`] must be called (a watch or notify expiring), if any.
    pub fn poll_timeout(&self) -> Option<Utime> {
        self.watch.next_timeout()
    }

    /// Expire watches and notifies whose time has come.
    pub fn handle_timeout<D: Device>(&mut self, store: &mut Store<D>, now: Utime) -> Outputs {
        exec::handle_timeout(self, store, now)
    }

    /// A client connection closed: its watches stay registered until their timeout (as Ceph does), notifies
    /// to it count as not acknowledged.
    pub fn handle_disconnect(&mut self, conn: ConnId, now: Utime) -> Outputs {
        self.watch.disconnect(conn, now);
        Outputs::default()
    }

    /// Recount objects and bytes from the store (after objects were changed outside this PG's own calls, e.g.
    /// by a recovery engine applying pushes itself).
    pub fn refresh_stats<D: Device>(&mut self, store: &mut Store<D>) -> Result<(), PgError> {
        // objects changed behind the PG's back: what it cached about them may be stale
        self.obc.clear();
        let s = exec::scan_stats(store, &self.cid)?;
        self.stats.num_objects = s.num_objects;
        self.stats.num_bytes = s.num_bytes;
        self.stats.num_omap_objects = s.num_omap_objects;
        Ok(())
    }

    /// Object counts, bytes and versions.
    pub fn stats(&self) -> PgStats {
        let mut s = self.stats;
        s.last_update = self.log.head;
        s.last_complete = self.log.complete;
        s.log_size = self.log.len() as u64;
        s.ondisk_log_size = s.log_size;
        s
    }

    /// Hold `reply` until store transaction `seq` is durable and the replicas committed `version`; if that is
    /// so already, put it in `out` now.
    fn hold(&mut self, seq: u64, version: Eversion, conn: ConnId, reply: MOSDOpReply, out: &mut Outputs) {
        if seq <= self.durable_seq && self.replicated(version) && self.held.is_empty() {
            out.replies.push((conn, reply));
            return;
        }
        // keep `held` ordered by seq (replies for older transactions first)
        let at = self.held.iter().rposition(|h| h.seq <= seq).map_or(0, |i| i + 1);
        self.held.insert(
            at,
            Held {
                seq,
                version,
                conn,
                reply,
            },
        );
        self.release(out);
    }

    /// Objects of this PG in Ceph's order, starting at `start` (inclusive; `HObject::default()` for the
    /// beginning), at most `max`; the cursor to continue from is the max object at the end.
    pub fn list_objects<D: Device>(
        &self,
        store: &mut Store<D>,
        start: &denc::HObject,
        max: usize,
    ) -> Result<(Vec<denc::HObject>, denc::HObject), PgError> {
        let mut from = if start.is_min() {
            Vec::new()
        } else {
            denc::GHObject::new(start.clone(), 0, self.spgid.shard).to_sort_key()
        };
        let mut out = Vec::new();
        loop {
            let batch = store.list_objects(&self.cid, &from, None, max + 1 - out.len().min(max))?;
            if batch.is_empty() {
                return Ok((out, denc::HObject::max_value()));
            }
            for k in &batch {
                let Some(g) = keys::from_key(k) else { continue };
                if g.is_pgmeta() || g.hobj.is_temp() {
                    continue;
                }
                if out.len() == max {
                    return Ok((out, g.hobj));
                }
                out.push(g.hobj);
            }
            let Some(last) = batch.last() else { break };
            from = last.name.to_vec();
            from.push(0);
        }
        Ok((out, denc::HObject::max_value()))
    }

    /// Queue a store transaction of this PG. Every store change the PG makes goes through here, so the object
    /// context cache forgets what the transaction changes before the store has it.
    pub(crate) fn queue<D: Device>(
        &mut self,
        store: &mut Store<D>,
        t: &ferrostore::Transaction,
    ) -> Result<u64, ferrostore::StoreError> {
        self.obc.forget_txn(&self.cid, t);
        store.queue_transaction(t)
    }

    /// Hits, misses and size of the object context cache (`PgConfig::osd_pg_object_context_cache_count`).
    pub fn obc_stats(&self) -> ObcStats {
        self.obc.stats()
    }

    /// Number of replies held for durability.
    pub fn held_replies(&self) -> usize {
        self.held.len()
    }
}
