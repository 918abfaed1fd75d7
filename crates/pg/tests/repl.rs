// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)] // test harness: a panic is the failure report
//! Replication, storage side: every write op family's Ceph transaction, decoded from its wire bytes and applied
//! to a replica's store, leaves the replica's objects (data, xattrs, omap) and log identical to the primary's;
//! replies wait for every replica's commit; peering's store writes survive a restart; pushes (one chunk or many)
//! copy objects exactly; scan, remove, split and PG removal.

mod common;

use std::collections::BTreeMap;

use bytes::Bytes;
use ceph_msgs::osd_op::{MOSDOp, MOSDOpReply, OSDOp, flag, op};
use common::osdop::*;
use common::sim::{self, dump};
use denc::{
    Decode, Encode, Encoder, EntityAddr, EntityNameT, Eversion, HObject, ObjectLocator, ObjectName, ShardId,
    SnapId, SpgId, Utime,
};
use ferrostore::{Event, ObjectKey, SimDevice, Store, StoreConfig};
use osd_types::past_intervals::PastIntervals;
use osd_types::pg_missing::PgMissing;
use osd_types::recovery::ObjectRecoveryProgress;
use osd_types::transaction::Transaction;
use pg::{ConnId, OpContext, OsdCap, Outputs, Pg, PgConfig, PoolInfo, RepOp};

const EPOCH: u32 = 7;

fn pool(pg_num: u32) -> PoolInfo {
    sim::pool(3, "data", pg_num)
}

fn spgid() -> SpgId {
    sim::spgid(3)
}

fn new_store(seed: u64) -> Store<SimDevice> {
    sim::sim_store(32 << 20, 1 << 20, 5, sim::sim(seed, true, 3, false))
}

fn new_pg(store: &mut Store<SimDevice>, primary: bool) -> Pg {
    let mut pg = sim::created_pg(store, pool(1), PgConfig::default(), EPOCH);
    pg.set_primary(primary);
    pg
}

/// A primary and its replicas, each on its own store.
struct Cluster {
    store: Store<SimDevice>,
    pg: Pg,
    replicas: Vec<(i32, Store<SimDevice>, Pg)>,
    caps: OsdCap,
    tid: u64,
    repops: usize,
    /// Rep ops go as the MOSDRepOp a ferro-osd sends (front encoded, the shared transaction bytes as data) and
    /// are applied with `apply_rep_op_msg` (stats taken from the primary's `pg_stats`).
    via_messages: bool,
}

impl Cluster {
    fn new(n_replicas: i32) -> Cluster {
        let mut store = new_store(11);
        let mut pg = new_pg(&mut store, true);
        let mut replicas = Vec::new();
        for i in 1..=n_replicas {
            let mut s = new_store(11 + i as u64);
            let r = new_pg(&mut s, false);
            replicas.push((i, s, r));
        }
        let _ = pg.set_replicas((1..=n_replicas).collect());
        Cluster {
            store,
            pg,
            replicas,
            caps: OsdCap::allow_all(),
            tid: 0,
            repops: 0,
            via_messages: false,
        }
    }

    fn msg(&mut self, oid: &str, ops: Vec<OSDOp>) -> MOSDOp {
        self.tid += 1;
        let mut flags = flag::ACK | flag::ONDISK;
        flags |= if ops.iter().any(|o| op::is_write(o.op)) {
            flag::WRITE
        } else {
            flag::READ
        };
        MOSDOp {
            tid: self.tid,
            pgid: spgid(),
            hash: name_hash(oid),
            osdmap_epoch: EPOCH,
            flags,
            mtime: Utime::new(1_650_000_000, 5),
            oloc: ObjectLocator {
                pool: 3,
                ..Default::default()
            },
            oid: ObjectName::new(Bytes::copy_from_slice(oid.as_bytes())),
            ops,
            snapid: SnapId::NOSNAP,
            features: u64::MAX,
            ..Default::default()
        }
    }

