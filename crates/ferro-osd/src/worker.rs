// SPDX-License-Identifier: LGPL-3.0-or-later
//! One core's storage side: its ferrostore shard and the PGs placed on it, as an `osd_core::OsdShard` (the
//! sans-IO OSD core: placement from the map, peering, primary-copy replication, recovery, backfill, client
//! ops). Lives inside the core's reactor service, so nothing here blocks except shutdown, which waits for the
//! shard's in-flight writes. This module turns the core's outputs into a [`Delivery`] the daemon sends.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use ceph_msgs::CephMessage;
use ceph_msgs::osd_op::{MOSDOpReply, MWatchNotify};
use ceph_msgs::osd_rep::{MOSDRepOpReply, TraceInfo, rep_msg};
use denc::{EntityAddr, OsdReqId, PgId, SpgId, Utime};
use ferrostore::hash::SeededMap;
use ferrostore::uring::UringDevice;
use ferrostore::{CollectionId, Device, ObjectKey, Store};
use osd_core::{Input, OsdShard, Output, PgReport, PgRouter, ShardConfig, ShardStatus};
use osdmap::OsdMap;
use pg::ConnId;

pub use osd_core::ClientOp;

/// `own` keeps the device on its own io_uring, watched from the core's ring (the session-5 path, for A/B runs);
/// otherwise (the default) the device submits on the core's ring ([`Shard::attach_to_core`]).
pub const DEVICE_RING_ENV: &str = "FERRO_OSD_DEVICE_RING";

/// ferrostore's view of the core's ring (storage hook 3 in docs/reactor.md).
struct CoreRing(reactor::DeviceRing);

impl ferrostore::uring::SharedRing for CoreRing {
    unsafe fn push(&mut self, entry: reactor::io_uring::squeue::Entry, token: u64) {
        // SAFETY: forwarded to the caller (the device keeps the buffers in its slot table until completion).
        unsafe { self.0.push(entry, token) }
    }
    fn take(&mut self, out: &mut Vec<(u64, i32)>) {
        self.0.take(out)
    }
    fn wait(&mut self) {
        self.0.wait()
    }
    fn register_buffer_slots(&mut self, n: u32) -> bool {
        self.0.register_buffer_slots(n).is_ok()
    }
    unsafe fn set_buffer(&mut self, index: u32, ptr: *mut u8, len: usize) -> bool {
        // SAFETY: forwarded to the caller (the device keeps registered buffers allocated).
        unsafe { self.0.set_buffer(index, ptr, len) }.is_ok()
    }
}

/// A shard's statistics (sent to core 0 every second).
#[derive(Debug, Default, Clone)]
pub struct ShardStats {
    /// Every PG this shard holds (primary or replica) and since when it is in its current state.
    pub pgs: Vec<(PgReport, Utime)>,
    pub status: ShardStatus,
    pub total_bytes: u64,
    pub free_bytes: u64,
    pub ops: u64,
    pub ops_r: u64,
    pub ops_w: u64,
    pub op_in_bytes: u64,
    pub op_out_bytes: u64,
    /// Client read / write op latencies (arrival on this core to reply) by µs, log2 buckets as
    /// `reactor::turn_bucket` (`perf dump` section `ferro_op_latency_hist`).
    pub op_r_lat_hist: [u64; reactor::TURN_HIST_BUCKETS],
    pub op_w_lat_hist: [u64; reactor::TURN_HIST_BUCKETS],
    /// Sum and count of client op latencies (arrival on this core to reply), nanoseconds.
    pub op_latency_ns_sum: u64,
    pub op_latency_count: u64,
    pub op_r_latency_ns_sum: u64,
    pub op_r_latency_count: u64,
    pub op_w_latency_ns_sum: u64,
    pub op_w_latency_count: u64,
    /// Peer messages handled (replication, peering, recovery).
    pub subops: u64,
    /// Replicated writes (MOSDRepOp) from receipt to the commit reply, as ceph-osd's `subop_latency`.
    pub subop_latency_ns_sum: u64,
    pub subop_latency_count: u64,
    /// Client ops accepted and not answered yet (`op_wip`).
    pub op_wip: u64,
    /// Sum and count of transaction commit latencies (queued to durable), nanoseconds.
    pub commit_latency_ns_sum: u64,
    pub commit_latency_count: u64,
    /// Recent commit latency (EWMA), nanoseconds.
    pub commit_latency_ns: u64,
    pub misdirected: u64,
    /// Messages received on this core's client and peer connections.
    pub messages_received: u64,
    /// What holds memory on this shard (`dump_mempools`), sampled with the other statistics.
    pub mem: ShardMemory,
    /// ferrostore counters (`perf dump` section `ferrostore`): transactions, those journaled (data in the log
    /// record) and their data bytes, journaled runs whose own data write was dropped (freed before it went
    /// out), log records and log bytes written, and defragment on read: ranges rewritten as one run, their
    /// blocks, and ranges left as they were.
    pub store_txns: u64,
    pub store_journaled_txns: u64,
    pub store_journaled_bytes: u64,
    pub store_journaled_writes_skipped: u64,
    pub store_log_records: u64,
    pub store_log_bytes: u64,
    pub store_defrag_txns: u64,
    pub store_defrag_blocks: u64,
    pub store_defrag_skipped: u64,
    pub store_defrag_deferred: u64,
    /// Reads served as a slice of one device read / assembled from several, and device reads whose buffer was
    /// new memory (the read pool had none idle).
    pub store_reads_zero_copy: u64,
    pub store_reads_assembled: u64,
    pub dev_read_buf_misses: u64,
    pub store_assembled_buf_misses: u64,
    /// Checkpoints (all, and those finished in the background) and the shard's stops for one
    /// (`ferrostore::StoreStats::ckpt_waits_log` / `ckpt_waits_dirty` / `ckpt_log_full`).
    pub store_checkpoints: u64,
    pub store_background_checkpoints: u64,
    pub store_ckpt_waits_log: u64,
    pub store_ckpt_waits_dirty: u64,
    pub store_ckpt_log_full: u64,
}

