// SPDX-License-Identifier: LGPL-3.0-or-later
//! Fast hashers for the maps an op touches on every request (object contexts, parked reads, ops in flight,
//! read tags): std's SipHash cost several hundred instructions per key there (docs/benchmarks.md, session 8
//! rdcpu). Keys a client chooses (object names, tids) go in maps built with [`SeededKeys`]; keys we assign
//! (tags, read ids, connection ids) may use the unseeded [`KeyHasher`] (deterministic iteration order).

use std::hash::Hasher;

/// `HashMap` with the unseeded [`KeyHasher`]: for keys this process assigns itself.
pub type FastMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<KeyHasher>>;

/// `HashMap` with a per-map seed ([`SeededKeys`]): for keys a client chooses.
pub type SeededMap<K, V> = std::collections::HashMap<K, V, SeededKeys>;

/// A multiply-rotate hash over 8-byte words (the FxHash scheme): store keys are 50–150 bytes and each write
/// hashes one several times, where SipHash's cost shows. Not DoS-resistant; a client that crafts colliding
/// names slows only lookups among the few hundred entries of its own PG's cache.
#[derive(Default, Clone, Copy)]
pub struct KeyHasher(u64);

impl KeyHasher {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(Self::K);
    }
}

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            self.add(u64::from_le_bytes(b));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(b));
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }
    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }
    fn write_i32(&mut self, n: i32) {
        self.add(n as u64);
    }
    fn write_i64(&mut self, n: i64) {
        self.add(n as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// [`KeyHasher`] started from a per-map random seed, for maps keyed by what clients choose (reqids, object
/// names of writes in flight): a few multiplies per key instead of SipHash's rounds, and no fixed collisions a
/// client could aim at.
#[derive(Clone, Copy)]
pub struct SeededKeys(u64);

impl Default for SeededKeys {
    fn default() -> Self {
        use std::hash::BuildHasher as _;
        SeededKeys(std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64))
    }
}

impl std::hash::BuildHasher for SeededKeys {
    type Hasher = KeyHasher;
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher(self.0)
    }
}
