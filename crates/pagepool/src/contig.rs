// SPDX-License-Identifier: LGPL-3.0-or-later
//! Physically contiguous IO buffers: blocks carved from 2 MiB transparent huge pages.
//!
//! Why: a virtio disk request names guest memory segment by segment, one per physically contiguous run, and the
//! VMM behind it (Firecracker on the machine we measure on) serves a request segment by segment. An O_DIRECT read
//! into a 64 KiB heap buffer is up to 16 segments of scattered 4 KiB pages; into a huge page it is one. Measured
//! on that VM (docs/benchmarks.md, "IO buffers in huge pages", session 11): raw fio 64 KiB reads at QD16 +22 %
//! IOPS from a huge page; ferro-osd's 64K read QD16 +20 % and 4M write QD4 +40 %. On NVMe the same holds in a
//! milder form (fewer PRP/SGL entries per command).
//!
//! - Blocks of [`SLAB_MIN`] to [`CHUNK`] bytes come from 2 MiB-aligned chunks mapped with `MADV_HUGEPAGE`,
//!   in size classes (four per power of two, like the pool's), recycled through a free list per class. A chunk
//!   is never unmapped (a huge page cannot be given back piecemeal), so the slab is bounded:
//!   [`set_max_slab_bytes`] (default [`DEFAULT_MAX_SLAB_BYTES`]); past it [`Block::alloc`] returns `None` and
//!   callers use ordinary memory.
//! - Larger buffers are mappings of their own, 2 MiB-aligned with `MADV_HUGEPAGE` ([`map_aligned`]).
//! - `PAGEPOOL_HUGE_PAGES=0` in the environment (read once), or a kernel with THP `never`, turns both off:
//!   no slab, plain mappings (for A/B runs, and so a kernel without THP does not pin a slab for nothing).

use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{LazyLock, Mutex};

/// A huge page on x86-64 and arm64 (4 KiB base pages): the chunk the slab carves and the alignment of mappings.
pub const CHUNK: usize = 2 << 20;
/// Smaller buffers gain little (at most 4 pages) and stay on the heap.
pub const SLAB_MIN: usize = 16 << 10;
/// Default bound on the slab's chunks (mapped, resident once touched): 32 chunks.
pub const DEFAULT_MAX_SLAB_BYTES: usize = 64 << 20;
/// The environment switch (`0` = off).
pub const ENV: &str = "PAGEPOOL_HUGE_PAGES";

const NUM_CLASSES: usize = (CHUNK.trailing_zeros() - SLAB_MIN.trailing_zeros()) as usize * 4 + 1;

struct Slab {
    on: bool,
    classes: Vec<Mutex<Vec<usize>>>,
    mapped: AtomicUsize,
    max: AtomicUsize,
}

static SLAB: LazyLock<Slab> = LazyLock::new(|| {
    let env_off = std::env::var(ENV).is_ok_and(|v| v == "0");
    let thp_never = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .is_ok_and(|s| s.contains("[never]"));
    Slab {
        on: !env_off && !thp_never,
        classes: (0..NUM_CLASSES).map(|_| Mutex::default()).collect(),
        mapped: AtomicUsize::new(0),
        max: AtomicUsize::new(DEFAULT_MAX_SLAB_BYTES),
    }
});

/// Whether huge-page buffers are in use in this process (see the module docs for what turns them off).
pub fn enabled() -> bool {
    SLAB.on
}

/// Change the bound on the slab's chunks. Chunks already mapped stay (they are never unmapped).
pub fn set_max_slab_bytes(n: usize) {
    SLAB.max.store(n, Ordering::Relaxed);
}

/// Bytes of chunks the slab has mapped so far.
pub fn slab_bytes() -> usize {
    SLAB.mapped.load(Ordering::Relaxed)
}

/// The slab class of `len` bytes: (index, block size); `None` outside [`SLAB_MIN`]..=[`CHUNK`].
fn class_of(len: usize) -> Option<(usize, usize)> {
    if !(SLAB_MIN..=CHUNK).contains(&len) {
        return None;
    }
    crate::class_from(len, SLAB_MIN.trailing_zeros())
}

/// An owned block of the slab; back to its class's free list when dropped (on any thread).
pub struct Block {
    ptr: NonNull<u8>,
    class: usize,
    size: usize,
}

// SAFETY: a block is memory this value owns exclusively (like a `Box<[u8]>`).
unsafe impl Send for Block {}
// SAFETY: as above; `&Block` gives out only a pointer, whose use the caller's own `unsafe` answers for.
unsafe impl Sync for Block {}