/// The main memory consumers of one shard, for `dump_mempools` (ceph-osd's mempool names where one fits).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ShardMemory {
    /// ferrostore's heap estimate: tree nodes (cache and dirty), in-flight data and log records, allocator.
    pub store_bytes: u64,
    /// Client ops tracked in flight plus completed ops kept for `dump_historic_ops` and
    /// `dump_historic_ops_by_duration`.
    pub ops_tracked: u64,
    /// Replicated writes received and not yet answered (kept for `subop_latency`).
    pub subops_tracked: u64,
    /// PG log entries held in memory (every PG of the shard).
    pub pglog_entries: u64,
    /// Replicated writes in flight on this shard's primaries (each holds its transaction until every replica
    /// answers).
    pub repops_in_flight: u64,
}

/// Bits of a daemon-wide connection id below the core number.
const CORE_SHIFT: u32 = 48;

/// A daemon-wide connection id: the core holding the connection and a per-core counter.
pub fn global_conn(core: usize, n: u64) -> ConnId {
    ConnId(((core as u64) << CORE_SHIFT) | (n & ((1 << CORE_SHIFT) - 1)))
}

/// The core holding connection `c`.
pub fn home_core(c: ConnId) -> usize {
    (c.0 >> CORE_SHIFT) as usize
}

fn now_utime() -> Utime {
    Utime::from_system_time(SystemTime::now())
}

/// Requests for the monitor that core 0 sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MonReq {
    /// MOSDAlive (up_thru at least this epoch).
    UpThru(u32),
    /// MOSDPGTemp.
    PgTemp(PgId, Vec<i32>),
    /// MOSDPGCreated.
    Created(PgId),
}

/// What a shard hands back to its core to deliver.
#[derive(Default)]
pub struct Delivery {
    pub replies: Vec<(ConnId, MOSDOpReply)>,
    pub notifies: Vec<(ConnId, MWatchNotify)>,
    /// Messages for other OSDs (cluster network).
    pub to_osd: Vec<(i32, ceph_msgs::Message)>,
    pub mon: Vec<MonReq>,
}

impl Delivery {
    pub fn is_empty(&self) -> bool {
        self.replies.is_empty() && self.notifies.is_empty() && self.to_osd.is_empty() && self.mon.is_empty()
    }
}

/// Snapshots (one a second) per recomputation of the store's heap estimate for `dump_mempools`.
const STORE_BYTES_EVERY: u64 = 10;

/// `osd_op_history_size`: completed ops kept for `dump_historic_ops` (and, the slowest, for
/// `dump_historic_ops_by_duration`).
pub const OP_HISTORY_SIZE: usize = 20;
/// `osd_op_history_duration` (seconds): older completed ops are dropped from the history.
pub const OP_HISTORY_DURATION_S: u64 = 600;
/// Which op list an admin command asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpsList {
    /// `dump_ops_in_flight` / `ops`: accepted and not answered, oldest first.
    InFlight,
    /// `dump_historic_ops`: the newest completed ops.
    Historic,
    /// `dump_historic_ops_by_duration`: the slowest completed ops of the last `osd_op_history_duration`
    /// seconds, slowest first.
    ByDuration,
}

/// In-flight ops tracked at most per shard (beyond it ops are served but not listed).
const OPS_TRACKED_MAX: usize = 1 << 16;

/// A client op this shard accepted, for op latency, `op_wip`, `dump_ops_in_flight` and `dump_historic_ops`.
/// Only cheap copies are kept (the object name is a refcounted slice); the description is built when dumped.
#[derive(Debug, Clone)]
struct TrackedOp {
    /// Arrival on this shard's core.
    t0: Instant,
    is_write: bool,
    /// When its transaction was queued in the store (a write waits for the commit from then on).
    queued: Option<Instant>,
    /// Completed (reply released): when.
    done: Option<Instant>,
    reqid: OsdReqId,
    client_addr: EntityAddr,
    pgid: SpgId,
    epoch: u32,
    oid: Bytes,
    /// Op code and extent of each op.
    ops: Box<[(u16, u64, u64)]>,
}

