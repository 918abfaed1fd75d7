// SPDX-License-Identifier: LGPL-3.0-or-later
//! `ferro object-digest` runs a bounded slice of the PG per loop turn (`worker::DigestJob`): a whole PG read and
//! checksummed in one turn held a debug build's core for over 10 s on a loaded machine, its heartbeats went
//! unanswered and the OSD was marked down (replication's backfill tests then failed with a digest that had
//! timed out). The sliced digest must equal the one-turn digest.
#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use denc::{HObject, PgId, ShardId, SnapId, SpgId};
use ferro_osd::worker::{DIGEST_SLICE_OBJECTS, DigestJob};
use ferrostore::{MkfsOptions, Op, SimConfig, SimDevice, Store, StoreConfig, Transaction, mkfs};

const OBJECTS: usize = 40;

fn store_with_pg(spgid: &SpgId) -> Store<SimDevice> {
    let dev = mkfs(
        SimDevice::new(64 << 20, SimConfig::default()),
        &MkfsOptions {
            shards: 1,
            log_bytes: 4 << 20,
            uuid: 5,
            ..Default::default()
        },
    )
    .unwrap();
    let mut s = Store::mount(dev, 0, StoreConfig::default()).unwrap();
    let cid = pg::keys::collection_id(spgid);
    let mut t = Transaction::new();
    t.push(Op::CreateCollection {
        cid: cid.clone(),
        bits: 3,
    });
    t.push(Op::Touch {
        cid: cid.clone(),
        oid: pg::keys::pgmeta_key(spgid),
    });
    for i in 0..OBJECTS {
        let name = format!("obj{i}");
        let h = HObject::new(name.clone(), "", SnapId::NOSNAP, (i as u32) << 3, 1, "");
        let oid = pg::keys::object_key(&h, spgid);
        t.push(Op::Write {
            cid: cid.clone(),
            oid: oid.clone(),
            offset: 0,
            data: Bytes::from(vec![i as u8; 100 + i * 37]),
        });
        t.push(Op::SetAttrs {
            cid: cid.clone(),
            oid: oid.clone(),
            attrs: vec![(Bytes::from("_"), Bytes::from(name))],
        });
        t.push(Op::OmapSetKeys {
            cid: cid.clone(),
            oid,
            kvs: vec![(Bytes::from("k"), Bytes::from(format!("v{i}")))],
        });
    }
    let seq = s.commit(&t).unwrap();
    s.wait_durable(seq).unwrap();
    s
}

/// Steps a digest `max` objects at a time; returns the answer and how many steps it took.
fn digest(s: &mut Store<SimDevice>, spgid: SpgId, max: usize) -> (serde_json::Value, usize) {
    let mut job = DigestJob::new(spgid);
    for steps in 1..=1000 {
        let before = job.objects();
        if let Some(v) = job.step(s, max).unwrap() {
            return (v, steps);
        }
        assert!(
            job.objects() - before <= max,
            "one step digested {} objects, the slice is {max}",
            job.objects() - before
        );
    }
    panic!("the digest did not finish");
}

#[test]
fn a_digest_runs_in_slices_and_equals_the_whole() {
    let spgid = SpgId::new(PgId::new(1, 0), ShardId::NO_SHARD);
    let mut s = store_with_pg(&spgid);
    let (whole, _) = digest(&mut s, spgid, 1 << 20);
    assert_eq!(whole["num_objects"], OBJECTS);
    let (sliced, steps) = digest(&mut s, spgid, DIGEST_SLICE_OBJECTS);
    assert_eq!(sliced, whole);
    // the pgmeta object is listed (and skipped) too; one more step finds the end
    assert_eq!(steps, (OBJECTS + 1).div_ceil(DIGEST_SLICE_OBJECTS) + 1);
    let (by_one, steps) = digest(&mut s, spgid, 1);
    assert_eq!(by_one, whole);
    assert_eq!(steps, OBJECTS + 2);
}
