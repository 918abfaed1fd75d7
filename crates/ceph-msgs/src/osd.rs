// SPDX-License-Identifier: LGPL-3.0-or-later
//! Messages an OSD daemon exchanges with the monitors and the manager (Pacific 16.2.15 versions): boot, alive,
//! beacon, mark-me-down, PG created, PG stats, and the mgr session (open, configure, report).
//!
//! Embedded OSD structs (OSDSuperblock, pg_stat_t, osd_stat_t, store_statfs_t) are versioned Ceph structs; they
//! are carried here as their exact encoded bytes (the `osd-types` crate gives them meaning), so this crate stays
//! free of OSD types. Each blob is checked to be one complete versioned struct when decoding.

use std::collections::BTreeMap;

use bytes::Bytes;
use denc::{Decode, DecodeError, Decoder, Encode, Encoder, EntityAddrvec, PgId, SpgId, Utime, Uuid};
use osd_types::past_intervals::PastIntervals;
use osd_types::pg_info::PgHistory;

use crate::{CephMessage, PaxosHeader, prio};

/// Message type numbers of this module (`MSG_*` in Message.h).
pub mod osd_msg {
    pub const OSD_PING: u16 = 70;
    pub const OSD_BOOT: u16 = 71;
    pub const OSD_FAILURE: u16 = 72;
    pub const OSD_ALIVE: u16 = 73;
    pub const OSD_MARK_ME_DOWN: u16 = 74;
    pub const OSD_FULL: u16 = 75;
    pub const OSD_PGTEMP: u16 = 78;
    pub const OSD_BEACON: u16 = 79;
    pub const PGSTATS: u16 = 87;
    pub const PGSTATSACK: u16 = 88;
    pub const OSD_PG_CREATED: u16 = 116;
    pub const OSD_PG_CREATE2: u16 = 120;
    pub const OSD_SCRUB2: u16 = 121;
    pub const OSD_FORCE_RECOVERY: u16 = 151;
    pub const MGR_OPEN: u16 = 0x700;
    pub const MGR_CONFIGURE: u16 = 0x701;
    pub const MGR_REPORT: u16 = 0x702;
    pub const MGR_CLOSE: u16 = 0x708;
    pub const COMMAND: u16 = 97;
    pub const COMMAND_REPLY: u16 = 98;
}

/// One complete versioned struct (`u8 v, u8 compat, le32 len, body`) taken as raw bytes.
pub fn take_struct(d: &mut Decoder) -> Result<Bytes, DecodeError> {
    let head = d.peek_rest();
    if head.len() < 6 {
        return Err(DecodeError::Truncated {
            offset: d.offset(),
            needed: 6,
            remaining: head.len(),
        });
    }
    let len = u32::from_le_bytes([head[2], head[3], head[4], head[5]]) as usize;
    d.take_bytes(len.saturating_add(6))
}

/// `MOSDBoot` (71, v7): an OSD asks to be marked up. The public addresses are those of the mon session.
#[derive(Debug, Clone, PartialEq)]
pub struct MOSDBoot {
    pub paxos: PaxosHeader,
    /// The encoded `OSDSuperblock`.
    pub sb: Bytes,
    pub hb_back_addrs: EntityAddrvec,
    pub cluster_addrs: EntityAddrvec,
    /// The last epoch this daemon was marked up in (0 on a first boot).
    pub boot_epoch: u32,
    pub hb_front_addrs: EntityAddrvec,
    /// What `ceph osd metadata` shows.
    pub metadata: BTreeMap<String, String>,
    pub osd_features: u64,
}

impl CephMessage for MOSDBoot {
    const TYPE: u16 = osd_msg::OSD_BOOT;
    const HEAD_VERSION: u16 = 7;
    const COMPAT_VERSION: u16 = 7;
    const NAME: &'static str = "osd_boot";

    fn encode_front(&self, e: &mut Encoder) {
        self.paxos.encode(e);
        e.raw(&self.sb);
        self.hb_back_addrs.encode(e);
        self.cluster_addrs.encode(e);
        e.u32(self.boot_epoch);
        self.hb_front_addrs.encode(e);
        self.metadata.encode(e);
        e.u64(self.osd_features);
    }

