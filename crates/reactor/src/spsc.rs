// SPDX-License-Identifier: LGPL-3.0-or-later
//! A bounded, wait-free single-producer single-consumer ring: the only way work crosses cores.
//!
//! Positions are free-running `usize` counters (`tail` written by the producer, `head` by the consumer); the slot
//! of a position is `pos & mask`. Each side caches the other side's counter and re-reads it (Acquire) only when
//! the cache says full/empty, so the common case touches one shared cache line. A slot is written before the
//! Release store of `tail` that publishes it and read before the Release store of `head` that frees it.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Keeps the two counters on separate cache lines (no false sharing between producer and consumer).
#[repr(align(128))]
struct Padded(AtomicUsize);

struct Inner<T> {
    /// Next position the consumer reads (written only by the consumer).
    head: Padded,
    /// Next position the producer writes (written only by the producer).
    tail: Padded,
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
    mask: usize,
}

// SAFETY: a slot is accessed by one side at a time, handed over through the Release/Acquire pairs on head/tail;
// values of T move between threads, hence T: Send.
unsafe impl<T: Send> Sync for Inner<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Inner<T> {}

impl<T> Drop for Inner<T> {
    fn drop(&mut self) {
        let head = *self.head.0.get_mut();
        let tail = *self.tail.0.get_mut();
        for pos in head..tail {
            let slot = &mut self.slots[pos & self.mask];
            // SAFETY: positions in head..tail hold initialised values nobody consumed.
            unsafe { slot.get_mut().assume_init_drop() };
        }
    }
}

/// The sending half (exactly one thread owns it).
pub struct Producer<T> {
    inner: Arc<Inner<T>>,
    tail: usize,
    head_cache: usize,
}

/// The receiving half (exactly one thread owns it).
pub struct Consumer<T> {
    inner: Arc<Inner<T>>,
    head: usize,
    tail_cache: usize,
}

/// A ring of `capacity` slots (rounded up to a power of two, at least 2).
pub fn channel<T: Send>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    let cap = capacity.max(2).next_power_of_two();
    let slots = (0..cap).map(|_| UnsafeCell::new(MaybeUninit::uninit())).collect();
    let inner = Arc::new(Inner {
        head: Padded(AtomicUsize::new(0)),
        tail: Padded(AtomicUsize::new(0)),
        slots,
        mask: cap - 1,
    });
    (
        Producer {
            inner: inner.clone(),
            tail: 0,
            head_cache: 0,
        },
        Consumer {
            inner,
            head: 0,
            tail_cache: 0,
        },
    )
}

impl<T: Send> Producer<T> {
    pub fn capacity(&self) -> usize {
        self.inner.mask + 1
    }

    /// Append `v`, or hand it back when the ring is full (the caller decides: retry later, shed, or block).
    pub fn push(&mut self, v: T) -> Result<(), T> {
        if self.tail.wrapping_sub(self.head_cache) > self.inner.mask {
            self.head_cache = self.inner.head.0.load(Ordering::Acquire);
            if self.tail.wrapping_sub(self.head_cache) > self.inner.mask {
                return Err(v);
            }
        }
        let slot = &self.inner.slots[self.tail & self.inner.mask];
        // SAFETY: the slot is free (the consumer's head passed it) and only this producer writes slots.
        unsafe { (*slot.get()).write(v) };
        self.tail = self.tail.wrapping_add(1);
        self.inner.tail.0.store(self.tail, Ordering::Release);
        Ok(())
    }

    /// Free slots as far as this side knows (may be stale-low, never high).
    pub fn free_slots(&mut self) -> usize {
        self.head_cache = self.inner.head.0.load(Ordering::Acquire);
        self.capacity() - self.tail.wrapping_sub(self.head_cache)
    }

    /// The consumer half was dropped.
    pub fn is_abandoned(&self) -> bool {
        Arc::strong_count(&self.inner) < 2
    }
}

impl<T: Send> Consumer<T> {
    /// Take the oldest value, if any.
    pub fn pop(&mut self) -> Option<T> {
        if self.head == self.tail_cache {
            self.tail_cache = self.inner.tail.0.load(Ordering::Acquire);
            if self.head == self.tail_cache {
                return None;
            }
        }
        let slot = &self.inner.slots[self.head & self.inner.mask];
        // SAFETY: head < tail, so the producer initialised this slot and published it with its Release store.
        let v = unsafe { (*slot.get()).assume_init_read() };
        self.head = self.head.wrapping_add(1);
        self.inner.head.0.store(self.head, Ordering::Release);
        Some(v)
    }

    /// Take up to `max` values in one go, freeing their slots with a single store at the end (batched per poll).
    pub fn drain(&mut self, max: usize, mut f: impl FnMut(T)) -> usize {
        /// Publishes the consumed position even if `f` panics, so no value is read (or dropped) twice.
        struct Publish<'a, T> {
            inner: &'a Inner<T>,
            head: &'a mut usize,
        }
        impl<T> Drop for Publish<'_, T> {
            fn drop(&mut self) {
                self.inner.head.0.store(*self.head, Ordering::Release);
            }
        }
        self.tail_cache = self.inner.tail.0.load(Ordering::Acquire);
        let n = self.tail_cache.wrapping_sub(self.head).min(max);
        let inner = &*self.inner;
        let g = Publish {
            inner,
            head: &mut self.head,
        };
        for _ in 0..n {
            let slot = &inner.slots[*g.head & inner.mask];
            // SAFETY: as in `pop`; the position is consumed (locally) before `f` runs and published by the guard.
            let v = unsafe { (*slot.get()).assume_init_read() };
            *g.head = g.head.wrapping_add(1);
            f(v);
        }
        drop(g);
        n
    }

    /// Whether anything is waiting (Acquire read of the producer's counter).
    pub fn is_empty(&mut self) -> bool {
        self.tail_cache = self.inner.tail.0.load(Ordering::Acquire);
        self.head == self.tail_cache
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn fifo_and_bounds() {
        let (mut p, mut c) = channel::<u32>(3);
        assert_eq!(p.capacity(), 4);
        for i in 0..4 {
            p.push(i).unwrap();
        }
        assert_eq!(p.push(9), Err(9));
        assert_eq!(c.pop(), Some(0));
        p.push(4).unwrap();
        let mut got = Vec::new();
        assert_eq!(c.drain(10, |v| got.push(v)), 4);
        assert_eq!(got, vec![1, 2, 3, 4]);
        assert_eq!(c.pop(), None);
        assert!(c.is_empty());
    }

    #[test]
    fn a_panicking_drain_callback_drops_nothing_twice() {
        let v = Arc::new(());
        let (mut p, mut c) = channel(8);
        for _ in 0..5 {
            p.push(v.clone()).unwrap();
        }
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut k = 0;
            c.drain(10, |_x| {
                k += 1;
                if k == 2 {
                    panic!("callback panics on the second value");
                }
            });
        }));
        assert!(r.is_err());
        // Two were consumed (and dropped); three remain, and are dropped once with the ring.
        assert_eq!(Arc::strong_count(&v), 4);
        assert!(c.pop().is_some());
        drop(p);
        drop(c);
        assert_eq!(Arc::strong_count(&v), 1);
    }

    #[test]
    fn unconsumed_values_are_dropped() {
        let v = Arc::new(());
        let (mut p, c) = channel(8);
        for _ in 0..5 {
            p.push(v.clone()).unwrap();
        }
        assert_eq!(Arc::strong_count(&v), 6);
        drop(p);
        drop(c);
        assert_eq!(Arc::strong_count(&v), 1);
    }
}