    /// Replicate one rep op: decode its wire transaction, apply it on every replica, durably, and report each
    /// replica's commit to the primary.
    fn replicate(&mut self, rep: RepOp) -> Outputs {
        self.repops += 1;
        let t = Transaction::decode_all(rep.txn_bytes()).unwrap();
        assert_eq!(
            t, rep.txn,
            "the wire transaction decodes to what the primary built"
        );
        assert_eq!(t.to_bytes(u64::MAX), rep.txn_bytes());
        let mut out = Outputs::default();
        let msg = self.via_messages.then(|| {
            use ceph_msgs::CephMessage as _;
            let from = denc::PgShard::new(0, ShardId::NO_SHARD);
            // the message as the typed struct encodes it, and as `RepOp::message` builds it (cached front)
            let mut m = rep.to_message(&self.pg, EPOCH, EPOCH, from, Eversion::default());
            m.op_t = Transaction::default();
            let mut wire = m.to_message(u64::MAX);
            wire.data = rep.txn_bytes();
            for with_data in [true, true, false] {
                let got = rep.message(
                    &self.pg,
                    EPOCH,
                    EPOCH,
                    from,
                    Eversion::default(),
                    u64::MAX,
                    with_data,
                );
                assert_eq!(got.front, wire.front);
                assert_eq!(
                    (got.msg_type, got.version, got.compat_version),
                    (wire.msg_type, wire.version, wire.compat_version)
                );
                assert_eq!(
                    got.data_flat(),
                    if with_data {
                        wire.data.clone()
                    } else {
                        Transaction::default().to_bytes(u64::MAX)
                    }
                );
            }
            // without data: a rep op with an empty transaction, as a backfill target beyond the cursor gets it
            let bare = rep.message(&self.pg, EPOCH, EPOCH, from, Eversion::default(), u64::MAX, false);
            let bare = ceph_msgs::osd_rep::MOSDRepOp::from_message(&bare).unwrap();
            assert!(bare.op_t.is_empty());
            assert_eq!(&bare.logbl, rep.logbl());
            // another epoch: a fresh front, not the cached one
            let later = rep.message(
                &self.pg,
                EPOCH + 1,
                EPOCH,
                from,
                Eversion::default(),
                u64::MAX,
                true,
            );
            let dec = ceph_msgs::osd_rep::MOSDRepOp::from_message(&later).unwrap();
            assert_eq!(dec.map_epoch, EPOCH + 1);
            ceph_msgs::osd_rep::MOSDRepOp::from_message(&wire).unwrap()
        });
        for (osd, s, r) in &mut self.replicas {
            let seq = match &msg {
                Some(m) => r.apply_rep_op_msg(s, m).unwrap(),
                None => r.apply_rep_op(s, &t, &rep.log_entries, rep.trim_to).unwrap(),
            };
            s.wait_durable(seq).unwrap();
            let o = self.pg.on_rep_commit(*osd, rep.at_version);
            out.replies.extend(o.replies);
        }
        out
    }

    fn send(&mut self, m: MOSDOp) -> MOSDOpReply {
        let caps = self.caps.clone();
        let ctx = OpContext {
            msg: m.clone(),
            conn: ConnId(1),
            client: EntityNameT::client(4100),
            client_addr: "v2:10.0.0.9:0/123".parse::<EntityAddr>().unwrap(),
            caps: &caps,
            conn_features: u64::MAX,
            epoch: EPOCH,
            now: Utime::new(1_700_000_000, 0),
        };
        let out = self.pg.handle_op(&mut self.store, ctx);
        let mut replies = out.replies;
        for rep in out.repops {
            replies.extend(self.replicate(rep).replies);
        }
        while replies.is_empty() {
            assert!(self.pg.held_replies() > 0, "no reply and nothing held");
            let mut ev = Vec::new();
            self.store.wait(&mut ev).unwrap();
            for e in ev {
                if let Event::Durable(s) = e {
                    replies.extend(self.pg.on_commit(s).replies);
                }
            }
        }
        assert_eq!(replies.len(), 1);
        replies.pop().unwrap().1
    }

    fn run(&mut self, oid: &str, ops: Vec<OSDOp>) -> MOSDOpReply {
        let m = self.msg(oid, ops);
        self.send(m)
    }
}

/// Everything a PG collection holds, per object: (size, data, xattrs, omap header, omap); the pgmeta object
/// contributes only its log entries and dups.
fn assert_same(c: &mut Cluster) {
    let cid = c.pg.collection().clone();
    let a = dump(&mut c.store, &cid);
    assert!(a.len() > 1, "the primary holds objects");
    for (osd, s, r) in &mut c.replicas {
        let b = dump(s, &cid);
        assert_eq!(a.len(), b.len(), "osd.{osd}: object count");
        for ((ka, va), (kb, vb)) in a.iter().zip(&b) {
            assert_eq!(ka, kb, "osd.{osd}: object names");
            assert_eq!(va, vb, "osd.{osd}: {:?}", denc::GHObject::from_sort_key(ka));
        }
        assert_eq!(
            r.stats().num_objects,
            c.pg.stats().num_objects,
            "osd.{osd}: objects"
        );
        assert_eq!(r.stats().num_bytes, c.pg.stats().num_bytes, "osd.{osd}: bytes");
        assert_eq!(
            r.stats().last_update,
            c.pg.stats().last_update,
            "osd.{osd}: last_update"
        );
        assert_eq!(r.info().last_update, c.pg.info().last_update);
    }
}

#[test]
fn every_write_family_replicates_to_identical_objects() {
    let mut c = Cluster::new(2);
    every_write_family(&mut c);
}

