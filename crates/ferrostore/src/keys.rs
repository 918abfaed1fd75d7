// SPDX-License-Identifier: LGPL-3.0-or-later
//! Public identifiers (collections, objects) and the metadata key space of the tree.
//!
//! Every metadata item is one tree entry; the first key byte names its kind. Object-scoped items are keyed by the
//! onode's numeric id (not its name) so that rename, PG split and clone never rewrite them.

use crate::error::{Result, StoreError};
use crate::format::{Reader, Writer};
use bytes::Bytes;

pub const MAX_CID_LEN: usize = 64;
pub const MAX_NAME_LEN: usize = 400;

/// Opaque collection id (the OSD encodes coll_t into it).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CollectionId(pub Bytes);

impl CollectionId {
    pub fn new(b: impl Into<Bytes>) -> Self {
        CollectionId(b.into())
    }
}

/// An object: an order-preserving byte key (memcmp order of `name` is the listing order the OSD wants; the OSD
/// encodes ghobject_t so that this equals Ceph's order) plus the object's 32-bit placement hash, which PG split
/// uses. Identity and order are by `name` only.
#[derive(Debug, Clone)]
pub struct ObjectKey {
    pub hash: u32,
    pub name: Bytes,
}

impl ObjectKey {
    pub fn new(hash: u32, name: impl Into<Bytes>) -> Self {
        ObjectKey {
            hash,
            name: name.into(),
        }
    }
}

impl PartialEq for ObjectKey {
    fn eq(&self, o: &Self) -> bool {
        self.name == o.name
    }
}
impl Eq for ObjectKey {}
impl PartialOrd for ObjectKey {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for ObjectKey {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.name.cmp(&o.name)
    }
}

pub const NS_META: u8 = 0x00;
pub const NS_COLL: u8 = 0x01;
pub const NS_ONODE: u8 = 0x02;
pub const NS_EXTENT: u8 = 0x03;
pub const NS_ATTR: u8 = 0x04;
pub const NS_OMAP_HDR: u8 = 0x05;
pub const NS_OMAP: u8 = 0x06;
pub const NS_REF: u8 = 0x07;

pub fn check_cid(c: &CollectionId) -> Result<()> {
    if c.0.len() > MAX_CID_LEN {
        return Err(StoreError::TooLarge("collection id"));
    }
    Ok(())
}

pub fn check_name(o: &ObjectKey) -> Result<()> {
    if o.name.len() > MAX_NAME_LEN {
        return Err(StoreError::TooLarge("object name"));
    }
    Ok(())
}

pub fn meta_next_id() -> Vec<u8> {
    vec![NS_META, b'n']
}
pub fn coll(c: &CollectionId) -> Vec<u8> {
    let mut k = vec![NS_COLL];
    k.extend_from_slice(&c.0);
    k
}
pub fn onode_prefix(c: &CollectionId) -> Vec<u8> {
    let mut k = Vec::with_capacity(2 + c.0.len() + 64);
    k.push(NS_ONODE);
    k.push(c.0.len() as u8);
    k.extend_from_slice(&c.0);
    k
}
pub fn onode(c: &CollectionId, name: &[u8]) -> Vec<u8> {
    let mut k = onode_prefix(c);
    k.extend_from_slice(name);
    k
}
fn id_key(ns: u8, id: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(32);
    k.push(ns);
    k.extend_from_slice(&id.to_be_bytes());
    k
}
pub fn extent_prefix(id: u64) -> Vec<u8> {
    id_key(NS_EXTENT, id)
}
pub fn extent(id: u64, lblock: u64) -> Vec<u8> {
    let mut k = id_key(NS_EXTENT, id);
    k.extend_from_slice(&lblock.to_be_bytes());
    k
}
pub fn attr_prefix(id: u64) -> Vec<u8> {
    id_key(NS_ATTR, id)
}
pub fn attr(id: u64, name: &[u8]) -> Vec<u8> {
    let mut k = id_key(NS_ATTR, id);
    k.extend_from_slice(name);
    k
}
pub fn omap_header(id: u64) -> Vec<u8> {
    id_key(NS_OMAP_HDR, id)
}
pub fn omap_prefix(id: u64) -> Vec<u8> {
    id_key(NS_OMAP, id)
}
pub fn omap(id: u64, key: &[u8]) -> Vec<u8> {
    let mut k = id_key(NS_OMAP, id);
    k.extend_from_slice(key);
    k
}
pub fn refcount(pblock: u64) -> Vec<u8> {
    id_key(NS_REF, pblock)
}

/// Smallest key greater than every key starting with `prefix` (None: no such key).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut k = prefix.to_vec();
    while let Some(last) = k.pop() {
        if last < 0xff {
            k.push(last + 1);
            return Some(k);
        }
    }
    None
}

pub fn be_u64(b: &[u8]) -> Result<u64> {
    let a: [u8; 8] = b
        .try_into()
        .map_err(|_| StoreError::Corrupt("bad u64 key field".into()))?;
    Ok(u64::from_be_bytes(a))
}

/// Per-object metadata record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Onode {
    pub id: u64,
    pub size: u64,
    pub hash: u32,
}

impl Onode {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(21);
        w.u8(1).u64(self.id).u64(self.size).u32(self.hash);
        w.buf
    }
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut r = Reader::new(b);
        if r.u8()? != 1 {
            return Err(StoreError::Corrupt("onode version".into()));
        }
        Ok(Onode {
            id: r.u64()?,
            size: r.u64()?,
            hash: r.u32()?,
        })
    }
}

/// Extent-map entry: logical blocks `[lblock, lblock + crcs.len())` live at physical blocks
/// `[pblock, pblock + crcs.len())`; one crc32c per 4 KiB block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extent {
    pub pblock: u64,
    pub crcs: Vec<u32>,
}

impl Extent {
    pub fn blocks(&self) -> u64 {
        self.crcs.len() as u64
    }
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(9 + 4 * self.crcs.len());
        w.u64(self.pblock).u8(self.crcs.len() as u8);
        for c in &self.crcs {
            w.u32(*c);
        }
        w.buf
    }
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut r = Reader::new(b);
        let pblock = r.u64()?;
        let n = r.u8()? as usize;
        if n == 0 || n as u64 > crate::format::MAX_EXTENT_BLOCKS {
            return Err(StoreError::Corrupt(format!("extent with {n} blocks")));
        }
        let mut crcs = Vec::with_capacity(n);
        for _ in 0..n {
            crcs.push(r.u32()?);
        }
        Ok(Extent { pblock, crcs })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_bounds_prefix() {
        assert_eq!(prefix_end(&[1, 2]), Some(vec![1, 3]));
        assert_eq!(prefix_end(&[1, 0xff]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xff]), None);
        let p = onode_prefix(&CollectionId::new(&b"c"[..]));
        let e = prefix_end(&p).unwrap();
        assert!(onode(&CollectionId::new(&b"c"[..]), &[0xff; 20]) < e);
        assert!(onode(&CollectionId::new(&b"cd"[..]), b"") > e);
    }

    #[test]
    fn values_round_trip_and_reject_garbage() {
        let o = Onode {
            id: 9,
            size: 12345,
            hash: 0xdead,
        };
        assert_eq!(Onode::decode(&o.encode()).unwrap(), o);
        let e = Extent {
            pblock: 77,
            crcs: vec![1, 2, 3],
        };
        assert_eq!(Extent::decode(&e.encode()).unwrap(), e);
        assert!(Extent::decode(&[0; 9]).is_err());
        assert!(Extent::decode(&[1; 5]).is_err());
        assert!(Onode::decode(&[2; 21]).is_err());
    }
}