    fn decode_front(_v: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        Ok(MOSDBoot {
            paxos: PaxosHeader::decode(d)?,
            sb: take_struct(d)?,
            hb_back_addrs: d.decode()?,
            cluster_addrs: d.decode()?,
            boot_epoch: d.u32()?,
            hb_front_addrs: d.decode()?,
            metadata: d.decode()?,
            osd_features: d.u64()?,
        })
    }
}

/// `MOSDAlive` (73): the OSD wants `up_thru` raised to `want`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MOSDAlive {
    pub paxos: PaxosHeader,
    pub want: u32,
}

impl CephMessage for MOSDAlive {
    const TYPE: u16 = osd_msg::OSD_ALIVE;
    const HEAD_VERSION: u16 = 1;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "osd_alive";

    fn encode_front(&self, e: &mut Encoder) {
        self.paxos.encode(e);
        e.u32(self.want);
    }
    fn decode_front(_v: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        Ok(MOSDAlive {
            paxos: PaxosHeader::decode(d)?,
            want: d.u32()?,
        })
    }
}

/// `MOSDBeacon` (79, v3): liveness plus the PGs this OSD is primary for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MOSDBeacon {
    pub paxos: PaxosHeader,
    pub pgs: Vec<PgId>,
    pub min_last_epoch_clean: u32,
    pub last_purged_snaps_scrub: Utime,
    pub osd_beacon_report_interval: i32,
}

impl CephMessage for MOSDBeacon {
    const TYPE: u16 = osd_msg::OSD_BEACON;
    const HEAD_VERSION: u16 = 3;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "osd_beacon";

    fn encode_front(&self, e: &mut Encoder) {
        self.paxos.encode(e);
        self.pgs.encode(e);
        e.u32(self.min_last_epoch_clean);
        self.last_purged_snaps_scrub.encode(e);
        e.i32(self.osd_beacon_report_interval);
    }
    fn decode_front(v: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        let mut m = MOSDBeacon {
            paxos: PaxosHeader::decode(d)?,
            pgs: d.decode()?,
            min_last_epoch_clean: d.u32()?,
            last_purged_snaps_scrub: Utime::default(),
            osd_beacon_report_interval: 0,
        };
        if v >= 2 {
            m.last_purged_snaps_scrub = d.decode()?;
        }
        if v >= 3 {
            m.osd_beacon_report_interval = d.i32()?;
        }
        Ok(m)
    }
}

/// `MOSDMarkMeDown` (74, v4/3): sent on a clean shutdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MOSDMarkMeDown {
    pub paxos: PaxosHeader,
    pub fsid: Uuid,
    pub target_osd: i32,
    pub target_addrs: EntityAddrvec,
    pub epoch: u32,
    pub request_ack: bool,
    pub down_and_dead: bool,
}

impl CephMessage for MOSDMarkMeDown {
    const TYPE: u16 = osd_msg::OSD_MARK_ME_DOWN;
    const HEAD_VERSION: u16 = 4;
    const COMPAT_VERSION: u16 = 3;
    const NAME: &'static str = "MOSDMarkMeDown";
    const PRIORITY: u16 = prio::HIGHEST;

    fn encode_front(&self, e: &mut Encoder) {
        self.paxos.encode(e);
        self.fsid.encode(e);
        e.i32(self.target_osd);
        self.target_addrs.encode(e);
        e.u32(self.epoch);
        e.bool(self.request_ack);
        e.bool(self.down_and_dead);
    }
    fn decode_front(v: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        if v < 3 {
            return Err(DecodeError::invalid("MOSDMarkMeDown", "version < 3"));
        }
        Ok(MOSDMarkMeDown {
            paxos: PaxosHeader::decode(d)?,
            fsid: d.decode()?,
            target_osd: d.i32()?,
            target_addrs: d.decode()?,
            epoch: d.u32()?,
            request_ack: d.bool()?,
            down_and_dead: if v >= 4 { d.bool()? } else { false },
        })
    }
}

/// `MOSDPGCreated` (116): a PG the monitor asked for exists now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MOSDPGCreated {
    pub paxos: PaxosHeader,
    pub pgid: PgId,
}

impl CephMessage for MOSDPGCreated {
    const TYPE: u16 = osd_msg::OSD_PG_CREATED;
    const HEAD_VERSION: u16 = 1;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "osd_pg_created";

