// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)] // benchmark harness
//! CPU cost of the op engine (not a device benchmark) through one PG on the in-memory simulated device:
//! `rados bench`-shaped 4 KiB writes to new objects (set-alloc-hint + write) and reads of them, then 4 KiB and
//! 64 KiB random writes and reads over a small set of existing objects (as `fio ioengine=rados` over RBD-like
//! objects does; these hit the object context cache). Ignored by default; run with
//! `cargo test --release -p pg --test bench -- --ignored --nocapture` (`PG_BENCH_OPS`, `PG_BENCH_OBJECTS`).
//! Each phase reports wall-clock and thread CPU time per op; on a shared machine the CPU time is the number to
//! compare.

mod common;

use std::time::Instant;

use bytes::Bytes;
use ceph_msgs::osd_op::{MOSDOp, OSDOp, flag, op};
use common::sim::{created_pg, op_ctx, pool, sim, sim_store, spgid};
use denc::{ObjectLocator, ObjectName, SnapId, Utime};
use ferrostore::rng::Rng;
use ferrostore::{Event, SimDevice, Store};
use pg::{OsdCap, Pg, PgConfig};

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid pointer it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

struct Bench {
    store: Store<SimDevice>,
    pg: Pg,
    caps: OsdCap,
    tid: u64,
}

impl Bench {
    fn msg(&mut self, name: &str, ops: Vec<OSDOp>, f: u32) -> MOSDOp {
        self.tid += 1;
        MOSDOp {
            tid: self.tid,
            pgid: spgid(1),
            hash: ceph_crc::ceph_crc32c(0, name.as_bytes()).wrapping_mul(2_654_435_761),
            osdmap_epoch: 1,
            flags: f | flag::ACK | flag::ONDISK,
            oloc: ObjectLocator::new(1),
            oid: ObjectName::new(Bytes::from(name.to_owned())),
            ops,
            snapid: SnapId::NOSNAP,
            ..Default::default()
        }
    }

    /// One op and the store events it caused; the number of replies out.
    fn drive(&mut self, m: MOSDOp) -> usize {
        let ctx = op_ctx(m, 1, 1, &self.caps, 1, Utime::new(1, 0));
        let got = self.pg.handle_op(&mut self.store, ctx).replies.len();
        got + self.events(false)
    }

    /// Feed the store's events to the PG (all of them until nothing is in flight when `wait`); replies out.
    fn events(&mut self, wait: bool) -> usize {
        let mut got = 0;
        loop {
            let mut ev = Vec::new();
            if wait {
                self.store.wait(&mut ev).unwrap();
            } else {
                self.store.poll(&mut ev).unwrap();
            }
            for e in ev {
                if let Event::Durable(s) = e {
                    got += self.pg.on_commit(s).replies.len();
                }
            }
            if !wait || self.store.unacked() == 0 {
                return got;
            }
        }
    }

    /// Run `n` ops made by `mk`; print wall and CPU µs per op.
    fn phase(&mut self, what: &str, n: u64, mut mk: impl FnMut(&mut Bench, u64) -> MOSDOp) {
        let (t0, c0) = (Instant::now(), thread_cpu_ns());
        let mut replies = 0;
        for i in 0..n {
            let m = mk(self, i);
            replies += self.drive(m);
        }
        if self.store.unacked() > 0 {
            replies += self.events(true);
        }
        let (w, c) = (t0.elapsed(), thread_cpu_ns() - c0);
        assert_eq!(replies as u64, n, "{what}: every op answered");
        eprintln!(
            "{what:<34} {:>8.0} ops/s  {:>6.1} µs/op wall  {:>6.1} µs/op cpu",
            n as f64 / w.as_secs_f64(),
            w.as_secs_f64() * 1e6 / n as f64,
            c as f64 / 1e3 / n as f64
        );
    }
}

