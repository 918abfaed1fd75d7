// SPDX-License-Identifier: LGPL-3.0-or-later
//! The hashes placement depends on, bit for bit as Ceph computes them:
//!
//! * CRUSH's `rjenkins1` integer hashes (`crush_hash32_{1..5}`, ceph/ceph `src/crush/hash.c`): Bob Jenkins' 96-bit
//!   mix over 32-bit words with CRUSH's seed and two fixed filler words.
//! * The object-name hashes of `src/common/ceph_hash.cc` (`ceph_str_hash_rjenkins`, `ceph_str_hash_linux`), which a
//!   pool selects with its `object_hash` field.
//! * `ceph_stable_mod` (`src/include/rados.h`), which folds a hash onto `pg_num` placement groups so that
//!   splitting a PG moves only the objects of that PG.

/// `CRUSH_HASH_RJENKINS1`, the only hash CRUSH has; a bucket naming any other hash gets 0 from every call.
pub const CRUSH_HASH_RJENKINS1: u8 = 0;

/// `CEPH_STR_HASH_LINUX` (pg_pool_t::object_hash).
pub const CEPH_STR_HASH_LINUX: u8 = 1;
/// `CEPH_STR_HASH_RJENKINS` (pg_pool_t::object_hash; the default).
pub const CEPH_STR_HASH_RJENKINS: u8 = 2;

const CRUSH_HASH_SEED: u32 = 1_315_423_911;
/// The fixed filler words CRUSH mixes in alongside the inputs.
const X: u32 = 231_232;
const Y: u32 = 1232;

/// Jenkins' mix of three 32-bit words (all arithmetic modulo 2^32).
#[inline(always)]
fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    // Each row: a -= b; a -= c; a ^= c >> 13, rotating the roles of the three words.
    *a = a.wrapping_sub(*b).wrapping_sub(*c) ^ (*c >> 13);
    *b = b.wrapping_sub(*c).wrapping_sub(*a) ^ (*a << 8);
    *c = c.wrapping_sub(*a).wrapping_sub(*b) ^ (*b >> 13);
    *a = a.wrapping_sub(*b).wrapping_sub(*c) ^ (*c >> 12);
    *b = b.wrapping_sub(*c).wrapping_sub(*a) ^ (*a << 16);
    *c = c.wrapping_sub(*a).wrapping_sub(*b) ^ (*b >> 5);
    *a = a.wrapping_sub(*b).wrapping_sub(*c) ^ (*c >> 3);
    *b = b.wrapping_sub(*c).wrapping_sub(*a) ^ (*a << 10);
    *c = c.wrapping_sub(*a).wrapping_sub(*b) ^ (*b >> 15);
}

/// Mixes `(p, q, hash)` where `p` and `q` are copies: CRUSH's mix mutates its first two arguments too, and the
/// sequences below rely on those mutated values being reused. Locals keep that explicit.
macro_rules! mixes {
    ($h:ident; $(($p:ident, $q:ident)),* $(,)?) => {
        $( mix(&mut $p, &mut $q, &mut $h); )*
    };
}

pub fn rjenkins1_1(a: u32) -> u32 {
    let mut a = a;
    let mut hash = CRUSH_HASH_SEED ^ a;
    let mut b = a;
    let (mut x, mut y) = (X, Y);
    mixes!(hash; (b, x), (y, a));
    hash
}

pub fn rjenkins1_2(a: u32, b: u32) -> u32 {
    let (mut a, mut b) = (a, b);
    let mut hash = CRUSH_HASH_SEED ^ a ^ b;
    let (mut x, mut y) = (X, Y);
    mixes!(hash; (a, b), (x, a), (b, y));
    hash
}

pub fn rjenkins1_3(a: u32, b: u32, c: u32) -> u32 {
    let (mut a, mut b, mut c) = (a, b, c);
    let mut hash = CRUSH_HASH_SEED ^ a ^ b ^ c;
    let (mut x, mut y) = (X, Y);
    mixes!(hash; (a, b), (c, x), (y, a), (b, x), (y, c));
    hash
}

pub fn rjenkins1_4(a: u32, b: u32, c: u32, d: u32) -> u32 {
    let (mut a, mut b, mut c, mut d) = (a, b, c, d);
    let mut hash = CRUSH_HASH_SEED ^ a ^ b ^ c ^ d;
    let (mut x, mut y) = (X, Y);
    mixes!(hash; (a, b), (c, d), (a, x), (y, b), (c, x), (y, d));
    hash
}

pub fn rjenkins1_5(a: u32, b: u32, c: u32, d: u32, e: u32) -> u32 {
    let (mut a, mut b, mut c, mut d, mut e) = (a, b, c, d, e);
    let mut hash = CRUSH_HASH_SEED ^ a ^ b ^ c ^ d ^ e;
    let (mut x, mut y) = (X, Y);
    mixes!(hash; (a, b), (c, d), (e, x), (y, a), (b, x), (y, c), (d, x), (y, e));
    hash
}