/// The slowest `cap` items of the last `window` (Ceph's op history by duration): each with its start and
/// duration, in no order. An item slower than the fastest kept one pushes it out once the list is full; items
/// that started more than `window` ago leave first. Entering costs one comparison for the common op that is
/// not among the slowest ([`Slowest::would_keep`]), and a copy only for those that are.
#[derive(Debug)]
pub struct Slowest<T> {
    items: Vec<(Instant, Duration, T)>,
    cap: usize,
    window: Duration,
    /// While full: the shortest duration kept, the bar an item must pass.
    bar: Duration,
    /// The earliest start kept: once it leaves the window, the next offer makes room.
    oldest: Option<Instant>,
}

impl<T> Slowest<T> {
    pub fn new(cap: usize, window: Duration) -> Self {
        Slowest {
            items: Vec::with_capacity(cap),
            cap,
            window,
            bar: Duration::ZERO,
            oldest: None,
        }
    }

    /// Whether an item that took `d`, seen at `now`, could enter (it still may not if the kept ones are all
    /// newer and slower).
    pub fn would_keep(&self, d: Duration, now: Instant) -> bool {
        self.cap > 0
            && (self.items.len() < self.cap
                || d > self.bar
                || self
                    .oldest
                    .is_some_and(|o| now.saturating_duration_since(o) > self.window))
    }

    /// An item that started at `t0` and took `d`, seen at `now`; `make` builds it only if it is kept.
    pub fn offer(&mut self, t0: Instant, d: Duration, now: Instant, make: impl FnOnce() -> T) {
        let window = self.window;
        self.items
            .retain(|(s, _, _)| now.saturating_duration_since(*s) <= window);
        if self.cap == 0 {
            return;
        }
        if self.items.len() >= self.cap
            && let Some((i, _)) = self.items.iter().enumerate().min_by_key(|(_, x)| x.1)
        {
            if self.items[i].1 >= d {
                self.bar = self.items[i].1;
                self.oldest = self.items.iter().map(|x| x.0).min();
                return;
            }
            self.items.swap_remove(i);
        }
        self.items.push((t0, d, make()));
        self.bar = if self.items.len() >= self.cap {
            self.items.iter().map(|x| x.1).min().unwrap_or_default()
        } else {
            Duration::ZERO
        };
        self.oldest = self.items.iter().map(|x| x.0).min();
    }

    /// The kept items that started within the window before `now`, slowest first.
    pub fn slowest_first(&self, now: Instant) -> Vec<&T> {
        let mut v: Vec<&(Instant, Duration, T)> = self
            .items
            .iter()
            .filter(|(s, _, _)| now.saturating_duration_since(*s) <= self.window)
            .collect();
        v.sort_by_key(|x| std::cmp::Reverse(x.1));
        v.into_iter().map(|x| &x.2).collect()
    }

    /// Items kept (some may have aged out of the window until the next offer).
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

impl TrackedOp {
    fn description(&self) -> String {
        use std::fmt::Write;
        let mut ops = String::new();
        for (i, &(op, off, len)) in self.ops.iter().enumerate() {
            if i > 0 {
                ops.push(',');
            }
            ops.push_str(ceph_msgs::osd_op::op::name(op));
            if has_extent(op) {
                let _ = write!(ops, " {off}~{len}");
            }
        }
        format!(
            "osd_op({} {} {} [{}] e{})",
            self.reqid,
            self.pgid.pgid,
            String::from_utf8_lossy(&self.oid),
            ops,
            self.epoch
        )
    }

