// SPDX-License-Identifier: LGPL-3.0-or-later
//! `osd_stat_t` (ENCODE 14/2, Pacific): an OSD's usage, heartbeat peers and counters, sent to the mgr in MPGStats.

use std::collections::BTreeMap;

use denc::{Decode, DecodeError, Decoder, Encode, Encoder};

use crate::statfs::StoreStatfs;

/// `objectstore_perf_stat_t`: commit/apply latency. Version 2 carries nanoseconds; version 1 (what Pacific OSDs
/// put in MPGStats) milliseconds as u32.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ObjectstorePerfStat {
    pub commit_latency_ns: u64,
    pub apply_latency_ns: u64,
    /// The version this was decoded from (1 or 2); encoding uses it.
    pub version: u8,
}

impl Encode for ObjectstorePerfStat {
    fn encode(&self, e: &mut Encoder) {
        if self.version >= 2 {
            e.versioned(2, 2, |e| {
                e.u64(self.commit_latency_ns);
                e.u64(self.apply_latency_ns);
            })
        } else {
            e.versioned(1, 1, |e| {
                e.u32((self.commit_latency_ns / 1_000_000) as u32);
                e.u32((self.apply_latency_ns / 1_000_000) as u32);
            })
        }
    }
}

impl Decode for ObjectstorePerfStat {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("objectstore_perf_stat_t", 2, |h, d| {
            if h.version >= 2 {
                Ok(ObjectstorePerfStat {
                    commit_latency_ns: d.u64()?,
                    apply_latency_ns: d.u64()?,
                    version: 2,
                })
            } else {
                Ok(ObjectstorePerfStat {
                    commit_latency_ns: u64::from(d.u32()?) * 1_000_000,
                    apply_latency_ns: u64::from(d.u32()?) * 1_000_000,
                    version: 1,
                })
            }
        })
    }
}

/// Heartbeat ping times to one peer (`osd_stat_t::Interfaces`), microseconds; [1min, 5min, 15min] averages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PingTimes {
    pub last_update: u32,
    pub back_pingtime: [u32; 3],
    pub back_min: [u32; 3],
    pub back_max: [u32; 3],
    pub back_last: u32,
    pub front_pingtime: [u32; 3],
    pub front_min: [u32; 3],
    pub front_max: [u32; 3],
    pub front_last: u32,
}

/// `osd_stat_t`. The legacy kb fields are derived from `statfs` when encoding, as Ceph does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OsdStat {
    pub statfs: StoreStatfs,
    pub snap_trim_queue_len: u32,
    pub num_snap_trimming: u32,
    pub hb_peers: Vec<i32>,
    /// `pow2_hist_t` buckets of op queue ages.
    pub op_queue_age_hist: Vec<i32>,
    pub os_perf_stat: ObjectstorePerfStat,
    pub up_from: u32,
    pub seq: u64,
    pub num_pgs: u32,
    pub os_alerts: BTreeMap<i32, BTreeMap<String, String>>,
    pub num_shards_repaired: i64,
    pub num_osds: u32,
    pub num_per_pool_osds: u32,
    pub num_per_pool_omap_osds: u32,
    pub hb_pingtime: BTreeMap<i32, PingTimes>,
}

impl Encode for OsdStat {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(14, 2, |e| {
            e.i64(self.statfs.kb());
            e.i64(self.statfs.kb_used_raw());
            e.i64(self.statfs.kb_avail());
            e.u32(self.snap_trim_queue_len);
            e.u32(self.num_snap_trimming);
            self.hb_peers.encode(e);
            e.u32(0); // the retired hb_out vector
            e.versioned(1, 1, |e| self.op_queue_age_hist.encode(e));
            self.os_perf_stat.encode(e);
            e.u32(self.up_from);
            e.u64(self.seq);
            e.u32(self.num_pgs);
            e.i64(self.statfs.kb_used_data());
            e.i64(self.statfs.kb_used_omap());
            e.i64(self.statfs.kb_used_internal_metadata());
            self.statfs.encode(e);
            self.os_alerts.encode(e);
            e.i64(self.num_shards_repaired);
            e.u32(self.num_osds);
            e.u32(self.num_per_pool_osds);
            e.u32(self.num_per_pool_omap_osds);
            e.i32(self.hb_pingtime.len() as i32);
            for (osd, p) in &self.hb_pingtime {
                e.i32(*osd);
                e.u32(p.last_update);
                for v in p.back_pingtime.iter().chain(&p.back_min).chain(&p.back_max) {
                    e.u32(*v);
                }
                e.u32(p.back_last);
                for v in p.front_pingtime.iter().chain(&p.front_min).chain(&p.front_max) {
                    e.u32(*v);
                }
                e.u32(p.front_last);
            }
        })
    }
}

fn three(d: &mut Decoder) -> Result<[u32; 3], DecodeError> {
    Ok([d.u32()?, d.u32()?, d.u32()?])
}

impl Decode for OsdStat {
    /// Pacific's layout (version 14); older versions are refused.
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("osd_stat_t", 14, |h, d| {
            if h.version < 14 {
                return Err(DecodeError::TooOld {
                    type_name: "osd_stat_t",
                    version: h.version,
                    oldest: 14,
                });
            }
            let mut s = OsdStat::default();
            let _kb = d.i64()?;
            let _kb_used = d.i64()?;
            let _kb_avail = d.i64()?;
            s.snap_trim_queue_len = d.u32()?;
            s.num_snap_trimming = d.u32()?;
            s.hb_peers = d.decode()?;
            let _hb_out: Vec<i32> = d.decode()?;
            s.op_queue_age_hist = d.decode_struct("pow2_hist_t", 1, |_, d| d.decode())?;
            s.os_perf_stat = d.decode()?;
            s.up_from = d.u32()?;
            s.seq = d.u64()?;
            s.num_pgs = d.u32()?;
            let _ = (d.i64()?, d.i64()?, d.i64()?);
            s.statfs = d.decode()?;
            s.os_alerts = d.decode()?;
            s.num_shards_repaired = d.i64()?;
            s.num_osds = d.u32()?;
            s.num_per_pool_osds = d.u32()?;
            s.num_per_pool_omap_osds = d.u32()?;
            let n = d.i32()?;
            // Each entry is 88 bytes: bound the count by the input before looping.
            if n < 0 || (n as usize).saturating_mul(88) > d.remaining() {
                return Err(DecodeError::TooLong {
                    what: "osd_stat_t hb_pingtime",
                    len: n.max(0) as usize,
                    limit: d.remaining() / 88,
                });
            }
            for _ in 0..n {
                let osd = d.i32()?;
                let p = PingTimes {
                    last_update: d.u32()?,
                    back_pingtime: three(d)?,
                    back_min: three(d)?,
                    back_max: three(d)?,
                    back_last: d.u32()?,
                    front_pingtime: three(d)?,
                    front_min: three(d)?,
                    front_max: three(d)?,
                    front_last: d.u32()?,
                };
                s.hb_pingtime.insert(osd, p);
            }
            Ok(s)
        })
    }
}
