// SPDX-License-Identifier: LGPL-3.0-or-later
//! Client I/O messages: MOSDOp (v8, as Pacific clients send it), MOSDOpReply (v8), the per-op `ceph_osd_op`
//! record with every op code of `rados.h`, MWatchNotify and MOSDBackoff.
//!
//! `ceph_osd_op` is a packed 38-byte C struct whose middle is a 28-byte union; we keep the union as raw bytes
//! (so a decoded op re-encodes byte for byte) and read or write its members through typed accessors. The ops'
//! input (request) or output (reply) payloads travel back to back in the message's data segment, each op's
//! `payload_len` saying how many bytes are its own.

use bytes::{Bytes, BytesMut};
use denc::{
    Decode, DecodeError, Decoder, Encode, Encoder, Eversion, ObjectLocator, ObjectName, OsdReqId, PgId,
    SnapId, SpgId, Utime,
};

use crate::CephMessage;

/// Message type numbers of this module (ceph_fs.h).
pub mod osd_msg_type {
    pub const OSD_OP: u16 = 42;
    pub const OSD_OPREPLY: u16 = 43;
    pub const WATCH_NOTIFY: u16 = 44;
    pub const OSD_BACKOFF: u16 = 61;
}

/// Op codes (`CEPH_OSD_OP_*`): mode | type | number.
pub mod op {
    pub const MODE: u16 = 0xf000;
    pub const MODE_RD: u16 = 0x1000;
    pub const MODE_WR: u16 = 0x2000;
    pub const MODE_RMW: u16 = 0x3000;
    pub const MODE_SUB: u16 = 0x4000;
    pub const MODE_CACHE: u16 = 0x8000;
    pub const TYPE: u16 = 0x0f00;
    pub const TYPE_DATA: u16 = 0x0200;
    pub const TYPE_ATTR: u16 = 0x0300;
    pub const TYPE_EXEC: u16 = 0x0400;
    pub const TYPE_PG: u16 = 0x0500;

    const RD_DATA: u16 = MODE_RD | TYPE_DATA;
    const WR_DATA: u16 = MODE_WR | TYPE_DATA;
    const RMW_DATA: u16 = MODE_RMW | TYPE_DATA;
    const CACHE_DATA: u16 = MODE_CACHE | TYPE_DATA;

    pub const READ: u16 = RD_DATA | 1;
    pub const STAT: u16 = RD_DATA | 2;
    pub const MAPEXT: u16 = RD_DATA | 3;
    pub const CHECKSUM: u16 = RD_DATA | 31;
    pub const MASKTRUNC: u16 = RD_DATA | 4;
    pub const SPARSE_READ: u16 = RD_DATA | 5;
    pub const NOTIFY: u16 = RD_DATA | 6;
    pub const NOTIFY_ACK: u16 = RD_DATA | 7;
    pub const ASSERT_VER: u16 = RD_DATA | 8;
    pub const LIST_WATCHERS: u16 = RD_DATA | 9;
    pub const LIST_SNAPS: u16 = RD_DATA | 10;
    pub const SYNC_READ: u16 = RD_DATA | 11;
    pub const WRITE: u16 = WR_DATA | 1;
    pub const WRITEFULL: u16 = WR_DATA | 2;
    pub const TRUNCATE: u16 = WR_DATA | 3;
    pub const ZERO: u16 = WR_DATA | 4;
    pub const DELETE: u16 = WR_DATA | 5;
    pub const APPEND: u16 = WR_DATA | 6;
    pub const STARTSYNC: u16 = WR_DATA | 7;
    pub const SETTRUNC: u16 = WR_DATA | 8;
    pub const TRIMTRUNC: u16 = WR_DATA | 9;
    pub const TMAPUP: u16 = RMW_DATA | 10;
    pub const TMAPPUT: u16 = WR_DATA | 11;
    pub const TMAPGET: u16 = RD_DATA | 12;
    pub const CREATE: u16 = WR_DATA | 13;
    pub const ROLLBACK: u16 = WR_DATA | 14;
    pub const WATCH: u16 = WR_DATA | 15;
    pub const OMAPGETKEYS: u16 = RD_DATA | 17;
    pub const OMAPGETVALS: u16 = RD_DATA | 18;
    pub const OMAPGETHEADER: u16 = RD_DATA | 19;
    pub const OMAPGETVALSBYKEYS: u16 = RD_DATA | 20;
    pub const OMAPSETVALS: u16 = WR_DATA | 21;
    pub const OMAPSETHEADER: u16 = WR_DATA | 22;
    pub const OMAPCLEAR: u16 = WR_DATA | 23;
    pub const OMAPRMKEYS: u16 = WR_DATA | 24;
    pub const OMAP_CMP: u16 = RD_DATA | 25;
    pub const OMAPRMKEYRANGE: u16 = WR_DATA | 44;
    pub const COPY_FROM: u16 = WR_DATA | 26;
    pub const COPY_FROM2: u16 = WR_DATA | 45;
    pub const UNDIRTY: u16 = WR_DATA | 28;
    pub const ISDIRTY: u16 = RD_DATA | 29;
    pub const COPY_GET: u16 = RD_DATA | 30;
    pub const CACHE_FLUSH: u16 = CACHE_DATA | 31;
    pub const CACHE_EVICT: u16 = CACHE_DATA | 32;
    pub const CACHE_TRY_FLUSH: u16 = CACHE_DATA | 33;
    pub const TMAP2OMAP: u16 = RMW_DATA | 34;
    pub const SETALLOCHINT: u16 = WR_DATA | 35;
    pub const CACHE_PIN: u16 = WR_DATA | 36;
    pub const CACHE_UNPIN: u16 = WR_DATA | 37;
    pub const WRITESAME: u16 = WR_DATA | 38;
    pub const CMPEXT: u16 = RD_DATA | 32;
    pub const SET_REDIRECT: u16 = WR_DATA | 39;
    pub const SET_CHUNK: u16 = CACHE_DATA | 40;
    pub const TIER_PROMOTE: u16 = WR_DATA | 41;
    pub const UNSET_MANIFEST: u16 = WR_DATA | 42;
    pub const TIER_FLUSH: u16 = CACHE_DATA | 43;
    pub const TIER_EVICT: u16 = CACHE_DATA | 44;
    pub const GETXATTR: u16 = MODE_RD | TYPE_ATTR | 1;
    pub const GETXATTRS: u16 = MODE_RD | TYPE_ATTR | 2;
    pub const CMPXATTR: u16 = MODE_RD | TYPE_ATTR | 3;
    pub const SETXATTR: u16 = MODE_WR | TYPE_ATTR | 1;
    pub const SETXATTRS: u16 = MODE_WR | TYPE_ATTR | 2;
    pub const RESETXATTRS: u16 = MODE_WR | TYPE_ATTR | 3;
    pub const RMXATTR: u16 = MODE_WR | TYPE_ATTR | 4;
    pub const PULL: u16 = MODE_SUB | 1;
    pub const PUSH: u16 = MODE_SUB | 2;
    pub const BALANCEREADS: u16 = MODE_SUB | 3;
    pub const UNBALANCEREADS: u16 = MODE_SUB | 4;
    pub const SCRUB: u16 = MODE_SUB | 5;
    pub const SCRUB_RESERVE: u16 = MODE_SUB | 6;
    pub const SCRUB_UNRESERVE: u16 = MODE_SUB | 7;
    pub const SCRUB_MAP: u16 = MODE_SUB | 9;
    /// The RD bit is historical: CALL may write (see [`is_read`]).
    pub const CALL: u16 = MODE_RD | TYPE_EXEC | 1;
    pub const PGLS: u16 = MODE_RD | TYPE_PG | 1;
    pub const PGLS_FILTER: u16 = MODE_RD | TYPE_PG | 2;
    pub const PG_HITSET_LS: u16 = MODE_RD | TYPE_PG | 3;
    pub const PG_HITSET_GET: u16 = MODE_RD | TYPE_PG | 4;
    pub const PGNLS: u16 = MODE_RD | TYPE_PG | 5;
    pub const PGNLS_FILTER: u16 = MODE_RD | TYPE_PG | 6;
    pub const SCRUBLS: u16 = MODE_RD | TYPE_PG | 7;