    /// Ceph's `dump_ops_in_flight` / `dump_historic_ops` entry.
    fn dump(&self, now: Instant, wall_now: SystemTime) -> serde_json::Value {
        let at = |t: Instant| {
            let back = now.saturating_duration_since(t);
            // Ceph's time format in op dumps: `2026-11-30T16:50:00.123456+0000`
            Utime::from_system_time(wall_now.checked_sub(back).unwrap_or(wall_now)).to_iso_utc()
        };
        let end = self.done.unwrap_or(now);
        let age = now.saturating_duration_since(self.t0).as_secs_f64();
        let duration = end.saturating_duration_since(self.t0).as_secs_f64();
        let mut events = vec![
            serde_json::json!({"event": "initiated", "time": at(self.t0)}),
            serde_json::json!({"event": "reached_pg", "time": at(self.t0)}),
        ];
        if let Some(q) = self.queued {
            events.push(serde_json::json!({"event": "waiting for commit", "time": at(q)}));
        }
        if let Some(d) = self.done {
            events.push(serde_json::json!({"event": "commit_sent", "time": at(d)}));
            events.push(serde_json::json!({"event": "done", "time": at(d)}));
        }
        let flag = match (self.done, self.queued) {
            (Some(_), _) => "done",
            (None, Some(_)) => "waiting for commit",
            // Waiting for a map, for the PG to become active, for an object, or for a read.
            (None, None) => "reached pg",
        };
        serde_json::json!({
            "description": self.description(),
            "initiated_at": at(self.t0),
            "age": age,
            "duration": duration,
            "type_data": {
                "flag_point": flag,
                "client_info": {
                    "client": self.reqid.name.to_string(),
                    "client_addr": self.client_addr.to_string(),
                    "tid": self.reqid.tid,
                },
                "events": events,
            },
        })
    }
}

/// Ops whose description shows an extent (`write 0~4096`).
fn has_extent(op: u16) -> bool {
    use ceph_msgs::osd_op::op;
    matches!(
        op,
        op::READ
            | op::SPARSE_READ
            | op::WRITE
            | op::WRITEFULL
            | op::ZERO
            | op::TRUNCATE
            | op::APPEND
            | op::CMPEXT
    )
}

/// The reqid of a MOSDRepOp (its front starts with map_epoch, min_epoch, trace, reqid), without decoding the
/// rest (the transaction).
fn repop_reqid(m: &ceph_msgs::Message) -> Option<OsdReqId> {
    let mut d = denc::Decoder::new(m.front.clone());
    d.u32().ok()?;
    d.u32().ok()?;
    let _: TraceInfo = d.decode().ok()?;
    d.decode().ok()
}

/// One core's ferrostore shard and PGs.
pub struct Shard {
    pub index: u32,
    osd_id: i32,
    core: OsdShard<UringDevice>,
    /// Monotonic origin of the core's clock.
    start: Instant,
    evs: Vec<ferrostore::Event>,
    /// Client ops in flight (by connection and tid).
    started: SeededMap<(ConnId, u64), TrackedOp>,
    /// The last completed ops (`dump_historic_ops`), oldest first.
    history: VecDeque<TrackedOp>,
    /// The slowest completed ops of the last [`OP_HISTORY_DURATION_S`] (`dump_historic_ops_by_duration`).
    slowest: Slowest<TrackedOp>,
    /// Replicated writes received and not yet answered, by (primary, reqid): when they arrived.
    subops_started: HashMap<(i32, OsdReqId), Instant>,
    /// When the oldest not-yet-durable transaction was queued (commit latency, approximated per batch).
    commit_since: Option<Instant>,
    /// Since when each PG is in its current state (pg_stat_t's last_change).
    since: BTreeMap<SpgId, (u64, Utime)>,
    pub stats: ShardStats,
    total_bytes: u64,
    /// Snapshots taken, and the store's heap estimate of the last one that computed it (see `snapshot`).
    snapshots: u64,
    store_bytes: u64,
    /// A device completion wakes the core ([`Shard::attach_to_core`] ran).
    device_wakes: bool,
}

impl Shard {
    pub fn new(
        index: u32,
        shards: u32,
        osd_id: i32,
        pg: &pg::PgConfig,
        store: Store<UringDevice>,
        start: Instant,
    ) -> Self {
        let total_bytes = store.device().size_bytes() / u64::from(shards.max(1));
        let mut cfg = ShardConfig::new(osd_id, index, shards);
        cfg.pg = pg::PgConfig { osd_id, ..pg.clone() };
        let core = OsdShard::new(cfg, store);
        Shard {
            index,
            osd_id,
            core,
            start,
            evs: Vec::new(),
            started: SeededMap::default(),
            history: VecDeque::new(),
            slowest: Slowest::new(OP_HISTORY_SIZE, Duration::from_secs(OP_HISTORY_DURATION_S)),
            subops_started: HashMap::new(),
            commit_since: None,
            since: BTreeMap::new(),
            stats: ShardStats::default(),
            total_bytes,
            snapshots: 0,
            store_bytes: 0,
            device_wakes: false,
        }
    }

    /// Writes queued and not yet durable, or a background checkpoint in progress (it advances only inside
    /// `poll`, so the core keeps polling the device until it is done).
    pub fn busy(&mut self) -> bool {
        let store = self.core.store_mut();
        store.unacked() > 0 || store.has_background_work()
    }

    /// IO submitted to (or completed by and not yet reaped from) the device ring.
    pub fn device_in_flight(&mut self) -> usize {
        self.core.store_mut().device().in_flight()
    }

    /// Submit device IO queued since the last poll (the store queues its commit flush while it polls): the core
    /// is about to sleep until the device ring has completions.
    pub fn submit_pending(&mut self) {
        self.core.store_mut().device_mut().submit_pending();
    }

    /// The device ring's fd: readable while its completion queue holds an entry (the core sleeps on it).
    pub fn ring_fd(&mut self) -> std::os::fd::RawFd {
        self.core.store_mut().device().ring_fd()
    }

