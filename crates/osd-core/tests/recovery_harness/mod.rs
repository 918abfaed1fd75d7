// SPDX-License-Identifier: LGPL-3.0-or-later
//! Test harness for recovery and backfill: a few OSDs, each with one PG (its own ferrostore on the simulated
//! device, `pg::Pg`, `peering::Pg` with a fixed map, `Recovery` and `Backfill`), and an in-memory bus that
//! carries every message as Ceph wire bytes (encoded by the sender, decoded by the receiver). Durability is
//! delivered from each store's own events, so answers that wait for it really do.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use bytes::Bytes;
use ceph_msgs::osd_rep::rep_msg;
use denc::{CEPH_FEATURES_ALL, Encode, Eversion, HObject, PgId, ShardId, SnapId, SpgId};
use ferrostore::{Event, MkfsOptions, Op, SimConfig, SimDevice, Store, StoreConfig, Transaction, mkfs};
use osd_core::{Backfill, Recovery, RecoveryCtx, RecoveryEvent, ShardConfig};
use osd_types::object_info::ObjectInfo;
use osd_types::past_intervals::PastIntervals;
use osd_types::pg_info::PgInfo;
use osd_types::pg_log_t::PgLog;
use osd_types::pg_missing::PgMissing;
use osd_types::snapset::SnapSet;
use peering::{Config, MapView, PoolView};
use pg::{PgConfig, PoolInfo};

pub const EPOCH: u32 = 10;
pub const INTERVAL: u32 = 8;

pub fn spgid() -> SpgId {
    SpgId::new(PgId::new(1, 0), ShardId::NO_SHARD)
}

pub fn new_store(seed: u64) -> Store<SimDevice> {
    new_store_sized(seed, 64 << 20)
}

pub fn new_store_sized(seed: u64, bytes: usize) -> Store<SimDevice> {
    let dev = SimDevice::new(
        bytes,
        SimConfig {
            seed,
            reorder: true,
            max_completions_per_poll: 8,
            durable_writes: false,
        },
    );
    let dev = mkfs(
        dev,
        &MkfsOptions {
            shards: 1,
            log_bytes: 8 << 20,
            uuid: seed,
            ..Default::default()
        },
    )
    .unwrap();
    Store::mount(dev, 0, StoreConfig::default()).unwrap()
}

/// An object of pool 1 (hash from the name; every object belongs to PG 1.0 of a one-PG pool).
pub fn hobj(name: &str) -> HObject {
    let mut h: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    HObject::new(
        Bytes::copy_from_slice(name.as_bytes()),
        "",
        SnapId::NOSNAP,
        h,
        1,
        "",
    )
}

pub fn ev(v: u64) -> Eversion {
    Eversion { epoch: 5, version: v }
}

