// SPDX-License-Identifier: LGPL-3.0-or-later
//! `ObjectStore::Transaction` (src/os/Transaction.h) in its wire form, version 9/9: what a primary ships to its
//! replicas in MOSDRepOp's data segment (Pacific) and what they apply.
//!
//! Layout: `data_bl` (the ops' variable payloads, back to back), `op_bl` (fixed 72-byte packed `Op` records),
//! `coll_index` (`map<coll_t, u32>`), `object_index` (`map<ghobject_t, u32>`) and the packed 24-byte
//! `TransactionData`. Ops name collections and objects by index; their payloads are read from `data_bl` in op
//! order. A decoded transaction keeps every part as received (the index keys with their exact bytes), so it
//! re-encodes byte for byte; [`Transaction::ops`] interprets it, and the builder methods create one as Ceph's
//! would for the ops ferrostore supports.

use std::collections::BTreeMap;

use bytes::Bytes;
use denc::{Coll, Decode, DecodeError, Decoder, Encode, Encoder, GHObject};

pub use crate::bufferlist::BufferList;

/// `Transaction::OP_*` codes.
pub mod op_code {
    pub const NOP: u32 = 0;
    pub const CREATE: u32 = 7;
    pub const COLL_MOVE: u32 = 8;
    pub const TOUCH: u32 = 9;
    pub const WRITE: u32 = 10;
    pub const ZERO: u32 = 11;
    pub const TRUNCATE: u32 = 12;
    pub const REMOVE: u32 = 13;
    pub const SETATTR: u32 = 14;
    pub const SETATTRS: u32 = 15;
    pub const RMATTR: u32 = 16;
    pub const CLONE: u32 = 17;
    pub const CLONERANGE: u32 = 18;
    pub const MKCOLL: u32 = 20;
    pub const RMCOLL: u32 = 21;
    pub const COLL_ADD: u32 = 22;
    pub const COLL_REMOVE: u32 = 23;
    pub const RMATTRS: u32 = 28;
    pub const CLONERANGE2: u32 = 30;
    pub const OMAP_CLEAR: u32 = 31;
    pub const OMAP_SETKEYS: u32 = 32;
    pub const OMAP_RMKEYS: u32 = 33;
    pub const OMAP_SETHEADER: u32 = 34;
    pub const SPLIT_COLLECTION2: u32 = 36;
    pub const OMAP_RMKEYRANGE: u32 = 37;
    pub const COLL_MOVE_RENAME: u32 = 38;
    pub const SETALLOCHINT: u32 = 39;
    pub const COLL_HINT: u32 = 40;
    pub const TRY_RENAME: u32 = 41;
    pub const COLL_SET_BITS: u32 = 42;
    pub const MERGE_COLLECTION: u32 = 43;
}

/// Size of the packed `Transaction::Op`.
pub const OP_LEN: usize = 72;
/// Size of the packed `TransactionData`.
pub const TX_DATA_LEN: usize = 24;

/// The packed `Transaction::Op` record: which fields mean something depends on `op`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RawOp {
    pub op: u32,
    pub cid: u32,
    pub oid: u32,
    pub off: u64,
    pub len: u64,
    pub dest_cid: u32,
    pub dest_oid: u32,
    pub dest_off: u64,
    pub hint: u32,
    pub expected_object_size: u64,
    pub expected_write_size: u64,
    pub split_bits: u32,
    pub split_rem: u32,
}

impl RawOp {
    fn new(op: u32) -> Self {
        RawOp {
            op,
            ..Default::default()
        }
    }
    fn encode(&self, e: &mut Encoder) {
        e.u32(self.op);
        e.u32(self.cid);
        e.u32(self.oid);
        e.u64(self.off);
        e.u64(self.len);
        e.u32(self.dest_cid);
        e.u32(self.dest_oid);
        e.u64(self.dest_off);
        e.u32(self.hint);
        e.u64(self.expected_object_size);
        e.u64(self.expected_write_size);
        e.u32(self.split_bits);
        e.u32(self.split_rem);
    }
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        Ok(RawOp {
            op: d.u32()?,
            cid: d.u32()?,
            oid: d.u32()?,
            off: d.u64()?,
            len: d.u64()?,
            dest_cid: d.u32()?,
            dest_oid: d.u32()?,
            dest_off: d.u64()?,
            hint: d.u32()?,
            expected_object_size: d.u64()?,
            expected_write_size: d.u64()?,
            split_bits: d.u32()?,
            split_rem: d.u32()?,
        })
    }
}
const _: () = assert!(4 * 8 + 8 * 5 == OP_LEN);

/// The packed `TransactionData` summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxData {
    pub ops: u64,
    pub largest_data_len: u32,
    pub largest_data_off: u32,
    pub largest_data_off_in_data_bl: u32,
    pub fadvise_flags: u32,
}

/// An index key as received: its decoded value and its exact bytes (so re-encoding cannot drift even where a key
/// type has several encodings, as `coll_t` has).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keyed<T> {
    pub value: T,
    pub raw: Bytes,
}

impl<T: Encode> Keyed<T> {
    fn new(value: T) -> Self {
        let raw = crate::encode_sized(&value, u64::MAX, 128);
        Keyed { value, raw }
    }
}