    /// Make device completions wake the core: by default the device submits on the core's own ring (its IO
    /// goes to the kernel with the turn's one `io_uring_enter`, its completions come with the core's); with
    /// `FERRO_OSD_DEVICE_RING=own` it keeps its own ring and the core watches that ring's fd (returned).
    pub fn attach_to_core<M: Send + 'static>(
        &mut self,
        ctx: &mut reactor::CoreCtx<M>,
    ) -> Option<reactor::WatchId> {
        self.device_wakes = true;
        if std::env::var(DEVICE_RING_ENV).as_deref() == Ok("own") {
            return Some(ctx.watch_fd(self.ring_fd()));
        }
        let ring = Box::new(CoreRing(ctx.device_ring()));
        self.core.store_mut().device_mut().attach(ring);
        None
    }

    /// Device completions wake the core (else it must poll while IO is in flight).
    pub fn device_wakes(&self) -> bool {
        self.device_wakes
    }

    fn log(&self, msg: &str) {
        eprintln!("{} osd.{} shard {} {msg}", now_utime(), self.osd_id, self.index);
    }

    /// Feed one input; true if it queued a transaction in the store.
    fn feed(&mut self, input: Input, out: &mut Delivery) -> bool {
        let now = self.start.elapsed();
        let had = self.core.store_mut().unacked();
        self.core.handle(now, now_utime(), input);
        let has = self.core.store_mut().unacked();
        if self.commit_since.is_none() && had == 0 && has > 0 {
            self.commit_since = Some(Instant::now());
        }
        self.drain_outputs(out);
        has > had
    }

    fn drain_outputs(&mut self, out: &mut Delivery) {
        let now = Instant::now();
        while let Some(o) = self.core.poll_output() {
            match o {
                Output::ClientReply { conn, reply } => {
                    if let Some(mut t) = self.started.remove(&(conn, reply.tid)) {
                        let d = now.duration_since(t.t0);
                        let ns = d.as_nanos() as u64;
                        let w = t.is_write;
                        let b = reactor::turn_bucket(d);
                        if w {
                            self.stats.op_w_lat_hist[b] += 1;
                        } else {
                            self.stats.op_r_lat_hist[b] += 1;
                        }
                        t.done = Some(now);
                        if self.slowest.would_keep(d, now) {
                            self.slowest.offer(t.t0, d, now, || t.clone());
                        }
                        self.history.push_back(t);
                        while self.history.len() > OP_HISTORY_SIZE
                            || self.history.front().is_some_and(|h| {
                                now.saturating_duration_since(h.t0).as_secs() > OP_HISTORY_DURATION_S
                            })
                        {
                            self.history.pop_front();
                        }
                        let s = &mut self.stats;
                        s.op_latency_ns_sum += ns;
                        s.op_latency_count += 1;
                        if w {
                            s.op_w_latency_ns_sum += ns;
                            s.op_w_latency_count += 1;
                        } else {
                            s.op_r_latency_ns_sum += ns;
                            s.op_r_latency_count += 1;
                        }
                        s.op_out_bytes += reply.ops.iter().map(|o| o.outdata.len() as u64).sum::<u64>();
                    }
                    out.replies.push((conn, *reply));
                }
                Output::ClientNotify { conn, msg } => out.notifies.push((conn, *msg)),
                Output::ToOsd { osd, msg } => {
                    if msg.msg_type == rep_msg::REPOPREPLY
                        && !self.subops_started.is_empty()
                        && let Ok(r) = MOSDRepOpReply::from_message(&msg)
                        && let Some(t0) = self.subops_started.remove(&(osd, r.reqid))
                    {
                        self.stats.subop_latency_ns_sum += now.duration_since(t0).as_nanos() as u64;
                        self.stats.subop_latency_count += 1;
                    }
                    out.to_osd.push((osd, msg));
                }
                Output::NeedUpThru { epoch } => out.mon.push(MonReq::UpThru(epoch)),
                Output::PgTemp { pgid, acting } => out.mon.push(MonReq::PgTemp(pgid, acting)),
                Output::PgCreated { pgid } => out.mon.push(MonReq::Created(pgid)),
                Output::Misdirected { conn, msg } => {
                    // Ceph drops misdirected ops; the client resends on a newer map.
                    self.stats.misdirected += 1;
                    self.started.remove(&(conn, msg.tid));
                }
                Output::Log(l) => self.log(&l),
            }
        }
    }

    /// Epochs up to `epoch` follow at once (a catch-up): PGs record the older ones' intervals without peering.
    pub fn maps_pending(&mut self, epoch: u32, out: &mut Delivery) {
        self.feed(Input::MapsPending(epoch), out);
    }

    /// A new map epoch and the PG → core table at that epoch (core 0 computes it for every core).
    pub fn set_map(&mut self, map: Arc<OsdMap>, routes: Arc<PgRouter>, out: &mut Delivery) {
        self.feed(Input::Routes(routes), out);
        self.feed(Input::Map(map), out);
    }

