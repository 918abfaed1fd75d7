// SPDX-License-Identifier: LGPL-3.0-or-later
//! Erasure-coded pool sub-operations between a PG's primary and its shards (`MOSDECSubOp*`, types 108–111), with
//! their bodies `ECSubWrite`, `ECSubWriteReply`, `ECSubRead` and `ECSubReadReply` (`src/osd/ECMsgTypes.h`),
//! in the versions Ceph 16.2.15 sends. Checked byte for byte against real Pacific traffic
//! (tests/capture_classic.rs).
//!
//! Unlike `MOSDRepOp`, a Pacific EC sub-write carries its transaction inside the front segment (ECSubWrite v4),
//! and a sub-read reply carries the shard data inside the front as well (ECSubReadReply v1); the data segment is
//! empty. Maps keyed by `hobject_t` are kept as vectors in wire order, so that re-encoding is exact.

use bytes::Bytes;
use denc::{Decode, DecodeError, Decoder, Encode, Encoder, Eversion, HObject, OsdReqId, PgShard, SpgId};
use osd_types::pg_log::PgLogEntry;
use osd_types::pg_stat::PgStat;
use osd_types::transaction::Transaction;

use crate::osd_rep::TraceInfo;
use crate::prio;

/// Message type numbers of this module (`MSG_OSD_EC_*` in Message.h).
pub mod ec_msg {
    pub const EC_WRITE: u16 = 108;
    pub const EC_WRITE_REPLY: u16 = 109;
    pub const EC_READ: u16 = 110;
    pub const EC_READ_REPLY: u16 = 111;
}

/// `optional<T>` of a versioned struct kept encoded: a bool, then the struct.
fn decode_opt_struct(d: &mut Decoder) -> Result<Option<Bytes>, DecodeError> {
    Ok(if d.bool()? {
        Some(crate::osd::take_struct(d)?)
    } else {
        None
    })
}

fn encode_opt_struct(e: &mut Encoder, v: &Option<Bytes>) {
    match v {
        Some(b) => {
            e.u8(1);
            e.raw(b);
        }
        None => e.u8(0),
    }
}

/// `ECSubWrite` (v4/1): one shard's part of an EC write: its transaction, the log entries, stats.
#[derive(Debug, Clone, PartialEq)]
pub struct EcSubWrite {
    pub from: PgShard,
    pub tid: u64,
    pub reqid: OsdReqId,
    pub soid: HObject,
    pub stats: PgStat,
    pub t: Transaction,
    pub at_version: Eversion,
    pub trim_to: Eversion,
    pub log_entries: Vec<PgLogEntry>,
    /// `set<hobject_t>`, in wire order.
    pub temp_added: Vec<HObject>,
    pub temp_removed: Vec<HObject>,
    /// `optional<pg_hit_set_history_t>`, kept encoded (None unless cache tiering).
    pub updated_hit_set_history: Option<Bytes>,
    pub roll_forward_to: Eversion,
    pub backfill_or_async_recovery: bool,
}

impl Encode for EcSubWrite {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(4, 1, |e| {
            e.encode(&self.from);
            e.u64(self.tid);
            e.encode(&self.reqid);
            e.encode(&self.soid);
            e.encode(&self.stats);
            e.encode(&self.t);
            e.encode(&self.at_version);
            e.encode(&self.trim_to);
            e.encode(&self.log_entries);
            e.encode(&self.temp_added);
            e.encode(&self.temp_removed);
            encode_opt_struct(e, &self.updated_hit_set_history);
            e.encode(&self.roll_forward_to);
            e.bool(self.backfill_or_async_recovery);
        });
    }
}

impl Decode for EcSubWrite {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        // Pacific writes v4; v1–v3 (pre-Nautilus) would need defaults we do not model.
        let (_, mut d) = d.start_struct_min("ECSubWrite", 4, 4)?;
        Ok(EcSubWrite {
            from: d.decode()?,
            tid: d.u64()?,
            reqid: d.decode()?,
            soid: d.decode()?,
            stats: d.decode()?,
            t: d.decode()?,
            at_version: d.decode()?,
            trim_to: d.decode()?,
            log_entries: d.decode()?,
            temp_added: d.decode()?,
            temp_removed: d.decode()?,
            updated_hit_set_history: decode_opt_struct(&mut d)?,
            roll_forward_to: d.decode()?,
            backfill_or_async_recovery: d.bool()?,
        })
    }
}

