// SPDX-License-Identifier: LGPL-3.0-or-later
//! `object_info_t`: an object's metadata, stored in its `_` xattr.

use std::collections::BTreeMap;

use bytes::Bytes;
use denc::{
    Decode, DecodeError, Decoder, Encode, Encoder, EntityNameT, Eversion, HObject, LegacyHeader,
    ObjectLocator, OsdReqId, SnapId, Utime,
};

use crate::watch_info::WatchInfo;

/// `object_info_t::FLAG_*`.
pub mod oi_flag {
    pub const LOST: u32 = 1 << 0;
    pub const WHITEOUT: u32 = 1 << 1;
    pub const DIRTY: u32 = 1 << 2;
    pub const OMAP: u32 = 1 << 3;
    pub const DATA_DIGEST: u32 = 1 << 4;
    pub const OMAP_DIGEST: u32 = 1 << 5;
    pub const CACHE_PIN: u32 = 1 << 6;
    pub const MANIFEST: u32 = 1 << 7;
    pub const USES_TMAP: u32 = 1 << 8;
    pub const REDIRECT_HAS_REFERENCE: u32 = 1 << 9;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    pub soid: HObject,
    pub oloc: ObjectLocator,
    pub version: Eversion,
    pub prior_version: Eversion,
    pub last_reqid: OsdReqId,
    pub size: u64,
    pub mtime: Utime,
    pub local_mtime: Utime,
    pub truncate_seq: u64,
    pub truncate_size: u64,
    pub user_version: u64,
    pub flags: u32,
    pub watchers: BTreeMap<(u64, EntityNameT), WatchInfo>,
    pub data_digest: u32,
    pub omap_digest: u32,
    pub expected_object_size: u64,
    pub expected_write_size: u64,
    pub alloc_hint_flags: u32,
    /// `object_manifest_t` (only with FLAG_MANIFEST), kept encoded.
    pub manifest: Bytes,
}

impl Default for ObjectInfo {
    fn default() -> Self {
        ObjectInfo {
            soid: HObject::default(),
            oloc: ObjectLocator::default(),
            version: Eversion::default(),
            prior_version: Eversion::default(),
            last_reqid: OsdReqId::default(),
            size: 0,
            mtime: Utime::default(),
            local_mtime: Utime::default(),
            truncate_seq: 0,
            truncate_size: 0,
            user_version: 0,
            flags: 0,
            watchers: BTreeMap::new(),
            data_digest: u32::MAX,
            omap_digest: u32::MAX,
            expected_object_size: 0,
            expected_write_size: 0,
            alloc_hint_flags: 0,
            manifest: Bytes::new(),
        }
    }
}

impl ObjectInfo {
    /// A fresh object_info_t for `soid` (Ceph's `object_info_t(soid)`: oloc from the object).
    pub fn new(soid: HObject) -> Self {
        let oloc = ObjectLocator {
            pool: soid.pool,
            key: soid.key.clone(),
            nspace: soid.nspace.clone(),
            hash: -1,
        };
        ObjectInfo {
            soid,
            oloc,
            ..Default::default()
        }
    }
    pub fn test_flag(&self, f: u32) -> bool {
        self.flags & f != 0
    }
    pub fn set_flag(&mut self, f: u32) {
        self.flags |= f;
    }
    pub fn clear_flag(&mut self, f: u32) {
        self.flags &= !f;
    }
    pub fn set_data_digest(&mut self, d: u32) {
        self.set_flag(oi_flag::DATA_DIGEST);
        self.data_digest = d;
    }
    pub fn clear_data_digest(&mut self) {
        self.clear_flag(oi_flag::DATA_DIGEST);
        self.data_digest = u32::MAX;
    }
    pub fn set_omap_digest(&mut self, d: u32) {
        self.set_flag(oi_flag::OMAP_DIGEST);
        self.omap_digest = d;
    }
    pub fn clear_omap_digest(&mut self) {
        self.clear_flag(oi_flag::OMAP_DIGEST);
        self.omap_digest = u32::MAX;
    }
}

