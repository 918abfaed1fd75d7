// SPDX-License-Identifier: LGPL-3.0-or-later
//! Large page-aligned buffers, recycled through a bounded pool.
//!
//! Why: msgr2 receives every large segment (a 4 MiB write's data, a replica's 4 MiB rep op) straight into a
//! page-aligned buffer of its own. From glibc's malloc those buffers are either fresh mmaps (page faults on every
//! one) or, once glibc has raised its dynamic mmap threshold after the first large free, pieces of a heap arena
//! that stay resident after they are freed. Here a buffer of at least [`MIN_POOLED`] bytes is an anonymous mapping
//! of a size class; freed buffers wait in a per-class free list for the next request of their class (no mmap, no
//! page faults), up to a bound on idle bytes ([`PagePool::set_max_idle_bytes`]); beyond it, and when
//! [`PagePool::trim_idle`] finds buffers unused for a whole interval, they are unmapped, so the memory goes back to
//! the kernel. Buffers are dropped on any thread (a store completion, another reactor core), so the pool is
//! shared: one small mutex-protected free list per size class, held only to push or pop.
//!
//! A [`PageBuf`] is filled like a `BytesMut` (receive into [`PageBuf::spare_capacity_mut`], then
//! [`PageBuf::set_len`]) and frozen into a [`Bytes`] whose owner returns the mapping to the pool when the last
//! slice of it is dropped. Smaller requests are plain heap buffers (`BytesMut`), where malloc reuses memory well.

use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use bytes::{Buf, BufMut, Bytes, BytesMut};

pub mod contig;

/// Buffers are aligned to (and sized in) pages of this size; the first byte can sit at any offset in its page.
pub const PAGE: usize = 4096;
/// Requests (length plus in-page offset) below this come from the heap: glibc's default mmap threshold, below
/// which malloc serves and reuses blocks from its arenas without trouble.
pub const MIN_POOLED: usize = 128 << 10;
/// Requests above the largest class are mapped and unmapped per buffer, never kept.
pub const MAX_POOLED: usize = 64 << 20;
/// Default bound on the bytes of idle pooled buffers (eight 4 MiB segments).
pub const DEFAULT_MAX_IDLE_BYTES: usize = 32 << 20;

/// Size classes: four per power of two (2^k × 4/4, 5/4, 6/4, 7/4) from `MIN_POOLED` to `MAX_POOLED`, so a class
/// wastes less than a quarter of its size (and only address space: untouched pages are never resident).
const CLASSES_PER_OCTAVE: usize = 4;
const MIN_SHIFT: u32 = MIN_POOLED.trailing_zeros();
const NUM_CLASSES: usize = (MAX_POOLED.trailing_zeros() - MIN_SHIFT) as usize * CLASSES_PER_OCTAVE + 1;

const _: () = assert!(MIN_POOLED.is_power_of_two() && MAX_POOLED.is_power_of_two() && MIN_POOLED >= PAGE * 4);

/// The class of a request of `size` bytes: (index, class size), `None` above [`MAX_POOLED`].
fn class_of(size: usize) -> Option<(usize, usize)> {
    let s = size.max(MIN_POOLED);
    if s > MAX_POOLED {
        return None;
    }
    class_from(s, MIN_SHIFT)
}

/// The size class of `size` (at least `1 << min_shift`) among four per power of two from `1 << min_shift`:
/// (index, class size).
fn class_from(size: usize, min_shift: u32) -> Option<(usize, usize)> {
    let step = |v: usize| (1usize << (usize::BITS - 1 - v.leading_zeros())) / CLASSES_PER_OCTAVE;
    let class = size.checked_next_multiple_of(step(size))?;
    // Rounding up may reach the next power of two, whose step is larger: index from the class itself.
    let shift = usize::BITS - 1 - class.leading_zeros();
    let idx = (shift.checked_sub(min_shift)?) as usize * CLASSES_PER_OCTAVE + class / step(class)
        - CLASSES_PER_OCTAVE;
    Some((idx, class))
}

/// One idle mapping in a free list.
struct Block(NonNull<u8>);

// SAFETY: a block is an anonymous mapping nobody else references while it sits in the pool.
unsafe impl Send for Block {}