/// `ECSubWriteReply` (v1/1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EcSubWriteReply {
    pub from: PgShard,
    pub tid: u64,
    pub last_complete: Eversion,
    pub committed: bool,
    pub applied: bool,
}

impl Encode for EcSubWriteReply {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(1, 1, |e| {
            e.encode(&self.from);
            e.u64(self.tid);
            e.encode(&self.last_complete);
            e.bool(self.committed);
            e.bool(self.applied);
        });
    }
}

impl Decode for EcSubWriteReply {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        let (_, mut d) = d.start_struct("ECSubWriteReply", 1)?;
        Ok(EcSubWriteReply {
            from: d.decode()?,
            tid: d.u64()?,
            last_complete: d.decode()?,
            committed: d.bool()?,
            applied: d.bool()?,
        })
    }
}

/// One extent to read from a shard: offset, length, fadvise flags.
pub type ReadExtent = (u64, u64, u32);

/// `ECSubRead` (v3/2, what a peer with `CEPH_FEATURE_OSD_FADVISE_FLAGS` gets; every Pacific peer has it).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EcSubRead {
    pub from: PgShard,
    pub tid: u64,
    /// `map<hobject_t, list<(off, len, flags)>>`, in wire order.
    pub to_read: Vec<(HObject, Vec<ReadExtent>)>,
    /// `set<hobject_t>`: objects whose attributes are wanted.
    pub attrs_to_read: Vec<HObject>,
    /// `map<hobject_t, vector<pair<int, int>>>`: (first sub-chunk, count) runs to read per object.
    pub subchunks: Vec<(HObject, Vec<(i32, i32)>)>,
}

impl Encode for EcSubRead {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(3, 2, |e| {
            e.encode(&self.from);
            e.u64(self.tid);
            e.encode(&self.to_read);
            e.encode(&self.attrs_to_read);
            e.encode(&self.subchunks);
        });
    }
}

impl Decode for EcSubRead {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        // v1 lacks the per-extent flags; Pacific never sends it to a Pacific peer.
        let (h, mut d) = d.start_struct_min("ECSubRead", 3, 2)?;
        let mut r = EcSubRead {
            from: d.decode()?,
            tid: d.u64()?,
            to_read: d.decode()?,
            attrs_to_read: d.decode()?,
            subchunks: Vec::new(),
        };
        // As Ceph: sub-chunks are present only from v3 with a compat below the version.
        if h.version > 2 && h.version > h.compat {
            r.subchunks = d.decode()?;
        }
        Ok(r)
    }
}

/// `ECSubReadReply` (v1/1): the extents read (data inline), attributes and per-object errors.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EcSubReadReply {
    pub from: PgShard,
    pub tid: u64,
    /// `map<hobject_t, list<pair<u64 offset, bufferlist>>>`.
    pub buffers_read: Vec<(HObject, Vec<(u64, Bytes)>)>,
    /// `map<hobject_t, map<string, bufferlist>>` (names kept as raw bytes).
    pub attrs_read: Vec<(HObject, Vec<(Bytes, Bytes)>)>,
    /// `map<hobject_t, int>`: negative errno per object.
    pub errors: Vec<(HObject, i32)>,
}

impl Encode for EcSubReadReply {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(1, 1, |e| {
            e.encode(&self.from);
            e.u64(self.tid);
            e.encode(&self.buffers_read);
            e.encode(&self.attrs_read);
            e.encode(&self.errors);
        });
    }
}

impl Decode for EcSubReadReply {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        let (_, mut d) = d.start_struct("ECSubReadReply", 1)?;
        Ok(EcSubReadReply {
            from: d.decode()?,
            tid: d.u64()?,
            buffers_read: d.decode()?,
            attrs_read: d.decode()?,
            errors: d.decode()?,
        })
    }
}