    fn encode_front(&self, e: &mut Encoder) {
        self.paxos.encode(e);
        self.pgid.encode(e);
    }
    fn decode_front(_v: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        Ok(MOSDPGCreated {
            paxos: PaxosHeader::decode(d)?,
            pgid: d.decode()?,
        })
    }
}

/// `MPGStats` (87, v2): per-PG and OSD statistics for the mgr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MPGStats {
    pub paxos: PaxosHeader,
    pub fsid: Uuid,
    /// `pg_t` → encoded `pg_stat_t`.
    pub pg_stat: BTreeMap<PgId, Bytes>,
    /// Encoded `osd_stat_t`.
    pub osd_stat: Bytes,
    pub epoch: u32,
    pub had_map_for: Utime,
    /// Pool id → encoded `store_statfs_t`.
    pub pool_stat: BTreeMap<i64, Bytes>,
}

impl CephMessage for MPGStats {
    const TYPE: u16 = osd_msg::PGSTATS;
    const HEAD_VERSION: u16 = 2;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "pg_stats";

    fn encode_front(&self, e: &mut Encoder) {
        self.paxos.encode(e);
        self.fsid.encode(e);
        e.raw(&self.osd_stat);
        e.u32(self.pg_stat.len() as u32);
        for (k, v) in &self.pg_stat {
            k.encode(e);
            e.raw(v);
        }
        e.u32(self.epoch);
        self.had_map_for.encode(e);
        e.u32(self.pool_stat.len() as u32);
        for (k, v) in &self.pool_stat {
            e.i64(*k);
            e.raw(v);
        }
    }
    fn decode_front(v: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        let paxos = PaxosHeader::decode(d)?;
        let fsid = d.decode()?;
        let osd_stat = take_struct(d)?;
        let n = d.length("MPGStats pg_stat", 19)?;
        let mut pg_stat = BTreeMap::new();
        for _ in 0..n {
            let k: PgId = d.decode()?;
            pg_stat.insert(k, take_struct(d)?);
        }
        let epoch = d.u32()?;
        let had_map_for = d.decode()?;
        let mut pool_stat = BTreeMap::new();
        if v >= 2 {
            let n = d.length("MPGStats pool_stat", 14)?;
            for _ in 0..n {
                let k = d.i64()?;
                pool_stat.insert(k, take_struct(d)?);
            }
        }
        Ok(MPGStats {
            paxos,
            fsid,
            pg_stat,
            osd_stat,
            epoch,
            had_map_for,
            pool_stat,
        })
    }
}

/// `MMgrOpen` (0x700, v3): opens a daemon's session with the active mgr.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MMgrOpen {
    pub daemon_name: String,
    pub service_name: String,
    pub service_daemon: bool,
    pub daemon_metadata: BTreeMap<String, String>,
    pub daemon_status: BTreeMap<String, String>,
    /// Encoded `map<string, map<int32_t, string>>` of the current config.
    pub config_bl: Bytes,
    /// Encoded `map<string, string>` of compiled-in defaults.
    pub config_defaults_bl: Bytes,
}

impl CephMessage for MMgrOpen {
    const TYPE: u16 = osd_msg::MGR_OPEN;
    const HEAD_VERSION: u16 = 3;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "mgropen";

    fn encode_front(&self, e: &mut Encoder) {
        e.string(&self.daemon_name);
        e.string(&self.service_name);
        e.bool(self.service_daemon);
        if self.service_daemon {
            self.daemon_metadata.encode(e);
            self.daemon_status.encode(e);
        }
        e.bytes(&self.config_bl);
        e.bytes(&self.config_defaults_bl);
    }
    fn decode_front(v: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        let mut m = MMgrOpen {
            daemon_name: d.string()?,
            ..Default::default()
        };
        if v >= 2 {
            m.service_name = d.string()?;
            m.service_daemon = d.bool()?;
            if m.service_daemon {
                m.daemon_metadata = d.decode()?;
                m.daemon_status = d.decode()?;
            }
        }
        if v >= 3 {
            m.config_bl = d.bufferlist()?;
            m.config_defaults_bl = d.bufferlist()?;
        }
        Ok(m)
    }
}

/// `MMgrConfigure` (0x701, v4): the mgr tells a daemon how often to report. Perf metric queries are kept raw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MMgrConfigure {
    pub stats_period: u32,
    pub stats_threshold: u32,
    /// The encoded OSD perf metric queries and metric config (v3+), unparsed.
    pub rest: Bytes,
}

