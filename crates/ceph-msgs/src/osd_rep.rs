// SPDX-License-Identifier: LGPL-3.0-or-later
//! OSD↔OSD messages for replication, peering and recovery, with the header versions Ceph 16.2.15 sends
//! (`src/messages/MOSD*.h`). Checked byte for byte against real Pacific traffic (tests/capture_rep.rs).
//!
//! Embedded OSD structs are typed (`osd-types`). Encoding follows the peer's features where Ceph's does
//! (`pg_missing_t` items). MOSDRepOp carries the `ObjectStore::Transaction` in the data segment (Pacific; Squid's
//! v4 moves it into the front, which Pacific peers do not understand).

use bytes::Bytes;
use denc::{
    Decode, DecodeError, Decoder, Encode, Encoder, Eversion, HObject, OsdReqId, PgId, PgShard, ShardId, SpgId,
};
use osd_types::past_intervals::PastIntervals;
use osd_types::pg_info::PgInfo;
use osd_types::pg_log::PgLogEntry;
use osd_types::pg_log_t::PgLog;
use osd_types::pg_missing::PgMissing;
use osd_types::pg_peering::{PgLease, PgLeaseAck, PgNotify, PgQuery};
use osd_types::pg_stat::{ObjectStatCollection, PgStat};
use osd_types::recovery::{PullOp, PushOp, PushReplyOp};
use osd_types::transaction::Transaction;

use crate::prio;

/// Message type numbers (`MSG_OSD_*` in Message.h).
pub mod rep_msg {
    pub const PG_NOTIFY: u16 = 80;
    pub const PG_QUERY: u16 = 81;
    pub const PG_LOG: u16 = 83;
    pub const PG_REMOVE: u16 = 84;
    pub const PG_INFO: u16 = 85;
    pub const PG_TRIM: u16 = 86;
    pub const PG_SCAN: u16 = 94;
    pub const PG_BACKFILL: u16 = 95;
    pub const PG_BACKFILL_REMOVE: u16 = 96;
    pub const BACKFILL_RESERVE: u16 = 99;
    pub const PG_PUSH: u16 = 105;
    pub const PG_PULL: u16 = 106;
    pub const PG_PUSH_REPLY: u16 = 107;
    pub const EC_WRITE: u16 = 108;
    pub const EC_WRITE_REPLY: u16 = 109;
    pub const EC_READ: u16 = 110;
    pub const EC_READ_REPLY: u16 = 111;
    pub const REPOP: u16 = 112;
    pub const REPOPREPLY: u16 = 113;
    pub const PG_UPDATE_LOG_MISSING: u16 = 114;
    pub const PG_UPDATE_LOG_MISSING_REPLY: u16 = 115;
    pub const PG_RECOVERY_DELETE: u16 = 118;
    pub const PG_RECOVERY_DELETE_REPLY: u16 = 119;
    pub const PG_NOTIFY2: u16 = 130;
    pub const PG_QUERY2: u16 = 131;
    pub const PG_INFO2: u16 = 132;
    pub const PG_LEASE: u16 = 133;
    pub const PG_LEASE_ACK: u16 = 134;
    pub const RECOVERY_RESERVE: u16 = 150;
}

/// `blkin_trace_info` as `encode_trace` writes it (all zero when tracing is off): trace, span, parent span ids.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TraceInfo {
    pub trace_id: u64,
    pub span_id: u64,
    pub parent_span_id: u64,
}
impl Encode for TraceInfo {
    fn encode(&self, e: &mut Encoder) {
        e.u64(self.trace_id);
        e.u64(self.span_id);
        e.u64(self.parent_span_id);
    }
}
impl Decode for TraceInfo {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        Ok(TraceInfo {
            trace_id: d.u64()?,
            span_id: d.u64()?,
            parent_span_id: d.u64()?,
        })
    }
}

/// `MOSDRepOp` (112, v3): the primary's replicated write for one object: log entries, stats and the transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct MOSDRepOp {
    pub map_epoch: u32,
    pub min_epoch: u32,
    pub trace: TraceInfo,
    pub reqid: OsdReqId,
    pub pgid: SpgId,
    pub poid: HObject,
    pub acks_wanted: u8,
    pub version: Eversion,
    /// Encoded `vector<pg_log_entry_t>` (see [`MOSDRepOp::log_entries`]).
    pub logbl: Bytes,
    pub pg_stats: PgStat,
    pub pg_trim_to: Eversion,
    pub new_temp_oid: HObject,
    pub discard_temp_oid: HObject,
    pub from: PgShard,
    /// `optional<pg_hit_set_history_t>`, kept encoded (None unless cache tiering).
    pub updated_hit_set_history: Option<Bytes>,
    pub min_last_complete_ondisk: Eversion,
    /// The transaction, as the data segment carries it.
    pub op_t: Transaction,
}

/// `CEPH_OSD_FLAG_ONDISK`, the only ack a Pacific primary asks for.
pub const CEPH_OSD_FLAG_ONDISK: u8 = 0x20;