/// Through MOSDRepOp: the replicas' objects are the primary's, and the statistics they take from the primary's
/// `pg_stats` (instead of looking each written object up) are what a scan of their own store finds.
#[test]
fn every_write_family_replicates_through_messages_with_the_primarys_stats() {
    let mut c = Cluster::new(2);
    c.via_messages = true;
    every_write_family(&mut c);
    for (osd, s, r) in &mut c.replicas {
        let sent = r.stats();
        r.refresh_stats(s).unwrap();
        let scanned = r.stats();
        assert_eq!(
            (sent.num_objects, sent.num_bytes, sent.num_omap_objects),
            (scanned.num_objects, scanned.num_bytes, scanned.num_omap_objects),
            "osd.{osd}: stats from the primary = stats of the replica's store"
        );
        assert!(scanned.num_objects > 5);
    }
}

fn every_write_family(c: &mut Cluster) {
    // data: write, writefull, append, zero, truncate, writesame, create, delete, set-alloc-hint
    assert_eq!(c.run("d", vec![write(0, b"hello world")]).result, 0);
    assert_eq!(c.run("d", vec![write(100, b"tail")]).result, 0);
    let wf = OSDOp::new(op::WRITEFULL)
        .with_extent(0, 5)
        .with_indata(&b"fresh"[..]);
    assert_eq!(c.run("wf", vec![wf]).result, 0);
    let ap = OSDOp::new(op::APPEND).with_extent(0, 3).with_indata(&b"abc"[..]);
    assert_eq!(c.run("wf", vec![ap]).result, 0);
    assert_eq!(c.run("d", vec![OSDOp::new(op::ZERO).with_extent(2, 3)]).result, 0);
    assert_eq!(
        c.run("d", vec![OSDOp::new(op::TRUNCATE).with_extent(50, 0)])
            .result,
        0
    );
    let mut ws = OSDOp::new(op::WRITESAME).with_indata(&b"xy"[..]);
    ws.args[0..8].copy_from_slice(&8u64.to_le_bytes());
    ws.args[8..16].copy_from_slice(&10u64.to_le_bytes());
    ws.args[16..24].copy_from_slice(&2u64.to_le_bytes());
    assert_eq!(c.run("ws", vec![ws]).result, 0);
    assert_eq!(c.run("e", vec![OSDOp::new(op::CREATE)]).result, 0);
    assert_eq!(c.run("gone", vec![write(0, b"x")]).result, 0);
    assert_eq!(c.run("gone", vec![OSDOp::new(op::DELETE)]).result, 0);
    // a failed write logs an error entry (replicated too) and changes nothing
    assert_eq!(c.run("gone", vec![OSDOp::new(op::DELETE)]).result, -2);
    // xattrs
    assert_eq!(c.run("x", vec![xattr_op(op::SETXATTR, "a", b"1")]).result, 0);
    assert_eq!(c.run("x", vec![xattr_op(op::SETXATTR, "b", b"2")]).result, 0);
    assert_eq!(c.run("x", vec![xattr_op(op::RMXATTR, "a", b"")]).result, 0);
    // omap
    assert_eq!(
        c.run("m", vec![omap_set(&[("a", "1"), ("b", "2"), ("c", "3")])])
            .result,
        0
    );
    assert_eq!(
        c.run("m", vec![OSDOp::new(op::OMAPSETHEADER).with_indata(&b"hdr"[..])])
            .result,
        0
    );
    let rm: std::collections::BTreeSet<Bytes> = [Bytes::from_static(b"a")].into();
    assert_eq!(
        c.run("m", vec![OSDOp::new(op::OMAPRMKEYS).with_indata(rm.to_bytes(0))])
            .result,
        0
    );
    let mut e = Encoder::new(0);
    e.string("b");
    e.string("b9");
    assert_eq!(
        c.run(
            "m",
            vec![OSDOp::new(op::OMAPRMKEYRANGE).with_indata(e.into_bytes())]
        )
        .result,
        0
    );
    assert_eq!(c.run("m2", vec![omap_set(&[("k", "v")])]).result, 0);
    assert_eq!(c.run("m2", vec![OSDOp::new(op::OMAPCLEAR)]).result, 0);
    // several ops in one request
    assert_eq!(
        c.run(
            "multi",
            vec![
                write(0, b"abc"),
                xattr_op(op::SETXATTR, "k", b"v"),
                omap_set(&[("z", "1")])
            ]
        )
        .result,
        0
    );
    // cls: lock (an xattr through cls)
    let mut le = Encoder::new(0);
    le.versioned(1, 1, |e| {
        e.string("L");
        e.u8(1);
        e.string("cookie");
        e.string("");
        e.string("desc");
        e.encode(&Utime::default());
        e.u8(0);
    });
    assert_eq!(c.run("l", vec![call("lock", "lock", le.into_bytes())]).result, 0);
    // snapshots: a write under a newer snap context clones the head
    assert_eq!(c.run("s", vec![write(0, b"v1v1")]).result, 0);
    let mut m = c.msg("s", vec![write(0, b"v2")]);
    m.snap_seq = SnapId(5);
    m.snaps = vec![SnapId(5)];
    assert_eq!(c.send(m).result, 0);
    assert_same(c);
    assert!(c.repops >= 20, "{} rep ops", c.repops);
}

