// SPDX-License-Identifier: LGPL-3.0-or-later
//! Heap buffers aligned for O_DIRECT and a bounded pool of them (read buffers and write bounce buffers of the
//! io_uring backend, the engine's log records). Plain memory: no IO here, so the sans-IO engine may use it too;
//! with `uring.rs` the only module with `unsafe` (the aligned allocation).

use crate::hash::FastMap;
use pagepool::contig;
use std::alloc::Layout;
use std::sync::{Arc, Mutex};

const ALIGN: usize = 4096;

/// A buffer aligned for O_DIRECT: from the heap, or physically contiguous from huge pages when it is large
/// enough (`pagepool::contig`: a virtio or NVMe request then names one memory segment instead of one per page).
pub struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
    mem: Mem,
    /// The io_uring fixed-buffer table (a process-unique id) and slot this memory is registered in (`uring.rs`):
    /// such a buffer is never freed while the device lives (the pool keeps it), so no slot points at freed memory.
    pub(crate) fixed: Option<(u32, u16)>,
}

// SAFETY: AlignedBuf uniquely owns its allocation; nothing else aliases it.
unsafe impl Send for AlignedBuf {}

/// Where an [`AlignedBuf`]'s memory comes from (and goes back to).
enum Mem {
    Heap,
    /// A huge-page slab block (returned to its class when dropped).
    Slab {
        _block: contig::Block,
    },
    /// A mapping of its own (`contig::map_aligned`) of this many bytes.
    Mapped(usize),
}

impl AlignedBuf {
    pub fn zeroed(len: usize) -> Self {
        Self::alloc(len, true)
    }

    /// A buffer whose contents are unspecified (zeroes, or a previous user's bytes): for a buffer every byte of
    /// which is written before anything reads it (a device read, a copy). A recycled slab block is not cleared
    /// first, which would be a pass over memory the device is about to overwrite.
    pub(crate) fn for_overwrite(len: usize) -> Self {
        Self::alloc(len, false)
    }

    fn alloc(len: usize, zero: bool) -> Self {
        if let Some(block) = contig::Block::alloc(len) {
            let ptr = std::ptr::NonNull::new(block.as_ptr()).expect("slab blocks are non-null");
            if zero {
                // SAFETY: the block holds at least `len` bytes and is ours alone; it may hold a previous user's
                // bytes.
                unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, len) };
            }
            return AlignedBuf {
                ptr,
                len,
                mem: Mem::Slab { _block: block },
                fixed: None,
            };
        }
        if len > contig::CHUNK && contig::enabled() {
            let map_len = len.next_multiple_of(ALIGN);
            // A fresh anonymous mapping reads as zeroes.
            if let Some(ptr) = contig::map_aligned(map_len) {
                return AlignedBuf {
                    ptr,
                    len,
                    mem: Mem::Mapped(map_len),
                    fixed: None,
                };
            }
        }
        let layout = Layout::from_size_align(len.max(ALIGN), ALIGN).expect("valid layout");
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = std::ptr::NonNull::new(p).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf {
            ptr,
            len,
            mem: Mem::Heap,
            fixed: None,
        }
    }
    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl AsRef<[u8]> for AlignedBuf {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes and initialised (alloc_zeroed, a fresh mapping, or a slab block's
        // earlier bytes).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl AsMut<[u8]> for AlignedBuf {
    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and we hold the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        match self.mem {
            Mem::Heap => {
                let layout = Layout::from_size_align(self.len.max(ALIGN), ALIGN).expect("valid layout");
                // SAFETY: allocated in `alloc` with this very layout.
                unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) }
            }
            // The block goes back to the slab as the field drops.
            Mem::Slab { .. } => {}
            // SAFETY: our own mapping of `n` bytes from `contig::map_aligned`; nothing references it any more.
            Mem::Mapped(n) => unsafe {
                libc::munmap(self.ptr.as_ptr().cast(), n);
            },
        }
    }
}

/// The buffer size a device read of `len` bytes takes from the pool: a power of two up to a huge-page chunk,
/// whole chunks above. The runs of a part-healed object come in many lengths; taken at their exact length they
/// missed the pool (keyed by length) and mapped, faulted in and zeroed fresh memory on every read (a 4 MiB read
/// in two runs: 21 % of the core zeroing huge pages, session 30). Rounded, they recycle each other's buffers.
pub(crate) fn read_class(len: usize) -> usize {
    if len > contig::CHUNK {
        len.next_multiple_of(contig::CHUNK)
    } else {
        len.next_power_of_two().max(ALIGN)
    }
}