#[test]
#[ignore]
fn engine_ops_per_second() {
    let env = |k: &str, d: u64| std::env::var(k).ok().and_then(|s| s.parse().ok()).unwrap_or(d);
    let n = env("PG_BENCH_OPS", 20_000);
    let objects = env("PG_BENCH_OBJECTS", 64);
    let mut store = sim_store(512 << 20, 32 << 20, 1, sim(1, false, 1024, true));
    let pg = created_pg(&mut store, pool(1, "bench", 1), PgConfig::default(), 1);
    let mut b = Bench {
        store,
        pg,
        caps: OsdCap::allow_all(),
        tid: 0,
    };
    let d4 = Bytes::from(vec![0x5au8; 4096]);
    let d64 = Bytes::from(vec![0xa5u8; 65536]);
    let bench_obj = |i: u64| format!("benchmark_data_host_1234_object{i}");
    let rbd_obj = |i: u64| format!("rbd_data.10226b8b4567.{i:016x}");
    let (c0, t0) = (thread_cpu_ns(), Instant::now());
    b.phase("create 4K (alloc hint + write)", n, |b, i| {
        let mut hint = OSDOp::new(op::SETALLOCHINT);
        hint.args[0..8].copy_from_slice(&4096u64.to_le_bytes());
        hint.args[8..16].copy_from_slice(&4096u64.to_le_bytes());
        let w = OSDOp::new(op::WRITE).with_extent(0, 4096).with_indata(d4.clone());
        b.msg(&bench_obj(i), vec![hint, w], flag::WRITE)
    });
    b.phase("read 4K of those", n, |b, i| {
        b.msg(
            &bench_obj(i),
            vec![OSDOp::new(op::READ).with_extent(0, 4096)],
            flag::READ,
        )
    });
    // random IO over `objects` objects of 1 MiB (offsets aligned to the IO size)
    let mut rng = Rng::new(7);
    for (size, data, count) in [(4096u64, &d4, n), (65536, &d64, n / 4)] {
        let slots = (1 << 20) / size;
        let pick = |r: &mut Rng| (r.below(objects), r.below(slots) * size);
        b.phase(
            &format!("random write {}K, {objects} objects", size >> 10),
            count,
            |b, _| {
                let (o, off) = pick(&mut rng);
                let w = OSDOp::new(op::WRITE)
                    .with_extent(off, size)
                    .with_indata(data.clone());
                b.msg(&rbd_obj(o), vec![w], flag::WRITE)
            },
        );
        b.phase(
            &format!("random read {}K, {objects} objects", size >> 10),
            count,
            |b, _| {
                let (o, off) = pick(&mut rng);
                b.msg(
                    &rbd_obj(o),
                    vec![OSDOp::new(op::READ).with_extent(off, size)],
                    flag::READ,
                )
            },
        );
    }
    let s = b.pg.obc_stats();
    eprintln!(
        "total {:.0} ms cpu, {:.0} ms wall; object context cache: {} hits, {} misses, {} entries, {} bytes",
        (thread_cpu_ns() - c0) as f64 / 1e6,
        t0.elapsed().as_secs_f64() * 1e3,
        s.hits,
        s.misses,
        s.entries,
        s.bytes
    );
}

/// A primary PG with two replicas, each PG on its own store, driven through the messages a ferro-osd sends:
/// the client's MOSDOp decoded from its wire form, MOSDRepOp built as osd-core's glue builds it (front encoded,
/// the shared transaction bytes as data), decoded and applied on each replica, MOSDRepOpReply encoded there and
/// decoded on the primary, the client reply encoded. What osd-core, msgr2 and the network add is not here.
struct RepBench {
    primary: Bench,
    replicas: Vec<(i32, Store<SimDevice>, Pg)>,
}

impl RepBench {
    fn features() -> u64 {
        denc::CEPH_FEATURES_ALL
    }

    /// The client op through the primary and both replicas; the replies encoded for the wire.
    fn drive(&mut self, m: MOSDOp) -> usize {
        use ceph_msgs::CephMessage as _;
        use ceph_msgs::osd_rep::{CEPH_OSD_FLAG_ONDISK, MOSDRepOp, MOSDRepOpReply, TraceInfo};
        let f = Self::features();
        let wire = m.encode_message(f);
        let m = MOSDOp::decode_message(&wire).unwrap();
        let b = &mut self.primary;
        let ctx = op_ctx(m, 1, 1, &b.caps, 1, Utime::new(1, 0));
        let mut out = b.pg.handle_op(&mut b.store, ctx);
        let mut encoded = 0;
        for (_, r) in out.replies.drain(..) {
            encoded += usize::from(!r.encode_message(f).front.is_empty());
        }
        for r in std::mem::take(&mut out.repops) {
            for (osd, store, pg) in &mut self.replicas {
                // glue::repop_message
                let msg = r.message(
                    &b.pg,
                    1,
                    1,
                    denc::PgShard::new(0, denc::ShardId::NO_SHARD),
                    denc::Eversion::default(),
                    f,
                    true,
                );
                // the replica
                let got = MOSDRepOp::from_message(&msg).unwrap();
                let _entries = got.log_entries().unwrap();
                let seq = pg.apply_rep_op_msg(store, &got).unwrap();
                store.wait_durable(seq).unwrap();
                let reply = MOSDRepOpReply {
                    map_epoch: 1,
                    min_epoch: 1,
                    trace: TraceInfo::default(),
                    reqid: got.reqid,
                    pgid: got.pgid,
                    ack_type: CEPH_OSD_FLAG_ONDISK,
                    result: 0,
                    last_complete_ondisk: got.version,
                    from: denc::PgShard::new(*osd, denc::ShardId::NO_SHARD),
                }
                .to_message(f);
                // back on the primary
                let rr = MOSDRepOpReply::from_message(&reply).unwrap();
                for (_, r) in b.pg.on_rep_commit(rr.from.osd, r.at_version).replies {
                    encoded += usize::from(!r.encode_message(f).front.is_empty());
                }
            }
        }
        let mut wait = false;
        loop {
            let mut ev = Vec::new();
            if wait {
                b.store.wait(&mut ev).unwrap();
            } else {
                b.store.poll(&mut ev).unwrap();
            }
            for e in ev {
                if let Event::Durable(s) = e {
                    for (_, r) in b.pg.on_commit(s).replies {
                        encoded += usize::from(!r.encode_message(f).front.is_empty());
                    }
                }
            }
            if b.pg.held_replies() == 0 {
                break;
            }
            wait = true;
        }
        encoded
    }

