// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)] // test harness: a panic is the failure report
//! The Ceph transaction → ferrostore translation against a model of BlueStore's semantics
//! (`_txc_add_transaction`): random transactions over three objects (writes, zeros, truncates, removes, attrs,
//! omap, clones, renames), each applied atomically or refused as a whole, leave the store exactly as the model
//! says; nothing panics.

mod common;

use std::collections::BTreeMap;

use bytes::Bytes;
use common::sim;
use denc::{Coll, GHObject, HObject, NO_GEN, ShardId, SnapId, SpgId};
use ferrostore::{SimDevice, Store};
use osd_types::transaction::Transaction;
use proptest::prelude::*;

fn spgid() -> SpgId {
    sim::spgid(3)
}

fn obj(i: u8) -> GHObject {
    let name = format!("obj{i}");
    GHObject::new(
        HObject::new(name, "", SnapId::NOSNAP, u32::from(i) << 8, 3, ""),
        NO_GEN,
        ShardId::NO_SHARD,
    )
}

#[derive(Debug, Clone)]
enum MOp {
    Touch(u8),
    Write(u8, u64, Vec<u8>),
    Zero(u8, u64, u64),
    Truncate(u8, u64),
    Remove(u8),
    SetAttr(u8, u8, Vec<u8>),
    RmAttr(u8, u8),
    RmAttrs(u8),
    OmapSet(u8, u8, Vec<u8>),
    OmapRm(u8, u8),
    OmapClear(u8),
    OmapHeader(u8, Vec<u8>),
    Clone(u8, u8),
    Rename(u8, u8),
    TryRename(u8, u8),
}