#[test]
fn log_trimming_follows_the_primary() {
    let mut c = Cluster::new(1);
    let cfg = PgConfig {
        osd_min_pg_log_entries: 5,
        osd_pg_log_trim_min: 2,
        osd_pg_log_dups_tracked: 4,
        ..PgConfig::default()
    };
    let mut s = new_store(1);
    let mut p = Pg::new(spgid(), pool(1), cfg.clone());
    let seq = p.create(&mut s, EPOCH).unwrap();
    s.wait_durable(seq).unwrap();
    p.on_commit(seq);
    let _ = p.set_replicas(vec![1]);
    c.store = s;
    c.pg = p;
    c.replicas.clear();
    let mut rs = new_store(2);
    let mut r = Pg::new(spgid(), pool(1), cfg);
    r.set_primary(false);
    let seq = r.create(&mut rs, EPOCH).unwrap();
    rs.wait_durable(seq).unwrap();
    c.replicas.push((1, rs, r));
    for i in 0..20 {
        assert_eq!(c.run(&format!("o{i}"), vec![write(0, b"x")]).result, 0);
    }
    assert!(c.pg.stats().log_size <= 7);
    assert_same(&mut c);
    let (_, rs, r) = &mut c.replicas[0];
    assert_eq!(r.meta().log, c.pg.meta().log);
    // and after a restart of the replica
    let mut again = Pg::new(spgid(), pool(1), PgConfig::default());
    again.load(rs).unwrap();
    assert_eq!(again.meta().log.log, c.pg.meta().log.log);
    assert_eq!(again.info().last_update, c.pg.info().last_update);
}

#[test]
fn replies_wait_for_every_replica() {
    let mut c = Cluster::new(2);
    let m = c.msg("o", vec![write(0, b"data")]);
    let caps = c.caps.clone();
    let ctx = OpContext {
        msg: m,
        conn: ConnId(1),
        client: EntityNameT::client(4100),
        client_addr: "v2:10.0.0.9:0/123".parse::<EntityAddr>().unwrap(),
        caps: &caps,
        conn_features: u64::MAX,
        epoch: EPOCH,
        now: Utime::new(1_700_000_000, 0),
    };
    let out = c.pg.handle_op(&mut c.store, ctx);
    assert!(out.replies.is_empty());
    assert_eq!(out.repops.len(), 1);
    let rep = out.repops.into_iter().next().unwrap();
    assert_eq!(rep.replicas, vec![1, 2]);
    // durable here: still waiting for both replicas
    let mut ev = Vec::new();
    while c.store.unacked() > 0 {
        c.store.wait(&mut ev).unwrap();
    }
    for e in ev {
        if let Event::Durable(s) = e {
            assert!(c.pg.on_commit(s).replies.is_empty());
        }
    }
    // a read of the object waits too (it must not see a write a replica may not have)
    let rd = c.msg("o", vec![OSDOp::new(op::READ).with_extent(0, 4)]);
    let ctx = OpContext {
        msg: rd,
        conn: ConnId(2),
        client: EntityNameT::client(4101),
        client_addr: "v2:10.0.0.9:0/124".parse::<EntityAddr>().unwrap(),
        caps: &caps,
        conn_features: u64::MAX,
        epoch: EPOCH,
        now: Utime::new(1_700_000_000, 0),
    };
    assert!(c.pg.handle_op(&mut c.store, ctx).replies.is_empty());
    assert!(c.pg.on_rep_commit(1, rep.at_version).replies.is_empty());
    assert!(
        c.pg.on_rep_commit(1, rep.at_version).replies.is_empty(),
        "a duplicate ack changes nothing"
    );
    let out = c.pg.on_rep_commit(2, rep.at_version);
    assert_eq!(out.replies.len(), 2, "the write's reply, then the read's");
    assert_eq!(out.replies[0].0, ConnId(1));
    assert_eq!(out.replies[1].0, ConnId(2));
    assert_eq!(&out.replies[1].1.ops[0].outdata[..], b"data");
    assert_eq!(c.pg.unreplicated(), 0);
    // a replica that leaves the acting set no longer holds replies back
    let m = c.msg("p", vec![write(0, b"x")]);
    let ctx = OpContext {
        msg: m,
        conn: ConnId(3),
        client: EntityNameT::client(4100),
        client_addr: "v2:10.0.0.9:0/123".parse::<EntityAddr>().unwrap(),
        caps: &caps,
        conn_features: u64::MAX,
        epoch: EPOCH,
        now: Utime::new(1_700_000_000, 0),
    };
    let out = c.pg.handle_op(&mut c.store, ctx);
    let v = out.repops[0].at_version;
    c.store.wait_durable(out.repops[0].seq).unwrap();
    assert!(c.pg.on_commit(out.repops[0].seq).replies.is_empty());
    assert!(c.pg.on_rep_commit(1, v).replies.is_empty());
    let out = c.pg.set_replicas(vec![1]);
    assert_eq!(out.replies.len(), 1);
    // a replica never executes client ops
    let (_, s, r) = &mut c.replicas[0];
    let m = MOSDOp {
        oid: ObjectName::new(Bytes::from_static(b"o")),
        ..Default::default()
    };
    let ctx = OpContext {
        msg: m,
        conn: ConnId(9),
        client: EntityNameT::client(1),
        client_addr: EntityAddr::default(),
        caps: &caps,
        conn_features: 0,
        epoch: EPOCH,
        now: Utime::default(),
    };
    assert!(r.handle_op(s, ctx).is_empty());
}