    /// `ceph_osd_op_type_pg`.
    pub fn is_pg_op(o: u16) -> bool {
        o & TYPE == TYPE_PG
    }
    /// `ceph_osd_op_mode_read` (CALL excluded).
    pub fn is_read(o: u16) -> bool {
        o & MODE_RD != 0 && o != CALL
    }
    /// `ceph_osd_op_mode_modify`.
    pub fn is_write(o: u16) -> bool {
        o & MODE_WR != 0
    }

    /// Ceph's op name (`ceph_osd_op_name`), "???" for unknown codes.
    pub fn name(o: u16) -> &'static str {
        match o {
            READ => "read",
            STAT => "stat",
            MAPEXT => "mapext",
            CHECKSUM => "checksum",
            MASKTRUNC => "masktrunc",
            SPARSE_READ => "sparse-read",
            NOTIFY => "notify",
            NOTIFY_ACK => "notify-ack",
            ASSERT_VER => "assert-version",
            LIST_WATCHERS => "list-watchers",
            LIST_SNAPS => "list-snaps",
            SYNC_READ => "sync_read",
            WRITE => "write",
            WRITEFULL => "writefull",
            TRUNCATE => "truncate",
            ZERO => "zero",
            DELETE => "delete",
            APPEND => "append",
            STARTSYNC => "startsync",
            SETTRUNC => "settrunc",
            TRIMTRUNC => "trimtrunc",
            TMAPUP => "tmapup",
            TMAPPUT => "tmapput",
            TMAPGET => "tmapget",
            CREATE => "create",
            ROLLBACK => "rollback",
            WATCH => "watch",
            OMAPGETKEYS => "omap-get-keys",
            OMAPGETVALS => "omap-get-vals",
            OMAPGETHEADER => "omap-get-header",
            OMAPGETVALSBYKEYS => "omap-get-vals-by-keys",
            OMAPSETVALS => "omap-set-vals",
            OMAPSETHEADER => "omap-set-header",
            OMAPCLEAR => "omap-clear",
            OMAPRMKEYS => "omap-rm-keys",
            OMAP_CMP => "omap-cmp",
            OMAPRMKEYRANGE => "omap-rm-key-range",
            COPY_FROM => "copy-from",
            COPY_FROM2 => "copy-from2",
            UNDIRTY => "undirty",
            ISDIRTY => "isdirty",
            COPY_GET => "copy-get",
            CACHE_FLUSH => "cache-flush",
            CACHE_EVICT => "cache-evict",
            CACHE_TRY_FLUSH => "cache-try-flush",
            TMAP2OMAP => "tmap2omap",
            SETALLOCHINT => "set-alloc-hint",
            CACHE_PIN => "cache-pin",
            CACHE_UNPIN => "cache-unpin",
            WRITESAME => "write-same",
            CMPEXT => "cmpext",
            SET_REDIRECT => "set-redirect",
            SET_CHUNK => "set-chunk",
            TIER_PROMOTE => "tier-promote",
            UNSET_MANIFEST => "unset-manifest",
            TIER_FLUSH => "tier-flush",
            TIER_EVICT => "tier-evict",
            GETXATTR => "getxattr",
            GETXATTRS => "getxattrs",
            CMPXATTR => "cmpxattr",
            SETXATTR => "setxattr",
            SETXATTRS => "setxattrs",
            RESETXATTRS => "resetxattrs",
            RMXATTR => "rmxattr",
            PULL => "pull",
            PUSH => "push",
            BALANCEREADS => "balance-reads",
            UNBALANCEREADS => "unbalance-reads",
            SCRUB => "scrub",
            SCRUB_RESERVE => "scrub-reserve",
            SCRUB_UNRESERVE => "scrub-unreserve",
            SCRUB_MAP => "scrub-map",
            CALL => "call",
            PGLS => "pgls",
            PGLS_FILTER => "pgls-filter",
            PG_HITSET_LS => "pg-hitset-ls",
            PG_HITSET_GET => "pg-hitset-get",
            PGNLS => "pgnls",
            PGNLS_FILTER => "pgnls-filter",
            SCRUBLS => "scrubls",
            _ => "???",
        }
    }
}