impl MOSDRepOp {
    pub fn log_entries(&self) -> Result<Vec<PgLogEntry>, DecodeError> {
        Vec::<PgLogEntry>::decode_all(self.logbl.clone())
    }
    pub fn set_log_entries(&mut self, entries: &[PgLogEntry]) {
        self.logbl = entries.to_bytes(u64::MAX);
    }
    fn enc(&self, e: &mut Encoder) {
        e.u32(self.map_epoch);
        e.u32(self.min_epoch);
        e.encode(&self.trace);
        e.encode(&self.reqid);
        e.encode(&self.pgid);
        e.encode(&self.poid);
        e.u8(self.acks_wanted);
        e.encode(&self.version);
        e.bytes(&self.logbl);
        e.encode(&self.pg_stats);
        e.encode(&self.pg_trim_to);
        e.encode(&self.new_temp_oid);
        e.encode(&self.discard_temp_oid);
        e.encode(&self.from);
        match &self.updated_hit_set_history {
            Some(b) => {
                e.u8(1);
                e.raw(b);
            }
            None => e.u8(0),
        }
        e.encode(&self.min_last_complete_ondisk);
    }
    fn data_segment(&self) -> Bytes {
        self.op_t.to_bytes(u64::MAX)
    }
    /// At least the front's encoded size for the usual rep op (pg_stats 700-800 bytes, three hobjects, the log
    /// entries), so the encoder allocates once (checked against every captured rep op, tests/capture_rep.rs).
    fn front_estimate(&self) -> usize {
        let hobj = |h: &HObject| 48 + h.oid.0.len() + h.key.len() + h.nspace.len();
        960 + self.logbl.len()
            + hobj(&self.poid)
            + hobj(&self.new_temp_oid)
            + hobj(&self.discard_temp_oid)
            + self.updated_hit_set_history.as_ref().map_or(0, Bytes::len)
    }
    fn dec(d: &mut Decoder, data: &Bytes) -> Result<Self, DecodeError> {
        Self::dec_with(d, data, false)
    }

    /// [`CephMessage::from_message`](crate::CephMessage::from_message) for the replica that applies the rep op:
    /// `pg_stats` holds only what a replica takes from it (the fields up to and including `stats`, the object
    /// counts), the rest of `pg_stat_t` is skipped by its length, so the decode allocates nothing for its
    /// vectors and maps (about half of the front's decode). Every other field is as `from_message` gives it.
    pub fn from_message_replica(m: &crate::Message) -> Result<Self, crate::MsgError> {
        use crate::CephMessage as _;
        if m.msg_type != Self::TYPE {
            return Err(crate::MsgError::WrongType {
                expected: Self::TYPE,
                got: m.msg_type,
            });
        }
        if m.compat_version > Self::HEAD_VERSION {
            return Err(crate::MsgError::Incompatible {
                name: Self::NAME,
                compat: m.compat_version,
                supported: Self::HEAD_VERSION,
            });
        }
        let decode_err = |source| crate::MsgError::Decode {
            name: Self::NAME,
            source,
        };
        if m.version < Self::OLDEST {
            return Err(decode_err(crate::too_old(Self::NAME, m.version, Self::OLDEST)));
        }
        let mut d = Decoder::new(m.front.clone());
        let data = m.data_flat();
        Self::dec_with(&mut d, &data, true).map_err(decode_err)
    }

    fn dec_with(d: &mut Decoder, data: &Bytes, stats_head_only: bool) -> Result<Self, DecodeError> {
        Ok(MOSDRepOp {
            map_epoch: d.u32()?,
            min_epoch: d.u32()?,
            trace: d.decode()?,
            reqid: d.decode()?,
            pgid: d.decode()?,
            poid: d.decode()?,
            acks_wanted: d.u8()?,
            version: d.decode()?,
            logbl: d.bufferlist()?,
            pg_stats: if stats_head_only {
                PgStat::decode_prefix(d)?
            } else {
                d.decode()?
            },
            pg_trim_to: d.decode()?,
            new_temp_oid: d.decode()?,
            discard_temp_oid: d.decode()?,
            from: d.decode()?,
            updated_hit_set_history: if d.bool()? {
                Some(crate::osd::take_struct(d)?)
            } else {
                None
            },
            min_last_complete_ondisk: d.decode()?,
            op_t: Transaction::decode_all(data.clone())?,
        })
    }
}

message!(
    MOSDRepOp,
    rep_msg::REPOP,
    3,
    1,
    "osd_repop",
    prio::DEFAULT,
    MOSDRepOp::front_estimate
);

