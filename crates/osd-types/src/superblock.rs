// SPDX-License-Identifier: LGPL-3.0-or-later
//! `OSDSuperblock` (ENCODE 10/5 in Pacific 16.2.15) and the `CompatSet` it carries. Sent in MOSDBoot.

use std::collections::BTreeMap;

use denc::{Decode, DecodeError, Decoder, Encode, Encoder, Utime, Uuid};

/// `CompatSet::FeatureSet`: a bit mask plus names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeatureSet {
    pub mask: u64,
    pub names: BTreeMap<u64, String>,
}

impl Encode for FeatureSet {
    fn encode(&self, e: &mut Encoder) {
        e.u64(self.mask);
        self.names.encode(e);
    }
}
impl Decode for FeatureSet {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        Ok(FeatureSet {
            mask: d.u64()?,
            names: d.decode()?,
        })
    }
}

/// `CompatSet`: compat, ro_compat, incompat feature sets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompatSet {
    pub compat: FeatureSet,
    pub ro_compat: FeatureSet,
    pub incompat: FeatureSet,
}

impl Encode for CompatSet {
    fn encode(&self, e: &mut Encoder) {
        self.compat.encode(e);
        self.ro_compat.encode(e);
        self.incompat.encode(e);
    }
}
impl Decode for CompatSet {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        Ok(CompatSet {
            compat: d.decode()?,
            ro_compat: d.decode()?,
            incompat: d.decode()?,
        })
    }
}

/// The OSD's incompat features as a Pacific ceph-osd declares them (`OSD::get_osd_compat_set`).
pub fn osd_compat_set() -> CompatSet {
    let names = [
        "initial feature set(~v.18)",
        "pginfo object",
        "object locator",
        "last_epoch_clean",
        "categories",
        "hobjectpool",
        "biginfo",
        "leveldbinfo",
        "leveldblog",
        "snapmapper",
        "sharded objects",
        "transaction hints",
        "pg meta object",
        "explicit missing set",
        "fastinfo pg attr",
        "deletes in missing set",
        "new snapmapper key structure",
    ];
    let mut incompat = FeatureSet::default();
    for (i, n) in names.iter().enumerate() {
        let id = i as u64 + 1;
        incompat.mask |= 1 << id;
        incompat.names.insert(id, (*n).to_string());
    }
    CompatSet {
        incompat,
        ..CompatSet::default()
    }
}

/// `OSDSuperblock`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OsdSuperblock {
    pub cluster_fsid: Uuid,
    pub whoami: i32,
    pub current_epoch: u32,
    pub oldest_map: u32,
    pub newest_map: u32,
    pub weight: f64,
    pub compat_features: CompatSet,
    pub clean_thru: u32,
    pub mounted: u32,
    pub osd_fsid: Uuid,
    pub last_map_marked_full: u32,
    pub pool_last_map_marked_full: BTreeMap<i64, u32>,
    pub purged_snaps_last: u32,
    pub last_purged_snaps_scrub: Utime,
    pub cluster_osdmap_trim_lower_bound: u32,
}

impl Encode for OsdSuperblock {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(10, 5, |e| {
            self.cluster_fsid.encode(e);
            e.i32(self.whoami);
            e.u32(self.current_epoch);
            e.u32(self.oldest_map);
            e.u32(self.newest_map);
            e.f64(self.weight);
            self.compat_features.encode(e);
            e.u32(self.clean_thru);
            e.u32(self.mounted);
            self.osd_fsid.encode(e);
            e.u32(self.last_map_marked_full);
            self.pool_last_map_marked_full.encode(e);
            e.u32(self.purged_snaps_last);
            self.last_purged_snaps_scrub.encode(e);
            e.u32(self.cluster_osdmap_trim_lower_bound);
        })
    }
}

impl Decode for OsdSuperblock {
    /// Versions 9 and later (Pacific); older ones are refused.
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("OSDSuperblock", 10, |h, d| {
            if h.version < 9 {
                return Err(DecodeError::TooOld {
                    type_name: "OSDSuperblock",
                    version: h.version,
                    oldest: 9,
                });
            }
            let mut s = OsdSuperblock {
                cluster_fsid: d.decode()?,
                whoami: d.i32()?,
                current_epoch: d.u32()?,
                oldest_map: d.u32()?,
                newest_map: d.u32()?,
                weight: d.f64()?,
                compat_features: d.decode()?,
                clean_thru: d.u32()?,
                mounted: d.u32()?,
                osd_fsid: d.decode()?,
                last_map_marked_full: d.u32()?,
                pool_last_map_marked_full: d.decode()?,
                purged_snaps_last: d.u32()?,
                last_purged_snaps_scrub: d.decode()?,
                ..OsdSuperblock::default()
            };
            if h.version >= 10 {
                s.cluster_osdmap_trim_lower_bound = d.u32()?;
            }
            Ok(s)
        })
    }
}