#[derive(Default)]
struct Class {
    free: Vec<Block>,
    /// The fewest buffers the free list held since the last [`PagePool::trim_idle`]: that many went unused.
    low: usize,
}

struct Inner {
    classes: Vec<Mutex<Class>>,
    max_idle: AtomicUsize,
    idle_bytes: AtomicUsize,
    idle_buffers: AtomicUsize,
    in_use_bytes: AtomicUsize,
    in_use_buffers: AtomicUsize,
    hits: AtomicU64,
    misses: AtomicU64,
    released: AtomicU64,
    unpooled: AtomicU64,
}

/// Counters of a [`PagePool`] (`dump_mempools`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Idle buffers kept for reuse, and their mapped bytes (resident once touched).
    pub idle_buffers: usize,
    pub idle_bytes: usize,
    /// Mapped buffers handed out and not yet dropped (pooled classes and oversized ones), and their bytes.
    pub in_use_buffers: usize,
    pub in_use_bytes: usize,
    /// The bound on `idle_bytes`.
    pub max_idle_bytes: usize,
    /// Requests served from a free list / by a new mapping.
    pub hits: u64,
    pub misses: u64,
    /// Mappings given back to the kernel (over the bound, trimmed as idle, or oversized).
    pub released: u64,
    /// Requests above [`MAX_POOLED`] (mapped for themselves).
    pub unpooled: u64,
}

/// A bounded pool of page-aligned mappings. Cheap to clone (shared).
#[derive(Clone)]
pub struct PagePool(Arc<Inner>);

impl std::fmt::Debug for PagePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PagePool").field(&self.stats()).finish()
    }
}

static GLOBAL: LazyLock<PagePool> = LazyLock::new(|| PagePool::new(DEFAULT_MAX_IDLE_BYTES));

/// The process's pool (msgr2's receive buffers).
pub fn global() -> &'static PagePool {
    &GLOBAL
}

fn map(len: usize) -> Option<NonNull<u8>> {
    // Huge-page aligned when it spans one: physically contiguous for the device (contig's module docs).
    contig::map_aligned(len)
}

/// # Safety
/// `p` is a mapping of `len` bytes from [`map`] that nothing references any more.
unsafe fn unmap(p: NonNull<u8>, len: usize) {
    // SAFETY: per the contract.
    unsafe { libc::munmap(p.as_ptr().cast(), len) };
}

