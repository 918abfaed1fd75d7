// SPDX-License-Identifier: LGPL-3.0-or-later
//! Storage hook 3: a device's IO on the core's own ring ([`CoreCtx::device_ring`]).
//!
//! The core's `IoUring` lives here, shared (`Rc<RefCell<..>>`, one thread) between the loop and one
//! [`DeviceRing`] handle that a storage device keeps. The device pushes its entries straight into the core's
//! submission queue (the turn's one `io_uring_enter` submits them with the socket IO), and the loop routes the
//! device's completions, recognised by their user_data range, into a list the device takes from — no second
//! ring, no poll on its fd, no `io_uring_enter` of its own. A device that must block (a metadata miss, an
//! unmount) calls [`DeviceRing::wait`]: it waits on the core's ring, keeps the device completions and sets the
//! core's other completions aside; the loop dispatches those at the start of its next reap, in order.
//!
//! [`CoreCtx::device_ring`]: crate::CoreCtx::device_ring

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use io_uring::{IoUring, squeue};

/// user_data of device entries: this bit plus the device's token. Op indices stay far below it and the wake-up
/// range (`UD_WAKE_BASE`, `UD_IGNORE`) far above.
pub(crate) const UD_DEV_BIT: u64 = 1 << 62;
/// Largest token a device may use.
pub const DEVICE_TOKEN_MAX: u64 = (1 << 48) - 1;

/// Whether a completion's user_data belongs to the device.
pub(crate) fn is_device(ud: u64) -> bool {
    ud & !DEVICE_TOKEN_MAX == UD_DEV_BIT
}

pub(crate) struct RingShare {
    pub(crate) ring: RefCell<IoUring>,
    /// Device completions (token, result) not taken yet.
    dev_done: RefCell<Vec<(u64, i32)>>,
    /// Completions of the core's own ops reaped during a device's blocking wait: dispatched by the loop first.
    pub(crate) deferred: RefCell<Vec<(u64, i32, u32)>>,
    dev_sqes: Cell<u64>,
    dev_cqes: Cell<u64>,
    dev_waits: Cell<u64>,
}

impl RingShare {
    pub(crate) fn new(ring: IoUring) -> Self {
        RingShare {
            ring: RefCell::new(ring),
            dev_done: RefCell::default(),
            deferred: RefCell::default(),
            dev_sqes: Cell::new(0),
            dev_cqes: Cell::new(0),
            dev_waits: Cell::new(0),
        }
    }

    /// Route one completion reaped by the loop: true if it was the device's (kept for it).
    pub(crate) fn route(&self, ud: u64, res: i32) -> bool {
        if is_device(ud) {
            self.dev_done.borrow_mut().push((ud & DEVICE_TOKEN_MAX, res));
            self.dev_cqes.set(self.dev_cqes.get() + 1);
            true
        } else {
            false
        }
    }

    /// Device completions wait to be taken (the service takes them in its next `on_poll`).
    pub(crate) fn device_pending(&self) -> bool {
        !self.dev_done.borrow().is_empty()
    }

    /// (entries pushed, completions routed, blocking waits) by the device.
    pub(crate) fn counts(&self) -> (u64, u64, u64) {
        (self.dev_sqes.get(), self.dev_cqes.get(), self.dev_waits.get())
    }
}

/// A storage device's handle on its core's ring (see the module doc). Not `Send`: it lives on the core.
#[derive(Clone)]
pub struct DeviceRing(pub(crate) Rc<RingShare>);

impl DeviceRing {
    /// Queue `entry` on the core's ring with `token` (at most [`DEVICE_TOKEN_MAX`]; user_data is overwritten).
    /// It reaches the kernel with the core's next `io_uring_enter` (the end of the current turn), or at once if
    /// the submission queue is full. Its completion comes back through [`DeviceRing::take`].
    ///
    /// # Safety
    /// Every buffer, fd and struct the entry points to must stay valid until its completion is taken.
    pub unsafe fn push(&self, entry: squeue::Entry, token: u64) {
        debug_assert!(token <= DEVICE_TOKEN_MAX);
        let e = entry.user_data(UD_DEV_BIT | (token & DEVICE_TOKEN_MAX));
        self.0.dev_sqes.set(self.0.dev_sqes.get() + 1);
        let mut ring = self.0.ring.borrow_mut();
        loop {
            // SAFETY: forwarded to the caller.
            if unsafe { ring.submission().push(&e) }.is_ok() {
                return;
            }
            // Full: hand the queue to the kernel. On EBUSY (completion queue overflowed) make room by reaping.
            if ring.submit().is_err() {
                self.reap(&mut ring);
            }
        }
    }

    /// Append the device completions routed so far, as (token, result).
    pub fn take(&self, out: &mut Vec<(u64, i32)>) {
        out.append(&mut self.0.dev_done.borrow_mut());
    }

    /// Block until at least one device completion can be taken (submitting what is queued). Only for a device
    /// with entries in flight: it would otherwise sleep until some other completion of the core comes.
    pub fn wait(&self) {
        while !self.0.device_pending() {
            self.0.dev_waits.set(self.0.dev_waits.get() + 1);
            let mut ring = self.0.ring.borrow_mut();
            if let Err(e) = ring.submit_and_wait(1)
                && !matches!(
                    e.raw_os_error(),
                    Some(libc::EINTR | libc::EBUSY | libc::ETIME | libc::EAGAIN)
                )
            {
                // Nothing sensible to do but retry; avoid a hot spin.
                drop(ring);
                std::thread::yield_now();
                continue;
            }
            self.reap(&mut ring);
        }
    }

    /// Give the device a table of `n` fixed-buffer slots on the core's ring (`IORING_REGISTER_BUFFERS2`, sparse),
    /// filled one slot at a time with [`DeviceRing::set_buffer`]; entries then name a slot (`ReadFixed`,
    /// `WriteFixed`) and the kernel skips pinning the buffer's pages for each IO. The table is the device's alone
    /// (the loop registers no buffers of its own). Fails if the kernel refuses it (old kernel, a table already
    /// registered).
    pub fn register_buffer_slots(&self, n: u32) -> std::io::Result<()> {
        self.0.ring.borrow().submitter().register_buffers_sparse(n)
    }

    /// Point slot `index` of the table ([`DeviceRing::register_buffer_slots`]) at `len` bytes at `ptr` (the
    /// kernel pins those pages now, once; `ENOMEM` when RLIMIT_MEMLOCK refuses it), or clear it with a null
    /// `ptr`.
    ///
    /// # Safety
    /// The memory must stay allocated while the slot points at it and an entry naming the slot is in flight.
    pub unsafe fn set_buffer(&self, index: u32, ptr: *mut u8, len: usize) -> std::io::Result<()> {
        let iov = libc::iovec {
            iov_base: ptr.cast(),
            iov_len: if ptr.is_null() { 0 } else { len },
        };
        // SAFETY: forwarded to the caller.
        unsafe {
            self.0
                .ring
                .borrow()
                .submitter()
                .register_buffers_update(index, &[iov], None)
        }
    }

    /// Hand the queued entries to the kernel now (without waiting).
    pub fn submit(&self) {
        let _ = self.0.ring.borrow_mut().submit();
    }

    fn reap(&self, ring: &mut IoUring) {
        for c in ring.completion() {
            if !self.0.route(c.user_data(), c.result()) {
                self.0
                    .deferred
                    .borrow_mut()
                    .push((c.user_data(), c.result(), c.flags()));
            }
        }
    }
}