/// Message flags (`CEPH_OSD_FLAG_*`).
pub mod flag {
    pub const ACK: u32 = 0x0001;
    pub const ONNVRAM: u32 = 0x0002;
    pub const ONDISK: u32 = 0x0004;
    pub const RETRY: u32 = 0x0008;
    pub const READ: u32 = 0x0010;
    pub const WRITE: u32 = 0x0020;
    pub const ORDERSNAP: u32 = 0x0040;
    pub const PEERSTAT_OLD: u32 = 0x0080;
    pub const BALANCE_READS: u32 = 0x0100;
    pub const PARALLELEXEC: u32 = 0x0200;
    pub const PGOP: u32 = 0x0400;
    pub const EXEC: u32 = 0x0800;
    pub const EXEC_PUBLIC: u32 = 0x1000;
    pub const LOCALIZE_READS: u32 = 0x2000;
    pub const RWORDERED: u32 = 0x4000;
    pub const IGNORE_CACHE: u32 = 0x8000;
    pub const SKIPRWLOCKS: u32 = 0x10000;
    pub const IGNORE_OVERLAY: u32 = 0x20000;
    pub const FLUSH: u32 = 0x40000;
    pub const MAP_SNAP_CLONE: u32 = 0x80000;
    pub const ENFORCE_SNAPC: u32 = 0x100000;
    pub const REDIRECTED: u32 = 0x200000;
    pub const KNOWN_REDIR: u32 = 0x400000;
    pub const FULL_TRY: u32 = 0x800000;
    pub const FULL_FORCE: u32 = 0x1000000;
    pub const IGNORE_REDIRECT: u32 = 0x2000000;
    pub const RETURNVEC: u32 = 0x4000000;
}

/// Per-op flags (`CEPH_OSD_OP_FLAG_*`).
pub mod op_flag {
    pub const EXCL: u32 = 0x1;
    pub const FAILOK: u32 = 0x2;
    pub const FADVISE_RANDOM: u32 = 0x4;
    pub const FADVISE_SEQUENTIAL: u32 = 0x8;
    pub const FADVISE_WILLNEED: u32 = 0x10;
    pub const FADVISE_DONTNEED: u32 = 0x20;
    pub const FADVISE_NOCACHE: u32 = 0x40;
    pub const WITH_REFERENCE: u32 = 0x80;
    pub const BYPASS_CLEAN_CACHE: u32 = 0x100;
}

/// `CEPH_OSD_CMPXATTR_OP_*` and `_MODE_*`.
pub mod cmpxattr {
    pub const OP_EQ: u8 = 1;
    pub const OP_NE: u8 = 2;
    pub const OP_GT: u8 = 3;
    pub const OP_GTE: u8 = 4;
    pub const OP_LT: u8 = 5;
    pub const OP_LTE: u8 = 6;
    pub const MODE_STRING: u8 = 1;
    pub const MODE_U64: u8 = 2;
}

/// `CEPH_OSD_WATCH_OP_*`.
pub mod watch_op {
    pub const UNWATCH: u8 = 0;
    pub const LEGACY_WATCH: u8 = 1;
    pub const WATCH: u8 = 3;
    pub const RECONNECT: u8 = 5;
    pub const PING: u8 = 7;
}

/// `CEPH_WATCH_EVENT_*` (MWatchNotify opcodes).
pub mod watch_event {
    pub const NOTIFY: u8 = 1;
    pub const NOTIFY_COMPLETE: u8 = 2;
    pub const DISCONNECT: u8 = 3;
}

/// `CEPH_OSD_BACKOFF_OP_*`.
pub mod backoff_op {
    pub const BLOCK: u8 = 1;
    pub const ACK_BLOCK: u8 = 2;
    pub const UNBLOCK: u8 = 3;
}

/// Size of the packed `ceph_osd_op`: op(2) flags(4) union(28) payload_len(4).
pub const RAW_OP_LEN: usize = 38;
/// Size of the union inside `ceph_osd_op`.
pub const OP_UNION_LEN: usize = 28;

