// SPDX-License-Identifier: LGPL-3.0-or-later
//! Transactions: an ordered list of operations applied atomically (all or nothing) and acknowledged once durable.

use crate::keys::{CollectionId, ObjectKey};
use bytes::Bytes;

#[derive(Debug, Clone)]
pub enum Op {
    CreateCollection {
        cid: CollectionId,
        bits: u32,
    },
    /// Fails with NotEmpty unless the collection holds no objects.
    RemoveCollection {
        cid: CollectionId,
    },
    /// Move the objects of `src` whose `hash & ((1 << bits) - 1) == rem` to `dst` (PG split); both collections get
    /// `bits`. `dst` must exist.
    SplitCollection {
        src: CollectionId,
        dst: CollectionId,
        bits: u32,
        rem: u32,
    },
    Touch {
        cid: CollectionId,
        oid: ObjectKey,
    },
    /// `data` is written from the caller's buffer (no copy for whole, aligned blocks).
    Write {
        cid: CollectionId,
        oid: ObjectKey,
        offset: u64,
        data: Bytes,
    },
    Zero {
        cid: CollectionId,
        oid: ObjectKey,
        offset: u64,
        len: u64,
    },
    Truncate {
        cid: CollectionId,
        oid: ObjectKey,
        size: u64,
    },
    Remove {
        cid: CollectionId,
        oid: ObjectKey,
    },
    /// Replace `dst` by a copy of `src` (data shared, attrs and omap copied).
    Clone {
        cid: CollectionId,
        src: ObjectKey,
        dst: ObjectKey,
    },
    CloneRange {
        cid: CollectionId,
        src: ObjectKey,
        dst: ObjectKey,
        src_offset: u64,
        len: u64,
        dst_offset: u64,
    },
    /// Move an object to another name (and collection). Fails with Exists if the target exists.
    Rename {
        cid: CollectionId,
        oid: ObjectKey,
        new_cid: CollectionId,
        new_oid: ObjectKey,
    },
    SetAttrs {
        cid: CollectionId,
        oid: ObjectKey,
        attrs: Vec<(Bytes, Bytes)>,
    },
    RmAttr {
        cid: CollectionId,
        oid: ObjectKey,
        name: Bytes,
    },
    RmAttrs {
        cid: CollectionId,
        oid: ObjectKey,
    },
    OmapSetKeys {
        cid: CollectionId,
        oid: ObjectKey,
        kvs: Vec<(Bytes, Bytes)>,
    },
    OmapRmKeys {
        cid: CollectionId,
        oid: ObjectKey,
        keys: Vec<Bytes>,
    },
    /// Remove keys in `[first, last)`.
    OmapRmKeyRange {
        cid: CollectionId,
        oid: ObjectKey,
        first: Bytes,
        last: Bytes,
    },
    /// Remove all keys and the header.
    OmapClear {
        cid: CollectionId,
        oid: ObjectKey,
    },
    OmapSetHeader {
        cid: CollectionId,
        oid: ObjectKey,
        header: Bytes,
    },
}

#[derive(Debug, Clone, Default)]
pub struct Transaction {
    pub ops: Vec<Op>,
}

impl Transaction {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn push(&mut self, op: Op) -> &mut Self {
        self.ops.push(op);
        self
    }
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
    /// User payload bytes carried by the transaction (for write-amplification accounting).
    pub fn payload_bytes(&self) -> u64 {
        self.ops
            .iter()
            .map(|op| match op {
                Op::Write { data, .. } => data.len() as u64,
                Op::OmapSetKeys { kvs, .. } | Op::SetAttrs { attrs: kvs, .. } => {
                    kvs.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum()
                }
                _ => 0,
            })
            .sum()
    }
}