fn lock(m: &Mutex<Class>) -> std::sync::MutexGuard<'_, Class> {
    // A panic while holding the lock cannot leave the free list inconsistent (push/pop only).
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl PagePool {
    /// A pool keeping at most `max_idle_bytes` of idle buffers.
    pub fn new(max_idle_bytes: usize) -> Self {
        PagePool(Arc::new(Inner {
            classes: (0..NUM_CLASSES).map(|_| Mutex::default()).collect(),
            max_idle: AtomicUsize::new(max_idle_bytes),
            idle_bytes: AtomicUsize::new(0),
            idle_buffers: AtomicUsize::new(0),
            in_use_bytes: AtomicUsize::new(0),
            in_use_buffers: AtomicUsize::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            released: AtomicU64::new(0),
            unpooled: AtomicU64::new(0),
        }))
    }

    /// Change the bound on idle bytes (0: keep nothing, every buffer is unmapped when dropped). Idle buffers over
    /// a lowered bound are released by the next [`PagePool::trim_idle`].
    pub fn set_max_idle_bytes(&self, n: usize) {
        self.0.max_idle.store(n, Ordering::Relaxed);
    }

    pub fn stats(&self) -> PoolStats {
        let i = &self.0;
        PoolStats {
            idle_buffers: i.idle_buffers.load(Ordering::Relaxed),
            idle_bytes: i.idle_bytes.load(Ordering::Relaxed),
            in_use_buffers: i.in_use_buffers.load(Ordering::Relaxed),
            in_use_bytes: i.in_use_bytes.load(Ordering::Relaxed),
            max_idle_bytes: i.max_idle.load(Ordering::Relaxed),
            hits: i.hits.load(Ordering::Relaxed),
            misses: i.misses.load(Ordering::Relaxed),
            released: i.released.load(Ordering::Relaxed),
            unpooled: i.unpooled.load(Ordering::Relaxed),
        }
    }

    /// An empty buffer with room for `len` bytes whose first byte lies `in_page % PAGE` bytes past a page
    /// boundary (0: page-aligned). From the pool when `len + in_page` is at least [`MIN_POOLED`], else the heap.
    pub fn alloc(&self, len: usize, in_page: usize) -> PageBuf {
        let in_page = in_page % PAGE;
        let need = len.saturating_add(in_page);
        if need < MIN_POOLED {
            // Physically contiguous when the slab has room (contig's module docs), else the heap.
            return match contig::Block::alloc(need) {
                Some(block) => PageBuf(Repr::Mapped(Mapped {
                    base: NonNull::new(block.as_ptr()).expect("slab blocks are non-null"),
                    map_len: block.capacity(),
                    start: in_page,
                    len: 0,
                    back: Back::Slab { _block: block },
                })),
                None => PageBuf::heap(len, in_page),
            };
        }
        let (class, map_len) = match class_of(need) {
            Some((idx, size)) => (Some(idx), size),
            None => (None, need.next_multiple_of(PAGE)),
        };
        let Some(base) = self.take(class, map_len) else {
            // Out of address space or mappings: the heap may still manage (and fails loudly if not).
            return PageBuf::heap(len, in_page);
        };
        self.0.in_use_bytes.fetch_add(map_len, Ordering::Relaxed);
        self.0.in_use_buffers.fetch_add(1, Ordering::Relaxed);
        PageBuf(Repr::Mapped(Mapped {
            base,
            map_len,
            start: in_page,
            len: 0,
            back: Back::Pool {
                class,
                pool: self.clone(),
            },
        }))
    }

    fn take(&self, class: Option<usize>, map_len: usize) -> Option<NonNull<u8>> {
        let i = &self.0;
        match class {
            Some(idx) => {
                let got = {
                    let mut c = lock(&i.classes[idx]);
                    let b = c.free.pop();
                    c.low = c.low.min(c.free.len());
                    b
                };
                if let Some(Block(p)) = got {
                    i.idle_bytes.fetch_sub(map_len, Ordering::Relaxed);
                    i.idle_buffers.fetch_sub(1, Ordering::Relaxed);
                    i.hits.fetch_add(1, Ordering::Relaxed);
                    return Some(p);
                }
                i.misses.fetch_add(1, Ordering::Relaxed);
            }
            None => {
                i.unpooled.fetch_add(1, Ordering::Relaxed);
            }
        }
        map(map_len)
    }

    fn give_back(&self, base: NonNull<u8>, map_len: usize, class: Option<usize>) {
        let i = &self.0;
        i.in_use_bytes.fetch_sub(map_len, Ordering::Relaxed);
        i.in_use_buffers.fetch_sub(1, Ordering::Relaxed);
        if let Some(idx) = class {
            let before = i.idle_bytes.fetch_add(map_len, Ordering::Relaxed);
            if before + map_len <= i.max_idle.load(Ordering::Relaxed) {
                lock(&i.classes[idx]).free.push(Block(base));
                i.idle_buffers.fetch_add(1, Ordering::Relaxed);
                return;
            }
            i.idle_bytes.fetch_sub(map_len, Ordering::Relaxed);
        }
        i.released.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the buffer's owner is gone (dropped); the mapping is ours alone.
        unsafe { unmap(base, map_len) };
    }

    /// Release idle buffers that were not needed since the previous call (each class's low-water mark of its
    /// free list), and any over the bound. Call it periodically (ferro-osd: every second): a buffer survives only
    /// while its class keeps being used, so a burst of large writes leaves nothing resident once it is over.
    /// Returns the bytes released.
    pub fn trim_idle(&self) -> usize {
        self.release(false)
    }

    /// Release every idle buffer. Returns the bytes released.
    pub fn trim_all(&self) -> usize {
        self.release(true)
    }

    fn release(&self, all: bool) -> usize {
        let i = &self.0;
        let mut freed = 0;
        for (idx, m) in i.classes.iter().enumerate() {
            let size = class_size(idx);
            let drop: Vec<Block> = {
                let mut c = lock(m);
                let mut n = if all {
                    c.free.len()
                } else {
                    c.low.min(c.free.len())
                };
                let over = i
                    .idle_bytes
                    .load(Ordering::Relaxed)
                    .saturating_sub(i.max_idle.load(Ordering::Relaxed));
                n = n.max(over.div_ceil(size).min(c.free.len()));
                // The oldest first: the free list is a stack, its top the most recently touched.
                let d: Vec<Block> = c.free.drain(..n).collect();
                c.low = c.free.len();
                d
            };
            for Block(p) in drop {
                i.idle_bytes.fetch_sub(size, Ordering::Relaxed);
                i.idle_buffers.fetch_sub(1, Ordering::Relaxed);
                i.released.fetch_add(1, Ordering::Relaxed);
                freed += size;
                // SAFETY: taken out of the free list: nothing else references it.
                unsafe { unmap(p, size) };
            }
        }
        freed
    }
}