/// The common frame of the four sub-op messages: `pgid, map_epoch, <body>, min_epoch, trace`.
macro_rules! ec_message {
    ($(#[$doc:meta])* $name:ident, $body:ty, $ty:expr, $head:expr, $compat:expr, $wire_name:expr, $prio:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name {
            pub pgid: SpgId,
            pub map_epoch: u32,
            pub op: $body,
            pub min_epoch: u32,
            pub trace: TraceInfo,
        }
        impl $name {
            fn enc(&self, e: &mut Encoder) {
                e.encode(&self.pgid);
                e.u32(self.map_epoch);
                e.encode(&self.op);
                e.u32(self.min_epoch);
                e.encode(&self.trace);
            }
            fn dec(d: &mut Decoder, _: &Bytes) -> Result<Self, DecodeError> {
                Ok($name {
                    pgid: d.decode()?,
                    map_epoch: d.u32()?,
                    op: d.decode()?,
                    min_epoch: d.u32()?,
                    trace: d.decode()?,
                })
            }
        }
        no_data!($name);
        message!($name, $ty, $head, $compat, $wire_name, $prio);
    };
}

ec_message!(
    /// `MOSDECSubOpWrite` (108, v2/1): the primary's write to one shard.
    MOSDECSubOpWrite, EcSubWrite, ec_msg::EC_WRITE, 2, 1, "MOSDECSubOpWrite", prio::DEFAULT
);
ec_message!(
    /// `MOSDECSubOpWriteReply` (109, v2/1): a shard's commit of a sub-write.
    MOSDECSubOpWriteReply, EcSubWriteReply, ec_msg::EC_WRITE_REPLY, 2, 1, "MOSDECSubOpWriteReply", prio::HIGH
);
ec_message!(
    /// `MOSDECSubOpRead` (110, v3/1): the primary reads extents (and attributes) of one shard. Pacific's v3 has no
    /// cost field (added by v4 in later releases).
    MOSDECSubOpRead, EcSubRead, ec_msg::EC_READ, 3, 1, "MOSDECSubOpRead", prio::DEFAULT
);
ec_message!(
    /// `MOSDECSubOpReadReply` (111, v2/1): a shard's read result.
    MOSDECSubOpReadReply, EcSubReadReply, ec_msg::EC_READ_REPLY, 2, 1, "MOSDECSubOpReadReply", prio::DEFAULT
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CephMessage;
    use denc::{PgId, ShardId, SnapId};

    fn obj(name: &'static str) -> HObject {
        HObject::new(name, Bytes::new(), SnapId::NOSNAP, 7, 3, Bytes::new())
    }

    #[test]
    fn read_and_reply_round_trip() {
        let pgid = SpgId::new(PgId { pool: 3, seed: 1 }, ShardId(1));
        let read = MOSDECSubOpRead {
            pgid,
            map_epoch: 30,
            op: EcSubRead {
                from: PgShard::new(0, ShardId(0)),
                tid: 9,
                to_read: vec![(obj("a"), vec![(0, 4096, 0)])],
                attrs_to_read: vec![obj("a")],
                subchunks: vec![(obj("a"), vec![(0, 1)])],
            },
            min_epoch: 29,
            trace: TraceInfo::default(),
        };
        let m = read.to_message(denc::CEPH_FEATURES_ALL);
        assert_eq!((m.version, m.compat_version), (3, 1));
        assert_eq!(
            MOSDECSubOpRead::from_message(&m).unwrap_or_else(|e| panic!("{e}")),
            read
        );
        let reply = MOSDECSubOpReadReply {
            pgid,
            map_epoch: 30,
            op: EcSubReadReply {
                from: PgShard::new(1, ShardId(1)),
                tid: 9,
                buffers_read: vec![(obj("a"), vec![(0, Bytes::from_static(b"shard bytes"))])],
                attrs_read: vec![(
                    obj("a"),
                    vec![(Bytes::from_static(b"hinfo_key"), Bytes::from_static(b"h"))],
                )],
                errors: vec![(obj("b"), -2)],
            },
            min_epoch: 29,
            trace: TraceInfo::default(),
        };
        let m = reply.to_message(denc::CEPH_FEATURES_ALL);
        assert_eq!(
            MOSDECSubOpReadReply::from_message(&m).unwrap_or_else(|e| panic!("{e}")),
            reply
        );
        // Every truncation is an error, not a panic.
        for cut in 0..m.front.len() {
            let mut t = m.clone();
            t.front = m.front.slice(..cut);
            assert!(MOSDECSubOpReadReply::from_message(&t).is_err());
        }
    }
}