impl CephMessage for MMgrConfigure {
    const TYPE: u16 = osd_msg::MGR_CONFIGURE;
    const HEAD_VERSION: u16 = 4;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "mgrconfigure";

    fn encode_front(&self, e: &mut Encoder) {
        e.u32(self.stats_period);
        e.u32(self.stats_threshold);
        e.raw(&self.rest);
    }
    fn decode_front(v: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        let stats_period = d.u32()?;
        let stats_threshold = if v >= 2 { d.u32()? } else { 0 };
        let n = d.remaining();
        Ok(MMgrConfigure {
            stats_period,
            stats_threshold,
            rest: d.take_bytes(n)?,
        })
    }
}

/// One perf counter's schema in MMgrReport (`PerfCounterType`, ENCODE 3/1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PerfCounterType {
    pub path: String,
    pub description: String,
    pub nick: String,
    /// `perfcounter_type_d` bits (1 time, 2 u64, 4 longrunavg, 8 counter, 0x10 histogram).
    pub type_: u8,
    pub priority: u8,
    pub unit: u8,
}

impl Encode for PerfCounterType {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(3, 1, |e| {
            e.string(&self.path);
            e.string(&self.description);
            e.string(&self.nick);
            e.u8(self.type_);
            e.u8(self.priority);
            e.u8(self.unit);
        })
    }
}
impl Decode for PerfCounterType {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("PerfCounterType", 3, |h, d| {
            let mut t = PerfCounterType {
                path: d.string()?,
                description: d.string()?,
                nick: d.string()?,
                type_: d.u8()?,
                ..Default::default()
            };
            if h.version >= 2 {
                t.priority = d.u8()?;
            }
            if h.version >= 3 {
                t.unit = d.u8()?;
            }
            Ok(t)
        })
    }
}

/// `MMgrReport` (0x702, v9): perf counters and status. Fields after `config_bl` are kept raw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MMgrReport {
    pub daemon_name: String,
    pub declare_types: Vec<PerfCounterType>,
    /// The packed counter values (an ENCODE_START(1,1) envelope around them).
    pub packed: Bytes,
    pub undeclare_types: Vec<String>,
    pub service_name: String,
    pub daemon_status: Option<BTreeMap<String, String>>,
    /// Encoded `vector<DaemonHealthMetric>`, kept raw (count + items).
    pub daemon_health_metrics: Bytes,
    pub config_bl: Bytes,
    /// OSD perf metric reports, task status and metric report (v7+), raw.
    pub rest: Bytes,
}

/// What a daemon without perf metric queries sends after `config_bl`: an empty `osd_perf_metric_reports` map
/// (u32 0), no `task_status` (optional: u8 0) and no `metric_report_message` (optional: u8 0).
pub const MGR_REPORT_EMPTY_REST: [u8; 6] = [0, 0, 0, 0, 0, 0];

impl CephMessage for MMgrReport {
    const TYPE: u16 = osd_msg::MGR_REPORT;
    const HEAD_VERSION: u16 = 9;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "mgrreport";

    fn encode_front(&self, e: &mut Encoder) {
        e.string(&self.daemon_name);
        self.declare_types.encode(e);
        e.bytes(&self.packed);
        self.undeclare_types.encode(e);
        e.string(&self.service_name);
        self.daemon_status.encode(e);
        e.raw(&self.daemon_health_metrics);
        e.bytes(&self.config_bl);
        e.raw(&self.rest);
    }
    fn decode_front(v: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        if v < 9 {
            return Err(DecodeError::invalid(
                "MMgrReport",
                "versions before 9 are not read",
            ));
        }
        let daemon_name = d.string()?;
        let declare_types = d.decode()?;
        let packed = d.bufferlist()?;
        let undeclare_types = d.decode()?;
        let service_name = d.string()?;
        let daemon_status = d.decode()?;
        // DaemonHealthMetric: ENCODE_START(1,1){u8 type, u64 value} = 15 bytes each.
        let start = d.clone();
        let n = d.length("MMgrReport daemon_health_metrics", 15)?;
        for _ in 0..n {
            take_struct(d)?;
        }
        let used = start.remaining() - d.remaining();
        let mut s = start;
        let daemon_health_metrics = s.take_bytes(used)?;
        let config_bl = d.bufferlist()?;
        let n = d.remaining();
        Ok(MMgrReport {
            daemon_name,
            declare_types,
            packed,
            undeclare_types,
            service_name,
            daemon_status,
            daemon_health_metrics,
            config_bl,
            rest: d.take_bytes(n)?,
        })
    }
}

