// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)] // test harness: a panic is the failure report
//! The object context cache changes nothing but speed: the same random sequences of client ops (data, xattrs,
//! omap, deletes, creates, watches and their timeouts, notifies, snapshots with clones, rollbacks, list-snaps,
//! assert-version), recovery pushes, recovery/backfill removes, pool snap context changes and restarts run on
//! two PGs, one with a tiny cache (so entries are evicted all the time) and one without; every reply and
//! watch-notify message, the PG statistics and the stored objects (data, xattrs, omap, log) must be equal.

mod common;

use bytes::Bytes;
use ceph_msgs::osd_op::{MOSDOp, MOSDOpReply, MWatchNotify, OSDOp, flag, op, watch_op};
use common::osdop::*;
use common::sim::{self, dump};
use denc::{Encoder, HObject, ObjectLocator, ObjectName, SnapId, Utime};
use ferrostore::{Event, SimDevice, Store};
use osd_types::recovery::ObjectRecoveryProgress;
use pg::{ConnId, OsdCap, Outputs, Pg, PgConfig};
use proptest::prelude::*;

const EPOCH: u32 = 7;
const POOL: i64 = 3;

fn pool() -> pg::PoolInfo {
    sim::pool(POOL, "data", 1)
}

fn name(obj: u8) -> String {
    format!("obj{obj}")
}

fn hobject(obj: u8) -> HObject {
    let n = name(obj);
    HObject::new(n.clone(), "", SnapId::NOSNAP, name_hash(&n), POOL, "")
}

/// One op of a client request.
#[derive(Debug, Clone)]
enum K {
    Write(u16, u8, u16),
    WriteFull(u8, u16),
    Append(u8, u8),
    Truncate(u16),
    Zero(u16, u16),
    Delete,
    Create,
    Stat,
    Read(u16, u16),
    SetX(u8, u8),
    RmX(u8),
    GetX(u8),
    GetXs,
    OmapSet(u8, u8),
    OmapGet,
    OmapClear,
    Watch(u8),
    Unwatch(u8),
    ListWatchers,
    AssertVer(u8),
    Notify,
    Rollback(u8),
    Hint,
    ListSnaps,
}

fn osd_op(k: &K) -> OSDOp {
    let fill = |b: u8, n: u16| vec![b; usize::from(n)];
    match *k {
        K::Write(off, b, n) => write(u64::from(off), &fill(b, n.max(1))),
        K::WriteFull(b, n) => writefull(&fill(b, n)),
        K::Append(b, n) => {
            let d = fill(b, u16::from(n.max(1)));
            OSDOp::new(op::APPEND)
                .with_extent(0, d.len() as u64)
                .with_indata(d)
        }
        K::Truncate(s) => OSDOp::new(op::TRUNCATE).with_extent(u64::from(s), 0),
        K::Zero(o, l) => OSDOp::new(op::ZERO).with_extent(u64::from(o), u64::from(l)),
        K::Delete => OSDOp::new(op::DELETE),
        K::Create => OSDOp::new(op::CREATE),
        K::Stat => OSDOp::new(op::STAT),
        K::Read(o, l) => read(u64::from(o), u64::from(l)),
        K::SetX(k, v) => xattr_op(op::SETXATTR, &format!("x{k}"), &[v]),
        K::RmX(k) => xattr_op(op::RMXATTR, &format!("x{k}"), b""),
        K::GetX(k) => xattr_op(op::GETXATTR, &format!("x{k}"), b""),
        K::GetXs => OSDOp::new(op::GETXATTRS),
        K::OmapSet(k, v) => omap_set(&[(&format!("k{k}"), &format!("{v}"))]),
        K::OmapGet => omap_get_vals("", 100, ""),
        K::OmapClear => OSDOp::new(op::OMAPCLEAR),
        K::Watch(c) => watch_op_(u64::from(c), watch_op::WATCH, 5),
        K::Unwatch(c) => watch_op_(u64::from(c), watch_op::UNWATCH, 0),
        K::ListWatchers => OSDOp::new(op::LIST_WATCHERS),
        K::AssertVer(v) => {
            let mut o = OSDOp::new(op::ASSERT_VER);
            o.set_assert_ver(u64::from(v));
            o
        }
        K::Notify => {
            let mut e = Encoder::new(0);
            e.u32(1);
            e.u32(3);
            e.bytes(b"hello");
            let mut n = OSDOp::new(op::NOTIFY).with_indata(e.into_bytes());
            n.set_notify_cookie(9);
            n
        }
        K::Rollback(s) => {
            let mut o = OSDOp::new(op::ROLLBACK);
            o.args[0..8].copy_from_slice(&u64::from(s).to_le_bytes());
            o
        }
        K::Hint => {
            let mut o = OSDOp::new(op::SETALLOCHINT);
            o.args[0..8].copy_from_slice(&4096u64.to_le_bytes());
            o.args[8..16].copy_from_slice(&4096u64.to_le_bytes());
            o
        }
        K::ListSnaps => OSDOp::new(op::LIST_SNAPS),
    }
}

