// SPDX-License-Identifier: LGPL-3.0-or-later
//! A small deterministic in-memory cluster for osd-core tests: N `OsdShard`s on ferrostore's simulated device, a
//! message queue between them, a "monitor" that publishes OSDMap epochs built with `osdmap::build` (and honours
//! up_thru and pg_temp requests), and a client that sends MOSDOps to the acting primary.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ceph_msgs::osd_op::{MOSDOp, MOSDOpReply, OSDOp, flag, op};
use denc::{EntityAddr, EntityNameT, ObjectLocator, ObjectName, PgId, ShardId, SnapId, SpgId, Utime};
use ferrostore::{Event, MkfsOptions, SimConfig, SimDevice, Store, StoreConfig, mkfs};
use osd_core::{ClientOp, Input, OsdShard, Output, ShardConfig};
use osdmap::OsdMap;
use osdmap::build::{FailureDomain, IncBuilder, MapBuilder, PoolSpec, advance};
use pg::{ConnId, OsdCap};

pub fn new_store(seed: u64) -> Store<SimDevice> {
    let dev = SimDevice::new(
        48 << 20,
        SimConfig {
            seed,
            reorder: false,
            max_completions_per_poll: 64,
            durable_writes: true,
        },
    );
    let dev = mkfs(
        dev,
        &MkfsOptions {
            shards: 1,
            log_bytes: 4 << 20,
            uuid: seed,
            ..Default::default()
        },
    )
    .unwrap();
    Store::mount(dev, 0, StoreConfig::default()).unwrap()
}

/// An object's data, xattrs and omap as stored.
pub type ObjectDump = (Bytes, Vec<(Bytes, Bytes)>, Vec<(Bytes, Bytes)>);

pub struct Cluster {
    pub map: OsdMap,
    /// Every epoch published (a restarted OSD replays those after the newest it stored).
    pub maps: Vec<Arc<OsdMap>>,
    pub osds: BTreeMap<i32, OsdShard<SimDevice>>,
    /// Stores of stopped OSDs.
    pub stopped: BTreeMap<i32, Store<SimDevice>>,
    /// (from, to, message)
    pub bus: VecDeque<(i32, i32, ceph_msgs::Message)>,
    pub now: Duration,
    pub wall: Utime,
    /// Client replies by tid.
    pub replies: BTreeMap<u64, MOSDOpReply>,
    pub misdirected: Vec<u64>,
    /// OSDs cut off from the cluster network (messages to and from them are lost).
    pub partitioned: BTreeSet<i32>,
    /// OSDs whose store durability events are withheld (a slow disk).
    pub hold_durable: BTreeSet<i32>,
    withheld: BTreeMap<i32, Vec<u64>>,
    want_up_thru: BTreeMap<i32, u32>,
    want_pg_temp: BTreeMap<PgId, Vec<i32>>,
    pub tid: u64,
    /// Every op sent, by tid (for resends).
    pub sent: BTreeMap<u64, MOSDOp>,
    /// PGs reported created (MOSDPGCreated).
    pub created: Vec<PgId>,
    pub logs: Vec<String>,
    caps: Arc<OsdCap>,
    tune: fn(&mut ShardConfig),
}

impl Cluster {
    /// `n` OSDs (one per host) and one replicated pool (id 1) of `size`/`min_size` with `pg_num` PGs.
    pub fn new(n: u32, size: u8, min_size: u8, pg_num: u32) -> Cluster {
        Cluster::with_tuning(n, size, min_size, pg_num, |_| {})
    }

    /// As [`Cluster::new`], with every OSD's `ShardConfig` adjusted by `tune` (also on restarts).
    pub fn with_tuning(n: u32, size: u8, min_size: u8, pg_num: u32, tune: fn(&mut ShardConfig)) -> Cluster {
        let map = MapBuilder::new(n, 1)
            .failure_domain(FailureDomain::Host)
            .pool(PoolSpec::replicated("p", size, min_size, pg_num))
            .build();
        let mut c = Cluster {
            maps: vec![Arc::new(map.clone())],
            map,
            osds: BTreeMap::new(),
            stopped: BTreeMap::new(),
            bus: VecDeque::new(),
            now: Duration::from_secs(10),
            wall: Utime::new(1_700_000_000, 0),
            replies: BTreeMap::new(),
            misdirected: Vec::new(),
            partitioned: BTreeSet::new(),
            hold_durable: BTreeSet::new(),
            withheld: BTreeMap::new(),
            want_up_thru: BTreeMap::new(),
            want_pg_temp: BTreeMap::new(),
            tid: 0,
            sent: BTreeMap::new(),
            created: Vec::new(),
            logs: Vec::new(),
            caps: Arc::new(OsdCap::allow_all()),
            tune,
        };
        for o in 0..n as i32 {
            let shard = OsdShard::new(c.config(o), new_store(o as u64 + 1));
            c.osds.insert(o, shard);
        }
        let m = Arc::new(c.map.clone());
        for s in c.osds.values_mut() {
            s.handle(c.now, c.wall, Input::Map(m.clone()));
        }
        c.run();
        c
    }

