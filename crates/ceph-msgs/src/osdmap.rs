// SPDX-License-Identifier: LGPL-3.0-or-later
//! `MOSDMap` (41): full and incremental OSDMaps, kept as the sender's bytes (their CRCs cover those exact bytes).

use std::collections::BTreeMap;

use bytes::Bytes;
use denc::{DecodeError, Decoder, Encoder};

use crate::{CephMessage, msg_type, prio};

/// `MOSDMap` (v4, compat 3 in Pacific).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MOSDMap {
    pub fsid: [u8; 16],
    /// epoch -> encoded `OSDMap::Incremental`.
    pub incremental_maps: BTreeMap<u32, Bytes>,
    /// epoch -> encoded full `OSDMap`.
    pub maps: BTreeMap<u32, Bytes>,
    /// The oldest map the sender still has (renamed cluster_osdmap_trim_lower_bound in later releases).
    pub oldest_map: u32,
    /// The newest map the sender has; more maps exist beyond this message if it is above the last epoch in it.
    pub newest_map: u32,
    /// pool -> removed snap intervals `(start, len)`; empty from Octopus on, kept for byte-exact re-encoding.
    pub gap_removed_snaps: BTreeMap<i64, Vec<(u64, u64)>>,
}

impl MOSDMap {
    /// The first epoch carried, full or incremental.
    pub fn first_epoch(&self) -> Option<u32> {
        let a = self.incremental_maps.keys().next().copied();
        let b = self.maps.keys().next().copied();
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (x, None) | (None, x) => x,
        }
    }

    /// The last epoch carried, full or incremental.
    pub fn last_epoch(&self) -> Option<u32> {
        let a = self.incremental_maps.keys().next_back().copied();
        let b = self.maps.keys().next_back().copied();
        a.max(b)
    }
}

fn decode_epoch_map(d: &mut Decoder) -> Result<BTreeMap<u32, Bytes>, DecodeError> {
    // Each entry is at least an epoch and a bufferlist length.
    let n = d.length("MOSDMap maps", 8)?;
    let mut m = BTreeMap::new();
    for _ in 0..n {
        let e = d.u32()?;
        m.insert(e, d.bufferlist()?);
    }
    Ok(m)
}

fn encode_epoch_map(e: &mut Encoder, m: &BTreeMap<u32, Bytes>) {
    e.length(m.len());
    for (k, v) in m {
        e.u32(*k);
        e.bytes(v);
    }
}

impl CephMessage for MOSDMap {
    const TYPE: u16 = msg_type::OSD_MAP;
    const HEAD_VERSION: u16 = 4;
    const COMPAT_VERSION: u16 = 3;
    const NAME: &'static str = "osd_map";
    const PRIORITY: u16 = prio::HIGH;

    fn encode_front(&self, e: &mut Encoder) {
        e.raw(&self.fsid);
        encode_epoch_map(e, &self.incremental_maps);
        encode_epoch_map(e, &self.maps);
        e.u32(self.oldest_map);
        e.u32(self.newest_map);
        e.length(self.gap_removed_snaps.len());
        for (pool, set) in &self.gap_removed_snaps {
            e.i64(*pool);
            e.length(set.len());
            for (start, len) in set {
                e.u64(*start);
                e.u64(*len);
            }
        }
    }

    fn decode_front(version: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        let fsid = d.take_array()?;
        let incremental_maps = decode_epoch_map(d)?;
        let maps = decode_epoch_map(d)?;
        let (oldest_map, newest_map) = if version >= 2 {
            (d.u32()?, d.u32()?)
        } else {
            // v1 had no range; what it carries is all the sender said.
            let last = incremental_maps
                .keys()
                .chain(maps.keys())
                .max()
                .copied()
                .unwrap_or(0);
            (0, last)
        };
        let mut gap_removed_snaps = BTreeMap::new();
        if version >= 4 {
            let n = d.length("gap_removed_snaps", 12)?;
            for _ in 0..n {
                let pool = d.i64()?;
                let k = d.length("interval_set", 16)?;
                let mut set = Vec::with_capacity(k);
                for _ in 0..k {
                    set.push((d.u64()?, d.u64()?));
                }
                gap_removed_snaps.insert(pool, set);
            }
        }
        Ok(MOSDMap {
            fsid,
            incremental_maps,
            maps,
            oldest_map,
            newest_map,
            gap_removed_snaps,
        })
    }
}
