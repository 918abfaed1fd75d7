// SPDX-License-Identifier: LGPL-3.0-or-later
//! Per-page CRC-32Cs that travel with a buffer, so a byte that was checksummed once (msgr2 verifying a received
//! data segment) is not read again to checksum it for a 4 KiB store block or for a resend.
//!
//! The carrier is the buffer itself. [`attach`] computes the standard CRC-32C of every whole 4 KiB page the
//! buffer covers (pages by memory address) while computing the crc of the whole, and returns the buffer wrapped
//! so that, while any slice of it is alive, a registry maps those pages' addresses to their crcs. Anything
//! holding a slice can then ask [`page_crcs`] — after the message was decoded, sliced into ops, put in a store
//! transaction or a resend — without a field for the crcs on each of those types. A copy simply has no entry and
//! its user computes the crc as before.
//!
//! Why this is sound: an entry exists exactly while its wrapper is alive (registered when made, removed in
//! `Drop` before the wrapper releases the memory), and `Bytes` memory cannot change while any handle to it is
//! alive, so a page's content is the one its crc was computed from for as long as the entry can be found. A
//! caller that found an entry holds a handle to the memory itself, so the crc stays valid after a lookup too.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;

use crate::combine::{BLOCK_SIZE, SHIFT_BLOCK, crc32c_combine};

/// Pages of one attached buffer: the address of the first whole page and the crc of each whole page.
#[derive(Debug)]
struct Entry {
    id: u64,
    start: usize,
    crcs: Box<[u32]>,
}

/// Live entries by first page address. One lock for all cores: it is taken a few times per large message
/// (attach, drop, a store write, a resend), never per page, and skipped while nothing is attached.
static REGISTRY: Mutex<BTreeMap<usize, Arc<Entry>>> = Mutex::new(BTreeMap::new());
static LIVE: AtomicUsize = AtomicUsize::new(0);
static IDS: AtomicU64 = AtomicU64::new(1);

fn registry() -> MutexGuard<'static, BTreeMap<usize, Arc<Entry>>> {
    // A panic elsewhere while holding the lock leaves the map consistent (every update is one call).
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// Keeps the memory (through `bytes`) and the registry entry together.
struct Owner {
    bytes: Bytes,
    /// (key, id) of our entry, if we registered one.
    key: Option<(usize, u64)>,
}

impl AsRef<[u8]> for Owner {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        if let Some((key, id)) = self.key {
            let mut r = registry();
            if r.get(&key).is_some_and(|e| e.id == id) {
                r.remove(&key);
                LIVE.fetch_sub(1, Ordering::Relaxed);
            }
        }
        // `bytes` (the memory) is released after the entry is gone.
    }
}

/// Where the whole pages of `data` are: (offset of the first whole page in `data`, number of whole pages).
fn whole_pages(data: &[u8]) -> (usize, usize) {
    let head = data.as_ptr().align_offset(BLOCK_SIZE).min(data.len());
    (head, (data.len() - head) / BLOCK_SIZE)
}

/// The standard CRC-32C of `data`, computed page by page: also returns the crc of each whole page (by address).
pub fn crc_by_pages(data: &[u8]) -> (u32, Vec<u32>) {
    let (head, n) = whole_pages(data);
    let mut pages = Vec::with_capacity(n);
    let mut acc = crc32c::crc32c(&data[..head]);
    let body_end = head + n * BLOCK_SIZE;
    page_crcs_into(&data[head..body_end], &mut pages);
    for &c in &pages {
        acc = SHIFT_BLOCK.combine(acc, c);
    }
    let tail = &data[body_end..];
    if !tail.is_empty() {
        acc = crc32c_combine(acc, crc32c::crc32c(tail), tail.len() as u64);
    }
    (acc, pages)
}