/// A `ceph::signedspan` on the wire: i32 seconds, u32 nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SignedSpan {
    pub sec: i32,
    pub nsec: u32,
}

impl SignedSpan {
    pub fn from_nanos(ns: i64) -> Self {
        SignedSpan {
            sec: ns.div_euclid(1_000_000_000) as i32,
            nsec: ns.rem_euclid(1_000_000_000) as u32,
        }
    }
}

/// `MOSDPing` ops.
pub mod ping_op {
    pub const HEARTBEAT: u8 = 0;
    pub const START_HEARTBEAT: u8 = 1;
    pub const YOU_DIED: u8 = 2;
    pub const STOP_HEARTBEAT: u8 = 3;
    pub const PING: u8 = 4;
    pub const PING_REPLY: u8 = 5;
}

/// `MOSDPing` (70, v5/4): heartbeats between OSDs on the hb front/back networks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MOSDPing {
    pub fsid: Uuid,
    pub map_epoch: u32,
    pub op: u8,
    pub ping_stamp: Utime,
    pub up_from: u32,
    pub mono_ping_stamp: SignedSpan,
    pub mono_send_stamp: SignedSpan,
    pub delta_ub: Option<SignedSpan>,
    /// Zero bytes appended to reach `osd_heartbeat_min_size` (their count is on the wire).
    pub padding: u32,
}

impl CephMessage for MOSDPing {
    const TYPE: u16 = osd_msg::OSD_PING;
    const HEAD_VERSION: u16 = 5;
    const COMPAT_VERSION: u16 = 4;
    const NAME: &'static str = "osd_ping";
    // Pacific heartbeats go out at the default priority (capture: 668 of 668).
    const PRIORITY: u16 = prio::DEFAULT;

    fn encode_front(&self, e: &mut Encoder) {
        self.fsid.encode(e);
        e.u32(self.map_epoch);
        e.u8(self.op);
        self.ping_stamp.encode(e);
        e.u32(self.padding);
        e.u32(self.up_from);
        for s in [self.mono_ping_stamp, self.mono_send_stamp] {
            e.i32(s.sec);
            e.u32(s.nsec);
        }
        match self.delta_ub {
            Some(s) => {
                e.u8(1);
                e.i32(s.sec);
                e.u32(s.nsec);
            }
            None => e.u8(0),
        }
        // Bounded: a hostile or silly padding value must not make us allocate much.
        let pad = (self.padding as usize).min(64 << 10);
        e.raw(&vec![0u8; pad]);
    }
    fn decode_front(v: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        let mut m = MOSDPing {
            fsid: d.decode()?,
            map_epoch: d.u32()?,
            op: d.u8()?,
            ping_stamp: d.decode()?,
            padding: d.u32()?,
            up_from: 0,
            mono_ping_stamp: SignedSpan::default(),
            mono_send_stamp: SignedSpan::default(),
            delta_ub: None,
        };
        if v >= 5 {
            m.up_from = d.u32()?;
            m.mono_ping_stamp = SignedSpan {
                sec: d.i32()?,
                nsec: d.u32()?,
            };
            m.mono_send_stamp = SignedSpan {
                sec: d.i32()?,
                nsec: d.u32()?,
            };
            if d.bool()? {
                m.delta_ub = Some(SignedSpan {
                    sec: d.i32()?,
                    nsec: d.u32()?,
                });
            }
        }
        d.skip((m.padding as usize).min(d.remaining()))?;
        Ok(m)
    }
}

/// `MCommand` (97): a command for a daemon (`ceph tell osd.N ...`): the JSON command words; input in `data`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MCommand {
    pub fsid: Uuid,
    pub cmd: Vec<String>,
    pub data: Bytes,
}

impl CephMessage for MCommand {
    const TYPE: u16 = osd_msg::COMMAND;
    const HEAD_VERSION: u16 = 1;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "command";