#[test]
fn peering_writes_survive_a_restart() {
    let mut s = new_store(3);
    let mut p = new_pg(&mut s, true);
    let mut c = Cluster::new(0);
    for i in 0..3 {
        assert_eq!(c.run(&format!("o{i}"), vec![write(0, b"abc")]).result, 0);
    }
    let entries = c.pg.meta().log.log;
    assert_eq!(entries.len(), 3);
    let mut info = c.pg.info();
    info.history.same_interval_since = 42;
    info.history.last_epoch_started = 40;
    info.last_epoch_started = 40;
    let mut pi = PastIntervals::new_compact();
    pi.add_interval(
        30,
        41,
        [denc::PgShard {
            osd: 1,
            shard: ShardId::NO_SHARD,
        }]
        .into(),
        true,
    );
    let mut missing = PgMissing::default();
    let gone = HObject::new("o1.x_y%z", "", SnapId::NOSNAP, name_hash("o1.x_y%z"), 3, "");
    missing.add(gone.clone(), entries[1].version, Eversion::default(), false);
    let ps = vec![
        peering::Persist::LogAppend(entries.clone()),
        peering::Persist::Missing(missing.clone()),
        peering::Persist::Info {
            info: Box::new(info.clone()),
            past_intervals: pi.clone(),
        },
    ];
    let seq = p.persist(&mut s, &ps, 43).unwrap();
    s.wait_durable(seq).unwrap();
    // divergent entries go, and the missing set shrinks
    let ps = vec![
        peering::Persist::LogRemove(vec![entries[2].version]),
        peering::Persist::Missing(PgMissing::default()),
    ];
    let seq = p.persist(&mut s, &ps, 43).unwrap();
    s.wait_durable(seq).unwrap();
    let ps = vec![peering::Persist::Missing(missing.clone())];
    p.persist(&mut s, &ps, 43).unwrap();
    let before = p.meta();
    assert_eq!(before.log.log, entries[..2].to_vec());
    // restart: remount the store and load
    let dev = s.umount().unwrap();
    let mut s = Store::mount(dev, 0, StoreConfig::default()).unwrap();
    let mut q = Pg::new(spgid(), pool(1), PgConfig::default());
    q.load(&mut s).unwrap();
    let after = q.meta();
    assert_eq!(after.log.log, before.log.log);
    assert_eq!(after.missing, missing);
    assert_eq!(after.past_intervals, pi);
    assert_eq!(after.info.history, info.history);
    assert_eq!(after.info.last_epoch_started, 40);
    assert_eq!(after.info.last_update, entries[1].version);
    // the keys are Ceph's
    let cid = q.collection().clone();
    let meta = spgid().make_pgmeta_oid();
    let mk = ObjectKey::new(meta.hobj.hash, meta.to_sort_key());
    let keys: Vec<Bytes> = s
        .omap_iterate(&cid, &mk, &[], 1000)
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    for k in [
        "_infover",
        "_info",
        "_biginfo",
        "_epoch",
        "may_include_deletes_in_missing",
    ] {
        assert!(keys.iter().any(|x| &x[..] == k.as_bytes()), "{k} in {keys:?}");
    }
    let mkey = format!("missing/{}", osd_types::pgmeta::hobject_to_str(&gone));
    assert!(keys.iter().any(|x| x[..] == *mkey.as_bytes()), "{mkey}");
    assert!(mkey.contains("o1%ex%uy%pz"), "{mkey}");
    assert!(
        keys.iter()
            .any(|x| x[..] == *osd_types::pg_log::eversion_key(entries[0].version).as_bytes())
    );
}

