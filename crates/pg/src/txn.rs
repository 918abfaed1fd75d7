// SPDX-License-Identifier: LGPL-3.0-or-later
//! Ceph's `ObjectStore::Transaction` ↔ ferrostore.
//!
//! The primary turns an op's effects into a Ceph transaction ([`to_ceph`]) — the exact bytes a classic primary
//! ships in MOSDRepOp — and applies that same transaction locally through [`translate`], the function a replica
//! uses for what it receives: primary and replicas run one code path, so they store identical bytes.
//!
//! [`translate`] gives ferrostore BlueStore's semantics where they differ (`BlueStore::_txc_add_transaction`):
//! removing, truncating, hinting, clearing attrs or omap of an object that does not exist, or removing an attr
//! that is not there, is not an error (the op is dropped); setting attrs or omap on, or cloning from, a missing
//! object is (BlueStore aborts there; we refuse the whole transaction).

use bytes::Bytes;
use denc::{Coll, GHObject};
use ferrostore::{CollectionId, Device, ObjectKey, Op, Store, StoreError};
use osd_types::transaction::{Transaction, TxOp};

use crate::PgError;

/// The ferrostore collection of a `coll_t` (its text form, `1.7_head`).
pub fn coll_id(c: &Coll) -> CollectionId {
    CollectionId::new(Bytes::from(c.to_string()))
}

/// The `coll_t` of a ferrostore collection id made by [`coll_id`].
pub fn coll_of(c: &CollectionId) -> Result<Coll, PgError> {
    std::str::from_utf8(&c.0)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| PgError::Corrupt(format!("collection {:?} is not a coll_t", c.0)))
}

/// The ferrostore key of a `ghobject_t`.
pub fn object_key(g: &GHObject) -> ObjectKey {
    ObjectKey::new(g.hobj.hash, g.to_sort_key())
}

fn ghobject_of(k: &ObjectKey) -> Result<GHObject, PgError> {
    GHObject::from_sort_key(&k.name).map_err(|e| PgError::Corrupt(format!("object key: {e}")))
}

/// The Ceph transaction with the effects of ferrostore ops the op engine built (one Ceph op per store op).
pub fn to_ceph(ops: &[Op]) -> Result<Transaction, PgError> {
    Ok(Transaction::from_ops(&to_txops_seeded(ops, &[], &[])?))
}

