// SPDX-License-Identifier: LGPL-3.0-or-later
//! In-memory extent allocator over the shard's data blocks. It is not persisted: mount rebuilds it as the
//! complement of every block the tree references (tree nodes + data extents), which is also what fsck checks.

use crate::error::{Result, StoreError};
use std::collections::{BTreeMap, BTreeSet};

/// Free runs the next-fit search looks at after the cursor before it asks the length index. Bounded because after
/// random small overwrites the free space is mostly one-block runs: an unbounded scan for a 16-block run walked
/// every one of them on each 64K write (73 % of the core's time on a half-full 2 GiB shard, session 10).
const NEXT_FIT_SCAN: usize = 32;

#[derive(Debug, Clone)]
pub struct Allocator {
    first: u64,
    count: u64,
    /// start -> length of each free run; runs never touch (adjacent runs are merged).
    free: BTreeMap<u64, u64>,
    /// The same runs as (length, start): finds a run of at least n blocks in O(log runs).
    by_len: BTreeSet<(u64, u64)>,
    free_blocks: u64,
    /// Runs that are free but not yet in the maps: a checkpoint frees every block that went out of use since
    /// the previous one (after random 4K overwrites tens of thousands of one-block runs), and inserting them
    /// all at once held the core for 20–95 ms (client ops' p99). They join the maps a slice per loop turn
    /// ([`Allocator::release`]), or all at once when an allocation needs them.
    releasing: Vec<(u64, u64)>,
    releasing_blocks: u64,
    /// Next-fit cursor: new allocations continue after the last one, which keeps data writes sequential.
    cursor: u64,
}

impl Allocator {
    /// Allocator over `[first, first + count)` where `used` runs (any order, must not overlap) are taken.
    pub fn from_used(first: u64, count: u64, mut used: Vec<(u64, u64)>) -> Result<Self> {
        used.sort_unstable();
        let mut free = BTreeMap::new();
        let mut by_len = BTreeSet::new();
        let mut at = first;
        let end = first + count;
        let mut free_blocks = 0;
        for (s, l) in used {
            if s < at || s + l > end || l == 0 {
                return Err(StoreError::Corrupt(format!(
                    "block run {s}+{l} overlaps or is out of range"
                )));
            }
            if s > at {
                free.insert(at, s - at);
                by_len.insert((s - at, at));
                free_blocks += s - at;
            }
            at = s + l;
        }
        if end > at {
            free.insert(at, end - at);
            by_len.insert((end - at, at));
            free_blocks += end - at;
        }
        Ok(Allocator {
            first,
            count,
            free,
            by_len,
            free_blocks,
            releasing: Vec::new(),
            releasing_blocks: 0,
            cursor: first,
        })
    }

    /// Free blocks, those still being released included.
    pub fn free_blocks(&self) -> u64 {
        self.free_blocks + self.releasing_blocks
    }

    pub fn total_blocks(&self) -> u64 {
        self.count
    }

    /// Number of free runs (O(1), for memory estimates).
    pub fn free_run_count(&self) -> usize {
        self.free.len() + self.releasing.len()
    }

