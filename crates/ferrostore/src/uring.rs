// SPDX-License-Identifier: LGPL-3.0-or-later
//! The production `Device`: io_uring + O_DIRECT on a file or block device, one ring per shard (per core).
//!
//! This is the only module with syscalls and `unsafe`. Buffers handed to the kernel are kept alive in the
//! in-flight slot table until their completion is reaped. Writes go straight from the caller's `Bytes` when every
//! piece is 512-byte aligned in address and length (gathered with `writev`); otherwise the pieces are copied once
//! into an aligned bounce buffer. Reads land in aligned buffers that become `Bytes` without a copy.
//!
//! The device owns a ring of its own, or — once [`UringDevice::attach`]ed to a [`SharedRing`] (a reactor core's
//! ring) — builds the same entries and submits them there: they then reach the kernel with the core's one
//! `io_uring_enter` per turn, and their completions come back through the core's loop instead of waking it
//! through a poll on this ring's fd.

use crate::device::{Completion, Device, DeviceStats, Tag};
use bytes::Bytes;
use io_uring::{IoUring, opcode, squeue, types};
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;

const DIO_ALIGN: usize = 512;

pub use crate::iobuf::AlignedBuf;
use crate::iobuf::{BufPool, PooledBuf};

/// Default `UringOptions::read_pool_bytes`: 16 buffers of 4 MiB. A buffer the pool cannot supply is new memory,
/// which the kernel faults in and clears inside the read's submission, a stall of the core (on this project's VM
/// 10+ ms for a 4 MiB read). At 16 MiB, 4 MiB reads at QD4 still missed on 5 % of their reads (the buffers of
/// replies being sent are not idle), and the 64 KiB pieces of scattered 4 MiB objects on most: 64 MiB took the
/// misses from 418 to 4 and from 31,528 to 1,871 (docs/benchmarks.md, session 31). It holds only what reads of
/// that size once needed at the same time.
pub const DEFAULT_READ_POOL_BYTES: usize = 64 << 20;

enum Slot {
    Read {
        tag: Tag,
        buf: AlignedBuf,
        len: usize,
    },
    /// Everything the kernel may still read from must stay here until the completion.
    Write {
        tag: Tag,
        _bufs: Vec<Bytes>,
        _iov: Vec<libc::iovec>,
        bounce: Option<AlignedBuf>,
        len: usize,
    },
    Flush {
        tag: Tag,
    },
}

/// A ring owned by someone else (a reactor core, `reactor::DeviceRing`) that the device submits on instead of
/// its own, so that one `io_uring_enter` per turn serves sockets and storage.
pub trait SharedRing {
    /// Queue `entry` with `token` (the ring sets the entry's user_data); its completion comes back through
    /// [`SharedRing::take`].
    ///
    /// # Safety
    /// Every buffer and struct the entry points to must stay valid until its completion is taken.
    unsafe fn push(&mut self, entry: squeue::Entry, token: u64);
    /// Append the completions that arrived, as (token, result).
    fn take(&mut self, out: &mut Vec<(u64, i32)>);
    /// Block until [`SharedRing::take`] has something (called only with entries in flight).
    fn wait(&mut self);
    /// Register an empty table of `n` fixed-buffer slots for this device (`IORING_REGISTER_BUFFERS2`, sparse);
    /// false if the ring does not offer one (the default) or the kernel refuses.
    fn register_buffer_slots(&mut self, _n: u32) -> bool {
        false
    }
    /// Point fixed-buffer slot `index` at `len` bytes at `ptr` (null: clear it); false on failure.
    ///
    /// # Safety
    /// The memory must stay allocated while the slot points at it.
    unsafe fn set_buffer(&mut self, _index: u32, _ptr: *mut u8, _len: usize) -> bool {
        false
    }
}

/// The environment variable that overrides the durability mode for A/B runs ([`UringOptions::with_env`]): `dsync`
/// (RWF_DSYNC on every write, no flushes), `ordered` (RWF_DSYNC, ordered commits where the device has no FUA:
/// [`UringOptions::ordered_commits`]) or `flush` (plain writes, fdatasync per group commit).
pub const DURABILITY_ENV: &str = "FERROSTORE_DURABILITY";

/// The environment variable that overrides [`UringOptions::unsynced_writes`] (`0`: off, `1`: on), for A/B runs.
pub const UNSYNCED_ENV: &str = "FERROSTORE_UNSYNCED_WRITES";