/// The Ceph transaction ops (as [`Transaction::ops`] reads them back from [`to_ceph`]'s encoding) of ferrostore
/// ops the op engine built, with names the caller has parsed already (the PG's collection, the op's object): no
/// parsing of their store keys back. The primary translates these for its own store and encodes them
/// ([`Transaction::from_ops`]) only for replicas: no encode-and-decode round trip for its own apply.
pub(crate) fn to_txops_seeded(
    ops: &[Op],
    colls: &[(CollectionId, Coll)],
    objs: &[(Bytes, GHObject)],
) -> Result<Vec<TxOp>, PgError> {
    let mut t = Vec::with_capacity(ops.len());
    // an op engine transaction names one or two objects many times: parse each name once (the seeds first,
    // then those parsed here)
    let (mut more_colls, mut more_objs) = (Vec::new(), Vec::new());
    let mut coll_of = |c: &CollectionId| -> Result<Coll, PgError> {
        if let Some((_, x)) = colls.iter().chain(more_colls.iter()).find(|(k, _)| k == c) {
            return Ok(*x);
        }
        let x = coll_of(c)?;
        more_colls.push((c.clone(), x));
        Ok(x)
    };
    let mut ghobject_of = |k: &ObjectKey| -> Result<GHObject, PgError> {
        if let Some((_, g)) = objs.iter().chain(more_objs.iter()).find(|(n, _)| *n == k.name) {
            return Ok(g.clone());
        }
        let g = ghobject_of(k)?;
        more_objs.push((k.name.clone(), g.clone()));
        Ok(g)
    };
    for op in ops {
        t.push(match op {
            Op::CreateCollection { cid, bits } => TxOp::MkColl {
                cid: coll_of(cid)?,
                bits: *bits,
            },
            Op::RemoveCollection { cid } => TxOp::RmColl { cid: coll_of(cid)? },
            Op::SplitCollection { src, dst, bits, rem } => TxOp::SplitCollection {
                cid: coll_of(src)?,
                bits: *bits,
                rem: *rem,
                dest: coll_of(dst)?,
            },
            Op::Touch { cid, oid } => TxOp::Touch {
                cid: coll_of(cid)?,
                oid: ghobject_of(oid)?,
            },
            Op::Write {
                cid,
                oid,
                offset,
                data,
            } => TxOp::Write {
                cid: coll_of(cid)?,
                oid: ghobject_of(oid)?,
                off: *offset,
                data: data.clone(),
            },
            Op::Zero {
                cid,
                oid,
                offset,
                len,
            } => TxOp::Zero {
                cid: coll_of(cid)?,
                oid: ghobject_of(oid)?,
                off: *offset,
                len: *len,
            },
            Op::Truncate { cid, oid, size } => TxOp::Truncate {
                cid: coll_of(cid)?,
                oid: ghobject_of(oid)?,
                size: *size,
            },
            Op::Remove { cid, oid } => TxOp::Remove {
                cid: coll_of(cid)?,
                oid: ghobject_of(oid)?,
            },
            Op::Clone { cid, src, dst } => TxOp::Clone {
                cid: coll_of(cid)?,
                oid: ghobject_of(src)?,
                dest: ghobject_of(dst)?,
            },
            Op::CloneRange {
                cid,
                src,
                dst,
                src_offset,
                len,
                dst_offset,
            } => TxOp::CloneRange {
                cid: coll_of(cid)?,
                oid: ghobject_of(src)?,
                dest: ghobject_of(dst)?,
                src_off: *src_offset,
                len: *len,
                dest_off: *dst_offset,
            },
            Op::Rename {
                cid,
                oid,
                new_cid,
                new_oid,
            } => TxOp::CollMoveRename {
                old_cid: coll_of(cid)?,
                old_oid: ghobject_of(oid)?,
                new_cid: coll_of(new_cid)?,
                new_oid: ghobject_of(new_oid)?,
            },
            Op::SetAttrs { cid, oid, attrs } => TxOp::SetAttrs {
                cid: coll_of(cid)?,
                oid: ghobject_of(oid)?,
                attrs: attrs.iter().cloned().collect(),
            },
            Op::RmAttr { cid, oid, name } => TxOp::RmAttr {
                cid: coll_of(cid)?,
                oid: ghobject_of(oid)?,
                name: name.clone(),
            },
            Op::RmAttrs { cid, oid } => TxOp::RmAttrs {
                cid: coll_of(cid)?,
                oid: ghobject_of(oid)?,
            },
            Op::OmapSetKeys { cid, oid, kvs } => TxOp::OmapSetKeys {
                cid: coll_of(cid)?,
                oid: ghobject_of(oid)?,
                keys: kvs.iter().cloned().collect(),
            },
            Op::OmapRmKeys { cid, oid, keys } => TxOp::OmapRmKeys {
                cid: coll_of(cid)?,
                oid: ghobject_of(oid)?,
                keys: keys.clone(),
            },
            Op::OmapRmKeyRange {
                cid,
                oid,
                first,
                last,
            } => TxOp::OmapRmKeyRange {
                cid: coll_of(cid)?,
                oid: ghobject_of(oid)?,
                first: first.clone(),
                last: last.clone(),
            },
            Op::OmapClear { cid, oid } => TxOp::OmapClear {
                cid: coll_of(cid)?,
                oid: ghobject_of(oid)?,
            },
            Op::OmapSetHeader { cid, oid, header } => TxOp::OmapSetHeader {
                cid: coll_of(cid)?,
                oid: ghobject_of(oid)?,
                header: header.clone(),
            },
        });
    }
    Ok(t)
}

/// Where an object's attrs come from while a transaction is translated.
#[derive(Clone)]
enum AttrBase {
    /// As stored.
    Store,
    /// None (removed, or created by this transaction).
    Empty,
    /// Copied from another object (a clone): as that object is stored.
    CloneOf(CollectionId, ObjectKey),
}

#[derive(Clone)]
struct ObjState {
    exists: bool,
    base: AttrBase,
    attrs: AttrSet,
}

/// Attr names a transaction has set (true) or removed (false) on an object: a few, so a list.
#[derive(Clone, Default)]
struct AttrSet(Vec<(Bytes, bool)>);