#[test]
fn pushes_copy_objects_exactly_in_one_or_many_chunks() {
    let mut c = Cluster::new(0);
    let big: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
    assert_eq!(c.run("big", vec![write(0, &big)]).result, 0);
    let kv: Vec<(String, String)> = (0..50).map(|i| (format!("key{i:03}"), "v".repeat(200))).collect();
    let kvr: Vec<(&str, &str)> = kv.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    assert_eq!(c.run("big", vec![omap_set(&kvr)]).result, 0);
    assert_eq!(
        c.run("big", vec![OSDOp::new(op::OMAPSETHEADER).with_indata(&b"H"[..])])
            .result,
        0
    );
    assert_eq!(
        c.run("big", vec![xattr_op(op::SETXATTR, "user", b"attr")]).result,
        0
    );
    assert_eq!(c.run("small", vec![write(0, b"tiny")]).result, 0);
    let (objs, next) = c.pg.scan(&mut c.store, &HObject::default(), 100).unwrap();
    assert!(next.is_max());
    assert_eq!(objs.len(), 2);
    let mut t = new_store(9);
    let mut target = new_pg(&mut t, false);
    for (oid, v) in &objs {
        assert_eq!(c.pg.object_version(&mut c.store, oid).unwrap(), Some(*v));
        let info = c.pg.recovery_info(&mut c.store, oid).unwrap();
        let mut progress = ObjectRecoveryProgress::default();
        let mut chunks = 0;
        loop {
            let p = c.pg.build_push(&mut c.store, &info, &progress, 16 << 10).unwrap();
            // the wire form round-trips
            let p = osd_types::recovery::PushOp::decode_all(p.to_bytes(u64::MAX)).unwrap();
            chunks += 1;
            let a = target.apply_push(&mut t, &p).unwrap();
            t.wait_durable(a.seq).unwrap();
            if p.after_progress.data_complete {
                assert!(a.complete);
                break;
            }
            assert!(!a.complete);
            progress = p.after_progress.clone();
            assert!(chunks < 100);
        }
        if oid.oid.as_bytes() == b"big" {
            assert!(chunks > 5, "{chunks} chunks");
        } else {
            assert_eq!(chunks, 1);
        }
    }
    let cid = c.pg.collection().clone();
    assert_eq!(
        dump(&mut c.store, &cid)
            .into_iter()
            .filter(|(k, _)| !denc::GHObject::from_sort_key(k).unwrap().is_pgmeta())
            .collect::<Vec<_>>(),
        dump(&mut t, &cid)
            .into_iter()
            .filter(|(k, _)| !denc::GHObject::from_sort_key(k).unwrap().is_pgmeta())
            .collect::<Vec<_>>()
    );
    assert_eq!(target.stats().num_objects, 2);
    assert_eq!(target.stats().num_bytes, 100_004);
    // the default chunk is Ceph's 8 MiB: one push
    let info = c.pg.recovery_info(&mut c.store, &objs[0].0).unwrap();
    let p =
        c.pg.build_push(
            &mut c.store,
            &info,
            &ObjectRecoveryProgress::default(),
            pg::OSD_RECOVERY_MAX_CHUNK,
        )
        .unwrap();
    assert!(p.after_progress.data_complete);
    // removing
    assert!(target.remove_object(&mut t, &objs[0].0).unwrap().is_some());
    assert!(target.remove_object(&mut t, &objs[0].0).unwrap().is_none());
    assert_eq!(target.object_version(&mut t, &objs[0].0).unwrap(), None);
    assert_eq!(target.stats().num_objects, 1);
}

#[test]
fn split_moves_objects_log_and_missing_and_remove_clears() {
    let mut c = Cluster::new(0);
    let names: Vec<String> = (0..40).map(|i| format!("obj{i}")).collect();
    for n in &names {
        assert_eq!(c.run(n, vec![write(0, n.as_bytes())]).result, 0);
    }
    let (children, seq) = c.pg.split(&mut c.store, 4, EPOCH + 1).unwrap();
    c.store.wait_durable(seq.unwrap()).unwrap();
    assert_eq!(children.len(), 3);
    let mut total = c.pg.stats().num_objects;
    for ch in &children {
        let seed = ch.spgid().pgid.seed;
        let (objs, _) = ch.list_objects(&mut c.store, &HObject::default(), 1000).unwrap();
        assert_eq!(objs.len() as u64, ch.stats().num_objects);
        assert!(objs.iter().all(|o| o.hash & 3 == seed));
        let m = ch.meta();
        assert!(m.log.log.iter().all(|e| e.soid.hash & 3 == seed));
        assert_eq!(m.log.log.len(), objs.len(), "one entry per object");
        assert_eq!(m.info.history.epoch_created, EPOCH + 1);
        // and from the store
        let mut again = Pg::new(ch.spgid(), pool(4), PgConfig::default());
        again.load(&mut c.store).unwrap();
        assert_eq!(again.meta().log.log, m.log.log);
        assert_eq!(again.stats().num_objects, ch.stats().num_objects);
        total += ch.stats().num_objects;
    }
    assert_eq!(total, 40);
    let (objs, _) =
        c.pg.list_objects(&mut c.store, &HObject::default(), 1000)
            .unwrap();
    assert!(objs.iter().all(|o| o.hash & 3 == 0));
    assert!(c.pg.meta().log.log.iter().all(|e| e.soid.hash & 3 == 0));
    // removing a child takes its collection
    let ch = children.into_iter().next().unwrap();
    let cid = ch.collection().clone();
    let seq = ch.remove(&mut c.store, 3).unwrap();
    c.store.wait_durable(seq).unwrap();
    assert!(!c.store.collection_exists(&cid).unwrap());
}

