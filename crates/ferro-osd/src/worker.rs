// SPDX-License-Identifier: LGPL-3.0-or-later
//! A shard worker: one thread owning one ferrostore shard and the PGs placed on it. Ops arrive over a bounded
//! channel; replies leave through the daemon's event channel once durable (the `pg` engine holds them until
//! ferrostore reports the transaction durable).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, SyncSender};
use std::time::{Duration, SystemTime};

use ceph_msgs::osd_op::MOSDOp;
use denc::{EntityAddr, EntityNameT, SpgId, Utime};
use ferrostore::uring::{UringDevice, UringOptions};
use ferrostore::{Device, Store, StoreConfig};
use pg::{ConnId, OpContext, OsdCap, Outputs, Pg, PgConfig, PgStats, PoolInfo};

use crate::Ev;

/// Work for a shard.
pub enum WorkerMsg {
    /// Make sure the PG exists (load it, or create it when new). Answered with [`Ev::PgReady`].
    OpenPg {
        spgid: SpgId,
        pool: PoolInfo,
        epoch: u32,
    },
    /// New pool parameters.
    SetPool {
        spgid: SpgId,
        pool: PoolInfo,
    },
    Op(Box<ClientOp>),
    /// Stop serving a PG (its data stays on disk): the map gave it a shape we cannot serve. Writes already
    /// accepted are made durable and answered first.
    ClosePg {
        spgid: SpgId,
    },
    Disconnect(ConnId),
    /// Snapshot of PG statistics and store usage.
    Stats(Sender<ShardStats>),
    Shutdown,
}

/// A client op and what the PG needs to know about its sender.
pub struct ClientOp {
    pub conn: ConnId,
    pub msg: MOSDOp,
    pub client: EntityNameT,
    pub client_addr: EntityAddr,
    pub caps: Arc<OsdCap>,
    pub features: u64,
    pub epoch: u32,
}

/// A shard's statistics.
#[derive(Debug, Default, Clone)]
pub struct ShardStats {
    pub pgs: BTreeMap<SpgId, PgStats>,
    pub total_bytes: u64,
    pub free_bytes: u64,
    pub ops: u64,
    pub commit_latency_ns: u64,
}

/// Which shard owns a PG: fixed by the shard count chosen at mkfs (a PG's data lives in its shard).
pub fn shard_of(spgid: &SpgId, shards: u32) -> usize {
    let h = spgid.pgid.pool.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(spgid.pgid.seed);
    (h % u64::from(shards.max(1))) as usize
}

fn now_utime() -> Utime {
    Utime::from_system_time(SystemTime::now())
}