fn class_size(idx: usize) -> usize {
    let octave = idx / CLASSES_PER_OCTAVE;
    let quarter = idx % CLASSES_PER_OCTAVE;
    let base = MIN_POOLED << octave;
    base + base / CLASSES_PER_OCTAVE * quarter
}

impl Drop for Inner {
    fn drop(&mut self) {
        for (idx, m) in self.classes.iter().enumerate() {
            for Block(p) in lock(m).free.drain(..) {
                // SAFETY: idle, unreferenced mappings of this class's size.
                unsafe { unmap(p, class_size(idx)) };
            }
        }
    }
}

/// A mapping handed out by a pool, or a slab block: `len` bytes filled from `base + start`.
struct Mapped {
    base: NonNull<u8>,
    map_len: usize,
    start: usize,
    len: usize,
    back: Back,
}

/// Where a [`Mapped`] goes when dropped.
enum Back {
    /// Its pool's class (or unmapped: oversized, or over the idle bound).
    Pool { class: Option<usize>, pool: PagePool },
    /// The huge-page slab (the block's own drop).
    Slab { _block: contig::Block },
}

// SAFETY: `Mapped` owns its mapping exclusively (like a `Vec<u8>`); shared access is read-only through `&self`.
unsafe impl Send for Mapped {}
// SAFETY: as above; `&Mapped` only gives out `&[u8]`.
unsafe impl Sync for Mapped {}

impl Mapped {
    fn cap(&self) -> usize {
        self.map_len - self.start
    }
    fn filled(&self) -> &[u8] {
        // SAFETY: `base + start .. + len` lies in the mapping (len <= cap) and was written (set_len's contract).
        unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(self.start), self.len) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        if let Back::Pool { class, pool } = &self.back {
            pool.give_back(self.base, self.map_len, *class);
        }
    }
}

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        self.filled()
    }
}

enum Repr {
    Heap(BytesMut),
    Mapped(Mapped),
}

/// A buffer being filled: `len()` bytes written so far, room for `capacity()` in all. Freeze it into [`Bytes`].
pub struct PageBuf(Repr);

impl std::fmt::Debug for PageBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageBuf")
            .field("pooled", &self.is_pooled())
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .finish()
    }
}

impl PageBuf {
    /// A heap buffer with room for `len` bytes starting `in_page` bytes past a page boundary: over-allocates by
    /// less than a page and skips the head in place (no second allocation, no copy).
    fn heap(len: usize, in_page: usize) -> PageBuf {
        let mut b = BytesMut::with_capacity(len + PAGE - 1);
        let pad = (b.as_ptr().align_offset(PAGE) + in_page) % PAGE;
        if pad > 0 {
            b.put_bytes(0, pad);
            b.advance(pad);
        }
        PageBuf(Repr::Heap(b))
    }

    /// Whether the buffer is a pool mapping (rather than a heap block or a slab block).
    pub fn is_pooled(&self) -> bool {
        matches!(&self.0, Repr::Mapped(m) if matches!(m.back, Back::Pool { .. }))
    }

    /// Whether the buffer is a block of the huge-page slab ([`contig`]).
    pub fn is_slab(&self) -> bool {
        matches!(&self.0, Repr::Mapped(m) if matches!(m.back, Back::Slab { .. }))
    }

    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Heap(b) => b.len(),
            Repr::Mapped(m) => m.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the buffer holds without growing (filled and spare).
    pub fn capacity(&self) -> usize {
        match &self.0 {
            Repr::Heap(b) => b.capacity(),
            Repr::Mapped(m) => m.cap(),
        }
    }