fn decode_keyed<T: Decode>(d: &mut Decoder) -> Result<Keyed<T>, DecodeError> {
    let mut probe = d.clone();
    let value = T::decode(&mut probe)?;
    let used = d.remaining() - probe.remaining();
    let raw = d.take_bytes(used)?;
    Ok(Keyed { value, raw })
}

/// One interpreted op, with collections and objects resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxOp {
    Nop,
    Touch {
        cid: Coll,
        oid: GHObject,
    },
    Create {
        cid: Coll,
        oid: GHObject,
    },
    Write {
        cid: Coll,
        oid: GHObject,
        off: u64,
        data: Bytes,
    },
    Zero {
        cid: Coll,
        oid: GHObject,
        off: u64,
        len: u64,
    },
    Truncate {
        cid: Coll,
        oid: GHObject,
        size: u64,
    },
    Remove {
        cid: Coll,
        oid: GHObject,
    },
    SetAttr {
        cid: Coll,
        oid: GHObject,
        name: Bytes,
        value: Bytes,
    },
    SetAttrs {
        cid: Coll,
        oid: GHObject,
        attrs: BTreeMap<Bytes, Bytes>,
    },
    RmAttr {
        cid: Coll,
        oid: GHObject,
        name: Bytes,
    },
    RmAttrs {
        cid: Coll,
        oid: GHObject,
    },
    Clone {
        cid: Coll,
        oid: GHObject,
        dest: GHObject,
    },
    CloneRange {
        cid: Coll,
        oid: GHObject,
        dest: GHObject,
        src_off: u64,
        len: u64,
        dest_off: u64,
    },
    MkColl {
        cid: Coll,
        bits: u32,
    },
    RmColl {
        cid: Coll,
    },
    CollHint {
        cid: Coll,
        hint_type: u32,
        hint: Bytes,
    },
    OmapClear {
        cid: Coll,
        oid: GHObject,
    },
    OmapSetKeys {
        cid: Coll,
        oid: GHObject,
        keys: BTreeMap<Bytes, Bytes>,
    },
    OmapRmKeys {
        cid: Coll,
        oid: GHObject,
        keys: Vec<Bytes>,
    },
    OmapSetHeader {
        cid: Coll,
        oid: GHObject,
        header: Bytes,
    },
    OmapRmKeyRange {
        cid: Coll,
        oid: GHObject,
        first: Bytes,
        last: Bytes,
    },
    SetAllocHint {
        cid: Coll,
        oid: GHObject,
        expected_object_size: u64,
        expected_write_size: u64,
        flags: u32,
    },
    CollMoveRename {
        old_cid: Coll,
        old_oid: GHObject,
        new_cid: Coll,
        new_oid: GHObject,
    },
    TryRename {
        cid: Coll,
        old_oid: GHObject,
        new_oid: GHObject,
    },
    SplitCollection {
        cid: Coll,
        bits: u32,
        rem: u32,
        dest: Coll,
    },
    MergeCollection {
        cid: Coll,
        dest: Coll,
        bits: u32,
    },
    CollSetBits {
        cid: Coll,
        bits: u32,
    },
    CollAdd {
        cid: Coll,
        dest: Coll,
        oid: GHObject,
    },
    CollRemove {
        cid: Coll,
        oid: GHObject,
    },
}

/// Why a transaction's ops could not be interpreted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TxError {
    #[error("op {index}: unsupported op code {op}")]
    Unsupported { index: usize, op: u32 },
    #[error("op {index}: collection index {id} not in the transaction")]
    BadColl { index: usize, id: u32 },
    #[error("op {index}: object index {id} not in the transaction")]
    BadObject { index: usize, id: u32 },
    #[error("op {index}: payload: {source}")]
    Payload {
        index: usize,
        #[source]
        source: DecodeError,
    },
}

fn pl<T>(index: usize, r: Result<T, DecodeError>) -> Result<T, TxError> {
    r.map_err(|source| TxError::Payload { index, source })
}

/// `ObjectStore::Transaction`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Transaction {
    /// The ops' payloads as a rope: a write's data is the caller's buffer, by reference (see
    /// [`Transaction::write`] and [`Transaction::encode_rope`]).
    pub data_bl: BufferList,
    pub ops: Vec<RawOp>,
    /// In key order, as the map was encoded.
    pub coll_index: Vec<(Keyed<Coll>, u32)>,
    pub object_index: Vec<(Keyed<GHObject>, u32)>,
    pub data: TxData,
}

impl Encode for Transaction {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(9, 9, |e| {
            e.length(self.data_bl.len());
            for p in self.data_bl.pieces() {
                e.raw(p);
            }
            self.encode_tail(e);
        })
    }
}

impl Transaction {
    /// Everything after `data_bl`.
    fn encode_tail(&self, e: &mut Encoder) {
        {
            e.length(self.ops.len() * OP_LEN);
            for op in &self.ops {
                op.encode(e);
            }
            e.length(self.coll_index.len());
            for (k, v) in &self.coll_index {
                e.raw(&k.raw);
                e.u32(*v);
            }
            e.length(self.object_index.len());
            for (k, v) in &self.object_index {
                e.raw(&k.raw);
                e.u32(*v);
            }
            e.u64(self.data.ops);
            e.u32(self.data.largest_data_len);
            e.u32(self.data.largest_data_off);
            e.u32(self.data.largest_data_off_in_data_bl);
            e.u32(self.data.fadvise_flags);
        }
    }