/// Recycles read buffers: a 4 MiB read would otherwise pay for a fresh mmap, its zeroing and its page faults.
/// Bounded (`POOL_MAX_BYTES`); `Mutex` only because `Bytes` owners must be `Send` (never contended: one shard).
#[derive(Clone)]
pub(crate) struct BufPool(Arc<Mutex<FastMap<usize, Vec<AlignedBuf>>>>, usize);

impl BufPool {
    pub(crate) fn new(max_bytes: usize) -> Self {
        BufPool(Arc::default(), max_bytes)
    }
    pub(crate) fn get(&self, len: usize) -> AlignedBuf {
        self.get_counted(len).0
    }
    /// A buffer of `len` bytes, and whether it is new memory (the pool had none of that size idle).
    pub(crate) fn get_counted(&self, len: usize) -> (AlignedBuf, bool) {
        let reused = self
            .0
            .lock()
            .ok()
            .and_then(|mut m| m.get_mut(&len).and_then(|v| v.pop()));
        // Every user writes what it hands out (a device read fills it or fails; copies fill their length).
        match reused {
            Some(b) => (b, false),
            None => (AlignedBuf::for_overwrite(len), true),
        }
    }
    pub(crate) fn put(&self, b: AlignedBuf) {
        if let Ok(mut m) = self.0.lock() {
            let held: usize = m.iter().map(|(l, v)| l * v.len()).sum();
            // A registered buffer always stays (bounded by the device's fixed-buffer budget, on top of this one).
            if held + b.len <= self.1 || b.fixed.is_some() {
                m.entry(b.len).or_default().push(b);
            }
        } else if b.fixed.is_some() {
            // (poisoned: only after a panic) never free registered memory
            std::mem::forget(b);
        }
    }
}

/// A read buffer handed out as `Bytes`; returns to the pool when the last reference drops.
pub(crate) struct PooledBuf {
    pub(crate) buf: Option<AlignedBuf>,
    pub(crate) pool: BufPool,
}

impl AsRef<[u8]> for PooledBuf {
    fn as_ref(&self) -> &[u8] {
        self.buf.as_ref().map(|b| b.as_ref()).unwrap_or(&[])
    }
}

impl Drop for PooledBuf {
    fn drop(&mut self) {
        if let Some(b) = self.buf.take() {
            self.pool.put(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_and_zeroed_even_when_recycled() {
        for len in [4096, 64 << 10, 100 << 10, contig::CHUNK, 5 << 20] {
            let mut a = AlignedBuf::zeroed(len);
            assert_eq!(a.as_ref().len(), len);
            assert_eq!(a.as_ref().as_ptr() as usize % ALIGN, 0);
            a.as_mut().fill(0xab);
            drop(a);
            // A slab class hands the block just freed out again (LIFO): it must come back zeroed.
            let b = AlignedBuf::zeroed(len);
            assert!(b.as_ref().iter().all(|&x| x == 0), "{len}-byte buffer not zeroed");
        }
    }

    #[test]
    fn read_classes_cover_the_length_and_are_few() {
        for (len, class) in [
            (1, 4096),
            (4096, 4096),
            (12 << 10, 16 << 10),
            (64 << 10, 64 << 10),
            ((64 << 10) + 4096, 128 << 10),
            (contig::CHUNK, contig::CHUNK),
            (contig::CHUNK + 4096, 2 * contig::CHUNK),
            (4 << 20, 4 << 20),
        ] {
            assert_eq!(read_class(len), class, "{len}");
        }
    }

    #[test]
    fn mid_sized_buffers_are_slab_blocks_when_huge_pages_are_on() {
        let a = AlignedBuf::zeroed(64 << 10);
        assert_eq!(matches!(a.mem, Mem::Slab { .. }), contig::enabled());
        let big = AlignedBuf::zeroed(5 << 20);
        assert_eq!(matches!(big.mem, Mem::Mapped(_)), contig::enabled());
        if contig::enabled() {
            assert_eq!(big.as_ref().as_ptr() as usize % contig::CHUNK, 0);
        }
    }
}