/// The environment variable that overrides [`UringOptions::fixed_buffers`] (`0`: off, `1`: on), for A/B runs.
pub const FIXED_BUFFERS_ENV: &str = "FERROSTORE_FIXED_BUFFERS";

/// Fixed-buffer slots registered per device (one per read buffer; buffers are never unregistered).
const FIXED_SLOTS: u32 = 1024;

#[derive(Debug, Clone, Copy)]
pub struct UringOptions {
    pub queue_depth: u32,
    /// Write with RWF_DSYNC (FUA on NVMe) instead of issuing fdatasync flushes (the default).
    pub dsync_writes: bool,
    /// With `dsync_writes`, on a device without FUA (`queue/fua` 0 in sysfs for the file's block device): a
    /// group commit's data writes go plain and its log record, written with RWF_DSYNC once they completed, makes
    /// them durable too — RWF_DSYNC there is the write plus a cache flush, which covers every write completed
    /// before it ([`Device::durable_writes_flush`]). One flush per group commit instead of one per data write and
    /// log record, at the price of the log write waiting for the data writes. On a device with FUA, or when its
    /// FUA support cannot be read, it has no effect: RWF_DSYNC is then a FUA write of that write alone, so every
    /// data write keeps its own RWF_DSYNC (in parallel with the log record).
    pub ordered_commits: bool,
    /// Bytes of idle read buffers kept for reuse (part of the shard's memory budget).
    pub read_pool_bytes: usize,
    /// Honour [`Device::submit_write_unsynced`] (a plain write even with `dsync_writes`; default). `false` makes
    /// those writes RWF_DSYNC like all others (the behaviour before session 7; for A/B runs).
    pub unsynced_writes: bool,
    /// Read into registered (fixed) buffers with `READ_FIXED`: the kernel pins a buffer's pages once, when it is
    /// registered, instead of for every O_DIRECT read (`FIXED_BUFFERS_ENV`). Read buffers are registered as the
    /// pool creates them, up to [`UringOptions::fixed_buffer_bytes`]; reads beyond it, or on a kernel or
    /// RLIMIT_MEMLOCK that refuses, use plain reads.
    pub fixed_buffers: bool,
    /// Most bytes of registered read buffers (kept by the read pool for the device's lifetime, on top of
    /// `read_pool_bytes`).
    pub fixed_buffer_bytes: usize,
}

impl UringOptions {
    /// Apply [`DURABILITY_ENV`] (`dsync`, `ordered` or `flush`) and [`UNSYNCED_ENV`] (`0` or `1`) if set; anything else
    /// leaves the options as they are.
    pub fn with_env(mut self) -> Self {
        match std::env::var(DURABILITY_ENV).as_deref() {
            Ok("dsync") => (self.dsync_writes, self.ordered_commits) = (true, false),
            Ok("ordered") => (self.dsync_writes, self.ordered_commits) = (true, true),
            Ok("flush") => self.dsync_writes = false,
            _ => {}
        }
        match std::env::var(UNSYNCED_ENV).as_deref() {
            Ok("0") => self.unsynced_writes = false,
            Ok("1") => self.unsynced_writes = true,
            _ => {}
        }
        match std::env::var(FIXED_BUFFERS_ENV).as_deref() {
            Ok("0") => self.fixed_buffers = false,
            Ok("1") => self.fixed_buffers = true,
            _ => {}
        }
        self
    }
}

impl Default for UringOptions {
    fn default() -> Self {
        UringOptions {
            queue_depth: 512,
            dsync_writes: false,
            ordered_commits: false,
            read_pool_bytes: DEFAULT_READ_POOL_BYTES,
            unsynced_writes: true,
            fixed_buffers: true,
            fixed_buffer_bytes: 4 << 20,
        }
    }
}

pub struct UringDevice {
    ring: IoUring,
    file: File,
    size: u64,
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
    ready: Vec<Completion>,
    inflight: usize,
    unsubmitted: usize,
    stats: DeviceStats,
    opts: UringOptions,
    logical_block: u64,
    pool: BufPool,
    /// Set by [`UringDevice::attach`]: entries go there instead of `ring`.
    shared: Option<Box<dyn SharedRing>>,
    /// Completions being processed (reused).
    cqes: Vec<(u64, i32)>,
    /// Registered read buffers, while the ring has a slot table (`UringOptions::fixed_buffers`).
    fixed: Option<FixedSlots>,
    /// The device under the file reports no FUA (`queue/fua` = 0): RWF_DSYNC is a write plus a cache flush.
    no_fua: bool,
}

