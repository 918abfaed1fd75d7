// SPDX-License-Identifier: LGPL-3.0-or-later
//! Shifting and combining CRC-32C values without touching the data again.
//!
//! A CRC register is a polynomial over GF(2) modulo the Castagnoli polynomial P. Feeding `n` zero bytes into a
//! register multiplies it by x^(8n) mod P, and the register is linear in its input, so for the standard CRC-32C
//! (`crc32c::crc32c`): `crc(A‖B) = crc(A)·x^(8|B|) ⊕ crc(B)`. The inversions cancel; see [`crc32c_combine`].
//!
//! Polynomials are kept in the reflected bit order the hardware instruction uses: bit 31 is x^0, bit 0 is x^31.

/// The Castagnoli polynomial without its x^32 term, reflected.
const POLY: u32 = 0x82F6_3B78;
/// x^0 in reflected order.
const ONE: u32 = 0x8000_0000;

/// `a·b mod P` (reflected order): for each power x^i present in `a` (from x^0 up), add `b·x^i`.
const fn mul(a: u32, b: u32) -> u32 {
    let mut a = a;
    let mut b = b;
    let mut p = 0;
    let mut i = 0;
    while i < 32 {
        if a & ONE != 0 {
            p ^= b;
        }
        a <<= 1;
        // b·x: a right shift in reflected order; x^31·x = x^32 ≡ POLY.
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
        i += 1;
    }
    p
}

/// `X2K[k]` = x^(2^k) mod P, for k < 67 (enough for 8·n with any 64-bit byte count n).
const X2K: [u32; 67] = {
    let mut t = [0u32; 67];
    t[0] = ONE >> 1; // x^1
    let mut k = 1;
    while k < 67 {
        t[k] = mul(t[k - 1], t[k - 1]);
        k += 1;
    }
    t
};

/// x^(8·len) mod P: the operator that moves a register past `len` bytes.
const fn x_pow_bytes(len: u64) -> u32 {
    let mut r = ONE;
    let mut n = len;
    let mut k = 3; // 8·len: bit j of len is bit j+3 of the exponent
    while n != 0 {
        if n & 1 != 0 {
            r = mul(r, X2K[k]);
        }
        n >>= 1;
        k += 1;
    }
    r
}

/// A raw CRC register after `len` zero bytes (no inversions): `crc·x^(8·len) mod P`. With Ceph's convention this
/// is `ceph_crc32c(crc, NULL, len)`.
pub fn crc32c_shift(crc: u32, len: u64) -> u32 {
    mul(x_pow_bytes(len), crc)
}

/// The standard CRC-32C of `A‖B` from `crc32c(A)`, `crc32c(B)` and `|B|`.
///
/// With `raw(s, X)` the register after feeding X from s, `crc(X) = raw(!0, X) ⊕ !0`, and by linearity
/// `raw(s, B) = s·x^(8|B|) ⊕ raw(0, B)`: substituting gives `crc(A‖B) = crc(A)·x^(8|B|) ⊕ crc(B)`.
pub fn crc32c_combine(crc_a: u32, crc_b: u32, len_b: u64) -> u32 {
    crc32c_shift(crc_a, len_b) ^ crc_b
}

/// A precomputed shift by a fixed number of bytes: four table lookups instead of a 32-step multiplication
/// (the multiplication is linear in the register, so it splits over the register's bytes).
pub struct CrcShift {
    tables: [[u32; 256]; 4],
    len: u64,
}

impl CrcShift {
    pub const fn new(len: u64) -> Self {
        let op = x_pow_bytes(len);
        let mut tables = [[0u32; 256]; 4];
        let mut k = 0;
        while k < 4 {
            let mut v = 0;
            while v < 256 {
                tables[k][v] = mul(op, (v as u32) << (8 * k));
                v += 1;
            }
            k += 1;
        }
        CrcShift { tables, len }
    }

    /// The byte count this operator shifts by.
    pub const fn len(&self) -> u64 {
        self.len
    }

    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `crc32c_shift(crc, self.len())`.
    #[inline]
    pub fn shift(&self, crc: u32) -> u32 {
        let [b0, b1, b2, b3] = crc.to_le_bytes();
        self.tables[0][usize::from(b0)]
            ^ self.tables[1][usize::from(b1)]
            ^ self.tables[2][usize::from(b2)]
            ^ self.tables[3][usize::from(b3)]
    }

    /// `crc32c_combine(crc_a, crc_b, self.len())`: `crc_b` covers exactly `self.len()` bytes.
    #[inline]
    pub fn combine(&self, crc_a: u32, crc_b: u32) -> u32 {
        self.shift(crc_a) ^ crc_b
    }
}

/// The block size ferrostore checksums and msgr2 page-aligns data segments to.
pub const BLOCK_SIZE: usize = 4096;

/// Shift by one 4 KiB block.
pub static SHIFT_BLOCK: CrcShift = CrcShift::new(BLOCK_SIZE as u64);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn multiplication_identities() {
        assert_eq!(mul(ONE, 0x1234_5678), 0x1234_5678);
        assert_eq!(mul(0x1234_5678, ONE), 0x1234_5678);
        assert_eq!(x_pow_bytes(0), ONE);
        // x^32 ≡ POLY (reflected): x^8 four times.
        assert_eq!(x_pow_bytes(4), POLY);
    }

    #[test]
    fn shift_is_feeding_zeros() {
        for len in [0usize, 1, 3, 8, 255, 4096, 65_537] {
            let zeros = vec![0u8; len];
            for crc in [0u32, 1, 0xDEAD_BEEF, u32::MAX] {
                // crc32c_append inverts around the register: feed zeros to the raw register `crc`.
                let raw = !crc32c::crc32c_append(!crc, &zeros);
                assert_eq!(crc32c_shift(crc, len as u64), raw, "len {len} crc {crc:#x}");
            }
        }
    }

    #[test]
    fn block_operator_matches_generic_shift() {
        for crc in [0u32, 1, 0x8000_0000, 0xDEAD_BEEF, u32::MAX] {
            assert_eq!(SHIFT_BLOCK.shift(crc), crc32c_shift(crc, 4096));
        }
        assert_eq!(SHIFT_BLOCK.len(), 4096);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
        #[test]
        fn combine_matches_straight_crc(a in proptest::collection::vec(any::<u8>(), 0..9000),
                                        b in proptest::collection::vec(any::<u8>(), 0..9000)) {
            let whole = crc32c::crc32c(&[a.as_slice(), b.as_slice()].concat());
            prop_assert_eq!(crc32c_combine(crc32c::crc32c(&a), crc32c::crc32c(&b), b.len() as u64), whole);
        }

        #[test]
        fn block_combine_matches_straight_crc(a in proptest::collection::vec(any::<u8>(), 0..5000),
                                              seed in any::<u64>()) {
            let b: Vec<u8> = (0..4096u64).map(|i| (i.wrapping_mul(seed | 1) >> 7) as u8).collect();
            let whole = crc32c::crc32c(&[a.as_slice(), b.as_slice()].concat());
            prop_assert_eq!(SHIFT_BLOCK.combine(crc32c::crc32c(&a), crc32c::crc32c(&b)), whole);
        }

        #[test]
        fn shift_composes(crc in any::<u32>(), m in 0u64..1 << 40, n in 0u64..1 << 40) {
            prop_assert_eq!(crc32c_shift(crc32c_shift(crc, m), n), crc32c_shift(crc, m + n));
        }
    }
}
