// SPDX-License-Identifier: LGPL-3.0-or-later
//! Ceph's MonMap (src/mon/MonMap.{h,cc}): which monitors form the cluster, with their addresses, features and
//! election settings. Decodes every enveloped version (3..=9) and encodes what Pacific emits (9/6, or 5/3 for
//! pre-Nautilus peers), byte-exactly.
//!
//! Sans-IO: bytes in, values out.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write as _};

use denc::features::{self, has};
use denc::{Decode, DecodeError, Decoder, Encode, Encoder, Result};
pub use denc::{EntityAddr, EntityAddrvec, Utime, Uuid};

/// `mon_feature_t`: a set of monitor feature bits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MonFeatures(pub u64);

/// Monitor feature bits (`ceph::features::mon`).
pub mod mon_feature {
    pub const KRAKEN: u64 = 1 << 0;
    pub const LUMINOUS: u64 = 1 << 1;
    pub const MIMIC: u64 = 1 << 2;
    pub const OSDMAP_PRUNE: u64 = 1 << 3;
    pub const NAUTILUS: u64 = 1 << 4;
    pub const OCTOPUS: u64 = 1 << 5;
    pub const PACIFIC: u64 = 1 << 6;
    pub const PINGING: u64 = 1 << 7;
}

impl Decode for MonFeatures {
    fn decode(d: &mut Decoder) -> Result<Self> {
        let (_, mut b) = d.start_struct("mon_feature_t", 1)?;
        Ok(MonFeatures(b.u64()?))
    }
}
impl Encode for MonFeatures {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(1, 1, |e| e.u64(self.0));
    }
}

/// `mon_info_t`: one monitor.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MonInfo {
    pub name: String,
    pub public_addrs: EntityAddrvec,
    pub priority: u16,
    pub weight: u16,
    /// Stretch-mode CRUSH location (v5).
    pub crush_loc: BTreeMap<String, String>,
}

impl Decode for MonInfo {
    fn decode(d: &mut Decoder) -> Result<Self> {
        let (h, mut b) = d.start_struct("mon_info_t", 5)?;
        let mut m = MonInfo {
            name: b.string()?,
            public_addrs: b.decode()?,
            ..MonInfo::default()
        };
        if h.version >= 2 {
            m.priority = b.u16()?;
        }
        if h.version >= 4 {
            m.weight = b.u16()?;
        }
        if h.version >= 5 {
            m.crush_loc = b.decode()?;
        }
        Ok(m)
    }
}

impl Encode for MonInfo {
    fn encode(&self, e: &mut Encoder) {
        let nautilus = has(e.features(), features::MASK_SERVER_NAUTILUS);
        let v = if nautilus { 5 } else { 2 };
        // Older decoders must not misread a crush location they do not know about.
        let compat = if self.crush_loc.is_empty() { 1 } else { 5 };
        e.versioned(v, compat, |e| {
            e.string(&self.name);
            if nautilus {
                self.public_addrs.encode(e);
            } else {
                self.public_addrs.legacy_addr().encode(e);
            }
            e.u16(self.priority);
            e.u16(self.weight);
            self.crush_loc.encode(e);
        });
    }
}

/// `ceph_release_t` names, for printing.
pub fn release_name(r: u8) -> &'static str {
    match r {
        1 => "argonaut",
        2 => "bobtail",
        3 => "cuttlefish",
        4 => "dumpling",
        5 => "emperor",
        6 => "firefly",
        7 => "giant",
        8 => "hammer",
        9 => "infernalis",
        10 => "jewel",
        11 => "kraken",
        12 => "luminous",
        13 => "mimic",
        14 => "nautilus",
        15 => "octopus",
        16 => "pacific",
        17 => "quincy",
        18 => "reef",
        19 => "squid",
        20 => "tentacle",
        _ => "unknown",
    }
}

/// Election strategies.
pub mod strategy {
    pub const CLASSIC: u8 = 1;
    pub const DISALLOW: u8 = 2;
    pub const CONNECTIVITY: u8 = 3;
}

/// The monitor map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonMap {
    pub fsid: Uuid,
    pub epoch: u32,
    pub last_changed: Utime,
    pub created: Utime,
    pub persistent_features: MonFeatures,
    pub optional_features: MonFeatures,
    /// name → monitor, in name order (Ceph's `std::map`).
    pub mon_info: BTreeMap<String, MonInfo>,
    /// rank → name.
    pub ranks: Vec<String>,
    pub min_mon_release: u8,
    pub removed_ranks: BTreeSet<i32>,
    pub strategy: u8,
    pub disallowed_leaders: BTreeSet<String>,
    pub stretch_mode_enabled: bool,
    pub tiebreaker_mon: String,
    pub stretch_marked_down_mons: BTreeSet<String>,
}