/// `MOSDRepOpReply` (113, v2): a replica's commit acknowledgement.
#[derive(Debug, Clone, PartialEq)]
pub struct MOSDRepOpReply {
    pub map_epoch: u32,
    pub min_epoch: u32,
    pub trace: TraceInfo,
    pub reqid: OsdReqId,
    pub pgid: SpgId,
    pub ack_type: u8,
    pub result: i32,
    pub last_complete_ondisk: Eversion,
    pub from: PgShard,
}
impl MOSDRepOpReply {
    fn enc(&self, e: &mut Encoder) {
        e.u32(self.map_epoch);
        e.u32(self.min_epoch);
        e.encode(&self.trace);
        e.encode(&self.reqid);
        e.encode(&self.pgid);
        e.u8(self.ack_type);
        e.i32(self.result);
        e.encode(&self.last_complete_ondisk);
        e.encode(&self.from);
    }
    fn dec(d: &mut Decoder, _: &Bytes) -> Result<Self, DecodeError> {
        Ok(MOSDRepOpReply {
            map_epoch: d.u32()?,
            min_epoch: d.u32()?,
            trace: d.decode()?,
            reqid: d.decode()?,
            pgid: d.decode()?,
            ack_type: d.u8()?,
            result: d.i32()?,
            last_complete_ondisk: d.decode()?,
            from: d.decode()?,
        })
    }
}
message!(
    MOSDRepOpReply,
    rep_msg::REPOPREPLY,
    2,
    1,
    "osd_repop_reply",
    prio::HIGH
);

/// `MOSDPGNotify2` (130, v1).
#[derive(Debug, Clone, PartialEq)]
pub struct MOSDPGNotify2 {
    pub spgid: SpgId,
    pub notify: PgNotify,
}
impl MOSDPGNotify2 {
    fn enc(&self, e: &mut Encoder) {
        e.encode(&self.spgid);
        e.encode(&self.notify);
    }
    fn dec(d: &mut Decoder, _: &Bytes) -> Result<Self, DecodeError> {
        Ok(MOSDPGNotify2 {
            spgid: d.decode()?,
            notify: d.decode()?,
        })
    }
}
message!(MOSDPGNotify2, rep_msg::PG_NOTIFY2, 1, 1, "pg_notify2", prio::HIGH);

/// `MOSDPGQuery2` (131, v1).
#[derive(Debug, Clone, PartialEq)]
pub struct MOSDPGQuery2 {
    pub spgid: SpgId,
    pub query: PgQuery,
}
impl MOSDPGQuery2 {
    fn enc(&self, e: &mut Encoder) {
        e.encode(&self.spgid);
        e.encode(&self.query);
    }
    fn dec(d: &mut Decoder, _: &Bytes) -> Result<Self, DecodeError> {
        Ok(MOSDPGQuery2 {
            spgid: d.decode()?,
            query: d.decode()?,
        })
    }
}
message!(MOSDPGQuery2, rep_msg::PG_QUERY2, 1, 1, "pg_query2", prio::HIGH);

/// `MOSDPGInfo2` (132, v1): activation info from the primary, or a replica's info, with lease piggybacks.
#[derive(Debug, Clone, PartialEq)]
pub struct MOSDPGInfo2 {
    pub spgid: SpgId,
    pub epoch_sent: u32,
    pub min_epoch: u32,
    pub info: PgInfo,
    pub lease: Option<PgLease>,
    pub lease_ack: Option<PgLeaseAck>,
}
impl MOSDPGInfo2 {
    fn enc(&self, e: &mut Encoder) {
        e.encode(&self.spgid);
        e.u32(self.epoch_sent);
        e.u32(self.min_epoch);
        e.encode(&self.info);
        e.encode(&self.lease);
        e.encode(&self.lease_ack);
    }
    fn dec(d: &mut Decoder, _: &Bytes) -> Result<Self, DecodeError> {
        Ok(MOSDPGInfo2 {
            spgid: d.decode()?,
            epoch_sent: d.u32()?,
            min_epoch: d.u32()?,
            info: d.decode()?,
            lease: d.decode()?,
            lease_ack: d.decode()?,
        })
    }
}
message!(MOSDPGInfo2, rep_msg::PG_INFO2, 1, 1, "pg_info2", prio::HIGH);

/// `MOSDPGLog` (83, v6): a log (and missing set) for a peer: the primary's authoritative log for a replica, or a
/// replica's log for the primary.
#[derive(Debug, Clone, PartialEq)]
pub struct MOSDPGLog {
    pub epoch: u32,
    pub info: PgInfo,
    pub log: PgLog,
    pub missing: PgMissing,
    pub query_epoch: u32,
    pub past_intervals: PastIntervals,
    pub to: ShardId,
    pub from: ShardId,
    pub lease: Option<PgLease>,
}
impl MOSDPGLog {
    pub fn spgid(&self) -> SpgId {
        SpgId::new(self.info.pgid, self.to)
    }
    fn enc(&self, e: &mut Encoder) {
        e.u32(self.epoch);
        e.encode(&self.info);
        e.encode(&self.log);
        e.encode(&self.missing);
        e.u32(self.query_epoch);
        e.encode(&self.past_intervals);
        e.encode(&self.to);
        e.encode(&self.from);
        e.encode(&self.lease);
    }
    fn dec(d: &mut Decoder, _: &Bytes) -> Result<Self, DecodeError> {
        Ok(MOSDPGLog {
            epoch: d.u32()?,
            info: d.decode()?,
            log: d.decode()?,
            missing: d.decode()?,
            query_epoch: d.u32()?,
            past_intervals: d.decode()?,
            to: d.decode()?,
            from: d.decode()?,
            lease: d.decode()?,
        })
    }
}
message!(MOSDPGLog, rep_msg::PG_LOG, 6, 5, "PGlog", prio::HIGH);

