// SPDX-License-Identifier: LGPL-3.0-or-later
//! `store_statfs_t`: an object store's space accounting (osd_stat_t, MPGStats' per-pool map).

use denc::{Decode, DecodeError, Decoder, Encode, Encoder};

/// Bytes, in Ceph's field (and encoding) order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStatfs {
    pub total: u64,
    pub available: u64,
    pub internally_reserved: u64,
    pub allocated: u64,
    pub data_stored: u64,
    pub data_compressed: u64,
    pub data_compressed_allocated: u64,
    pub data_compressed_original: u64,
    pub omap_allocated: u64,
    pub internal_metadata: u64,
}

impl StoreStatfs {
    /// `kb()`: total in KiB.
    pub fn kb(&self) -> i64 {
        (self.total >> 10) as i64
    }
    /// `kb_avail()`.
    pub fn kb_avail(&self) -> i64 {
        (self.available >> 10) as i64
    }
    /// `get_used_raw()` in KiB: total - available - internally_reserved.
    pub fn kb_used_raw(&self) -> i64 {
        (self
            .total
            .saturating_sub(self.available)
            .saturating_sub(self.internally_reserved)
            >> 10) as i64
    }
    pub fn kb_used_data(&self) -> i64 {
        (self.allocated >> 10) as i64
    }
    pub fn kb_used_omap(&self) -> i64 {
        (self.omap_allocated >> 10) as i64
    }
    pub fn kb_used_internal_metadata(&self) -> i64 {
        (self.internal_metadata >> 10) as i64
    }
}

impl Encode for StoreStatfs {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(1, 1, |e| {
            for v in [
                self.total,
                self.available,
                self.internally_reserved,
                self.allocated,
                self.data_stored,
                self.data_compressed,
                self.data_compressed_allocated,
                self.data_compressed_original,
                self.omap_allocated,
                self.internal_metadata,
            ] {
                e.u64(v);
            }
        })
    }
}

impl Decode for StoreStatfs {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("store_statfs_t", 1, |_, d| {
            Ok(StoreStatfs {
                total: d.u64()?,
                available: d.u64()?,
                internally_reserved: d.u64()?,
                allocated: d.u64()?,
                data_stored: d.u64()?,
                data_compressed: d.u64()?,
                data_compressed_allocated: d.u64()?,
                data_compressed_original: d.u64()?,
                omap_allocated: d.u64()?,
                internal_metadata: d.u64()?,
            })
        })
    }
}