    fn encode_front(&self, e: &mut Encoder) {
        self.fsid.encode(e);
        self.cmd.encode(e);
    }
    fn data(&self) -> Bytes {
        self.data.clone()
    }
    fn decode_front(_v: u16, d: &mut Decoder, data: &Bytes) -> Result<Self, DecodeError> {
        Ok(MCommand {
            fsid: d.decode()?,
            cmd: d.decode()?,
            data: data.clone(),
        })
    }
}

/// `MCommandReply` (98): return code, status string; output in `data`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MCommandReply {
    pub r: i32,
    pub rs: String,
    pub data: Bytes,
}

impl CephMessage for MCommandReply {
    const TYPE: u16 = osd_msg::COMMAND_REPLY;
    const HEAD_VERSION: u16 = 1;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "command_reply";

    fn encode_front(&self, e: &mut Encoder) {
        e.i32(self.r);
        e.string(&self.rs);
    }
    fn data(&self) -> Bytes {
        self.data.clone()
    }
    fn decode_front(_v: u16, d: &mut Decoder, data: &Bytes) -> Result<Self, DecodeError> {
        Ok(MCommandReply {
            r: d.i32()?,
            rs: d.string()?,
            data: data.clone(),
        })
    }
}

/// `MOSDFailure` flags.
pub mod failure_flags {
    /// The target failed (0: it is alive after all; cancels an earlier report).
    pub const FAILED: u8 = 1;
    /// Mark it down now (the reporter saw the connection refused), without waiting for more reporters.
    pub const IMMEDIATE: u8 = 2;
}

/// `MOSDFailure` (72, v4/4): an OSD reports a peer whose heartbeats stopped (or takes the report back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MOSDFailure {
    pub paxos: PaxosHeader,
    pub fsid: Uuid,
    pub target_osd: i32,
    pub target_addrs: EntityAddrvec,
    pub epoch: u32,
    /// [`failure_flags`].
    pub flags: u8,
    /// Seconds since the last heartbeat reply.
    pub failed_for: i32,
}

impl CephMessage for MOSDFailure {
    const TYPE: u16 = osd_msg::OSD_FAILURE;
    const HEAD_VERSION: u16 = 4;
    const COMPAT_VERSION: u16 = 4;
    const NAME: &'static str = "osd_failure";

    fn encode_front(&self, e: &mut Encoder) {
        self.paxos.encode(e);
        self.fsid.encode(e);
        e.i32(self.target_osd);
        self.target_addrs.encode(e);
        e.u32(self.epoch);
        e.u8(self.flags);
        e.i32(self.failed_for);
    }
    fn decode_front(v: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        if v < 4 {
            return Err(DecodeError::invalid("osd_failure", "version < 4"));
        }
        Ok(MOSDFailure {
            paxos: PaxosHeader::decode(d)?,
            fsid: d.decode()?,
            target_osd: d.i32()?,
            target_addrs: d.decode()?,
            epoch: d.u32()?,
            flags: d.u8()?,
            failed_for: d.i32()?,
        })
    }
}

/// `MOSDPGTemp` (78, v2/1): a primary asks the monitor for a temporary acting set (an empty one clears it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MOSDPGTemp {
    pub paxos: PaxosHeader,
    pub map_epoch: u32,
    /// `map<pg_t, vector<i32>>`, in wire order.
    pub pg_temp: Vec<(PgId, Vec<i32>)>,
    /// Set even if the map already has it (v2).
    pub forced: bool,
}

impl CephMessage for MOSDPGTemp {
    const TYPE: u16 = osd_msg::OSD_PGTEMP;
    const HEAD_VERSION: u16 = 2;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "osd_pgtemp";

    fn encode_front(&self, e: &mut Encoder) {
        self.paxos.encode(e);
        e.u32(self.map_epoch);
        e.encode(&self.pg_temp);
        e.bool(self.forced);
    }
    fn decode_front(v: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        Ok(MOSDPGTemp {
            paxos: PaxosHeader::decode(d)?,
            map_epoch: d.u32()?,
            pg_temp: d.decode()?,
            forced: if v >= 2 { d.bool()? } else { false },
        })
    }
}

/// `MOSDFull` (75, v1): an OSD reports its fullness state bits to the monitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MOSDFull {
    pub paxos: PaxosHeader,
    pub map_epoch: u32,
    /// `CEPH_OSD_FULL` / `BACKFILLFULL` / `NEARFULL` bits.
    pub state: u32,
}