/// What to store in one object.
#[derive(Debug, Clone, Default)]
pub struct Spec {
    pub version: u64,
    /// The version's epoch (0: 5, an epoch before the test interval).
    pub epoch: u32,
    /// (offset, bytes) written; holes between stay sparse.
    pub extents: Vec<(u64, Vec<u8>)>,
    pub xattrs: Vec<(&'static str, Vec<u8>)>,
    pub omap_header: Vec<u8>,
    pub omap: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Spec {
    /// A small object whose bytes depend on `seed`.
    pub fn small(version: u64, seed: u64) -> Spec {
        let data: Vec<u8> = (0..(100 + seed % 900)).map(|i| (i ^ seed) as u8).collect();
        Spec {
            version,
            epoch: 0,
            extents: vec![(0, data)],
            xattrs: vec![("_user.tag", format!("tag-{seed}").into_bytes())],
            omap_header: if seed.is_multiple_of(3) {
                format!("hdr{seed}").into_bytes()
            } else {
                vec![]
            },
            omap: (0..(seed % 4))
                .map(|k| (format!("k{k}").into_bytes(), format!("v{seed}-{k}").into_bytes()))
                .collect(),
        }
    }
    /// A large sparse object with many omap keys (several push chunks at a small `osd_recovery_max_chunk`).
    pub fn big(version: u64, seed: u64) -> Spec {
        let a: Vec<u8> = (0..150_000u32)
            .map(|i| (i.wrapping_mul(31) as u64 ^ seed) as u8)
            .collect();
        let b: Vec<u8> = (0..70_000u32)
            .map(|i| (i.wrapping_mul(7) as u64 ^ seed ^ 0x5a) as u8)
            .collect();
        Spec {
            version,
            epoch: 0,
            extents: vec![(0, a), (262_144, b)],
            xattrs: vec![("_user.big", vec![7u8; 300]), ("_user.other", b"x".to_vec())],
            omap_header: b"big-header".to_vec(),
            omap: (0..300)
                .map(|k| (format!("key{k:05}").into_bytes(), vec![(k % 251) as u8; 100]))
                .collect(),
        }
    }
}

/// Write (replace) object `name` on `store`.
pub fn put(store: &mut Store<SimDevice>, name: &str, spec: &Spec) {
    let sp = spgid();
    let h = hobj(name);
    let cid = pg::keys::collection_id(&sp);
    let key = pg::keys::object_key(&h, &sp);
    let mut t = Transaction::new();
    if store.exists(&cid, &key).unwrap() {
        t.push(Op::Remove {
            cid: cid.clone(),
            oid: key.clone(),
        });
    }
    t.push(Op::Touch {
        cid: cid.clone(),
        oid: key.clone(),
    });
    let mut size = 0u64;
    for (off, d) in &spec.extents {
        size = size.max(off + d.len() as u64);
        t.push(Op::Write {
            cid: cid.clone(),
            oid: key.clone(),
            offset: *off,
            data: Bytes::from(d.clone()),
        });
    }
    let version = Eversion {
        epoch: if spec.epoch == 0 { 5 } else { spec.epoch },
        version: spec.version,
    };
    let oi = ObjectInfo {
        soid: h.clone(),
        version,
        size,
        user_version: spec.version,
        ..Default::default()
    };
    let mut attrs = vec![
        (Bytes::from_static(b"_"), oi.to_bytes(CEPH_FEATURES_ALL)),
        (
            Bytes::from_static(b"snapset"),
            SnapSet::default().to_bytes(CEPH_FEATURES_ALL),
        ),
    ];
    for (n, v) in &spec.xattrs {
        attrs.push((Bytes::from_static(n.as_bytes()), Bytes::from(v.clone())));
    }
    t.push(Op::SetAttrs {
        cid: cid.clone(),
        oid: key.clone(),
        attrs,
    });
    if !spec.omap_header.is_empty() {
        t.push(Op::OmapSetHeader {
            cid: cid.clone(),
            oid: key.clone(),
            header: Bytes::from(spec.omap_header.clone()),
        });
    }
    if !spec.omap.is_empty() {
        t.push(Op::OmapSetKeys {
            cid: cid.clone(),
            oid: key.clone(),
            kvs: spec
                .omap
                .iter()
                .map(|(k, v)| (Bytes::from(k.clone()), Bytes::from(v.clone())))
                .collect(),
        });
    }
    store.commit(&t).unwrap();
}

/// `n` small objects `obj0000`.. (versions 1..) and two large ones, `big-a` and `big-b` (several chunks).
pub fn fill(store: &mut Store<SimDevice>, n: u64) {
    for i in 0..n {
        put(store, &format!("obj{i:04}"), &Spec::small(1 + i, i));
    }
    put(store, "big-a", &Spec::big(900, 1));
    put(store, "big-b", &Spec::big(901, 2));
}

pub fn remove(store: &mut Store<SimDevice>, name: &str) {
    let sp = spgid();
    let cid = pg::keys::collection_id(&sp);
    let key = pg::keys::object_key(&hobj(name), &sp);
    let mut t = Transaction::new();
    t.push(Op::Remove { cid, oid: key });
    store.commit(&t).unwrap();
}

/// Everything stored for one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dump {
    pub size: u64,
    pub data: Bytes,
    pub attrs: Vec<(Bytes, Bytes)>,
    pub omap_header: Bytes,
    pub omap: Vec<(Bytes, Bytes)>,
}

/// Every object of the PG (pgmeta excluded) with all its contents; panics on leftover temp objects.
pub fn dump(store: &mut Store<SimDevice>) -> BTreeMap<HObject, Dump> {
    let sp = spgid();
    let cid = pg::keys::collection_id(&sp);
    let keys = store.list_objects(&cid, &[], None, 100_000).unwrap();
    let mut out = BTreeMap::new();
    for k in keys {
        let g = pg::keys::from_key(&k).unwrap();
        if g.is_pgmeta() {
            continue;
        }
        assert!(!g.hobj.is_temp(), "temp object left behind: {}", g.hobj);
        let st = store.stat(&cid, &k).unwrap();
        let data = if st.size > 0 {
            store.read(&cid, &k, 0, st.size).unwrap()
        } else {
            Bytes::new()
        };
        let mut attrs = store.getattrs(&cid, &k).unwrap();
        attrs.sort();
        let omap_header = store.omap_get_header(&cid, &k).unwrap();
        let omap = store.omap_iterate(&cid, &k, &[], 1_000_000).unwrap();
        out.insert(
            g.hobj,
            Dump {
                size: st.size,
                data,
                attrs,
                omap_header,
                omap,
            },
        );
    }
    out
}

pub struct Node {
    pub osd: i32,
    pub cfg: ShardConfig,
    pub store: Store<SimDevice>,
    pub pg: pg::Pg,
    pub peering: peering::Pg,
    pub rec: Recovery,
    pub bf: Backfill,
    /// Every `Recovered` event this node emitted: (osd, oid, version).
    pub recovered: Vec<(i32, HObject, Eversion)>,
    /// `LastBackfill` values in the order they came.
    pub last_backfill: Vec<HObject>,
    pub backfill_done: Vec<i32>,
    pub logs: Vec<String>,
}

pub struct Net {
    pub nodes: BTreeMap<i32, Node>,
    pub bus: VecDeque<(i32, i32, ceph_msgs::Message)>,
    /// Messages sent, by type.
    pub sent: BTreeMap<u16, usize>,
    /// The most objects any node had in flight (recovery or backfill) at once.
    pub max_in_flight: u64,
    pub steps: u64,
    /// The monotonic time handed to the engines.
    pub now: Duration,
}

pub fn map(acting: &[i32]) -> MapView {
    MapView {
        epoch: EPOCH,
        pool: PoolView {
            size: acting.len() as u32,
            min_size: 1,
        },
        up: acting.to_vec(),
        up_primary: acting[0],
        acting: acting.to_vec(),
        acting_primary: acting[0],
        up_thru: acting.iter().map(|&o| (o, EPOCH)).collect(),
        up_osds: acting.iter().copied().collect(),
    }
}

impl Net {
    /// Nodes `osds` (the first is the primary), all in the acting set, with a fresh PG each;
    /// `max_active`/`max_chunk` are `osd_recovery_max_active`/`osd_recovery_max_chunk`.
    pub fn new(osds: &[i32], max_active: u32, max_chunk: u64) -> Net {
        Self::with_store_size(osds, max_active, max_chunk, 64 << 20)
    }

