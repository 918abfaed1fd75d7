// SPDX-License-Identifier: LGPL-3.0-or-later
//! The PG's object context cache: decoded `object_info_t` + SnapSet per object, as Ceph's PrimaryLogPG keeps
//! `object_contexts` (an LRU), so an op on a recently used object needs no store lookup of its `_` and
//! `snapset` xattrs (two B-tree searches each) and no decode.
//!
//! Exactness rests on one fact: the PG is the only writer of its objects. Every store transaction the PG
//! queues goes through [`ObcCache::forget_txn`], which drops the entries of every object the transaction names
//! (whole-collection ops drop everything); a client write then puts back the info and snapset it has just
//! written. Changes made to the PG's objects by anyone else must call `Pg::refresh_stats` (which clears the
//! cache). A role change (replica → primary) clears it too.
//!
//! Bounded by entries and by (estimated) bytes, least recently used out first. Callers put values that keep no
//! message buffer alive: what the store returns is an exact copy of the xattr, and a new object's info is made
//! from an owned name (see `osd_types::owned`).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use bytes::Bytes;
use ferrostore::hash::KeyHasher;
use ferrostore::{CollectionId, Op, Transaction};
use osd_types::{ObjectInfo, SnapSet};

/// What the store holds for an object: its info and snapset, or nothing (`None`: the object does not exist).
pub(crate) type Context = Option<(ObjectInfo, SnapSet)>;

const NIL: u32 = u32::MAX;

struct Node {
    key: Bytes,
    val: Context,
    bytes: usize,
    prev: u32,
    next: u32,
}

/// Hit/miss counters of the object context cache (see [`crate::Pg::obc_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ObcStats {
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    pub entries: usize,
    pub bytes: usize,
}

/// An LRU over a slab: `map` finds a node, `prev`/`next` link the nodes from most (`head`) to least (`tail`)
/// recently used.
pub(crate) struct ObcCache {
    map: HashMap<Bytes, u32, BuildHasherDefault<KeyHasher>>,
    nodes: Vec<Node>,
    free: Vec<u32>,
    head: u32,
    tail: u32,
    max_entries: usize,
    max_bytes: usize,
    bytes: usize,
    hits: u64,
    misses: u64,
    evictions: u64,
}

/// Heap and inline bytes an entry costs (an estimate: allocator overhead and map slack are not counted).
fn entry_bytes(key: &Bytes, val: &Context) -> usize {
    let mut n = std::mem::size_of::<Node>() + std::mem::size_of::<(Bytes, u32)>() + key.len();
    if let Some((oi, ss)) = val {
        n += oi.soid.oid.0.len() + oi.soid.key.len() + oi.soid.nspace.len();
        n += oi.oloc.key.len() + oi.oloc.nspace.len() + oi.manifest.len();
        n += oi.watchers.len() * 96;
        n += (ss.snaps.len() + ss.clones.len()) * 8;
        n += ss.clone_size.len() * 48;
        n += ss
            .clone_overlap
            .values()
            .map(|o| 48 + o.len() * 48)
            .sum::<usize>();
        n += ss.clone_snaps.values().map(|s| 48 + s.len() * 8).sum::<usize>();
    }
    n
}

impl ObcCache {
    /// A cache of at most `max_entries` objects and about `max_bytes`; 0 entries disables it.
    pub fn new(max_entries: usize, max_bytes: usize) -> Self {
        ObcCache {
            map: HashMap::default(),
            nodes: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            max_entries: max_entries.min(NIL as usize - 1),
            max_bytes,
            bytes: 0,
            hits: 0,
            misses: 0,
            evictions: 0,
        }
    }

    pub fn enabled(&self) -> bool {
        self.max_entries > 0
    }

    pub fn stats(&self) -> ObcStats {
        ObcStats {
            hits: self.hits,
            misses: self.misses,
            evictions: self.evictions,
            entries: self.map.len(),
            bytes: self.bytes,
        }
    }

    fn unlink(&mut self, i: u32) {
        let (p, n) = {
            let x = &self.nodes[i as usize];
            (x.prev, x.next)
        };
        if p == NIL {
            self.head = n;
        } else {
            self.nodes[p as usize].next = n;
        }
        if n == NIL {
            self.tail = p;
        } else {
            self.nodes[n as usize].prev = p;
        }
    }

    fn push_front(&mut self, i: u32) {
        let old = self.head;
        {
            let x = &mut self.nodes[i as usize];
            x.prev = NIL;
            x.next = old;
        }
        if old == NIL {
            self.tail = i;
        } else {
            self.nodes[old as usize].prev = i;
        }
        self.head = i;
    }

    /// The cached context of the object with store name `key` (a clone of it), counting a hit or a miss.
    pub fn get(&mut self, key: &[u8]) -> Option<Context> {
        if !self.enabled() {
            return None;
        }
        let Some(&i) = self.map.get(key) else {
            self.misses += 1;
            return None;
        };
        self.hits += 1;
        if self.head != i {
            self.unlink(i);
            self.push_front(i);
        }
        Some(self.nodes[i as usize].val.clone())
    }

