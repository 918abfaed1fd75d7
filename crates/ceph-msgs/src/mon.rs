// SPDX-License-Identifier: LGPL-3.0-or-later
//! Messages between a client and a monitor: maps, subscriptions, version queries, commands, config, auth.

use std::collections::BTreeMap;

use bytes::Bytes;
use denc::{DecodeError, Decoder, Encoder};

use crate::{CephMessage, msg_type, prio};

/// The prefix of mon-bound "paxos service" messages (`PaxosServiceMessage`): the map version the sender has, and
/// the forwarding mon's rank and tid (−1 and 0 from clients).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PaxosHeader {
    pub version: u64,
    pub session_mon: i16,
    pub session_mon_tid: u64,
}

impl Default for PaxosHeader {
    fn default() -> Self {
        PaxosHeader {
            version: 0,
            session_mon: -1,
            session_mon_tid: 0,
        }
    }
}

impl PaxosHeader {
    pub fn encode(&self, e: &mut Encoder) {
        e.u64(self.version);
        e.i16(self.session_mon);
        e.u64(self.session_mon_tid);
    }
    pub fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        Ok(PaxosHeader {
            version: d.u64()?,
            session_mon: d.i16()?,
            session_mon_tid: d.u64()?,
        })
    }
}

/// `MMonMap` (4): the encoded MonMap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MMonMap {
    pub monmap: Bytes,
}

impl CephMessage for MMonMap {
    const TYPE: u16 = msg_type::MON_MAP;
    const HEAD_VERSION: u16 = 1;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "mon_map";
    const PRIORITY: u16 = prio::HIGH;

    fn encode_front(&self, e: &mut Encoder) {
        e.bytes(&self.monmap);
    }
    fn decode_front(_v: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        Ok(MMonMap {
            monmap: d.bufferlist()?,
        })
    }
}

/// `MMonGetMap` (5): ask for the current monmap (empty payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MMonGetMap;

impl CephMessage for MMonGetMap {
    const TYPE: u16 = msg_type::MON_GET_MAP;
    const HEAD_VERSION: u16 = 1;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "mon_getmap";

    fn encode_front(&self, _e: &mut Encoder) {}
    fn decode_front(_v: u16, _d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        Ok(MMonGetMap)
    }
}

/// `CEPH_SUBSCRIBE_ONETIME`: send what is asked for once, then drop the subscription.
pub const SUBSCRIBE_ONETIME: u8 = 1;

/// One subscription (`ceph_mon_subscribe_item`): send maps from epoch `start` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SubscribeItem {
    pub start: u64,
    pub flags: u8,
}

/// `MMonSubscribe` (15, v3): what to send us (`monmap`, `osdmap`, `config`, `mgrmap`, ...) and from which epoch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MMonSubscribe {
    pub what: BTreeMap<String, SubscribeItem>,
    pub hostname: String,
}

impl CephMessage for MMonSubscribe {
    const TYPE: u16 = msg_type::MON_SUBSCRIBE;
    const HEAD_VERSION: u16 = 3;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "mon_subscribe";

    fn encode_front(&self, e: &mut Encoder) {
        e.length(self.what.len());
        for (k, v) in &self.what {
            e.string(k);
            e.u64(v.start);
            e.u8(v.flags);
        }
        e.string(&self.hostname);
    }
    fn decode_front(version: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        if version < 2 {
            // v1 carried a different item layout (have/onetime); no Pacific-era peer sends it.
            return Err(DecodeError::invalid(
                "mon_subscribe",
                format!("version {version} is not supported"),
            ));
        }
        // Each item is at least a 4-byte key length, 8-byte start and a flag byte.
        let n = d.length("mon_subscribe map", 13)?;
        let mut what = BTreeMap::new();
        for _ in 0..n {
            let k = d.string()?;
            let item = SubscribeItem {
                start: d.u64()?,
                flags: d.u8()?,
            };
            what.insert(k, item);
        }
        let hostname = if version >= 3 { d.string()? } else { String::new() };
        Ok(MMonSubscribe { what, hostname })
    }
}

/// `MMonSubscribeAck` (16): renewal interval and fsid. Legacy: Pacific mons do not send it to Pacific clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MMonSubscribeAck {
    pub interval_s: u32,
    pub fsid: [u8; 16],
}

impl CephMessage for MMonSubscribeAck {
    const TYPE: u16 = msg_type::MON_SUBSCRIBE_ACK;
    const HEAD_VERSION: u16 = 1;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "mon_subscribe_ack";

    fn encode_front(&self, e: &mut Encoder) {
        e.u32(self.interval_s);
        e.raw(&self.fsid);
    }
    fn decode_front(_v: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        Ok(MMonSubscribeAck {
            interval_s: d.u32()?,
            fsid: d.take_array()?,
        })
    }
}

/// `MMonGetVersion` (19): ask for the newest (and oldest) version of a map (`osdmap`, `mdsmap`, `monmap`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MMonGetVersion {
    /// Matches the reply to the request (MonClient numbers them from 1).
    pub handle: u64,
    pub what: String,
}

impl CephMessage for MMonGetVersion {
    const TYPE: u16 = msg_type::MON_GET_VERSION;
    const HEAD_VERSION: u16 = 1;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "mon_get_version";

    fn encode_front(&self, e: &mut Encoder) {
        e.u64(self.handle);
        e.string(&self.what);
    }
    fn decode_front(_v: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        Ok(MMonGetVersion {
            handle: d.u64()?,
            what: d.string()?,
        })
    }
}

/// `MMonGetVersionReply` (20, v2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MMonGetVersionReply {
    pub handle: u64,
    pub version: u64,
    pub oldest_version: u64,
}