/// One operation of a request or reply: the packed `ceph_osd_op` plus its payload and result.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OSDOp {
    pub op: u16,
    pub flags: u32,
    /// The union, raw; read it through the typed accessors.
    pub args: [u8; OP_UNION_LEN],
    /// Wire `payload_len`. Recomputed from `indata`/`outdata` when a message is encoded.
    pub payload_len: u32,
    /// Request payload (in MOSDOp).
    pub indata: Bytes,
    /// Reply payload (in MOSDOpReply).
    pub outdata: Bytes,
    /// Per-op return value (MOSDOpReply).
    pub rval: i32,
}

fn le64(a: &[u8; OP_UNION_LEN], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&a[at..at + 8]);
    u64::from_le_bytes(b)
}
fn le32(a: &[u8; OP_UNION_LEN], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&a[at..at + 4]);
    u32::from_le_bytes(b)
}
fn put64(a: &mut [u8; OP_UNION_LEN], at: usize, v: u64) {
    a[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
fn put32(a: &mut [u8; OP_UNION_LEN], at: usize, v: u32) {
    a[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// `extent` member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Extent {
    pub offset: u64,
    pub length: u64,
    pub truncate_size: u64,
    pub truncate_seq: u32,
}
/// `xattr` member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct XattrArgs {
    pub name_len: u32,
    pub value_len: u32,
    pub cmp_op: u8,
    pub cmp_mode: u8,
}
/// `cls` member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClsArgs {
    pub class_len: u8,
    pub method_len: u8,
    pub argc: u8,
    pub indata_len: u32,
}
/// `watch` member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WatchArgs {
    pub cookie: u64,
    pub ver: u64,
    pub op: u8,
    pub generation: u32,
    pub timeout: u32,
}
/// `alloc_hint` member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AllocHint {
    pub expected_object_size: u64,
    pub expected_write_size: u64,
    pub flags: u32,
}
/// `checksum` member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChecksumArgs {
    pub offset: u64,
    pub length: u64,
    pub chunk_size: u32,
    pub ty: u8,
}

impl OSDOp {
    pub fn new(op: u16) -> Self {
        OSDOp {
            op,
            ..Default::default()
        }
    }
    pub fn with_flags(mut self, flags: u32) -> Self {
        self.flags = flags;
        self
    }
    pub fn with_indata(mut self, d: impl Into<Bytes>) -> Self {
        self.indata = d.into();
        self.payload_len = self.indata.len() as u32;
        self
    }

    pub fn extent(&self) -> Extent {
        Extent {
            offset: le64(&self.args, 0),
            length: le64(&self.args, 8),
            truncate_size: le64(&self.args, 16),
            truncate_seq: le32(&self.args, 24),
        }
    }
    pub fn set_extent(&mut self, x: Extent) {
        put64(&mut self.args, 0, x.offset);
        put64(&mut self.args, 8, x.length);
        put64(&mut self.args, 16, x.truncate_size);
        put32(&mut self.args, 24, x.truncate_seq);
    }
    pub fn with_extent(mut self, offset: u64, length: u64) -> Self {
        self.set_extent(Extent {
            offset,
            length,
            ..Default::default()
        });
        self
    }
    pub fn xattr(&self) -> XattrArgs {
        XattrArgs {
            name_len: le32(&self.args, 0),
            value_len: le32(&self.args, 4),
            cmp_op: self.args[8],
            cmp_mode: self.args[9],
        }
    }
    pub fn set_xattr(&mut self, x: XattrArgs) {
        put32(&mut self.args, 0, x.name_len);
        put32(&mut self.args, 4, x.value_len);
        self.args[8] = x.cmp_op;
        self.args[9] = x.cmp_mode;
    }
    pub fn cls(&self) -> ClsArgs {
        ClsArgs {
            class_len: self.args[0],
            method_len: self.args[1],
            argc: self.args[2],
            indata_len: u32::from_le_bytes([self.args[3], self.args[4], self.args[5], self.args[6]]),
        }
    }
    pub fn set_cls(&mut self, c: ClsArgs) {
        self.args[0] = c.class_len;
        self.args[1] = c.method_len;
        self.args[2] = c.argc;
        self.args[3..7].copy_from_slice(&c.indata_len.to_le_bytes());
    }
    /// `pgls.count`, `pgls.start_epoch`.
    pub fn pgls(&self) -> (u64, u32) {
        (le64(&self.args, 0), le32(&self.args, 8))
    }
    pub fn set_pgls(&mut self, count: u64, start_epoch: u32) {
        put64(&mut self.args, 0, count);
        put32(&mut self.args, 8, start_epoch);
    }
    /// `snap.snapid`.
    pub fn snapid(&self) -> u64 {
        le64(&self.args, 0)
    }
    pub fn watch(&self) -> WatchArgs {
        WatchArgs {
            cookie: le64(&self.args, 0),
            ver: le64(&self.args, 8),
            op: self.args[16],
            generation: u32::from_le_bytes([self.args[17], self.args[18], self.args[19], self.args[20]]),
            timeout: u32::from_le_bytes([self.args[21], self.args[22], self.args[23], self.args[24]]),
        }
    }
    pub fn set_watch(&mut self, w: WatchArgs) {
        put64(&mut self.args, 0, w.cookie);
        put64(&mut self.args, 8, w.ver);
        self.args[16] = w.op;
        self.args[17..21].copy_from_slice(&w.generation.to_le_bytes());
        self.args[21..25].copy_from_slice(&w.timeout.to_le_bytes());
    }
    /// `notify.cookie`.
    pub fn notify_cookie(&self) -> u64 {
        le64(&self.args, 0)
    }
    pub fn set_notify_cookie(&mut self, c: u64) {
        put64(&mut self.args, 0, c);
    }
    /// `assert_ver.ver`.
    pub fn assert_ver(&self) -> u64 {
        le64(&self.args, 8)
    }
    pub fn set_assert_ver(&mut self, v: u64) {
        put64(&mut self.args, 8, v);
    }
    pub fn alloc_hint(&self) -> AllocHint {
        AllocHint {
            expected_object_size: le64(&self.args, 0),
            expected_write_size: le64(&self.args, 8),
            flags: le32(&self.args, 16),
        }
    }
    /// `writesame`: offset, length, data_length.
    pub fn writesame(&self) -> (u64, u64, u64) {
        (le64(&self.args, 0), le64(&self.args, 8), le64(&self.args, 16))
    }
    pub fn checksum(&self) -> ChecksumArgs {
        ChecksumArgs {
            offset: le64(&self.args, 0),
            length: le64(&self.args, 8),
            chunk_size: le32(&self.args, 16),
            ty: self.args[20],
        }
    }
    /// `copy_get.max`.
    pub fn copy_get_max(&self) -> u64 {
        le64(&self.args, 0)
    }