/// `MOSDPGLease` (133, v1).
#[derive(Debug, Clone, PartialEq)]
pub struct MOSDPGLease {
    pub epoch: u32,
    pub spgid: SpgId,
    pub lease: PgLease,
}
impl MOSDPGLease {
    fn enc(&self, e: &mut Encoder) {
        e.u32(self.epoch);
        e.encode(&self.spgid);
        e.encode(&self.lease);
    }
    fn dec(d: &mut Decoder, _: &Bytes) -> Result<Self, DecodeError> {
        Ok(MOSDPGLease {
            epoch: d.u32()?,
            spgid: d.decode()?,
            lease: d.decode()?,
        })
    }
}
message!(MOSDPGLease, rep_msg::PG_LEASE, 1, 1, "pg_lease", prio::DEFAULT);

/// `MOSDPGLeaseAck` (134, v1).
#[derive(Debug, Clone, PartialEq)]
pub struct MOSDPGLeaseAck {
    pub epoch: u32,
    pub spgid: SpgId,
    pub lease_ack: PgLeaseAck,
}
impl MOSDPGLeaseAck {
    fn enc(&self, e: &mut Encoder) {
        e.u32(self.epoch);
        e.encode(&self.spgid);
        e.encode(&self.lease_ack);
    }
    fn dec(d: &mut Decoder, _: &Bytes) -> Result<Self, DecodeError> {
        Ok(MOSDPGLeaseAck {
            epoch: d.u32()?,
            spgid: d.decode()?,
            lease_ack: d.decode()?,
        })
    }
}
message!(
    MOSDPGLeaseAck,
    rep_msg::PG_LEASE_ACK,
    1,
    1,
    "pg_lease_ack",
    prio::DEFAULT
);

/// `MOSDPGTrim` (86, v2): trim the log up to `trim_to`.
#[derive(Debug, Clone, PartialEq)]
pub struct MOSDPGTrim {
    pub epoch: u32,
    pub pgid: SpgId,
    pub trim_to: Eversion,
}
impl MOSDPGTrim {
    fn enc(&self, e: &mut Encoder) {
        e.u32(self.epoch);
        e.encode(&self.pgid.pgid);
        e.encode(&self.trim_to);
        e.encode(&self.pgid.shard);
    }
    fn dec(d: &mut Decoder, _: &Bytes) -> Result<Self, DecodeError> {
        let epoch = d.u32()?;
        let pg: PgId = d.decode()?;
        let trim_to = d.decode()?;
        let shard = d.decode()?;
        Ok(MOSDPGTrim {
            epoch,
            pgid: SpgId::new(pg, shard),
            trim_to,
        })
    }
}
message!(MOSDPGTrim, rep_msg::PG_TRIM, 2, 2, "pg_trim", prio::DEFAULT);

/// The common tail of push, pull and push-reply messages (none of them carries a trace in Pacific).
/// The body Push, Pull and PushReply share: `pg_t, epoch, vector<op>, cost, shard, from, min_epoch`.
struct RecoveryBody<T> {
    pgid: SpgId,
    map_epoch: u32,
    ops: Vec<T>,
    cost: u64,
    from: PgShard,
    min_epoch: u32,
}

fn enc_recovery<T: Encode>(
    e: &mut Encoder,
    pgid: SpgId,
    map_epoch: u32,
    ops: &[T],
    cost: u64,
    from: PgShard,
    min_epoch: u32,
) {
    e.encode(&pgid.pgid);
    e.u32(map_epoch);
    e.encode(ops);
    e.u64(cost);
    e.encode(&pgid.shard);
    e.encode(&from);
    e.u32(min_epoch);
}

fn dec_recovery<T: Decode>(d: &mut Decoder) -> Result<RecoveryBody<T>, DecodeError> {
    let pg: PgId = d.decode()?;
    let map_epoch = d.u32()?;
    let ops = d.decode()?;
    let cost = d.u64()?;
    let shard = d.decode()?;
    Ok(RecoveryBody {
        pgid: SpgId::new(pg, shard),
        map_epoch,
        ops,
        cost,
        from: d.decode()?,
        min_epoch: d.u32()?,
    })
}