    fn phase(&mut self, what: &str, n: u64, mut mk: impl FnMut(&mut Bench, u64) -> MOSDOp) {
        let (t0, c0) = (Instant::now(), thread_cpu_ns());
        let mut replies = 0;
        for i in 0..n {
            let m = mk(&mut self.primary, i);
            replies += self.drive(m);
        }
        let (w, c) = (t0.elapsed(), thread_cpu_ns() - c0);
        assert_eq!(replies as u64, n, "{what}: every op answered");
        eprintln!(
            "{what:<34} {:>8.0} ops/s  {:>6.1} µs/op wall  {:>6.1} µs/op cpu (3 copies)",
            n as f64 / w.as_secs_f64(),
            w.as_secs_f64() * 1e6 / n as f64,
            c as f64 / 1e3 / n as f64
        );
    }
}

/// Size 3: 4 KiB and 64 KiB random writes and 4 KiB reads over 64 objects of 1 MiB, through a primary and two
/// replicas (`cargo test --release -p pg --test bench -- --ignored --nocapture replicated`).
#[test]
#[ignore]
fn replicated_ops_per_second() {
    let env = |k: &str, d: u64| std::env::var(k).ok().and_then(|s| s.parse().ok()).unwrap_or(d);
    let n = env("PG_BENCH_OPS", 20_000);
    let objects = env("PG_BENCH_OBJECTS", 64);
    let mut store = sim_store(512 << 20, 32 << 20, 1, sim(1, false, 1024, true));
    let mut pg = created_pg(&mut store, pool(1, "bench", 1), PgConfig::default(), 1);
    let mut replicas = Vec::new();
    for osd in 1..=2 {
        let mut s = sim_store(
            512 << 20,
            32 << 20,
            1 + osd as u64,
            sim(1 + osd as u64, false, 1024, true),
        );
        let mut r = created_pg(&mut s, pool(1, "bench", 1), PgConfig::default(), 1);
        r.set_primary(false);
        replicas.push((osd, s, r));
    }
    let _ = pg.set_replicas(vec![1, 2]);
    let mut b = RepBench {
        primary: Bench {
            store,
            pg,
            caps: OsdCap::allow_all(),
            tid: 0,
        },
        replicas,
    };
    let d4 = Bytes::from(vec![0x5au8; 4096]);
    let d64 = Bytes::from(vec![0xa5u8; 65536]);
    let rbd_obj = |i: u64| format!("rbd_data.10226b8b4567.{i:016x}");
    let c0 = thread_cpu_ns();
    let mut rng = Rng::new(7);
    for (size, data, count) in [(4096u64, &d4, n), (65536, &d64, n / 4)] {
        let slots = (1 << 20) / size;
        let pick = |r: &mut Rng| (r.below(objects), r.below(slots) * size);
        b.phase(&format!("size 3: random write {}K", size >> 10), count, |b, _| {
            let (o, off) = pick(&mut rng);
            let w = OSDOp::new(op::WRITE)
                .with_extent(off, size)
                .with_indata(data.clone());
            b.msg(&rbd_obj(o), vec![w], flag::WRITE)
        });
        b.phase(&format!("size 3: random read {}K", size >> 10), count, |b, _| {
            let (o, off) = pick(&mut rng);
            b.msg(
                &rbd_obj(o),
                vec![OSDOp::new(op::READ).with_extent(off, size)],
                flag::READ,
            )
        });
    }
    eprintln!("total {:.0} ms cpu", (thread_cpu_ns() - c0) as f64 / 1e6);
}