    /// Remember `val` for `key` (replacing what was there); evicts the least recently used beyond the bounds.
    pub fn put(&mut self, key: &Bytes, val: Context) {
        if !self.enabled() {
            return;
        }
        self.remove(key);
        let key = key.clone();
        let bytes = entry_bytes(&key, &val);
        if bytes > self.max_bytes {
            return;
        }
        while !self.map.is_empty()
            && (self.map.len() >= self.max_entries || self.bytes + bytes > self.max_bytes)
        {
            let t = self.tail;
            let k = self.nodes[t as usize].key.clone();
            self.remove(&k);
            self.evictions += 1;
        }
        let node = Node {
            key: key.clone(),
            val,
            bytes,
            prev: NIL,
            next: NIL,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        self.push_front(i);
        self.map.insert(key, i);
        self.bytes += bytes;
    }

    /// Forget the object with store name `key`.
    pub fn remove(&mut self, key: &[u8]) {
        let Some(i) = self.map.remove(key) else {
            return;
        };
        self.unlink(i);
        let x = &mut self.nodes[i as usize];
        self.bytes -= x.bytes;
        x.key = Bytes::new();
        x.val = None;
        self.free.push(i);
    }

    pub fn clear(&mut self) {
        self.map.clear();
        self.nodes.clear();
        self.free.clear();
        self.head = NIL;
        self.tail = NIL;
        self.bytes = 0;
    }

    /// Forget every object of collection `cid` that `t` changes (all of them for collection-wide ops).
    pub fn forget_txn(&mut self, cid: &CollectionId, t: &Transaction) {
        if self.map.is_empty() {
            return;
        }
        for op in &t.ops {
            match op {
                Op::CreateCollection { .. } | Op::RemoveCollection { .. } | Op::SplitCollection { .. } => {
                    self.clear();
                    return;
                }
                Op::Rename {
                    cid: a,
                    oid,
                    new_cid: b,
                    new_oid,
                } => {
                    if a == cid {
                        self.remove(&oid.name);
                    }
                    if b == cid {
                        self.remove(&new_oid.name);
                    }
                }
                Op::Clone { cid: c, dst, .. } | Op::CloneRange { cid: c, dst, .. } => {
                    if c == cid {
                        self.remove(&dst.name);
                    }
                }
                Op::Touch { cid: c, oid }
                | Op::Write { cid: c, oid, .. }
                | Op::Zero { cid: c, oid, .. }
                | Op::Truncate { cid: c, oid, .. }
                | Op::Remove { cid: c, oid }
                | Op::SetAttrs { cid: c, oid, .. }
                | Op::RmAttr { cid: c, oid, .. }
                | Op::RmAttrs { cid: c, oid }
                | Op::OmapSetKeys { cid: c, oid, .. }
                | Op::OmapRmKeys { cid: c, oid, .. }
                | Op::OmapRmKeyRange { cid: c, oid, .. }
                | Op::OmapClear { cid: c, oid }
                | Op::OmapSetHeader { cid: c, oid, .. } => {
                    if c == cid {
                        self.remove(&oid.name);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use denc::{HObject, SnapId};

    fn ctx(size: u64) -> Context {
        let mut oi = ObjectInfo::new(HObject::new("o", "", SnapId::NOSNAP, 1, 1, ""));
        oi.size = size;
        Some((oi, SnapSet::default()))
    }

    fn k(i: u32) -> Bytes {
        Bytes::from(format!("key-{i}"))
    }

    #[test]
    fn least_recently_used_goes_first() {
        let mut c = ObcCache::new(3, usize::MAX);
        for i in 0..3 {
            c.put(&k(i), ctx(u64::from(i)));
        }
        assert!(c.get(&k(0)).is_some()); // 0 is now the newest
        c.put(&k(3), ctx(3)); // evicts 1
        assert!(c.get(&k(1)).is_none());
        for i in [0, 2, 3] {
            assert_eq!(c.get(&k(i)).unwrap().unwrap().0.size, u64::from(i));
        }
        let s = c.stats();
        assert_eq!((s.entries, s.evictions, s.hits, s.misses), (3, 1, 4, 1));
        // a negative entry is a hit too
        c.put(&k(9), None);
        assert_eq!(c.get(&k(9)), Some(None));
    }

    #[test]
    fn bounded_by_bytes_and_disabled_at_zero() {
        let one = entry_bytes(&k(0), &ctx(0));
        let mut c = ObcCache::new(1000, one * 2 + one / 2);
        for i in 0..10 {
            c.put(&k(i), ctx(0));
            assert!(c.stats().bytes <= one * 2 + one / 2);
        }
        assert_eq!(c.stats().entries, 2);
        assert!(c.get(&k(9)).is_some() && c.get(&k(8)).is_some());
        let mut off = ObcCache::new(0, usize::MAX);
        off.put(&k(0), ctx(0));
        assert!(off.get(&k(0)).is_none());
        assert_eq!(off.stats(), ObcStats::default());
    }

    #[test]
    fn transactions_forget_what_they_touch() {
        let cid = CollectionId::new(Bytes::from_static(b"1.0_head"));
        let other = CollectionId::new(Bytes::from_static(b"1.1_head"));
        let mut c = ObcCache::new(16, usize::MAX);
        for i in 0..4 {
            c.put(&k(i), ctx(0));
        }
        let key = |i| ferrostore::ObjectKey::new(0, k(i));
        let mut t = Transaction::new();
        t.push(Op::Write {
            cid: cid.clone(),
            oid: key(0),
            offset: 0,
            data: Bytes::from_static(b"x"),
        });
        t.push(Op::Remove {
            cid: other.clone(),
            oid: key(1),
        });
        t.push(Op::Rename {
            cid: cid.clone(),
            oid: key(7),
            new_cid: cid.clone(),
            new_oid: key(2),
        });
        c.forget_txn(&cid, &t);
        assert!(c.get(&k(0)).is_none() && c.get(&k(2)).is_none());
        assert!(c.get(&k(1)).is_some() && c.get(&k(3)).is_some());
        let mut t = Transaction::new();
        t.push(Op::RemoveCollection { cid: other });
        c.forget_txn(&cid, &t);
        assert_eq!(c.stats().entries, 0);
    }
}