impl CephMessage for MOSDFull {
    const TYPE: u16 = osd_msg::OSD_FULL;
    const HEAD_VERSION: u16 = 1;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "osd_full";

    fn encode_front(&self, e: &mut Encoder) {
        self.paxos.encode(e);
        e.u32(self.map_epoch);
        e.u32(self.state);
    }
    fn decode_front(_v: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        Ok(MOSDFull {
            paxos: PaxosHeader::decode(d)?,
            map_epoch: d.u32()?,
            state: d.u32()?,
        })
    }
}

/// `MOSDForceRecovery` options.
pub mod force_recovery {
    pub const RECOVERY: u8 = 1;
    pub const BACKFILL: u8 = 2;
    pub const CANCEL: u8 = 4;
}

/// `MOSDForceRecovery` (151, v2/2): from the mgr (`ceph pg force-recovery`): raise (or, with CANCEL, drop) the
/// recovery or backfill priority of these PGs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MOSDForceRecovery {
    pub fsid: Uuid,
    pub forced_pgs: Vec<SpgId>,
    /// [`force_recovery`] bits.
    pub options: u8,
}

impl CephMessage for MOSDForceRecovery {
    const TYPE: u16 = osd_msg::OSD_FORCE_RECOVERY;
    const HEAD_VERSION: u16 = 2;
    const COMPAT_VERSION: u16 = 2;
    const NAME: &'static str = "force_recovery";

    fn encode_front(&self, e: &mut Encoder) {
        self.fsid.encode(e);
        e.encode(&self.forced_pgs);
        e.u8(self.options);
    }
    fn decode_front(v: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        if v < 2 {
            // v1 carried pg_t, not spg_t.
            return Err(DecodeError::invalid("force_recovery", "version < 2"));
        }
        Ok(MOSDForceRecovery {
            fsid: d.decode()?,
            forced_pgs: d.decode()?,
            options: d.u8()?,
        })
    }
}

/// `MOSDScrub2` (121, v1): from the mgr (`ceph pg deep-scrub`, `ceph osd pool scrub`): scrub these PGs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MOSDScrub2 {
    pub fsid: Uuid,
    pub epoch: u32,
    pub scrub_pgs: Vec<SpgId>,
    pub repair: bool,
    pub deep: bool,
}

impl CephMessage for MOSDScrub2 {
    const TYPE: u16 = osd_msg::OSD_SCRUB2;
    const HEAD_VERSION: u16 = 1;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "scrub2";

    fn encode_front(&self, e: &mut Encoder) {
        self.fsid.encode(e);
        e.u32(self.epoch);
        e.encode(&self.scrub_pgs);
        e.bool(self.repair);
        e.bool(self.deep);
    }
    fn decode_front(_v: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        Ok(MOSDScrub2 {
            fsid: d.decode()?,
            epoch: d.u32()?,
            scrub_pgs: d.decode()?,
            repair: d.bool()?,
            deep: d.bool()?,
        })
    }
}

/// `MOSDPGCreate2` (120, v2/1): the monitor tells a primary to create PGs of a new pool (or after a split), with
/// the creation epoch and time, and (v2) their history and past intervals.
#[derive(Debug, Clone, PartialEq)]
pub struct MOSDPGCreate2 {
    pub epoch: u32,
    /// `map<spg_t, pair<epoch_t, utime_t>>`, in wire order.
    pub pgs: Vec<(SpgId, (u32, Utime))>,
    /// `map<spg_t, pair<pg_history_t, PastIntervals>>` (v2), in wire order.
    pub pg_extra: Vec<(SpgId, (PgHistory, PastIntervals))>,
}

impl CephMessage for MOSDPGCreate2 {
    const TYPE: u16 = osd_msg::OSD_PG_CREATE2;
    const HEAD_VERSION: u16 = 2;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "pg_create2";
    const PRIORITY: u16 = prio::HIGH;

    fn encode_front(&self, e: &mut Encoder) {
        e.u32(self.epoch);
        e.encode(&self.pgs);
        e.encode(&self.pg_extra);
    }
    fn decode_front(v: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        Ok(MOSDPGCreate2 {
            epoch: d.u32()?,
            pgs: d.decode()?,
            pg_extra: if v >= 2 { d.decode()? } else { Vec::new() },
        })
    }
}
