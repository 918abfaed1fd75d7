// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)] // test harness: a panic is the failure report
//! Durable before ack, end to end: a stream of writes (data, xattrs, omap) runs on a simulated device that
//! reorders and loses unflushed writes; at a random moment the power fails. After remounting the crash image and
//! loading the PG, every acknowledged write is there (the object holds the acknowledged state or a later one),
//! and a resend of an acknowledged request gets its original versions instead of running again.

mod common;

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use ceph_msgs::osd_op::{MOSDOp, MOSDOpReply, OSDOp, XattrArgs, flag, op};
use denc::{Eversion, ObjectLocator, ObjectName, SnapId, SpgId, Utime};
use ferrostore::rng::Rng;
use ferrostore::{Event, SimConfig, SimDevice, Store, StoreConfig};
use pg::{OpContext, OsdCap, Pg, PgConfig, PoolInfo};

fn pool() -> PoolInfo {
    common::sim::pool(2, "p", 1)
}
fn spgid() -> SpgId {
    common::sim::spgid(2)
}
fn sim(seed: u64) -> SimConfig {
    common::sim::sim(seed, true, 2, false)
}

fn msg(tid: u64, oid: &str, ops: Vec<OSDOp>) -> MOSDOp {
    MOSDOp {
        tid,
        pgid: spgid(),
        hash: ceph_crc::ceph_crc32c(0, oid.as_bytes()),
        osdmap_epoch: 3,
        flags: flag::WRITE | flag::ONDISK,
        oloc: ObjectLocator::new(2),
        oid: ObjectName::new(Bytes::copy_from_slice(oid.as_bytes())),
        ops,
        snapid: SnapId::NOSNAP,
        mtime: Utime::new(5, 0),
        ..Default::default()
    }
}

fn ctx<'a>(m: MOSDOp, caps: &'a OsdCap) -> OpContext<'a> {
    common::sim::op_ctx(m, 1, 9, caps, 3, Utime::new(10, 0))
}

/// What a write does to the model of an object: (data, one xattr value, one omap value).
#[derive(Clone, Debug, PartialEq, Default)]
struct State {
    data: Vec<u8>,
    xattr: Option<Vec<u8>>,
    omap: Option<Vec<u8>>,
}

