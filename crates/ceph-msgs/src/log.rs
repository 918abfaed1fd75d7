// SPDX-License-Identifier: LGPL-3.0-or-later
//! The cluster log (`MLog` 52, `MLogAck` 53: a daemon's `clog` entries to the monitor and their acknowledgement)
//! and commands to the mgr (`MMgrCommand` 0x709 / `MMgrCommandReply` 0x70a, e.g. `ceph pg stat`), in the versions
//! Ceph 16.2.15 sends. Checked byte for byte against real Pacific traffic (tests/capture_classic.rs).

use bytes::Bytes;
use denc::{
    Decode, DecodeError, Decoder, Encode, Encoder, EntityAddrvec, EntityName, EntityNameT, Utime, Uuid,
};

use crate::{CephMessage, PaxosHeader, msg_type, prio};

/// `clog_type` values (`LogEntry::prio`).
pub mod clog {
    pub const DEBUG: u16 = 0;
    pub const INFO: u16 = 1;
    pub const SEC: u16 = 2;
    pub const WARN: u16 = 3;
    pub const ERROR: u16 = 4;
}

/// `LogEntry` (v5/5): one cluster log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    /// The daemon's auth name (`osd.0`).
    pub name: EntityName,
    /// Its messenger name (`osd.0` as entity_name_t).
    pub rank: EntityNameT,
    pub addrs: EntityAddrvec,
    pub stamp: Utime,
    /// Per-daemon sequence number; the monitor acknowledges up to it.
    pub seq: u64,
    /// One of [`clog`].
    pub prio: u16,
    pub msg: String,
    /// `cluster`, `audit`, …
    pub channel: String,
}

impl Encode for LogEntry {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(5, 5, |e| {
            e.encode(&self.name);
            e.encode(&self.rank);
            e.encode(&self.addrs);
            e.encode(&self.stamp);
            e.u64(self.seq);
            e.u16(self.prio);
            e.string(&self.msg);
            e.string(&self.channel);
        });
    }
}

impl Decode for LogEntry {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        // v5 (Nautilus) replaced the single address by an address vector; older ones are not read.
        let (_, mut d) = d.start_struct_min("LogEntry", 5, 5)?;
        Ok(LogEntry {
            name: d.decode()?,
            rank: d.decode()?,
            addrs: d.decode()?,
            stamp: d.decode()?,
            seq: d.u64()?,
            prio: d.u16()?,
            msg: d.string()?,
            channel: d.string()?,
        })
    }
}

/// `MLog` (52, v1): cluster log entries for the monitor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MLog {
    pub paxos: PaxosHeader,
    pub fsid: Uuid,
    pub entries: Vec<LogEntry>,
}

impl CephMessage for MLog {
    const TYPE: u16 = msg_type::LOG;
    const HEAD_VERSION: u16 = 1;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "log";

    fn encode_front(&self, e: &mut Encoder) {
        self.paxos.encode(e);
        e.encode(&self.fsid);
        e.encode(&self.entries);
    }
    fn decode_front(_v: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        Ok(MLog {
            paxos: PaxosHeader::decode(d)?,
            fsid: d.decode()?,
            entries: d.decode()?,
        })
    }
}

/// `MLogAck` (53, v1): the monitor has the entries up to `last` of `channel` (empty: all channels).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MLogAck {
    pub fsid: Uuid,
    pub last: u64,
    pub channel: String,
}

impl CephMessage for MLogAck {
    const TYPE: u16 = msg_type::LOG_ACK;
    const HEAD_VERSION: u16 = 1;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "log_ack";
    const PRIORITY: u16 = prio::HIGH;

    fn encode_front(&self, e: &mut Encoder) {
        e.encode(&self.fsid);
        e.u64(self.last);
        e.string(&self.channel);
    }
    fn decode_front(_v: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        Ok(MLogAck {
            fsid: d.decode()?,
            last: d.u64()?,
            // Absent in the oldest senders.
            channel: if d.remaining() > 0 {
                d.string()?
            } else {
                String::new()
            },
        })
    }
}

/// `MMgrCommand` (0x709, v1): a command (JSON strings) for the mgr, with input in the data segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MMgrCommand {
    pub fsid: Uuid,
    pub cmd: Vec<String>,
    pub inbl: Bytes,
}

impl CephMessage for MMgrCommand {
    const TYPE: u16 = msg_type::MGR_COMMAND;
    const HEAD_VERSION: u16 = 1;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "mgr_command";

    fn encode_front(&self, e: &mut Encoder) {
        e.encode(&self.fsid);
        e.encode(&self.cmd);
    }
    fn data(&self) -> Bytes {
        self.inbl.clone()
    }
    fn decode_front(_v: u16, d: &mut Decoder, data: &Bytes) -> Result<Self, DecodeError> {
        Ok(MMgrCommand {
            fsid: d.decode()?,
            cmd: d.decode()?,
            inbl: data.clone(),
        })
    }
}

/// `MMgrCommandReply` (0x70a, v1): result code, status string, output in the data segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MMgrCommandReply {
    pub r: i32,
    pub rs: String,
    pub outbl: Bytes,
}

impl CephMessage for MMgrCommandReply {
    const TYPE: u16 = msg_type::MGR_COMMAND_REPLY;
    const HEAD_VERSION: u16 = 1;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "mgr_command_reply";

    fn encode_front(&self, e: &mut Encoder) {
        e.i32(self.r);
        e.string(&self.rs);
    }
    fn data(&self) -> Bytes {
        self.outbl.clone()
    }
    fn decode_front(_v: u16, d: &mut Decoder, data: &Bytes) -> Result<Self, DecodeError> {
        Ok(MMgrCommandReply {
            r: d.i32()?,
            rs: d.string()?,
            outbl: data.clone(),
        })
    }
}