/// `MOSDPGPush` (105, v4): object data pushed to a shard that misses it.
#[derive(Debug, Clone, PartialEq)]
pub struct MOSDPGPush {
    pub from: PgShard,
    pub pgid: SpgId,
    pub map_epoch: u32,
    pub min_epoch: u32,
    pub pushes: Vec<PushOp>,
    pub cost: u64,
    pub is_repair: bool,
}
impl MOSDPGPush {
    fn enc(&self, e: &mut Encoder) {
        enc_recovery(
            e,
            self.pgid,
            self.map_epoch,
            &self.pushes,
            self.cost,
            self.from,
            self.min_epoch,
        );
        e.bool(self.is_repair);
    }
    fn dec(d: &mut Decoder, _: &Bytes) -> Result<Self, DecodeError> {
        let b = dec_recovery(d)?;
        Ok(MOSDPGPush {
            from: b.from,
            pgid: b.pgid,
            map_epoch: b.map_epoch,
            min_epoch: b.min_epoch,
            pushes: b.ops,
            cost: b.cost,
            is_repair: d.bool()?,
        })
    }
}
message!(MOSDPGPush, rep_msg::PG_PUSH, 4, 2, "MOSDPGPush", prio::DEFAULT);

/// `MOSDPGPull` (106, v3). No trace (as in push replies).
#[derive(Debug, Clone, PartialEq)]
pub struct MOSDPGPull {
    pub from: PgShard,
    pub pgid: SpgId,
    pub map_epoch: u32,
    pub min_epoch: u32,
    pub pulls: Vec<PullOp>,
    pub cost: u64,
}
impl MOSDPGPull {
    fn enc(&self, e: &mut Encoder) {
        enc_recovery(
            e,
            self.pgid,
            self.map_epoch,
            &self.pulls,
            self.cost,
            self.from,
            self.min_epoch,
        );
    }
    fn dec(d: &mut Decoder, _: &Bytes) -> Result<Self, DecodeError> {
        let b = dec_recovery(d)?;
        Ok(MOSDPGPull {
            from: b.from,
            pgid: b.pgid,
            map_epoch: b.map_epoch,
            min_epoch: b.min_epoch,
            pulls: b.ops,
            cost: b.cost,
        })
    }
}
message!(MOSDPGPull, rep_msg::PG_PULL, 3, 2, "MOSDPGPull", prio::DEFAULT);

/// `MOSDPGPushReply` (107, v3). Unlike push and pull, it carries no trace.
#[derive(Debug, Clone, PartialEq)]
pub struct MOSDPGPushReply {
    pub from: PgShard,
    pub pgid: SpgId,
    pub map_epoch: u32,
    pub min_epoch: u32,
    pub replies: Vec<PushReplyOp>,
    pub cost: u64,
}
impl MOSDPGPushReply {
    fn enc(&self, e: &mut Encoder) {
        enc_recovery(
            e,
            self.pgid,
            self.map_epoch,
            &self.replies,
            self.cost,
            self.from,
            self.min_epoch,
        );
    }
    fn dec(d: &mut Decoder, _: &Bytes) -> Result<Self, DecodeError> {
        let b = dec_recovery(d)?;
        Ok(MOSDPGPushReply {
            from: b.from,
            pgid: b.pgid,
            map_epoch: b.map_epoch,
            min_epoch: b.min_epoch,
            replies: b.ops,
            cost: b.cost,
        })
    }
}
message!(
    MOSDPGPushReply,
    rep_msg::PG_PUSH_REPLY,
    3,
    2,
    "MOSDPGPushReply",
    prio::DEFAULT
);

/// `MOSDPGScan` ops.
pub mod scan_op {
    pub const GET_DIGEST: u32 = 1;
    pub const DIGEST: u32 = 2;
}

/// `MOSDPGScan` (94, v2): backfill asks a target for the objects in `[begin, end)`; the digest answer travels in
/// the data segment (`map<hobject_t, eversion_t>`), kept raw here.
#[derive(Debug, Clone, PartialEq)]
pub struct MOSDPGScan {
    pub op: u32,
    pub map_epoch: u32,
    pub query_epoch: u32,
    pub from: PgShard,
    pub pgid: SpgId,
    pub begin: HObject,
    pub end: HObject,
    pub data: Bytes,
}
impl MOSDPGScan {
    fn enc(&self, e: &mut Encoder) {
        e.u32(self.op);
        e.u32(self.map_epoch);
        e.u32(self.query_epoch);
        e.encode(&self.pgid.pgid);
        e.encode(&self.begin);
        e.encode(&self.end);
        e.encode(&self.from);
        e.encode(&self.pgid.shard);
    }
    fn data_segment(&self) -> Bytes {
        self.data.clone()
    }
    fn dec(d: &mut Decoder, data: &Bytes) -> Result<Self, DecodeError> {
        let op = d.u32()?;
        let map_epoch = d.u32()?;
        let query_epoch = d.u32()?;
        let pg: PgId = d.decode()?;
        let begin = d.decode()?;
        let end = d.decode()?;
        let from = d.decode()?;
        let shard = d.decode()?;
        Ok(MOSDPGScan {
            op,
            map_epoch,
            query_epoch,
            from,
            pgid: SpgId::new(pg, shard),
            begin,
            end,
            data: data.clone(),
        })
    }
}
message!(MOSDPGScan, rep_msg::PG_SCAN, 2, 2, "pg_scan", prio::DEFAULT);