/// Returns (acknowledged writes, objects that came back older than their last sent write).
fn run(seed: u64) -> (usize, usize) {
    let mut rng = Rng::new(seed);
    let mut store = common::sim::sim_store(8 << 20, 512 << 10, 3, sim(seed));
    let mut pg = common::sim::created_pg(&mut store, pool(), PgConfig::default(), 3);
    let caps = OsdCap::allow_all();

    // per object: the states in order, each with the tid that produced it
    let mut history: BTreeMap<String, Vec<(u64, State)>> = BTreeMap::new();
    let mut acked: HashMap<u64, MOSDOpReply> = HashMap::new();
    let mut sent: HashMap<u64, MOSDOp> = HashMap::new();
    let crash_after = 20 + rng.below(80);
    let mut image = None;
    for tid in 1..=120u64 {
        let obj = format!("o{}", rng.below(5));
        let mut st = history
            .get(&obj)
            .and_then(|h| h.last())
            .map(|(_, s)| s.clone())
            .unwrap_or_default();
        let ops = match rng.below(3) {
            0 => {
                let mut d = vec![0u8; 1 + rng.below(3000) as usize];
                rng.fill(&mut d);
                let off = rng.below(2000);
                let end = off as usize + d.len();
                if st.data.len() < end {
                    st.data.resize(end, 0);
                }
                st.data[off as usize..end].copy_from_slice(&d);
                vec![
                    OSDOp::new(op::WRITE)
                        .with_extent(off, d.len() as u64)
                        .with_indata(d),
                ]
            }
            1 => {
                let v = tid.to_le_bytes().to_vec();
                st.xattr = Some(v.clone());
                let mut o = OSDOp::new(op::SETXATTR).with_indata([b"k".to_vec(), v].concat());
                o.set_xattr(XattrArgs {
                    name_len: 1,
                    value_len: 8,
                    ..Default::default()
                });
                vec![o]
            }
            _ => {
                let v = tid.to_be_bytes().to_vec();
                st.omap = Some(v.clone());
                let m: BTreeMap<Bytes, Bytes> = [(Bytes::from_static(b"key"), Bytes::from(v))].into();
                vec![OSDOp::new(op::OMAPSETVALS).with_indata(denc::Encode::to_bytes(&m, 0))]
            }
        };
        history.entry(obj.clone()).or_default().push((tid, st));
        let m = msg(tid, &obj, ops);
        sent.insert(tid, m.clone());
        let out = pg.handle_op(&mut store, ctx(m, &caps));
        for (_, r) in out.replies {
            acked.insert(r.tid, r);
        }
        // let the device make progress now and then
        if rng.chance(60) {
            let mut ev = Vec::new();
            store.poll(&mut ev).unwrap();
            for e in ev {
                if let Event::Durable(s) = e {
                    for (_, r) in pg.on_commit(s).replies {
                        acked.insert(r.tid, r);
                    }
                }
            }
        }
        if tid == crash_after {
            image = Some(store.device().crash_image(&mut rng));
            break;
        }
    }
    let image = image.unwrap();
    let acked_at_crash: HashMap<u64, MOSDOpReply> = acked.clone();
    assert!(
        !acked_at_crash.is_empty() || crash_after < 25,
        "seed {seed}: nothing acknowledged"
    );

    // power back on
    let mut store = Store::mount(
        SimDevice::from_image(image, sim(seed + 1)),
        0,
        StoreConfig::default(),
    )
    .unwrap();
    let mut pg = Pg::new(spgid(), pool(), PgConfig::default());
    pg.load(&mut store).unwrap();
    let mut tid2 = 10_000;
    let mut rolled_back = 0;
    for (obj, states) in &history {
        // the newest acknowledged state of this object: what is there now must be it or a later one
        let last_acked = states.iter().rposition(|(t, _)| acked_at_crash.contains_key(t));
        tid2 += 1;
        let mut rd = msg(tid2, obj, vec![OSDOp::new(op::READ).with_extent(0, 0)]);
        rd.flags = flag::READ;
        let mut xo = OSDOp::new(op::GETXATTR)
            .with_indata(&b"k"[..])
            .with_flags(ceph_msgs::osd_op::op_flag::FAILOK);
        xo.set_xattr(XattrArgs {
            name_len: 1,
            ..Default::default()
        });
        rd.ops.push(xo);
        let keys: std::collections::BTreeSet<Bytes> = [Bytes::from_static(b"key")].into();
        rd.ops
            .push(OSDOp::new(op::OMAPGETVALSBYKEYS).with_indata(denc::Encode::to_bytes(&keys, 0)));
        let out = pg.handle_op(&mut store, ctx(rd, &caps));
        let r = &out.replies[0].1;
        let Some(i) = last_acked else {
            rolled_back += 1;
            continue;
        };
        assert_eq!(
            r.result, 0,
            "seed {seed}: {obj} lost (acknowledged tid {})",
            states[i].0
        );
        let omap: BTreeMap<Bytes, Bytes> = denc::Decode::decode_all(r.ops[2].outdata.clone()).unwrap();
        let now = State {
            data: r.ops[0].outdata.to_vec(),
            xattr: (r.ops[1].rval == 0).then(|| r.ops[1].outdata.to_vec()),
            omap: omap.get(&Bytes::from_static(b"key")).map(|v| v.to_vec()),
        };
        assert!(
            states[i..].iter().any(|(_, s)| *s == now),
            "seed {seed}: {obj} is in a state older than its acknowledged write (tid {})",
            states[i].0
        );
        if states.last().is_some_and(|(_, s)| *s != now) {
            rolled_back += 1;
        }
    }
    // resends of acknowledged writes are answered from the log, not executed again
    let before = pg.stats().last_update;
    for (tid, r) in acked_at_crash.iter().take(10) {
        let mut m = sent[tid].clone();
        m.flags |= flag::RETRY;
        let out = pg.handle_op(&mut store, ctx(m, &caps));
        let again = &out.replies[0].1;
        assert_eq!(
            (again.result, again.replay_version, again.user_version),
            (r.result, r.replay_version, r.user_version)
        );
    }
    assert_eq!(pg.stats().last_update, before);
    assert!(
        before
            >= acked_at_crash
                .values()
                .map(|r| r.replay_version)
                .max()
                .unwrap_or(Eversion::default())
    );
    (acked_at_crash.len(), rolled_back)
}

#[test]
fn acknowledged_writes_survive_power_loss() {
    let seeds = std::env::var("PG_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24u64);
    let (mut acked, mut lost) = (0, 0);
    for seed in 1..=seeds {
        let (a, l) = run(seed);
        acked += a;
        lost += l;
    }
    eprintln!(
        "{seeds} power losses: {acked} acknowledged writes all kept; {lost} objects lost unacknowledged writes"
    );
    assert!(
        lost > 0,
        "the crashes never lost anything: the test would not notice an early ack"
    );
}