/// The standard CRC-32C of each 4 KiB page of `body` (a whole number of pages), appended to `out`. Three pages
/// at a time run as three independent crc chains interleaved (the crc instruction has a latency of three cycles
/// and a throughput of one), which needs no recombination, unlike splitting one page three ways.
fn page_crcs_into(body: &[u8], out: &mut Vec<u32>) {
    debug_assert!(body.len().is_multiple_of(BLOCK_SIZE));
    let mut pages = body.chunks_exact(BLOCK_SIZE);
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("sse4.2") {
        let mut triples = body.chunks_exact(3 * BLOCK_SIZE);
        for t in triples.by_ref() {
            let (a, bc) = t.split_at(BLOCK_SIZE);
            let (b, c) = bc.split_at(BLOCK_SIZE);
            // SAFETY: sse4.2 was detected at run time just above.
            out.extend(unsafe { x86::crc3(a, b, c) });
        }
        pages = triples.remainder().chunks_exact(BLOCK_SIZE);
    }
    for page in pages {
        out.push(crc32c::crc32c(page));
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::_mm_crc32_u64;

    fn word(c: &[u8]) -> u64 {
        <[u8; 8]>::try_from(c).map_or(0, u64::from_le_bytes)
    }

    /// Standard CRC-32C of three equally long buffers (a multiple of 8 bytes), as three interleaved chains.
    /// How far ahead of the crc each chain asks for its cache lines: the bytes are usually cold (just written by
    /// the device's DMA), and three chains' hardware-prefetch streams alone keep too few misses in flight.
    const AHEAD: usize = 1024;

    #[target_feature(enable = "sse4.2")]
    pub(super) unsafe fn crc3(a: &[u8], b: &[u8], c: &[u8]) -> [u32; 3] {
        debug_assert!(a.len() == b.len() && b.len() == c.len() && a.len().is_multiple_of(8));
        let (mut x, mut y, mut z) = (u64::from(u32::MAX), u64::from(u32::MAX), u64::from(u32::MAX));
        let lines = a.chunks(64).zip(b.chunks(64)).zip(c.chunks(64));
        for (i, ((la, lb), lc)) in lines.enumerate() {
            let ahead = i * 64 + AHEAD;
            if ahead < a.len() {
                super::prefetch_line(&a[ahead..]);
                super::prefetch_line(&b[ahead..]);
                super::prefetch_line(&c[ahead..]);
            }
            for ((wa, wb), wc) in la.chunks_exact(8).zip(lb.chunks_exact(8)).zip(lc.chunks_exact(8)) {
                x = _mm_crc32_u64(x, word(wa));
                y = _mm_crc32_u64(y, word(wb));
                z = _mm_crc32_u64(z, word(wc));
            }
        }
        [!(x as u32), !(y as u32), !(z as u32)]
    }
}

/// Ask the CPU to start loading the cache line at the start of `data` (a hint: no effect on results).
#[inline(always)]
fn prefetch_line(data: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and changes no state visible to the program; the address is in `data`.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(data.as_ptr().cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

/// Ask the CPU to start loading every cache line of `data` at once, before a pass that reads it all (a crc of
/// bytes the device just wrote by DMA): the misses then overlap instead of arriving one stream at a time.
pub fn prefetch(data: &[u8]) {
    for line in data.chunks(64) {
        prefetch_line(line);
    }
}

/// Segments shorter than this are checksummed in one pass and not attached: the whole-page crcs would be few,
/// and the wrapper costs an allocation and two registry updates.
pub const ATTACH_MIN: usize = 2 * BLOCK_SIZE;

/// The standard CRC-32C of `data`, and `data` carrying the crcs of its whole pages (see the module docs). A
/// buffer below [`ATTACH_MIN`] bytes or without a whole page comes back as it was.
pub fn attach(data: Bytes) -> (u32, Bytes) {
    if data.len() < ATTACH_MIN || whole_pages(&data).1 == 0 {
        return (crc32c::crc32c(&data), data);
    }
    let (crc, pages) = crc_by_pages(&data);
    (crc, attach_pages(data, pages))
}

/// Attach already known crcs of the whole pages of `data` (for instance checked against a store's block crcs
/// on a read). `pages` must be exactly [`crc_by_pages`]'s second result for `data`; it is checked in debug
/// builds only, so callers pass crcs they verified or computed over these very bytes.
pub fn attach_pages(data: Bytes, pages: Vec<u32>) -> Bytes {
    let (head, n) = whole_pages(&data);
    if n == 0 || pages.len() != n {
        return data;
    }
    debug_assert_eq!(
        crc_by_pages(&data).1,
        pages,
        "attached page crcs do not match the bytes"
    );
    let start = data.as_ptr() as usize + head;
    let id = IDS.fetch_add(1, Ordering::Relaxed);
    let entry = Arc::new(Entry {
        id,
        start,
        crcs: pages.into_boxed_slice(),
    });
    let key = {
        let mut r = registry();
        // Two wrappers over the same memory: the first keeps the entry (both describe the same bytes).
        match r.entry(start) {
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(entry);
                LIVE.fetch_add(1, Ordering::Relaxed);
                Some((start, id))
            }
            std::collections::btree_map::Entry::Occupied(_) => None,
        }
    };
    Bytes::from_owner(Owner { bytes: data, key })
}

/// Known crcs of whole pages inside some buffer: ask it with [`PageCrcs::get`].
#[derive(Debug, Clone)]
pub struct PageCrcs(Arc<Entry>);

impl PageCrcs {
    /// The standard CRC-32C of `block` if it is exactly one whole page of the attached buffer.
    #[inline]
    pub fn get(&self, block: &[u8]) -> Option<u32> {
        let p = block.as_ptr() as usize;
        if block.len() != BLOCK_SIZE || p < self.0.start || !(p - self.0.start).is_multiple_of(BLOCK_SIZE) {
            return None;
        }
        self.0.crcs.get((p - self.0.start) / BLOCK_SIZE).copied()
    }

    /// Address range of the pages known.
    fn range(&self) -> (usize, usize) {
        (self.0.start, self.0.start + self.0.crcs.len() * BLOCK_SIZE)
    }
}

/// The page crcs attached to the buffer `data` lies in, if any (one registry lookup; `None` at once while no
/// buffer is attached anywhere).
pub fn page_crcs(data: &[u8]) -> Option<PageCrcs> {
    // Shorter than a page: no whole page to find (and small segments never take the lock).
    if data.len() < BLOCK_SIZE || LIVE.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let p = data.as_ptr() as usize;
    let r = registry();
    // The entry starting at or before `data`'s start, or inside it (data may begin in a partial page).
    let end = p + data.len();
    let e = r.range(..end).next_back().map(|(_, e)| e.clone())?;
    drop(r);
    let pc = PageCrcs(e);
    let (s, e) = pc.range();
    (s < end && e > p).then_some(pc)
}

/// The standard CRC-32C of `data`, reading only the bytes whose page crcs are not attached.
pub fn crc32c(data: &[u8]) -> u32 {
    let Some(pc) = page_crcs(data) else {
        return crc32c::crc32c(data);
    };
    let (head, n) = whole_pages(data);
    let mut acc = crc32c::crc32c(&data[..head]);
    let mut at = head;
    // Runs of unknown pages are fed in one call (the hardware path is fastest on long inputs).
    let mut run_start = at;
    for page in data[head..head + n * BLOCK_SIZE].chunks_exact(BLOCK_SIZE) {
        if let Some(c) = pc.get(page) {
            if run_start < at {
                acc = crc32c_combine(acc, crc32c::crc32c(&data[run_start..at]), (at - run_start) as u64);
            }
            acc = SHIFT_BLOCK.combine(acc, c);
            run_start = at + BLOCK_SIZE;
        }
        at += BLOCK_SIZE;
    }
    let rest = &data[run_start..];
    if !rest.is_empty() {
        acc = crc32c_combine(acc, crc32c::crc32c(rest), rest.len() as u64);
    }
    acc
}

/// Ceph's segment crc (`ceph_crc32c(u32::MAX, data)`, the standard crc inverted), from attached page crcs where
/// there are some.
pub fn ceph_segment_crc(data: &[u8]) -> u32 {
    !crc32c(data)
}

/// `crate::ceph_crc32c(seed, data)` (Ceph's convention, any seed), from attached page crcs where there are some:
/// the object data digest of a full-object write is the crc of a data segment msgr2 already checked page by
/// page, so it costs a combine per page instead of a second pass over 4 MiB.
pub fn ceph_crc32c(seed: u32, data: &[u8]) -> u32 {
    // With raw(s, X) the register after feeding X from s: raw(!0, X) = !crc32c(X), and raw is linear in the
    // seed, raw(s, X) = raw(!0, X) ⊕ shift(s ⊕ !0, |X|).
    let from_ones = !crc32c(data);
    if seed == u32::MAX {
        return from_ones;
    }
    from_ones ^ crate::crc32c_shift(seed ^ u32::MAX, data.len() as u64)
}

/// Ceph's crc of a segment sent as a chain of pieces (a rope whose payload pieces are received buffers): each
/// piece's crc from its attached pages where it has some, the pieces' crcs combined.
pub fn ceph_segment_crc_pieces<'a>(pieces: impl IntoIterator<Item = &'a [u8]>) -> u32 {
    let mut acc = None;
    for p in pieces {
        if !p.is_empty() {
            let c = crc32c(p);
            acc = Some(acc.map_or(c, |a| crc32c_combine(a, c, p.len() as u64)));
        }
    }
    // the standard crc of nothing is 0
    !acc.unwrap_or(0)
}

/// How many buffers carry attached crcs right now (tests and leak checks).
pub fn live_attachments() -> usize {
    LIVE.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `len` bytes starting `in_page` bytes past a page boundary, filled from `seed`.
    fn buf_at(len: usize, in_page: usize, seed: u8) -> Bytes {
        let mut v = vec![0u8; len + 2 * BLOCK_SIZE];
        let pad = (v.as_ptr().align_offset(BLOCK_SIZE) + in_page) % BLOCK_SIZE;
        for (i, b) in v.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(31).wrapping_add(seed);
        }
        Bytes::from(v).slice(pad..pad + len)
    }

    /// Long buffers run many triples of pages, each chain prefetching ahead of itself up to its page's end: every
    /// page crc and the whole crc still match one plain pass (a slip in the look-ahead would read past a page).
    #[test]
    fn long_buffers_match_one_pass_page_by_page() {
        for (pages, in_page, seed) in [(3, 0, 1u8), (16, 0, 7), (64, 0, 9), (65, 100, 3), (257, 4095, 5)] {
            let b = buf_at(pages * BLOCK_SIZE, in_page, seed);
            let (crc, page_crcs) = crc_by_pages(&b);
            assert_eq!(crc, crc32c::crc32c(&b), "{pages} pages at {in_page}");
            let (head, n) = whole_pages(&b);
            assert_eq!(page_crcs.len(), n);
            for (i, c) in page_crcs.iter().enumerate() {
                let page = &b[head + i * BLOCK_SIZE..head + (i + 1) * BLOCK_SIZE];
                assert_eq!(*c, crc32c::crc32c(page), "page {i} of {pages}");
            }
        }
        // A prefetch is only a hint: any slice, empty or not a whole line, is fine.
        prefetch(&[]);
        prefetch(&b"x"[..]);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
        #[test]
        fn page_by_page_equals_one_pass(len in 0usize..30_000, in_page in 0usize..4096, seed in any::<u8>()) {
            let b = buf_at(len, in_page, seed);
            let (crc, pages) = crc_by_pages(&b);
            prop_assert_eq!(crc, crc32c::crc32c(&b));
            let s32 = u32::from(seed).wrapping_mul(0x9e37_79b9);
            prop_assert_eq!(ceph_crc32c(s32, &b), crate::ceph_crc32c(s32, &b));
            let (head, n) = whole_pages(&b);
            prop_assert_eq!(pages.len(), n);
            for (i, c) in pages.iter().enumerate() {
                let at = head + i * BLOCK_SIZE;
                prop_assert_eq!(*c, crc32c::crc32c(&b[at..at + BLOCK_SIZE]));
            }
        }

        /// Slices of an attached buffer: their crc from attached pages equals the straight one, and every whole
        /// page of the slice is known.
        #[test]
        fn slices_keep_their_page_crcs(len in 8192usize..40_000, in_page in 0usize..4096,
                                       a in 0usize..40_000, b in 0usize..40_000, seed in any::<u8>()) {
            let (crc, att) = attach(buf_at(len, in_page, seed));
            prop_assert_eq!(crc, crc32c::crc32c(&att));
            let (lo, hi) = (a.min(b) % (len + 1), a.max(b) % (len + 1));
            let (lo, hi) = (lo.min(hi), lo.max(hi));
            let s = att.slice(lo..hi);
            prop_assert_eq!(crc32c(&s), crc32c::crc32c(&s));
            prop_assert_eq!(ceph_segment_crc(&s), crate::ceph_crc32c(u32::MAX, &s));
            prop_assert_eq!(ceph_crc32c(u32::from(seed) * 0x0101_0101, &s), crate::ceph_crc32c(u32::from(seed) * 0x0101_0101, &s));
            prop_assert_eq!(ceph_crc32c(u32::MAX, &s), crate::ceph_crc32c(u32::MAX, &s));
            let (head, n) = whole_pages(&s);
            if n > 0 {
                let pc = page_crcs(&s).expect("attached");
                for i in 0..n {
                    let blk = &s[head + i * BLOCK_SIZE..head + (i + 1) * BLOCK_SIZE];
                    prop_assert_eq!(pc.get(blk), Some(crc32c::crc32c(blk)));
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
        /// A rope of attached and plain pieces has the crc of its concatenation.
        #[test]
        fn rope_crc_is_the_crc_of_the_concatenation(lens in proptest::collection::vec((0usize..20_000, 0usize..4096, any::<bool>()), 0..5)) {
            let pieces: Vec<Bytes> = lens.iter().enumerate().map(|(i, &(len, in_page, att))| {
                let b = buf_at(len, in_page, i as u8);
                if att { attach(b).1 } else { b }
            }).collect();
            let flat: Vec<u8> = pieces.iter().flat_map(|p| p.iter().copied()).collect();
            prop_assert_eq!(ceph_segment_crc_pieces(pieces.iter().map(|p| &p[..])), crate::ceph_crc32c(u32::MAX, &flat));
        }
    }

    #[test]
    fn entries_live_exactly_as_long_as_the_buffer() {
        let b = buf_at(5 * BLOCK_SIZE, 100, 7);
        let copy = Bytes::copy_from_slice(&b);
        let (_, att) = attach(b);
        let part = att.slice(4096..4096 + 3 * BLOCK_SIZE);
        drop(att);
        // a slice keeps the entry alive
        assert!(page_crcs(&part).is_some());
        let addr = part.as_ptr() as usize;
        drop(part);
        // gone with the last handle: nothing maps that address any more
        assert!(
            registry()
                .range(..addr + 1)
                .next_back()
                .is_none_or(|(_, e)| { e.start + e.crcs.len() * BLOCK_SIZE <= addr })
        );
        // a copy of the bytes never had crcs attached
        assert!(page_crcs(&copy).is_none_or(|pc| {
            (0..copy.len() / BLOCK_SIZE)
                .all(|i| pc.get(&copy[i * BLOCK_SIZE..(i + 1) * BLOCK_SIZE]).is_none())
        }));
    }

    #[test]
    fn small_or_pageless_buffers_are_not_wrapped() {
        let b = buf_at(4096, 0, 1);
        let p = b.as_ptr();
        let (crc, out) = attach(b);
        assert_eq!(out.as_ptr(), p);
        assert_eq!(crc, crc32c::crc32c(&out));
        assert!(page_crcs(&out).is_none_or(|pc| pc.get(&out).is_none()));
    }

    #[test]
    fn attaching_twice_keeps_one_entry() {
        let (_, a) = attach(buf_at(4 * BLOCK_SIZE, 0, 3));
        let (_, b) = attach(a.clone());
        drop(b);
        // the second wrapper did not remove the first one's entry
        assert_eq!(
            page_crcs(&a).and_then(|pc| pc.get(&a[..BLOCK_SIZE])),
            Some(crc32c::crc32c(&a[..BLOCK_SIZE]))
        );
    }
}