/// The device's fixed-buffer table: slots `0..used` hold read buffers of the pool (`used_bytes` in all).
/// `table` tells this table's buffers from those of a table the device had before [`UringDevice::attach`].
struct FixedSlots {
    table: u32,
    used: u32,
    used_bytes: usize,
}

impl FixedSlots {
    fn new() -> Self {
        static TABLES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        FixedSlots {
            table: TABLES.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            used: 0,
            used_bytes: 0,
        }
    }
}

impl UringDevice {
    /// Open `path` with O_DIRECT. A regular file is created/extended to `size_bytes` if given; a block device's
    /// size is its own.
    pub fn open(path: &Path, size_bytes: Option<u64>, opts: UringOptions) -> std::io::Result<Self> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(size_bytes.is_some())
            .truncate(false)
            .custom_flags(libc::O_DIRECT)
            .open(path)?;
        if let Some(sz) = size_bytes
            && file.metadata()?.is_file()
            && file.metadata()?.len() < sz
        {
            file.set_len(sz)?;
        }
        let size = file.seek(SeekFrom::End(0))?;
        let mut lbs = 512u64;
        if file.metadata()?.file_type().is_block_device() {
            let mut v: libc::c_int = 0;
            // SAFETY: BLKSSZGET writes one int through the pointer we pass.
            if unsafe { libc::ioctl(file.as_raw_fd(), libc::BLKSSZGET, &mut v) } == 0 && v > 0 {
                lbs = v as u64;
            }
        }
        let no_fua = device_fua(&file) == Some(false);
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_coop_taskrun()
            .build(opts.queue_depth)?;
        let fixed = (opts.fixed_buffers && ring.submitter().register_buffers_sparse(FIXED_SLOTS).is_ok())
            .then(FixedSlots::new);
        Ok(UringDevice {
            ring,
            file,
            size,
            slots: Vec::new(),
            free: Vec::new(),
            ready: Vec::new(),
            inflight: 0,
            unsubmitted: 0,
            stats: DeviceStats::default(),
            opts,
            logical_block: lbs,
            pool: BufPool::new(opts.read_pool_bytes),
            shared: None,
            cqes: Vec::new(),
            fixed,
            no_fua,
        })
    }

    /// Whether the block device under the file reports FUA (None: unknown). See [`device_fua`].
    pub fn has_fua(&self) -> Option<bool> {
        device_fua(&self.file)
    }

    fn slot(&mut self, s: Slot) -> usize {
        match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(s);
                i
            }
            None => {
                self.slots.push(Some(s));
                self.slots.len() - 1
            }
        }
    }

    /// Submit from now on through `ring` (a reactor core's ring) instead of the device's own. IO in flight on the
    /// own ring is waited for first (its completions are returned by the next `poll`).
    pub fn attach(&mut self, ring: Box<dyn SharedRing>) {
        self.submit_pending();
        while self.inflight > 0 {
            let _ = self.ring.submit_and_wait(1);
            self.reap();
        }
        // Registered buffers belong to the own ring's table: start over on the shared ring's (the buffers that
        // were registered stay in the pool, unused by fixed reads).
        let mut ring = ring;
        self.fixed =
            (self.opts.fixed_buffers && ring.register_buffer_slots(FIXED_SLOTS)).then(FixedSlots::new);
        self.shared = Some(ring);
    }

    /// Register `buf` in the next free fixed-buffer slot if the budget allows: its reads then skip page pinning.
    fn fix(&mut self, buf: &mut AlignedBuf) {
        let Some(f) = self.fixed.as_mut() else { return };
        let len = buf.as_ref().len();
        if f.used >= FIXED_SLOTS || f.used_bytes + len > self.opts.fixed_buffer_bytes {
            return;
        }
        let (i, ptr) = (f.used, buf.as_mut_ptr());
        // SAFETY: a registered buffer is never freed while the device lives (the pool keeps it: `BufPool::put`),
        // and `Drop` clears the slots before the device goes.
        let ok = unsafe {
            match self.shared.as_mut() {
                Some(s) => s.set_buffer(i, ptr, len),
                None => {
                    let iov = libc::iovec {
                        iov_base: ptr.cast(),
                        iov_len: len,
                    };
                    self.ring
                        .submitter()
                        .register_buffers_update(i, &[iov], None)
                        .is_ok()
                }
            }
        };
        if !ok {
            // RLIMIT_MEMLOCK or the kernel refuses: plain reads from now on (the slots used so far stay valid)
            f.used = FIXED_SLOTS;
            return;
        }
        f.used += 1;
        f.used_bytes += len;
        buf.fixed = Some((f.table, i as u16));
    }

    /// Whether the device submits on a shared ring ([`UringDevice::attach`]).
    pub fn is_attached(&self) -> bool {
        self.shared.is_some()
    }

    fn push(&mut self, e: squeue::Entry, slot: usize) {
        if let Some(s) = self.shared.as_mut() {
            // SAFETY: every buffer the entry points to is owned by its slot until the completion is taken.
            unsafe { s.push(e, slot as u64) };
            self.inflight += 1;
            return;
        }
        let e = e.user_data(slot as u64);
        loop {
            // SAFETY: every buffer the entry points to is owned by its slot until the completion is reaped.
            if unsafe { self.ring.submission().push(&e) }.is_ok() {
                self.unsubmitted += 1;
                self.inflight += 1;
                return;
            }
            // Submission queue full: hand what we have to the kernel and make room.
            if self.ring.submit().is_ok() {
                self.unsubmitted = 0;
            }
            self.reap();
            if self.ring.submission().is_full() {
                let _ = self.ring.submit_and_wait(1);
                self.reap();
            }
        }
    }

    fn fail_now(&mut self, tag: Tag, e: String) {
        self.ready.push(Completion { tag, result: Err(e) });
    }

    fn reap(&mut self) {
        let mut cqes = std::mem::take(&mut self.cqes);
        match self.shared.as_mut() {
            Some(s) => s.take(&mut cqes),
            None => loop {
                cqes.extend(self.ring.completion().map(|c| (c.user_data(), c.result())));
                // More IO can be in flight than the completion queue holds (a checkpoint's node writes): the
                // completions without room wait in the kernel's overflow list, and only an io_uring_enter with
                // GETEVENTS moves them into the queue (`submit` passes it while the ring flags the overflow).
                // Reading the queue never does, and the ring's fd does not turn readable for them, so a caller
                // that polls and then sleeps on the fd would wait for them until other IO entered the kernel
                // (seen as write QD16 tests stuck for 100 s with every op waiting for commit).
                if !self.ring.submission().cq_overflow() {
                    break;
                }
                if self.ring.submit().is_ok() {
                    self.unsubmitted = 0;
                }
            },
        }
        for &(ud, res) in &cqes {
            let Some(slot) = self.slots.get_mut(ud as usize).and_then(|s| s.take()) else {
                continue;
            };
            self.free.push(ud as usize);
            self.inflight -= 1;
            let err = |res: i32| format!("io_uring: {}", std::io::Error::from_raw_os_error(-res));
            let c = match slot {
                Slot::Read { tag, buf, len } => {
                    if res < 0 {
                        Completion {
                            tag,
                            result: Err(err(res)),
                        }
                    } else if res as usize != len {
                        Completion {
                            tag,
                            result: Err(format!("short read {res} of {len}")),
                        }
                    } else {
                        Completion {
                            tag,
                            result: Ok(Some(
                                Bytes::from_owner(PooledBuf {
                                    buf: Some(buf),
                                    pool: self.pool.clone(),
                                })
                                .slice(..len),
                            )),
                        }
                    }
                }
                Slot::Write { tag, len, bounce, .. } => {
                    if let Some(b) = bounce {
                        self.pool.put(b);
                    }
                    if res < 0 {
                        Completion {
                            tag,
                            result: Err(err(res)),
                        }
                    } else if res as usize != len {
                        Completion {
                            tag,
                            result: Err(format!("short write {res} of {len}")),
                        }
                    } else {
                        Completion {
                            tag,
                            result: Ok(None),
                        }
                    }
                }
                Slot::Flush { tag } => Completion {
                    tag,
                    result: if res < 0 { Err(err(res)) } else { Ok(None) },
                },
            };
            self.ready.push(c);
        }
        cqes.clear();
        self.cqes = cqes;
    }

    fn fd(&self) -> types::Fd {
        types::Fd(self.file.as_raw_fd())
    }

    /// The io_uring's own file descriptor. It polls readable while the completion queue holds an entry, so a
    /// reactor can sleep on it (watch it for POLLIN) instead of busy-polling `Device::poll` while IO is in flight.
    /// Valid as long as the device lives; the caller must not close it.
    pub fn ring_fd(&self) -> std::os::unix::io::RawFd {
        self.ring.as_raw_fd()
    }

    /// Hand entries queued since the last `poll` to the kernel now (`Store::poll` may queue IO after its device
    /// poll, e.g. the flush that follows completed writes): a caller about to sleep on [`Self::ring_fd`] calls
    /// this first, or that IO would wait for its next poll.
    pub fn submit_pending(&mut self) {
        // Attached: the entries are on the core's ring, which submits them at the end of its turn.
        if self.shared.is_none() && self.unsubmitted > 0 && self.ring.submit().is_ok() {
            self.unsubmitted = 0;
        }
    }

    /// One write; `dsync`: with RWF_DSYNC (durable on completion).
    fn write(&mut self, tag: Tag, offset: u64, bufs: Vec<Bytes>, dsync: bool) {
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        self.stats.writes += 1;
        self.stats.bytes_written += len as u64;
        if len == 0 || len > u32::MAX as usize {
            return self.fail_now(tag, format!("bad write length {len}"));
        }
        if dsync {
            self.stats.synced_writes += 1;
        }
        let flags = if dsync { libc::RWF_DSYNC } else { 0 };
        let aligned = bufs.len() <= 1024
            && bufs.iter().all(|b| {
                (b.as_ptr() as usize).is_multiple_of(DIO_ALIGN) && b.len().is_multiple_of(DIO_ALIGN)
            });
        let fd = self.fd();
        let (e, i) = if aligned && bufs.len() == 1 {
            // Zero copy: the caller's buffer goes to the device as is.
            let p = bufs[0].as_ptr();
            let i = self.slot(Slot::Write {
                tag,
                _bufs: bufs,
                _iov: Vec::new(),
                bounce: None,
                len,
            });
            let e = opcode::Write::new(fd, p, len as u32)
                .offset(offset)
                .rw_flags(flags)
                .build();
            (e, i)
        } else if aligned {
            let iov: Vec<libc::iovec> = bufs
                .iter()
                .map(|b| libc::iovec {
                    iov_base: b.as_ptr() as *mut _,
                    iov_len: b.len(),
                })
                .collect();
            let (p, n) = (iov.as_ptr(), iov.len() as u32);
            let i = self.slot(Slot::Write {
                tag,
                _bufs: bufs,
                _iov: iov,
                bounce: None,
                len,
            });
            let e = opcode::Writev::new(fd, p, n)
                .offset(offset)
                .rw_flags(flags)
                .build();
            (e, i)
        } else {
            self.stats.write_copies += 1;
            self.stats.bytes_copied += len as u64;
            // Pooled: no aligned allocation and zeroing per unaligned write (e.g. a log record built in a `Vec`).
            let mut bounce = self.pool.get(len);
            let mut at = 0;
            for b in &bufs {
                bounce.as_mut()[at..at + b.len()].copy_from_slice(b);
                at += b.len();
            }
            let p = bounce.as_mut_ptr() as *const u8;
            let i = self.slot(Slot::Write {
                tag,
                _bufs: Vec::new(),
                _iov: Vec::new(),
                bounce: Some(bounce),
                len,
            });
            let e = opcode::Write::new(fd, p, len as u32)
                .offset(offset)
                .rw_flags(flags)
                .build();
            (e, i)
        };
        self.push(e, i);
    }
}