/// `crush_hash32(type, a)`: 0 for an unknown hash type, as Ceph does.
pub fn crush_hash32(hash_type: u8, a: u32) -> u32 {
    if hash_type == CRUSH_HASH_RJENKINS1 {
        rjenkins1_1(a)
    } else {
        0
    }
}

pub fn crush_hash32_2(hash_type: u8, a: u32, b: u32) -> u32 {
    if hash_type == CRUSH_HASH_RJENKINS1 {
        rjenkins1_2(a, b)
    } else {
        0
    }
}

pub fn crush_hash32_3(hash_type: u8, a: u32, b: u32, c: u32) -> u32 {
    if hash_type == CRUSH_HASH_RJENKINS1 {
        rjenkins1_3(a, b, c)
    } else {
        0
    }
}

pub fn crush_hash32_4(hash_type: u8, a: u32, b: u32, c: u32, d: u32) -> u32 {
    if hash_type == CRUSH_HASH_RJENKINS1 {
        rjenkins1_4(a, b, c, d)
    } else {
        0
    }
}

pub fn crush_hash32_5(hash_type: u8, a: u32, b: u32, c: u32, d: u32, e: u32) -> u32 {
    if hash_type == CRUSH_HASH_RJENKINS1 {
        rjenkins1_5(a, b, c, d, e)
    } else {
        0
    }
}

fn le_word(k: &[u8]) -> u32 {
    // Callers pass at most 4 bytes; missing high bytes count as zero.
    k.iter()
        .take(4)
        .enumerate()
        .fold(0u32, |acc, (i, &byte)| acc | (u32::from(byte) << (8 * i)))
}

/// `ceph_str_hash_rjenkins`: Jenkins' lookup2 over the name bytes, golden-ratio initial state, length folded into
/// the third word. This is what maps an object name to its 32-bit placement seed in default pools.
pub fn ceph_str_hash_rjenkins(s: &[u8]) -> u32 {
    let mut a: u32 = 0x9e37_79b9;
    let mut b: u32 = a;
    let mut c: u32 = 0;
    let mut chunks = s.chunks_exact(12);
    for k in &mut chunks {
        a = a.wrapping_add(le_word(&k[0..4]));
        b = b.wrapping_add(le_word(&k[4..8]));
        c = c.wrapping_add(le_word(&k[8..12]));
        mix(&mut a, &mut b, &mut c);
    }
    let tail = chunks.remainder();
    // Lengths are 32-bit in Ceph; a longer name wraps the same way.
    c = c.wrapping_add(s.len() as u32);
    // The tail's first 4 bytes go to a, the next 4 to b, and bytes 8..11 to c shifted up one byte, because the low
    // byte of c already holds the length.
    let (ta, rest) = tail.split_at(tail.len().min(4));
    let (tb, tc) = rest.split_at(rest.len().min(4));
    a = a.wrapping_add(le_word(ta));
    b = b.wrapping_add(le_word(tb));
    c = c.wrapping_add(le_word(tc) << 8);
    mix(&mut a, &mut b, &mut c);
    c
}

/// `ceph_str_hash_linux`: the old Linux dcache name hash (bytes are unsigned).
pub fn ceph_str_hash_linux(s: &[u8]) -> u32 {
    s.iter().fold(0u32, |h, &ch| {
        let ch = u32::from(ch);
        h.wrapping_add(ch << 4).wrapping_add(ch >> 4).wrapping_mul(11)
    })
}

/// `ceph_str_hash(type, s)`: `None` for a hash type Ceph does not know (Ceph returns -1 there).
pub fn ceph_str_hash(hash_type: u8, s: &[u8]) -> Option<u32> {
    match hash_type {
        CEPH_STR_HASH_LINUX => Some(ceph_str_hash_linux(s)),
        CEPH_STR_HASH_RJENKINS => Some(ceph_str_hash_rjenkins(s)),
        _ => None,
    }
}

/// `ceph_stable_mod(x, b, bmask)`: `x mod b` that stays stable while `b` grows toward the next power of two
/// (`bmask` = next power of two minus one, as pg_pool_t's `pg_num_mask`).
pub fn ceph_stable_mod(x: u32, b: u32, bmask: u32) -> u32 {
    if x & bmask < b {
        x & bmask
    } else {
        x & (bmask >> 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_mod_folds_upper_half() {
        // pg_num 12, mask 15: 13 & 15 = 13 >= 12 -> 13 & 7 = 5.
        assert_eq!(ceph_stable_mod(13, 12, 15), 5);
        assert_eq!(ceph_stable_mod(11, 12, 15), 11);
        assert_eq!(ceph_stable_mod(0xffff_fff3, 12, 15), 3);
    }

    #[test]
    fn linux_hash_is_the_dcache_hash() {
        // Computed by hand: 'a' = 0x61 -> (0 + 0x610 + 6) * 11 = 0x42C2.
        assert_eq!(ceph_str_hash_linux(b"a"), (0x610 + 6) * 11);
        assert_eq!(ceph_str_hash_linux(b""), 0);
    }

    #[test]
    fn unknown_hash_types_yield_zero() {
        assert_eq!(crush_hash32_2(1, 5, 6), 0);
        assert_eq!(ceph_str_hash(7, b"x"), None);
    }
}
