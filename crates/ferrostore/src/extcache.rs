// SPDX-License-Identifier: LGPL-3.0-or-later
//! Decoded extent maps of recently read parts of objects, so a client read finds its physical blocks and crcs
//! without walking the tree. A walk is two descents (the extent covering the first block, then the ones starting
//! inside the range) whose binary searches touch one separately allocated key per probe: on a loaded machine
//! each probe is a cache miss, and the walk was ~10 % of a 4K read's OSD CPU (docs/benchmarks.md, "read path").
//!
//! The unit is a chunk of [`CHUNK_BLOCKS`] logical blocks of one object: its entry holds every extent whose start
//! lies in `[chunk start - (MAX_EXTENT_BLOCKS - 1), chunk end)`, which includes every extent overlapping the chunk
//! (extents are at most `MAX_EXTENT_BLOCKS` long). Only chunks of at most [`MAX_CHUNK_EXTENTS`] extents are kept
//! (large writes: 64 KiB extents make ~31 per chunk); filling one costs one tree visit of that many entries. A
//! chunk with more (small random writes: up to 271) is remembered as fragmented, one entry, and its reads walk
//! the tree as before: filling it would cost several walks, and a fragmented working set larger than the cache
//! would pay that on almost every read (measured: 3x the CPU of a 4K read, `examples/lookup_cpu.rs`).
//!
//! Exact, not a hint (like the store's `MetaCache`): every committed transaction's extent entries, put or deleted,
//! are applied to the chunks holding their start ([`ExtentCache::commit`]); only the committed tree state is ever
//! cached (reads run outside transactions), and mount starts empty after replay. Bounded by a number of extents
//! (`StoreConfig::extent_cache_entries`); when full, an arbitrary eighth of the chunks goes.

use std::collections::{BTreeMap, HashMap};

use crate::format::MAX_EXTENT_BLOCKS;
use crate::keys::{self, Extent};

/// Logical blocks per cached chunk (1 MiB).
pub(crate) const CHUNK_BLOCKS: u64 = 256;
/// Extents a chunk may hold to be cached; more: the chunk is marked fragmented (see the module doc).
pub(crate) const MAX_CHUNK_EXTENTS: usize = 48;

/// A cached chunk: its extents by first logical block, or `Fragmented` (reads walk the tree).
pub(crate) enum Chunk {
    Extents(BTreeMap<u64, Extent>),
    Fragmented,
}

impl Chunk {
    /// Entries it counts against the bound.
    fn weight(&self) -> usize {
        match self {
            Chunk::Extents(m) => m.len().max(1),
            Chunk::Fragmented => 1,
        }
    }
}

/// The chunks whose entry holds an extent starting at `lb`: its own, and the next one when it may reach into it.
fn chunks_of(lb: u64) -> [u64; 2] {
    [
        lb / CHUNK_BLOCKS,
        lb.saturating_add(MAX_EXTENT_BLOCKS - 1) / CHUNK_BLOCKS,
    ]
}

/// First logical block whose extents a chunk's entry holds, and the end of the chunk.
pub(crate) fn chunk_span(chunk: u64) -> (u64, u64) {
    let start = chunk.saturating_mul(CHUNK_BLOCKS);
    (
        start.saturating_sub(MAX_EXTENT_BLOCKS - 1),
        start.saturating_add(CHUNK_BLOCKS),
    )
}

pub(crate) struct ExtentCache {
    chunks: HashMap<(u64, u64), Chunk>,
    /// Weight of all chunks: extents held (an extent near a chunk boundary counts twice; an empty or fragmented
    /// chunk counts one).
    entries: usize,
    cap: usize,
}

impl ExtentCache {
    pub fn new(cap: usize) -> Self {
        ExtentCache {
            chunks: HashMap::new(),
            entries: 0,
            cap,
        }
    }

    pub fn enabled(&self) -> bool {
        self.cap > 0
    }

    pub fn get(&self, id: u64, chunk: u64) -> Option<&Chunk> {
        self.chunks.get(&(id, chunk))
    }

    /// Cache a chunk read from the committed tree.
    pub fn insert(&mut self, id: u64, chunk: u64, c: Chunk) {
        let w = c.weight();
        if w > self.cap {
            return;
        }
        if self.entries + w > self.cap {
            let goal = self.cap - self.cap / 8;
            let victims: Vec<(u64, u64)> = self.chunks.keys().copied().collect();
            for v in victims {
                if self.entries + w <= goal {
                    break;
                }
                if let Some(old) = self.chunks.remove(&v) {
                    self.entries -= old.weight();
                }
            }
        }
        self.entries += w;
        if let Some(old) = self.chunks.insert((id, chunk), c) {
            self.entries -= old.weight();
        }
    }