/// Whether the block device under `file` (the device itself, or the one holding the file system of a regular
/// file) writes with FUA, from sysfs `queue/fua` (a partition's is its disk's). None when it cannot be told: no
/// sysfs, a file system without one block device (tmpfs, btrfs, overlayfs: an anonymous device number).
pub fn device_fua(file: &File) -> Option<bool> {
    use std::os::unix::fs::MetadataExt;
    let md = file.metadata().ok()?;
    let dev = if md.file_type().is_block_device() {
        md.rdev()
    } else {
        md.dev()
    };
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let base = format!("/sys/dev/block/{major}:{minor}");
    // A partition has no queue directory of its own; `..` of its sysfs directory is the disk.
    let text = std::fs::read_to_string(format!("{base}/queue/fua"))
        .or_else(|_| std::fs::read_to_string(format!("{base}/../queue/fua")))
        .ok()?;
    match text.trim() {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

impl Drop for UringDevice {
    fn drop(&mut self) {
        // On a shared ring nobody else waits for our IO: the kernel may still read or write the slots' buffers
        // until their completions come, so wait for them (bounded), and leak what is still held after that.
        if self.shared.is_some() {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while self.inflight > 0 && std::time::Instant::now() < deadline {
                if let Some(s) = self.shared.as_mut() {
                    s.wait();
                }
                self.reap();
            }
            if self.inflight > 0 {
                std::mem::forget(std::mem::take(&mut self.slots));
            }
            // The core's ring outlives the device: no slot may keep pointing at the pool's memory.
            if let (Some(f), Some(s)) = (self.fixed.take(), self.shared.as_mut()) {
                for i in 0..f.used.min(FIXED_SLOTS) {
                    // SAFETY: clearing a slot (null pointer) points it at nothing.
                    unsafe { s.set_buffer(i, std::ptr::null_mut(), 0) };
                }
            }
        }
    }
}

impl Device for UringDevice {
    fn size_bytes(&self) -> u64 {
        self.size
    }

    fn submit_read(&mut self, tag: Tag, offset: u64, len: usize) {
        self.stats.reads += 1;
        self.stats.bytes_read += len as u64;
        let (mut buf, fresh) = self.pool.get_counted(crate::iobuf::read_class(len));
        self.stats.read_buf_misses += u64::from(fresh);
        if buf.fixed.is_none() {
            self.fix(&mut buf);
        }
        let ptr = buf.as_mut_ptr();
        let fixed = match (buf.fixed, &self.fixed) {
            (Some((table, index)), Some(f)) if table == f.table => Some(index),
            _ => None,
        };
        let i = self.slot(Slot::Read { tag, buf, len });
        let e = match fixed {
            Some(index) => {
                self.stats.reads_fixed += 1;
                opcode::ReadFixed::new(self.fd(), ptr, len as u32, index)
                    .offset(offset)
                    .build()
            }
            None => opcode::Read::new(self.fd(), ptr, len as u32)
                .offset(offset)
                .build(),
        };
        self.push(e, i);
    }

    fn submit_write(&mut self, tag: Tag, offset: u64, bufs: Vec<Bytes>) {
        self.write(tag, offset, bufs, self.opts.dsync_writes);
    }

    fn submit_write_unsynced(&mut self, tag: Tag, offset: u64, bufs: Vec<Bytes>) {
        let dsync = self.opts.dsync_writes && !self.opts.unsynced_writes;
        self.write(tag, offset, bufs, dsync);
    }

    fn submit_flush(&mut self, tag: Tag) {
        self.stats.flushes += 1;
        let i = self.slot(Slot::Flush { tag });
        let e = opcode::Fsync::new(self.fd())
            .flags(types::FsyncFlags::DATASYNC)
            .build();
        self.push(e, i);
    }

    fn poll(&mut self, out: &mut Vec<Completion>) {
        if self.unsubmitted > 0 && self.ring.submit().is_ok() {
            self.unsubmitted = 0;
        }
        self.reap();
        out.append(&mut self.ready);
    }

    fn wait(&mut self, out: &mut Vec<Completion>) {
        self.poll(out);
        if out.is_empty() && self.inflight > 0 {
            match self.shared.as_mut() {
                Some(s) => s.wait(),
                None => {
                    let _ = self.ring.submit_and_wait(1);
                    self.unsubmitted = 0;
                }
            }
            self.reap();
            out.append(&mut self.ready);
        }
    }

    fn in_flight(&self) -> usize {
        self.inflight + self.ready.len()
    }

    fn stats(&self) -> DeviceStats {
        self.stats
    }

    fn writes_are_durable(&self) -> bool {
        self.opts.dsync_writes
    }

    fn durable_writes_flush(&self) -> bool {
        self.opts.dsync_writes && self.opts.ordered_commits && self.no_fua
    }

    fn logical_block_size(&self) -> u64 {
        self.logical_block
    }
}