    /// The encoding as a chain of buffers whose payload pieces are `data_bl`'s own (a client's write data goes
    /// by reference, not copied): what MOSDRepOp's data segment carries. Concatenated, it equals `to_bytes`.
    pub fn encode_rope(&self) -> Vec<Bytes> {
        let mut tail = Encoder::with_capacity(
            u64::MAX,
            4 + self.ops.len() * OP_LEN + 64 * (self.coll_index.len() + self.object_index.len()) + 40,
        );
        self.encode_tail(&mut tail);
        let body = 4 + self.data_bl.len() + tail.len();
        let mut head = Encoder::with_capacity(u64::MAX, 10);
        head.u8(9);
        head.u8(9);
        head.length(body);
        head.length(self.data_bl.len());
        let mut out = Vec::with_capacity(self.data_bl.pieces().len() + 2);
        let mut head = head.into_inner();
        let mut pieces = self.data_bl.pieces().iter().peekable();
        // glue small leading pieces (length prefixes, attrs) to the header instead of sending them apart
        while let Some(p) = pieces.next_if(|p| p.len() < 512) {
            head.extend_from_slice(p);
        }
        out.push(head.freeze());
        out.extend(pieces.cloned());
        out.push(tail.into_bytes());
        out
    }
}

impl Decode for Transaction {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("ObjectStore::Transaction", 9, |h, d| {
            if h.version < 9 {
                return Err(DecodeError::TooOld {
                    type_name: "ObjectStore::Transaction",
                    version: h.version,
                    oldest: 9,
                });
            }
            let data_bl = BufferList::from(d.bufferlist()?);
            let op_bl = d.bufferlist()?;
            if op_bl.len() % OP_LEN != 0 {
                return Err(DecodeError::invalid(
                    "ObjectStore::Transaction",
                    format!("op_bl length {} is not a multiple of {OP_LEN}", op_bl.len()),
                ));
            }
            let mut od = Decoder::new(op_bl);
            let mut ops = Vec::with_capacity(od.remaining() / OP_LEN);
            while !od.is_empty() {
                ops.push(RawOp::decode(&mut od)?);
            }
            let n = d.length("coll_index", 5)?;
            let mut coll_index = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                coll_index.push((decode_keyed(d)?, d.u32()?));
            }
            let n = d.length("object_index", 5)?;
            let mut object_index = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                object_index.push((decode_keyed(d)?, d.u32()?));
            }
            let data = TxData {
                ops: d.u64()?,
                largest_data_len: d.u32()?,
                largest_data_off: d.u32()?,
                largest_data_off_in_data_bl: d.u32()?,
                fadvise_flags: d.u32()?,
            };
            Ok(Transaction {
                data_bl,
                ops,
                coll_index,
                object_index,
                data,
            })
        })
    }
}

impl Transaction {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    fn coll(&self, index: usize, id: u32) -> Result<Coll, TxError> {
        self.coll_index
            .iter()
            .find(|(_, v)| *v == id)
            .map(|(k, _)| k.value)
            .ok_or(TxError::BadColl { index, id })
    }
    fn obj(&self, index: usize, id: u32) -> Result<GHObject, TxError> {
        self.object_index
            .iter()
            .find(|(_, v)| *v == id)
            .map(|(k, _)| k.value.clone())
            .ok_or(TxError::BadObject { index, id })
    }