    /// A client op for a PG of this shard.
    pub fn client_op(&mut self, op: ClientOp, out: &mut Delivery) {
        self.stats.ops += 1;
        let is_write = op.msg.ops.iter().any(|o| ceph_msgs::osd_op::op::is_write(o.op));
        if is_write {
            self.stats.ops_w += 1;
        } else {
            self.stats.ops_r += 1;
        }
        self.stats.op_in_bytes += op.msg.ops.iter().map(|o| o.indata.len() as u64).sum::<u64>();
        let key = (op.conn, op.msg.tid);
        if self.started.len() < OPS_TRACKED_MAX {
            let m = &op.msg;
            let reqid = if m.reqid.name.ty != 0 || m.reqid.tid != 0 {
                m.reqid
            } else {
                OsdReqId {
                    name: op.client,
                    tid: m.tid,
                    inc: m.client_inc as i32,
                }
            };
            self.started.insert(
                key,
                TrackedOp {
                    t0: Instant::now(),
                    is_write,
                    queued: None,
                    done: None,
                    reqid,
                    client_addr: op.client_addr,
                    pgid: m.pgid,
                    epoch: m.osdmap_epoch,
                    oid: m.oid.0.clone(),
                    ops: m
                        .ops
                        .iter()
                        .map(|o| {
                            let x = o.extent();
                            (o.op, x.offset, x.length)
                        })
                        .collect(),
                },
            );
        }
        if self.feed(Input::ClientOp(Box::new(op)), out)
            && let Some(t) = self.started.get_mut(&key)
        {
            t.queued = Some(Instant::now());
        }
    }

    /// This shard's entries of an op list (`dump_ops_in_flight`, `dump_historic_ops`,
    /// `dump_historic_ops_by_duration`).
    pub fn dump_ops(&self, list: OpsList) -> Vec<serde_json::Value> {
        let (now, wall) = (Instant::now(), SystemTime::now());
        match list {
            OpsList::Historic => self.history.iter().map(|t| t.dump(now, wall)).collect(),
            OpsList::ByDuration => self
                .slowest
                .slowest_first(now)
                .into_iter()
                .map(|t| t.dump(now, wall))
                .collect(),
            OpsList::InFlight => {
                let mut ops: Vec<&TrackedOp> = self.started.values().collect();
                ops.sort_by_key(|t| t.t0);
                ops.into_iter().map(|t| t.dump(now, wall)).collect()
            }
        }
    }

    /// A message from another OSD for a PG of this shard.
    pub fn peer(&mut self, from: i32, msg: ceph_msgs::Message, out: &mut Delivery) {
        self.stats.subops += 1;
        if msg.msg_type == rep_msg::REPOP
            && self.subops_started.len() < OPS_TRACKED_MAX
            && let Some(reqid) = repop_reqid(&msg)
        {
            self.subops_started.insert((from, reqid), Instant::now());
        }
        self.feed(Input::Peer { from, msg }, out);
    }

    /// The cluster connection to `osd` broke (unacknowledged messages are resent).
    pub fn peer_reset(&mut self, osd: i32, out: &mut Delivery) {
        // The primary resends what we did not answer; those are timed from their new arrival.
        self.subops_started.retain(|k, _| k.0 != osd);
        self.feed(Input::PeerReset(osd), out);
    }

    /// A client connection went away (watches it held time out as Ceph's do).
    pub fn client_reset(&mut self, c: ConnId, out: &mut Delivery) {
        self.started.retain(|k, _| k.0 != c);
        self.feed(Input::ClientReset(c), out);
    }

    /// Reap device completions: durable transactions release replies and replica acks.
    pub fn poll(&mut self, out: &mut Delivery) -> Result<bool, String> {
        self.core
            .store_mut()
            .poll(&mut self.evs)
            .map_err(|e| format!("ferrostore shard {}: {e}", self.index))?;
        let got = !self.evs.is_empty();
        self.on_events(out);
        Ok(got)
    }

    fn on_events(&mut self, out: &mut Delivery) {
        let evs = std::mem::take(&mut self.evs);
        let mut durable = false;
        for ev in &evs {
            match ev {
                ferrostore::Event::Durable(seq) => {
                    durable = true;
                    self.feed(Input::Durable(*seq), out);
                }
                // a parked client read's data is in memory: the op runs now (osd-core src/prefetch.rs)
                ferrostore::Event::Prefetched(t) => {
                    self.feed(Input::Prefetched(*t), out);
                }
                _ => {}
            }
        }
        self.evs = evs;
        self.evs.clear();
        if durable && let Some(t0) = self.commit_since.take() {
            let ns = t0.elapsed().as_nanos() as u64;
            let s = &mut self.stats;
            s.commit_latency_ns = (s.commit_latency_ns * 7 + ns) / 8;
            s.commit_latency_ns_sum += ns;
            s.commit_latency_count += 1;
            if self.core.store_mut().unacked() > 0 {
                self.commit_since = Some(Instant::now());
            }
        }
    }

    /// Timers (peering retries, leases, recovery pacing, watch timeouts): tick when due.
    pub fn tick(&mut self, out: &mut Delivery) {
        let now = self.start.elapsed();
        if self
            .core
            .poll_timeout()
            .is_none_or(|t| t <= now + Duration::from_millis(1))
        {
            self.feed(Input::Tick, out);
        }
    }