    /// The free runs in the maps (call [`Allocator::release_all`] first for all of them).
    pub fn free_runs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.free.iter().map(|(a, b)| (*a, *b))
    }

    /// Free these runs a slice at a time ([`Allocator::release`]); they count as free at once. Each run must be
    /// allocated and not freed otherwise (as for [`Allocator::free`]).
    pub fn free_later(&mut self, runs: impl IntoIterator<Item = (u64, u64)>) {
        for (s, l) in runs {
            assert!(
                s >= self.first && s + l <= self.first + self.count,
                "free out of range"
            );
            self.releasing.push((s, l));
            self.releasing_blocks += l;
        }
        // Released from the back in address order: neighbouring runs then meet in the maps one after another
        // (the maps' nodes on the path stay in cache, adjacent runs merge at once).
        self.releasing.sort_unstable_by(|a, b| b.cmp(a));
    }

    /// Runs still to be released.
    pub fn releasing_runs(&self) -> usize {
        self.releasing.len()
    }

    /// Move up to `max_runs` of the runs given to [`Allocator::free_later`] into the maps; returns how many.
    pub fn release(&mut self, max_runs: usize) -> usize {
        let n = max_runs.min(self.releasing.len());
        for _ in 0..n {
            if let Some((s, l)) = self.releasing.pop() {
                self.releasing_blocks -= l;
                self.free(s, l);
            }
        }
        n
    }

    pub fn release_all(&mut self) {
        self.release(usize::MAX);
    }

    fn insert_run(&mut self, start: u64, len: u64) {
        self.free.insert(start, len);
        self.by_len.insert((len, start));
    }

    fn remove_run(&mut self, start: u64, len: u64) {
        self.free.remove(&start);
        self.by_len.remove(&(len, start));
    }

    fn take(&mut self, start: u64, len: u64, want: u64) -> (u64, u64) {
        let got = len.min(want);
        self.remove_run(start, len);
        if len > got {
            self.insert_run(start + got, len - got);
        }
        self.free_blocks -= got;
        self.cursor = start + got;
        (start, got)
    }

    /// Allocate `n` blocks as few runs as possible (contiguous when a run is big enough).
    pub fn alloc(&mut self, n: u64) -> Result<Vec<(u64, u64)>> {
        if n > self.free_blocks() {
            return Err(StoreError::NoSpace);
        }
        if n > self.free_blocks {
            // The blocks being released are needed.
            self.release_all();
        }
        let mut out = Vec::new();
        // First choice: one contiguous run among the next few after the cursor (sequential data writes); else the
        // smallest run that holds all n blocks anywhere (best fit keeps the large runs for large writes).
        let fit = self
            .free
            .range(self.cursor..)
            .take(NEXT_FIT_SCAN)
            .find(|(_, l)| **l >= n)
            .map(|(s, l)| (*s, *l))
            .or_else(|| self.by_len.range((n, 0)..).next().map(|(l, s)| (*s, *l)));
        if let Some((s, l)) = fit {
            out.push(self.take(s, l, n));
            return Ok(out);
        }
        let mut left = n;
        while left > 0 {
            let Some((s, l)) = self
                .free
                .range(self.cursor..)
                .next()
                .or_else(|| self.free.iter().next())
                .map(|(s, l)| (*s, *l))
            else {
                return Err(StoreError::NoSpace);
            };
            let r = self.take(s, l, left);
            left -= r.1;
            out.push(r);
        }
        Ok(out)
    }

    /// One contiguous run of 1..=`max` blocks: `max` of them from the smallest run that big, else the whole
    /// largest run. A checkpoint takes its nodes' blocks from such runs so that consecutive nodes are consecutive
    /// blocks and go to the device as a few large writes. The next-fit cursor stays where it was: data writes go
    /// on filling the space they were filling (moved into a best-fit run's tail, the cursor led the data of
    /// small writes into one-block holes, one device write each).
    pub fn alloc_run(&mut self, max: u64) -> Result<(u64, u64)> {
        let max = max.max(1);
        if self.free.is_empty() && self.releasing_blocks > 0 {
            self.release_all();
        }
        let fit = self
            .by_len
            .range((max, 0)..)
            .next()
            .or_else(|| self.by_len.iter().next_back())
            .map(|(l, s)| (*s, *l));
        let cursor = self.cursor;
        let run = match fit {
            Some((s, l)) => self.take(s, l, max),
            None => return Err(StoreError::NoSpace),
        };
        self.cursor = cursor;
        Ok(run)
    }

    pub fn free(&mut self, start: u64, len: u64) {
        assert!(
            start >= self.first && start + len <= self.first + self.count,
            "free out of range"
        );
        let mut s = start;
        let mut l = len;
        if let Some((&ps, &pl)) = self.free.range(..=start).next_back() {
            assert!(ps + pl <= start, "double free of block {start}");
            if ps + pl == start {
                self.remove_run(ps, pl);
                s = ps;
                l += pl;
            }
        }
        if let Some((&ns, &nl)) = self.free.range(start..).next() {
            assert!(start + len <= ns, "double free of block {ns}");
            if start + len == ns {
                self.remove_run(ns, nl);
                l += nl;
            }
        }
        self.insert_run(s, l);
        self.free_blocks += len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn alloc_free_conserves_blocks_and_never_double_allocates() {
        let mut rng = Rng::new(3);
        let mut a = Allocator::from_used(100, 1000, vec![(150, 10), (100, 1)]).unwrap();
        assert_eq!(a.free_blocks(), 989);
        let mut owned = vec![false; 1000];
        for i in 150..160 {
            owned[i - 100] = true;
        }
        owned[0] = true;
        let mut held: Vec<(u64, u64)> = Vec::new();
        for _ in 0..2000 {
            if rng.chance(55) {
                let n = 1 + rng.below(20);
                if let Ok(runs) = a.alloc(n) {
                    assert_eq!(runs.iter().map(|r| r.1).sum::<u64>(), n);
                    for (s, l) in runs {
                        for b in s..s + l {
                            assert!(!owned[(b - 100) as usize], "block {b} handed out twice");
                            owned[(b - 100) as usize] = true;
                        }
                        held.push((s, l));
                    }
                }
            } else if !held.is_empty() {
                let (s, l) = held.swap_remove(rng.below(held.len() as u64) as usize);
                for b in s..s + l {
                    owned[(b - 100) as usize] = false;
                }
                a.free(s, l);
            }
            assert_eq!(a.free_blocks(), owned.iter().filter(|o| !**o).count() as u64);
            let mirrored: BTreeSet<(u64, u64)> = a.free.iter().map(|(s, l)| (*l, *s)).collect();
            assert_eq!(a.by_len, mirrored, "length index out of step with the free runs");
        }
        assert!(Allocator::from_used(0, 10, vec![(0, 5), (4, 2)]).is_err());
        assert!(Allocator::from_used(0, 10, vec![(8, 5)]).is_err());
    }

    /// Runs freed later count as free at once, join the maps a slice at a time, and are taken in full when an
    /// allocation needs more blocks than the maps hold.
    #[test]
    fn runs_freed_later_are_released_in_slices_or_when_needed() {
        let mut a = Allocator::from_used(0, 100, vec![(0, 100)]).unwrap();
        a.free(0, 1);
        a.free_later((2..52).map(|b| (b, 1)));
        assert_eq!(a.free_blocks(), 51);
        assert_eq!(a.free_run_count(), 51);
        assert_eq!(a.release(10), 10);
        assert_eq!(a.releasing_runs(), 40);
        assert_eq!(a.free_blocks(), 51);
        // A 30-block request: the maps hold 11 blocks.
        assert_eq!(a.alloc(30).unwrap().iter().map(|r| r.1).sum::<u64>(), 30);
        assert_eq!(a.releasing_runs(), 0);
        assert_eq!(a.free_blocks(), 21);
        let mirrored: BTreeSet<(u64, u64)> = a.free.iter().map(|(s, l)| (*l, *s)).collect();
        assert_eq!(a.by_len, mirrored);
        assert_eq!(a.free.values().sum::<u64>(), 21);
        // More blocks than the maps hold: released first; more than there are: no space.
        let mut a = Allocator::from_used(0, 10, vec![(0, 10)]).unwrap();
        a.free_later([(0, 4), (6, 4)]);
        assert!(matches!(a.alloc(9), Err(StoreError::NoSpace)));
        assert_eq!(
            a.alloc(1).unwrap().len(),
            1,
            "the maps are empty: released in full first"
        );
        assert_eq!(a.releasing_runs(), 0);
        assert_eq!(a.free_blocks(), 7);
        a.release_all();
        assert_eq!(a.alloc(7).unwrap().iter().map(|r| r.1).sum::<u64>(), 7);
        assert_eq!(a.free_blocks(), 0);
    }

    /// Free space in one-block holes (what random 4K overwrites leave) ahead of the cursor and one large run far
    /// behind it: a 16-block request still gets one contiguous run, found through the length index, and the
    /// best fit among several candidates.
    #[test]
    fn alloc_run_takes_max_blocks_or_the_largest_run() {
        // Free: [0,3) [5,6) [10,20); 3..5 and 6..10 used.
        let mut a = Allocator::from_used(0, 20, vec![(3, 2), (6, 4)]).unwrap();
        assert_eq!(a.alloc_run(4).unwrap(), (10, 4));
        // The cursor did not move: a data allocation still starts at the first free block.
        assert_eq!(a.alloc(1).unwrap(), vec![(0, 1)]);
        a.free(0, 1);
        assert_eq!(a.alloc_run(4).unwrap(), (14, 4));
        // No run of 4 left: the largest one, whole.
        assert_eq!(a.alloc_run(4).unwrap(), (0, 3));
        assert_eq!(a.alloc_run(4).unwrap(), (18, 2));
        assert_eq!(a.alloc_run(0).unwrap(), (5, 1));
        assert_eq!(a.free_blocks(), 0);
        assert!(matches!(a.alloc_run(1), Err(StoreError::NoSpace)));
        // Freed later: taken back when nothing else is free.
        a.free_later([(7, 2)]);
        assert_eq!(a.alloc_run(8).unwrap(), (7, 2));
    }

    #[test]
    fn contiguous_run_found_past_many_small_holes() {
        let n_holes = 10_000u64;
        // Blocks [0, 2 * n_holes) alternate used/free; [30_000, 30_020) and [40_000, 40_100) free; rest used.
        let mut used: Vec<(u64, u64)> = (0..n_holes).map(|i| (2 * i, 1)).collect();
        used.push((2 * n_holes, 30_000 - 2 * n_holes));
        used.push((30_020, 10_000 - 20));
        used.push((40_100, 50_000 - 40_100));
        let mut a = Allocator::from_used(0, 50_000, used).unwrap();
        assert_eq!(a.free_blocks(), n_holes + 20 + 100);
        assert_eq!(
            a.alloc(16).unwrap(),
            vec![(30_000, 16)],
            "best fit: the 20-block run"
        );
        assert_eq!(a.alloc(50).unwrap(), vec![(40_000, 50)]);
        // Next fit continues after the last allocation while a nearby run fits.
        assert_eq!(a.alloc(10).unwrap(), vec![(40_050, 10)]);
        // No run holds 200 blocks: pieces from the cursor on, then wrapping to the holes.
        let runs = a.alloc(200).unwrap();
        assert_eq!(runs.iter().map(|r| r.1).sum::<u64>(), 200);
        assert_eq!(runs[0], (40_060, 40));
        assert!(runs[1..].iter().all(|r| r.1 == 1 || r.0 == 30_016));
    }
}
