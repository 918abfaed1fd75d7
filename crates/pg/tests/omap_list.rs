// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)] // test harness
//! OMAPGETVALS / OMAPGETKEYS against a model of Ceph's listing (upper bound of `start_after`, then lower bound of
//! the filter prefix when it sorts later; stop at the first key outside the prefix; `truncated` when `max_return`
//! entries are out and another matching one follows), over objects with up to 700 keys so that listings cross the
//! store batches the op engine reads in (it asks the store for at most `max_return + 1` entries at a time, 256 at
//! most).

mod common;

use std::collections::BTreeMap;

use bytes::Bytes;
use ceph_msgs::osd_op::{MOSDOp, OSDOp, flag, op};
use common::osdop::{enc, name_hash, omap_get_vals};
use common::sim::{created_pg, op_ctx, pool, sim, sim_store, spgid};
use denc::{Decoder, Encoder, ObjectLocator, ObjectName, SnapId, Utime};
use ferrostore::{Event, SimDevice, Store};
use pg::{OsdCap, Pg, PgConfig};
use proptest::prelude::*;

struct H {
    store: Store<SimDevice>,
    pg: Pg,
    caps: OsdCap,
    tid: u64,
}

impl H {
    fn new(seed: u64) -> H {
        let mut store = sim_store(16 << 20, 1 << 20, 9, sim(seed, true, 3, true));
        let pg = created_pg(&mut store, pool(1, "omap", 1), PgConfig::default(), 1);
        H {
            store,
            pg,
            caps: OsdCap::allow_all(),
            tid: 0,
        }
    }

    /// Run one op on object "o" and return its reply's (result, first op's outdata), driving the store until the
    /// reply is out.
    fn run(&mut self, ops: Vec<OSDOp>) -> (i32, Bytes) {
        self.tid += 1;
        let write = ops.iter().any(|o| op::is_write(o.op));
        let m = MOSDOp {
            tid: self.tid,
            pgid: spgid(1),
            hash: name_hash("o"),
            osdmap_epoch: 1,
            flags: flag::ACK | flag::ONDISK | if write { flag::WRITE } else { flag::READ },
            oloc: ObjectLocator::new(1),
            oid: ObjectName::new(Bytes::from_static(b"o")),
            ops,
            snapid: SnapId::NOSNAP,
            ..Default::default()
        };
        let ctx = op_ctx(m, 1, 1, &self.caps, 1, Utime::new(1, 0));
        let mut replies = self.pg.handle_op(&mut self.store, ctx).replies;
        while replies.is_empty() {
            let mut ev = Vec::new();
            self.store.wait(&mut ev).unwrap();
            for e in ev {
                if let Event::Durable(s) = e {
                    replies.extend(self.pg.on_commit(s).replies);
                }
            }
        }
        let (_, r) = replies.pop().unwrap();
        (r.result, r.ops[0].outdata.clone())
    }
}

/// Ceph's answer: the entries after `after` (and from `prefix` on, if it sorts later) that start with `prefix`, at
/// most `max`, and whether a further matching entry exists.
fn model(m: &BTreeMap<Bytes, Bytes>, after: &[u8], max: u64, prefix: &[u8]) -> (Vec<(Bytes, Bytes)>, bool) {
    let mut out = Vec::new();
    for (k, v) in m {
        if k.as_ref() <= after || k.as_ref() < prefix {
            continue;
        }
        if !k.starts_with(prefix) {
            break;
        }
        if out.len() as u64 >= max {
            return (out, true);
        }
        out.push((k.clone(), v.clone()));
    }
    (out, false)
}

fn decode(b: &Bytes, with_vals: bool) -> (Vec<(Bytes, Bytes)>, bool) {
    let mut d = Decoder::new(b.clone());
    let n = d.u32().unwrap();
    let v = (0..n)
        .map(|_| {
            let k = d.bufferlist().unwrap();
            let v = if with_vals {
                d.bufferlist().unwrap()
            } else {
                Bytes::new()
            };
            (k, v)
        })
        .collect();
    (v, d.bool().unwrap())
}

fn get_keys(after: &[u8], max: u64) -> OSDOp {
    let mut e = Encoder::new(0);
    e.bytes(after);
    e.u64(max);
    OSDOp::new(op::OMAPGETKEYS).with_indata(e.into_bytes())
}

/// Keys from a small alphabet so that prefixes and `start_after` values hit existing keys and gaps.
fn key_strategy() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(b'c')], 0..6)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn listings_match_ceph(
        nkeys in 0usize..700,
        seed in any::<u64>(),
        queries in proptest::collection::vec(
            (key_strategy(), prop_oneof![0u64..3, 14u64..18, 250u64..260, Just(1000)],
             prop_oneof![Just(Vec::new()), key_strategy()], any::<bool>()),
            1..12),
    ) {
        let mut h = H::new(seed);
        let mut m: BTreeMap<Bytes, Bytes> = BTreeMap::new();
        let mut rng = ferrostore::rng::Rng::new(seed);
        let mut batch: BTreeMap<Bytes, Bytes> = BTreeMap::new();
        for i in 0..nkeys {
            let len = 1 + rng.below(7) as usize;
            let k: Vec<u8> = (0..len).map(|_| b'a' + rng.below(3) as u8).collect();
            let v = Bytes::from(format!("v{i}"));
            batch.insert(Bytes::from(k.clone()), v.clone());
            m.insert(Bytes::from(k), v);
            if batch.len() == 200 || i + 1 == nkeys {
                let (r, _) = h.run(vec![OSDOp::new(op::OMAPSETVALS).with_indata(enc(&batch))]);
                prop_assert_eq!(r, 0);
                batch.clear();
            }
        }
        if nkeys == 0 {
            // an object without omap
            let (r, _) = h.run(vec![OSDOp::new(op::CREATE)]);
            prop_assert_eq!(r, 0);
        }
        for (after, max, prefix, vals) in queries {
            let want = model(&m, &after, max, if vals { &prefix } else { &[] });
            let got = if vals {
                let after_s = String::from_utf8(after.clone()).unwrap();
                let prefix_s = String::from_utf8(prefix.clone()).unwrap();
                let (r, out) = h.run(vec![omap_get_vals(&after_s, max, &prefix_s)]);
                prop_assert_eq!(r, 0);
                decode(&out, true)
            } else {
                let (r, out) = h.run(vec![get_keys(&after, max)]);
                prop_assert_eq!(r, 0);
                let (kv, t) = decode(&out, false);
                (kv, t)
            };
            let want = if vals {
                want
            } else {
                (want.0.into_iter().map(|(k, _)| (k, Bytes::new())).collect(), want.1)
            };
            prop_assert_eq!(got.1, want.1, "truncated: after {:?} max {} prefix {:?}", after, max, prefix);
            prop_assert_eq!(got.0, want.0, "entries: after {:?} max {} prefix {:?}", after, max, prefix);
        }
    }
}