#[test]
fn resent_rep_ops_change_nothing_and_stored_pgs_are_found() {
    let mut c = Cluster::new(1);
    let m = c.msg("o", vec![write(0, b"once")]);
    let caps = c.caps.clone();
    let ctx = OpContext {
        msg: m,
        conn: ConnId(1),
        client: EntityNameT::client(4100),
        client_addr: "v2:10.0.0.9:0/123".parse::<EntityAddr>().unwrap(),
        caps: &caps,
        conn_features: u64::MAX,
        epoch: EPOCH,
        now: Utime::new(1_700_000_000, 0),
    };
    let out = c.pg.handle_op(&mut c.store, ctx);
    let rep = out.repops.into_iter().next().unwrap();
    let _ = c.replicate(rep.clone());
    c.store.wait_durable(rep.seq).unwrap();
    assert_eq!(c.pg.on_commit(rep.seq).replies.len(), 1);
    assert_eq!(c.run("o", vec![write(0, b"twice")]).result, 0);
    // the first rep op arrives again: the replica does not go back to "once"
    let (_, s, r) = &mut c.replicas[0];
    let seq = r
        .apply_rep_op(s, &rep.txn, &rep.log_entries, rep.trim_to)
        .unwrap();
    s.wait_durable(seq).unwrap();
    assert_same(&mut c);
    // a restarted shard finds its PGs and opens them as they were
    let (_, s, r) = &mut c.replicas[0];
    assert_eq!(pg::stored_pgs(s).unwrap(), vec![spgid()]);
    let again = Pg::open(s, spgid(), pool(1), PgConfig::default()).unwrap();
    assert_eq!(again.meta().log, r.meta().log);
    assert_eq!(again.stats().num_objects, r.stats().num_objects);
}

#[test]
fn sparse_objects_push_only_their_data_and_holes_are_zeroed() {
    let mut c = Cluster::new(0);
    assert_eq!(c.run("sparse", vec![write(0, b"head")]).result, 0);
    assert_eq!(c.run("sparse", vec![write(300_000, b"tail")]).result, 0);
    let (objs, _) = c.pg.scan(&mut c.store, &HObject::default(), 10).unwrap();
    let oid = objs[0].0.clone();
    let info = c.pg.recovery_info(&mut c.store, &oid).unwrap();
    // the target holds an older copy with bytes where the source has a hole
    let mut t = new_store(21);
    let mut target = new_pg(&mut t, false);
    let cid = target.collection().clone();
    let key = pg::keys::object_key(&oid, &spgid());
    let mut stale = ferrostore::Transaction::new();
    stale.push(ferrostore::Op::Write {
        cid: cid.clone(),
        oid: key.clone(),
        offset: 100_000,
        data: Bytes::from(vec![0xee; 50_000]),
    });
    t.commit(&stale).unwrap();
    let mut progress = ObjectRecoveryProgress::default();
    let mut sent = 0usize;
    loop {
        let p = c.pg.build_push(&mut c.store, &info, &progress, 64 << 10).unwrap();
        sent += p.data.len();
        assert_eq!(p.data.len() as u64, p.data_included.values().sum::<u64>());
        let a = target.apply_push(&mut t, &p).unwrap();
        t.wait_durable(a.seq).unwrap();
        if a.complete {
            break;
        }
        progress = p.after_progress.clone();
    }
    assert!(sent <= 2 * 4096, "only the mapped blocks travel: {sent} bytes");
    let scid = c.pg.collection().clone();
    let src = dump(&mut c.store, &scid);
    let dst = dump(&mut t, &cid);
    let k = key.name.clone();
    assert_eq!(src.get(&k), dst.get(&k));
    assert_eq!(dst[&k].0, 300_004);
    assert!(dst[&k].1[100_000..150_000].iter().all(|b| *b == 0));
}