    /// The first byte of the buffer (where `len()` counts from).
    pub fn as_ptr(&self) -> *const u8 {
        match &self.0 {
            Repr::Heap(b) => b.as_ptr(),
            // SAFETY: start < map_len.
            Repr::Mapped(m) => unsafe { m.base.as_ptr().add(m.start) },
        }
    }

    /// The room after the filled bytes, to receive into.
    pub fn spare_capacity_mut(&mut self) -> &mut [MaybeUninit<u8>] {
        match &mut self.0 {
            Repr::Heap(b) => b.spare_capacity_mut(),
            Repr::Mapped(m) => {
                let at = m.start + m.len;
                // SAFETY: `at .. map_len` lies in the mapping, which this buffer owns exclusively.
                unsafe { std::slice::from_raw_parts_mut(m.base.as_ptr().add(at).cast(), m.map_len - at) }
            }
        }
    }

    /// Set the number of filled bytes.
    ///
    /// # Safety
    /// `n <= capacity()`, and the first `n` bytes have been written.
    pub unsafe fn set_len(&mut self, n: usize) {
        match &mut self.0 {
            // SAFETY: per the contract.
            Repr::Heap(b) => unsafe { b.set_len(n) },
            Repr::Mapped(m) => {
                debug_assert!(n <= m.cap());
                m.len = n;
            }
        }
    }

    /// Append bytes. Beyond the capacity the buffer moves to the heap (a copy; the IO layers never do this).
    pub fn extend_from_slice(&mut self, data: &[u8]) {
        if let Repr::Mapped(m) = &mut self.0 {
            if data.len() <= m.cap() - m.len {
                // SAFETY: room checked above; the mapping is ours and does not overlap `data` (we hold `&mut`).
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        data.as_ptr(),
                        m.base.as_ptr().add(m.start + m.len),
                        data.len(),
                    )
                };
                m.len += data.len();
                return;
            }
            let mut b = BytesMut::with_capacity(m.len + data.len());
            b.extend_from_slice(m.filled());
            self.0 = Repr::Heap(b);
        }
        if let Repr::Heap(b) = &mut self.0 {
            b.extend_from_slice(data);
        }
    }

    /// The filled bytes as [`Bytes`], without a copy. A pool mapping goes back to its pool when the last slice of
    /// the result is dropped, on whatever thread that happens.
    pub fn freeze(self) -> Bytes {
        match self.0 {
            Repr::Heap(b) => b.freeze(),
            Repr::Mapped(m) if m.len == 0 => Bytes::new(),
            Repr::Mapped(m) => Bytes::from_owner(m),
        }
    }
}