    fn encode_raw(&self, e: &mut Encoder, payload_len: u32) {
        e.u16(self.op);
        e.u32(self.flags);
        e.raw(&self.args);
        e.u32(payload_len);
    }

    fn decode_raw(d: &mut Decoder) -> Result<Self, DecodeError> {
        let op = d.u16()?;
        let flags = d.u32()?;
        let args = d.take_array::<OP_UNION_LEN>()?;
        let payload_len = d.u32()?;
        Ok(OSDOp {
            op,
            flags,
            args,
            payload_len,
            ..Default::default()
        })
    }
}

/// Split a data segment into per-op payloads by `payload_len` (`split_osd_op_vector_*_data`).
fn split_data(ops: &mut [OSDOp], data: &Bytes, out: bool) -> Result<(), DecodeError> {
    let mut at = 0usize;
    for o in ops.iter_mut() {
        let n = o.payload_len as usize;
        let end = at
            .checked_add(n)
            .filter(|&e| e <= data.len())
            .ok_or(DecodeError::Truncated {
                offset: at,
                needed: n,
                remaining: data.len().saturating_sub(at),
            })?;
        let b = data.slice(at..end);
        if out {
            o.outdata = b;
        } else {
            o.indata = b;
        }
        at = end;
    }
    Ok(())
}

/// The ops' payloads as one data segment: none or one non-empty payload (every op a client sends but a
/// multi-op write, every reply) goes by reference, without a list of them first.
fn join<'a>(parts: impl Iterator<Item = &'a Bytes> + Clone) -> Bytes {
    let mut full = parts.clone().filter(|p| !p.is_empty());
    match (full.next(), full.next()) {
        (None, _) => Bytes::new(),
        (Some(one), None) => one.clone(),
        _ => {
            let mut b = BytesMut::with_capacity(parts.clone().map(Bytes::len).sum());
            for p in parts {
                b.extend_from_slice(p);
            }
            b.freeze()
        }
    }
}

/// blkin trace info (trace_id, span_id, parent_span_id); always encoded, zeros without tracing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TraceInfo {
    pub trace_id: u64,
    pub span_id: u64,
    pub parent_span_id: u64,
}
impl TraceInfo {
    fn encode(&self, e: &mut Encoder) {
        e.u64(self.trace_id);
        e.u64(self.span_id);
        e.u64(self.parent_span_id);
    }
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        Ok(TraceInfo {
            trace_id: d.u64()?,
            span_id: d.u64()?,
            parent_span_id: d.u64()?,
        })
    }
}

/// CEPH_MSG_OSD_OP, v8 (Nautilus and later clients with RESEND_ON_SPLIT).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MOSDOp {
    /// Message header tid (the client's op tid); filled by [`MOSDOp::decode_message`].
    pub tid: u64,
    pub pgid: SpgId,
    /// The object's full 32-bit hash.
    pub hash: u32,
    pub osdmap_epoch: u32,
    pub flags: u32,
    /// Explicit reqid; Objecter leaves it blank (the OSD then uses source name, client_inc, tid).
    pub reqid: OsdReqId,
    pub trace: TraceInfo,
    pub client_inc: u32,
    pub mtime: Utime,
    pub oloc: ObjectLocator,
    pub oid: ObjectName,
    pub ops: Vec<OSDOp>,
    pub snapid: SnapId,
    pub snap_seq: SnapId,
    pub snaps: Vec<SnapId>,
    pub retry_attempt: i32,
    pub features: u64,
}

impl MOSDOp {
    /// Decode a raw message (its tid is the client's op tid).
    pub fn decode_message(m: &crate::Message) -> Result<Self, crate::MsgError> {
        let mut o = Self::from_message(m)?;
        o.tid = m.tid;
        Ok(o)
    }
    /// Encode with this op's tid.
    pub fn encode_message(&self, features: u64) -> crate::Message {
        self.to_message(features).with_tid(self.tid)
    }
    /// The request id Ceph uses for dup detection: the explicit one, else (source, client_inc, tid).
    pub fn effective_reqid(&self, source: denc::EntityNameT) -> OsdReqId {
        if self.reqid.name != denc::EntityNameT::default() || self.reqid.tid != 0 {
            self.reqid
        } else {
            OsdReqId {
                name: source,
                tid: self.tid,
                inc: self.client_inc as i32,
            }
        }
    }
    pub fn has_flag(&self, f: u32) -> bool {
        self.flags & f != 0
    }
}