impl AttrSet {
    fn get(&self, name: &Bytes) -> Option<&bool> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }
    fn insert(&mut self, name: Bytes, v: bool) {
        match self.0.iter_mut().find(|(k, _)| *k == name) {
            Some(x) => x.1 = v,
            None => self.0.push((name, v)),
        }
    }
    fn clear(&mut self) {
        self.0.clear();
    }
}

/// Existence of objects and attrs as the transaction goes, read from the store once per object.
struct Tracker<'a, D: Device> {
    store: &'a mut Store<D>,
    /// A transaction names a handful of objects: a list searched front to back beats hashing long keys.
    objs: Vec<(CollectionId, Bytes, ObjState)>,
}

impl<D: Device> Tracker<'_, D> {
    fn state(&mut self, cid: &CollectionId, k: &ObjectKey) -> Result<&mut ObjState, PgError> {
        let at = match self.objs.iter().position(|(c, n, _)| n == &k.name && c == cid) {
            Some(i) => i,
            None => {
                let exists = match self.store.exists(cid, k) {
                    Ok(x) => x,
                    Err(StoreError::NotFound) => false,
                    Err(e) => return Err(e.into()),
                };
                self.objs.push((
                    cid.clone(),
                    k.name.clone(),
                    ObjState {
                        exists,
                        base: if exists { AttrBase::Store } else { AttrBase::Empty },
                        attrs: AttrSet::default(),
                    },
                ));
                self.objs.len() - 1
            }
        };
        self.objs
            .get_mut(at)
            .map(|(_, _, s)| s)
            .ok_or_else(|| PgError::Corrupt("tracker".into()))
    }

    /// The object exists after this op whatever it was before (a write, zero or touch creates it): no store
    /// lookup for an object the transaction has not named yet. Its attrs stay "as stored", which is right
    /// either way: a lookup of an attr of an object the store does not hold finds nothing.
    fn will_exist(&mut self, cid: &CollectionId, k: &ObjectKey) -> Result<(), PgError> {
        if self.objs.iter().any(|(c, n, _)| n == &k.name && c == cid) {
            if !self.exists(cid, k)? {
                self.set_exists(cid, k, true)?;
            }
        } else {
            self.objs.push((
                cid.clone(),
                k.name.clone(),
                ObjState {
                    exists: true,
                    base: AttrBase::Store,
                    attrs: AttrSet::default(),
                },
            ));
        }
        Ok(())
    }
    fn exists(&mut self, cid: &CollectionId, k: &ObjectKey) -> Result<bool, PgError> {
        Ok(self.state(cid, k)?.exists)
    }
    fn set_exists(&mut self, cid: &CollectionId, k: &ObjectKey, e: bool) -> Result<(), PgError> {
        let s = self.state(cid, k)?;
        if !s.exists && e {
            s.base = AttrBase::Empty;
            s.attrs.clear();
        }
        if !e {
            s.base = AttrBase::Empty;
            s.attrs.clear();
        }
        s.exists = e;
        Ok(())
    }
    fn has_attr(&mut self, cid: &CollectionId, k: &ObjectKey, name: &Bytes) -> Result<bool, PgError> {
        let s = self.state(cid, k)?.clone();
        if let Some(v) = s.attrs.get(name) {
            return Ok(*v);
        }
        let (c, o) = match s.base {
            AttrBase::Empty => return Ok(false),
            AttrBase::Store => (cid.clone(), k.clone()),
            AttrBase::CloneOf(c, o) => (c, o),
        };
        match self.store.getattr(&c, &o, name) {
            Ok(_) => Ok(true),
            Err(StoreError::NoData | StoreError::NotFound) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
    fn need(&mut self, cid: &CollectionId, k: &ObjectKey, what: &str) -> Result<(), PgError> {
        if self.exists(cid, k)? {
            Ok(())
        } else {
            Err(PgError::Transaction(format!(
                "{what} on a missing object {}",
                ghobject_of(k).map(|g| g.to_string()).unwrap_or_default()
            )))
        }
    }
}

/// The ferrostore transaction that applies a Ceph transaction to `store` (read-only here: existence checks).
pub fn translate<D: Device>(
    store: &mut Store<D>,
    t: &Transaction,
) -> Result<ferrostore::Transaction, PgError> {
    translate_known(store, t, &[])
}

/// [`translate`] with objects whose existence in the store the caller knows already (no lookup for them).
pub fn translate_known<D: Device>(
    store: &mut Store<D>,
    t: &Transaction,
    known: &[(CollectionId, ObjectKey, bool)],
) -> Result<ferrostore::Transaction, PgError> {
    translate_seeded(store, t, known, &[], &[])
}

/// [`translate_known`] with store names the caller has already (the PG's collection, the op's object): a
/// `coll_t` formatted as text and a `ghobject_t` sort key cost ~1 000 instructions each to build again.
pub(crate) fn translate_seeded<D: Device>(
    store: &mut Store<D>,
    t: &Transaction,
    known: &[(CollectionId, ObjectKey, bool)],
    colls: &[(Coll, CollectionId)],
    keys: &[(GHObject, ObjectKey)],
) -> Result<ferrostore::Transaction, PgError> {
    let ops = t
        .ops()
        .map_err(|e| PgError::Transaction(format!("undecodable transaction: {e}")))?;
    translate_ops(store, ops, known, colls, keys)
}

/// [`translate_seeded`] of the transaction's interpreted ops.
pub(crate) fn translate_ops<D: Device>(
    store: &mut Store<D>,
    ops: Vec<TxOp>,
    known: &[(CollectionId, ObjectKey, bool)],
    colls: &[(Coll, CollectionId)],
    keys: &[(GHObject, ObjectKey)],
) -> Result<ferrostore::Transaction, PgError> {
    let mut out = ferrostore::Transaction::new();
    // (+2: the PG appends its log entry and `_fastinfo` keys, and maybe a trim)
    out.ops.reserve(ops.len() + 2);
    let mut tr = Tracker {
        store,
        objs: Vec::with_capacity(4),
    };
    for (c, k, e) in known {
        tr.objs.push((
            c.clone(),
            k.name.clone(),
            ObjState {
                exists: *e,
                base: if *e { AttrBase::Store } else { AttrBase::Empty },
                attrs: AttrSet::default(),
            },
        ));
    }
    // names repeat across ops: build each store name once (the seeds first, then those built here)
    let (mut more_colls, mut more_keys) = (Vec::new(), Vec::new());
    let mut coll_id = |c: &Coll| -> CollectionId {
        if let Some((_, x)) = colls.iter().chain(more_colls.iter()).find(|(k, _)| k == c) {
            return x.clone();
        }
        let x = coll_id(c);
        more_colls.push((*c, x.clone()));
        x
    };
    let mut object_key = |g: &GHObject| -> ObjectKey {
        if let Some((_, x)) = keys.iter().chain(more_keys.iter()).find(|(k, _)| k == g) {
            return x.clone();
        }
        let x = object_key(g);
        more_keys.push((g.clone(), x.clone()));
        x
    };
    for op in ops {
        match op {
            TxOp::Nop | TxOp::CollHint { .. } => {}
            TxOp::Touch { cid, oid } => {
                let (c, k) = (coll_id(&cid), object_key(&oid));
                tr.will_exist(&c, &k)?;
                out.push(Op::Touch { cid: c, oid: k });
            }
            TxOp::Create { cid, oid } => {
                let (c, k) = (coll_id(&cid), object_key(&oid));
                if tr.exists(&c, &k)? {
                    return Err(PgError::Store(StoreError::Exists));
                }
                tr.set_exists(&c, &k, true)?;
                out.push(Op::Touch { cid: c, oid: k });
            }
            TxOp::Write { cid, oid, off, data } => {
                let (c, k) = (coll_id(&cid), object_key(&oid));
                tr.will_exist(&c, &k)?;
                if data.is_empty() {
                    // BlueStore writes nothing (the object is created all the same)
                    out.push(Op::Touch { cid: c, oid: k });
                } else {
                    out.push(Op::Write {
                        cid: c,
                        oid: k,
                        offset: off,
                        data,
                    });
                }
            }
            TxOp::Zero { cid, oid, off, len } => {
                let (c, k) = (coll_id(&cid), object_key(&oid));
                tr.will_exist(&c, &k)?;
                if len == 0 {
                    out.push(Op::Touch { cid: c, oid: k });
                } else {
                    out.push(Op::Zero {
                        cid: c,
                        oid: k,
                        offset: off,
                        len,
                    });
                }
            }
            TxOp::Truncate { cid, oid, size } => {
                let (c, k) = (coll_id(&cid), object_key(&oid));
                if tr.exists(&c, &k)? {
                    out.push(Op::Truncate { cid: c, oid: k, size });
                }
            }
            TxOp::Remove { cid, oid } => {
                let (c, k) = (coll_id(&cid), object_key(&oid));
                if tr.exists(&c, &k)? {
                    tr.set_exists(&c, &k, false)?;
                    out.push(Op::Remove { cid: c, oid: k });
                }
            }
            TxOp::SetAttr {
                cid,
                oid,
                name,
                value,
            } => {
                let (c, k) = (coll_id(&cid), object_key(&oid));
                tr.need(&c, &k, "setattr")?;
                tr.state(&c, &k)?.attrs.insert(name.clone(), true);
                out.push(Op::SetAttrs {
                    cid: c,
                    oid: k,
                    attrs: vec![(name, value)],
                });
            }
            TxOp::SetAttrs { cid, oid, attrs } => {
                let (c, k) = (coll_id(&cid), object_key(&oid));
                tr.need(&c, &k, "setattrs")?;
                let s = tr.state(&c, &k)?;
                for n in attrs.keys() {
                    s.attrs.insert(n.clone(), true);
                }
                if !attrs.is_empty() {
                    out.push(Op::SetAttrs {
                        cid: c,
                        oid: k,
                        attrs: attrs.into_iter().collect(),
                    });
                }
            }
            TxOp::RmAttr { cid, oid, name } => {
                let (c, k) = (coll_id(&cid), object_key(&oid));
                tr.need(&c, &k, "rmattr")?;
                if tr.has_attr(&c, &k, &name)? {
                    tr.state(&c, &k)?.attrs.insert(name.clone(), false);
                    out.push(Op::RmAttr { cid: c, oid: k, name });
                }
            }
            TxOp::RmAttrs { cid, oid } => {
                let (c, k) = (coll_id(&cid), object_key(&oid));
                if tr.exists(&c, &k)? {
                    let s = tr.state(&c, &k)?;
                    s.base = AttrBase::Empty;
                    s.attrs.clear();
                    out.push(Op::RmAttrs { cid: c, oid: k });
                }
            }
            TxOp::Clone { cid, oid, dest } => {
                let (c, src, dst) = (coll_id(&cid), object_key(&oid), object_key(&dest));
                tr.need(&c, &src, "clone")?;
                let from = tr.state(&c, &src)?.clone();
                let s = tr.state(&c, &dst)?;
                s.exists = true;
                s.attrs = from.attrs;
                s.base = match from.base {
                    AttrBase::Store => AttrBase::CloneOf(c.clone(), src.clone()),
                    b => b,
                };
                out.push(Op::Clone { cid: c, src, dst });
            }
            TxOp::CloneRange {
                cid,
                oid,
                dest,
                src_off,
                len,
                dest_off,
            } => {
                let (c, src, dst) = (coll_id(&cid), object_key(&oid), object_key(&dest));
                tr.need(&c, &src, "clone_range")?;
                if !tr.exists(&c, &dst)? {
                    tr.set_exists(&c, &dst, true)?;
                }
                out.push(Op::CloneRange {
                    cid: c,
                    src,
                    dst,
                    src_offset: src_off,
                    len,
                    dst_offset: dest_off,
                });
            }
            TxOp::MkColl { cid, bits } => {
                out.push(Op::CreateCollection {
                    cid: coll_id(&cid),
                    bits,
                });
            }
            TxOp::RmColl { cid } => {
                out.push(Op::RemoveCollection { cid: coll_id(&cid) });
            }
            TxOp::OmapClear { cid, oid } => {
                let (c, k) = (coll_id(&cid), object_key(&oid));
                if tr.exists(&c, &k)? {
                    out.push(Op::OmapClear { cid: c, oid: k });
                }
            }
            TxOp::OmapSetKeys { cid, oid, keys } => {
                let (c, k) = (coll_id(&cid), object_key(&oid));
                tr.need(&c, &k, "omap_setkeys")?;
                out.push(Op::OmapSetKeys {
                    cid: c,
                    oid: k,
                    kvs: keys.into_iter().collect(),
                });
            }
            TxOp::OmapRmKeys { cid, oid, keys } => {
                let (c, k) = (coll_id(&cid), object_key(&oid));
                tr.need(&c, &k, "omap_rmkeys")?;
                out.push(Op::OmapRmKeys { cid: c, oid: k, keys });
            }
            TxOp::OmapSetHeader { cid, oid, header } => {
                let (c, k) = (coll_id(&cid), object_key(&oid));
                tr.need(&c, &k, "omap_setheader")?;
                out.push(Op::OmapSetHeader {
                    cid: c,
                    oid: k,
                    header,
                });
            }
            TxOp::OmapRmKeyRange {
                cid,
                oid,
                first,
                last,
            } => {
                let (c, k) = (coll_id(&cid), object_key(&oid));
                tr.need(&c, &k, "omap_rmkeyrange")?;
                out.push(Op::OmapRmKeyRange {
                    cid: c,
                    oid: k,
                    first,
                    last,
                });
            }
            // ferrostore has no allocation hints; BlueStore ignores a hint for a missing object too
            TxOp::SetAllocHint { .. } => {}
            TxOp::CollMoveRename {
                old_cid,
                old_oid,
                new_cid,
                new_oid,
            } => {
                let (c, k) = (coll_id(&old_cid), object_key(&old_oid));
                let (nc, nk) = (coll_id(&new_cid), object_key(&new_oid));
                if tr.exists(&c, &k)? {
                    let moved = tr.state(&c, &k)?.clone();
                    tr.set_exists(&c, &k, false)?;
                    let s = tr.state(&nc, &nk)?;
                    if s.exists {
                        return Err(PgError::Store(StoreError::Exists));
                    }
                    s.exists = true;
                    s.attrs = moved.attrs;
                    s.base = match moved.base {
                        AttrBase::Store => AttrBase::CloneOf(c.clone(), k.clone()),
                        b => b,
                    };
                    out.push(Op::Rename {
                        cid: c,
                        oid: k,
                        new_cid: nc,
                        new_oid: nk,
                    });
                }
            }
            TxOp::TryRename {
                cid,
                old_oid,
                new_oid,
            } => {
                let (c, k, nk) = (coll_id(&cid), object_key(&old_oid), object_key(&new_oid));
                if tr.exists(&c, &k)? {
                    let moved = tr.state(&c, &k)?.clone();
                    if tr.exists(&c, &nk)? {
                        tr.set_exists(&c, &nk, false)?;
                        out.push(Op::Remove {
                            cid: c.clone(),
                            oid: nk.clone(),
                        });
                    }
                    tr.set_exists(&c, &k, false)?;
                    let s = tr.state(&c, &nk)?;
                    s.exists = true;
                    s.attrs = moved.attrs;
                    s.base = match moved.base {
                        AttrBase::Store => AttrBase::CloneOf(c.clone(), k.clone()),
                        b => b,
                    };
                    out.push(Op::Rename {
                        cid: c.clone(),
                        oid: k,
                        new_cid: c,
                        new_oid: nk,
                    });
                }
            }
            TxOp::SplitCollection { cid, bits, rem, dest } => {
                // objects change collection: forget what we know about them
                tr.objs.clear();
                out.push(Op::SplitCollection {
                    src: coll_id(&cid),
                    dst: coll_id(&dest),
                    bits,
                    rem,
                });
            }
            TxOp::MergeCollection { .. } => {
                return Err(PgError::Unsupported("merge_collection (PG merge)"));
            }
            TxOp::CollSetBits { .. } => return Err(PgError::Unsupported("collection_set_bits (PG merge)")),
            TxOp::CollAdd { .. } | TxOp::CollRemove { .. } => {
                return Err(PgError::Unsupported("legacy collection_add/remove"));
            }
        }
    }
    Ok(out)
}

/// Apply a Ceph transaction to `store` as one atomic ferrostore transaction; returns its sequence number (an
/// `Event::Durable(seq)` follows).
pub fn apply_ceph_transaction<D: Device>(store: &mut Store<D>, t: &Transaction) -> Result<u64, PgError> {
    let ft = translate(store, t)?;
    Ok(store.queue_transaction(&ft)?)
}