#[test]
fn a_refused_rep_op_leaves_the_replica_as_it_was() {
    let mut c = Cluster::new(1);
    assert_eq!(c.run("o", vec![write(0, b"x")]).result, 0);
    let (_, s, r) = &mut c.replicas[0];
    let before = r.meta();
    // setattrs on an object the replica does not have: BlueStore would abort; we refuse the whole rep op
    let mut t = Transaction::new();
    let ghost = pg::recovery::ghobject(&HObject::new("ghost", "", SnapId::NOSNAP, 1, 3, ""), &spgid());
    t.setattrs(
        denc::Coll::pg(spgid()),
        &ghost,
        &BTreeMap::from([(Bytes::from_static(b"_"), Bytes::from_static(b"x"))]),
    );
    let mut e = before.log.log[0].clone();
    e.version = Eversion::new(EPOCH, 99);
    assert!(r.apply_rep_op(s, &t, &[e], Eversion::default()).is_err());
    assert_eq!(r.meta(), before);
}

/// One copy: the client's payload as the messenger received it (the MOSDOp's data segment) is the very buffer
/// in the primary's Ceph transaction, in what the local store is handed, and in the rep op's wire encoding.
#[test]
fn write_payload_is_never_copied_on_the_primary() {
    use ceph_msgs::CephMessage;
    use osd_types::transaction::TxOp;
    let mut c = Cluster::new(2);
    let payload: Vec<u8> = (0..8192u32).map(|i| (i * 7) as u8).collect();
    let m = c.msg("one-copy", vec![write(4096, &payload)]);
    // as received from the network: one data segment, decoded without copying
    let wire = m.to_message(u64::MAX);
    let got = MOSDOp::from_message(&wire).unwrap();
    let indata = got.ops[0].indata.clone();
    assert_eq!(
        indata.as_ptr(),
        wire.data.as_ptr(),
        "the decoder shares the data segment"
    );
    let caps = c.caps.clone();
    let ctx = OpContext {
        msg: got,
        conn: ConnId(1),
        client: EntityNameT::client(4100),
        client_addr: EntityAddr::default(),
        caps: &caps,
        conn_features: u64::MAX,
        epoch: EPOCH,
        now: Utime::new(1_700_000_000, 0),
    };
    let out = c.pg.handle_op(&mut c.store, ctx);
    assert_eq!(out.repops.len(), 1);
    let rep = &out.repops[0];
    // the transaction's write (what translate hands ferrostore) is the client's buffer
    let w: Vec<_> = rep
        .txn
        .ops()
        .unwrap()
        .into_iter()
        .filter_map(|o| match o {
            TxOp::Write { data, .. } => Some(data),
            _ => None,
        })
        .collect();
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].as_ptr(), indata.as_ptr());
    // and so is a piece of MOSDRepOp's data segment
    let pieces: Vec<_> = rep.txn_data.iter().filter(|p| p.len() == payload.len()).collect();
    assert_eq!(pieces.len(), 1);
    assert_eq!(pieces[0].as_ptr(), indata.as_ptr());
    // every other piece is small (headers, indexes, object_info)
    let other: usize = rep.txn_data.iter().map(|p| p.len()).sum::<usize>() - payload.len();
    assert!(other < 2048, "{other} bytes besides the payload");
    // the flattened form (for a one-buffer message) is the same encoding
    assert_eq!(
        Transaction::decode_all(rep.txn_bytes())
            .unwrap()
            .to_bytes(u64::MAX),
        rep.txn.to_bytes(u64::MAX)
    );
    // the MOSDRepOp carries the rope: the payload by reference, and a data_off that puts it at a page start
    let msg = rep.message(
        &c.pg,
        EPOCH,
        EPOCH,
        denc::PgShard::new(0, ShardId::NO_SHARD),
        Eversion::default(),
        u64::MAX,
        true,
    );
    assert!(
        std::iter::once(&msg.data)
            .chain(&msg.data_tail)
            .any(|p| p.as_ptr() == indata.as_ptr() && p.len() == payload.len()),
        "the payload goes to the replicas by reference"
    );
    let flat = msg.data_flat();
    assert_eq!(flat, rep.txn_bytes());
    let at = flat
        .windows(payload.len())
        .position(|w| w == &payload[..])
        .unwrap();
    assert_eq!(
        (usize::from(msg.data_off) + at) % 4096,
        0,
        "data_off {} puts the payload at offset {at} on a page start",
        msg.data_off
    );
    assert_ne!(msg.data_off, 0, "the payload is not at the segment's start");
    assert_eq!(
        ceph_msgs::osd_rep::MOSDRepOp::from_message(&msg).unwrap().op_t,
        rep.txn
    );
}
