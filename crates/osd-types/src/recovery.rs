// SPDX-License-Identifier: LGPL-3.0-or-later
//! Object recovery records carried by MOSDPGPush/PushReply/Pull: `ObjectRecoveryInfo`, `ObjectRecoveryProgress`,
//! `PushOp`, `PullOp`, `PushReplyOp` (osd_types.h).

use std::collections::BTreeMap;

use bytes::Bytes;
use denc::{Decode, DecodeError, Decoder, Encode, Encoder, Eversion, HObject};

use crate::object_info::ObjectInfo;
use crate::snapset::{IntervalSet, SnapSet};

/// `ObjectRecoveryInfo`: what is being recovered (object, version, size, its object_info_t and SnapSet, which
/// byte ranges to copy and which to clone from other snaps).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRecoveryInfo {
    pub soid: HObject,
    pub version: Eversion,
    pub size: u64,
    pub oi: ObjectInfo,
    pub ss: SnapSet,
    pub copy_subset: IntervalSet,
    pub clone_subset: BTreeMap<HObject, IntervalSet>,
    pub object_exist: bool,
}

impl Default for ObjectRecoveryInfo {
    fn default() -> Self {
        ObjectRecoveryInfo {
            soid: HObject::default(),
            version: Eversion::default(),
            size: 0,
            oi: ObjectInfo::default(),
            ss: SnapSet::default(),
            copy_subset: IntervalSet::new(),
            clone_subset: BTreeMap::new(),
            object_exist: true,
        }
    }
}

impl Encode for ObjectRecoveryInfo {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(3, 1, |e| {
            e.encode(&self.soid);
            e.encode(&self.version);
            e.u64(self.size);
            e.encode(&self.oi);
            e.encode(&self.ss);
            e.encode(&self.copy_subset);
            e.encode(&self.clone_subset);
            e.bool(self.object_exist);
        })
    }
}
impl Decode for ObjectRecoveryInfo {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("ObjectRecoveryInfo", 3, |h, d| {
            if h.version < 2 {
                return Err(DecodeError::TooOld {
                    type_name: "ObjectRecoveryInfo",
                    version: h.version,
                    oldest: 2,
                });
            }
            Ok(ObjectRecoveryInfo {
                soid: d.decode()?,
                version: d.decode()?,
                size: d.u64()?,
                oi: d.decode()?,
                ss: d.decode()?,
                copy_subset: d.decode()?,
                clone_subset: d.decode()?,
                object_exist: if h.version >= 3 { d.bool()? } else { true },
            })
        })
    }
}

/// `ObjectRecoveryProgress`: how far a push has got (data offset, omap key) and whether it is the first chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRecoveryProgress {
    pub first: bool,
    pub data_complete: bool,
    pub data_recovered_to: u64,
    /// The next omap key to push (`std::string` on the wire: arbitrary bytes, e.g. rgw's binary index keys).
    pub omap_recovered_to: Bytes,
    pub omap_complete: bool,
}

impl Default for ObjectRecoveryProgress {
    fn default() -> Self {
        ObjectRecoveryProgress {
            first: true,
            data_complete: false,
            data_recovered_to: 0,
            omap_recovered_to: Bytes::new(),
            omap_complete: false,
        }
    }
}

impl ObjectRecoveryProgress {
    pub fn is_complete(&self, info: &ObjectRecoveryInfo) -> bool {
        (self.data_recovered_to >= info.copy_subset.iter().map(|(o, l)| o + l).max().unwrap_or(0))
            && self.omap_complete
    }
}

impl Encode for ObjectRecoveryProgress {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(1, 1, |e| {
            e.bool(self.first);
            e.bool(self.data_complete);
            e.u64(self.data_recovered_to);
            e.bytes(&self.omap_recovered_to);
            e.bool(self.omap_complete);
        })
    }
}
impl Decode for ObjectRecoveryProgress {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("ObjectRecoveryProgress", 1, |_, d| {
            Ok(ObjectRecoveryProgress {
                first: d.bool()?,
                data_complete: d.bool()?,
                data_recovered_to: d.u64()?,
                omap_recovered_to: d.bufferlist()?,
                omap_complete: d.bool()?,
            })
        })
    }
}

/// `PushOp`: one chunk of an object sent to a shard that lacks it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushOp {
    pub soid: HObject,
    pub version: Eversion,
    pub data: Bytes,
    pub data_included: IntervalSet,
    pub omap_header: Bytes,
    pub omap_entries: BTreeMap<Bytes, Bytes>,
    pub attrset: BTreeMap<Bytes, Bytes>,
    pub recovery_info: ObjectRecoveryInfo,
    pub before_progress: ObjectRecoveryProgress,
    pub after_progress: ObjectRecoveryProgress,
}

impl Encode for PushOp {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(1, 1, |e| {
            e.encode(&self.soid);
            e.encode(&self.version);
            e.bytes(&self.data);
            e.encode(&self.data_included);
            e.bytes(&self.omap_header);
            e.encode(&self.omap_entries);
            e.encode(&self.attrset);
            e.encode(&self.recovery_info);
            e.encode(&self.after_progress);
            e.encode(&self.before_progress);
        })
    }
}
impl Decode for PushOp {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("PushOp", 1, |_, d| {
            let soid = d.decode()?;
            let version = d.decode()?;
            let data = d.bufferlist()?;
            let data_included = d.decode()?;
            let omap_header = d.bufferlist()?;
            let omap_entries = d.decode()?;
            let attrset = d.decode()?;
            let recovery_info = d.decode()?;
            let after_progress = d.decode()?;
            let before_progress = d.decode()?;
            Ok(PushOp {
                soid,
                version,
                data,
                data_included,
                omap_header,
                omap_entries,
                attrset,
                recovery_info,
                before_progress,
                after_progress,
            })
        })
    }
}

/// `PullOp`: the primary asks a shard to push an object to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PullOp {
    pub soid: HObject,
    pub recovery_info: ObjectRecoveryInfo,
    pub recovery_progress: ObjectRecoveryProgress,
}

impl Encode for PullOp {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(1, 1, |e| {
            e.encode(&self.soid);
            e.encode(&self.recovery_info);
            e.encode(&self.recovery_progress);
        })
    }
}
impl Decode for PullOp {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("PullOp", 1, |_, d| {
            Ok(PullOp {
                soid: d.decode()?,
                recovery_info: d.decode()?,
                recovery_progress: d.decode()?,
            })
        })
    }
}

/// `PushReplyOp`: acknowledges a push chunk.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushReplyOp {
    pub soid: HObject,
}

impl Encode for PushReplyOp {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(1, 1, |e| e.encode(&self.soid))
    }
}
impl Decode for PushReplyOp {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("PushReplyOp", 1, |_, d| Ok(PushReplyOp { soid: d.decode()? }))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Omap keys are bytes (rgw's bucket index keys start with 0x80): the push progress keeps them exactly.
    #[test]
    fn progress_keeps_a_binary_omap_key() {
        let p = ObjectRecoveryProgress {
            first: false,
            omap_recovered_to: Bytes::from_static(&[0x80, b'1', 0xff, 0]),
            ..Default::default()
        };
        let b = p.to_bytes(u64::MAX);
        assert_eq!(ObjectRecoveryProgress::decode_all(b).unwrap(), p);
    }
}