impl Encode for ObjectInfo {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(17, 8, |e| {
            e.encode(&self.soid);
            e.encode(&self.oloc);
            e.u32(0); // category, retired (an empty string)
            e.encode(&self.version);
            e.encode(&self.prior_version);
            e.encode(&self.last_reqid);
            e.u64(self.size);
            e.encode(&self.mtime);
            if self.soid.snap == SnapId::NOSNAP {
                e.encode(&OsdReqId::default()); // wrlock_by, retired
            } else {
                e.u32(0); // legacy_snaps
            }
            e.u64(self.truncate_seq);
            e.u64(self.truncate_size);
            e.bool(self.test_flag(oi_flag::LOST));
            // old_watchers: the same watches keyed by entity only
            // (std::map::insert keeps the first watch of an entity, i.e. its lowest cookie)
            let mut old: BTreeMap<EntityNameT, &WatchInfo> = BTreeMap::new();
            for ((_, n), w) in &self.watchers {
                old.entry(*n).or_insert(w);
            }
            e.u32(old.len() as u32);
            for (n, w) in old {
                e.encode(&n);
                e.encode(w);
            }
            e.encode(&Eversion::new(0, self.user_version));
            e.bool(self.test_flag(oi_flag::USES_TMAP));
            e.u32(self.watchers.len() as u32);
            for ((c, n), w) in &self.watchers {
                e.u64(*c);
                e.encode(n);
                e.encode(w);
            }
            e.u32(self.flags);
            e.encode(&self.local_mtime);
            e.u32(self.data_digest);
            e.u32(self.omap_digest);
            e.u64(self.expected_object_size);
            e.u64(self.expected_write_size);
            e.u32(self.alloc_hint_flags);
            if self.test_flag(oi_flag::MANIFEST) {
                e.raw(&self.manifest);
            }
        })
    }
}

impl Decode for ObjectInfo {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct_legacy("object_info_t", 17, LegacyHeader::new(8, 8), |h, d| {
            let v = h.version;
            let mut soid: HObject = d.decode()?;
            let oloc: ObjectLocator = d.decode()?;
            d.bufferlist()?; // category
            let version = d.decode()?;
            let prior_version = d.decode()?;
            let last_reqid = d.decode()?;
            let size = d.u64()?;
            let mtime = d.decode()?;
            if soid.snap == SnapId::NOSNAP {
                let _: OsdReqId = d.decode()?;
            } else {
                let _: Vec<SnapId> = d.decode()?;
            }
            let truncate_seq = d.u64()?;
            let truncate_size = d.u64()?;
            let mut flags = u32::from(d.u8()?);
            let old: BTreeMap<EntityNameT, WatchInfo> = d.decode()?;
            let uv: Eversion = d.decode()?;
            if v >= 9 && d.bool()? {
                flags |= oi_flag::USES_TMAP;
            }
            if v < 10 {
                soid.pool = oloc.pool;
            }
            let watchers = if v >= 11 {
                d.decode()?
            } else {
                old.into_iter().map(|(n, w)| ((w.cookie, n), w)).collect()
            };
            if v >= 13 {
                flags = d.u32()?;
            }
            let local_mtime = if v >= 14 { d.decode()? } else { Utime::default() };
            let (data_digest, omap_digest) = if v >= 15 {
                (d.u32()?, d.u32()?)
            } else {
                (u32::MAX, u32::MAX)
            };
            let (expected_object_size, expected_write_size, alloc_hint_flags) = if v >= 16 {
                (d.u64()?, d.u64()?, d.u32()?)
            } else {
                (0, 0, 0)
            };
            let manifest = if v >= 17 && flags & oi_flag::MANIFEST != 0 {
                d.take_bytes(d.remaining())?
            } else {
                Bytes::new()
            };
            Ok(ObjectInfo {
                soid,
                oloc,
                version,
                prior_version,
                last_reqid,
                size,
                mtime,
                local_mtime,
                truncate_seq,
                truncate_size,
                user_version: uv.version,
                flags,
                watchers,
                data_digest,
                omap_digest,
                expected_object_size,
                expected_write_size,
                alloc_hint_flags,
                manifest,
            })
        })
    }
}