    /// As [`Net::new`] with `store_bytes` of simulated device per OSD.
    pub fn with_store_size(osds: &[i32], max_active: u32, max_chunk: u64, store_bytes: usize) -> Net {
        let sp = spgid();
        let mut nodes = BTreeMap::new();
        for &osd in osds {
            let mut cfg = ShardConfig::new(osd, 0, 1);
            cfg.osd_recovery_max_active = max_active;
            cfg.osd_recovery_max_chunk = max_chunk;
            let mut store = new_store_sized(100 + osd as u64, store_bytes);
            let pool = PoolInfo {
                id: 1,
                name: "p".into(),
                pg_num: 1,
                erasure: false,
                applications: vec![],
            };
            let mut pgo = pg::Pg::new(
                sp,
                pool,
                PgConfig {
                    osd_id: osd,
                    ..PgConfig::default()
                },
            );
            let seq = pgo.create(&mut store, 1).unwrap();
            store.wait_durable(seq).unwrap();
            let peering = make_peering(osd, PgMissing::default(), osds);
            nodes.insert(
                osd,
                Node {
                    osd,
                    cfg,
                    store,
                    pg: pgo,
                    peering,
                    rec: Recovery::new(sp),
                    bf: Backfill::new(sp),
                    recovered: Vec::new(),
                    last_backfill: Vec::new(),
                    backfill_done: Vec::new(),
                    logs: Vec::new(),
                },
            );
        }
        Net {
            nodes,
            bus: VecDeque::new(),
            sent: BTreeMap::new(),
            max_in_flight: 0,
            steps: 0,
            now: Duration::from_secs(1),
        }
    }

    pub fn node(&mut self, osd: i32) -> &mut Node {
        self.nodes.get_mut(&osd).unwrap()
    }

    /// Give `osd` the local missing set peering would have given it.
    pub fn set_missing(&mut self, osd: i32, missing: PgMissing) {
        let acting: Vec<i32> = self.nodes.keys().copied().collect();
        self.node(osd).peering = make_peering(osd, missing, &acting);
    }

