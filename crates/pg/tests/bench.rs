// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)] // benchmark harness
//! CPU cost of the op engine (not a device benchmark): `rados bench`-shaped 4 KiB writes (set-alloc-hint + write)
//! and reads of them through one PG on the in-memory simulated device. Ignored by default; run with
//! `cargo test --release -p pg --test bench -- --ignored --nocapture`.

use std::time::Instant;

use bytes::Bytes;
use ceph_msgs::osd_op::{MOSDOp, OSDOp, flag, op};
use denc::{EntityAddr, EntityNameT, ObjectLocator, ObjectName, PgId, ShardId, SnapId, SpgId, Utime};
use ferrostore::{Event, MkfsOptions, SimConfig, SimDevice, Store, StoreConfig, mkfs};
use pg::{ConnId, OpContext, OsdCap, Pg, PgConfig, PoolInfo};

#[test]
#[ignore]
fn engine_ops_per_second() {
    let n: u64 = std::env::var("PG_BENCH_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000);
    let dev = SimDevice::new(
        512 << 20,
        SimConfig {
            seed: 1,
            reorder: false,
            max_completions_per_poll: 1024,
            durable_writes: true,
        },
    );
    let dev = mkfs(
        dev,
        &MkfsOptions {
            shards: 1,
            log_bytes: 32 << 20,
            uuid: 1,
        },
    )
    .unwrap();
    let mut store = Store::mount(dev, 0, StoreConfig::default()).unwrap();
    let sp = SpgId::new(PgId::new(1, 0), ShardId::NO_SHARD);
    let pool = PoolInfo {
        id: 1,
        name: "bench".into(),
        pg_num: 1,
        erasure: false,
        applications: vec![],
    };
    let mut pg = Pg::new(sp, pool, PgConfig::default());
    let s = pg.create(&mut store, 1).unwrap();
    store.wait_durable(s).unwrap();
    let caps = OsdCap::allow_all();
    let data = Bytes::from(vec![0x5au8; 4096]);
    let mk = |tid: u64, ops: Vec<OSDOp>, f: u32| MOSDOp {
        tid,
        pgid: sp,
        hash: (tid as u32).wrapping_mul(2_654_435_761),
        osdmap_epoch: 1,
        flags: f | flag::ACK | flag::ONDISK,
        oloc: ObjectLocator::new(1),
        oid: ObjectName::new(Bytes::from(format!("benchmark_data_host_1234_object{tid}"))),
        ops,
        snapid: SnapId::NOSNAP,
        ..Default::default()
    };
    let drive = |pg: &mut Pg, store: &mut Store<SimDevice>, m: MOSDOp| -> usize {
        let ctx = OpContext {
            msg: m,
            conn: ConnId(1),
            client: EntityNameT::client(1),
            client_addr: EntityAddr::default(),
            caps: &caps,
            conn_features: u64::MAX,
            epoch: 1,
            now: Utime::new(1, 0),
        };
        let mut got = pg.handle_op(store, ctx).replies.len();
        let mut ev = Vec::new();
        store.poll(&mut ev).unwrap();
        for e in ev {
            if let Event::Durable(s) = e {
                got += pg.on_commit(s).replies.len();
            }
        }
        got
    };
    let t0 = Instant::now();
    let mut replies = 0;
    for tid in 1..=n {
        let mut hint = OSDOp::new(op::SETALLOCHINT);
        hint.args[0..8].copy_from_slice(&4096u64.to_le_bytes());
        hint.args[8..16].copy_from_slice(&4096u64.to_le_bytes());
        let w = OSDOp::new(op::WRITE)
            .with_extent(0, 4096)
            .with_indata(data.clone());
        replies += drive(&mut pg, &mut store, mk(tid, vec![hint, w], flag::WRITE));
    }
    while store.unacked() > 0 {
        let mut ev = Vec::new();
        store.wait(&mut ev).unwrap();
        for e in ev {
            if let Event::Durable(s) = e {
                replies += pg.on_commit(s).replies.len();
            }
        }
    }
    let w = t0.elapsed();
    assert_eq!(replies as u64, n);
    let t1 = Instant::now();
    for tid in 1..=n {
        let r = drive(
            &mut pg,
            &mut store,
            mk(tid, vec![OSDOp::new(op::READ).with_extent(0, 4096)], flag::READ),
        );
        assert_eq!(r, 1);
    }
    let r = t1.elapsed();
    eprintln!(
        "{n} writes (4 KiB, alloc hint): {:.0} ops/s ({:.1} µs/op); {n} reads: {:.0} ops/s ({:.1} µs/op) \\
         [engine + ferrostore on the in-memory device, one core]",
        n as f64 / w.as_secs_f64(),
        w.as_secs_f64() * 1e6 / n as f64,
        n as f64 / r.as_secs_f64(),
        r.as_secs_f64() * 1e6 / n as f64
    );
}