/// `MOSDPGBackfill` ops.
pub mod backfill_op {
    pub const PROGRESS: u32 = 2;
    pub const FINISH: u32 = 3;
    pub const FINISH_ACK: u32 = 4;
}

/// `MOSDPGBackfill` (95, v3): backfill progress (`last_backfill`) and stats for a target.
#[derive(Debug, Clone, PartialEq)]
pub struct MOSDPGBackfill {
    pub op: u32,
    pub map_epoch: u32,
    pub query_epoch: u32,
    pub pgid: SpgId,
    pub last_backfill: HObject,
    pub stats: PgStat,
}
impl MOSDPGBackfill {
    fn enc(&self, e: &mut Encoder) {
        e.u32(self.op);
        e.u32(self.map_epoch);
        e.u32(self.query_epoch);
        e.encode(&self.pgid.pgid);
        e.encode(&self.last_backfill);
        // v1 readers take the stat collection alone; v3 readers skip it and read the pg_stat_t after it
        e.encode(&ObjectStatCollection {
            sum: self.stats.stats.sum,
        });
        e.encode(&self.stats);
        e.encode(&self.pgid.shard);
    }
    fn dec(d: &mut Decoder, _: &Bytes) -> Result<Self, DecodeError> {
        let op = d.u32()?;
        let map_epoch = d.u32()?;
        let query_epoch = d.u32()?;
        let pg: PgId = d.decode()?;
        let last_backfill = d.decode()?;
        let _compat: ObjectStatCollection = d.decode()?;
        let stats = d.decode()?;
        let shard = d.decode()?;
        Ok(MOSDPGBackfill {
            op,
            map_epoch,
            query_epoch,
            pgid: SpgId::new(pg, shard),
            last_backfill,
            stats,
        })
    }
}
message!(
    MOSDPGBackfill,
    rep_msg::PG_BACKFILL,
    3,
    3,
    "pg_backfill",
    prio::DEFAULT
);

/// `MOSDPGBackfillRemove` (96, v1): objects a backfill target must delete.
#[derive(Debug, Clone, PartialEq)]
pub struct MOSDPGBackfillRemove {
    pub pgid: SpgId,
    pub map_epoch: u32,
    pub ls: Vec<(HObject, Eversion)>,
}
impl MOSDPGBackfillRemove {
    fn enc(&self, e: &mut Encoder) {
        e.encode(&self.pgid);
        e.u32(self.map_epoch);
        e.encode(&self.ls);
    }
    fn dec(d: &mut Decoder, _: &Bytes) -> Result<Self, DecodeError> {
        Ok(MOSDPGBackfillRemove {
            pgid: d.decode()?,
            map_epoch: d.u32()?,
            ls: d.decode()?,
        })
    }
}
message!(
    MOSDPGBackfillRemove,
    rep_msg::PG_BACKFILL_REMOVE,
    1,
    1,
    "backfill_remove",
    prio::DEFAULT
);

/// `MOSDPGRecoveryDelete` (118, v2): delete objects whose newest log entry is a delete.
#[derive(Debug, Clone, PartialEq)]
pub struct MOSDPGRecoveryDelete {
    pub from: PgShard,
    pub pgid: SpgId,
    pub map_epoch: u32,
    pub min_epoch: u32,
    pub cost: u64,
    pub objects: Vec<(HObject, Eversion)>,
}
impl MOSDPGRecoveryDelete {
    fn enc(&self, e: &mut Encoder) {
        e.encode(&self.from);
        e.encode(&self.pgid);
        e.u32(self.map_epoch);
        e.u32(self.min_epoch);
        e.u64(self.cost);
        e.encode(&self.objects);
    }
    fn dec(d: &mut Decoder, _: &Bytes) -> Result<Self, DecodeError> {
        Ok(MOSDPGRecoveryDelete {
            from: d.decode()?,
            pgid: d.decode()?,
            map_epoch: d.u32()?,
            min_epoch: d.u32()?,
            cost: d.u64()?,
            objects: d.decode()?,
        })
    }
}
message!(
    MOSDPGRecoveryDelete,
    rep_msg::PG_RECOVERY_DELETE,
    2,
    1,
    "recovery_delete",
    prio::DEFAULT
);