impl std::ops::Deref for PageBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.0 {
            Repr::Heap(b) => b,
            Repr::Mapped(m) => m.filled(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    #[test]
    fn classes_cover_every_size_once() {
        assert_eq!(class_of(1), Some((0, MIN_POOLED)));
        assert_eq!(class_of(MIN_POOLED), Some((0, MIN_POOLED)));
        assert_eq!(class_of(MIN_POOLED + 1), Some((1, MIN_POOLED + MIN_POOLED / 4)));
        assert_eq!(class_of(4 * MIB), class_of(4 * MIB - PAGE));
        assert_eq!(class_of(4 * MIB).map(|c| c.1), Some(4 * MIB));
        assert_eq!(class_of(4 * MIB + 1).map(|c| c.1), Some(5 * MIB));
        assert_eq!(class_of(MAX_POOLED), Some((NUM_CLASSES - 1, MAX_POOLED)));
        assert_eq!(class_of(MAX_POOLED + 1), None);
        let mut prev = (0, 0);
        for s in (MIN_POOLED..=MAX_POOLED).step_by(PAGE * 7) {
            let (idx, size) = class_of(s).expect("in range");
            assert!(size >= s && size - s < size / 4 + PAGE, "{s} -> {size}");
            assert_eq!(class_size(idx), size);
            assert!(idx >= prev.0 && size >= prev.1, "classes grow with the request");
            prev = (idx, size);
        }
    }

    #[test]
    fn small_requests_stay_on_the_heap_and_keep_their_in_page_offset() {
        let pool = PagePool::new(8 * MIB);
        for in_page in [0, 1, 512, 4095, 4096 + 100] {
            let mut b = pool.alloc(5000, in_page);
            assert!(!b.is_pooled());
            assert_eq!(b.as_ptr() as usize % PAGE, in_page % PAGE);
            assert!(b.capacity() >= 5000);
            b.extend_from_slice(&[7; 5000]);
            let f = b.freeze();
            assert_eq!(f.as_ptr() as usize % PAGE, in_page % PAGE);
            assert_eq!(&f[..], &[7; 5000][..]);
        }
        assert_eq!(
            pool.stats(),
            PoolStats {
                max_idle_bytes: 8 * MIB,
                ..PoolStats::default()
            }
        );
    }

    #[test]
    fn large_buffers_are_aligned_and_keep_their_in_page_offset() {
        let pool = PagePool::new(64 * MIB);
        for in_page in [0, 8, 2000, 4095] {
            let mut b = pool.alloc(4 * MIB, in_page);
            assert!(b.is_pooled());
            assert_eq!(b.as_ptr() as usize % PAGE, in_page);
            assert!(b.capacity() >= 4 * MIB);
            let spare = b.spare_capacity_mut();
            assert_eq!(spare.as_ptr() as usize % PAGE, in_page);
            for (i, x) in spare[..4 * MIB].iter_mut().enumerate() {
                x.write(i as u8);
            }
            // SAFETY: 4 MiB written just above.
            unsafe { b.set_len(4 * MIB) };
            let f = b.freeze();
            assert_eq!(f.as_ptr() as usize % PAGE, in_page);
            assert_eq!(f.len(), 4 * MIB);
            assert!(f.iter().enumerate().all(|(i, &x)| x == i as u8));
        }
    }

    #[test]
    fn dropped_buffers_are_reused() {
        let pool = PagePool::new(64 * MIB);
        let mut b = pool.alloc(4 * MIB, 0);
        b.extend_from_slice(b"hello");
        let addr = b.as_ptr() as usize;
        let f = b.freeze();
        let s = f.slice(1..3);
        drop(f);
        assert_eq!(pool.stats().in_use_buffers, 1, "a slice keeps the buffer");
        assert_eq!(&s[..], b"el");
        drop(s);
        let st = pool.stats();
        assert_eq!(
            (st.in_use_buffers, st.idle_buffers, st.idle_bytes),
            (0, 1, 4 * MIB)
        );
        let b = pool.alloc(4 * MIB - 100, 0);
        assert_eq!(b.as_ptr() as usize, addr, "the same mapping again");
        let st = pool.stats();
        assert_eq!(
            (st.hits, st.misses, st.idle_buffers, st.in_use_bytes),
            (1, 1, 0, 4 * MIB)
        );
        // A different class does not take it.
        drop(b);
        let c = pool.alloc(300 << 10, 0);
        assert_eq!(pool.stats().misses, 2);
        assert_ne!(c.as_ptr() as usize, addr);
    }

    #[test]
    fn idle_bytes_are_bounded() {
        let pool = PagePool::new(10 * MIB);
        let bufs: Vec<PageBuf> = (0..5).map(|_| pool.alloc(4 * MIB, 0)).collect();
        assert_eq!(pool.stats().in_use_bytes, 20 * MIB);
        drop(bufs);
        let st = pool.stats();
        assert_eq!((st.idle_buffers, st.idle_bytes, st.released), (2, 8 * MIB, 3));
        assert_eq!(st.in_use_buffers, 0);
        pool.set_max_idle_bytes(0);
        drop(pool.alloc(4 * MIB, 0));
        assert_eq!(
            pool.stats().idle_buffers,
            1,
            "a hit took one, the bound sent it back to the kernel"
        );
        assert_eq!(pool.trim_idle(), 4 * MIB, "over the lowered bound");
        assert_eq!(pool.stats().idle_bytes, 0);
    }

    #[test]
    fn trim_releases_what_an_interval_did_not_use() {
        let pool = PagePool::new(64 * MIB);
        drop((0..4).map(|_| pool.alloc(4 * MIB, 0)).collect::<Vec<_>>());
        assert_eq!(pool.stats().idle_buffers, 4);
        // Starts the first interval (the low-water mark was 0 while the pool filled).
        assert_eq!(pool.trim_idle(), 0);
        // This interval needs two at once: two stay, two go.
        let two = (pool.alloc(4 * MIB, 0), pool.alloc(4 * MIB, 0));
        drop(two);
        assert_eq!(pool.trim_idle(), 8 * MIB);
        assert_eq!(pool.stats().idle_buffers, 2);
        // An interval without any use: everything goes.
        assert_eq!(pool.trim_idle(), 8 * MIB);
        assert_eq!(pool.stats().idle_buffers, 0);
        drop(pool.alloc(MIB, 0));
        assert_eq!(pool.trim_all(), MIB);
        let st = pool.stats();
        assert_eq!((st.idle_bytes, st.in_use_bytes, st.released), (0, 0, 5));
    }

    #[test]
    fn buffers_dropped_on_other_threads_come_back() {
        let pool = PagePool::new(256 * MIB);
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let pool = pool.clone();
                std::thread::spawn(move || {
                    for i in 0..50 {
                        let mut b = pool.alloc(MIB + PAGE + (i % 3) * PAGE, t);
                        b.extend_from_slice(&[t as u8; 100]);
                        let f = b.freeze();
                        // Drop on another thread, as a store completion or another core would.
                        std::thread::spawn(move || assert_eq!(f[99], t as u8))
                            .join()
                            .expect("join");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("join");
        }
        let st = pool.stats();
        assert_eq!((st.in_use_buffers, st.in_use_bytes), (0, 0));
        assert_eq!(st.hits + st.misses, 200);
        assert!(st.misses <= 4, "at most one buffer per thread in flight: {st:?}");
        assert_eq!(
            st.idle_bytes,
            st.idle_buffers * class_of(MIB + 2 * PAGE).map_or(0, |c| c.1)
        );
    }

    #[test]
    fn mid_sized_requests_come_from_the_slab_and_keep_their_in_page_offset() {
        let pool = PagePool::new(8 * MIB);
        for in_page in [0, 100, 4095] {
            let mut b = pool.alloc(64 << 10, in_page);
            assert_eq!(b.is_slab(), contig::enabled());
            assert!(!b.is_pooled());
            assert_eq!(b.as_ptr() as usize % PAGE, in_page);
            assert!(b.capacity() >= 64 << 10);
            b.extend_from_slice(&[9; 64 << 10]);
            let f = b.freeze();
            assert_eq!(f.as_ptr() as usize % PAGE, in_page);
            assert!(f.iter().all(|&x| x == 9));
        }
        // Slab blocks are not the pool's: its counters stay untouched.
        assert_eq!(pool.stats().in_use_buffers, 0);
        assert_eq!(pool.stats().misses, 0);
    }

    #[test]
    fn oversized_and_overfilled_buffers() {
        let pool = PagePool::new(256 * MIB);
        let mut b = pool.alloc(MAX_POOLED + 1, 100);
        assert!(b.is_pooled());
        assert_eq!(b.as_ptr() as usize % PAGE, 100);
        b.extend_from_slice(&[1; 10]);
        drop(b.freeze());
        let st = pool.stats();
        assert_eq!(
            (st.unpooled, st.released, st.idle_buffers, st.in_use_bytes),
            (1, 1, 0, 0)
        );
        // Filling past the capacity moves the bytes to the heap and gives the mapping back.
        let mut b = pool.alloc(MIN_POOLED, 0);
        let cap = b.capacity();
        b.extend_from_slice(&vec![3; cap - 1]);
        b.extend_from_slice(&[4, 5]);
        assert!(!b.is_pooled());
        assert_eq!(b.len(), cap + 1);
        assert_eq!(&b[cap - 2..], &[3, 4, 5]);
        assert_eq!(pool.stats().idle_buffers, 1);
        // Empty buffers freeze to nothing.
        assert!(pool.alloc(MIB, 0).freeze().is_empty());
        assert_eq!(pool.stats().in_use_buffers, 0);
    }
}