    pub fn snapshot(&mut self) -> ShardStats {
        let mut s = self.stats.clone();
        let now = now_utime();
        let reports = self.core.pg_stats();
        let mut since = BTreeMap::new();
        s.pgs = reports
            .into_iter()
            .map(|r| {
                let t = match self.since.get(&r.spgid) {
                    Some(&(st, t)) if st == r.state => t,
                    _ => now,
                };
                since.insert(r.spgid, (r.state, t));
                (r, t)
            })
            .collect();
        self.since = since;
        s.status = self.core.status();
        s.op_wip = self.started.len() as u64;
        s.total_bytes = self.total_bytes;
        s.free_bytes = self.core.store_mut().free_bytes();
        let st = &self.core.store_mut().stats;
        s.store_txns = st.txns;
        s.store_journaled_txns = st.journaled_txns;
        s.store_journaled_bytes = st.journaled_bytes;
        s.store_journaled_writes_skipped = st.journaled_writes_skipped;
        s.store_log_records = st.log_records;
        s.store_log_bytes = st.log_bytes;
        s.store_defrag_txns = st.defrag_txns;
        s.store_defrag_blocks = st.defrag_blocks;
        s.store_defrag_skipped = st.defrag_skipped + st.defrag_dropped;
        s.store_defrag_deferred = st.defrag_deferred;
        s.store_reads_zero_copy = st.reads_zero_copy;
        s.store_reads_assembled = st.reads_assembled;
        s.store_assembled_buf_misses = st.assembled_buf_misses;
        s.store_checkpoints = st.checkpoints;
        s.store_background_checkpoints = st.background_checkpoints;
        s.store_ckpt_waits_log = st.ckpt_waits_log;
        s.store_ckpt_waits_dirty = st.ckpt_waits_dirty;
        s.store_ckpt_log_full = st.ckpt_log_full;
        s.dev_read_buf_misses = self.core.store_mut().device_stats().read_buf_misses;
        // The store's heap estimate walks its caches and free-extent map (1–2 ms on a 2 GiB shard after random
        // writes, a stall for every op waiting on this core): every 10th snapshot only.
        if self.snapshots.is_multiple_of(STORE_BYTES_EVERY) {
            self.store_bytes = self.core.store_mut().memory_bytes() as u64;
        }
        self.snapshots += 1;
        s.mem = ShardMemory {
            store_bytes: self.store_bytes,
            ops_tracked: (self.started.len() + self.history.len() + self.slowest.len()) as u64,
            subops_tracked: self.subops_started.len() as u64,
            pglog_entries: s.pgs.iter().map(|(r, _)| r.stats.log_size).sum(),
            repops_in_flight: s.status.repops_in_flight as u64,
        };
        s
    }

    /// One slice of `ferro object-digest` (see [`DigestJob`]) on this shard's store.
    pub fn object_digest_step(&mut self, job: &mut DigestJob) -> Result<Option<serde_json::Value>, String> {
        job.step(self.core.store_mut(), DIGEST_SLICE_OBJECTS)
    }

    /// The store's counters (the daemon's long-turn records read the checkpoint bytes every turn).
    pub fn store_stats(&mut self) -> ferrostore::store::StoreStats {
        self.core.store_mut().stats
    }

    /// Drain and unmount (shutdown).
    pub fn shutdown(mut self) {
        let mut out = Delivery::default();
        while self.core.store_mut().unacked() > 0 {
            if let Err(e) = self.core.store_mut().wait(&mut self.evs) {
                self.log(&format!("draining: {e}"));
                break;
            }
            self.on_events(&mut out);
        }
        if let Err(e) = self.core.into_store().umount() {
            eprintln!("ferro-osd: unmounting shard {}: {e}", self.index);
        }
    }
}

/// Objects one loop turn digests: reading and checksumming a PG's whole collection at once held a debug build's
/// core for over 10 s on a loaded machine, long enough to miss its heartbeats (the OSD was marked down) and for
/// the admin socket to time out.
pub const DIGEST_SLICE_OBJECTS: usize = 16;

/// `ferro object-digest <pgid>` in progress: every object of the PG's collection on this OSD (name, size, crc32c
/// of its data, xattrs and omap), in store order, skipping the PG's metadata object. It runs a slice per loop
/// turn ([`DigestJob::step`]), so a big PG does not stall the core; objects written between slices are seen
/// as they are when their slice runs. Replicas of a clean PG without writes give identical lists.
pub struct DigestJob {
    spgid: SpgId,
    /// The next listing starts here (after the last key listed).
    cursor: Vec<u8>,
    objs: Vec<serde_json::Value>,
    total: u32,
}

impl DigestJob {
    pub fn new(spgid: SpgId) -> Self {
        DigestJob {
            spgid,
            cursor: Vec::new(),
            objs: Vec::new(),
            total: 0,
        }
    }

    /// Objects digested so far.
    pub fn objects(&self) -> usize {
        self.objs.len()
    }

