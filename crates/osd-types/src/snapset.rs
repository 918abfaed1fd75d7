// SPDX-License-Identifier: LGPL-3.0-or-later
//! `SnapSet`: a head object's snapshot bookkeeping (the `snapset` xattr).

use std::collections::BTreeMap;

use denc::{Decode, DecodeError, Decoder, Encode, Encoder, LegacyHeader, SnapId};

/// `interval_set<uint64_t>` as Ceph encodes it: a map offset → length.
pub type IntervalSet = BTreeMap<u64, u64>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapSet {
    pub seq: SnapId,
    /// Legacy `head_exists` byte (always written as true).
    pub head_exists: bool,
    pub snaps: Vec<SnapId>,
    pub clones: Vec<SnapId>,
    pub clone_overlap: BTreeMap<SnapId, IntervalSet>,
    pub clone_size: BTreeMap<SnapId, u64>,
    pub clone_snaps: BTreeMap<SnapId, Vec<SnapId>>,
}

impl Default for SnapSet {
    fn default() -> Self {
        SnapSet {
            seq: SnapId(0),
            head_exists: true,
            snaps: Vec::new(),
            clones: Vec::new(),
            clone_overlap: BTreeMap::new(),
            clone_size: BTreeMap::new(),
            clone_snaps: BTreeMap::new(),
        }
    }
}

impl Encode for SnapSet {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(3, 2, |e| {
            e.encode(&self.seq);
            e.bool(self.head_exists);
            e.encode(&self.snaps);
            e.encode(&self.clones);
            e.encode(&self.clone_overlap);
            e.encode(&self.clone_size);
            e.encode(&self.clone_snaps);
        })
    }
}

impl Decode for SnapSet {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct_legacy("SnapSet", 3, LegacyHeader::new(2, 2), |h, d| {
            Ok(SnapSet {
                seq: d.decode()?,
                head_exists: d.bool()?,
                snaps: d.decode()?,
                clones: d.decode()?,
                clone_overlap: d.decode()?,
                clone_size: d.decode()?,
                clone_snaps: if h.version >= 3 {
                    d.decode()?
                } else {
                    BTreeMap::new()
                },
            })
        })
    }
}
