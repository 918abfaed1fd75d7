// SPDX-License-Identifier: LGPL-3.0-or-later
//! Names in the store: a PG's collection is its `coll_t` text (`1.7_head`), an object's key is its
//! `ghobject_t`'s order-preserving sort key (so listing the collection yields Ceph's hash-bitwise order).

use bytes::Bytes;
use denc::{Coll, GHObject, HObject, NO_GEN, SpgId};
use ferrostore::{CollectionId, ObjectKey};

pub fn collection_id(spgid: &SpgId) -> CollectionId {
    CollectionId::new(Bytes::from(Coll::pg(*spgid).to_string()))
}

pub fn ghobject(h: &HObject, spgid: &SpgId) -> GHObject {
    GHObject::new(h.clone(), NO_GEN, spgid.shard)
}

pub fn object_key(h: &HObject, spgid: &SpgId) -> ObjectKey {
    ObjectKey::new(h.hash, ghobject(h, spgid).to_sort_key())
}

pub fn pgmeta_key(spgid: &SpgId) -> ObjectKey {
    let g = spgid.make_pgmeta_oid();
    ObjectKey::new(g.hobj.hash, g.to_sort_key())
}

/// Back from a store key to the object (None for keys we did not make).
pub fn from_key(k: &ObjectKey) -> Option<GHObject> {
    GHObject::from_sort_key(&k.name).ok()
}