    /// A transaction commits: its extent entries (put or deleted) become the cached truth of every cached chunk
    /// that holds them. An undecodable value drops the chunks instead (a read then walks the tree and reports it).
    pub fn commit(&mut self, overlay: &BTreeMap<Vec<u8>, Option<Vec<u8>>>) {
        if self.chunks.is_empty() {
            return;
        }
        use std::ops::Bound;
        let range = (
            Bound::Included(&[keys::NS_EXTENT][..]),
            Bound::Excluded(&[keys::NS_EXTENT + 1][..]),
        );
        for (k, v) in overlay.range::<[u8], _>(range) {
            let (Some(id), Some(lb)) = (
                k.get(1..9).and_then(|b| keys::be_u64(b).ok()),
                k.get(9..17).and_then(|b| keys::be_u64(b).ok()),
            ) else {
                continue;
            };
            let e = v.as_ref().map(|v| Extent::decode(v));
            let [c0, c1] = chunks_of(lb);
            for c in c0..=c1 {
                let Some(Chunk::Extents(m)) = self.chunks.get_mut(&(id, c)) else {
                    // not cached, or fragmented (a hint only: whatever changes, reads walk the tree)
                    continue;
                };
                let before = m.len().max(1);
                match &e {
                    Some(Ok(e)) => {
                        m.insert(lb, e.clone());
                    }
                    None => {
                        m.remove(&lb);
                    }
                    Some(Err(_)) => {
                        self.entries -= before;
                        self.chunks.remove(&(id, c));
                        continue;
                    }
                }
                self.entries = self.entries + m.len().max(1) - before;
            }
        }
    }

    pub fn clear(&mut self) {
        self.chunks.clear();
        self.entries = 0;
    }

    pub fn memory_bytes(&self) -> usize {
        // map slot + BTreeMap node share + the crcs' allocation (~16 of them per extent)
        self.chunks.capacity() * 48 + self.entries * (48 + 4 * MAX_EXTENT_BLOCKS as usize + 16)
    }

    #[cfg(test)]
    fn entries(&self) -> usize {
        self.entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(pb: u64, n: usize) -> Extent {
        Extent {
            pblock: pb,
            crcs: (0..n as u32).collect(),
        }
    }

    #[test]
    fn boundary_extents_live_in_both_chunks() {
        assert_eq!(chunks_of(0), [0, 0]);
        assert_eq!(chunks_of(CHUNK_BLOCKS - MAX_EXTENT_BLOCKS), [0, 0]);
        assert_eq!(chunks_of(CHUNK_BLOCKS - 1), [0, 1]);
        assert_eq!(chunks_of(CHUNK_BLOCKS), [1, 1]);
        assert_eq!(chunk_span(0), (0, CHUNK_BLOCKS));
        assert_eq!(
            chunk_span(1),
            (CHUNK_BLOCKS - (MAX_EXTENT_BLOCKS - 1), 2 * CHUNK_BLOCKS)
        );
    }

    #[test]
    fn commit_updates_cached_chunks_only_and_counts() {
        let mut c = ExtentCache::new(100);
        c.insert(7, 0, Chunk::Extents(BTreeMap::from([(0, ext(100, 16))])));
        c.insert(7, 1, Chunk::Extents(BTreeMap::new()));
        c.insert(9, 0, Chunk::Fragmented);
        let mut ov = BTreeMap::new();
        // an extent straddling chunks 0 and 1, one of another object, and a delete
        ov.insert(keys::extent(7, CHUNK_BLOCKS - 4), Some(ext(500, 8).encode()));
        ov.insert(keys::extent(8, 0), Some(ext(900, 1).encode()));
        ov.insert(keys::extent(7, 0), None);
        ov.insert(keys::extent(9, 0), Some(ext(1000, 2).encode()));
        c.commit(&ov);
        let extents = |c: &ExtentCache, id, ch| match c.get(id, ch) {
            Some(Chunk::Extents(m)) => Some(m.keys().copied().collect::<Vec<_>>()),
            _ => None,
        };
        assert_eq!(extents(&c, 7, 0), Some(vec![CHUNK_BLOCKS - 4]));
        assert_eq!(extents(&c, 7, 1), Some(vec![CHUNK_BLOCKS - 4]));
        assert!(c.get(8, 0).is_none());
        assert!(matches!(c.get(9, 0), Some(Chunk::Fragmented)));
        assert_eq!(c.entries(), 3);
        // a corrupt value drops the chunk rather than caching garbage
        let mut bad = BTreeMap::new();
        bad.insert(keys::extent(7, 3), Some(vec![1, 2, 3]));
        c.commit(&bad);
        assert!(c.get(7, 0).is_none());
        assert_eq!(c.entries(), 2);
    }

    #[test]
    fn stays_under_its_bound() {
        let mut c = ExtentCache::new(40);
        for id in 0..50u64 {
            c.insert(
                id,
                0,
                Chunk::Extents((0..4u64).map(|i| (i * 16, ext(i, 16))).collect()),
            );
            c.insert(id, 1, Chunk::Fragmented);
            assert!(c.entries() <= 40);
        }
        // a chunk larger than the whole cache is not kept
        c.insert(
            99,
            0,
            Chunk::Extents((0..41u64).map(|i| (i * 16, ext(i, 16))).collect()),
        );
        assert!(c.get(99, 0).is_none());
        assert!(!ExtentCache::new(0).enabled());
    }
}