#[derive(Debug, Clone)]
enum Act {
    /// A client request: object, client (1 or 2, each on its own connection), ops, the writer's snap context
    /// (0: none), the snap read (0: head).
    Op {
        obj: u8,
        client: u8,
        ops: Vec<K>,
        snapc: u8,
        snap: u8,
    },
    /// Time passes (watch and notify timeouts).
    Tick(u32),
    Disconnect(u8),
    /// Recovery delete / backfill remove.
    Remove(u8),
    /// A recovery push of a version built elsewhere (fill byte, length).
    Push(u8, u8, u16),
    /// Pool snapshot mode at this snap seq (0: back to self-managed).
    PoolSnap(u8),
    Restart,
}

fn arb_k() -> impl Strategy<Value = K> {
    prop_oneof![
        4 => (0u16..9000, any::<u8>(), 1u16..600).prop_map(|(o, b, n)| K::Write(o, b, n)),
        2 => (any::<u8>(), 0u16..600).prop_map(|(b, n)| K::WriteFull(b, n)),
        1 => (any::<u8>(), 1u8..40).prop_map(|(b, n)| K::Append(b, n)),
        1 => (0u16..9000).prop_map(K::Truncate),
        1 => (0u16..9000, 0u16..9000).prop_map(|(o, l)| K::Zero(o, l)),
        1 => Just(K::Delete),
        1 => Just(K::Create),
        2 => Just(K::Stat),
        3 => (0u16..9000, 0u16..700).prop_map(|(o, l)| K::Read(o, l)),
        2 => (0u8..3, any::<u8>()).prop_map(|(k, v)| K::SetX(k, v)),
        1 => (0u8..3).prop_map(K::RmX),
        1 => (0u8..3).prop_map(K::GetX),
        1 => Just(K::GetXs),
        2 => (0u8..3, any::<u8>()).prop_map(|(k, v)| K::OmapSet(k, v)),
        1 => Just(K::OmapGet),
        1 => Just(K::OmapClear),
        1 => (1u8..3).prop_map(K::Watch),
        1 => (1u8..3).prop_map(K::Unwatch),
        1 => Just(K::ListWatchers),
        1 => (0u8..12).prop_map(K::AssertVer),
        1 => Just(K::Notify),
        1 => (1u8..6).prop_map(K::Rollback),
        1 => Just(K::Hint),
        1 => Just(K::ListSnaps),
    ]
}

fn arb_act() -> impl Strategy<Value = Act> {
    prop_oneof![
        12 => (
            0u8..5,
            1u8..3,
            proptest::collection::vec(arb_k(), 1..4),
            prop_oneof![3 => Just(0u8), 1 => 1u8..6],
            prop_oneof![4 => Just(0u8), 1 => 1u8..6],
        )
            .prop_map(|(obj, client, ops, snapc, snap)| Act::Op { obj, client, ops, snapc, snap }),
        1 => (1u32..8).prop_map(Act::Tick),
        1 => (1u8..3).prop_map(Act::Disconnect),
        1 => (0u8..5).prop_map(Act::Remove),
        1 => (0u8..5, any::<u8>(), 0u16..3000).prop_map(|(o, b, n)| Act::Push(o, b, n)),
        1 => (0u8..6).prop_map(Act::PoolSnap),
        1 => Just(Act::Restart),
    ]
}