    /// The shard configuration of `osd`.
    pub fn config(&self, osd: i32) -> ShardConfig {
        let mut cfg = ShardConfig::new(osd, 0, 1);
        (self.tune)(&mut cfg);
        cfg
    }

    /// Publish the next epoch with `f`'s changes (plus pending up_thru/pg_temp requests) to every running OSD.
    pub fn publish(&mut self, f: impl FnOnce(&mut IncBuilder<'_>)) {
        let mut b = IncBuilder::new(&self.map);
        f(&mut b);
        for (o, e) in std::mem::take(&mut self.want_up_thru) {
            if self.map.is_up(o) {
                b.set_up_thru(o, e).unwrap();
            }
        }
        for (pg, acting) in std::mem::take(&mut self.want_pg_temp) {
            b.set_pg_temp(pg, acting);
        }
        let inc = b.finish().unwrap();
        advance(&mut self.map, &inc).unwrap();
        let m = Arc::new(self.map.clone());
        self.maps.push(m.clone());
        for s in self.osds.values_mut() {
            s.handle(self.now, self.wall, Input::Map(m.clone()));
        }
    }

    pub fn drain_outputs(&mut self) -> bool {
        let mut any = false;
        let ids: Vec<i32> = self.osds.keys().copied().collect();
        for o in ids {
            let s = self.osds.get_mut(&o).unwrap();
            while let Some(out) = s.poll_output() {
                any = true;
                match out {
                    Output::ClientReply { reply, .. } => {
                        self.replies.insert(reply.tid, *reply);
                    }
                    Output::ClientNotify { .. } => {}
                    Output::ToOsd { osd, msg } => self.bus.push_back((o, osd, msg)),
                    Output::NeedUpThru { epoch } => {
                        let e = self.want_up_thru.entry(o).or_default();
                        *e = (*e).max(epoch);
                    }
                    Output::PgTemp { pgid, acting } => {
                        self.want_pg_temp.insert(pgid, acting);
                    }
                    Output::PgCreated { pgid } => self.created.push(pgid),
                    Output::Misdirected { msg, .. } => self.misdirected.push(msg.tid),
                    Output::Log(l) => {
                        if std::env::var_os("OSD_CORE_LOG").is_some() {
                            eprintln!("osd.{o}: {l}");
                        }
                        self.logs.push(format!("osd.{o}: {l}"));
                    }
                }
            }
        }
        any
    }

    pub fn pump_stores(&mut self) -> bool {
        let mut any = false;
        let ids: Vec<i32> = self.osds.keys().copied().collect();
        for o in ids {
            let hold = self.hold_durable.contains(&o);
            let s = self.osds.get_mut(&o).unwrap();
            let mut evs = Vec::new();
            if s.store_mut().unacked() > 0 || s.store_mut().has_background_work() {
                s.store_mut().poll(&mut evs).unwrap();
            }
            if !hold && let Some(w) = self.withheld.remove(&o) {
                for seq in w {
                    any = true;
                    s.handle(self.now, self.wall, Input::Durable(seq));
                }
            }
            for e in evs {
                if let Event::Durable(seq) = e {
                    any = true;
                    if hold {
                        self.withheld.entry(o).or_default().push(seq);
                    } else {
                        s.handle(self.now, self.wall, Input::Durable(seq));
                    }
                } else if let Event::Prefetched(t) = e {
                    // a client read's data is in memory (reads are not held back by `hold_durable`)
                    any = true;
                    s.handle(self.now, self.wall, Input::Prefetched(t));
                }
            }
        }
        any
    }

    /// Run until nothing moves (publishing maps for up_thru/pg_temp requests as a monitor would).
    pub fn run(&mut self) {
        for _ in 0..200_000 {
            let mut any = self.drain_outputs();
            any |= self.pump_stores();
            while let Some((from, to, msg)) = self.bus.pop_front() {
                any = true;
                if self.partitioned.contains(&from) || self.partitioned.contains(&to) {
                    continue;
                }
                if let Some(s) = self.osds.get_mut(&to) {
                    s.handle(self.now, self.wall, Input::Peer { from, msg });
                }
            }
            if !any {
                if self.want_up_thru.is_empty() && self.want_pg_temp.is_empty() {
                    return;
                }
                self.publish(|_| {});
            }
        }
        panic!("cluster never settled");
    }

    /// Move time forward, ticking every OSD (leases).
    pub fn advance_time(&mut self, d: Duration) {
        self.now += d;
        self.wall = Utime::new(self.wall.sec + d.as_secs() as u32, self.wall.nsec);
        for s in self.osds.values_mut() {
            s.handle(self.now, self.wall, Input::Tick);
        }
        self.run();
    }

    /// Stop an OSD cleanly (its store is kept) and mark it down.
    pub fn stop(&mut self, osd: i32) {
        self.stop_unnoticed(osd);
        self.publish(|b| {
            b.mark_down(osd).unwrap();
        });
        self.run();
    }

    /// Stop an OSD cleanly (its store is kept) without the monitor noticing: it stays up in the maps (and is
    /// not asked for up_thru) until marked down.
    pub fn stop_unnoticed(&mut self, osd: i32) {
        let mut s = self.osds.remove(&osd).unwrap();
        let mut evs = Vec::new();
        while s.store_mut().unacked() > 0 {
            s.store_mut().wait(&mut evs).unwrap();
        }
        self.stopped.insert(osd, s.into_store());
        self.bus.retain(|(f, t, _)| *f != osd && *t != osd);
        self.want_up_thru.remove(&osd);
        for s in self.osds.values_mut() {
            s.handle(self.now, self.wall, Input::PeerReset(osd));
        }
    }

    /// Restart a stopped OSD on its store (remount), replay the epochs it missed and mark it up.
    pub fn restart(&mut self, osd: i32) {
        let s = self.remount(osd, true);
        self.osds.insert(osd, s);
        self.publish(|b| {
            b.mark_up(osd, 100 + osd as u32).unwrap();
        });
        self.run();
    }

    /// A stopped OSD's shard on its remounted store. `replay`: fed every epoch from the newest it stored to the
    /// current one, as a driver does after a restart (Ceph's osdmap subscription from newest_map + 1);
    /// otherwise only the current map (a monitor that trimmed the epochs it missed, or the driver before map
    /// history).
    pub fn remount(&mut self, osd: i32, replay: bool) -> OsdShard<SimDevice> {
        let store = self.stopped.remove(&osd).unwrap();
        let dev = store.umount().unwrap();
        let mut store = Store::mount(dev, 0, StoreConfig::default()).unwrap();
        let stored = osd_core::load_newest_map(&mut store)
            .unwrap()
            .map_or(0, |m| m.epoch);
        let mut s = OsdShard::new(self.config(osd), store);
        let from = if replay && stored > 0 {
            stored
        } else {
            self.map.epoch
        };
        s.handle(self.now, self.wall, Input::MapsPending(self.map.epoch));
        for m in self.maps.iter().filter(|m| m.epoch >= from) {
            s.handle(self.now, self.wall, Input::Map(m.clone()));
        }
        s
    }

    /// Read an object, giving the cluster up to `tries` seconds to answer; the reply's data (None: no reply yet
    /// or an error).
    pub fn read_eventually(&mut self, name: &str, tries: u32) -> Option<Bytes> {
        let r = self.read(name);
        self.run();
        for _ in 0..tries {
            if self.reply(r).is_some() {
                break;
            }
            self.advance_time(Duration::from_secs(1));
        }
        self.read_data(r)
    }

    /// Several seconds of ticks (leases, retries), running the cluster after each.
    pub fn settle(&mut self, secs: u32) {
        for _ in 0..secs {
            self.advance_time(Duration::from_secs(1));
        }
    }

    /// The PG and acting primary of an object in pool 1.
    pub fn locate(&self, name: &str) -> (SpgId, u32, i32) {
        let loc = ObjectLocator {
            pool: 1,
            ..Default::default()
        };
        let raw = self.map.object_locator_to_pg(name.as_bytes(), &loc).unwrap();
        let pg = self.map.raw_pg_to_pg(raw).unwrap();
        let ua = self.map.pg_to_up_acting_osds(pg).unwrap();
        (SpgId::new(pg, ShardId::NO_SHARD), raw.seed, ua.acting_primary)
    }

    /// Send an op on `name` to its acting primary; returns the tid.
    pub fn send(&mut self, name: &str, ops: Vec<OSDOp>) -> u64 {
        self.send_with(name, ops, |_| {})
    }

    /// `send`, with the message adjusted by `f` first (snapshot id, snap context).
    pub fn send_with(&mut self, name: &str, ops: Vec<OSDOp>, f: impl FnOnce(&mut MOSDOp)) -> u64 {
        let (spgid, hash, primary) = self.locate(name);
        self.tid += 1;
        let mut flags = flag::ACK | flag::ONDISK;
        flags |= if ops.iter().any(|o| op::is_write(o.op)) {
            flag::WRITE
        } else {
            flag::READ
        };
        let msg = MOSDOp {
            tid: self.tid,
            pgid: spgid,
            hash,
            osdmap_epoch: self.map.epoch,
            flags,
            client_inc: 0,
            mtime: Utime::new(1_650_000_000, 5),
            oloc: ObjectLocator {
                pool: 1,
                ..Default::default()
            },
            oid: ObjectName::new(Bytes::copy_from_slice(name.as_bytes())),
            ops,
            snapid: SnapId::NOSNAP,
            retry_attempt: 0,
            features: u64::MAX,
            reqid: denc::OsdReqId {
                name: EntityNameT::client(4100),
                tid: self.tid,
                inc: 0,
            },
            ..Default::default()
        };
        let mut msg = msg;
        f(&mut msg);
        self.sent.insert(self.tid, msg.clone());
        self.deliver(msg, primary);
        self.tid
    }

    /// Resend op `tid` as the client does after a map change: same reqid and tid, the current epoch, to the
    /// current acting primary (on a new connection).
    pub fn resend(&mut self, tid: u64) {
        let mut msg = self.sent[&tid].clone();
        let name = String::from_utf8(msg.oid.0.to_vec()).unwrap();
        let (spgid, _, primary) = self.locate(&name);
        msg.pgid = spgid;
        msg.osdmap_epoch = self.map.epoch;
        msg.retry_attempt += 1;
        msg.flags |= flag::RETRY;
        self.replies.remove(&tid);
        self.deliver(msg, primary);
    }

    fn deliver(&mut self, msg: MOSDOp, primary: i32) {
        let cop = ClientOp {
            conn: ConnId(1 + u64::from(msg.retry_attempt as u32)),
            msg,
            client: EntityNameT::client(4100),
            client_addr: "v2:10.0.0.9:0/123".parse::<EntityAddr>().unwrap(),
            caps: self.caps.clone(),
            features: u64::MAX,
        };
        if let Some(s) = self.osds.get_mut(&primary) {
            s.handle(self.now, self.wall, Input::ClientOp(Box::new(cop)));
        }
    }

    pub fn write_full(&mut self, name: &str, data: &[u8]) -> u64 {
        self.send(
            name,
            vec![
                OSDOp::new(op::WRITEFULL)
                    .with_extent(0, data.len() as u64)
                    .with_indata(Bytes::copy_from_slice(data)),
            ],
        )
    }

    pub fn read(&mut self, name: &str) -> u64 {
        self.send(name, vec![OSDOp::new(op::READ).with_extent(0, 0)])
    }

    /// The reply to `tid`, if it came.
    pub fn reply(&self, tid: u64) -> Option<&MOSDOpReply> {
        self.replies.get(&tid)
    }

    /// A read's data (None when no reply or an error).
    pub fn read_data(&self, tid: u64) -> Option<Bytes> {
        let r = self.replies.get(&tid)?;
        if r.result < 0 {
            return None;
        }
        r.ops.first().map(|o| o.outdata.clone())
    }

    /// Every object of a PG on one OSD's store with its data, xattrs and omap (the store contents to compare).
    pub fn dump_pg(&mut self, osd: i32, spgid: SpgId) -> BTreeMap<Vec<u8>, ObjectDump> {
        let s = self.osds.get_mut(&osd).unwrap();
        let store = s.store_mut();
        let cid = pg::keys::collection_id(&spgid);
        let mut out = BTreeMap::new();
        let keys = store.list_objects(&cid, &[], None, 100_000).unwrap();
        for k in keys {
            let Some(g) = pg::keys::from_key(&k) else { continue };
            if g.is_pgmeta() {
                continue;
            }
            let st = store.stat(&cid, &k).unwrap();
            let data = store.read(&cid, &k, 0, st.size).unwrap();
            let attrs = store.getattrs(&cid, &k).unwrap();
            let omap = store.omap_iterate(&cid, &k, &[], usize::MAX).unwrap_or_default();
            out.insert(k.name.to_vec(), (data, attrs, omap));
        }
        out
    }

    /// A PG's report from an OSD.
    pub fn report(&self, osd: i32, spgid: SpgId) -> Option<osd_core::PgReport> {
        self.osds
            .get(&osd)?
            .pg_stats()
            .into_iter()
            .find(|r| r.spgid == spgid)
    }
}