/// `MOSDPGRecoveryDeleteReply` (119, v2).
#[derive(Debug, Clone, PartialEq)]
pub struct MOSDPGRecoveryDeleteReply {
    pub from: PgShard,
    pub pgid: SpgId,
    pub map_epoch: u32,
    pub min_epoch: u32,
    pub objects: Vec<(HObject, Eversion)>,
}
impl MOSDPGRecoveryDeleteReply {
    fn enc(&self, e: &mut Encoder) {
        e.encode(&self.pgid.pgid);
        e.u32(self.map_epoch);
        e.u32(self.min_epoch);
        e.encode(&self.objects);
        e.encode(&self.pgid.shard);
        e.encode(&self.from);
    }
    fn dec(d: &mut Decoder, _: &Bytes) -> Result<Self, DecodeError> {
        let pg: PgId = d.decode()?;
        let map_epoch = d.u32()?;
        let min_epoch = d.u32()?;
        let objects = d.decode()?;
        let shard = d.decode()?;
        Ok(MOSDPGRecoveryDeleteReply {
            pgid: SpgId::new(pg, shard),
            map_epoch,
            min_epoch,
            objects,
            from: d.decode()?,
        })
    }
}
message!(
    MOSDPGRecoveryDeleteReply,
    rep_msg::PG_RECOVERY_DELETE_REPLY,
    2,
    1,
    "recovery_delete_reply",
    prio::DEFAULT
);

/// `MOSDPGUpdateLogMissing` (114, v3): log entries without data (errors, deletes) for the replicas.
#[derive(Debug, Clone, PartialEq)]
pub struct MOSDPGUpdateLogMissing {
    pub map_epoch: u32,
    pub pgid: SpgId,
    pub from: ShardId,
    pub rep_tid: u64,
    pub entries: Vec<PgLogEntry>,
    pub min_epoch: u32,
    pub pg_trim_to: Eversion,
    pub pg_roll_forward_to: Eversion,
}
impl MOSDPGUpdateLogMissing {
    fn enc(&self, e: &mut Encoder) {
        e.u32(self.map_epoch);
        e.encode(&self.pgid);
        e.encode(&self.from);
        e.u64(self.rep_tid);
        e.encode(&self.entries);
        e.u32(self.min_epoch);
        e.encode(&self.pg_trim_to);
        e.encode(&self.pg_roll_forward_to);
    }
    fn dec(d: &mut Decoder, _: &Bytes) -> Result<Self, DecodeError> {
        Ok(MOSDPGUpdateLogMissing {
            map_epoch: d.u32()?,
            pgid: d.decode()?,
            from: d.decode()?,
            rep_tid: d.u64()?,
            entries: d.decode()?,
            min_epoch: d.u32()?,
            pg_trim_to: d.decode()?,
            pg_roll_forward_to: d.decode()?,
        })
    }
}
message!(
    MOSDPGUpdateLogMissing,
    rep_msg::PG_UPDATE_LOG_MISSING,
    3,
    1,
    "PGUpdateLogMissing",
    prio::DEFAULT
);

/// `MOSDPGUpdateLogMissingReply` (115, v3).
#[derive(Debug, Clone, PartialEq)]
pub struct MOSDPGUpdateLogMissingReply {
    pub map_epoch: u32,
    pub pgid: SpgId,
    /// Only the replier's shard travels (one byte); its OSD id is the sender's (see
    /// [`MOSDPGUpdateLogMissingReply::from_shard`]). Capture-verified.
    pub from: ShardId,
    pub rep_tid: u64,
    pub min_epoch: u32,
    pub last_complete_ondisk: Eversion,
}
impl MOSDPGUpdateLogMissingReply {
    /// The replier as a `pg_shard_t`, given the OSD id of the connection it came from.
    pub fn from_shard(&self, sender_osd: i32) -> PgShard {
        PgShard::new(sender_osd, self.from)
    }
    fn enc(&self, e: &mut Encoder) {
        e.u32(self.map_epoch);
        e.encode(&self.pgid);
        e.encode(&self.from);
        e.u64(self.rep_tid);
        e.u32(self.min_epoch);
        e.encode(&self.last_complete_ondisk);
    }
    fn dec(d: &mut Decoder, _: &Bytes) -> Result<Self, DecodeError> {
        Ok(MOSDPGUpdateLogMissingReply {
            map_epoch: d.u32()?,
            pgid: d.decode()?,
            from: d.decode()?,
            rep_tid: d.u64()?,
            min_epoch: d.u32()?,
            last_complete_ondisk: d.decode()?,
        })
    }
}
message!(
    MOSDPGUpdateLogMissingReply,
    rep_msg::PG_UPDATE_LOG_MISSING_REPLY,
    3,
    1,
    "PGUpdateLogMissingReply",
    prio::HIGH
);

no_data!(
    MOSDRepOpReply,
    MOSDPGNotify2,
    MOSDPGQuery2,
    MOSDPGInfo2,
    MOSDPGLog,
    MOSDPGLease,
    MOSDPGLeaseAck,
    MOSDPGTrim,
    MOSDPGPush,
    MOSDPGPull,
    MOSDPGPushReply,
    MOSDPGBackfill,
    MOSDPGBackfillRemove,
    MOSDPGRecoveryDelete,
    MOSDPGRecoveryDeleteReply,
    MOSDPGUpdateLogMissing,
    MOSDPGUpdateLogMissingReply
);