    /// Digests up to `max_objects` more objects; the answer once the collection is listed to its end.
    pub fn step<D: Device>(
        &mut self,
        store: &mut Store<D>,
        max_objects: usize,
    ) -> Result<Option<serde_json::Value>, String> {
        let spgid = self.spgid;
        let cid: CollectionId = pg::keys::collection_id(&spgid);
        let meta = pg::keys::pgmeta_key(&spgid);
        let batch = store
            .list_objects(&cid, &self.cursor, None, max_objects.max(1))
            .map_err(|e| format!("listing {spgid}: {e}"))?;
        let Some(last) = batch.last() else {
            return Ok(Some(serde_json::json!({
                "pgid": spgid.pgid.to_string(),
                "num_objects": self.objs.len(),
                "digest": format!("{:08x}", self.total),
                "objects": std::mem::take(&mut self.objs),
            })));
        };
        let mut next = last.name.to_vec();
        next.push(0);
        for k in batch {
            if k == meta {
                continue;
            }
            let (name, size, crc) = digest_one(store, &cid, &k).map_err(|e| format!("{spgid}: {e}"))?;
            self.total = ceph_crc::ceph_crc32c(self.total, &crc.to_le_bytes());
            self.objs
                .push(serde_json::json!({"name": name, "size": size, "crc32c": format!("{crc:08x}")}));
        }
        self.cursor = next;
        if self.objs.len() > 1 << 20 {
            return Err("too many objects".into());
        }
        Ok(None)
    }
}

fn digest_one<D: Device>(
    store: &mut Store<D>,
    cid: &CollectionId,
    k: &ObjectKey,
) -> Result<(String, u64, u32), ferrostore::StoreError> {
    let name = pg::keys::from_key(k).map_or_else(
        || format!("{:?}", k.name),
        |g| String::from_utf8_lossy(&g.hobj.oid.0).into_owned(),
    );
    let st = store.stat(cid, k)?;
    let data = store.read(cid, k, 0, st.size)?;
    let mut crc = ceph_crc::ceph_crc32c(0, &data);
    let mut attrs = store.getattrs(cid, k)?;
    attrs.sort();
    for (a, v) in attrs {
        crc = ceph_crc::ceph_crc32c(crc, &a);
        crc = ceph_crc::ceph_crc32c(crc, &v);
    }
    crc = ceph_crc::ceph_crc32c(crc, &store.omap_get_header(cid, k).unwrap_or_default());
    let mut start: Vec<u8> = Vec::new();
    loop {
        let kv = store.omap_iterate(cid, k, &start, 1024)?;
        let Some((last, _)) = kv.last() else { break };
        let mut next = last.to_vec();
        next.push(0);
        for (a, v) in kv {
            crc = ceph_crc::ceph_crc32c(crc, &a);
            crc = ceph_crc::ceph_crc32c(crc, &v);
        }
        start = next;
    }
    Ok((name, st.size, crc))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn slowest_keeps_the_slowest_of_the_window() {
        let t = Instant::now();
        let mut s: Slowest<u32> = Slowest::new(3, Duration::from_secs(600));
        let mut made = 0;
        for (i, d) in [5u64, 1, 9, 3, 7, 2, 8].into_iter().enumerate() {
            let now = t + Duration::from_secs(i as u64);
            if s.would_keep(ms(d), now) {
                s.offer(now, ms(d), now, || {
                    made += 1;
                    d as u32
                });
            }
        }
        assert_eq!(s.slowest_first(t + Duration::from_secs(10)), [&9, &8, &7]);
        // 5, 1, 9 fill it; 3 pushes out 1, 7 pushes out 3, 8 pushes out 5; 2 is under the bar (5) and never built.
        assert_eq!(made, 6);
        assert!(!s.would_keep(ms(7), t + Duration::from_secs(10)));
        assert!(s.would_keep(ms(10), t + Duration::from_secs(10)));
    }

    #[test]
    fn slowest_forgets_what_left_the_window() {
        let t = Instant::now();
        let w = Duration::from_secs(600);
        let mut s: Slowest<&str> = Slowest::new(2, w);
        s.offer(t, ms(900), t, || "old slow");
        s.offer(t, ms(800), t, || "old slower than what follows");
        // Full of slow ops; a fast one later does not pass the bar, until the old ones have left the window.
        let soon = t + Duration::from_secs(10);
        assert!(!s.would_keep(ms(1), soon));
        assert_eq!(s.slowest_first(soon).len(), 2);
        let later = t + w + Duration::from_secs(1);
        assert!(s.slowest_first(later).is_empty(), "aged out of the dump at once");
        assert!(s.would_keep(ms(1), later), "and out of the way of new ops");
        s.offer(later, ms(1), later, || "new fast");
        assert_eq!(s.slowest_first(later), [&"new fast"]);
        assert_eq!(s.len(), 1);
        // A zero-size history keeps nothing.
        let mut z: Slowest<u8> = Slowest::new(0, w);
        assert!(!z.would_keep(ms(5), t));
        z.offer(t, ms(5), t, || 1);
        assert!(z.is_empty());
    }
}