    /// Interpret every op, reading payloads from `data_bl` in op order.
    pub fn ops(&self) -> Result<Vec<TxOp>, TxError> {
        use op_code as c;
        let mut d = self.data_bl.cursor();
        let mut out = Vec::with_capacity(self.ops.len());
        for (i, op) in self.ops.iter().enumerate() {
            let cid = || self.coll(i, op.cid);
            let oid = || self.obj(i, op.oid);
            let x = match op.op {
                c::NOP => TxOp::Nop,
                c::TOUCH => TxOp::Touch {
                    cid: cid()?,
                    oid: oid()?,
                },
                c::CREATE => TxOp::Create {
                    cid: cid()?,
                    oid: oid()?,
                },
                c::WRITE => TxOp::Write {
                    cid: cid()?,
                    oid: oid()?,
                    off: op.off,
                    data: pl(i, d.bufferlist())?,
                },
                c::ZERO => TxOp::Zero {
                    cid: cid()?,
                    oid: oid()?,
                    off: op.off,
                    len: op.len,
                },
                c::TRUNCATE => TxOp::Truncate {
                    cid: cid()?,
                    oid: oid()?,
                    size: op.off,
                },
                c::REMOVE => TxOp::Remove {
                    cid: cid()?,
                    oid: oid()?,
                },
                c::SETATTR => TxOp::SetAttr {
                    cid: cid()?,
                    oid: oid()?,
                    name: pl(i, d.bufferlist())?,
                    value: pl(i, d.bufferlist())?,
                },
                c::SETATTRS => TxOp::SetAttrs {
                    cid: cid()?,
                    oid: oid()?,
                    attrs: pl(i, d.decode())?,
                },
                c::RMATTR => TxOp::RmAttr {
                    cid: cid()?,
                    oid: oid()?,
                    name: pl(i, d.bufferlist())?,
                },
                c::RMATTRS => TxOp::RmAttrs {
                    cid: cid()?,
                    oid: oid()?,
                },
                c::CLONE => TxOp::Clone {
                    cid: cid()?,
                    oid: oid()?,
                    dest: self.obj(i, op.dest_oid)?,
                },
                c::CLONERANGE | c::CLONERANGE2 => TxOp::CloneRange {
                    cid: cid()?,
                    oid: oid()?,
                    dest: self.obj(i, op.dest_oid)?,
                    src_off: op.off,
                    len: op.len,
                    // OP_CLONERANGE (legacy) copies to the same offset
                    dest_off: if op.op == c::CLONERANGE {
                        op.off
                    } else {
                        op.dest_off
                    },
                },
                c::MKCOLL => TxOp::MkColl {
                    cid: cid()?,
                    bits: op.split_bits,
                },
                c::RMCOLL => TxOp::RmColl { cid: cid()? },
                c::COLL_HINT => TxOp::CollHint {
                    cid: cid()?,
                    hint_type: op.hint,
                    hint: pl(i, d.bufferlist())?,
                },
                c::OMAP_CLEAR => TxOp::OmapClear {
                    cid: cid()?,
                    oid: oid()?,
                },
                c::OMAP_SETKEYS => TxOp::OmapSetKeys {
                    cid: cid()?,
                    oid: oid()?,
                    keys: pl(i, d.decode())?,
                },
                c::OMAP_RMKEYS => TxOp::OmapRmKeys {
                    cid: cid()?,
                    oid: oid()?,
                    keys: pl(i, d.decode())?,
                },
                c::OMAP_SETHEADER => TxOp::OmapSetHeader {
                    cid: cid()?,
                    oid: oid()?,
                    header: pl(i, d.bufferlist())?,
                },
                c::OMAP_RMKEYRANGE => TxOp::OmapRmKeyRange {
                    cid: cid()?,
                    oid: oid()?,
                    first: pl(i, d.bufferlist())?,
                    last: pl(i, d.bufferlist())?,
                },
                c::SETALLOCHINT => TxOp::SetAllocHint {
                    cid: cid()?,
                    oid: oid()?,
                    expected_object_size: op.expected_object_size,
                    expected_write_size: op.expected_write_size,
                    flags: op.hint,
                },
                c::COLL_MOVE_RENAME => TxOp::CollMoveRename {
                    old_cid: cid()?,
                    old_oid: oid()?,
                    new_cid: self.coll(i, op.dest_cid)?,
                    new_oid: self.obj(i, op.dest_oid)?,
                },
                c::TRY_RENAME => TxOp::TryRename {
                    cid: cid()?,
                    old_oid: oid()?,
                    new_oid: self.obj(i, op.dest_oid)?,
                },
                c::SPLIT_COLLECTION2 => TxOp::SplitCollection {
                    cid: cid()?,
                    bits: op.split_bits,
                    rem: op.split_rem,
                    dest: self.coll(i, op.dest_cid)?,
                },
                c::MERGE_COLLECTION => TxOp::MergeCollection {
                    cid: cid()?,
                    dest: self.coll(i, op.dest_cid)?,
                    bits: op.split_bits,
                },
                c::COLL_SET_BITS => TxOp::CollSetBits {
                    cid: cid()?,
                    bits: op.split_bits,
                },
                c::COLL_ADD => TxOp::CollAdd {
                    cid: cid()?,
                    dest: self.coll(i, op.dest_cid)?,
                    oid: oid()?,
                },
                c::COLL_REMOVE => TxOp::CollRemove {
                    cid: cid()?,
                    oid: oid()?,
                },
                other => return Err(TxError::Unsupported { index: i, op: other }),
            };
            out.push(x);
        }
        Ok(out)
    }

    // ---- building, as ObjectStore::Transaction's methods do ----

    fn coll_id(&mut self, c: Coll) -> u32 {
        if let Some((_, v)) = self.coll_index.iter().find(|(k, _)| k.value == c) {
            return *v;
        }
        let id = self.coll_index.len() as u32;
        let at = self.coll_index.partition_point(|(k, _)| k.value < c);
        self.coll_index.insert(at, (Keyed::new(c), id));
        id
    }
    fn obj_id(&mut self, o: &GHObject) -> u32 {
        if let Some((_, v)) = self.object_index.iter().find(|(k, _)| &k.value == o) {
            return *v;
        }
        let id = self.object_index.len() as u32;
        let at = self.object_index.partition_point(|(k, _)| &k.value < o);
        self.object_index.insert(at, (Keyed::new(o.clone()), id));
        id
    }
    fn push(&mut self, op: RawOp) {
        self.ops.push(op);
        self.data.ops += 1;
    }
    fn append(&mut self, f: impl FnOnce(&mut Encoder)) {
        let mut e = Encoder::with_capacity(u64::MAX, 256);
        f(&mut e);
        self.extend_data(e.as_slice());
    }
    /// Append to `data_bl` (small encoded fields: copied into its owned tail piece).
    fn extend_data(&mut self, b: &[u8]) {
        self.data_bl.extend_from_slice(b);
    }
    fn obj_op(&mut self, code: u32, c: Coll, o: &GHObject) -> RawOp {
        let mut op = RawOp::new(code);
        op.cid = self.coll_id(c);
        op.oid = self.obj_id(o);
        op
    }