impl CephMessage for MMonGetVersionReply {
    const TYPE: u16 = msg_type::MON_GET_VERSION_REPLY;
    const HEAD_VERSION: u16 = 2;
    const COMPAT_VERSION: u16 = 2;
    const NAME: &'static str = "mon_get_version_reply";
    const PRIORITY: u16 = prio::HIGH;

    fn encode_front(&self, e: &mut Encoder) {
        e.u64(self.handle);
        e.u64(self.version);
        e.u64(self.oldest_version);
    }
    fn decode_front(version: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        let handle = d.u64()?;
        let v = d.u64()?;
        let oldest_version = if version >= 2 { d.u64()? } else { 0 };
        Ok(MMonGetVersionReply {
            handle,
            version: v,
            oldest_version,
        })
    }
}

/// `MMonCommand` (50): a command as a vector of strings (in practice one JSON object), with input bytes in the
/// data segment. The reply is matched by the header tid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MMonCommand {
    pub paxos: PaxosHeader,
    pub fsid: [u8; 16],
    pub cmd: Vec<String>,
    pub inbl: Bytes,
}

impl CephMessage for MMonCommand {
    const TYPE: u16 = msg_type::MON_COMMAND;
    const HEAD_VERSION: u16 = 1;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "mon_command";

    fn encode_front(&self, e: &mut Encoder) {
        self.paxos.encode(e);
        e.raw(&self.fsid);
        e.encode(&self.cmd);
    }
    fn data(&self) -> Bytes {
        self.inbl.clone()
    }
    fn decode_front(_v: u16, d: &mut Decoder, data: &Bytes) -> Result<Self, DecodeError> {
        Ok(MMonCommand {
            paxos: PaxosHeader::decode(d)?,
            fsid: d.take_array()?,
            cmd: d.decode()?,
            inbl: data.clone(),
        })
    }
}

/// `MMonCommandAck` (51): return code, status string (`outs`) and output bytes (`outbl`, the data segment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MMonCommandAck {
    pub paxos: PaxosHeader,
    pub r: i32,
    pub rs: String,
    pub cmd: Vec<String>,
    pub outbl: Bytes,
}

impl CephMessage for MMonCommandAck {
    const TYPE: u16 = msg_type::MON_COMMAND_ACK;
    const HEAD_VERSION: u16 = 1;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "mon_command_ack";
    const PRIORITY: u16 = prio::HIGH;

    fn encode_front(&self, e: &mut Encoder) {
        self.paxos.encode(e);
        e.i32(self.r);
        e.string(&self.rs);
        e.encode(&self.cmd);
    }
    fn data(&self) -> Bytes {
        self.outbl.clone()
    }
    fn decode_front(_v: u16, d: &mut Decoder, data: &Bytes) -> Result<Self, DecodeError> {
        let paxos = PaxosHeader::decode(d)?;
        let r = d.i32()?;
        // The status string is free text; a mon may put non-UTF-8 bytes in it, which must not fail the command.
        let rs_bytes = d.bufferlist()?;
        Ok(MMonCommandAck {
            paxos,
            r,
            rs: String::from_utf8_lossy(&rs_bytes).into_owned(),
            cmd: d.decode()?,
            outbl: data.clone(),
        })
    }
}

/// `MConfig` (62): the centralized config options that apply to us.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MConfig {
    pub config: BTreeMap<String, String>,
}

impl CephMessage for MConfig {
    const TYPE: u16 = msg_type::CONFIG;
    const HEAD_VERSION: u16 = 1;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "config";
    const PRIORITY: u16 = prio::HIGH;

    fn encode_front(&self, e: &mut Encoder) {
        e.encode(&self.config);
    }
    fn decode_front(_v: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        Ok(MConfig { config: d.decode()? })
    }
}

/// `MAuth` (17): an auth request over an established session (ticket renewal, rotating keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MAuth {
    pub paxos: PaxosHeader,
    pub protocol: u32,
    pub auth_payload: Bytes,
    pub monmap_epoch: u32,
}

impl CephMessage for MAuth {
    const TYPE: u16 = msg_type::AUTH;
    const HEAD_VERSION: u16 = 1;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "auth";

    fn encode_front(&self, e: &mut Encoder) {
        self.paxos.encode(e);
        e.u32(self.protocol);
        e.bytes(&self.auth_payload);
        e.u32(self.monmap_epoch);
    }
    fn decode_front(_v: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        let paxos = PaxosHeader::decode(d)?;
        let protocol = d.u32()?;
        let auth_payload = d.bufferlist()?;
        // Old senders stopped before the monmap epoch.
        let monmap_epoch = if d.is_empty() { 0 } else { d.u32()? };
        Ok(MAuth {
            paxos,
            protocol,
            auth_payload,
            monmap_epoch,
        })
    }
}

/// `MAuthReply` (18).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MAuthReply {
    pub protocol: u32,
    pub result: i32,
    pub global_id: u64,
    pub result_bl: Bytes,
    pub result_msg: String,
}

impl CephMessage for MAuthReply {
    const TYPE: u16 = msg_type::AUTH_REPLY;
    const HEAD_VERSION: u16 = 1;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "auth_reply";
    const PRIORITY: u16 = prio::HIGH;

    fn encode_front(&self, e: &mut Encoder) {
        e.u32(self.protocol);
        e.i32(self.result);
        e.u64(self.global_id);
        e.bytes(&self.result_bl);
        e.string(&self.result_msg);
    }
    fn decode_front(_v: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        let protocol = d.u32()?;
        let result = d.i32()?;
        let global_id = d.u64()?;
        let result_bl = d.bufferlist()?;
        let msg = d.bufferlist()?;
        Ok(MAuthReply {
            protocol,
            result,
            global_id,
            result_bl,
            result_msg: String::from_utf8_lossy(&msg).into_owned(),
        })
    }
}