fn mop() -> impl Strategy<Value = MOp> {
    let o = 0u8..3;
    let bytes = proptest::collection::vec(any::<u8>(), 0..24);
    prop_oneof![
        o.clone().prop_map(MOp::Touch),
        (o.clone(), 0u64..5000, bytes.clone()).prop_map(|(a, b, c)| MOp::Write(a, b, c)),
        (o.clone(), 0u64..5000, 0u64..5000).prop_map(|(a, b, c)| MOp::Zero(a, b, c)),
        (o.clone(), 0u64..9000).prop_map(|(a, b)| MOp::Truncate(a, b)),
        o.clone().prop_map(MOp::Remove),
        (o.clone(), 0u8..3, bytes.clone()).prop_map(|(a, b, c)| MOp::SetAttr(a, b, c)),
        (o.clone(), 0u8..3).prop_map(|(a, b)| MOp::RmAttr(a, b)),
        o.clone().prop_map(MOp::RmAttrs),
        (o.clone(), 0u8..3, bytes.clone()).prop_map(|(a, b, c)| MOp::OmapSet(a, b, c)),
        (o.clone(), 0u8..3).prop_map(|(a, b)| MOp::OmapRm(a, b)),
        o.clone().prop_map(MOp::OmapClear),
        (o.clone(), bytes).prop_map(|(a, b)| MOp::OmapHeader(a, b)),
        (o.clone(), o.clone())
            .prop_filter("distinct", |(a, b)| a != b)
            .prop_map(|(a, b)| MOp::Clone(a, b)),
        (o.clone(), o.clone())
            .prop_filter("distinct", |(a, b)| a != b)
            .prop_map(|(a, b)| MOp::Rename(a, b)),
        (o.clone(), o)
            .prop_filter("distinct", |(a, b)| a != b)
            .prop_map(|(a, b)| MOp::TryRename(a, b)),
    ]
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct MObj {
    data: Vec<u8>,
    attrs: BTreeMap<Vec<u8>, Vec<u8>>,
    omap: BTreeMap<Vec<u8>, Vec<u8>>,
    header: Vec<u8>,
}

type Model = BTreeMap<u8, MObj>;

fn attr(i: u8) -> Vec<u8> {
    format!("_a{i}").into_bytes()
}
fn key(i: u8) -> Vec<u8> {
    format!("k{i}").into_bytes()
}

/// BlueStore's outcome of one op on the model; Err = the transaction is refused.
fn model_apply(m: &mut Model, op: &MOp) -> Result<(), ()> {
    match op {
        MOp::Touch(o) => {
            m.entry(*o).or_default();
        }
        MOp::Write(o, off, d) => {
            // an empty write only creates the object
            let x = m.entry(*o).or_default();
            if !d.is_empty() {
                let end = *off as usize + d.len();
                if x.data.len() < end {
                    x.data.resize(end, 0);
                }
                x.data[*off as usize..end].copy_from_slice(d);
            }
        }
        MOp::Zero(o, off, len) => {
            let x = m.entry(*o).or_default();
            let end = (*off + *len) as usize;
            if *len > 0 {
                if x.data.len() < end {
                    x.data.resize(end, 0);
                }
                x.data[*off as usize..end].fill(0);
            }
        }
        MOp::Truncate(o, size) => {
            if let Some(x) = m.get_mut(o) {
                x.data.resize(*size as usize, 0);
            }
        }
        MOp::Remove(o) => {
            m.remove(o);
        }
        MOp::SetAttr(o, a, v) => {
            m.get_mut(o).ok_or(())?.attrs.insert(attr(*a), v.clone());
        }
        MOp::RmAttr(o, a) => {
            m.get_mut(o).ok_or(())?.attrs.remove(&attr(*a));
        }
        MOp::RmAttrs(o) => {
            if let Some(x) = m.get_mut(o) {
                x.attrs.clear();
            }
        }
        MOp::OmapSet(o, k, v) => {
            m.get_mut(o).ok_or(())?.omap.insert(key(*k), v.clone());
        }
        MOp::OmapRm(o, k) => {
            m.get_mut(o).ok_or(())?.omap.remove(&key(*k));
        }
        MOp::OmapClear(o) => {
            if let Some(x) = m.get_mut(o) {
                x.omap.clear();
                x.header.clear();
            }
        }
        MOp::OmapHeader(o, v) => {
            m.get_mut(o).ok_or(())?.header = v.clone();
        }
        MOp::Clone(s, d) => {
            let x = m.get(s).ok_or(())?.clone();
            m.insert(*d, x);
        }
        MOp::Rename(s, d) => {
            if m.contains_key(s) {
                if m.contains_key(d) {
                    return Err(());
                }
                let x = m.remove(s).ok_or(())?;
                m.insert(*d, x);
            }
        }
        MOp::TryRename(s, d) => {
            if let Some(x) = m.remove(s) {
                m.insert(*d, x);
            }
        }
    }
    Ok(())
}

fn build(ops: &[MOp]) -> Transaction {
    let c = Coll::pg(spgid());
    let mut t = Transaction::new();
    for op in ops {
        match op {
            MOp::Touch(o) => t.touch(c, &obj(*o)),
            MOp::Write(o, off, d) => t.write(c, &obj(*o), *off, &Bytes::from(d.clone()), 0),
            MOp::Zero(o, off, len) => t.zero(c, &obj(*o), *off, *len),
            MOp::Truncate(o, s) => t.truncate(c, &obj(*o), *s),
            MOp::Remove(o) => t.remove(c, &obj(*o)),
            MOp::SetAttr(o, a, v) => t.setattr(c, &obj(*o), &attr(*a), &Bytes::from(v.clone())),
            MOp::RmAttr(o, a) => t.rmattr(c, &obj(*o), &attr(*a)),
            MOp::RmAttrs(o) => t.rmattrs(c, &obj(*o)),
            MOp::OmapSet(o, k, v) => t.omap_setkeys(
                c,
                &obj(*o),
                &BTreeMap::from([(Bytes::from(key(*k)), Bytes::from(v.clone()))]),
            ),
            MOp::OmapRm(o, k) => t.omap_rmkeys(c, &obj(*o), &[Bytes::from(key(*k))]),
            MOp::OmapClear(o) => t.omap_clear(c, &obj(*o)),
            MOp::OmapHeader(o, v) => t.omap_setheader(c, &obj(*o), &Bytes::from(v.clone())),
            MOp::Clone(s, d) => t.clone_object(c, &obj(*s), &obj(*d)),
            MOp::Rename(s, d) => t.collection_move_rename(c, &obj(*s), c, &obj(*d)),
            MOp::TryRename(s, d) => t.try_rename(c, &obj(*s), &obj(*d)),
        }
    }
    t
}

fn read_back(store: &mut Store<SimDevice>) -> Model {
    let cid = pg::txn::coll_id(&Coll::pg(spgid()));
    let mut m = Model::new();
    for i in 0..3u8 {
        let k = pg::txn::object_key(&obj(i));
        if !store.exists(&cid, &k).unwrap() {
            continue;
        }
        let size = store.stat(&cid, &k).unwrap().size;
        let data = store.read(&cid, &k, 0, size).unwrap().to_vec();
        let attrs = store
            .getattrs(&cid, &k)
            .unwrap()
            .into_iter()
            .map(|(a, b)| (a.to_vec(), b.to_vec()))
            .collect();
        let omap = store
            .omap_iterate(&cid, &k, &[], 1000)
            .unwrap()
            .into_iter()
            .map(|(a, b)| (a.to_vec(), b.to_vec()))
            .collect();
        let header = store.omap_get_header(&cid, &k).unwrap().to_vec();
        m.insert(
            i,
            MObj {
                data,
                attrs,
                omap,
                header,
            },
        );
    }
    m
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
    #[test]
    fn translation_matches_bluestore_semantics(txns in proptest::collection::vec(proptest::collection::vec(mop(), 1..6), 1..8)) {
        let mut store = sim::sim_store(8 << 20, 1 << 20, 3, sim::sim(3, false, 16, false));
        let mut mk = Transaction::new();
        mk.create_collection(Coll::pg(spgid()), 0);
        pg::apply_ceph_transaction(&mut store, &mk).unwrap();
        let mut model = Model::new();
        // start from three existing objects, so that attr and omap ops mostly apply
        let start = vec![MOp::Touch(0), MOp::Touch(1), MOp::Touch(2)];
        for o in &start {
            model_apply(&mut model, o).unwrap();
        }
        pg::apply_ceph_transaction(&mut store, &build(&start)).unwrap();
        let (mut accepted, mut refused) = (0, 0);
        for ops in &txns {
            let mut next = model.clone();
            let expect_ok = ops.iter().all(|o| model_apply(&mut next, o).is_ok());
            let t = build(ops);
            // the wire form is what gets applied
            let t = <Transaction as denc::Decode>::decode_all(denc::Encode::to_bytes(&t, u64::MAX)).unwrap();
            let r = pg::apply_ceph_transaction(&mut store, &t);
            prop_assert_eq!(r.is_ok(), expect_ok, "{:?}: {:?}", ops, r);
            if expect_ok {
                model = next;
                accepted += 1;
            } else {
                refused += 1;
            }
            prop_assert_eq!(&read_back(&mut store), &model, "after {:?}", ops);
        }
        prop_assert_eq!(accepted + refused, txns.len());
    }
}