impl CephMessage for MOSDOp {
    const TYPE: u16 = osd_msg_type::OSD_OP;
    const HEAD_VERSION: u16 = 8;
    const COMPAT_VERSION: u16 = 3;
    const NAME: &'static str = "osd_op";

    fn front_capacity(&self) -> usize {
        // fixed fields ~175 bytes, 38 per raw op, 8 per snap, the names
        192 + self.oid.0.len()
            + self.oloc.key.len()
            + self.oloc.nspace.len()
            + RAW_OP_LEN * self.ops.len()
            + 8 * self.snaps.len()
    }

    fn encode_front(&self, e: &mut Encoder) {
        e.encode(&self.pgid);
        e.u32(self.hash);
        e.u32(self.osdmap_epoch);
        e.u32(self.flags);
        e.encode(&self.reqid);
        self.trace.encode(e);
        e.u32(self.client_inc);
        e.encode(&self.mtime);
        e.encode(&self.oloc);
        e.encode(&self.oid);
        e.u16(self.ops.len() as u16);
        for o in &self.ops {
            o.encode_raw(e, o.indata.len() as u32);
        }
        e.encode(&self.snapid);
        e.encode(&self.snap_seq);
        e.encode(&self.snaps);
        e.i32(self.retry_attempt);
        e.u64(self.features);
    }

    fn data(&self) -> Bytes {
        join(self.ops.iter().map(|o| &o.indata))
    }

    fn decode_front(version: u16, d: &mut Decoder, data: &Bytes) -> Result<Self, DecodeError> {
        if version != 8 {
            return Err(DecodeError::invalid(
                "MOSDOp",
                format!("header version {version} (only v8, sent by Nautilus and later clients)"),
            ));
        }
        let pgid = d.decode()?;
        let hash = d.u32()?;
        let osdmap_epoch = d.u32()?;
        let flags = d.u32()?;
        let reqid = d.decode()?;
        let trace = TraceInfo::decode(d)?;
        let client_inc = d.u32()?;
        let mtime = d.decode()?;
        let oloc = d.decode()?;
        let oid = d.decode()?;
        let n = d.u16()? as usize;
        if n.saturating_mul(RAW_OP_LEN) > d.remaining() {
            return Err(DecodeError::Truncated {
                offset: d.offset(),
                needed: n * RAW_OP_LEN,
                remaining: d.remaining(),
            });
        }
        let mut ops = Vec::with_capacity(n);
        for _ in 0..n {
            ops.push(OSDOp::decode_raw(d)?);
        }
        let snapid = d.decode()?;
        let snap_seq = d.decode()?;
        let snaps = d.decode()?;
        let retry_attempt = d.i32()?;
        let features = d.u64()?;
        split_data(&mut ops, data, false)?;
        Ok(MOSDOp {
            tid: 0,
            pgid,
            hash,
            osdmap_epoch,
            flags,
            reqid,
            trace,
            client_inc,
            mtime,
            oloc,
            oid,
            ops,
            snapid,
            snap_seq,
            snaps,
            retry_attempt,
            features,
        })
    }
}

/// `request_redirect_t`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestRedirect {
    pub locator: ObjectLocator,
    pub object: Bytes,
    pub osd_instructions: Bytes,
}
impl Encode for RequestRedirect {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(1, 1, |e| {
            e.encode(&self.locator);
            e.bytes(&self.object);
            e.bytes(&self.osd_instructions);
        })
    }
}
impl Decode for RequestRedirect {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("request_redirect_t", 1, |_, d| {
            Ok(RequestRedirect {
                locator: d.decode()?,
                object: d.bufferlist()?,
                osd_instructions: d.bufferlist()?,
            })
        })
    }
}

/// CEPH_MSG_OSD_OPREPLY, v8 as Pacific OSDs send it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MOSDOpReply {
    /// The request's tid (message header).
    pub tid: u64,
    pub oid: ObjectName,
    pub pgid: PgId,
    pub flags: i64,
    pub result: i32,
    pub bad_replay_version: Eversion,
    pub osdmap_epoch: u32,
    /// Ops with their `rval` and `outdata`.
    pub ops: Vec<OSDOp>,
    pub retry_attempt: i32,
    pub replay_version: Eversion,
    pub user_version: u64,
    pub redirect: Option<RequestRedirect>,
    pub trace: TraceInfo,
}

impl MOSDOpReply {
    /// The reply skeleton Ceph builds from a request (`MOSDOpReply(req, r, epoch, acktype, ignore_out_data)`):
    /// request flags without ACK/ONNVRAM/ONDISK plus `ack_flags`, the request's ops with payloads cleared.
    pub fn for_request(req: &MOSDOp, result: i32, epoch: u32, ack_flags: u32) -> Self {
        Self::for_request_ops(req, &req.ops, result, epoch, ack_flags)
    }
    /// [`MOSDOpReply::for_request`] for a request whose ops the caller has taken out of it (to execute them).
    pub fn for_request_ops(req: &MOSDOp, ops: &[OSDOp], result: i32, epoch: u32, ack_flags: u32) -> Self {
        let ops = ops
            .iter()
            .map(|o| OSDOp {
                op: o.op,
                flags: o.flags,
                args: o.args,
                payload_len: 0,
                indata: Bytes::new(),
                outdata: Bytes::new(),
                rval: 0,
            })
            .collect();
        MOSDOpReply {
            tid: req.tid,
            oid: req.oid.clone(),
            pgid: req.pgid.pgid,
            flags: i64::from((req.flags & !(flag::ONDISK | flag::ONNVRAM | flag::ACK)) | ack_flags),
            result,
            osdmap_epoch: epoch,
            ops,
            retry_attempt: req.retry_attempt,
            ..Default::default()
        }
    }
    /// `set_reply_versions`: old clients read `bad_replay_version`, which carries the user version when set.
    pub fn set_reply_versions(&mut self, v: Eversion, uv: u64) {
        self.replay_version = v;
        self.user_version = uv;
        self.bad_replay_version = v;
        if uv != 0 {
            self.bad_replay_version.version = uv;
        }
    }
    /// `set_enoent_reply_versions` (no replay version for non-writes).
    pub fn set_enoent_reply_versions(&mut self, v: Eversion, uv: u64) {
        self.user_version = uv;
        self.bad_replay_version = v;
    }
    pub fn decode_message(m: &crate::Message) -> Result<Self, crate::MsgError> {
        let mut o = Self::from_message(m)?;
        o.tid = m.tid;
        Ok(o)
    }
    pub fn encode_message(&self, features: u64) -> crate::Message {
        self.to_message(features).with_tid(self.tid)
    }
}

