// SPDX-License-Identifier: LGPL-3.0-or-later
//! One core's storage side: its ferrostore shard and the PGs placed on it. Lives inside the core's reactor
//! service (crate `reactor`), so nothing here blocks except shutdown and the rare PG close, which wait for the
//! shard's in-flight writes. The core decides which PGs are its own from every osdmap it is given; ops arrive
//! from the connection's core (this one or another, over the SPSC mesh); replies are released by the `pg`
//! engine once ferrostore reports their transaction durable and go back the same way.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use ceph_msgs::osd_op::{MOSDOp, MOSDOpReply, MWatchNotify};
use denc::{EntityAddr, EntityNameT, PgId, SpgId, Utime};
use ferrostore::uring::UringDevice;
use ferrostore::{Device, Store};
use osdmap::OsdMap;
use pg::{ConnId, OpContext, OsdCap, Outputs, Pg, PgConfig, PgStats, PoolInfo};

use crate::stats::PgLife;

/// A client op and what the PG needs to know about its sender.
pub struct ClientOp {
    /// The connection, as a daemon-wide id ([`home_core`] tells which core holds it).
    pub conn: ConnId,
    pub msg: MOSDOp,
    pub client: EntityNameT,
    pub client_addr: EntityAddr,
    pub caps: Arc<OsdCap>,
    pub features: u64,
}

/// A shard's statistics (sent to core 0 every second).
#[derive(Debug, Default, Clone)]
pub struct ShardStats {
    pub pgs: BTreeMap<SpgId, (PgStats, PgLife)>,
    pub total_bytes: u64,
    pub free_bytes: u64,
    pub ops: u64,
    pub ops_r: u64,
    pub ops_w: u64,
    pub op_in_bytes: u64,
    pub op_out_bytes: u64,
    /// Sum and count of client op latencies (receive to durable reply), nanoseconds.
    pub op_latency_ns_sum: u64,
    pub op_latency_count: u64,
    pub op_r_latency_ns_sum: u64,
    pub op_r_latency_count: u64,
    pub op_w_latency_ns_sum: u64,
    pub op_w_latency_count: u64,
    /// Sum and count of transaction commit latencies (queued to durable), nanoseconds.
    pub commit_latency_ns_sum: u64,
    pub commit_latency_count: u64,
    /// Recent commit latency (EWMA), nanoseconds.
    pub commit_latency_ns: u64,
}

