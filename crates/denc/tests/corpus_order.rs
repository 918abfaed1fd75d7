// SPDX-License-Identifier: LGPL-3.0-or-later
//! Ceph's own sort orders as an oracle: `ObjectStore::Transaction` samples carry `map<coll_t, u32>` and
//! `map<ghobject_t, u32>` (coll_index, object_index), which Ceph encodes in its `operator<` order. Our `Ord` must
//! see those keys as strictly increasing, and our byte sort key must agree.

use std::fmt::Debug;

use denc::*;

/// Decode a map's entries in wire order (a `BTreeMap` would re-sort them and hide a disagreement).
fn entries<K: Decode>(d: &mut Decoder) -> Result<Vec<K>> {
    let n = d.length("map", 1)?;
    let mut v = Vec::new();
    for _ in 0..n {
        v.push(K::decode(d)?);
        d.u32()?;
    }
    Ok(v)
}

fn assert_increasing<K: Ord + Debug>(keys: &[K], what: &str) -> usize {
    for w in keys.windows(2) {
        assert!(
            w[0] < w[1],
            "{what}: Ceph's order has {:?} before {:?}",
            w[0],
            w[1]
        );
    }
    keys.len().saturating_sub(1)
}

#[test]
fn transaction_indexes_are_in_our_order() {
    if ceph_corpus::root().is_none() {
        eprintln!("skipping: ../shared/corpus not found");
        return;
    }
    let mut pairs = 0;
    for v in ceph_corpus::versions() {
        for (path, bytes) in ceph_corpus::samples(&v, "ObjectStore::Transaction") {
            let mut d = Decoder::new(bytes);
            let (colls, objs) = d
                .decode_struct("ObjectStore::Transaction", 9, |_, d| {
                    d.bufferlist()?; // data_bl
                    d.bufferlist()?; // op_bl
                    let colls = entries::<Coll>(d)?;
                    let objs = entries::<GHObject>(d)?;
                    Ok((colls, objs))
                })
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            pairs += assert_increasing(&colls, "coll_index");
            pairs += assert_increasing(&objs, "object_index");
            let keys: Vec<Vec<u8>> = objs.iter().map(GHObject::to_sort_key).collect();
            assert_increasing(&keys, "object_index sort keys");
        }
    }
    eprintln!("checked {pairs} adjacent key pairs against Ceph's map order");
    assert!(pairs > 0);
}
