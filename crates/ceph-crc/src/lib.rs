// SPDX-License-Identifier: LGPL-3.0-or-later
//! Ceph's CRC-32C convention.
//!
//! Ceph's `ceph_crc32c(seed, buf, len)` is CRC-32C (Castagnoli) *without* the usual pre- and post-inversion: the
//! result is the raw register after feeding `buf` starting from `seed`. The standard CRC-32C of `x` is therefore
//! `!ceph_crc32c(!0, x)`. The `crc32c` crate implements the standard (inverting) form, so we invert around it.
//!
//! Seeds Ceph uses: msgr2 preamble 0; msgr2 segments and epilogues `u32::MAX` (`-1`); OSDMap crc `-1`; EC
//! HashInfo `-1`. A NULL buffer in Ceph means "that many zero bytes": see [`ceph_crc32c_zeros`].
//!
//! [`combine`] shifts and combines crcs without the data; [`blocks`] lets per-page crcs computed once (msgr2's
//! receive check) travel with a buffer to whoever checksums the same bytes next (ferrostore, a resend).

pub mod blocks;
pub mod combine;

pub use combine::{BLOCK_SIZE, CrcShift, SHIFT_BLOCK, crc32c_combine, crc32c_shift};

/// CRC-32C of `data` continuing from `seed`, with Ceph's no-inversion convention.
#[inline]
pub fn ceph_crc32c(seed: u32, data: &[u8]) -> u32 {
    !crc32c::crc32c_append(!seed, data)
}

/// CRC-32C of `len` zero bytes continuing from `seed` (Ceph's `ceph_crc32c(seed, NULL, len)`): the raw
/// register shifted past `len` bytes, computed without touching any memory.
pub fn ceph_crc32c_zeros(seed: u32, len: u64) -> u32 {
    crc32c_shift(seed, len)
}

/// Incremental form: feed several buffers as if they were one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CephCrc32c(u32);

impl CephCrc32c {
    pub fn new(seed: u32) -> Self {
        CephCrc32c(seed)
    }
    pub fn update(&mut self, data: &[u8]) {
        self.0 = ceph_crc32c(self.0, data);
    }
    pub fn value(&self) -> u32 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Vectors from Ceph's src/test/common/test_crc32c.cc.
    #[test]
    fn ceph_test_vectors() {
        assert_eq!(ceph_crc32c(0, b"foo bar baz"), 4119623852);
        assert_eq!(ceph_crc32c(1234, b"foo bar baz"), 881700046);
        let big = vec![1u8; 4_096_000];
        assert_eq!(ceph_crc32c(0, &big), 31583199);
    }

    #[test]
    fn standard_crc32c_relation() {
        // Standard CRC-32C("123456789") = 0xE3069283.
        assert_eq!(!ceph_crc32c(!0, b"123456789"), 0xE306_9283);
    }

    #[test]
    fn zeros_match_explicit_buffers() {
        for len in [0usize, 1, 7, 4095, 4096, 4097, 10_000] {
            let buf = vec![0u8; len];
            for seed in [0u32, 1234, u32::MAX] {
                assert_eq!(
                    ceph_crc32c_zeros(seed, len as u64),
                    ceph_crc32c(seed, &buf),
                    "len {len} seed {seed}"
                );
            }
        }
        // Zeros from seed 0 stay 0 without inversion: a property of the raw register.
        assert_eq!(ceph_crc32c_zeros(0, 12345), 0);
        assert_ne!(ceph_crc32c_zeros(u32::MAX, 1), u32::MAX);
    }

    #[test]
    fn incremental_matches_one_shot() {
        let mut c = CephCrc32c::new(u32::MAX);
        c.update(b"foo ");
        c.update(b"bar baz");
        assert_eq!(c.value(), ceph_crc32c(u32::MAX, b"foo bar baz"));
    }
}