    /// Run `f` with `osd`'s recovery context, then route what came out.
    pub fn with<R>(
        &mut self,
        osd: i32,
        f: impl FnOnce(&mut Recovery, &mut Backfill, &mut RecoveryCtx<'_, SimDevice>) -> R,
    ) -> R {
        let mut evs = Vec::new();
        let now = self.now;
        let n = self.nodes.get_mut(&osd).unwrap();
        let r = {
            let mut ctx = RecoveryCtx {
                whoami: osd,
                spgid: spgid(),
                epoch: EPOCH,
                same_interval_since: n.peering.info().history.same_interval_since,
                now,
                cfg: &n.cfg,
                store: &mut n.store,
                pg: &mut n.pg,
                peering: &n.peering,
                out: &mut evs,
            };
            f(&mut n.rec, &mut n.bf, &mut ctx)
        };
        for e in evs {
            match e {
                RecoveryEvent::Send { to, msg } => {
                    *self.sent.entry(msg.msg_type).or_default() += 1;
                    self.bus.push_back((osd, to, msg));
                }
                RecoveryEvent::Recovered { osd: o, oid, version } => {
                    n.recovered.push((o, oid.clone(), version));
                    n.peering.handle(
                        Duration::from_secs(1),
                        peering::Event::ObjectRecovered { osd: o, oid, version },
                    );
                }
                RecoveryEvent::BackfillDone { osd: o } => n.backfill_done.push(o),
                RecoveryEvent::LastBackfill(h) => {
                    n.last_backfill.push(h.clone());
                    n.peering.set_last_backfill(h);
                }
                RecoveryEvent::WaitDurable(_) => {}
                RecoveryEvent::Log(s) => n.logs.push(s),
            }
        }
        while n.peering.poll_output().is_some() {}
        let inflight = n.rec.progress().ops_in_flight + n.bf.progress().ops_in_flight;
        self.max_in_flight = self.max_in_flight.max(inflight);
        r
    }

    /// Deliver one message (routing as the core does), or one round of durability events; false when idle.
    pub fn step(&mut self) -> bool {
        self.steps += 1;
        assert!(self.steps < 1_000_000, "no progress");
        if let Some((from, to, msg)) = self.bus.pop_front() {
            let backfill_kind = matches!(
                msg.msg_type,
                rep_msg::PG_SCAN
                    | rep_msg::PG_BACKFILL
                    | rep_msg::PG_BACKFILL_REMOVE
                    | rep_msg::BACKFILL_RESERVE
            );
            self.with(to, |rec, bf, ctx| {
                let r = if backfill_kind || (bf.is_active() && !rec.is_active()) {
                    bf.handle_message(ctx, from, &msg)
                } else {
                    rec.handle_message(ctx, from, &msg)
                };
                r.unwrap_or_else(|e| panic!("osd.{to} handling type {} from osd.{from}: {e}", msg.msg_type));
            });
            self.poll_durable(false);
            return true;
        }
        if self.nodes.values().any(|n| n.store.unacked() > 0) {
            self.poll_durable(true);
            return true;
        }
        self.poll_durable(false)
    }

    /// Feed each store's durability events to its node; with `block`, wait for stores with work in flight.
    fn poll_durable(&mut self, block: bool) -> bool {
        let mut any = false;
        let osds: Vec<i32> = self.nodes.keys().copied().collect();
        for osd in osds {
            let mut evs = Vec::new();
            {
                let n = self.node(osd);
                if block && n.store.unacked() > 0 {
                    n.store.wait(&mut evs).unwrap();
                } else {
                    n.store.poll(&mut evs).unwrap();
                }
            }
            for e in evs {
                if let Event::Durable(seq) = e {
                    any = true;
                    self.with(osd, |rec, bf, ctx| {
                        rec.on_durable(ctx, seq);
                        bf.on_durable(ctx, seq);
                    });
                }
            }
        }
        any || !self.bus.is_empty()
    }

    /// Run until nothing moves.
    pub fn run(&mut self) {
        while self.step() {}
        for n in self.nodes.values() {
            assert_eq!(n.store.unacked(), 0);
        }
    }

    pub fn dump(&mut self, osd: i32) -> BTreeMap<HObject, Dump> {
        dump(&mut self.node(osd).store)
    }
}

fn make_peering(osd: i32, missing: PgMissing, acting: &[i32]) -> peering::Pg {
    let sp = spgid();
    let mut info = PgInfo {
        pgid: sp.pgid,
        ..Default::default()
    };
    info.history.same_interval_since = INTERVAL;
    info.history.same_primary_since = INTERVAL;
    info.last_backfill = HObject::max_value();
    peering::Pg::new(
        osd,
        sp,
        info,
        PgLog::default(),
        missing,
        PastIntervals::default(),
        Config::default(),
    )
    .with_last_map(map(acting))
}

/// A missing set from (name, need, have, is_delete).
pub fn missing(items: &[(&str, u64, u64, bool)]) -> PgMissing {
    let mut m = PgMissing::default();
    for &(n, need, have, del) in items {
        m.add(
            hobj(n),
            ev(need),
            if have == 0 { Eversion::default() } else { ev(have) },
            del,
        );
    }
    m
}

/// The (osd, object) pairs of missing sets.
pub fn pairs(sets: &BTreeMap<i32, PgMissing>) -> BTreeSet<(i32, HObject)> {
    sets.iter()
        .flat_map(|(o, m)| m.missing.keys().map(move |h| (*o, h.clone())))
        .collect()
}