impl Block {
    /// A block of at least `len` bytes (page-aligned, physically contiguous where the kernel gave a huge page),
    /// or `None`: huge pages off, `len` outside the slab's range, the slab at its bound, or no mapping. The
    /// contents are unspecified (zero, or what the previous owner wrote).
    pub fn alloc(len: usize) -> Option<Block> {
        let s = &*SLAB;
        if !s.on {
            return None;
        }
        let (class, size) = class_of(len)?;
        let mut free = s.classes[class].lock().unwrap_or_else(|e| e.into_inner());
        let addr = match free.pop() {
            Some(a) => a,
            None => {
                if s.mapped.fetch_add(CHUNK, Ordering::Relaxed) + CHUNK > s.max.load(Ordering::Relaxed) {
                    s.mapped.fetch_sub(CHUNK, Ordering::Relaxed);
                    return None;
                }
                let Some(chunk) = map_aligned(CHUNK) else {
                    s.mapped.fetch_sub(CHUNK, Ordering::Relaxed);
                    return None;
                };
                let base = chunk.as_ptr() as usize;
                free.extend((1..CHUNK / size).map(|i| base + i * size));
                base
            }
        };
        Some(Block {
            ptr: NonNull::new(addr as *mut u8)?,
            class,
            size,
        })
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The block's size (its class: at least the length asked for).
    pub fn capacity(&self) -> usize {
        self.size
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        SLAB.classes[self.class]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(self.ptr.as_ptr() as usize);
    }
}

/// An anonymous private mapping of `len` bytes (a multiple of the page size); when huge pages are on, aligned to
/// [`CHUNK`] and advised `MADV_HUGEPAGE` if it spans a whole chunk. Unmap it with `munmap(ptr, len)`.
pub fn map_aligned(len: usize) -> Option<NonNull<u8>> {
    let huge = enabled() && len >= CHUNK;
    let span = if huge { len.checked_add(CHUNK)? } else { len };
    // SAFETY: an anonymous private mapping; no file, no fixed address.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            span,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    if !huge {
        return NonNull::new(p.cast());
    }
    let a = p as usize;
    let start = a.next_multiple_of(CHUNK);
    let (head, tail) = (start - a, a + span - (start + len));
    // SAFETY: the head and tail are parts of the mapping just made that lie outside [start, start + len), which
    // is what we keep; madvise on our own mapping has no other effect than the advice.
    unsafe {
        if head > 0 {
            libc::munmap(p, head);
        }
        if tail > 0 {
            libc::munmap((start + len) as *mut libc::c_void, tail);
        }
        // Advice only: without it (or when refused) the pages are ordinary ones.
        libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
    }
    NonNull::new(start as *mut u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_span_the_slab_range() {
        assert_eq!(class_of(SLAB_MIN - 1), None);
        assert_eq!(class_of(SLAB_MIN), Some((0, SLAB_MIN)));
        assert_eq!(class_of(64 << 10), Some((8, 64 << 10)));
        assert_eq!(class_of((64 << 10) + 1), Some((9, 80 << 10)));
        assert_eq!(class_of(CHUNK), Some((NUM_CLASSES - 1, CHUNK)));
        assert_eq!(class_of(CHUNK + 1), None);
    }

    #[test]
    fn blocks_are_aligned_distinct_and_recycled() {
        if !enabled() {
            return;
        }
        // The 48 KiB class: no other test of this binary uses it, so nothing takes the freed block in between
        // (the slab is process-wide and tests run in parallel).
        const SIZE: usize = 48 << 10;
        let a = Block::alloc(SIZE).expect("slab block");
        let b = Block::alloc(SIZE).expect("slab block");
        assert_eq!(a.capacity(), SIZE);
        assert_eq!(a.as_ptr() as usize % 4096, 0);
        let (pa, pb) = (a.as_ptr() as usize, b.as_ptr() as usize);
        assert!(pa.abs_diff(pb) >= SIZE, "blocks overlap");
        // SAFETY: both blocks are ours, SIZE bytes each.
        unsafe {
            std::ptr::write_bytes(a.as_ptr(), 1, SIZE);
            std::ptr::write_bytes(b.as_ptr(), 2, SIZE);
            assert_eq!(*a.as_ptr().add(SIZE - 1), 1);
        }
        drop(a);
        // 44 KiB rounds up to the same class.
        let c = Block::alloc(44 << 10).expect("slab block");
        assert_eq!(c.capacity(), SIZE);
        assert_eq!(
            c.as_ptr() as usize,
            pa,
            "the freed block of the class comes back first"
        );
        drop((b, c));
    }

    #[test]
    fn large_mappings_are_chunk_aligned() {
        let len = 5 << 20;
        let p = map_aligned(len).expect("mapping");
        if enabled() {
            assert_eq!(p.as_ptr() as usize % CHUNK, 0);
        }
        // SAFETY: our mapping of `len` bytes.
        unsafe {
            std::ptr::write_bytes(p.as_ptr(), 7, len);
            libc::munmap(p.as_ptr().cast(), len);
        }
    }
}