impl CephMessage for MOSDOpReply {
    const TYPE: u16 = osd_msg_type::OSD_OPREPLY;
    const HEAD_VERSION: u16 = 8;
    const COMPAT_VERSION: u16 = 2;
    const NAME: &'static str = "osd_op_reply";

    fn front_capacity(&self) -> usize {
        // fixed fields ~105 bytes, 38 + 4 per op (raw op + rval), the redirect's names
        128 + self.oid.0.len()
            + 42 * self.ops.len()
            + self.redirect.as_ref().map_or(0, |r| {
                64 + r.object.len() + r.osd_instructions.len() + r.locator.key.len() + r.locator.nspace.len()
            })
    }

    fn encode_front(&self, e: &mut Encoder) {
        e.encode(&self.oid);
        e.encode(&self.pgid);
        e.i64(self.flags);
        e.i32(self.result);
        e.encode(&self.bad_replay_version);
        e.u32(self.osdmap_epoch);
        e.u32(self.ops.len() as u32);
        for o in &self.ops {
            o.encode_raw(e, o.outdata.len() as u32);
        }
        e.i32(self.retry_attempt);
        for o in &self.ops {
            e.i32(o.rval);
        }
        e.encode(&self.replay_version);
        e.u64(self.user_version);
        e.bool(self.redirect.is_some());
        if let Some(r) = &self.redirect {
            e.encode(r);
        }
        self.trace.encode(e);
    }

    fn data(&self) -> Bytes {
        join(self.ops.iter().map(|o| &o.outdata))
    }

    fn decode_front(version: u16, d: &mut Decoder, data: &Bytes) -> Result<Self, DecodeError> {
        if version < 7 {
            return Err(DecodeError::invalid(
                "MOSDOpReply",
                format!("header version {version} (only v7 and later)"),
            ));
        }
        let oid = d.decode()?;
        let pgid = d.decode()?;
        let flags = d.i64()?;
        let result = d.i32()?;
        let bad_replay_version = d.decode()?;
        let osdmap_epoch = d.u32()?;
        let n = d.length("ops", RAW_OP_LEN)?;
        let mut ops = Vec::with_capacity(n);
        for _ in 0..n {
            ops.push(OSDOp::decode_raw(d)?);
        }
        let retry_attempt = d.i32()?;
        for o in ops.iter_mut() {
            o.rval = d.i32()?;
        }
        split_data(&mut ops, data, true)?;
        let replay_version = d.decode()?;
        let user_version = d.u64()?;
        let redirect = if d.bool()? { Some(d.decode()?) } else { None };
        let trace = if version >= 8 {
            TraceInfo::decode(d)?
        } else {
            TraceInfo::default()
        };
        Ok(MOSDOpReply {
            tid: 0,
            oid,
            pgid,
            flags,
            result,
            bad_replay_version,
            osdmap_epoch,
            ops,
            retry_attempt,
            replay_version,
            user_version,
            redirect,
            trace,
        })
    }
}

/// CEPH_MSG_WATCH_NOTIFY (v3): a notify to a watcher, a notify's completion to the notifier, or a disconnect.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MWatchNotify {
    pub cookie: u64,
    pub ver: u64,
    pub notify_id: u64,
    pub opcode: u8,
    pub bl: Bytes,
    pub return_code: i32,
    pub notifier_gid: u64,
    /// Data segment: a NOTIFY_COMPLETE carries the watchers' replies and the missed watchers here.
    pub data: Bytes,
}

impl CephMessage for MWatchNotify {
    const TYPE: u16 = osd_msg_type::WATCH_NOTIFY;
    const HEAD_VERSION: u16 = 3;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "watch-notify";

    fn encode_front(&self, e: &mut Encoder) {
        e.u8(1); // msg_ver
        e.u8(self.opcode);
        e.u64(self.cookie);
        e.u64(self.ver);
        e.u64(self.notify_id);
        e.bytes(&self.bl);
        e.i32(self.return_code);
        e.u64(self.notifier_gid);
    }

    fn data(&self) -> Bytes {
        self.data.clone()
    }

    fn decode_front(version: u16, d: &mut Decoder, data: &Bytes) -> Result<Self, DecodeError> {
        let msg_ver = d.u8()?;
        let opcode = d.u8()?;
        let cookie = d.u64()?;
        let ver = d.u64()?;
        let notify_id = d.u64()?;
        let bl = if msg_ver >= 1 {
            d.bufferlist()?
        } else {
            Bytes::new()
        };
        let return_code = if version >= 2 { d.i32()? } else { 0 };
        let notifier_gid = if version >= 3 { d.u64()? } else { 0 };
        Ok(MWatchNotify {
            cookie,
            ver,
            notify_id,
            opcode,
            bl,
            return_code,
            notifier_gid,
            data: data.clone(),
        })
    }
}