    pub fn nop(&mut self) {
        self.push(RawOp::new(op_code::NOP));
    }
    pub fn touch(&mut self, c: Coll, o: &GHObject) {
        let op = self.obj_op(op_code::TOUCH, c, o);
        self.push(op);
    }
    pub fn create(&mut self, c: Coll, o: &GHObject) {
        let op = self.obj_op(op_code::CREATE, c, o);
        self.push(op);
    }
    /// `data` joins `data_bl` by reference (the caller's buffer is not copied).
    pub fn write(&mut self, c: Coll, o: &GHObject, off: u64, data: &Bytes, fadvise_flags: u32) {
        let orig = self.data_bl.len();
        let mut op = self.obj_op(op_code::WRITE, c, o);
        op.off = off;
        op.len = data.len() as u64;
        self.push(op);
        self.extend_data(&(data.len() as u32).to_le_bytes());
        self.data_bl.push(data.clone());
        if data.len() > self.data.largest_data_len as usize {
            self.data.largest_data_len = data.len() as u32;
            self.data.largest_data_off = off as u32;
            // where the bytes start in data_bl: after their le32 length
            self.data.largest_data_off_in_data_bl = (orig + 4) as u32;
        }
        self.data.fadvise_flags |= fadvise_flags;
    }
    pub fn zero(&mut self, c: Coll, o: &GHObject, off: u64, len: u64) {
        let mut op = self.obj_op(op_code::ZERO, c, o);
        op.off = off;
        op.len = len;
        self.push(op);
    }
    pub fn truncate(&mut self, c: Coll, o: &GHObject, size: u64) {
        let mut op = self.obj_op(op_code::TRUNCATE, c, o);
        op.off = size;
        self.push(op);
    }
    pub fn remove(&mut self, c: Coll, o: &GHObject) {
        let op = self.obj_op(op_code::REMOVE, c, o);
        self.push(op);
    }
    pub fn setattr(&mut self, c: Coll, o: &GHObject, name: &[u8], value: &Bytes) {
        let op = self.obj_op(op_code::SETATTR, c, o);
        self.push(op);
        self.append(|e| {
            e.bytes(name);
            e.bytes(value);
        });
    }
    pub fn setattrs(&mut self, c: Coll, o: &GHObject, attrs: &BTreeMap<Bytes, Bytes>) {
        let op = self.obj_op(op_code::SETATTRS, c, o);
        self.push(op);
        self.append(|e| e.encode(attrs));
    }
    pub fn rmattr(&mut self, c: Coll, o: &GHObject, name: &[u8]) {
        let op = self.obj_op(op_code::RMATTR, c, o);
        self.push(op);
        self.append(|e| e.bytes(name));
    }
    pub fn rmattrs(&mut self, c: Coll, o: &GHObject) {
        let op = self.obj_op(op_code::RMATTRS, c, o);
        self.push(op);
    }
    pub fn clone_object(&mut self, c: Coll, o: &GHObject, dest: &GHObject) {
        let mut op = self.obj_op(op_code::CLONE, c, o);
        op.dest_oid = self.obj_id(dest);
        self.push(op);
    }
    pub fn clone_range(
        &mut self,
        c: Coll,
        o: &GHObject,
        dest: &GHObject,
        src_off: u64,
        len: u64,
        dest_off: u64,
    ) {
        let mut op = self.obj_op(op_code::CLONERANGE2, c, o);
        op.dest_oid = self.obj_id(dest);
        op.off = src_off;
        op.len = len;
        op.dest_off = dest_off;
        self.push(op);
    }
    pub fn create_collection(&mut self, c: Coll, bits: u32) {
        let mut op = RawOp::new(op_code::MKCOLL);
        op.cid = self.coll_id(c);
        op.split_bits = bits;
        self.push(op);
    }
    pub fn remove_collection(&mut self, c: Coll) {
        let mut op = RawOp::new(op_code::RMCOLL);
        op.cid = self.coll_id(c);
        self.push(op);
    }
    pub fn omap_clear(&mut self, c: Coll, o: &GHObject) {
        let op = self.obj_op(op_code::OMAP_CLEAR, c, o);
        self.push(op);
    }
    pub fn omap_setkeys(&mut self, c: Coll, o: &GHObject, keys: &BTreeMap<Bytes, Bytes>) {
        let op = self.obj_op(op_code::OMAP_SETKEYS, c, o);
        self.push(op);
        self.append(|e| e.encode(keys));
    }
    pub fn omap_rmkeys(&mut self, c: Coll, o: &GHObject, keys: &[Bytes]) {
        let op = self.obj_op(op_code::OMAP_RMKEYS, c, o);
        self.push(op);
        self.append(|e| e.encode(keys));
    }
    pub fn omap_setheader(&mut self, c: Coll, o: &GHObject, header: &Bytes) {
        let op = self.obj_op(op_code::OMAP_SETHEADER, c, o);
        self.push(op);
        self.append(|e| e.bytes(header));
    }
    pub fn omap_rmkeyrange(&mut self, c: Coll, o: &GHObject, first: &[u8], last: &[u8]) {
        let op = self.obj_op(op_code::OMAP_RMKEYRANGE, c, o);
        self.push(op);
        self.append(|e| {
            e.bytes(first);
            e.bytes(last);
        });
    }
    pub fn set_alloc_hint(
        &mut self,
        c: Coll,
        o: &GHObject,
        expected_object_size: u64,
        expected_write_size: u64,
        flags: u32,
    ) {
        let mut op = self.obj_op(op_code::SETALLOCHINT, c, o);
        op.expected_object_size = expected_object_size;
        op.expected_write_size = expected_write_size;
        op.hint = flags;
        self.push(op);
    }
    pub fn collection_move_rename(&mut self, old_c: Coll, old_o: &GHObject, new_c: Coll, new_o: &GHObject) {
        let mut op = self.obj_op(op_code::COLL_MOVE_RENAME, old_c, old_o);
        op.dest_cid = self.coll_id(new_c);
        op.dest_oid = self.obj_id(new_o);
        self.push(op);
    }
    /// `split_collection` (OP_SPLIT_COLLECTION2): objects of `c` whose hash matches `rem` in the low `bits` bits
    /// move to `dest`.
    pub fn split_collection(&mut self, c: Coll, bits: u32, rem: u32, dest: Coll) {
        let mut op = RawOp::new(op_code::SPLIT_COLLECTION2);
        op.cid = self.coll_id(c);
        op.dest_cid = self.coll_id(dest);
        op.split_bits = bits;
        op.split_rem = rem;
        self.push(op);
    }
    /// `collection_hint` (OP_COLL_HINT), e.g. `COLL_HINT_EXPECTED_NUM_OBJECTS` with `pg_num, expected objects`.
    pub fn collection_hint(&mut self, c: Coll, hint_type: u32, hint: &Bytes) {
        let mut op = RawOp::new(op_code::COLL_HINT);
        op.cid = self.coll_id(c);
        op.hint = hint_type;
        self.push(op);
        self.append(|e| e.bytes(hint));
    }
    /// `collection_set_bits` (OP_COLL_SET_BITS).
    pub fn collection_set_bits(&mut self, c: Coll, bits: u32) {
        let mut op = RawOp::new(op_code::COLL_SET_BITS);
        op.cid = self.coll_id(c);
        op.split_bits = bits;
        self.push(op);
    }
    pub fn try_rename(&mut self, c: Coll, old_o: &GHObject, new_o: &GHObject) {
        let mut op = self.obj_op(op_code::TRY_RENAME, c, old_o);
        op.dest_oid = self.obj_id(new_o);
        self.push(op);
    }
    /// `merge_collection` (OP_MERGE_COLLECTION): `c`'s objects move into `dest`, which then has `bits` bits.
    pub fn merge_collection(&mut self, c: Coll, dest: Coll, bits: u32) {
        let mut op = RawOp::new(op_code::MERGE_COLLECTION);
        op.cid = self.coll_id(c);
        op.dest_cid = self.coll_id(dest);
        op.split_bits = bits;
        self.push(op);
    }
    /// `collection_add` (OP_COLL_ADD): `o` of `c` also appears in `dest`.
    pub fn collection_add(&mut self, c: Coll, dest: Coll, o: &GHObject) {
        let mut op = self.obj_op(op_code::COLL_ADD, c, o);
        op.dest_cid = self.coll_id(dest);
        self.push(op);
    }
    /// `collection_remove` (OP_COLL_REMOVE).
    pub fn collection_remove(&mut self, c: Coll, o: &GHObject) {
        let op = self.obj_op(op_code::COLL_REMOVE, c, o);
        self.push(op);
    }