/// `MOSDPGNotify` (80, v7/6), the legacy batch form Pacific still sends (e.g. answering a query for a PG it
/// does not have).
#[derive(Debug, Clone, PartialEq)]
pub struct MOSDPGNotify {
    pub epoch: u32,
    pub pg_list: Vec<PgNotify>,
}
impl MOSDPGNotify {
    fn enc(&self, e: &mut Encoder) {
        e.u32(self.epoch);
        e.encode(&self.pg_list);
    }
    fn dec(d: &mut Decoder, _: &Bytes) -> Result<Self, DecodeError> {
        Ok(MOSDPGNotify {
            epoch: d.u32()?,
            pg_list: d.decode()?,
        })
    }
}
message!(MOSDPGNotify, rep_msg::PG_NOTIFY, 7, 6, "PGnot", prio::HIGH);

/// `MOSDPGRemove` (84, v3): delete these PG shards (strays no longer needed).
#[derive(Debug, Clone, PartialEq)]
pub struct MOSDPGRemove {
    pub epoch: u32,
    pub pg_list: Vec<SpgId>,
}
impl MOSDPGRemove {
    fn enc(&self, e: &mut Encoder) {
        e.u32(self.epoch);
        e.encode(&self.pg_list);
    }
    fn dec(d: &mut Decoder, _: &Bytes) -> Result<Self, DecodeError> {
        Ok(MOSDPGRemove {
            epoch: d.u32()?,
            pg_list: d.decode()?,
        })
    }
}
message!(MOSDPGRemove, rep_msg::PG_REMOVE, 3, 3, "PGrm", prio::DEFAULT);

/// `MRecoveryReserve` types.
pub mod recovery_reserve {
    pub const REQUEST: i32 = 0;
    pub const GRANT: i32 = 1;
    pub const RELEASE: i32 = 2;
    pub const REVOKE: i32 = 3;
}

/// `MRecoveryReserve` (150, v3): the primary reserves a recovery slot on each replica before recovering.
#[derive(Debug, Clone, PartialEq)]
pub struct MRecoveryReserve {
    pub pgid: SpgId,
    pub query_epoch: u32,
    pub reserve_type: i32,
    pub priority: u32,
}
impl MRecoveryReserve {
    fn enc(&self, e: &mut Encoder) {
        e.encode(&self.pgid.pgid);
        e.u32(self.query_epoch);
        e.i32(self.reserve_type);
        e.encode(&self.pgid.shard);
        e.u32(self.priority);
    }
    fn dec(d: &mut Decoder, _: &Bytes) -> Result<Self, DecodeError> {
        let pg: PgId = d.decode()?;
        let query_epoch = d.u32()?;
        let reserve_type = d.i32()?;
        let shard = d.decode()?;
        Ok(MRecoveryReserve {
            pgid: SpgId::new(pg, shard),
            query_epoch,
            reserve_type,
            priority: d.u32()?,
        })
    }
}
message!(
    MRecoveryReserve,
    rep_msg::RECOVERY_RESERVE,
    3,
    2,
    "MRecoveryReserve",
    prio::DEFAULT
);

/// `MBackfillReserve` types.
pub mod backfill_reserve {
    pub const REQUEST: i32 = 0;
    pub const GRANT: i32 = 1;
    pub const REJECT_TOOFULL: i32 = 2;
    pub const RELEASE: i32 = 3;
    pub const REVOKE_TOOFULL: i32 = 4;
    pub const REVOKE: i32 = 5;
}

/// `MBackfillReserve` (99, v5): the primary reserves a backfill slot on each target. Not in the capture yet.
#[derive(Debug, Clone, PartialEq)]
pub struct MBackfillReserve {
    pub pgid: SpgId,
    pub query_epoch: u32,
    pub reserve_type: i32,
    pub priority: u32,
    pub primary_num_bytes: i64,
    pub shard_num_bytes: i64,
}
impl MBackfillReserve {
    fn enc(&self, e: &mut Encoder) {
        e.encode(&self.pgid.pgid);
        e.u32(self.query_epoch);
        e.i32(self.reserve_type);
        e.u32(self.priority);
        e.encode(&self.pgid.shard);
        e.i64(self.primary_num_bytes);
        e.i64(self.shard_num_bytes);
    }
    fn dec(d: &mut Decoder, _: &Bytes) -> Result<Self, DecodeError> {
        let pg: PgId = d.decode()?;
        let query_epoch = d.u32()?;
        let reserve_type = d.i32()?;
        let priority = d.u32()?;
        let shard = d.decode()?;
        Ok(MBackfillReserve {
            pgid: SpgId::new(pg, shard),
            query_epoch,
            reserve_type,
            priority,
            primary_num_bytes: d.i64()?,
            shard_num_bytes: d.i64()?,
        })
    }
}
message!(
    MBackfillReserve,
    rep_msg::BACKFILL_RESERVE,
    5,
    4,
    "MBackfillReserve",
    prio::DEFAULT
);

no_data!(MOSDPGNotify, MOSDPGRemove, MRecoveryReserve, MBackfillReserve);
