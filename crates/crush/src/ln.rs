// SPDX-License-Identifier: LGPL-3.0-or-later
//! `crush_ln`: CRUSH's fixed-point `2^44 * log2(x + 1)` for the 16-bit straw2 draw, from two lookup tables.

use crate::ln_table::{LL_TBL, RH_LH_TBL};

// Table shapes the indexing below relies on: index1 - 256 + 1 <= 257, index2 <= 255.
const _: () = assert!(RH_LH_TBL.len() == 258 && LL_TBL.len() == 256);

/// `2^44 * log2(u + 1)` in CRUSH's fixed point, for `u` in `0..=0xffff`.
pub fn crush_ln(u: u16) -> u64 {
    let mut x = u32::from(u) + 1;
    let mut iexpon: u64 = 15;

    // Normalise so that bit 15 is the top bit (x in [2^15, 2^16]); x = 2^16 (u = 0xffff) already qualifies.
    if x & 0x18000 == 0 {
        let bits = (x & 0x1ffff).leading_zeros() - 16;
        x <<= bits;
        iexpon = 15 - u64::from(bits);
    }

    // The top 8 bits pick a table row: RH ~ 2^56 / index1 and LH ~ 2^48 * log2(index1 / 256).
    let index1 = ((x >> 8) << 1) as usize;
    let rh = RH_LH_TBL[index1 - 256] as u64;
    let lh = RH_LH_TBL[index1 + 1 - 256] as u64;

    // x * RH ~ 2^48 * (2^15 + xf), xf < 2^8; its low byte indexes the fine table.
    let xl64 = u64::from(x).wrapping_mul(rh) >> 48;
    let index2 = (xl64 & 0xff) as usize;
    let ll = LL_TBL[index2] as u64;

    let mut result = iexpon << (12 + 32);
    result = result.wrapping_add(lh.wrapping_add(ll) >> (48 - 12 - 32));
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_and_monotonicity() {
        // log2(1) = 0; log2(65536) = 16 -> 16 * 2^44, minus the table's short last LH entry (0xffff00000000 >> 4).
        assert_eq!(crush_ln(0), 0);
        assert_eq!(crush_ln(0xffff), (15u64 << 44) + (0xffff_0000_0000u64 >> 4));
        // Powers of two minus one land exactly on the exponent.
        assert_eq!(crush_ln(1), 1u64 << 44);
        assert_eq!(crush_ln(3), 2u64 << 44);
        assert_eq!(crush_ln(0x7fff), 15u64 << 44);
        // Monotonic up to 0xfffe; the short last LH entry makes 0xffff dip below its neighbour, as in Ceph.
        let mut prev = 0;
        for u in 1..0xffffu16 {
            let v = crush_ln(u);
            assert!(v >= prev, "crush_ln not monotonic at {u}");
            prev = v;
        }
        assert!(crush_ln(0xffff) < crush_ln(0xfffe));
    }

    #[test]
    fn rh_lh_table_follows_its_formula() {
        for k in 0..128usize {
            let rh = 2f64.powi(48) / (1.0 + k as f64 / 128.0);
            let lh = 2f64.powi(48) * (1.0 + k as f64 / 128.0).log2();
            assert!((RH_LH_TBL[2 * k] as f64 - rh).abs() <= 2.0, "RH[{k}]");
            assert!((RH_LH_TBL[2 * k + 1] as f64 - lh).abs() <= 2.0, "LH[{k}]");
        }
        assert_eq!(RH_LH_TBL[256], 0x8000_0000_0000);
        assert_eq!(RH_LH_TBL[257], 0xffff_0000_0000);
    }
}
