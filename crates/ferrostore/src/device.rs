// SPDX-License-Identifier: LGPL-3.0-or-later
//! The one IO seam of the engine. The engine core only calls these methods; the simulator and the io_uring
//! backend implement them.

use bytes::Bytes;

/// Caller-chosen identifier returned with the completion.
pub type Tag = u64;

/// Outcome of one request: reads carry the bytes read, writes and flushes carry nothing.
#[derive(Debug)]
pub struct Completion {
    pub tag: Tag,
    pub result: std::result::Result<Option<Bytes>, String>,
}

/// Counters kept at the IO chokepoint (bench: device bytes written per user byte).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DeviceStats {
    pub reads: u64,
    pub writes: u64,
    /// Writes durable on completion (RWF_DSYNC): on a device without FUA each is a write plus a cache flush.
    pub synced_writes: u64,
    pub flushes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Writes whose buffers were not aligned for O_DIRECT and were copied into a bounce buffer first (io_uring
    /// backend; a caller that hands in 512-byte-aligned `Bytes`, e.g. page-aligned receive buffers, gets none).
    pub write_copies: u64,
    pub bytes_copied: u64,
    /// Reads into registered buffers (io_uring `READ_FIXED`: no page pinning per read).
    pub reads_fixed: u64,
    /// Reads whose buffer the idle pool could not supply (io_uring backend): new memory, which a large read maps
    /// afresh and the kernel faults in and clears during the submission (on a VM, milliseconds per 4 MiB).
    pub read_buf_misses: u64,
}

/// A block device driven by submissions and completions. Offsets and lengths of reads and writes are multiples of
/// 512 bytes. A flush makes durable every write that had completed when the flush was submitted; writes that have
/// not been flushed may be lost or torn at 512-byte boundaries by a crash.
pub trait Device {
    fn size_bytes(&self) -> u64;
    fn submit_read(&mut self, tag: Tag, offset: u64, len: usize);
    /// Gather write: `bufs` are written back to back starting at `offset`.
    fn submit_write(&mut self, tag: Tag, offset: u64, bufs: Vec<Bytes>);
    /// A write that may stay in the device's volatile cache after it completes, even when ordinary writes are
    /// durable on completion ([`Device::writes_are_durable`]): only a flush submitted after its completion makes
    /// it durable. For a batch of writes that one flush can cover — a checkpoint's tree nodes, which become live
    /// only with the superblock written after that flush — so they do not each carry a device flush (RWF_DSYNC
    /// without FUA is a write plus a flush). Default: an ordinary write (never less durable).
    fn submit_write_unsynced(&mut self, tag: Tag, offset: u64, bufs: Vec<Bytes>) {
        self.submit_write(tag, offset, bufs);
    }
    /// Make durable every write that had completed when the flush was submitted. Always a real flush, also when
    /// writes are durable on completion (it is what makes [`Device::submit_write_unsynced`] writes durable).
    fn submit_flush(&mut self, tag: Tag);
    /// Collect completions without blocking.
    fn poll(&mut self, out: &mut Vec<Completion>);
    /// Block until at least one completion is available (returns at once if nothing is in flight).
    fn wait(&mut self, out: &mut Vec<Completion>);
    fn in_flight(&self) -> usize;
    fn stats(&self) -> DeviceStats;
    /// Smallest IO unit (offset and length granularity); log records are padded to at least this.
    fn logical_block_size(&self) -> u64 {
        512
    }
    /// Writes submitted with [`Device::submit_write`] are durable on completion (FUA / RWF_DSYNC): the engine
    /// then needs a flush only after [`Device::submit_write_unsynced`] writes.
    fn writes_are_durable(&self) -> bool {
        false
    }
    /// A durable write ([`Device::submit_write`] while [`Device::writes_are_durable`]) also makes durable every
    /// write that had completed when it was submitted: RWF_DSYNC on a device without FUA is the write plus a
    /// cache flush after it. The engine then writes a group commit's data unsynced and its log record once they
    /// completed (ordered commits: one device flush per group commit instead of one per write). Never true where
    /// a durable write is a FUA write (which makes only itself durable).
    fn durable_writes_flush(&self) -> bool {
        false
    }
}