/// Everything a PG sent, in order (replies and notifies as they would go on the wire).
#[derive(Debug, Default, PartialEq)]
struct Sent {
    replies: Vec<(ConnId, MOSDOpReply)>,
    notifies: Vec<(ConnId, MWatchNotify)>,
}

impl Sent {
    fn take(&mut self, o: Outputs) {
        self.replies.extend(o.replies);
        self.notifies.extend(o.notifies);
    }
}

struct Side {
    store: Store<SimDevice>,
    pg: Pg,
    cfg: PgConfig,
    now: Utime,
}

impl Side {
    fn new(cfg: PgConfig) -> Side {
        let mut store = sim::sim_store(16 << 20, 1 << 20, 5, sim::sim(11, true, 3, false));
        let pg = sim::created_pg(&mut store, pool(), cfg.clone(), EPOCH);
        Side {
            store,
            pg,
            cfg,
            now: Utime::new(1_700_000_000, 0),
        }
    }

    /// Let every queued transaction become durable and collect what that releases.
    fn drain(&mut self, sent: &mut Sent) {
        while self.store.unacked() > 0 {
            let mut ev = Vec::new();
            self.store.wait(&mut ev).unwrap();
            for e in ev {
                if let Event::Durable(s) = e {
                    sent.take(self.pg.on_commit(s));
                }
            }
        }
    }

    fn act(&mut self, a: &Act, tid: u64, donor: &mut Side) -> Sent {
        let mut sent = Sent::default();
        let caps = OsdCap::allow_all();
        match a {
            Act::Op {
                obj,
                client,
                ops,
                snapc,
                snap,
            } => {
                let ops: Vec<OSDOp> = ops.iter().map(osd_op).collect();
                let n = name(*obj);
                let write = ops.iter().any(|o| op::is_write(o.op));
                let mut m = MOSDOp {
                    tid,
                    pgid: sim::spgid(POOL),
                    hash: name_hash(&n),
                    osdmap_epoch: EPOCH,
                    flags: flag::ACK | flag::ONDISK | if write { flag::WRITE } else { flag::READ },
                    mtime: Utime::new(1_650_000_000, tid as u32),
                    oloc: ObjectLocator::new(POOL),
                    oid: ObjectName::new(Bytes::from(n)),
                    ops,
                    snapid: SnapId::NOSNAP,
                    features: u64::MAX,
                    ..Default::default()
                };
                if *snapc > 0 {
                    m.snap_seq = SnapId(u64::from(*snapc));
                    m.snaps = (1..=u64::from(*snapc)).rev().map(SnapId).collect();
                }
                if m.ops.iter().any(|o| o.op == op::LIST_SNAPS) {
                    m.snapid = SnapId::SNAPDIR;
                } else if *snap > 0 {
                    m.snapid = SnapId(u64::from(*snap));
                }
                let ctx = sim::op_ctx(m, u64::from(*client), i64::from(*client), &caps, EPOCH, self.now);
                sent.take(self.pg.handle_op(&mut self.store, ctx));
            }
            Act::Tick(s) => {
                self.now = Utime::new(self.now.sec + s, 0);
                sent.take(self.pg.handle_timeout(&mut self.store, self.now));
            }
            Act::Disconnect(c) => sent.take(self.pg.handle_disconnect(ConnId(u64::from(*c)), self.now)),
            Act::Remove(o) => {
                self.pg.remove_object(&mut self.store, &hobject(*o)).unwrap();
            }
            Act::Push(o, b, n) => {
                // the donor writes the version to push, then builds the push of it
                let d = vec![*b; usize::from(*n)];
                let m = MOSDOp {
                    tid,
                    pgid: sim::spgid(POOL),
                    hash: name_hash(&name(*o)),
                    osdmap_epoch: EPOCH,
                    flags: flag::ACK | flag::ONDISK | flag::WRITE,
                    oloc: ObjectLocator::new(POOL),
                    oid: ObjectName::new(Bytes::from(name(*o))),
                    ops: vec![writefull(&d), xattr_op(op::SETXATTR, "x0", &[*b])],
                    snapid: SnapId::NOSNAP,
                    ..Default::default()
                };
                let ctx = sim::op_ctx(m, 1, 1, &caps, EPOCH, self.now);
                donor.pg.handle_op(&mut donor.store, ctx);
                donor.drain(&mut Sent::default());
                let info = donor.pg.recovery_info(&mut donor.store, &hobject(*o)).unwrap();
                let p = donor
                    .pg
                    .build_push(
                        &mut donor.store,
                        &info,
                        &ObjectRecoveryProgress::default(),
                        1 << 20,
                    )
                    .unwrap();
                self.pg.apply_push(&mut self.store, &p).unwrap();
            }
            Act::PoolSnap(s) => {
                let snaps: Vec<u64> = (1..=u64::from(*s)).rev().collect();
                self.pg.set_pool_snap_context(u64::from(*s), snaps);
            }
            Act::Restart => {
                self.drain(&mut sent);
                sim::remount(&mut self.store);
                self.pg = sim::loaded_pg(&mut self.store, pool(), self.cfg.clone());
            }
        }
        self.drain(&mut sent);
        sent
    }
}