/// Which shard (core) owns a PG: fixed by the shard count chosen at mkfs (a PG's data lives in its shard).
pub fn shard_of(spgid: &SpgId, shards: u32) -> usize {
    let h = spgid.pgid.pool.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(spgid.pgid.seed);
    (h % u64::from(shards.max(1))) as usize
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

/// Ops waiting on this core for a newer map, at most.
const PARKED_MAX: usize = 4096;

/// What a shard hands back to its core to deliver.
#[derive(Default)]
pub struct Delivery {
    pub replies: Vec<(ConnId, MOSDOpReply)>,
    pub notifies: Vec<(ConnId, MWatchNotify)>,
    /// PGs created (the mon is told with MOSDPGCreated).
    pub created: Vec<PgId>,
}

impl Delivery {
    fn add(&mut self, o: Outputs) {
        self.replies.extend(o.replies);
        self.notifies.extend(o.notifies);
    }
}

/// One core's ferrostore shard and PGs.
pub struct Shard {
    pub index: u32,
    shards: u32,
    osd_id: i32,
    store: Store<UringDevice>,
    pgs: BTreeMap<SpgId, (Pg, PgLife)>,
    cfg: PgConfig,
    map: Option<Arc<OsdMap>>,
    up_epoch: u32,
    device_class: String,
    warned_pools: std::collections::BTreeSet<i64>,
    parked: Vec<ClientOp>,
    evs: Vec<ferrostore::Event>,
    /// When each in-flight client op arrived (by reqid tid + conn), for op latency.
    started: BTreeMap<(ConnId, u64), (Instant, bool)>,
    /// When the oldest not-yet-durable transaction was queued (commit latency, approximated per batch).
    commit_since: Option<Instant>,
    pub stats: ShardStats,
    total_bytes: u64,
}

impl Shard {
    pub fn new(
        index: u32,
        shards: u32,
        osd_id: i32,
        store: Store<UringDevice>,
        device_class: String,
    ) -> Self {
        let total_bytes = store.device().size_bytes() / u64::from(shards.max(1));
        Shard {
            index,
            shards,
            osd_id,
            store,
            pgs: BTreeMap::new(),
            cfg: PgConfig {
                osd_id,
                ..PgConfig::default()
            },
            map: None,
            up_epoch: 0,
            device_class,
            warned_pools: Default::default(),
            parked: Vec::new(),
            evs: Vec::new(),
            started: BTreeMap::new(),
            commit_since: None,
            stats: ShardStats::default(),
            total_bytes,
        }
    }

    pub fn map_epoch(&self) -> u32 {
        self.map.as_ref().map_or(0, |m| m.epoch)
    }

    /// Writes queued and not yet durable.
    pub fn busy(&self) -> bool {
        self.store.unacked() > 0
    }

    fn log(&self, msg: &str) {
        eprintln!("{} osd.{} shard {} {msg}", now_utime(), self.osd_id, self.index);
    }

    /// A new map (and whether we are up): place this shard's PGs, then retry parked ops.
    pub fn set_map(&mut self, map: Arc<OsdMap>, up_epoch: u32, out: &mut Delivery) {
        self.map = Some(map);
        self.up_epoch = up_epoch;
        if up_epoch > 0 {
            self.place_pgs(out);
        }
        let parked = std::mem::take(&mut self.parked);
        for op in parked {
            self.client_op(op, out);
        }
    }

    /// Open every PG of this shard whose acting primary we are (size-1 pools of ferro-only rules); close those
    /// the map no longer lets us serve alone.
    fn place_pgs(&mut self, out: &mut Delivery) {
        let Some(map) = self.map.clone() else { return };
        let epoch = map.epoch;
        let mut want = Vec::new();
        for (pid, pool) in &map.pools {
            if !crate::daemon::pool_is_ferro_only(&map, pool.crush_rule, &self.device_class) {
                // Its PGs may hold data on other OSDs that we cannot backfill: never claim them (an empty PG
                // reported active+clean would hide that data). Pools belong here through a device-class rule.
                if self.warned_pools.insert(*pid) && self.index == 0 {
                    self.log(&format!(
                        "pool {pid} is not served: its CRUSH rule {} also maps to OSDs without device class {}",
                        pool.crush_rule, self.device_class
                    ));
                }
                continue;
            }
            let info = PoolInfo {
                id: *pid,
                name: map.pool_name.get(pid).cloned().unwrap_or_default(),
                pg_num: pool.pg_num,
                erasure: pool.is_erasure(),
                applications: pool.application_metadata.keys().cloned().collect(),
            };
            for seed in 0..pool.pg_num {
                let pgid = PgId::new(*pid as u64, seed);
                let spgid = SpgId::new(pgid, denc::ShardId::NO_SHARD);
                if shard_of(&spgid, self.shards) != self.index as usize {
                    continue;
                }
                let Ok(ua) = map.pg_to_up_acting_osds(pgid) else {
                    continue;
                };
                if ua.acting_primary != self.osd_id {
                    continue;
                }
                if pool.size != 1 || ua.acting.len() != 1 {
                    // Replication is not implemented yet. Serving such a PG alone would report it active+clean
                    // with one copy where the pool asks for more: it stays inactive instead (clients wait, as
                    // they do on any inactive PG) and the operator is told once per pool.
                    if self.warned_pools.insert(*pid) {
                        self.log(&format!(
                            "pool {pid} is not served: size {} needs replication, which ferro-osd does not do yet",
                            pool.size
                        ));
                    }
                    continue;
                }
                want.push((spgid, info.clone()));
            }
        }
        let keep: std::collections::BTreeSet<SpgId> = want.iter().map(|(s, _)| *s).collect();
        let gone: Vec<SpgId> = self.pgs.keys().filter(|s| !keep.contains(s)).copied().collect();
        for spgid in gone {
            self.log(&format!("pg {spgid}: no longer served at epoch {epoch}"));
            // Accepted writes are made durable and answered first.
            self.drain(out);
            self.pgs.remove(&spgid);
        }
        for (spgid, info) in want {
            if let Some((p, _)) = self.pgs.get_mut(&spgid) {
                p.set_pool(info);
                continue;
            }
            let mut p = Pg::new(spgid, info, self.cfg.clone());
            let cid = p.collection().clone();
            let exists = self.store.collection_exists(&cid).unwrap_or(false);
            let r = if exists {
                p.load(&mut self.store).map(|_| ())
            } else {
                p.create(&mut self.store, epoch).map(|_| ())
            };
            match r {
                Ok(()) => {
                    let life = PgLife {
                        created_epoch: epoch,
                        active_since_epoch: self.up_epoch.max(epoch),
                        activated_at: now_utime(),
                    };
                    self.pgs.insert(spgid, (p, life));
                    if !exists {
                        out.created.push(spgid.pgid);
                    }
                }
                Err(e) => self.log(&format!("pg {spgid}: {e}")),
            }
        }
    }

    /// Execute (or park) a client op for a PG of this shard.
    pub fn client_op(&mut self, op: ClientOp, out: &mut Delivery) {
        let epoch = self.map_epoch();
        if op.msg.osdmap_epoch > epoch {
            // The client has a newer map: wait for it (Ceph's wait_for_map).
            if self.parked.len() < PARKED_MAX {
                self.parked.push(op);
            }
            return;
        }
        let spgid = op.msg.pgid;
        let Some((p, _)) = self.pgs.get_mut(&spgid) else {
            // Not ours: Ceph drops misdirected ops; the client resends on a newer map.
            return;
        };
        self.stats.ops += 1;
        let is_write = op.msg.ops.iter().any(|o| ceph_msgs::osd_op::op::is_write(o.op));
        if is_write {
            self.stats.ops_w += 1;
        } else {
            self.stats.ops_r += 1;
        }
        self.stats.op_in_bytes += op.msg.ops.iter().map(|o| o.indata.len() as u64).sum::<u64>();
        self.started
            .insert((op.conn, op.msg.tid), (Instant::now(), is_write));
        let o = p.handle_op(
            &mut self.store,
            OpContext {
                msg: op.msg,
                conn: op.conn,
                client: op.client,
                client_addr: op.client_addr,
                caps: &op.caps,
                conn_features: op.features,
                epoch,
                now: now_utime(),
            },
        );
        if self.store.unacked() > 0 && self.commit_since.is_none() {
            self.commit_since = Some(Instant::now());
        }
        self.deliver(o, out);
    }

    fn deliver(&mut self, o: Outputs, out: &mut Delivery) {
        let now = Instant::now();
        for (conn, r) in &o.replies {
            if let Some((t0, w)) = self.started.remove(&(*conn, r.tid)) {
                let ns = now.duration_since(t0).as_nanos() as u64;
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
                s.op_out_bytes += r.ops.iter().map(|o| o.outdata.len() as u64).sum::<u64>();
            }
        }
        out.add(o);
    }

    /// A client connection went away (watches it held time out as Ceph's do).
    pub fn client_reset(&mut self, c: ConnId, out: &mut Delivery) {
        let now = now_utime();
        self.parked.retain(|op| op.conn != c);
        self.started.retain(|k, _| k.0 != c);
        let mut os = Vec::new();
        for (p, _) in self.pgs.values_mut() {
            os.push(p.handle_disconnect(c, now));
        }
        for o in os {
            self.deliver(o, out);
        }
    }

    /// Reap device completions: durable transactions release their replies.
    pub fn poll(&mut self, out: &mut Delivery) -> Result<bool, String> {
        self.store
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
            if let ferrostore::Event::Durable(seq) = ev {
                durable = true;
                let mut os = Vec::new();
                for (p, _) in self.pgs.values_mut() {
                    os.push(p.on_commit(*seq));
                }
                for o in os {
                    self.deliver(o, out);
                }
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
            if self.store.unacked() > 0 {
                self.commit_since = Some(Instant::now());
            }
        }
    }

    /// Wait (blocking) until every queued write is durable, delivering the replies it releases.
    pub fn drain(&mut self, out: &mut Delivery) {
        while self.store.unacked() > 0 {
            if let Err(e) = self.store.wait(&mut self.evs) {
                self.log(&format!("draining: {e}"));
                return;
            }
            self.on_events(out);
        }
    }

    /// Watch/notify timeouts.
    pub fn tick(&mut self, out: &mut Delivery) {
        let now = now_utime();
        let mut os = Vec::new();
        for (p, _) in self.pgs.values_mut() {
            if p.poll_timeout().is_some_and(|t| t <= now) {
                os.push(p.handle_timeout(&mut self.store, now));
            }
        }
        for o in os {
            self.deliver(o, out);
        }
    }

    pub fn snapshot(&mut self) -> ShardStats {
        let mut s = self.stats.clone();
        s.pgs = self.pgs.iter().map(|(k, (p, l))| (*k, (p.stats(), *l))).collect();
        s.total_bytes = self.total_bytes;
        s.free_bytes = self.store.free_bytes();
        s
    }

    /// Drain and unmount (shutdown).
    pub fn shutdown(mut self) {
        let mut out = Delivery::default();
        self.drain(&mut out);
        if let Err(e) = self.store.umount() {
            eprintln!("ferro-osd: unmounting shard {}: {e}", self.index);
        }
    }
}