    /// The transaction whose [`Transaction::ops`] are `ops`: a caller that has its ops interpreted already
    /// (the primary: it applies them itself and ships the encoding to its replicas) encodes them with this.
    pub fn from_ops(ops: &[TxOp]) -> Self {
        let mut t = Transaction::new();
        t.ops.reserve(ops.len());
        for op in ops {
            t.push_op(op);
        }
        t
    }

    /// Append one interpreted op (its builder method above).
    pub fn push_op(&mut self, op: &TxOp) {
        match op {
            TxOp::Nop => self.nop(),
            TxOp::Touch { cid, oid } => self.touch(*cid, oid),
            TxOp::Create { cid, oid } => self.create(*cid, oid),
            TxOp::Write { cid, oid, off, data } => self.write(*cid, oid, *off, data, 0),
            TxOp::Zero { cid, oid, off, len } => self.zero(*cid, oid, *off, *len),
            TxOp::Truncate { cid, oid, size } => self.truncate(*cid, oid, *size),
            TxOp::Remove { cid, oid } => self.remove(*cid, oid),
            TxOp::SetAttr {
                cid,
                oid,
                name,
                value,
            } => self.setattr(*cid, oid, name, value),
            TxOp::SetAttrs { cid, oid, attrs } => self.setattrs(*cid, oid, attrs),
            TxOp::RmAttr { cid, oid, name } => self.rmattr(*cid, oid, name),
            TxOp::RmAttrs { cid, oid } => self.rmattrs(*cid, oid),
            TxOp::Clone { cid, oid, dest } => self.clone_object(*cid, oid, dest),
            TxOp::CloneRange {
                cid,
                oid,
                dest,
                src_off,
                len,
                dest_off,
            } => self.clone_range(*cid, oid, dest, *src_off, *len, *dest_off),
            TxOp::MkColl { cid, bits } => self.create_collection(*cid, *bits),
            TxOp::RmColl { cid } => self.remove_collection(*cid),
            TxOp::CollHint { cid, hint_type, hint } => self.collection_hint(*cid, *hint_type, hint),
            TxOp::OmapClear { cid, oid } => self.omap_clear(*cid, oid),
            TxOp::OmapSetKeys { cid, oid, keys } => self.omap_setkeys(*cid, oid, keys),
            TxOp::OmapRmKeys { cid, oid, keys } => self.omap_rmkeys(*cid, oid, keys),
            TxOp::OmapSetHeader { cid, oid, header } => self.omap_setheader(*cid, oid, header),
            TxOp::OmapRmKeyRange {
                cid,
                oid,
                first,
                last,
            } => self.omap_rmkeyrange(*cid, oid, first, last),
            TxOp::SetAllocHint {
                cid,
                oid,
                expected_object_size,
                expected_write_size,
                flags,
            } => self.set_alloc_hint(*cid, oid, *expected_object_size, *expected_write_size, *flags),
            TxOp::CollMoveRename {
                old_cid,
                old_oid,
                new_cid,
                new_oid,
            } => self.collection_move_rename(*old_cid, old_oid, *new_cid, new_oid),
            TxOp::TryRename {
                cid,
                old_oid,
                new_oid,
            } => self.try_rename(*cid, old_oid, new_oid),
            TxOp::SplitCollection { cid, bits, rem, dest } => self.split_collection(*cid, *bits, *rem, *dest),
            TxOp::MergeCollection { cid, dest, bits } => self.merge_collection(*cid, *dest, *bits),
            TxOp::CollSetBits { cid, bits } => self.collection_set_bits(*cid, *bits),
            TxOp::CollAdd { cid, dest, oid } => self.collection_add(*cid, *dest, oid),
            TxOp::CollRemove { cid, oid } => self.collection_remove(*cid, oid),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use denc::{HObject, PgId, ShardId, SpgId};
    use proptest::prelude::*;

    fn obj(name: &'static str) -> GHObject {
        GHObject::new(
            HObject::new(name, Bytes::new(), denc::SnapId::NOSNAP, 7, 3, Bytes::new()),
            denc::NO_GEN,
            ShardId::NO_SHARD,
        )
    }

    #[test]
    fn built_transaction_round_trips_and_interprets() {
        let c = Coll::pg(SpgId::new(PgId { pool: 3, seed: 1 }, ShardId::NO_SHARD));
        let (a, b) = (obj("b-obj"), obj("a-obj"));
        let mut t = Transaction::new();
        t.touch(c, &a);
        t.write(c, &a, 4096, &Bytes::from_static(b"hello"), 0);
        t.setattr(c, &a, b"_", &Bytes::from_static(b"oi"));
        t.omap_setkeys(
            c,
            &b,
            &BTreeMap::from([(Bytes::from_static(b"k"), Bytes::from_static(b"v"))]),
        );
        t.omap_rmkeys(c, &b, &[Bytes::from_static(b"x")]);
        t.truncate(c, &a, 3);
        t.clone_range(c, &a, &b, 0, 3, 10);
        t.remove(c, &b);
        let bytes = t.to_bytes(u64::MAX);
        let back = Transaction::decode_all(bytes.clone()).unwrap();
        assert_eq!(back, t);
        assert_eq!(back.to_bytes(u64::MAX), bytes);
        assert_eq!(back.data.ops, 8);
        assert_eq!(back.data.largest_data_len, 5);
        assert_eq!(back.data.largest_data_off, 4096);
        // object ids follow first use; the map is in hobject order (a-obj before b-obj)
        assert_eq!(back.object_index[0].0.value, b);
        assert_eq!(back.object_index[0].1, 1);
        let ops = back.ops().unwrap();
        assert_eq!(
            ops[1],
            TxOp::Write {
                cid: c,
                oid: a.clone(),
                off: 4096,
                data: Bytes::from_static(b"hello")
            }
        );
        assert_eq!(
            ops[6],
            TxOp::CloneRange {
                cid: c,
                oid: a.clone(),
                dest: b.clone(),
                src_off: 0,
                len: 3,
                dest_off: 10
            }
        );
        assert_eq!(ops[7], TxOp::Remove { cid: c, oid: b });
    }

    #[test]
    fn write_payload_travels_by_reference() {
        let c = Coll::pg(SpgId::new(PgId { pool: 3, seed: 1 }, ShardId::NO_SHARD));
        let a = obj("a");
        let payload = Bytes::from(vec![0x5a; 4096]);
        let mut t = Transaction::new();
        t.set_alloc_hint(c, &a, 4096, 4096, 0);
        t.write(c, &a, 0, &payload, 0);
        t.setattr(c, &a, b"_", &Bytes::from_static(b"oi"));
        let rope = t.encode_rope();
        let flat: Vec<u8> = rope.iter().flat_map(|p| p.iter().copied()).collect();
        assert_eq!(Bytes::from(flat), t.to_bytes(u64::MAX));
        // the client's buffer itself is one piece of the encoding, and of what the ops read back
        assert!(
            rope.iter()
                .any(|p| p.as_ptr() == payload.as_ptr() && p.len() == 4096)
        );
        match &t.ops().unwrap()[1] {
            TxOp::Write { data, .. } => assert_eq!(data.as_ptr(), payload.as_ptr()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_indexes_are_errors() {
        let c = Coll::META;
        let mut t = Transaction::new();
        t.touch(c, &obj("x"));
        t.ops[0].oid = 9;
        assert_eq!(t.ops(), Err(TxError::BadObject { index: 0, id: 9 }));
        t.ops[0].op = 99;
        assert!(matches!(t.ops(), Err(TxError::Unsupported { op: 99, .. })));
    }

    /// Every kind of op, once.
    fn every_op() -> Vec<TxOp> {
        let c = Coll::pg(SpgId::new(PgId { pool: 3, seed: 1 }, ShardId::NO_SHARD));
        let d = Coll::pg(SpgId::new(PgId { pool: 3, seed: 5 }, ShardId::NO_SHARD));
        let (a, b) = (obj("a"), obj("b"));
        let bs = |s: &'static str| Bytes::from_static(s.as_bytes());
        let map = BTreeMap::from([(bs("k1"), bs("v1")), (bs("k2"), bs(""))]);
        vec![
            TxOp::Nop,
            TxOp::MkColl { cid: d, bits: 5 },
            TxOp::CollHint {
                cid: d,
                hint_type: 1,
                hint: bs("hint"),
            },
            TxOp::Touch {
                cid: c,
                oid: a.clone(),
            },
            TxOp::Create {
                cid: c,
                oid: b.clone(),
            },
            TxOp::Write {
                cid: c,
                oid: a.clone(),
                off: 8192,
                data: Bytes::from(vec![7u8; 4096]),
            },
            TxOp::Write {
                cid: c,
                oid: b.clone(),
                off: 0,
                data: Bytes::new(),
            },
            TxOp::Zero {
                cid: c,
                oid: a.clone(),
                off: 1,
                len: 2,
            },
            TxOp::Truncate {
                cid: c,
                oid: a.clone(),
                size: 3,
            },
            TxOp::SetAttr {
                cid: c,
                oid: a.clone(),
                name: bs("_"),
                value: bs("oi"),
            },
            TxOp::SetAttrs {
                cid: c,
                oid: a.clone(),
                attrs: map.clone(),
            },
            TxOp::RmAttr {
                cid: c,
                oid: a.clone(),
                name: bs("snapset"),
            },
            TxOp::RmAttrs {
                cid: c,
                oid: b.clone(),
            },
            TxOp::Clone {
                cid: c,
                oid: a.clone(),
                dest: b.clone(),
            },
            TxOp::CloneRange {
                cid: c,
                oid: a.clone(),
                dest: b.clone(),
                src_off: 4,
                len: 5,
                dest_off: 6,
            },
            TxOp::OmapClear {
                cid: c,
                oid: b.clone(),
            },
            TxOp::OmapSetKeys {
                cid: c,
                oid: b.clone(),
                keys: map,
            },
            TxOp::OmapRmKeys {
                cid: c,
                oid: b.clone(),
                keys: vec![bs("k1"), bs("zz")],
            },
            TxOp::OmapSetHeader {
                cid: c,
                oid: b.clone(),
                header: bs("hdr"),
            },
            TxOp::OmapRmKeyRange {
                cid: c,
                oid: b.clone(),
                first: bs("a"),
                last: bs("m"),
            },
            TxOp::SetAllocHint {
                cid: c,
                oid: a.clone(),
                expected_object_size: 4 << 20,
                expected_write_size: 4096,
                flags: 2,
            },
            TxOp::CollMoveRename {
                old_cid: c,
                old_oid: b.clone(),
                new_cid: d,
                new_oid: a.clone(),
            },
            TxOp::TryRename {
                cid: c,
                old_oid: a.clone(),
                new_oid: b.clone(),
            },
            TxOp::SplitCollection {
                cid: c,
                bits: 6,
                rem: 5,
                dest: d,
            },
            TxOp::MergeCollection {
                cid: d,
                dest: c,
                bits: 4,
            },
            TxOp::CollSetBits { cid: c, bits: 4 },
            TxOp::CollAdd {
                cid: c,
                dest: d,
                oid: a.clone(),
            },
            TxOp::CollRemove { cid: c, oid: a },
            TxOp::Remove { cid: c, oid: b },
            TxOp::RmColl { cid: d },
        ]
    }

    #[test]
    fn from_ops_encodes_what_ops_reads_back() {
        let ops = every_op();
        let t = Transaction::from_ops(&ops);
        assert_eq!(t.ops().unwrap(), ops);
        // and through the wire form
        let back = Transaction::decode_all(t.to_bytes(u64::MAX)).unwrap();
        assert_eq!(back, t);
        assert_eq!(back.ops().unwrap(), ops);
        // each op alone, and every prefix, as well
        for n in 0..ops.len() {
            let some = ops.get(..n).unwrap();
            assert_eq!(Transaction::from_ops(some).ops().unwrap(), some);
        }
    }

    proptest! {
        #[test]
        fn hostile_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            if let Ok(t) = Transaction::decode_all(data) {
                let _ = t.ops();
            }
        }
    }
}