impl Default for MonMap {
    fn default() -> Self {
        MonMap {
            fsid: Uuid::default(),
            epoch: 0,
            last_changed: Utime::default(),
            created: Utime::default(),
            persistent_features: MonFeatures::default(),
            optional_features: MonFeatures::default(),
            mon_info: BTreeMap::new(),
            ranks: Vec::new(),
            min_mon_release: 0,
            removed_ranks: BTreeSet::new(),
            strategy: strategy::CLASSIC,
            disallowed_leaders: BTreeSet::new(),
            stretch_mode_enabled: false,
            tiebreaker_mon: String::new(),
            stretch_marked_down_mons: BTreeSet::new(),
        }
    }
}

/// Ceph's `legacy_or_front_addr()`: the v1 address if any, else the first one.
fn legacy_or_front(av: &EntityAddrvec) -> EntityAddr {
    av.legacy_or_front_addr()
}

/// The earliest release whose monitors set every bit in `f` (`infer_ceph_release_from_mon_features`).
fn infer_release(f: MonFeatures) -> u8 {
    if f.0 & mon_feature::PACIFIC != 0 {
        16
    } else if f.0 & mon_feature::OCTOPUS != 0 {
        15
    } else if f.0 & mon_feature::NAUTILUS != 0 {
        14
    } else if f.0 & mon_feature::MIMIC != 0 {
        13
    } else if f.0 & mon_feature::LUMINOUS != 0 {
        12
    } else if f.0 & mon_feature::KRAKEN != 0 {
        11
    } else {
        0
    }
}

impl MonMap {
    pub fn size(&self) -> usize {
        self.mon_info.len()
    }

    /// The addresses of the monitor at `rank`.
    pub fn addrs_of_rank(&self, rank: usize) -> Option<&EntityAddrvec> {
        let name = self.ranks.get(rank)?;
        self.mon_info.get(name).map(|m| &m.public_addrs)
    }

    /// Add a monitor and recompute legacy ranks (what `monmaptool --add/--addv` does for a fresh map).
    pub fn add(&mut self, name: &str, addrs: EntityAddrvec) {
        self.mon_info.insert(
            name.to_string(),
            MonInfo {
                name: name.to_string(),
                public_addrs: addrs,
                ..MonInfo::default()
            },
        );
        self.calc_legacy_ranks();
    }

    /// Ranks ordered by each monitor's legacy-or-front address, then name (`calc_legacy_ranks`).
    pub fn calc_legacy_ranks(&mut self) {
        let mut v: Vec<(EntityAddr, &String)> = self
            .mon_info
            .values()
            .map(|m| (legacy_or_front(&m.public_addrs), &m.name))
            .collect();
        v.sort();
        v.dedup();
        self.ranks = v.into_iter().map(|(_, n)| n.clone()).collect();
    }

    /// The text `monmaptool --print` writes (without its leading "monmap file" line); times in UTC.
    pub fn print(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "epoch {}", self.epoch);
        let _ = writeln!(s, "fsid {}", self.fsid);
        let _ = writeln!(s, "last_changed {}", utime_to_iso_utc(self.last_changed));
        let _ = writeln!(s, "created {}", utime_to_iso_utc(self.created));
        let _ = writeln!(
            s,
            "min_mon_release {} ({})",
            self.min_mon_release,
            release_name(self.min_mon_release)
        );
        let _ = writeln!(s, "election_strategy: {}", self.strategy);
        if self.stretch_mode_enabled {
            let _ = writeln!(s, "stretch_mode_enabled {}", self.stretch_mode_enabled);
            let _ = writeln!(s, "tiebreaker_mon {}", self.tiebreaker_mon);
        }
        for (i, name) in self.ranks.iter().enumerate() {
            let addrs = self
                .mon_info
                .get(name)
                .map(|m| m.public_addrs.to_string())
                .unwrap_or_default();
            let _ = writeln!(s, "{i}: {addrs} mon.{name}");
        }
        s
    }

    fn encode_v9(&self, e: &mut Encoder) {
        e.versioned(9, 6, |e| {
            self.fsid.encode(e);
            e.u32(self.epoch);
            self.last_changed.encode(e);
            self.created.encode(e);
            self.persistent_features.encode(e);
            self.optional_features.encode(e);
            self.mon_info.encode(e);
            self.ranks.encode(e);
            e.u8(self.min_mon_release);
            self.removed_ranks.encode(e);
            e.u8(self.strategy);
            self.disallowed_leaders.encode(e);
            e.bool(self.stretch_mode_enabled);
            e.string(&self.tiebreaker_mon);
            self.stretch_marked_down_mons.encode(e);
        });
    }

    fn encode_v5(&self, e: &mut Encoder) {
        e.versioned(5, 3, |e| {
            self.fsid.encode(e);
            e.u32(self.epoch);
            let legacy: BTreeMap<&String, EntityAddr> = self
                .mon_info
                .iter()
                .map(|(n, m)| (n, m.public_addrs.legacy_addr()))
                .collect();
            e.length(legacy.len());
            for (n, a) in legacy {
                e.string(n);
                a.encode(e);
            }
            self.last_changed.encode(e);
            self.created.encode(e);
            self.persistent_features.encode(e);
            self.optional_features.encode(e);
            self.mon_info.encode(e);
        });
    }
}

