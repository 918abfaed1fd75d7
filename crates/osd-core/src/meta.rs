// SPDX-License-Identifier: LGPL-3.0-or-later
//! The shard's own records on its store: objects of the `meta` collection (as ceph-osd keeps its superblock and
//! maps there) whose omap holds the records. The newest map (`mapstore`) and the placement history (`history`)
//! are each one such object; both create the collection and object lazily, in the first transaction that writes
//! them, and read nothing from a store that has neither.

use bytes::Bytes;
use ferrostore::{CollectionId, Device, ObjectKey, Op, Store, StoreError, Transaction};

/// One object of the `meta` collection, by name.
pub(crate) struct MetaObject(pub &'static [u8]);

impl MetaObject {
    pub fn coll(&self) -> CollectionId {
        CollectionId::new(Bytes::from_static(b"meta"))
    }

    pub fn oid(&self) -> ObjectKey {
        ObjectKey::new(0, Bytes::from_static(self.0))
    }

    /// Whether the object is on the store (not on a new store, nor before its first transaction).
    pub fn exists<D: Device>(&self, store: &mut Store<D>) -> Result<bool, StoreError> {
        Ok(store.collection_exists(&self.coll())? && store.stat(&self.coll(), &self.oid()).is_ok())
    }

    /// A transaction that writes the object: unless `created`, it first creates the collection (if missing) and
    /// the object.
    pub fn transaction<D: Device>(
        &self,
        store: &mut Store<D>,
        created: bool,
    ) -> Result<Transaction, StoreError> {
        let mut t = Transaction::new();
        if !created {
            if !store.collection_exists(&self.coll())? {
                t.push(Op::CreateCollection {
                    cid: self.coll(),
                    bits: 0,
                });
            }
            t.push(Op::Touch {
                cid: self.coll(),
                oid: self.oid(),
            });
        }
        Ok(t)
    }
}
