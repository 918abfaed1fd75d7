// SPDX-License-Identifier: LGPL-3.0-or-later
//! Shared by the simulated-cluster tests (fake_mon.rs, sim.rs): a fake OSDMap the MonClient core can follow.
#![allow(dead_code)]

use bytes::Bytes;
use monclient::OsdMapLike;

/// A fake OSDMap: full map = `u32 epoch, u64 state`; incremental = `u32 epoch, u64 delta` (state += delta;
/// `u64::MAX` marks a corrupt incremental).
#[derive(Debug, Clone, PartialEq)]
pub struct FakeMap {
    pub epoch: u32,
    pub state: u64,
}

impl OsdMapLike for FakeMap {
    type Error = String;
    fn decode_full(b: &Bytes) -> Result<Self, String> {
        let mut d = denc::Decoder::new(b.clone());
        Ok(FakeMap {
            epoch: d.u32().map_err(|e| e.to_string())?,
            state: d.u64().map_err(|e| e.to_string())?,
        })
    }
    fn epoch(&self) -> u32 {
        self.epoch
    }
    fn apply_incremental(&mut self, inc: &Bytes) -> Result<(), String> {
        let mut d = denc::Decoder::new(inc.clone());
        let e = d.u32().map_err(|e| e.to_string())?;
        if e != self.epoch + 1 {
            return Err(format!("incremental {e} does not follow {}", self.epoch));
        }
        let delta = d.u64().map_err(|e| e.to_string())?;
        if delta == u64::MAX {
            return Err("corrupt incremental".into());
        }
        self.epoch = e;
        self.state += delta;
        Ok(())
    }
    fn snapshot(&self) -> Option<Self> {
        Some(self.clone())
    }
}

/// A full map or an incremental (same layout): `u32 epoch, u64 state or delta`.
pub fn enc(epoch: u32, value: u64) -> Bytes {
    let mut e = denc::Encoder::default();
    e.u32(epoch);
    e.u64(value);
    e.into_bytes()
}