/// Runs `acts` on a PG with a cache of `entries` objects and on one without; asserts they agree throughout.
/// Returns the cached side's (hits, misses, evictions).
fn run_both(acts: &[Act], entries: usize) -> (u64, u64, u64) {
    let on_cfg = PgConfig {
        osd_pg_object_context_cache_count: entries,
        ..PgConfig::default()
    };
    let off_cfg = PgConfig {
        osd_pg_object_context_cache_count: 0,
        ..PgConfig::default()
    };
    let (mut on, mut off) = (Side::new(on_cfg), Side::new(off_cfg));
    let (mut donor_on, mut donor_off) = (Side::new(PgConfig::default()), Side::new(PgConfig::default()));
    let (mut hits, mut misses, mut evictions) = (0, 0, 0);
    for (i, a) in acts.iter().enumerate() {
        let tid = i as u64 + 1;
        if matches!(a, Act::Restart) {
            let s = on.pg.obc_stats();
            (hits, misses, evictions) = (hits + s.hits, misses + s.misses, evictions + s.evictions);
        }
        let x = on.act(a, tid, &mut donor_on);
        let y = off.act(a, tid, &mut donor_off);
        assert_eq!(x, y, "act {i}: {a:?}");
        assert_eq!(on.pg.stats(), off.pg.stats(), "act {i}: {a:?}");
    }
    let cid = on.pg.collection().clone();
    assert_eq!(dump(&mut on.store, &cid), dump(&mut off.store, &cid));
    assert_eq!(on.pg.meta().log, off.pg.meta().log);
    assert_eq!(
        off.pg.obc_stats(),
        pg::ObcStats::default(),
        "a cache of 0 entries is off"
    );
    let s = on.pg.obc_stats();
    assert!(s.entries <= entries);
    (hits + s.hits, misses + s.misses, evictions + s.evictions)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn the_cache_changes_no_reply_and_no_byte(acts in proptest::collection::vec(arb_act(), 1..40), entries in 1usize..5) {
        run_both(&acts, entries);
    }
}

/// A fixed sequence: repeated ops on a few objects hit the cache, more objects than entries evict, and the
/// counters say so.
#[test]
fn hits_are_counted() {
    let mut acts = Vec::new();
    for round in 0..4u8 {
        for obj in 0..4u8 {
            acts.push(Act::Op {
                obj,
                client: 1,
                ops: vec![K::Write(0, round, 100)],
                snapc: 0,
                snap: 0,
            });
            acts.push(Act::Op {
                obj,
                client: 1,
                ops: vec![K::Read(0, 0), K::Stat],
                snapc: 0,
                snap: 0,
            });
        }
    }
    // all four fit: only the first op on each object misses
    let (hits, misses, evictions) = run_both(&acts, 4);
    assert_eq!((hits, misses, evictions), (28, 4, 0));
    // two fit: the round robin over four objects always misses on its write
    let (hits, misses, evictions) = run_both(&acts, 2);
    assert_eq!((hits, misses), (16, 16));
    assert!(evictions >= 14);
}
