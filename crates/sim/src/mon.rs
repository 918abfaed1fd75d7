// SPDX-License-Identifier: LGPL-3.0-or-later
//! The model monitor: one authoritative OSDMap, moved forward one epoch per proposal through
//! `osdmap::build::IncBuilder` (the same `Incremental` + `apply_incremental` path a real monitor's maps take),
//! batching what OSDs asked for (boot, up_thru, pg_temp), failure reports and the simulator's chaos actions.
//!
//! Requests are validated the way OSDMonitor does it, simplified: up_thru and pg_temp only from OSDs that are
//! up in the current map, up_thru never lowered, pg_temp only for existing pools; a boot from an OSD that the
//! map still shows up with an older instance (nonce) first marks it down, and the boot goes into the next
//! epoch; a failure report only marks down the instance it was about.

use bytes::Bytes;
use osdmap::OsdMap;
use osdmap::PgId;
use osdmap::build::{IncBuilder, PoolSpec, advance};

/// What the monitor is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MonReq {
    /// MOSDBoot from an OSD instance (`nonce` identifies the instance: its addresses carry it).
    Boot {
        osd: i32,
        nonce: u32,
    },
    /// Failure report (heartbeats) or crash detection about one instance.
    Down {
        osd: i32,
        nonce: u32,
    },
    Out(i32),
    In(i32),
    /// MOSDAlive.
    UpThru {
        osd: i32,
        epoch: u32,
    },
    /// MOSDPGTemp from `from` (empty `acting` removes the mapping).
    PgTemp {
        from: i32,
        pgid: PgId,
        acting: Vec<i32>,
    },
    CreatePool(PoolSpec),
    DeletePool(i64),
    PgNum {
        pool: i64,
        pg_num: u32,
    },
}

pub struct Mon {
    pub map: OsdMap,
    pending: Vec<MonReq>,
    /// Every incremental published, by epoch (the encoded bytes sent in MOSDMap).
    pub incs: Vec<(u32, Bytes)>,
}

/// The nonce of an OSD instance as the map shows it.
pub fn map_nonce(map: &OsdMap, osd: i32) -> u32 {
    map.client_addrs
        .get(osd as usize)
        .and_then(|a| a.0.first())
        .map_or(0, |a| a.nonce)
}

impl Mon {
    pub fn new(map: OsdMap) -> Self {
        Mon {
            map,
            pending: Vec::new(),
            incs: Vec::new(),
        }
    }

    pub fn request(&mut self, r: MonReq) {
        self.pending.push(r);
    }

    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Make the next epoch from everything pending that still applies. Returns the new epoch and its encoded
    /// incremental, or `None` when nothing changed.
    pub fn propose(&mut self, stamp: osdmap::Utime) -> Result<Option<(u32, Bytes)>, String> {
        if self.pending.is_empty() {
            return Ok(None);
        }
        let pending = std::mem::take(&mut self.pending);
        let m = &self.map;
        let mut b = IncBuilder::new(m);
        b.stamp(stamp);
        let mut later = Vec::new();
        let mut changed = false;
        let mut booting = Vec::new();
        // pg_num already raised in this epoch, per pool: a second request in the same batch compares with it
        let mut raised: std::collections::HashMap<i64, u32> = std::collections::HashMap::new();
        for r in pending {
            let e = |e: osdmap::build::BuildError| e.to_string();
            match r {
                MonReq::Boot { osd, nonce } => {
                    if booting.contains(&osd) {
                        continue;
                    }
                    if m.is_up(osd) && map_nonce(m, osd) == nonce {
                        continue;
                    }
                    if m.is_up(osd) {
                        // The old instance is still up: mark it down now, boot the new one next epoch.
                        b.mark_down(osd).map_err(e)?;
                        later.push(MonReq::Boot { osd, nonce });
                    } else {
                        b.mark_up(osd, nonce).map_err(e)?;
                    }
                    booting.push(osd);
                    changed = true;
                }
                MonReq::Down { osd, nonce } => {
                    if m.is_up(osd) && map_nonce(m, osd) == nonce && !booting.contains(&osd) {
                        b.mark_down(osd).map_err(e)?;
                        changed = true;
                    }
                }
                MonReq::Out(osd) => {
                    if m.is_in(osd) {
                        b.mark_out(osd).map_err(e)?;
                        changed = true;
                    }
                }
                MonReq::In(osd) => {
                    if m.is_out(osd) && m.exists(osd) {
                        b.mark_in(osd).map_err(e)?;
                        changed = true;
                    }
                }
                MonReq::UpThru { osd, epoch } => {
                    let have = m.osd_info.get(osd as usize).map_or(0, |i| i.up_thru);
                    if m.is_up(osd) && epoch > have && epoch <= m.epoch {
                        b.set_up_thru(osd, epoch).map_err(e)?;
                        changed = true;
                    }
                }
                MonReq::PgTemp { from, pgid, acting } => {
                    let pool_ok = m.pools.contains_key(&(pgid.pool as i64));
                    let same = m.pg_temp.get(&pgid).map_or(acting.is_empty(), |t| *t == acting);
                    if m.is_up(from) && pool_ok && !same {
                        b.set_pg_temp(pgid, acting);
                        changed = true;
                    }
                }
                MonReq::CreatePool(spec) => {
                    let pending = b.pending().new_pool_names.values().any(|n| *n == spec.name);
                    if m.pool_by_name(&spec.name).is_none() && !pending {
                        b.create_pool(&spec);
                        changed = true;
                    }
                }
                MonReq::DeletePool(id) => {
                    if m.pools.contains_key(&id) {
                        b.delete_pool(id).map_err(e)?;
                        changed = true;
                    }
                }
                MonReq::PgNum { pool, pg_num } => {
                    let current = m.pools.get(&pool).map(|p| p.pg_num);
                    let now = raised.get(&pool).copied().max(current);
                    if now.is_some_and(|n| n < pg_num) {
                        b.split_pg_num(pool, pg_num).map_err(e)?;
                        raised.insert(pool, pg_num);
                        changed = true;
                    }
                }
            }
        }
        self.pending = later;
        if !changed {
            return Ok(None);
        }
        let inc = b.finish().map_err(|e| e.to_string())?;
        let bytes = inc.raw.clone().ok_or("built incremental without bytes")?;
        advance(&mut self.map, &inc).map_err(|e| e.to_string())?;
        self.incs.push((inc.epoch, bytes.clone()));
        Ok(Some((inc.epoch, bytes)))
    }
}
