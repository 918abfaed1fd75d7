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
    let mut k = Vec::with_capacity(2 + c.0.len() + name.len());
    onode_into(c, name, &mut k);
    k
}
/// [`onode`] into `k` (cleared first): a lookup with a reused buffer allocates nothing.
pub fn onode_into(c: &CollectionId, name: &[u8], k: &mut Vec<u8>) {
    k.clear();
    k.push(NS_ONODE);
    k.push(c.0.len() as u8);
    k.extend_from_slice(&c.0);
    k.extend_from_slice(name);
}
fn id_key(ns: u8, id: u64) -> Vec<u8> {
    id_key_with(ns, id, 23)
}
/// An id-scoped key with room for `more` bytes after the id (exact, so appending never reallocates).
fn id_key_with(ns: u8, id: u64, more: usize) -> Vec<u8> {
    let mut k = Vec::with_capacity(9 + more);
    k.push(ns);
    k.extend_from_slice(&id.to_be_bytes());
    k
}
pub fn extent_prefix(id: u64) -> Vec<u8> {
    id_key(NS_EXTENT, id)
}
pub fn extent(id: u64, lblock: u64) -> Vec<u8> {
    let mut k = id_key_with(NS_EXTENT, id, 8);
    k.extend_from_slice(&lblock.to_be_bytes());
    k
}
pub fn attr_prefix(id: u64) -> Vec<u8> {
    id_key(NS_ATTR, id)
}
pub fn attr(id: u64, name: &[u8]) -> Vec<u8> {
    let mut k = id_key_with(NS_ATTR, id, name.len());
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
    let mut k = id_key_with(NS_OMAP, id, key.len());
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
    fn value_forms_round_trip_and_reject_garbage() {
        let e = Value::inline_encoded(b"abc");
        assert_eq!(Value::decode(&e).unwrap(), Value::Inline(b"abc"));
        let runs = vec![(100u64, 2u16), (300, 1)];
        let e = Value::spilled_encoded(9000, 7, &runs);
        let v = Value::decode(&e).unwrap();
        assert_eq!(v.runs().collect::<Vec<_>>(), vec![(100, 2), (300, 1)]);
        // 9000 bytes need 3 blocks: a run list that disagrees is corruption, as is any truncation.
        assert!(Value::decode(&Value::spilled_encoded(5000, 7, &runs)).is_err());
        for cut in 1..e.len() {
            assert!(Value::decode(&e[..cut]).is_err());
        }
        assert!(Value::decode(&[]).is_err());
        assert!(Value::decode(&[9, 1, 2]).is_err());
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

/// Largest attr / omap / omap-header value accepted (bytes). Values that do not fit in a tree entry are spilled to
/// data blocks (`Value::Spilled`).
pub const MAX_VALUE_LEN: usize = 256 << 10;
/// At most this many block runs describe one spilled value (bounds the tree entry: 10 + 10 * 64 bytes).
pub const MAX_SPILL_RUNS: usize = 64;

const VALUE_INLINE: u8 = 0;
const VALUE_SPILLED: u8 = 1;

/// The stored form of an attr, omap or omap-header value: inline in the tree entry, or in data blocks referenced
/// from it (`len` bytes laid out over `runs` in order, zero padded to whole blocks, one crc32c over the `len` bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value<'a> {
    Inline(&'a [u8]),
    Spilled {
        len: u32,
        crc: u32,
        runs: Vec<(u64, u16)>,
    },
}

impl<'a> Value<'a> {
    pub fn inline_encoded(v: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(1 + v.len());
        out.push(VALUE_INLINE);
        out.extend_from_slice(v);
        out
    }

    pub fn spilled_encoded(len: u32, crc: u32, runs: &[(u64, u16)]) -> Vec<u8> {
        let mut w = Writer::with_capacity(10 + 10 * runs.len());
        w.u8(VALUE_SPILLED).u32(len).u32(crc).u8(runs.len() as u8);
        for (b, n) in runs {
            w.u64(*b).u16(*n);
        }
        w.buf
    }

    pub fn decode(b: &'a [u8]) -> Result<Self> {
        match b.split_first() {
            Some((&VALUE_INLINE, rest)) => Ok(Value::Inline(rest)),
            Some((&VALUE_SPILLED, _)) => {
                let mut r = Reader::new(&b[1..]);
                let len = r.u32()?;
                let crc = r.u32()?;
                let n = r.u8()? as usize;
                if len as usize > MAX_VALUE_LEN || n == 0 || n > MAX_SPILL_RUNS {
                    return Err(StoreError::Corrupt("spilled value header".into()));
                }
                let mut runs = Vec::with_capacity(n);
                let mut blocks = 0u64;
                for _ in 0..n {
                    let (pb, nb) = (r.u64()?, r.u16()?);
                    if nb == 0 {
                        return Err(StoreError::Corrupt("empty spilled value run".into()));
                    }
                    blocks += nb as u64;
                    runs.push((pb, nb));
                }
                if blocks != (len as u64).div_ceil(crate::format::BLOCK_SIZE) {
                    return Err(StoreError::Corrupt(
                        "spilled value runs do not match its length".into(),
                    ));
                }
                Ok(Value::Spilled { len, crc, runs })
            }
            _ => Err(StoreError::Corrupt("value form".into())),
        }
    }

    /// Block runs this value occupies (none when inline).
    pub fn runs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let r: &[(u64, u16)] = match self {
            Value::Inline(_) => &[],
            Value::Spilled { runs, .. } => runs,
        };
        r.iter().map(|(b, n)| (*b, *n as u64))
    }
}

/// Kinds whose values have the inline/spilled form.
pub fn has_value_form(key: &[u8]) -> bool {
    matches!(key.first(), Some(&NS_ATTR) | Some(&NS_OMAP_HDR) | Some(&NS_OMAP))
}