/// CEPH_MSG_OSD_BACKOFF (v1): block/unblock a client's ops on a PG or object range.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MOSDBackoff {
    pub pgid: SpgId,
    pub map_epoch: u32,
    pub op: u8,
    pub id: u64,
    pub begin: denc::HObject,
    pub end: denc::HObject,
}

impl CephMessage for MOSDBackoff {
    const TYPE: u16 = osd_msg_type::OSD_BACKOFF;
    const HEAD_VERSION: u16 = 1;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "osd_backoff";

    fn encode_front(&self, e: &mut Encoder) {
        e.encode(&self.pgid);
        e.u32(self.map_epoch);
        e.u8(self.op);
        e.u64(self.id);
        e.encode(&self.begin);
        e.encode(&self.end);
    }

    fn decode_front(_version: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        Ok(MOSDBackoff {
            pgid: d.decode()?,
            map_epoch: d.u32()?,
            op: d.u8()?,
            id: d.u64()?,
            begin: d.decode()?,
            end: d.decode()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_op_is_38_bytes_and_union_accessors_round_trip() {
        let mut o = OSDOp::new(op::WATCH);
        o.set_watch(WatchArgs {
            cookie: 0x1122,
            ver: 0,
            op: watch_op::WATCH,
            generation: 7,
            timeout: 30,
        });
        let mut e = Encoder::new(0);
        o.encode_raw(&mut e, 5);
        assert_eq!(e.len(), RAW_OP_LEN);
        let mut d = Decoder::new(e.into_bytes());
        let back = OSDOp::decode_raw(&mut d).unwrap();
        assert_eq!(back.watch().cookie, 0x1122);
        assert_eq!(back.watch().op, watch_op::WATCH);
        assert_eq!(back.watch().generation, 7);
        assert_eq!(back.watch().timeout, 30);
        assert_eq!(back.payload_len, 5);
    }

    #[test]
    fn op_modes() {
        assert!(op::is_read(op::READ));
        assert!(!op::is_read(op::CALL));
        assert!(op::is_write(op::WRITE));
        assert!(op::is_write(op::TMAPUP) && op::is_read(op::TMAPUP));
        assert!(op::is_pg_op(op::PGNLS));
        assert_eq!(op::READ, 0x1201);
        assert_eq!(op::WRITE, 0x2201);
        assert_eq!(op::CALL, 0x1401);
        assert_eq!(op::PGNLS, 0x1505);
        assert_eq!(op::CMPEXT, 0x1220);
        assert_eq!(op::name(op::OMAPGETVALS), "omap-get-vals");
    }

    #[test]
    fn request_and_reply_round_trip() {
        let req = MOSDOp {
            tid: 9,
            pgid: SpgId::new(PgId::new(3, 5), denc::ShardId::NO_SHARD),
            hash: 0xdead_beef,
            osdmap_epoch: 40,
            flags: flag::WRITE | flag::ONDISK,
            oid: ObjectName::new("obj"),
            oloc: ObjectLocator::new(3),
            ops: vec![
                OSDOp::new(op::WRITE).with_extent(0, 3).with_indata(&b"abc"[..]),
                OSDOp::new(op::SETXATTR).with_indata(&b"kv"[..]),
            ],
            snapid: SnapId::NOSNAP,
            retry_attempt: 0,
            features: u64::MAX,
            ..Default::default()
        };
        let m = req.encode_message(u64::MAX);
        assert_eq!(&m.data[..], b"abckv");
        let back = MOSDOp::decode_message(&m).unwrap();
        assert_eq!(back, req);

        let mut rep = MOSDOpReply::for_request(&req, 0, 41, flag::ONDISK);
        rep.ops[0].outdata = Bytes::from_static(b"xyz");
        rep.ops[1].rval = -61;
        rep.set_reply_versions(Eversion::new(41, 7), 7);
        let m = rep.encode_message(u64::MAX);
        let back = MOSDOpReply::decode_message(&m).unwrap();
        assert_eq!(back.ops[0].payload_len, 3);
        assert_eq!(back.ops[1].rval, -61);
        assert_eq!(back.flags, i64::from(flag::WRITE | flag::ONDISK));
        assert_eq!(back.tid, 9);
    }

    #[test]
    fn truncated_data_is_an_error() {
        let req = MOSDOp {
            ops: vec![OSDOp::new(op::WRITE).with_indata(&b"abc"[..])],
            ..Default::default()
        };
        let mut m = req.encode_message(u64::MAX);
        m.data = Bytes::from_static(b"ab");
        assert!(MOSDOp::decode_message(&m).is_err());
    }

    proptest::proptest! {
        #[test]
        fn hostile_messages_never_panic(front in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
                                        data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
                                        version in 0u16..12) {
            for ty in [osd_msg_type::OSD_OP, osd_msg_type::OSD_OPREPLY, osd_msg_type::WATCH_NOTIFY, osd_msg_type::OSD_BACKOFF] {
                let m = crate::Message { msg_type: ty, version, compat_version: 1, front: front.clone().into(), data: data.clone().into(), ..Default::default() };
                let _ = MOSDOp::decode_message(&m);
                let _ = MOSDOpReply::decode_message(&m);
                let _ = MWatchNotify::from_message(&m);
                let _ = MOSDBackoff::from_message(&m);
            }
        }
    }
}