/// Pin the calling thread to core `core % ncpus` (best effort: ignored where affinity cannot be set). Core 0
/// runs the control/network thread; shards take the next cores.
pub fn pin_to_core(core: usize) {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    // SAFETY: cpu_set_t is plain data; CPU_SET writes within it; sched_setaffinity(0) targets this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core % n, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Open shard `shard` of the device and serve it until `Shutdown`.
pub fn run(
    device: &Path,
    shard: u32,
    shards: u32,
    osd_id: i32,
    rx: Receiver<WorkerMsg>,
    events: SyncSender<Ev>,
) -> Result<(), String> {
    pin_to_core(shard as usize + 1);
    let dev = UringDevice::open(device, None, UringOptions::default())
        .map_err(|e| format!("opening {}: {e}", device.display()))?;
    let mut store = Store::mount(dev, shard, StoreConfig::default())
        .map_err(|e| format!("mounting ferrostore shard {shard}: {e}"))?;
    let total_bytes = store.device().size_bytes() / u64::from(shards.max(1));
    let mut pgs: BTreeMap<SpgId, Pg> = BTreeMap::new();
    let cfg = PgConfig {
        osd_id,
        ..PgConfig::default()
    };
    let mut evs = Vec::new();
    let mut ops: u64 = 0;
    let mut lat_ns: u64 = 0;
    let send = |o: Outputs, events: &SyncSender<Ev>| {
        for (conn, r) in o.replies {
            let _ = events.send(Ev::OpReply(conn, Box::new(r)));
        }
        for (conn, n) in o.notifies {
            let _ = events.send(Ev::Notify(conn, Box::new(n)));
        }
    };
    loop {
        // Block for work unless writes are in flight; then wait on the device instead (new ops queue meanwhile).
        let msg = if store.unacked() > 0 {
            match rx.try_recv() {
                Ok(m) => Some(m),
                Err(_) => {
                    let t0 = std::time::Instant::now();
                    if let Err(e) = store.wait(&mut evs) {
                        return Err(format!("ferrostore shard {shard}: {e}"));
                    }
                    lat_ns = (lat_ns * 7 + t0.elapsed().as_nanos() as u64) / 8;
                    None
                }
            }
        } else {
            let wake = pgs
                .values()
                .filter_map(|p| p.poll_timeout())
                .min()
                .map(|t| {
                    let n = now_utime();
                    Duration::from_nanos(t.as_nanos().saturating_sub(n.as_nanos()))
                })
                .unwrap_or(Duration::from_millis(200))
                .min(Duration::from_millis(200));
            match rx.recv_timeout(wake) {
                Ok(m) => Some(m),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
            }
        };
        match msg {
            None => {}
            Some(WorkerMsg::Shutdown) => {
                while store.unacked() > 0 {
                    if store.wait(&mut evs).is_err() {
                        break;
                    }
                }
                let _ = store.umount();
                return Ok(());
            }
            Some(WorkerMsg::OpenPg { spgid, pool, epoch }) => {
                if pgs.contains_key(&spgid) {
                    continue;
                }
                let mut p = Pg::new(spgid, pool, cfg.clone());
                let cid = p.collection().clone();
                let exists = store.collection_exists(&cid).unwrap_or(false);
                let r = if exists {
                    p.load(&mut store).map(|_| ())
                } else {
                    p.create(&mut store, epoch).map(|_| ())
                };
                match r {
                    Ok(()) => {
                        pgs.insert(spgid, p);
                        let _ = events.send(Ev::PgReady {
                            spgid,
                            created: !exists,
                        });
                    }
                    Err(e) => eprintln!("ferro-osd: pg {spgid}: {e}"),
                }
            }
            Some(WorkerMsg::ClosePg { spgid }) => {
                while store.unacked() > 0 {
                    if let Err(e) = store.wait(&mut evs) {
                        return Err(format!("ferrostore shard {shard}: {e}"));
                    }
                    for ev in evs.drain(..) {
                        if let ferrostore::Event::Durable(seq) = ev {
                            for p in pgs.values_mut() {
                                send(p.on_commit(seq), &events);
                            }
                        }
                    }
                }
                pgs.remove(&spgid);
            }
            Some(WorkerMsg::SetPool { spgid, pool }) => {
                if let Some(p) = pgs.get_mut(&spgid) {
                    p.set_pool(pool);
                }
            }
            Some(WorkerMsg::Op(op)) => {
                let op = *op;
                ops += 1;
                let spgid = op.msg.pgid;
                let Some(p) = pgs.get_mut(&spgid) else {
                    // Not ours (yet): Ceph drops misdirected ops; the client resends on a newer map.
                    let _ = events.send(Ev::NoPg(op.conn, Box::new(op.msg)));
                    continue;
                };
                let out = p.handle_op(
                    &mut store,
                    OpContext {
                        msg: op.msg,
                        conn: op.conn,
                        client: op.client,
                        client_addr: op.client_addr,
                        caps: &op.caps,
                        conn_features: op.features,
                        epoch: op.epoch,
                        now: now_utime(),
                    },
                );
                send(out, &events);
            }
            Some(WorkerMsg::Disconnect(c)) => {
                let now = now_utime();
                for p in pgs.values_mut() {
                    send(p.handle_disconnect(c, now), &events);
                }
            }
            Some(WorkerMsg::Stats(tx)) => {
                let _ = tx.send(ShardStats {
                    pgs: pgs.iter().map(|(k, p)| (*k, p.stats())).collect(),
                    total_bytes,
                    free_bytes: store.free_bytes(),
                    ops,
                    commit_latency_ns: lat_ns,
                });
            }
        }
        if let Err(e) = store.poll(&mut evs) {
            return Err(format!("ferrostore shard {shard}: {e}"));
        }
        for ev in evs.drain(..) {
            if let ferrostore::Event::Durable(seq) = ev {
                for p in pgs.values_mut() {
                    send(p.on_commit(seq), &events);
                }
            }
        }
        let now = now_utime();
        for p in pgs.values_mut() {
            if p.poll_timeout().is_some_and(|t| t <= now) {
                send(p.handle_timeout(&mut store, now), &events);
            }
        }
    }
}
