// SPDX-License-Identifier: LGPL-3.0-or-later
//! Value types the maps are built from. The identifier types come from `denc`; the snap interval set lives here.

use std::collections::BTreeMap;

use denc::{Decode, Decoder, Encode, Encoder, Result};

pub use denc::{EntityAddr, EntityAddrvec, Eversion, PgId, Utime, Uuid};

/// `interval_set<snapid_t>` (and the mempool flavour `snap_interval_set_t`): `le32 n` + n × (start, len).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntervalSet {
    /// start → length, disjoint and non-adjacent when built by the mutators below.
    pub m: BTreeMap<u64, u64>,
}

impl IntervalSet {
    pub fn is_empty(&self) -> bool {
        self.m.is_empty()
    }

    pub fn contains(&self, x: u64) -> bool {
        self.m
            .range(..=x)
            .next_back()
            .is_some_and(|(s, l)| x < s.saturating_add(*l))
    }

    /// Insert `[start, start+len)`, merging with neighbours (Ceph's `union_of` for one interval).
    pub fn insert(&mut self, start: u64, len: u64) {
        if len == 0 {
            return;
        }
        let mut s = start;
        let mut end = start.saturating_add(len);
        let overlapping: Vec<(u64, u64)> = self
            .m
            .range(..=end)
            .filter(|(a, l)| a.saturating_add(**l) >= s)
            .map(|(a, l)| (*a, *l))
            .collect();
        for (a, l) in overlapping {
            self.m.remove(&a);
            s = s.min(a);
            end = end.max(a.saturating_add(l));
        }
        self.m.insert(s, end - s);
    }

    pub fn union_of(&mut self, other: &IntervalSet) {
        for (s, l) in &other.m {
            self.insert(*s, *l);
        }
    }

    /// Remove every point of `other` (Ceph's `subtract`; Ceph asserts containment, we simply remove).
    pub fn subtract(&mut self, other: &IntervalSet) {
        for (os, ol) in &other.m {
            let oe = os.saturating_add(*ol);
            let hit: Vec<(u64, u64)> = self
                .m
                .range(..oe)
                .filter(|(a, l)| a.saturating_add(**l) > *os)
                .map(|(a, l)| (*a, *l))
                .collect();
            for (a, l) in hit {
                self.m.remove(&a);
                let e = a.saturating_add(l);
                if a < *os {
                    self.m.insert(a, os - a);
                }
                if e > oe {
                    self.m.insert(oe, e - oe);
                }
            }
        }
    }
}

impl Decode for IntervalSet {
    fn decode(d: &mut Decoder) -> Result<Self> {
        let n = d.length("interval_set", 16)?;
        let mut m = BTreeMap::new();
        for _ in 0..n {
            let s = d.u64()?;
            let l = d.u64()?;
            m.insert(s, l);
        }
        Ok(IntervalSet { m })
    }
}
impl Encode for IntervalSet {
    fn encode(&self, e: &mut Encoder) {
        self.m.encode(e)
    }
}

/// Address kinds (`entity_addr_t::TYPE_*`).
pub mod addr_type {
    use denc::EntityAddr;
    pub const NONE: u32 = EntityAddr::TYPE_NONE;
    pub const LEGACY: u32 = EntityAddr::TYPE_LEGACY;
    pub const MSGR2: u32 = EntityAddr::TYPE_MSGR2;
    pub const ANY: u32 = EntityAddr::TYPE_ANY;
    pub const CIDR: u32 = EntityAddr::TYPE_CIDR;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_set_ops() {
        let mut s = IntervalSet::default();
        s.insert(1, 2);
        s.insert(5, 1);
        s.insert(3, 2);
        assert_eq!(
            s.m.iter().map(|(a, b)| (*a, *b)).collect::<Vec<_>>(),
            vec![(1, 5)]
        );
        assert!(s.contains(5) && !s.contains(6) && !s.contains(0));
        let mut r = IntervalSet::default();
        r.insert(2, 2);
        s.subtract(&r);
        assert_eq!(
            s.m.iter().map(|(a, b)| (*a, *b)).collect::<Vec<_>>(),
            vec![(1, 1), (4, 2)]
        );
    }
}