impl Encode for MonMap {
    fn encode(&self, e: &mut Encoder) {
        if has(e.features(), features::MASK_SERVER_NAUTILUS) {
            self.encode_v9(e)
        } else {
            self.encode_v5(e)
        }
    }
}

impl Decode for MonMap {
    fn decode(d: &mut Decoder) -> Result<Self> {
        // DECODE_START_LEGACY_COMPAT_LEN_16(9, 3, 3): versions 1 and 2 (2010-era) have no envelope; refuse them.
        let (h, mut b) = d.start_struct_min("MonMap", 9, 3)?;
        let v = h.version;
        let mut m = MonMap {
            fsid: b.decode()?,
            epoch: b.u32()?,
            ..MonMap::default()
        };
        let mut mon_addr: BTreeMap<String, EntityAddr> = BTreeMap::new();
        if v < 6 {
            mon_addr = b.decode()?;
        }
        m.last_changed = b.decode()?;
        m.created = b.decode()?;
        if v >= 4 {
            m.persistent_features = b.decode()?;
            m.optional_features = b.decode()?;
        }
        if v < 5 {
            for (name, addr) in mon_addr {
                m.mon_info.insert(
                    name.clone(),
                    MonInfo {
                        name,
                        public_addrs: EntityAddrvec(vec![addr]),
                        ..MonInfo::default()
                    },
                );
            }
        } else {
            m.mon_info = b.decode()?;
        }
        if v < 6 {
            m.calc_legacy_ranks();
        } else {
            m.ranks = b.decode()?;
        }
        m.min_mon_release = if v >= 7 {
            b.u8()?
        } else {
            infer_release(m.persistent_features)
        };
        if v >= 8 {
            m.removed_ranks = b.decode()?;
            m.strategy = b.u8()?;
            m.disallowed_leaders = b.decode()?;
        }
        if v >= 9 {
            m.stretch_mode_enabled = b.bool()?;
            m.tiebreaker_mon = b.string()?;
            m.stretch_marked_down_mons = b.decode()?;
        }
        if let Some(bad) = m.ranks.iter().find(|r| !m.mon_info.contains_key(*r)) {
            return Err(DecodeError::invalid(
                "MonMap",
                format!("rank names unknown monitor {bad:?}"),
            ));
        }
        Ok(m)
    }
}

/// `utime_t` as Ceph prints it in UTC: `2026-11-30T09:41:02.125614+0000`.
pub fn utime_to_iso_utc(t: Utime) -> String {
    t.to_iso_utc()
}

impl fmt::Display for MonMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.print())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_time() {
        assert_eq!(
            utime_to_iso_utc(Utime {
                sec: 1_796_031_662,
                nsec: 125_614_000
            }),
            "2026-11-30T09:41:02.125614+0000"
        );
        assert_eq!(
            utime_to_iso_utc(Utime::default()),
            "1970-01-01T00:00:00.000000+0000"
        );
    }

    #[test]
    fn build_round_trip() {
        let mut m = MonMap {
            epoch: 3,
            min_mon_release: 16,
            ..MonMap::default()
        };
        m.add(
            "b",
            EntityAddrvec(vec![EntityAddr::new(
                EntityAddr::TYPE_MSGR2,
                "10.0.0.2:3300".parse().unwrap(),
                0,
            )]),
        );
        m.add(
            "a",
            EntityAddrvec(vec![EntityAddr::new(
                EntityAddr::TYPE_MSGR2,
                "10.0.0.9:3300".parse().unwrap(),
                0,
            )]),
        );
        // Ranks follow addresses, not names.
        assert_eq!(m.ranks, vec!["b".to_string(), "a".to_string()]);
        let b = m.to_bytes(features::CEPH_FEATURES_ALL);
        assert_eq!(&b[..2], &[9, 6]);
        assert_eq!(MonMap::decode_all(b).unwrap(), m);
        // Pre-Nautilus peers get 5/3 with legacy addresses, which still decodes.
        let old = m.to_bytes(features::CEPH_FEATURES_ALL & !features::MASK_SERVER_NAUTILUS);
        assert_eq!(&old[..2], &[5, 3]);
        let back = MonMap::decode_all(old).unwrap();
        assert_eq!(back.mon_info.len(), 2);
    }
}
