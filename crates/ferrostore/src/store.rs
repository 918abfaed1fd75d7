// SPDX-License-Identifier: LGPL-3.0-or-later
//! The per-shard engine: transactions, reads, group commit, checkpoints, mount-time recovery.
//!
//! Sans-IO: every byte reaches the media through the `Device` trait; the engine never makes a syscall. Write path:
//! a transaction is applied to an overlay (so it is all-or-nothing), then to the in-memory tree; its data goes to
//! freshly allocated blocks at once and its metadata deltas join the next log record (group commit). It is
//! acknowledged once its data and log writes completed and a flush submitted after that completed.

use crate::alloc::Allocator;
use crate::btree::{MAX_ENTRY, MAX_KEY, Node, NodeIo, Tree};
use crate::device::{Completion, Device, DeviceStats, Tag};
use crate::error::{Result, StoreError};
use crate::extcache::{CHUNK_BLOCKS, Chunk, ExtentCache, MAX_CHUNK_EXTENTS, chunk_span};
use crate::format::{
    BLOCK, BLOCK_SIZE, DeviceHeader, FORMAT_VERSION, JOURNAL_FORMAT_VERSION, MAX_EXTENT_BLOCKS,
    MIN_FORMAT_VERSION, ShardSuper, crc,
};
use crate::hash::{FastMap, SeededMap};
use crate::keys::{self, CollectionId, Extent, ObjectKey, Onode, Value};
use crate::txn::{Op, Transaction};
use crate::wal::{self, Delta, JournalRun, LogRecord};
use bytes::{Bytes, BytesMut};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;

const B: u64 = BLOCK_SIZE;

/// Tunables of a mounted shard. Every cache and queue is bounded by one of these.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// Memory budget of this shard's metadata caches in bytes (`ferrostore_cache_bytes`): three quarters bound
    /// the clean tree-node cache (measured as the heap bytes of the decoded nodes), one quarter the dirty nodes
    /// (a checkpoint is started when they would exceed it). Eviction drops clean nodes only (they are on disk),
    /// so it never affects correctness. Default 64 MiB: two shards on a 2-core box stay well under 256 MiB.
    pub cache_bytes: usize,
    /// Additional cap on the number of clean tree nodes kept in memory.
    pub node_cache_nodes: usize,
    /// Dirty tree nodes allowed before a checkpoint is forced (the byte budget may force one earlier).
    pub max_dirty_nodes: usize,
    /// Log records are padded to this (the device's logical block size).
    pub log_align: u64,
    /// Checkpoint when this percentage of the log is in use.
    pub checkpoint_log_percent: u64,
    /// Checkpoint when blocks waiting to be freed exceed this percentage of the data space.
    pub checkpoint_free_percent: u64,
    /// Run checkpoints triggered by `poll`/`wait` in the background (default). `false` restores the blocking
    /// checkpoint (kept for comparison: `ferrostore-bench --p99`).
    pub background_checkpoints: bool,
    /// Fault injection for the simulator (issue 8's seeded bugs; never set it otherwise): mount replays the
    /// WAL records of the replay window newest first instead of in lsn order, so an older record's deltas
    /// overwrite a newer one's. Default off.
    pub fault_replay_order: bool,
    /// Fault injection for the crash tests (never set it otherwise): with ordered commits
    /// ([`Device::durable_writes_flush`]) a group commit's log record is written without waiting for its data
    /// writes, whose completion is then covered by no flush. Default off.
    pub fault_unordered_log: bool,
    /// Ordered commits: write a record whenever transactions' data completed, even while another record is in
    /// flight (for A/B runs; `FERROSTORE_ORDERED_RECORDS=unbounded` in ferro-osd). Default off: one at a time.
    pub ordered_records_unbounded: bool,
    /// Ordered commits: a transaction queued while no other is unacknowledged writes its data with durable
    /// writes and its record at once, as without ordered commits (default on; `FERROSTORE_ORDERED_LONE=0` in
    /// ferro-osd and ferrostore-bench turns it off for A/B runs). Alone it would get a record of its own, and
    /// ordered that record waits for the data write: two device round trips one after the other (plus a wake
    /// of the core between them) instead of two in parallel — what made ordered QD1 writes slower in
    /// ferro-osd (docs/benchmarks.md, "ordered commits in the OSD"). Group commits, where ordering saves
    /// flushes, need company anyway.
    pub ordered_lone_synced: bool,
    /// Ordered commits: a transaction with fewer bytes of data writes than this is written as without ordered
    /// commits (durable data writes, its record at once). 0 (default): every transaction with company is
    /// ordered. `FERROSTORE_ORDERED_MIN_BYTES` in ferro-osd (A/B runs).
    pub ordered_min_data_bytes: u64,
    /// Decoded onodes (and, separately, collections) kept in memory, write-through (`MetaCache`); ~200 bytes each.
    pub meta_cache_entries: usize,
    /// Extents of recently read objects kept decoded, write-through (src/extcache.rs); ~130 bytes each. 0: off
    /// (every read walks the tree).
    pub extent_cache_entries: usize,
    /// Snapshot nodes a background checkpoint places (block allocation, compaction, cache insert) per `poll` /
    /// `wait`: the dirty nodes are frozen when it starts and placed over the next polls while transactions go
    /// on. 0: place them all in the poll that starts it (the behaviour before session 8; `FERROSTORE_CKPT_WALK_SLICE`
    /// in ferro-osd, for A/B runs).
    pub checkpoint_walk_slice: usize,
    /// Journaled writes (format version 3 shards): a transaction whose data writes total at most this many bytes
    /// carries its data in its log record as well, and is acknowledged once that record is durable; its ordinary
    /// data writes go out at the same time without RWF_DSYNC (a checkpoint's flush makes them durable before the
    /// log space is reused, and replay writes the record's copy again). On a device whose durable writes cost a
    /// cache flush each (no FUA), a small write is then one durable device write instead of two. 0: off (the
    /// library's default). `FERROSTORE_LOG_DATA_MAX` / `ferrostore_log_data_max_bytes` in ferro-osd.
    pub log_data_max_bytes: u64,
    /// Journaled runs' own (unsynced) data writes are submitted once this many bytes of them wait, and all of
    /// them before a checkpoint's barrier. Default [`DEFAULT_JOURNAL_BATCH_BYTES`]; `FERROSTORE_JOURNAL_BATCH` in
    /// ferro-osd (A/B runs).
    pub journal_batch_bytes: u64,
    /// Fault injection for the crash tests (never set it otherwise): replay applies journaled records' metadata
    /// but does not write their data blocks again. Default off.
    pub fault_skip_journal_redo: bool,
    /// Defragment on read: a read whose blocks took at least this many device reads more than one contiguous
    /// range would have (overwrites go to fresh blocks, so an object overwritten in small pieces ends up
    /// scattered), once it is the range's [`StoreConfig::defrag_after_reads`]th such read, has the blocks it just
    /// read and verified written again as one fresh run, in a transaction of
    /// its own that goes ahead only if the object still maps exactly those blocks (no PG log entry: the content
    /// does not change). Later reads of the range then take one device read. Reads of at most
    /// [`MAX_DEFRAG_BLOCKS`] blocks, blocks not shared with a clone, and only while a tenth of the data space is
    /// free. 0: off. Default [`DEFAULT_DEFRAG_EXTRA_READS`]; `FERROSTORE_DEFRAG_EXTRA_READS` /
    /// `ferrostore_defrag_extra_reads` in ferro-osd.
    pub defrag_extra_reads: u32,
    /// Defragment on read is for ranges read more than once: a scattered range (see
    /// [`StoreConfig::defrag_extra_reads`]) is rewritten on this scattered read of it, counted per object and
    /// first block over the last [`DEFRAG_SEEN_MAX`] scattered reads. 1: on the first (cold data read once pays
    /// a write for nothing); 0 counts as 1. Default [`DEFAULT_DEFRAG_AFTER_READS`];
    /// `FERROSTORE_DEFRAG_AFTER_READS` / `ferrostore_defrag_after_reads` in ferro-osd.
    pub defrag_after_reads: u32,
    /// Scattered ranges of at most this many blocks are rewritten on their first scattered read, whatever
    /// [`StoreConfig::defrag_after_reads`] says (which then governs larger ranges only). A small range pays a
    /// device request per piece on every read (a 64 KiB range overwritten 4K at a time takes 8–12) and one
    /// 64 KiB write to heal, so waiting for a second read costs more than the write it might save; one-time scans
    /// (backups, exports) read large ranges, which still wait. 0: every range waits. Default
    /// [`DEFAULT_DEFRAG_EAGER_BLOCKS`]; `FERROSTORE_DEFRAG_EAGER_BYTES` / `ferrostore_defrag_eager_bytes` in
    /// ferro-osd.
    pub defrag_eager_blocks: u64,
    /// The extra device reads that make a range of at most [`StoreConfig::defrag_eager_blocks`] blocks worth
    /// rewriting, in place of [`StoreConfig::defrag_extra_reads`] (which then governs larger ranges only). A
    /// small range split in two costs a second device request on every read (on the test VM ~14 µs of CPU for
    /// the request's notify, and its latency), against one small write, once; a 4 MiB range split in two adds
    /// one request to a transfer of 4 MiB and is not worth a 4 MiB write. At least 1 (a contiguous range is
    /// never rewritten); no effect while `defrag_extra_reads` is 0 (defragment off). Default
    /// [`DEFAULT_DEFRAG_SMALL_EXTRA_READS`]; `ferrostore_defrag_small_extra_reads` in ferro-osd.
    pub defrag_small_extra_reads: u32,
}

/// Default [`StoreConfig::defrag_small_extra_reads`]: a 64 KiB range read in two pieces or more is rewritten
/// (session 32, measured with the one threshold at 1: 25 % fewer assembled reads over the A/B runs for 3 % more
/// rewrites, and 64K random reads at QD16 after 4K overwrites at 20 % less OSD CPU per op; docs/benchmarks.md).
pub const DEFAULT_DEFRAG_SMALL_EXTRA_READS: u32 = 1;

/// Default [`StoreConfig::defrag_extra_reads`]: a 64 KiB read that took four device reads (or a 4 MiB read
/// that took four or more) is rewritten; one that took two or three is left alone, as a rewrite costs about as
/// much device time as those reads and pays only if the range is read again.
pub const DEFAULT_DEFRAG_EXTRA_READS: u32 = 3;
/// The environment variable ferro-osd reads into [`StoreConfig::defrag_extra_reads`].
pub const DEFRAG_EXTRA_READS_ENV: &str = "FERROSTORE_DEFRAG_EXTRA_READS";
/// Default [`StoreConfig::defrag_after_reads`]: a range is rewritten when it is read scattered a second time.
pub const DEFAULT_DEFRAG_AFTER_READS: u32 = 2;
/// The environment variable ferro-osd reads into [`StoreConfig::defrag_after_reads`].
pub const DEFRAG_AFTER_READS_ENV: &str = "FERROSTORE_DEFRAG_AFTER_READS";
/// Default [`StoreConfig::defrag_eager_blocks`]: 64 KiB ranges (RBD's and the benchmark's small random reads)
/// are rewritten on their first scattered read (docs/benchmarks.md, session 29).
pub const DEFAULT_DEFRAG_EAGER_BLOCKS: u64 = 16;
/// The environment variable ferro-osd reads into [`StoreConfig::defrag_eager_blocks`], in bytes.
pub const DEFRAG_EAGER_BYTES_ENV: &str = "FERROSTORE_DEFRAG_EAGER_BYTES";
/// Scattered reads remembered for [`StoreConfig::defrag_after_reads`] (oldest forgotten first): 16,384 is a
/// GiB of 64 KiB ranges, in about 1 MiB.
pub const DEFRAG_SEEN_MAX: usize = 16384;
/// Largest read (in 4 KiB blocks) that defragments (4 MiB, an RBD object): its transaction stays well inside a
/// log record.
pub const MAX_DEFRAG_BLOCKS: u64 = 1024;
/// Read data held for rewrites not yet done; a read finding the queue full leaves its range as it is.
const MAX_DEFRAG_QUEUED_BYTES: usize = 16 << 20;

/// The environment variable ferro-osd reads into [`StoreConfig::log_data_max_bytes`] (A/B runs; its ceph.conf
/// option wins when both are set).
pub const LOG_DATA_MAX_ENV: &str = "FERROSTORE_LOG_DATA_MAX";

/// The environment variable ferro-osd reads into [`StoreConfig::journal_batch_bytes`] (A/B runs).
pub const JOURNAL_BATCH_ENV: &str = "FERROSTORE_JOURNAL_BATCH";

/// A number from the environment variable `name` (`None` when unset or not a number): the A/B switches above.
pub fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// The environment variable ferro-osd reads into [`StoreConfig::checkpoint_walk_slice`] (A/B runs).
pub const CKPT_WALK_SLICE_ENV: &str = "FERROSTORE_CKPT_WALK_SLICE";

/// The environment variable ferro-osd and ferrostore-bench read into [`StoreConfig::ordered_records_unbounded`]
/// (`unbounded` sets it; A/B runs).
pub const ORDERED_RECORDS_ENV: &str = "FERROSTORE_ORDERED_RECORDS";

/// Whether [`ORDERED_RECORDS_ENV`] asks for unbounded records in flight.
pub fn ordered_records_unbounded_from_env() -> bool {
    std::env::var(ORDERED_RECORDS_ENV).as_deref() == Ok("unbounded")
}

/// The environment variable ferro-osd and ferrostore-bench read into [`StoreConfig::ordered_lone_synced`] (`0`
/// turns it off, `1` on; A/B runs).
pub const ORDERED_LONE_ENV: &str = "FERROSTORE_ORDERED_LONE";

/// The environment variable ferro-osd reads into [`StoreConfig::ordered_min_data_bytes`] (A/B runs).
pub const ORDERED_MIN_BYTES_ENV: &str = "FERROSTORE_ORDERED_MIN_BYTES";

/// [`StoreConfig::ordered_min_data_bytes`] as [`ORDERED_MIN_BYTES_ENV`] sets it (`default` when unset or not a
/// number).
pub fn ordered_min_data_bytes_from_env(default: u64) -> u64 {
    env_u64(ORDERED_MIN_BYTES_ENV).unwrap_or(default)
}

/// [`StoreConfig::ordered_lone_synced`] as [`ORDERED_LONE_ENV`] sets it (`default` when unset or not 0/1).
pub fn ordered_lone_synced_from_env(default: bool) -> bool {
    match std::env::var(ORDERED_LONE_ENV).as_deref() {
        Ok("0") => false,
        Ok("1") => true,
        _ => default,
    }
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            cache_bytes: DEFAULT_CACHE_BYTES,
            node_cache_nodes: 1 << 20,
            max_dirty_nodes: 4096,
            log_align: 512,
            checkpoint_log_percent: 50,
            checkpoint_free_percent: 20,
            background_checkpoints: true,
            fault_replay_order: false,
            fault_unordered_log: false,
            ordered_records_unbounded: false,
            ordered_lone_synced: true,
            ordered_min_data_bytes: 0,
            meta_cache_entries: 2048,
            extent_cache_entries: 16384,
            checkpoint_walk_slice: DEFAULT_CKPT_WALK_SLICE,
            log_data_max_bytes: 0,
            journal_batch_bytes: DEFAULT_JOURNAL_BATCH_BYTES,
            fault_skip_journal_redo: false,
            defrag_extra_reads: DEFAULT_DEFRAG_EXTRA_READS,
            defrag_after_reads: DEFAULT_DEFRAG_AFTER_READS,
            defrag_eager_blocks: DEFAULT_DEFRAG_EAGER_BLOCKS,
            defrag_small_extra_reads: DEFAULT_DEFRAG_SMALL_EXTRA_READS,
        }
    }
}

/// Default `StoreConfig::checkpoint_walk_slice`: ~1.2 µs per node measured (2,050 nodes in 2.5 ms), so a slice
/// is ~150 µs of a loop turn and a checkpoint of the default dirty budget is placed in ~16 polls.
pub const DEFAULT_CKPT_WALK_SLICE: usize = 128;

/// Default `StoreConfig::cache_bytes`.
pub const DEFAULT_CACHE_BYTES: usize = 64 << 20;

/// Heap bytes assumed per dirty node when checking the dirty quarter of the budget (measured: 6–9 KiB for
/// 4 KiB nodes of extent and onode entries).
const DIRTY_NODE_BYTES: usize = 8 << 10;

#[derive(Debug, Clone)]
pub struct MkfsOptions {
    pub shards: u32,
    /// Log size per shard in bytes (0: 1/16 of the shard, between 64 KiB and 256 MiB).
    pub log_bytes: u64,
    /// Identifies this file system; also seeds the log epoch so records of an older mkfs never replay.
    pub uuid: u64,
    /// On-disk format version to write ([`MIN_FORMAT_VERSION`]..=[`FORMAT_VERSION`]; default the newest). A
    /// version 2 store never journals data, so older builds can mount it.
    pub version: u32,
}

impl Default for MkfsOptions {
    fn default() -> Self {
        MkfsOptions {
            shards: 1,
            log_bytes: 0,
            uuid: 0x0123_4567_89ab_cdef,
            version: FORMAT_VERSION,
        }
    }
}

#[derive(Debug)]
pub enum Event {
    /// The transaction with this sequence number is durable.
    Durable(u64),
    ReadDone(u64, Result<Bytes>),
    /// The device reads of prefetch `token` (see [`Store::prefetch`]) completed: a `read` of its ranges is now
    /// served from memory. Sent once per token, also when the prefetch was invalidated or evicted meanwhile (the
    /// read then goes to the device as usual).
    Prefetched(u64),
}

#[derive(Debug, Default, Clone, Copy)]
pub struct StoreStats {
    pub txns: u64,
    pub log_records: u64,
    pub log_bytes: u64,
    pub data_bytes: u64,
    pub node_bytes: u64,
    pub checkpoints: u64,
    /// Checkpoints that completed in the background (included in `checkpoints`).
    pub background_checkpoints: u64,
    /// Times the shard stopped for a checkpoint: a background one was running when the log
    /// (`ckpt_waits_log`) or the dirty nodes (`ckpt_waits_dirty`) reached their hard limit, so it was finished
    /// at once; or a log record found no room and a blocking checkpoint ran (`ckpt_log_full`). Each is a stall
    /// of every op on the shard.
    pub ckpt_waits_log: u64,
    pub ckpt_waits_dirty: u64,
    pub ckpt_log_full: u64,
    pub csum_errors: u64,
    pub replayed_records: u64,
    /// Reads served as a slice of one device read (no copy) / assembled from several pieces.
    pub reads_zero_copy: u64,
    pub reads_assembled: u64,
    /// Assembled reads whose buffer the pool had none idle for: new memory, faulted in and cleared by the kernel
    /// as the copy first touches it (a stall of the core; see `DeviceStats::read_buf_misses` for the device's).
    pub assembled_buf_misses: u64,
    /// Reads served from a completed prefetch (no device IO), prefetches started, and prefetches whose data was
    /// dropped before use (invalidated by a change of the object, or evicted by the memory bound).
    pub reads_prefetched: u64,
    pub prefetches: u64,
    pub prefetches_dropped: u64,
    /// Whole blocks written with the crc the messenger computed while checking them (`ceph_crc::blocks`), not
    /// a second pass over their bytes.
    pub crc_blocks_reused: u64,
    /// Reads whose extents came from the extent cache / from a tree walk (a chunk filled counts as a walk).
    pub extent_cache_hits: u64,
    pub extent_cache_misses: u64,
    /// Ordered commits: transactions written alone with durable data writes ([`StoreConfig::ordered_lone_synced`]).
    pub ordered_lone_txns: u64,
    /// Journaled writes ([`StoreConfig::log_data_max_bytes`]): transactions whose data went into their log
    /// record, its bytes, and blocks replay wrote again from records at mount.
    pub journaled_txns: u64,
    pub journaled_bytes: u64,
    /// Journaled runs whose deferred data write was dropped: freed (overwritten, truncated, removed) before their
    /// batch went out, so the record's copy was the only one ever needed.
    pub journaled_writes_skipped: u64,
    pub replayed_journal_blocks: u64,
    /// Defragment on read ([`StoreConfig::defrag_extra_reads`]): scattered ranges rewritten as one run, their
    /// blocks, and ranges left as they were (changed since the read, shared with a clone, too little free space,
    /// or the allocator could not give fewer pieces) or not queued (queue full). `defrag_deferred`: scattered
    /// reads left alone because the range had not been read scattered often enough yet
    /// ([`StoreConfig::defrag_after_reads`]).
    pub defrag_txns: u64,
    pub defrag_blocks: u64,
    pub defrag_skipped: u64,
    pub defrag_dropped: u64,
    pub defrag_deferred: u64,
}

/// Bytes one prefetch may cover (a larger one is refused: the op reads synchronously).
pub const MAX_PREFETCH_BYTES: u64 = 16 << 20;
/// Completed prefetched data held at most (oldest dropped first) and prefetches tracked at most: a caller that
/// never releases its tokens cannot grow the store's memory.
const MAX_PREFETCH_HELD_BYTES: usize = 64 << 20;
const MAX_PREFETCHES: usize = 1024;

/// One range of a prefetch: where it starts, the internal read filling it, and its data once read (clipped to the
/// object size, so it ends at `off + data.len()`; `None` while in flight, after an error or once stale).
struct PfRange {
    off: u64,
    read: u64,
    data: Option<Bytes>,
}

/// A prefetch: device reads started ahead of an op that will `read` the same ranges of one object.
struct Prefetch {
    cid: CollectionId,
    /// The onode id and size when the reads started. Any change of the object's extents or onode marks the
    /// prefetch stale (its data is never served); ids are never reused, so rename/split keep it valid.
    onode: u64,
    size: u64,
    ranges: Vec<PfRange>,
    outstanding: usize,
    stale: bool,
}

impl Prefetch {
    fn bytes(&self) -> usize {
        self.ranges
            .iter()
            .map(|r| r.data.as_ref().map_or(0, |d| d.len()))
            .sum()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub size: u64,
    pub hash: u32,
}

#[derive(Debug, Default)]
pub struct FsckReport {
    pub errors: Vec<String>,
    pub objects: u64,
    pub nodes: u64,
    pub data_blocks: u64,
    pub shared_blocks: u64,
    /// Attr / omap values stored in data blocks.
    pub spilled_values: u64,
}

enum Purpose {
    Data {
        seq: u64,
        start: u64,
    },
    /// The ordinary (unsynced) write of a journaled run: its transaction does not wait for it.
    JournaledData {
        start: u64,
    },
    Log {
        first: u64,
        last: u64,
    },
    Flush {
        seq: u64,
        lsn: u64,
    },
    Read {
        id: u64,
    },
    /// A checkpoint's write of the nodes of `blocks` consecutive blocks from `block`.
    Ckpt {
        block: u64,
        blocks: u64,
    },
    /// Steps of a background checkpoint (flush before the superblock, the superblock, flush after it).
    CkptFlush,
    CkptSuper,
    CkptSuperFlush,
}

/// A checkpoint running in the background: the tree was snapshotted (dirty nodes serialised to fresh blocks and
/// submitted); the new superblock is written once every IO submitted up to `barrier` has completed and been
/// flushed. Meanwhile transactions go on (their records follow the snapshot in the log and replay onto the new
/// tree). Frees taken at the snapshot are released when the new superblock is durable; later frees wait for the
/// next checkpoint, because the snapshot tree still references those blocks.
struct BgCkpt {
    /// The new superblock; its `root_block` is set once the frozen snapshot is placed (`placing` false).
    sb: ShardSuper,
    /// The tree's frozen snapshot is still being given blocks a slice per poll (`Tree::snapshot_step`).
    placing: bool,
    barrier: Tag,
    step: CkptStep,
    /// Node blocks of the snapshot not yet submitted (the nodes wait in `Io::nodes_queued`, not yet serialised),
    /// and node blocks being written: serialised and submitted a slice per poll ([`CKPT_SLICE`], at most
    /// [`CKPT_MAX_IN_FLIGHT`] blocks at a time), so a checkpoint of thousands of nodes neither stalls one loop
    /// turn serialising and submitting them all nor queues them all on the device ahead of the client IO that
    /// follows. Consecutive blocks go out as one write (up to [`CKPT_WRITE_BLOCKS`]).
    queued: VecDeque<u64>,
    writing: usize,
    /// Blocks taken from the allocator for the snapshot's nodes and not yet given to one ([`NodeBlocks`]).
    reserve: NodeBlocks,
    frees: Vec<(u64, u64)>,
    free_blocks: u64,
    superseded: Vec<u64>,
    /// Log bytes in use at the snapshot (released with it).
    log_used: u64,
}

/// A bounded pool of aligned buffers in size classes (`iobuf::read_class`); a buffer goes back to the pool when
/// the last `Bytes` of it drops. For log records, and for reads assembled from several device reads.
struct PooledBufs {
    pool: crate::iobuf::BufPool,
    /// Buffers taken from new memory (the pool had none of the class idle).
    misses: u64,
}

/// Idle log record buffers kept at most (a shard has a few records in flight; a group commit's is ~1–16 KiB).
const LOG_BUF_POOL_BYTES: usize = 1 << 20;
/// Idle buffers of assembled reads kept at most: a 4 MiB read in more than one run is assembled, and without a
/// pool each took fresh memory from malloc, zeroed and faulted in (docs/benchmarks.md, session 30).
const ASM_BUF_POOL_BYTES: usize = 16 << 20;

impl PooledBufs {
    fn new(max_bytes: usize) -> Self {
        PooledBufs {
            pool: crate::iobuf::BufPool::new(max_bytes),
            misses: 0,
        }
    }
    /// A buffer of `len` bytes filled by `fill`, as `Bytes` that return its memory to the pool when dropped.
    /// `fill` must write all `len` bytes: a recycled buffer holds its last user's.
    fn take(&mut self, len: usize, fill: impl FnOnce(&mut [u8])) -> Bytes {
        let class = crate::iobuf::read_class(len);
        let (mut buf, fresh) = self.pool.get_counted(class);
        self.misses += u64::from(fresh);
        fill(&mut buf.as_mut()[..len]);
        Bytes::from_owner(crate::iobuf::PooledBuf {
            buf: Some(buf),
            pool: self.pool.clone(),
        })
        .slice(..len)
    }
}

/// Default [`StoreConfig::journal_batch_bytes`]. Batched, the deferred writes' completions wake the caller once
/// per batch instead of once per write; a smaller batch holds up the log records queued behind it for less time
/// (64 KiB against 256 KiB in ferro-osd, session 14, six pairs: 4K write QD16 p99 lower in five, IOPS higher in
/// four, QD1 even; docs/benchmarks.md).
pub const DEFAULT_JOURNAL_BATCH_BYTES: u64 = 64 << 10;

/// Freed runs a poll moves into the allocator's maps after a background checkpoint (~1 µs each): enough to keep
/// up with the frees of any workload at thousands of polls per second, few enough not to lengthen a turn.
const RELEASE_PER_POLL: usize = 64;
/// Checkpoint nodes serialised and submitted per `poll` / `wait` at most, and node blocks being written at most
/// (see [`BgCkpt::queued`]).
const CKPT_SLICE: usize = 32;
const CKPT_MAX_IN_FLIGHT: usize = 64;
/// Most blocks in one checkpoint write. A snapshot's nodes get consecutive blocks ([`NodeBlocks`]), so its ~2,000
/// nodes under random 4K writes go out as ~70 writes of 128 KiB instead of ~2,000 of 4 KiB: the device is busy
/// with a checkpoint for a fraction of the time, and fewer client writes queue behind one.
const CKPT_WRITE_BLOCKS: usize = 32;
/// Blocks a checkpoint asks the allocator for at a time for its nodes (one contiguous run where there is one).
const CKPT_RESERVE_BLOCKS: u64 = 256;

/// Blocks reserved for a checkpoint's nodes: a contiguous run taken from the allocator [`CKPT_RESERVE_BLOCKS`] at
/// a time and handed out one block per node in placement order, so consecutive nodes are consecutive blocks.
/// What is left when the snapshot is placed goes straight back to the allocator (those blocks were never written).
#[derive(Default)]
struct NodeBlocks {
    next: u64,
    end: u64,
}

impl NodeBlocks {
    fn take(&mut self, alloc: &mut Allocator) -> Result<u64> {
        if self.next == self.end {
            let (s, l) = alloc.alloc_run(CKPT_RESERVE_BLOCKS)?;
            self.next = s;
            self.end = s + l;
        }
        self.next += 1;
        Ok(self.next - 1)
    }

    fn give_back(&mut self, alloc: &mut Allocator) {
        if self.end > self.next {
            alloc.free(self.next, self.end - self.next);
        }
        self.next = self.end;
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum CkptStep {
    /// Waiting for node writes and every earlier IO.
    Barrier,
    Flush,
    Super,
    SuperFlush,
    Done,
}

/// A transaction waiting for its log record.
struct PendingTxn {
    seq: u64,
    deltas: Vec<Delta>,
    /// Encoded bytes of its deltas and journal entries (the record's metadata region).
    size: usize,
    /// Journaled runs and their data, in the same order ([`StoreConfig::log_data_max_bytes`]).
    journal: Vec<JournalRun>,
    data: Vec<Bytes>,
    data_len: usize,
}

struct TxnState {
    seq: u64,
    ios_left: u32,
    /// Its data writes are durable writes of their own: with ordered commits its record need not wait for them.
    data_synced: bool,
}

/// Data of a write not yet completed: kept so reads and read-modify-writes see it.
#[derive(Clone)]
struct Run {
    blocks: u64,
    segs: Vec<Bytes>,
    /// Crc of each block (object data); empty for a spilled attr / omap value (a crc of the whole value), which
    /// is never journaled.
    crcs: Vec<u32>,
}

impl Run {
    fn block(&self, i: u64) -> Option<Bytes> {
        let mut at = i * B;
        for s in &self.segs {
            if at < s.len() as u64 {
                return Some(s.slice(at as usize..at as usize + BLOCK));
            }
            at -= s.len() as u64;
        }
        None
    }
}

/// Decoded onodes and collection bits by their tree key. An OSD op looks its object up several times (object info,
/// snapset, size, data), a write transaction touches its object and the PG's meta object, and every write checks
/// its collection; without this each is a walk down the tree plus a decode. Exact, not a hint: `commit` applies
/// every committed transaction's onode and collection entries to it (write-through), and mount clears it after
/// replay, so an entry always equals the tree's. Bounded (`StoreConfig::meta_cache_entries` per kind): when a map
/// is full, an arbitrary eighth of it goes (cheap, and enough to keep a working set of hot objects).
struct MetaCache {
    onodes: SeededMap<Vec<u8>, Onode>,
    colls: SeededMap<Vec<u8>, u32>,
    key_bytes: usize,
    cap: usize,
}

impl MetaCache {
    fn new(cap: usize) -> Self {
        MetaCache {
            onodes: SeededMap::default(),
            colls: SeededMap::default(),
            key_bytes: 0,
            cap: cap.max(1),
        }
    }

    fn onode(&self, k: &[u8]) -> Option<Onode> {
        self.onodes.get(k).copied()
    }

    fn coll(&self, k: &[u8]) -> Option<u32> {
        self.colls.get(k).copied()
    }

    fn insert_onode(&mut self, k: Vec<u8>, o: Onode) {
        if self.onodes.len() >= self.cap && !self.onodes.contains_key(&k) {
            let victims: Vec<Vec<u8>> = self.onodes.keys().take(self.cap.div_ceil(8)).cloned().collect();
            for v in victims {
                self.key_bytes -= v.len();
                self.onodes.remove(&v);
            }
        }
        let len = k.len();
        if self.onodes.insert(k, o).is_none() {
            self.key_bytes += len;
        }
    }

    fn insert_coll(&mut self, k: Vec<u8>, bits: u32) {
        if self.colls.len() >= self.cap && !self.colls.contains_key(&k) {
            // thousands of collections on one shard: rare enough to start over
            self.key_bytes -= self.colls.keys().map(|k| k.len()).sum::<usize>();
            self.colls.clear();
        }
        let len = k.len();
        if self.colls.insert(k, bits).is_none() {
            self.key_bytes += len;
        }
    }

    /// A transaction commits: its collection and onode entries (put or deleted) become the cached truth.
    fn commit(&mut self, overlay: &BTreeMap<Vec<u8>, Option<Vec<u8>>>) {
        use std::ops::Bound;
        let range = (
            Bound::Included(&[keys::NS_COLL][..]),
            Bound::Excluded(&[keys::NS_ONODE + 1][..]),
        );
        for (k, v) in overlay.range::<[u8], _>(range) {
            let onode = k.first() == Some(&keys::NS_ONODE);
            let decoded = match (v, onode) {
                (Some(v), true) => Onode::decode(v).ok().map(|o| (Some(o), None)),
                (Some(v), false) => coll_bits(v).ok().map(|b| (None, Some(b))),
                (None, _) => None,
            };
            match decoded {
                Some((Some(o), _)) => self.insert_onode(k.clone(), o),
                Some((_, Some(b))) => self.insert_coll(k.clone(), b),
                _ => {
                    // deleted (or undecodable: never cache it)
                    let gone = if onode {
                        self.onodes.remove(k).is_some()
                    } else {
                        self.colls.remove(k).is_some()
                    };
                    if gone {
                        self.key_bytes -= k.len();
                    }
                }
            }
        }
    }

    fn clear(&mut self) {
        *self = MetaCache::new(self.cap);
    }

    fn memory_bytes(&self) -> usize {
        (self.onodes.capacity() + self.colls.capacity()) * 64 + self.key_bytes
    }
}

/// An attr/omap value taken out of a tree node without holding the node: an inline value's bytes (one copy), or a
/// spilled value's descriptor to read after the tree walk (`Store::finish_value`).
enum StoredValue {
    Inline(Bytes),
    Spilled(Vec<u8>),
}

fn stored_value(raw: &[u8]) -> Result<StoredValue> {
    Ok(match Value::decode(raw)? {
        Value::Inline(v) => StoredValue::Inline(Bytes::copy_from_slice(v)),
        Value::Spilled { .. } => StoredValue::Spilled(raw.to_vec()),
    })
}

/// An extent record of the tree: the logical block its key names (bytes 9..17 of the key) and the decoded extent.
fn extent_entry(k: &[u8], v: &[u8]) -> Result<(u64, Extent)> {
    let lb = k
        .get(9..17)
        .ok_or_else(|| StoreError::Corrupt("extent key".into()))
        .and_then(keys::be_u64)?;
    Ok((lb, Extent::decode(v)?))
}

/// Keys whose values use the value form (inline or spilled): attrs, omap header, omap entries.
fn is_value_key(k: &[u8]) -> bool {
    matches!(
        k.first(),
        Some(&(keys::NS_ATTR | keys::NS_OMAP_HDR | keys::NS_OMAP))
    )
}

fn coll_bits(v: &[u8]) -> Result<u32> {
    let a: [u8; 4] = v
        .try_into()
        .map_err(|_| StoreError::Corrupt("collection".into()))?;
    Ok(u32::from_le_bytes(a))
}

#[derive(Default)]
struct TxnCtx {
    overlay: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    runs: Vec<(u64, Run)>,
    allocated: Vec<(u64, u64)>,
    freed: Vec<(u64, u64)>,
    /// This transaction wrote a refcount entry (clone sharing).
    refs_touched: bool,
    /// This transaction moves data without changing any object's content (defragment on read): prefetched data
    /// stays valid.
    same_content: bool,
    /// Attr / omap / header keys whose value *in the tree* this transaction already released (read by a scan or
    /// `RmAttr`'s lookup). Every other such key in the overlay has its tree value (if any) released at commit,
    /// where the tree put or delete sees it anyway: a value write needs no lookup of the value it replaces.
    tree_released: std::collections::BTreeSet<Vec<u8>>,
}

enum Src {
    Hole,
    Mem(Bytes),
    Dev { run: usize, idx: usize, crc: u32 },
}

/// An assembled read that starts on a block boundary, carrying the crc of each whole block it holds: from the
/// device blocks just verified, a constant for holes, computed for blocks still in memory. Without it the reply's
/// segment crc is a second pass over the data (a 4 MiB read in two runs: 6 % of the core, session 31).
fn attach_assembled(out: Bytes, st: &ReadState) -> Bytes {
    let n = st.len / BLOCK;
    if st.off_in_first != 0 || out.len() < ceph_crc::blocks::ATTACH_MIN || st.blocks.len() < n {
        return out;
    }
    static ZERO_BLOCK_CRC: std::sync::LazyLock<u32> = std::sync::LazyLock::new(|| crc(&[0u8; BLOCK]));
    let crcs = st.blocks[..n]
        .iter()
        .map(|s| match s {
            Src::Dev { crc, .. } => *crc,
            Src::Hole => *ZERO_BLOCK_CRC,
            Src::Mem(b) => crc(b),
        })
        .collect();
    ceph_crc::blocks::attach_pages(out, crcs)
}

/// A device read whose every block was just verified, carrying those blocks' crcs (`ceph_crc::blocks`) when it
/// is page-aligned: a read reply's segment crc is then combined from them, not a second pass. Also a single
/// block (below `ATTACH_MIN`, which is about received segments): attaching one page (two allocations, two
/// registry updates) costs about half the instructions of the 4 KiB crc pass it saves the reply.
fn attach_verified(d: &Bytes, blocks: &[Src]) -> Bytes {
    if d.len() < BLOCK || d.len() != blocks.len() * BLOCK || !(d.as_ptr() as usize).is_multiple_of(BLOCK) {
        return d.clone();
    }
    let crcs: Option<Vec<u32>> = blocks
        .iter()
        .enumerate()
        .map(|(i, s)| match s {
            Src::Dev { run: 0, idx, crc } if *idx == i => Some(*crc),
            _ => None,
        })
        .collect();
    match crcs {
        Some(c) => ceph_crc::blocks::attach_pages(d.clone(), c),
        None => d.clone(),
    }
}

/// A read that found its blocks scattered ([`StoreConfig::defrag_extra_reads`]): what it read and verified, to be
/// written again as one run.
struct DefragCandidate {
    onode: u64,
    b0: u64,
    /// Each block's physical block and crc as the read found them: the rewrite goes ahead only if the object
    /// still maps exactly these.
    map: Vec<(u64, u32)>,
    /// The device reads' buffers, in block order (together exactly the blocks of `map`).
    segs: Vec<Bytes>,
    /// Device reads the range took.
    reads: usize,
}

struct ReadState {
    /// The onode read and the first logical block (for defragment on read).
    onode: u64,
    b0: u64,
    off_in_first: usize,
    len: usize,
    blocks: Vec<Src>,
    runs: Vec<(Tag, u64 /*pblock*/, Option<Bytes>)>,
    outstanding: usize,
    error: Option<StoreError>,
}

struct Io<D> {
    dev: D,
    next_tag: Tag,
    stash: Vec<Completion>,
    /// `pump`'s completion list, kept with its capacity between polls (no allocation per poll).
    spare: Vec<Completion>,
    /// Tree nodes whose checkpoint write is still in flight: a cache miss on one is served from here (the media
    /// may not hold it yet).
    nodes_in_flight: HashMap<u64, Bytes>,
    /// Nodes of a background checkpoint's snapshot not yet serialised (a miss on one encodes it).
    nodes_queued: HashMap<u64, Rc<Node>>,
}

impl<D: Device> Io<D> {
    fn tag(&mut self) -> Tag {
        self.next_tag += 1;
        self.next_tag
    }
    fn wait_for(&mut self, tag: Tag) -> Result<Option<Bytes>> {
        loop {
            let mut v = Vec::new();
            self.dev.wait(&mut v);
            if v.is_empty() && self.dev.in_flight() == 0 {
                return Err(StoreError::Io("completion lost".into()));
            }
            let mut found = None;
            for c in v {
                if c.tag == tag {
                    found = Some(c.result);
                } else {
                    self.stash.push(c);
                }
            }
            if let Some(r) = found {
                return r.map_err(StoreError::Io);
            }
        }
    }
    fn sync_read(&mut self, off: u64, len: usize) -> Result<Bytes> {
        let t = self.tag();
        self.dev.submit_read(t, off, len);
        let b = self
            .wait_for(t)?
            .ok_or_else(|| StoreError::Io("read returned no data".into()))?;
        if b.len() != len {
            return Err(StoreError::Io(format!("short read {} of {len}", b.len())));
        }
        Ok(b)
    }
    fn sync_write(&mut self, off: u64, data: Vec<u8>) -> Result<()> {
        let t = self.tag();
        self.dev.submit_write(t, off, vec![Bytes::from(data)]);
        self.wait_for(t).map(|_| ())
    }
    fn sync_write_unsynced(&mut self, off: u64, data: Bytes) -> Result<()> {
        let t = self.tag();
        self.dev.submit_write_unsynced(t, off, vec![data]);
        self.wait_for(t).map(|_| ())
    }
    /// Flush unless every write is durable on completion (no unsynced write since the last flush).
    fn sync_flush(&mut self) -> Result<()> {
        if self.dev.writes_are_durable() {
            return Ok(());
        }
        self.flush_now()
    }
    fn flush_now(&mut self) -> Result<()> {
        let t = self.tag();
        self.dev.submit_flush(t);
        self.wait_for(t).map(|_| ())
    }
}

impl<D: Device> NodeIo for Io<D> {
    fn read_node(&mut self, block: u64) -> Result<Bytes> {
        if let Some(b) = self.nodes_in_flight.get(&block) {
            return Ok(b.clone());
        }
        if let Some(n) = self.nodes_queued.get(&block) {
            return Ok(Bytes::from(n.encode(block)?));
        }
        self.sync_read(block * B, BLOCK)
    }
}

/// Format `dev` with `opts.shards` empty shards.
pub fn mkfs<D: Device>(dev: D, opts: &MkfsOptions) -> Result<D> {
    let size = dev.size_bytes() / B * B;
    if opts.shards == 0 || opts.shards > crate::format::MAX_SHARDS {
        return Err(StoreError::Invalid("shard count"));
    }
    let region_len = (size.saturating_sub(B)) / opts.shards as u64 / B * B;
    let log_len = if opts.log_bytes > 0 {
        opts.log_bytes.div_ceil(B) * B
    } else {
        (region_len / 16 / B * B).clamp(16 * B, 256 << 20)
    };
    if region_len < 2 * B + log_len + 16 * B {
        return Err(StoreError::Invalid("device too small"));
    }
    let mut io = Io {
        dev,
        next_tag: 0,
        stash: Vec::new(),
        spare: Vec::new(),
        nodes_in_flight: HashMap::new(),
        nodes_queued: HashMap::new(),
    };
    if !(MIN_FORMAT_VERSION..=FORMAT_VERSION).contains(&opts.version) {
        return Err(StoreError::Invalid("format version"));
    }
    let mut shards = Vec::new();
    for i in 0..opts.shards as u64 {
        let region_off = B + i * region_len;
        let log_off = region_off + 2 * B;
        let data_first_block = (log_off + log_len) / B;
        let data_blocks = (region_off + region_len) / B - data_first_block;
        let root = crate::btree::Tree::empty(8);
        let mut root = root;
        let mut next = data_first_block;
        let (writes, root_block) = root.flush_dirty(&mut || {
            let b = next;
            next += 1;
            Ok(b)
        })?;
        for (b, data) in writes {
            io.sync_write(b * B, data)?;
        }
        let sb = ShardSuper {
            version: opts.version,
            shard: i as u32,
            generation: 1,
            uuid: opts.uuid,
            region_off,
            region_len,
            log_off,
            log_len,
            data_first_block,
            data_blocks,
            root_block,
            next_lsn: 1,
            log_epoch: opts.uuid.rotate_left(17) ^ (i << 48),
            log_tail: 0,
        };
        io.sync_write(region_off + B, sb.encode())?;
        io.sync_write(region_off, vec![0u8; BLOCK])?;
        shards.push((region_off, region_len));
    }
    let hdr = DeviceHeader {
        version: opts.version,
        device_size: size,
        uuid: opts.uuid,
        shards,
    };
    io.sync_write(0, hdr.encode())?;
    io.sync_flush()?;
    Ok(io.dev)
}

pub struct Store<D: Device> {
    io: Io<D>,
    sb: ShardSuper,
    tree: Tree,
    alloc: Allocator,
    cfg: StoreConfig,
    next_seq: u64,
    inflight: VecDeque<TxnState>,
    pending_log: Vec<PendingTxn>,
    next_lsn: u64,
    log_head: u64,
    log_used: u64,
    /// (lsn, last txn seq) of records not yet covered by a flush.
    record_seqs: VecDeque<(u64, u64)>,
    durable_lsn: u64,
    flush_inflight: bool,
    /// Log records submitted and not yet completed (ordered commits write the next one only when this is 0).
    records_in_flight: usize,
    inflight_data: BTreeMap<u64, Run>,
    /// Journaled runs whose own (unsynced) data write is not submitted yet (in `inflight_data` meanwhile), and
    /// their bytes: written in batches of [`StoreConfig::journal_batch_bytes`], all before a checkpoint's
    /// barrier.
    deferred: Vec<u64>,
    deferred_bytes: u64,
    tags: FastMap<Tag, Purpose>,
    pending_free: Vec<(u64, u64)>,
    pending_free_blocks: u64,
    reads: FastMap<u64, ReadState>,
    bg: Option<BgCkpt>,
    /// Some refcount entry may exist (found at mount, or a clone shared blocks since).
    refs_possible: bool,
    next_read: u64,
    /// Prefetches by token (tokens share the read id space, so they grow in start order), the internal reads
    /// that fill them, completed tokens not yet taken (`take_prefetched`), and the data bytes they hold.
    prefetches: BTreeMap<u64, Prefetch>,
    prefetch_reads: FastMap<u64, u64>,
    prefetch_done: Vec<(u64, CollectionId)>,
    prefetch_bytes: usize,
    /// Scattered ranges just read, to be written again as one run each (`defrag_one`), and their data bytes.
    defrag: VecDeque<DefragCandidate>,
    /// `start_read`'s block map, kept with its capacity between reads.
    map_scratch: Vec<Option<(u64, u32)>>,
    /// `get_onode`'s key, kept with its capacity between lookups.
    key_scratch: Vec<u8>,
    defrag_bytes: usize,
    /// Scattered reads not rewritten yet ([`StoreConfig::defrag_after_reads`]): how often each (onode, first
    /// block) was read scattered, and the keys in the order first seen, to forget the oldest. Offsets are the
    /// client's choice, so the map is seeded.
    defrag_seen: SeededMap<(u64, u64), u32>,
    defrag_seen_order: VecDeque<(u64, u64)>,
    /// Decoded onodes and collection bits by tree key, kept exact at commit (see `MetaCache`).
    meta: MetaCache,
    /// Decoded extents of recently read chunks of objects, kept exact at commit (src/extcache.rs).
    extents: ExtentCache,
    events: Vec<Event>,
    /// Aligned buffers of log records, reused once the device has written them.
    log_bufs: PooledBufs,
    /// Buffers of reads assembled from several device reads, memory or holes (`verified_read`).
    asm_bufs: PooledBufs,
    failed: Option<StoreError>,
    pub stats: StoreStats,
}

impl<D: Device> Store<D> {
    /// Mount shard `shard` of a formatted device: pick the newest valid superblock, replay the log, rebuild the
    /// allocator, then checkpoint under a new log epoch.
    pub fn mount(dev: D, shard: u32, cfg: StoreConfig) -> Result<Self> {
        let mut io = Io {
            dev,
            next_tag: 0,
            stash: Vec::new(),
            spare: Vec::new(),
            nodes_in_flight: HashMap::new(),
            nodes_queued: HashMap::new(),
        };
        let hdr = DeviceHeader::decode(&io.sync_read(0, BLOCK)?)?;
        let &(region_off, _) = hdr
            .shards
            .get(shard as usize)
            .ok_or(StoreError::Invalid("no such shard on this device"))?;
        let a = io
            .sync_read(region_off, BLOCK)
            .and_then(|b| ShardSuper::decode(&b));
        let b = io
            .sync_read(region_off + B, BLOCK)
            .and_then(|b| ShardSuper::decode(&b));
        let sb = match (a, b) {
            (Ok(a), Ok(b)) => {
                if a.generation > b.generation {
                    a
                } else {
                    b
                }
            }
            (Ok(a), Err(_)) => a,
            (Err(_), Ok(b)) => b,
            (Err(e), Err(_)) => return Err(e),
        };
        if sb.shard != shard || sb.region_off != region_off || sb.uuid != hdr.uuid {
            return Err(StoreError::Corrupt(
                "superblock does not match device header".into(),
            ));
        }
        validate_geometry(&sb, io.dev.size_bytes())?;
        // Records are padded to the configured alignment, never below the device's logical block size.
        let lbs = io.dev.logical_block_size().clamp(512, 4096);
        let cfg_align = cfg.log_align.clamp(lbs, 4096).next_power_of_two();
        let mut tree = Tree::open(sb.root_block, cfg.node_cache_nodes);
        tree.set_cache_bytes(cfg.cache_bytes / 4 * 3);
        let max_dirty_nodes = cfg
            .max_dirty_nodes
            .min((cfg.cache_bytes / 4 / DIRTY_NODE_BYTES).max(16));
        let mut st = Store {
            tree,
            alloc: Allocator::from_used(sb.data_first_block, sb.data_blocks, vec![])?,
            io,
            cfg: StoreConfig {
                log_align: cfg_align,
                max_dirty_nodes,
                ..cfg
            },
            next_seq: 1,
            inflight: VecDeque::new(),
            pending_log: Vec::new(),
            next_lsn: sb.next_lsn,
            log_head: sb.log_tail,
            log_used: 0,
            record_seqs: VecDeque::new(),
            durable_lsn: sb.next_lsn - 1,
            flush_inflight: false,
            records_in_flight: 0,
            inflight_data: BTreeMap::new(),
            deferred: Vec::new(),
            deferred_bytes: 0,
            tags: FastMap::default(),
            pending_free: Vec::new(),
            pending_free_blocks: 0,
            reads: FastMap::default(),
            bg: None,
            refs_possible: true,
            next_read: 0,
            prefetches: BTreeMap::new(),
            prefetch_reads: FastMap::default(),
            prefetch_done: Vec::new(),
            prefetch_bytes: 0,
            defrag: VecDeque::new(),
            map_scratch: Vec::new(),
            key_scratch: Vec::new(),
            defrag_bytes: 0,
            defrag_seen: SeededMap::default(),
            defrag_seen_order: VecDeque::new(),
            meta: MetaCache::new(cfg.meta_cache_entries),
            extents: ExtentCache::new(cfg.extent_cache_entries),
            events: Vec::new(),
            log_bufs: PooledBufs::new(LOG_BUF_POOL_BYTES),
            asm_bufs: PooledBufs::new(ASM_BUF_POOL_BYTES),
            failed: None,
            stats: StoreStats::default(),
            sb,
        };
        // Blocks the last checkpoint or the replayed records reference stay allocated until the checkpoint at the
        // end of this mount is durable: a crash during it must find them intact when replaying the same log again.
        let before = st.used_blocks()?;
        let replayed = st.replay()?;
        // replay wrote the tree directly
        st.meta.clear();
        st.extents.clear();
        st.log_head = st.log_head.div_ceil(st.cfg.log_align) * st.cfg.log_align;
        if st.log_head >= st.sb.log_len {
            st.log_head = 0;
        }
        st.rebuild_allocator(before, replayed)?;
        let r0 = keys::refcount(0);
        let r_end = keys::prefix_end(&[keys::NS_REF]);
        st.refs_possible = !st
            .tree
            .scan(&mut st.io, &r0[..1], r_end.as_deref(), 1)?
            .is_empty();
        st.sb.log_epoch = st.sb.log_epoch.wrapping_add(1);
        st.checkpoint()?;
        Ok(st)
    }

    pub fn device(&self) -> &D {
        &self.io.dev
    }
    pub fn device_mut(&mut self) -> &mut D {
        &mut self.io.dev
    }
    pub fn device_stats(&self) -> DeviceStats {
        self.io.dev.stats()
    }
    pub fn into_device(self) -> D {
        self.io.dev
    }
    pub fn free_bytes(&self) -> u64 {
        (self.alloc.free_blocks() + self.pending_free_blocks + self.bg.as_ref().map_or(0, |c| c.free_blocks))
            * B
    }
    pub fn tree_stats(&self) -> (usize, usize) {
        (self.tree.cached_nodes(), self.tree.dirty_nodes())
    }

    /// Approximate heap bytes held by this shard's engine state: tree nodes (clean cache and dirty), in-flight
    /// data and log records, pending frees and the allocator. Walks the caches: for reports, not per operation.
    pub fn memory_bytes(&self) -> usize {
        let runs: usize = self
            .inflight_data
            .values()
            .map(|r| r.segs.iter().map(|s| s.len()).sum::<usize>())
            .sum();
        let log: usize = self.pending_log.iter().map(|p| p.size).sum();
        self.tree.memory_bytes()
            + runs
            + log
            + self.pending_free.capacity() * 16
            + self.alloc.free_run_count() * 80 // address map + length index entries
            + self.tags.capacity() * 40
            + self.prefetch_bytes
            + self.defrag_bytes
            + self.defrag_seen.capacity() * 24
            + self.defrag_seen_order.capacity() * 16
            + self.meta.memory_bytes()
            + self.extents.memory_bytes()
    }

    fn check_alive(&self) -> Result<()> {
        match &self.failed {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    fn fail(&mut self, e: StoreError) -> StoreError {
        if self.failed.is_none() {
            self.failed = Some(e.clone());
        }
        e
    }

    // ---------------------------------------------------------------- recovery

    fn read_log(&mut self, pos: u64, len: usize) -> Result<Bytes> {
        self.io.sync_read(self.sb.log_off + pos, len)
    }

    fn try_record_at(&mut self, pos: u64, expect: u64) -> Result<Option<(LogRecord, u64)>> {
        // The writer may have used another alignment (config change): read and check at device granularity.
        let align = self.io.dev.logical_block_size().clamp(512, 4096);
        if pos + align > self.sb.log_len {
            return Ok(None);
        }
        let head = self.read_log(pos, align as usize)?;
        let max = (self.sb.log_len - pos) as usize;
        let Some(h) = LogRecord::peek_header(&head, max) else {
            return Ok(None);
        };
        if h.epoch != self.sb.log_epoch || h.lsn != expect || !(h.total_len as u64).is_multiple_of(align) {
            return Ok(None);
        }
        let full = self.read_log(pos, h.total_len)?;
        match LogRecord::decode(&full) {
            Ok(r) => Ok(Some((r, pos + h.total_len as u64))),
            Err(_) => Ok(None),
        }
    }

    /// Replay the log; returns the data block runs referenced by the extent puts of the applied records.
    fn replay(&mut self) -> Result<Vec<(u64, u64)>> {
        let mut pos = self.sb.log_tail;
        let mut expect = self.sb.next_lsn;
        let mut consumed = 0u64;
        let mut records = Vec::new();
        loop {
            // A record that did not fit before the end of the log was written at offset 0 instead.
            let (rec, start, end) = match self.try_record_at(pos, expect)? {
                Some((r, e)) => (r, pos, e),
                None if pos != 0 => match self.try_record_at(0, expect)? {
                    Some((r, e)) => (r, 0, e),
                    None => break,
                },
                None => break,
            };
            let len = end - start;
            consumed += if start == pos {
                len
            } else {
                self.sb.log_len - pos + len
            };
            if consumed > self.sb.log_len {
                break;
            }
            records.push((rec, end));
            pos = end;
            expect += 1;
        }
        let max_durable = records.iter().map(|(r, _)| r.durable_upto).max().unwrap_or(0);
        let mut referenced = Vec::new();
        let mut faulty_end = None;
        if self.cfg.fault_replay_order {
            // Seeded bug: keep the records that pass the usual checks, then apply them newest first.
            let mut keep = 0;
            for (rec, _) in &records {
                if rec.lsn > max_durable && !self.record_data_intact(rec)? {
                    break;
                }
                keep += 1;
            }
            records.truncate(keep);
            faulty_end = records.last().map(|(r, e)| (r.lsn + 1, *e));
            records.reverse();
        }
        for (rec, end) in records {
            if faulty_end.is_none() && rec.lsn > max_durable && !self.record_data_intact(&rec)? {
                break;
            }
            // Journaled blocks: written again from the record (their own write may not have reached the media;
            // no block is written twice between checkpoints, so this is the same content). Unsynced: the
            // checkpoint that ends the mount flushes before it releases the log.
            let mut at = 0usize;
            for j in &rec.journal {
                if !self.block_range_ok(j.pblock, j.crcs.len() as u64) {
                    return Err(StoreError::Corrupt(format!(
                        "log record {} journals blocks {}+{} outside the data area",
                        rec.lsn,
                        j.pblock,
                        j.crcs.len()
                    )));
                }
                let data = Bytes::copy_from_slice(&rec.data[at..at + j.data_len()]);
                at += j.data_len();
                if !self.cfg.fault_skip_journal_redo {
                    self.io.sync_write_unsynced(j.pblock * B, data)?;
                    self.stats.replayed_journal_blocks += j.crcs.len() as u64;
                }
            }
            for d in &rec.deltas {
                match d {
                    Delta::Put(k, v) => {
                        if k.first() == Some(&keys::NS_EXTENT) {
                            let e = Extent::decode(v)?;
                            referenced.push((e.pblock, e.blocks()));
                        } else if keys::has_value_form(k) {
                            referenced.extend(Value::decode(v)?.runs());
                        }
                        self.tree.put(&mut self.io, k, v)?
                    }
                    Delta::Del(k) => {
                        self.tree.delete(&mut self.io, k)?;
                    }
                }
            }
            self.next_lsn = rec.lsn + 1;
            self.log_head = end;
            self.stats.replayed_records += 1;
        }
        if let Some((next_lsn, head)) = faulty_end {
            self.next_lsn = next_lsn;
            self.log_head = head;
        }
        Ok(referenced)
    }

    /// A record written after the last known flush is valid only if the data extents it references made it to the
    /// media too (data and log are written in parallel; with ordered commits the data first, but a volatile cache
    /// may still write the record back before the data).
    fn record_data_intact(&mut self, rec: &LogRecord) -> Result<bool> {
        // Blocks the record carries itself (their crcs were checked when it was decoded).
        let journaled = |p: u64, n: u64| {
            rec.journal
                .iter()
                .any(|j| j.pblock <= p && p.saturating_add(n) <= j.pblock.saturating_add(j.crcs.len() as u64))
        };
        for d in &rec.deltas {
            if let Delta::Put(k, v) = d
                && k.first() == Some(&keys::NS_EXTENT)
            {
                let Ok(e) = Extent::decode(v) else {
                    return Ok(false);
                };
                if !self.block_range_ok(e.pblock, e.blocks()) {
                    return Ok(false);
                }
                if journaled(e.pblock, e.blocks()) {
                    continue;
                }
                let data = self.io.sync_read(e.pblock * B, BLOCK * e.crcs.len())?;
                for (i, c) in e.crcs.iter().enumerate() {
                    if crc(&data[i * BLOCK..(i + 1) * BLOCK]) != *c {
                        return Ok(false);
                    }
                }
            } else if let Delta::Put(k, v) = d
                && keys::has_value_form(k)
            {
                let Ok(val) = Value::decode(v) else {
                    return Ok(false);
                };
                if !val.runs().all(|(s, l)| self.block_range_ok(s, l)) {
                    return Ok(false);
                }
                match self.load_value(&TxnCtx::default(), v) {
                    Ok(_) => {}
                    Err(e) if e.is_media_error() => return Ok(false),
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(true)
    }

    /// `pblock..pblock + n` lies in the data area (values come from the media: no arithmetic may overflow).
    fn block_range_ok(&self, pblock: u64, n: u64) -> bool {
        pblock >= self.sb.data_first_block
            && pblock
                .checked_add(n)
                .is_some_and(|end| end <= self.sb.data_first_block + self.sb.data_blocks)
    }

    /// Every block referenced by the tree (nodes, data) plus those awaiting release.
    fn used_blocks(&mut self) -> Result<Vec<(u64, u64)>> {
        let mut used = Vec::new();
        let mut extents = Vec::new();
        let mut values = Vec::new();
        self.tree.walk(&mut self.io, &mut |blk, node| {
            if let Some(b) = blk {
                used.push((b, 1));
            }
            for i in 0..node.len() {
                let k = node.key(i);
                if node.level == 0 && k.first() == Some(&keys::NS_EXTENT) {
                    extents.push(node.val(i).to_vec());
                } else if node.level == 0 && keys::has_value_form(k) && node.val(i).first() != Some(&0) {
                    values.push(node.val(i).to_vec());
                }
            }
        })?;
        for v in extents {
            let e = Extent::decode(&v)?;
            used.push((e.pblock, e.blocks()));
        }
        for v in values {
            used.extend(Value::decode(&v)?.runs());
        }
        used.extend(self.tree.superseded.iter().map(|b| (*b, 1)));
        used.extend(self.pending_free.iter().copied());
        Ok(union(used))
    }

    fn rebuild_allocator(&mut self, before: Vec<(u64, u64)>, replayed: Vec<(u64, u64)>) -> Result<()> {
        let now = self.used_blocks()?;
        let mut all = now.clone();
        all.extend(before);
        all.extend(replayed);
        let used = union(all);
        let deferred = subtract(&used, &now);
        self.pending_free_blocks = deferred.iter().map(|r| r.1).sum();
        self.pending_free = deferred;
        for (s, l) in &used {
            if !self.block_range_ok(*s, *l) {
                return Err(StoreError::Corrupt(format!(
                    "block run {s}+{l} outside data area"
                )));
            }
        }
        self.alloc = Allocator::from_used(self.sb.data_first_block, self.sb.data_blocks, used)?;
        Ok(())
    }

    // ---------------------------------------------------------------- pipeline

    /// Apply a transaction (all or nothing) and start making it durable. Returns its sequence number; an
    /// `Event::Durable(seq)` follows once it is on media. Reads see its effects at once.
    pub fn queue_transaction(&mut self, txn: &Transaction) -> Result<u64> {
        self.check_alive()?;
        let ctx = match self.try_apply(txn) {
            Err(StoreError::NoSpace) if self.pending_free_blocks > 0 || self.bg.is_some() => {
                self.checkpoint()?;
                self.try_apply(txn)?
            }
            r => r?,
        };
        self.commit_ctx(ctx)
    }

    /// Queue `txn` and block until it is durable.
    pub fn commit(&mut self, txn: &Transaction) -> Result<u64> {
        let seq = self.queue_transaction(txn)?;
        self.wait_durable(seq)?;
        Ok(seq)
    }

    /// Block until transaction `seq` is durable.
    pub fn wait_durable(&mut self, seq: u64) -> Result<()> {
        loop {
            if let Some(i) = self
                .events
                .iter()
                .position(|e| matches!(e, Event::Durable(s) if *s == seq))
            {
                self.events.remove(i);
                return Ok(());
            }
            if self.inflight.front().is_none_or(|t| t.seq > seq) && self.pending_log.is_empty() {
                return Ok(());
            }
            self.write_pending_log()?;
            self.pump(true)?;
        }
    }

    fn try_apply(&mut self, txn: &Transaction) -> Result<TxnCtx> {
        let mut ctx = TxnCtx::default();
        let mut r = Ok(());
        for op in &txn.ops {
            r = self.apply_op(&mut ctx, op);
            if r.is_err() {
                break;
            }
        }
        if r.is_ok() && !self.record_fits(&ctx) {
            r = Err(StoreError::TooLarge(
                "transaction metadata exceeds the log record limit",
            ));
        }
        if let Err(e) = r {
            self.discard(ctx);
            return Err(e);
        }
        Ok(ctx)
    }

    /// Whether a transaction's metadata fits in one log record.
    fn record_fits(&self, ctx: &TxnCtx) -> bool {
        let size: usize = ctx
            .overlay
            .iter()
            .map(|(k, v)| 7 + k.len() + v.as_ref().map_or(0, |v| v.len()))
            .sum();
        size + wal::HEADER_LEN <= self.max_record()
    }

    fn max_record(&self) -> usize {
        (self.sb.log_len / 4) as usize
    }

    fn commit_ctx(&mut self, ctx: TxnCtx) -> Result<u64> {
        self.refs_possible |= ctx.refs_touched;
        let seq = self.next_seq;
        self.next_seq += 1;
        if !self.prefetches.is_empty() && !ctx.same_content {
            self.invalidate_prefetches(&ctx.overlay);
        }
        self.meta.commit(&ctx.overlay);
        self.extents.commit(&ctx.overlay);
        let mut deltas = Vec::with_capacity(ctx.overlay.len());
        // Spilled runs of replaced or deleted attr / omap values in the tree (see `TxnCtx::tree_released`).
        let mut old_runs: Vec<(u64, u64)> = Vec::new();
        let released = &ctx.tree_released;
        let mut release_old = |k: &[u8], old: &[u8]| {
            if is_value_key(k) && old.first() == Some(&1) && !released.contains(k) {
                // A value that does not decode was rejected when it was written; if one is found anyway its
                // blocks stay allocated (fsck reports them) rather than failing the commit.
                if let Ok(v) = Value::decode(old) {
                    old_runs.extend(v.runs());
                }
            }
        };
        // The overlay is sorted: its puts and deletes go to the tree as one batch, the keys under one node
        // sharing a descent (a write's onode, attrs and extents; its pg log entry and pg info).
        let changes: Vec<crate::btree::Change<'_>> = ctx
            .overlay
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_deref()))
            .collect();
        if let Err(e) = self.tree.apply_sorted(&mut self.io, &changes, &mut release_old) {
            return Err(self.fail(e));
        }
        drop(changes);
        for (s, l) in old_runs {
            self.pending_free.push((s, l));
            self.pending_free_blocks += l;
        }
        for (k, v) in ctx.overlay {
            deltas.push(match v {
                Some(v) => Delta::Put(k, v),
                None => Delta::Del(k),
            });
        }
        if !self.deferred.is_empty() && !ctx.freed.is_empty() {
            self.skip_freed_deferred(&ctx.freed);
        }
        for (s, l) in ctx.freed {
            self.pending_free.push((s, l));
            self.pending_free_blocks += l;
        }
        let mut ios = 1;
        let data_bytes: u64 = ctx.runs.iter().map(|(_, r)| r.blocks * B).sum();
        let mut size: usize = deltas.iter().map(|d| d.encoded_len()).sum();
        // Journaled: the data rides in the record too, so the record alone makes the transaction durable.
        let journal = data_bytes > 0
            && data_bytes <= self.cfg.log_data_max_bytes
            && self.sb.version >= JOURNAL_FORMAT_VERSION
            && ctx.runs.iter().all(|(_, r)| r.crcs.len() as u64 == r.blocks)
            && wal::HEADER_LEN + size + data_bytes as usize <= self.max_record();
        // Ordered commits (unsynced data, the record after it) only for a transaction with company: one queued
        // alone gets durable data writes and its record at once (`StoreConfig::ordered_lone_synced`).
        let lone = self.cfg.ordered_lone_synced && self.inflight.is_empty() && self.records_in_flight == 0;
        // ... and only for one whose data is large enough (`StoreConfig::ordered_min_data_bytes`).
        let small = data_bytes < self.cfg.ordered_min_data_bytes;
        let ordered = self.ordered_commits() && !lone && !small && !journal;
        if self.ordered_commits() && lone && !journal {
            self.stats.ordered_lone_txns += 1;
        }
        let mut jruns = Vec::new();
        let mut jdata = Vec::new();
        if journal {
            self.stats.journaled_txns += 1;
            self.stats.journaled_bytes += data_bytes;
        }
        for (start, run) in ctx.runs {
            self.stats.data_bytes += run.blocks * B;
            if journal {
                // Its own write is deferred and batched (`flush_deferred`): nothing waits for it, and written
                // one by one each would complete on its own and wake the caller once more per transaction.
                // Until it completes reads take the blocks from `inflight_data`; every deferred write is
                // submitted before a checkpoint's barrier, which waits for it before its flush, so it is durable
                // before the record's log space is reused.
                self.deferred.push(start);
                self.deferred_bytes += run.blocks * B;
                jdata.extend(run.segs.iter().cloned());
                let j = JournalRun {
                    pblock: start,
                    crcs: run.crcs.clone(),
                };
                size += j.encoded_len();
                jruns.push(j);
                self.inflight_data.insert(start, run);
                continue;
            }
            let t = self.io.tag();
            self.tags.insert(t, Purpose::Data { seq, start });
            if ordered {
                // Made durable by the flush of the log record's durable write, which waits for this completion.
                self.io.dev.submit_write_unsynced(t, start * B, run.segs.clone());
            } else {
                self.io.dev.submit_write(t, start * B, run.segs.clone());
            }
            self.inflight_data.insert(start, run);
            ios += 1;
        }
        self.inflight.push_back(TxnState {
            seq,
            ios_left: ios,
            data_synced: !ordered,
        });
        self.pending_log.push(PendingTxn {
            seq,
            deltas,
            size,
            journal: jruns,
            data: jdata,
            data_len: if journal { data_bytes as usize } else { 0 },
        });
        self.stats.txns += 1;
        if self.deferred_bytes >= self.cfg.journal_batch_bytes {
            self.flush_deferred();
        }
        Ok(seq)
    }

    /// Drop the deferred data write of every journaled run that `freed` covers whole: a block rewritten before
    /// its batch went out is written once more only by replay, from the record that carries it (until the next
    /// checkpoint the block stays free, and no extent points at it any more, so nothing reads it). A run freed in
    /// part keeps its write.
    fn skip_freed_deferred(&mut self, freed: &[(u64, u64)]) {
        let (data, stats) = (&mut self.inflight_data, &mut self.stats);
        let mut dropped = 0;
        self.deferred.retain(|&start| {
            let Some(blocks) = data.get(&start).map(|r| r.blocks) else {
                return false;
            };
            let gone = freed
                .iter()
                .any(|&(s, l)| start >= s && start + blocks <= s.saturating_add(l));
            if gone {
                data.remove(&start);
                dropped += blocks * B;
                stats.journaled_writes_skipped += 1;
            }
            !gone
        });
        self.deferred_bytes = self.deferred_bytes.saturating_sub(dropped);
    }

    /// Submit the deferred data writes of journaled runs (unsynced: a checkpoint's flush covers them).
    fn flush_deferred(&mut self) {
        for start in std::mem::take(&mut self.deferred) {
            let Some(run) = self.inflight_data.get(&start) else {
                continue;
            };
            let segs = run.segs.clone();
            let t = self.io.tag();
            self.tags.insert(t, Purpose::JournaledData { start });
            self.io.dev.submit_write_unsynced(t, start * B, segs);
        }
        self.deferred_bytes = 0;
    }

    /// Ordered commits: a group commit's data writes are unsynced and its log record, a durable write that also
    /// flushes what completed before it ([`Device::durable_writes_flush`]), is submitted once they completed.
    fn ordered_commits(&self) -> bool {
        self.io.dev.writes_are_durable() && self.io.dev.durable_writes_flush()
    }

    /// Drive IO without blocking; durable transactions and finished reads are appended to `out`.
    pub fn poll(&mut self, out: &mut Vec<Event>) -> Result<()> {
        self.check_alive()?;
        if !self.defrag.is_empty() {
            self.defrag_one()?;
        }
        self.write_pending_log()?;
        self.pump(false)?;
        if self.ordered_commits() {
            // Records whose data writes completed in this pump go out now, not at the next poll.
            self.write_pending_log()?;
        }
        self.maybe_checkpoint()?;
        self.alloc.release(RELEASE_PER_POLL);
        out.append(&mut self.events);
        Ok(())
    }

    /// Like `poll` but blocks until at least one event, unless nothing is in flight.
    pub fn wait(&mut self, out: &mut Vec<Event>) -> Result<()> {
        self.check_alive()?;
        if !self.defrag.is_empty() {
            self.defrag_one()?;
        }
        self.write_pending_log()?;
        if self.events.is_empty() {
            self.pump(true)?;
            if self.ordered_commits() {
                self.write_pending_log()?;
            }
        }
        self.maybe_checkpoint()?;
        self.alloc.release(RELEASE_PER_POLL);
        out.append(&mut self.events);
        Ok(())
    }

    /// Transactions queued but not yet durable.
    pub fn unacked(&self) -> usize {
        self.inflight.len()
    }

    /// A background checkpoint is in progress, reads (`queue_read`, `prefetch`) are in flight, or scattered
    /// ranges wait to be rewritten ([`StoreConfig::defrag_extra_reads`]): all advance only inside `poll`/`wait`,
    /// so a caller that goes idle should keep polling while this is true (until then a checkpoint's log space
    /// and freed blocks stay reserved, read events do not come, and read data is held for the rewrites).
    pub fn has_background_work(&self) -> bool {
        self.bg.is_some() || !self.reads.is_empty() || !self.defrag.is_empty()
    }

    /// Write log records for the queued transactions; with ordered commits only for those whose data writes
    /// have all completed (a prefix: records stay in sequence order), the rest wait for a later call.
    fn write_pending_log(&mut self) -> Result<()> {
        let ordered = self.ordered_commits() && !self.cfg.fault_unordered_log;
        if ordered && self.records_in_flight > 0 && !self.cfg.ordered_records_unbounded {
            // Group commit by the device's own pace: each record is a flush, and a flush asked for while one is
            // in flight waits for it anyway (the block layer runs one at a time), so the transactions whose data
            // completes meanwhile go into one record after it instead of a record (and a file-system sync) each.
            return Ok(());
        }
        while !self.pending_log.is_empty() {
            let max = self.max_record();
            let mut take = 0;
            let mut size = wal::HEADER_LEN;
            let mut data_len = 0;
            for p in &self.pending_log {
                if take > 0 && size + p.size + data_len + p.data_len > max {
                    break;
                }
                if ordered && !self.data_written(p.seq) {
                    break;
                }
                size += p.size;
                data_len += p.data_len;
                take += 1;
            }
            if take == 0 {
                return Ok(());
            }
            // The metadata region, padded; journaled blocks follow it (a whole number of blocks, so aligned).
            let meta_len = (size as u64).div_ceil(self.cfg.log_align) * self.cfg.log_align;
            let len = meta_len + data_len as u64;
            let (pos, waste) = if self.log_head + len > self.sb.log_len {
                (0, self.sb.log_len - self.log_head)
            } else {
                (self.log_head, 0)
            };
            if self.log_used + waste + len > self.sb.log_len {
                // No room: a checkpoint makes everything durable (pending txns included) and empties the log.
                self.stats.ckpt_log_full += 1;
                return self.checkpoint();
            }
            let batch = &self.pending_log[..take];
            let first = batch[0].seq;
            let last = batch[batch.len() - 1].seq;
            let lsn = self.next_lsn;
            // Encoded straight into a pooled aligned buffer: no record `Vec`, no flattened delta list, and the
            // device writes it as is (an unaligned buffer costs the io_uring backend a bounce copy).
            let bytes = self.log_bufs.take(meta_len as usize, |out| {
                wal::encode_into(
                    out,
                    self.sb.log_epoch,
                    lsn,
                    self.durable_lsn,
                    batch.iter().flat_map(|p| p.deltas.iter()),
                    batch.iter().flat_map(|p| p.journal.iter()),
                    data_len,
                )
            });
            // The journaled blocks are written from the transactions' own buffers (gathered), not copied.
            let mut bufs = Vec::with_capacity(1 + batch.iter().map(|p| p.data.len()).sum::<usize>());
            bufs.push(bytes);
            for p in batch {
                bufs.extend(p.data.iter().cloned());
            }
            self.pending_log.drain(..take);
            self.next_lsn += 1;
            self.log_used += waste + len;
            self.log_head = pos + len;
            self.record_seqs.push_back((lsn, last));
            let t = self.io.tag();
            self.tags.insert(t, Purpose::Log { first, last });
            self.stats.log_records += 1;
            self.stats.log_bytes += len;
            self.records_in_flight += 1;
            self.io.dev.submit_write(t, self.sb.log_off + pos, bufs);
        }
        Ok(())
    }

    /// Transaction `seq` (queued, not acknowledged) may go into a log record with ordered commits: every data
    /// write of it has completed, or they are durable writes of their own (a lone transaction's).
    fn data_written(&self, seq: u64) -> bool {
        let Some(front) = self.inflight.front().map(|t| t.seq) else {
            return false;
        };
        let t = seq.checked_sub(front).and_then(|i| self.inflight.get(i as usize));
        debug_assert!(t.is_some_and(|t| t.seq == seq));
        t.is_some_and(|t| t.ios_left == 1 || t.data_synced)
    }

    fn pump(&mut self, block: bool) -> Result<()> {
        let mut comps = std::mem::take(&mut self.io.spare);
        comps.append(&mut self.io.stash);
        if comps.is_empty() && block {
            self.io.dev.wait(&mut comps);
        } else {
            self.io.dev.poll(&mut comps);
        }
        for c in comps.drain(..) {
            self.complete(c)?;
        }
        self.io.spare = comps;
        self.maybe_flush();
        if self.bg.is_some() {
            self.advance_bg()?;
        }
        Ok(())
    }

    fn io_done(&mut self, seq: u64) {
        if let Some(front) = self.inflight.front().map(|t| t.seq)
            && let Some(t) = self.inflight.get_mut((seq - front) as usize)
        {
            debug_assert_eq!(t.seq, seq);
            t.ios_left = t.ios_left.saturating_sub(1);
        }
    }

    fn complete(&mut self, c: Completion) -> Result<()> {
        let Some(p) = self.tags.remove(&c.tag) else {
            return Ok(());
        };
        if let Purpose::Read { id } = p {
            self.read_complete(id, c.tag, c.result);
            return Ok(());
        }
        if let Err(e) = c.result {
            return Err(self.fail(StoreError::Io(e)));
        }
        match p {
            Purpose::Data { seq, start } => {
                self.inflight_data.remove(&start);
                self.io_done(seq);
            }
            Purpose::JournaledData { start } => {
                self.inflight_data.remove(&start);
            }
            Purpose::Log { first, last, .. } => {
                self.records_in_flight -= 1;
                for s in first..=last {
                    self.io_done(s);
                }
            }
            Purpose::Flush { seq, lsn } => {
                self.flush_inflight = false;
                self.durable_lsn = self.durable_lsn.max(lsn);
                self.ack_upto(seq);
            }
            Purpose::CkptFlush | Purpose::CkptSuper | Purpose::CkptSuperFlush => {
                if let Some(c) = self.bg.as_mut() {
                    c.step = match c.step {
                        CkptStep::Flush => CkptStep::Super,
                        CkptStep::Super => CkptStep::SuperFlush,
                        CkptStep::SuperFlush => CkptStep::Done,
                        other => other,
                    };
                    // The step's IO completed: the next one is submitted by `advance_bg`.
                    c.barrier = 0;
                }
            }
            Purpose::Ckpt { block, blocks } => {
                for b in block..block + blocks {
                    self.io.nodes_in_flight.remove(&b);
                }
                if let Some(c) = self.bg.as_mut() {
                    c.writing = c.writing.saturating_sub(blocks as usize);
                }
            }
            Purpose::Read { .. } => {}
        }
        Ok(())
    }

    fn ack_upto(&mut self, seq: u64) {
        while self.inflight.front().is_some_and(|t| t.seq <= seq) {
            if let Some(t) = self.inflight.pop_front() {
                self.events.push(Event::Durable(t.seq));
            }
        }
    }

    fn maybe_flush(&mut self) {
        if self.flush_inflight {
            return;
        }
        let mut last = None;
        for t in &self.inflight {
            if t.ios_left != 0 {
                break;
            }
            last = Some(t.seq);
        }
        let Some(done) = last else { return };
        // Acknowledge whole log records only: replay verifies a record's data extents as one unit, so a record
        // holding a transaction whose data is still in flight could be dropped as a whole after a crash.
        let mut covered = None;
        while let Some(&(l, s)) = self.record_seqs.front() {
            if s > done {
                break;
            }
            self.record_seqs.pop_front();
            covered = Some((l, s));
        }
        let Some((lsn, seq)) = covered else { return };
        if self.io.dev.writes_are_durable() {
            self.durable_lsn = self.durable_lsn.max(lsn);
            self.ack_upto(seq);
            return;
        }
        let t = self.io.tag();
        self.tags.insert(t, Purpose::Flush { seq, lsn });
        self.flush_inflight = true;
        self.io.dev.submit_flush(t);
    }

    fn maybe_checkpoint(&mut self) -> Result<()> {
        self.advance_bg()?;
        let log_full = self.log_used * 100 > self.sb.log_len * self.cfg.checkpoint_log_percent;
        let dirty = self.tree.dirty_nodes() > self.cfg.max_dirty_nodes;
        let frees = self.pending_free_blocks * 100 > self.sb.data_blocks * self.cfg.checkpoint_free_percent;
        if !(log_full || dirty || frees) {
            return Ok(());
        }
        if !self.cfg.background_checkpoints {
            return self.checkpoint();
        }
        if self.bg.is_none() {
            return self.start_bg_checkpoint();
        }
        // One is running and the next is already due: wait for it only when a limit is about to be overrun.
        let log_hard = self.log_used * 100 > self.sb.log_len * (self.cfg.checkpoint_log_percent + 100) / 2;
        let dirty_hard = self.tree.dirty_nodes() > self.cfg.max_dirty_nodes * 2;
        if log_hard || dirty_hard {
            if log_hard {
                self.stats.ckpt_waits_log += 1;
            } else {
                self.stats.ckpt_waits_dirty += 1;
            }
            self.finish_bg()?;
            return self.start_bg_checkpoint();
        }
        Ok(())
    }

    /// Snapshot the tree and start writing it; the superblock follows in the background (`advance_bg`).
    fn start_bg_checkpoint(&mut self) -> Result<()> {
        debug_assert!(self.bg.is_none());
        // Before the barrier is taken below: the snapshot's flush must cover every journaled block it holds.
        self.flush_deferred();
        let before = self.stats.checkpoints;
        self.write_pending_log()?;
        // With ordered commits, records of transactions whose data writes are still in flight stay queued: the
        // snapshot holds those transactions and their data writes precede its barrier (so its flush covers
        // them); their records follow in the new log (lsn >= the snapshot's next_lsn), and replaying their
        // absolute puts and deletes over a tree that has them already yields the same tree.
        let waiting = !self.pending_log.is_empty() && !self.ordered_commits();
        if self.stats.checkpoints != before || waiting || self.bg.is_some() {
            // The log had no room: write_pending_log ran a blocking checkpoint already.
            return Ok(());
        }
        // The snapshot is the tree as of now: its dirty nodes are frozen (the live tree copies them on write) and
        // get their blocks a slice per poll (`place_snapshot_slice`); then they are serialised and written a slice
        // per poll (`submit_ckpt_slice`). Until a node's write completes, a cache miss on it is served from
        // `nodes_queued` / `nodes_in_flight`.
        self.tree.freeze();
        let mut sb = self.sb.clone();
        sb.generation += 1;
        sb.next_lsn = self.next_lsn;
        sb.log_tail = self.log_head;
        self.bg = Some(BgCkpt {
            sb,
            placing: true,
            barrier: self.io.next_tag,
            step: CkptStep::Barrier,
            queued: VecDeque::new(),
            writing: 0,
            reserve: NodeBlocks::default(),
            frees: std::mem::take(&mut self.pending_free),
            free_blocks: std::mem::take(&mut self.pending_free_blocks),
            superseded: std::mem::take(&mut self.tree.superseded),
            log_used: self.log_used,
        });
        self.advance_bg()
    }

    /// Give the next `budget` nodes of the frozen snapshot their blocks and queue them for writing; once all are
    /// placed the superblock learns the root.
    fn place_snapshot_slice(&mut self, budget: usize) -> Result<()> {
        if !self.bg.as_ref().is_some_and(|c| c.placing) {
            return Ok(());
        }
        let mut nodes = Vec::new();
        let alloc = &mut self.alloc;
        let Some(c) = self.bg.as_mut() else { return Ok(()) };
        let reserve = &mut c.reserve;
        let root = match self
            .tree
            .snapshot_step(&mut || reserve.take(alloc), budget, &mut nodes)
        {
            Ok(r) => r,
            Err(e) => return Err(self.fail(e)),
        };
        for (b, node) in nodes {
            self.stats.node_bytes += BLOCK as u64;
            self.io.nodes_queued.insert(b, node);
            c.queued.push_back(b);
        }
        if let Some(root) = root {
            c.sb.root_block = root;
            c.placing = false;
            c.reserve.give_back(&mut self.alloc);
        }
        Ok(())
    }

    fn submit_node_writes(&mut self, writes: Vec<crate::btree::NodeWrite>) {
        let mut writes = writes.into_iter().peekable();
        while let Some((first, data)) = writes.next() {
            self.stats.node_bytes += data.len() as u64;
            let mut bufs = vec![Bytes::from(data)];
            while bufs.len() < CKPT_WRITE_BLOCKS
                && writes
                    .peek()
                    .is_some_and(|(b, _)| *b == first + bufs.len() as u64)
            {
                if let Some((_, d)) = writes.next() {
                    self.stats.node_bytes += d.len() as u64;
                    bufs.push(Bytes::from(d));
                }
            }
            self.submit_node_run(first, bufs);
        }
    }

    /// Write the serialised nodes of consecutive blocks from `first` as one write; reads of those blocks are served
    /// from memory until it completes.
    fn submit_node_run(&mut self, first: u64, bufs: Vec<Bytes>) {
        for (b, data) in (first..).zip(&bufs) {
            self.io.nodes_in_flight.insert(b, data.clone());
        }
        let t = self.io.tag();
        self.tags.insert(
            t,
            Purpose::Ckpt {
                block: first,
                blocks: bufs.len() as u64,
            },
        );
        // Unsynced: the flush before the superblock covers them all (see `Device::submit_write_unsynced`).
        self.io.dev.submit_write_unsynced(t, first * B, bufs);
    }

    /// Serialise and submit the next slice of a background checkpoint's node writes.
    fn submit_ckpt_slice(&mut self) -> Result<()> {
        let mut n = 0;
        loop {
            let Some(c) = self.bg.as_mut() else { return Ok(()) };
            if n >= CKPT_SLICE || c.writing >= CKPT_MAX_IN_FLIGHT {
                return Ok(());
            }
            // The next run of consecutive queued blocks, within this slice's and the in-flight budget.
            let room = (CKPT_SLICE - n)
                .min(CKPT_MAX_IN_FLIGHT - c.writing)
                .min(CKPT_WRITE_BLOCKS);
            let mut bufs = Vec::new();
            let mut first = 0;
            while bufs.len() < room {
                let Some(&b) = c.queued.front() else { break };
                if !bufs.is_empty() && b != first + bufs.len() as u64 {
                    break;
                }
                c.queued.pop_front();
                let Some(node) = self.io.nodes_queued.remove(&b) else {
                    // Not queued (cannot happen: placement queues each node once); the run ends here.
                    break;
                };
                match node.encode(b) {
                    Ok(d) => {
                        if bufs.is_empty() {
                            first = b;
                        }
                        bufs.push(Bytes::from(d));
                    }
                    Err(e) => {
                        // Not reachable (a snapshot's children all have blocks); fail rather than write garbage.
                        if self.failed.is_none() {
                            self.failed = Some(e.clone());
                        }
                        return Err(e);
                    }
                }
            }
            if bufs.is_empty() {
                return Ok(());
            }
            n += bufs.len();
            c.writing += bufs.len();
            self.submit_node_run(first, bufs);
        }
    }

    /// Move a background checkpoint on as far as completed IO allows (never blocks).
    fn advance_bg(&mut self) -> Result<()> {
        let slice = match self.cfg.checkpoint_walk_slice {
            0 => usize::MAX,
            n => n,
        };
        self.place_snapshot_slice(slice)?;
        self.submit_ckpt_slice()?;
        loop {
            let Some(c) = self.bg.as_ref() else { return Ok(()) };
            match c.step {
                CkptStep::Barrier => {
                    let barrier = c.barrier;
                    if c.placing
                        || !c.queued.is_empty()
                        || c.writing > 0
                        || self.tags.keys().any(|t| *t <= barrier)
                        || !self.io.stash.is_empty()
                    {
                        return Ok(());
                    }
                    self.bg_submit(CkptStep::Flush);
                }
                CkptStep::Flush | CkptStep::Super | CkptStep::SuperFlush if c.barrier != 0 => return Ok(()),
                CkptStep::Flush => self.bg_submit(CkptStep::Flush),
                CkptStep::Super => self.bg_submit(CkptStep::Super),
                CkptStep::SuperFlush => self.bg_submit(CkptStep::SuperFlush),
                CkptStep::Done => {
                    let Some(c) = self.bg.take() else { return Ok(()) };
                    self.sb = c.sb;
                    self.log_used -= c.log_used;
                    // Released a slice per poll (`RELEASE_PER_POLL`), not in this turn.
                    self.alloc.free_later(
                        c.frees
                            .into_iter()
                            .chain(c.superseded.into_iter().map(|b| (b, 1))),
                    );
                    self.stats.checkpoints += 1;
                    self.stats.background_checkpoints += 1;
                    return Ok(());
                }
            }
        }
    }

    /// Submit the IO of `step`. The flush before the superblock is always a real one: the node writes were
    /// unsynced. The flush after it is skipped when writes are durable on completion (the superblock's is).
    fn bg_submit(&mut self, step: CkptStep) {
        let durable = self.io.dev.writes_are_durable();
        let Some(c) = self.bg.as_mut() else { return };
        c.step = step;
        let t = self.io.next_tag + 1;
        self.io.next_tag = t;
        match step {
            CkptStep::SuperFlush if durable => {
                c.step = CkptStep::Done;
                c.barrier = 0;
                return;
            }
            CkptStep::Flush => {
                self.tags.insert(t, Purpose::CkptFlush);
                self.io.dev.submit_flush(t);
            }
            CkptStep::SuperFlush => {
                self.tags.insert(t, Purpose::CkptSuperFlush);
                self.io.dev.submit_flush(t);
            }
            CkptStep::Super => {
                let slot = c.sb.region_off + (c.sb.generation % 2) * B;
                let enc = c.sb.encode();
                self.tags.insert(t, Purpose::CkptSuper);
                self.io.dev.submit_write(t, slot, vec![Bytes::from(enc)]);
            }
            CkptStep::Barrier | CkptStep::Done => return,
        }
        // Non-zero while this step's IO is outstanding.
        c.barrier = t;
    }

    /// Block until a background checkpoint (if any) is durable.
    fn finish_bg(&mut self) -> Result<()> {
        // The rest of the snapshot at once: a blocking wait below needs IO in flight to wake it.
        self.place_snapshot_slice(usize::MAX)?;
        while self.bg.is_some() {
            self.advance_bg()?;
            if self.bg.is_some() {
                self.pump(true)?;
            }
        }
        Ok(())
    }

    fn drain(&mut self) -> Result<()> {
        while self.io.dev.in_flight() > 0 || !self.io.stash.is_empty() || self.flush_inflight {
            self.pump(true)?;
        }
        Ok(())
    }

    /// Write every dirty tree node to fresh blocks, then a new superblock; afterwards the log restarts empty and
    /// blocks freed since the previous checkpoint become reusable. Blocks the caller while it runs.
    pub fn checkpoint(&mut self) -> Result<()> {
        self.check_alive()?;
        self.finish_bg()?;
        for p in std::mem::take(&mut self.pending_log) {
            self.io_done(p.seq);
        }
        self.flush_deferred();
        self.drain()?;
        let alloc = &mut self.alloc;
        let mut reserve = NodeBlocks::default();
        let flushed = self.tree.flush_dirty(&mut || reserve.take(alloc));
        reserve.give_back(&mut self.alloc);
        let (writes, root) = flushed.inspect_err(|e| {
            if self.failed.is_none() {
                self.failed = Some(e.clone());
            }
        })?;
        self.submit_node_writes(writes);
        self.drain()?;
        // A real flush even when writes are durable on completion: the node writes were unsynced.
        self.io.flush_now().map_err(|e| self.fail(e))?;
        let mut sb = self.sb.clone();
        sb.generation += 1;
        sb.root_block = root;
        sb.next_lsn = self.next_lsn;
        sb.log_tail = self.log_head;
        let slot = sb.region_off + (sb.generation % 2) * B;
        self.io.sync_write(slot, sb.encode()).map_err(|e| self.fail(e))?;
        self.io.sync_flush().map_err(|e| self.fail(e))?;
        self.sb = sb;
        self.log_used = 0;
        self.record_seqs.clear();
        self.durable_lsn = self.next_lsn - 1;
        for (s, l) in std::mem::take(&mut self.pending_free) {
            self.alloc.free(s, l);
        }
        self.pending_free_blocks = 0;
        for b in std::mem::take(&mut self.tree.superseded) {
            self.alloc.free(b, 1);
        }
        let last = self.next_seq - 1;
        self.ack_upto(last);
        self.stats.checkpoints += 1;
        Ok(())
    }

    /// Make everything durable and stop (the device is returned).
    pub fn umount(mut self) -> Result<D> {
        self.checkpoint()?;
        Ok(self.io.dev)
    }

    // ---------------------------------------------------------------- metadata access (overlay-aware)

    fn kv_get(&mut self, ctx: &TxnCtx, k: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(v) = ctx.overlay.get(k) {
            return Ok(v.clone());
        }
        self.tree.get(&mut self.io, k)
    }

    fn kv_put(&mut self, ctx: &mut TxnCtx, k: Vec<u8>, v: Vec<u8>) -> Result<()> {
        if k.len() > MAX_KEY || k.len() + v.len() > MAX_ENTRY {
            return Err(StoreError::TooLarge(
                "key or value exceeds the metadata entry limit",
            ));
        }
        ctx.overlay.insert(k, Some(v));
        Ok(())
    }

    fn kv_del(&mut self, ctx: &mut TxnCtx, k: Vec<u8>) {
        ctx.overlay.insert(k, None);
    }

    fn kv_scan(
        &mut self,
        ctx: &TxnCtx,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        use std::ops::Bound;
        if end.is_some_and(|e| e <= start) {
            // Empty range (BTreeMap::range would panic on it).
            return Ok(Vec::new());
        }
        // Only the overlay entries inside the range (a transaction with many ops has a large overlay).
        let upper = match end {
            Some(e) => Bound::Excluded(e),
            None => Bound::Unbounded,
        };
        let range = (Bound::Included(start), upper);
        let extra = ctx.overlay.range::<[u8], _>(range).count();
        let base = self
            .tree
            .scan(&mut self.io, start, end, limit.saturating_add(extra))?;
        if extra == 0 {
            return Ok(base);
        }
        let mut m: BTreeMap<Vec<u8>, Vec<u8>> = base.into_iter().collect();
        for (k, v) in ctx.overlay.range::<[u8], _>(range) {
            match v {
                Some(v) => {
                    m.insert(k.clone(), v.clone());
                }
                None => {
                    m.remove(k);
                }
            }
        }
        Ok(m.into_iter().take(limit).collect())
    }

    fn kv_scan_prefix(&mut self, ctx: &TxnCtx, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let end = keys::prefix_end(prefix);
        self.kv_scan(ctx, prefix, end.as_deref(), usize::MAX)
    }

    fn get_onode(&mut self, ctx: &TxnCtx, cid: &CollectionId, name: &[u8]) -> Result<Option<Onode>> {
        // The key is built in a buffer kept between lookups: a cache hit (the common case) allocates nothing.
        let mut k = std::mem::take(&mut self.key_scratch);
        keys::onode_into(cid, name, &mut k);
        let r = self.get_onode_at(ctx, &k);
        self.key_scratch = k;
        r
    }

    fn get_onode_at(&mut self, ctx: &TxnCtx, k: &[u8]) -> Result<Option<Onode>> {
        if let Some(v) = ctx.overlay.get(k) {
            return v.as_deref().map(Onode::decode).transpose();
        }
        if let Some(o) = self.meta.onode(k) {
            return Ok(Some(o));
        }
        match self.tree.get(&mut self.io, k)? {
            Some(v) => {
                let o = Onode::decode(&v)?;
                self.meta.insert_onode(k.to_vec(), o);
                Ok(Some(o))
            }
            None => Ok(None),
        }
    }

    fn need_onode(&mut self, ctx: &TxnCtx, cid: &CollectionId, oid: &ObjectKey) -> Result<Onode> {
        keys::check_cid(cid)?;
        keys::check_name(oid)?;
        self.get_onode(ctx, cid, &oid.name)?.ok_or(StoreError::NotFound)
    }

    fn need_coll(&mut self, ctx: &TxnCtx, cid: &CollectionId) -> Result<u32> {
        keys::check_cid(cid)?;
        let k = keys::coll(cid);
        if let Some(v) = ctx.overlay.get(&k) {
            return v.as_deref().map_or(Err(StoreError::NotFound), coll_bits);
        }
        if let Some(bits) = self.meta.coll(&k) {
            return Ok(bits);
        }
        let bits = match self.tree.get(&mut self.io, &k)? {
            Some(v) => coll_bits(&v)?,
            None => return Err(StoreError::NotFound),
        };
        self.meta.insert_coll(k, bits);
        Ok(bits)
    }

    fn get_or_create(&mut self, ctx: &mut TxnCtx, cid: &CollectionId, oid: &ObjectKey) -> Result<Onode> {
        keys::check_name(oid)?;
        self.need_coll(ctx, cid)?;
        if let Some(o) = self.get_onode(ctx, cid, &oid.name)? {
            return Ok(o);
        }
        let o = self.new_onode(ctx, oid.hash)?;
        self.put_onode(ctx, cid, &oid.name, &o)?;
        Ok(o)
    }

    fn new_onode(&mut self, ctx: &mut TxnCtx, hash: u32) -> Result<Onode> {
        let id = match self.kv_get(ctx, &keys::meta_next_id())? {
            Some(v) => keys::be_u64(&v)?,
            None => 1,
        };
        self.kv_put(ctx, keys::meta_next_id(), (id + 1).to_be_bytes().to_vec())?;
        Ok(Onode { id, size: 0, hash })
    }

    fn put_onode(&mut self, ctx: &mut TxnCtx, cid: &CollectionId, name: &[u8], o: &Onode) -> Result<()> {
        self.kv_put(ctx, keys::onode(cid, name), o.encode())
    }

    // ---------------------------------------------------------------- data helpers

    /// Extent entries of object `id` overlapping logical blocks `[b0, b1)`: (lblock, extent).
    ///
    /// Two lookups instead of a range scan from `b0 - (MAX_EXTENT_BLOCKS - 1)`: the extent covering `b0` is the
    /// last one starting at or before it (a point lookup), the others start inside `[b0, b1)` (visited in place,
    /// decoded without copying keys or values).
    fn extents_in(&mut self, ctx: &TxnCtx, id: u64, b0: u64, b1: u64) -> Result<Vec<(u64, Extent)>> {
        if b0 >= b1 {
            return Ok(Vec::new());
        }
        let first = keys::extent(id, b0);
        let end = keys::extent(id, b1);
        // An extent starting before b0 can reach into the range only from MAX_EXTENT_BLOCKS - 1 blocks back.
        let lowest = keys::extent(id, b0.saturating_sub(MAX_EXTENT_BLOCKS - 1));
        let in_overlay = ctx
            .overlay
            .range::<[u8], _>((
                std::ops::Bound::Included(&lowest[..]),
                std::ops::Bound::Excluded(&end[..]),
            ))
            .next()
            .is_some();
        let mut out = Vec::new();
        if in_overlay {
            if b0 > 0
                && let Some((k, v)) = self.kv_floor(ctx, &first, &lowest)?
            {
                let (lb, e) = extent_entry(&k, &v)?;
                if lb < b0 && lb + e.blocks() > b0 {
                    out.push((lb, e));
                }
            }
            for (k, v) in self.kv_scan(ctx, &first, Some(&end), usize::MAX)? {
                out.push(extent_entry(&k, &v)?);
            }
            return Ok(out);
        }
        // One walk from `lowest` instead of a floor lookup plus a walk from b0: the entries before b0 (at most
        // 15) are skipped on their key and block count, without decoding their crcs.
        let mut err = None;
        self.tree.visit(&mut self.io, &lowest, Some(&end), &mut |k, v| {
            let lb = k
                .get(9..17)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_be_bytes);
            let n = v.get(8).copied();
            if let (Some(lb), Some(n)) = (lb, n)
                && lb < b0
                && lb + u64::from(n) <= b0
            {
                return true;
            }
            match extent_entry(k, v) {
                Ok(x) => {
                    out.push(x);
                    true
                }
                Err(e) => {
                    err = Some(e);
                    false
                }
            }
        })?;
        match err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// The last live entry with `lowest <= key <= at`, the transaction's overlay applied.
    fn kv_floor(&mut self, ctx: &TxnCtx, at: &[u8], lowest: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        use std::ops::Bound;
        let ov = ctx
            .overlay
            .range::<[u8], _>((Bound::Included(lowest), Bound::Included(at)))
            .rev()
            .find_map(|(k, v)| v.as_ref().map(|v| (k.clone(), v.clone())));
        // The tree's floor, skipping entries the overlay replaces or deletes (normally none).
        let mut bound = at.to_vec();
        let mut inclusive = true;
        let tree = loop {
            match self.tree.floor(&mut self.io, &bound, inclusive)? {
                Some((k, v)) if k.as_slice() >= lowest => {
                    if ctx.overlay.contains_key(&k) {
                        bound = k;
                        inclusive = false;
                        continue;
                    }
                    break Some((k, v));
                }
                _ => break None,
            }
        };
        Ok(match (ov, tree) {
            (Some(a), Some(b)) => Some(if a.0 > b.0 { a } else { b }),
            (a, b) => a.or(b),
        })
    }

    fn staged_block(&self, ctx: &TxnCtx, pblock: u64) -> Option<Bytes> {
        for (s, r) in &ctx.runs {
            if pblock >= *s && pblock < s + r.blocks {
                return r.block(pblock - s);
            }
        }
        let (s, r) = self.inflight_data.range(..=pblock).next_back()?;
        if pblock < s + r.blocks {
            r.block(pblock - s)
        } else {
            None
        }
    }

    fn read_pblock(&mut self, ctx: &TxnCtx, pblock: u64, want_crc: u32) -> Result<Bytes> {
        if let Some(b) = self.staged_block(ctx, pblock) {
            return Ok(b);
        }
        let b = self.io.sync_read(pblock * B, BLOCK)?;
        if crc(&b) != want_crc {
            self.stats.csum_errors += 1;
            return Err(StoreError::Checksum { offset: pblock * B });
        }
        Ok(b)
    }

    /// Logical block `lb` of object `id` (None: a hole, reads as zeros).
    fn read_lblock(&mut self, ctx: &TxnCtx, id: u64, lb: u64) -> Result<Option<Bytes>> {
        let ex = self.extents_in(ctx, id, lb, lb + 1)?;
        match ex.into_iter().find(|(s, e)| *s <= lb && lb < s + e.blocks()) {
            Some((s, e)) => {
                let i = (lb - s) as usize;
                Ok(Some(self.read_pblock(ctx, e.pblock + i as u64, e.crcs[i])?))
            }
            None => Ok(None),
        }
    }

    fn read_range_sync(&mut self, ctx: &TxnCtx, o: &Onode, off: u64, len: u64) -> Result<Bytes> {
        let mut out = BytesMut::zeroed(len as usize);
        let end = off + len;
        let mut b = off / B;
        while b * B < end.min(o.size) {
            if let Some(data) = self.read_lblock(ctx, o.id, b)? {
                let s = (b * B).max(off);
                let e = ((b + 1) * B).min(end).min(o.size);
                if s < e {
                    out[(s - off) as usize..(e - off) as usize]
                        .copy_from_slice(&data[(s - b * B) as usize..(e - b * B) as usize]);
                }
            }
            b += 1;
        }
        Ok(out.freeze())
    }

    /// Refcount entries of blocks `[pb, pb + n)`. Skips the tree scan while no refcount entry can exist (no
    /// clone sharing since mount and none on the media): the common overwrite path of RBD without snapshots.
    fn refs_in(&mut self, ctx: &TxnCtx, pb: u64, n: u64) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        if !self.refs_possible && !ctx.refs_touched {
            return Ok(Vec::new());
        }
        self.kv_scan(
            ctx,
            &keys::refcount(pb),
            Some(&keys::refcount(pb + n)),
            usize::MAX,
        )
    }

    fn free_or_deref(&mut self, ctx: &mut TxnCtx, pb: u64, n: u64) -> Result<()> {
        if !self.refs_possible && !ctx.refs_touched {
            // No block can be shared: free the run, merged with the previous one when they touch (a punch of
            // one-block extents written in sequence frees neighbours).
            match ctx.freed.last_mut() {
                Some((s, l)) if *s + *l == pb => *l += n,
                _ => ctx.freed.push((pb, n)),
            }
            return Ok(());
        }
        let refs = self.refs_in(ctx, pb, n)?;
        let mut shared = BTreeMap::new();
        for (k, v) in refs {
            let b = keys::be_u64(k.get(1..9).ok_or_else(|| StoreError::Corrupt("ref key".into()))?)?;
            let a: [u8; 4] = v
                .as_slice()
                .try_into()
                .map_err(|_| StoreError::Corrupt("ref value".into()))?;
            shared.insert(b, u32::from_le_bytes(a));
        }
        let mut run: Option<(u64, u64)> = None;
        for b in pb..pb + n {
            if let Some(c) = shared.get(&b) {
                if *c <= 2 {
                    self.kv_del(ctx, keys::refcount(b));
                } else {
                    self.kv_put(ctx, keys::refcount(b), (c - 1).to_le_bytes().to_vec())?;
                }
                continue;
            }
            run = match run {
                Some((s, l)) if s + l == b => Some((s, l + 1)),
                Some(r) => {
                    ctx.freed.push(r);
                    Some((b, 1))
                }
                None => Some((b, 1)),
            };
        }
        if let Some(r) = run {
            ctx.freed.push(r);
        }
        Ok(())
    }

    fn incref(&mut self, ctx: &mut TxnCtx, pb: u64, n: u64) -> Result<()> {
        let refs = self.refs_in(ctx, pb, n)?;
        ctx.refs_touched = true;
        let mut shared = BTreeMap::new();
        for (k, v) in refs {
            let b = keys::be_u64(k.get(1..9).ok_or_else(|| StoreError::Corrupt("ref key".into()))?)?;
            let a: [u8; 4] = v
                .as_slice()
                .try_into()
                .map_err(|_| StoreError::Corrupt("ref value".into()))?;
            shared.insert(b, u32::from_le_bytes(a));
        }
        for b in pb..pb + n {
            let c = shared.get(&b).copied().unwrap_or(1);
            self.kv_put(ctx, keys::refcount(b), (c + 1).to_le_bytes().to_vec())?;
        }
        Ok(())
    }

    /// Unmap logical blocks `[b0, b1)` of object `id`, releasing (or dereferencing shared) physical blocks.
    fn punch(&mut self, ctx: &mut TxnCtx, id: u64, b0: u64, b1: u64) -> Result<()> {
        for (lb, e) in self.extents_in(ctx, id, b0, b1)? {
            let n = e.blocks();
            self.kv_del(ctx, keys::extent(id, lb));
            if lb < b0 {
                let keep = (b0 - lb) as usize;
                self.kv_put(
                    ctx,
                    keys::extent(id, lb),
                    Extent {
                        pblock: e.pblock,
                        crcs: e.crcs[..keep].to_vec(),
                    }
                    .encode(),
                )?;
            }
            let cs = lb.max(b0);
            let ce = (lb + n).min(b1);
            self.free_or_deref(ctx, e.pblock + (cs - lb), ce - cs)?;
            if lb + n > b1 {
                let skip = (b1 - lb) as usize;
                let tail = Extent {
                    pblock: e.pblock + skip as u64,
                    crcs: e.crcs[skip..].to_vec(),
                };
                self.kv_put(ctx, keys::extent(id, b1), tail.encode())?;
            }
        }
        Ok(())
    }

    /// Map logical blocks starting at `lb0` to freshly allocated blocks holding `segs` (whole blocks).
    fn place(&mut self, ctx: &mut TxnCtx, id: u64, lb0: u64, segs: Vec<Bytes>, crcs: Vec<u32>) -> Result<()> {
        let n = crcs.len() as u64;
        let runs = self.alloc.alloc(n)?;
        ctx.allocated.extend(runs.iter().copied());
        let mut queue: VecDeque<Bytes> = segs.into();
        let mut lb = lb0;
        let mut ci = 0usize;
        for (ps, pl) in runs {
            let mut want = pl * B;
            let mut run_segs = Vec::new();
            while want > 0 {
                let Some(mut s) = queue.pop_front() else { break };
                if s.len() as u64 > want {
                    let rest = s.split_off(want as usize);
                    queue.push_front(rest);
                }
                want -= s.len() as u64;
                run_segs.push(s);
            }
            let mut done = 0;
            while done < pl {
                let k = (pl - done).min(MAX_EXTENT_BLOCKS);
                let e = Extent {
                    pblock: ps + done,
                    crcs: crcs[ci..ci + k as usize].to_vec(),
                };
                self.kv_put(ctx, keys::extent(id, lb), e.encode())?;
                lb += k;
                ci += k as usize;
                done += k;
            }
            ctx.runs.push((
                ps,
                Run {
                    blocks: pl,
                    segs: run_segs,
                    crcs: crcs[ci - pl as usize..ci].to_vec(),
                },
            ));
        }
        Ok(())
    }

    fn write_data(&mut self, ctx: &mut TxnCtx, o: &mut Onode, off: u64, data: &Bytes) -> Result<()> {
        let len = data.len() as u64;
        let end = off
            .checked_add(len)
            .ok_or(StoreError::Invalid("offset overflow"))?;
        if end > MAX_OBJECT_SIZE {
            return Err(StoreError::TooLarge("object size"));
        }
        if len == 0 {
            o.size = o.size.max(off);
            return Ok(());
        }
        let b0 = off / B;
        let b1 = end.div_ceil(B);
        let mut segs: Vec<Bytes> = Vec::new();
        let mut crcs = Vec::with_capacity((b1 - b0) as usize);
        // Crcs msgr2 attached to the received pages: a whole block that is exactly such a page (the client's
        // data_off put object blocks on pages) takes its crc from there; anything else is computed here.
        let known = ceph_crc::blocks::page_crcs(data);
        // (index in segs, start offset in data) of the last whole-block slice, to extend it instead of adding one.
        let mut last_full: Option<(usize, usize)> = None;
        for b in b0..b1 {
            let (bs, be) = (b * B, (b + 1) * B);
            if bs >= off && be <= end {
                let (s, e) = ((bs - off) as usize, (be - off) as usize);
                match known.as_ref().and_then(|k| k.get(&data[s..e])) {
                    Some(c) => {
                        crcs.push(c);
                        self.stats.crc_blocks_reused += 1;
                    }
                    None => crcs.push(crc(&data[s..e])),
                }
                match last_full {
                    Some((i, from)) if i + 1 == segs.len() => segs[i] = data.slice(from..e),
                    _ => {
                        segs.push(data.slice(s..e));
                        last_full = Some((segs.len() - 1, s));
                    }
                }
            } else {
                let mut blk = BytesMut::zeroed(BLOCK);
                if let Some(old) = self.read_lblock(ctx, o.id, b)? {
                    blk.copy_from_slice(&old);
                }
                let s = bs.max(off);
                let e = be.min(end);
                blk[(s - bs) as usize..(e - bs) as usize]
                    .copy_from_slice(&data[(s - off) as usize..(e - off) as usize]);
                let blk = blk.freeze();
                crcs.push(crc(&blk));
                segs.push(blk);
                last_full = None;
            }
        }
        self.punch(ctx, o.id, b0, b1)?;
        self.place(ctx, o.id, b0, segs, crcs)?;
        o.size = o.size.max(end);
        Ok(())
    }

    fn is_mapped(&mut self, ctx: &TxnCtx, id: u64, lb: u64) -> Result<bool> {
        Ok(self
            .extents_in(ctx, id, lb, lb + 1)?
            .iter()
            .any(|(s, e)| *s <= lb && lb < s + e.blocks()))
    }

    fn zero_data(&mut self, ctx: &mut TxnCtx, o: &mut Onode, off: u64, len: u64) -> Result<()> {
        let end = off
            .checked_add(len)
            .ok_or(StoreError::Invalid("offset overflow"))?;
        if end > MAX_OBJECT_SIZE {
            return Err(StoreError::TooLarge("object size"));
        }
        let fb0 = off.div_ceil(B);
        let fb1 = end / B;
        if fb0 < fb1 {
            self.punch(ctx, o.id, fb0, fb1)?;
        }
        // Partial blocks at either edge: rewrite with zeros if mapped (a hole already reads as zeros).
        let mut edges = Vec::new();
        if !off.is_multiple_of(B) {
            edges.push((off, end.min((off / B + 1) * B)));
        }
        if end % B != 0 && (end / B) * B >= off && (off.is_multiple_of(B) || end / B != off / B) {
            edges.push(((end / B) * B, end));
        }
        let size = o.size;
        for (s, e) in edges {
            if s < e && s < size && self.is_mapped(ctx, o.id, s / B)? {
                let e = e.min(size);
                self.write_data(ctx, o, s, &Bytes::from(vec![0u8; (e - s) as usize]))?;
            }
        }
        o.size = size.max(end);
        Ok(())
    }

    fn truncate_data(&mut self, ctx: &mut TxnCtx, o: &mut Onode, size: u64) -> Result<()> {
        if size > MAX_OBJECT_SIZE {
            return Err(StoreError::TooLarge("object size"));
        }
        if size < o.size {
            self.punch(ctx, o.id, size.div_ceil(B), o.size.div_ceil(B))?;
            if !size.is_multiple_of(B) && self.is_mapped(ctx, o.id, size / B)? {
                // Keep the invariant that bytes past the end of the last block are zero.
                let e = o.size.min((size / B + 1) * B);
                self.write_data(ctx, o, size, &Bytes::from(vec![0u8; (e - size) as usize]))?;
            }
        }
        o.size = size;
        Ok(())
    }

    // ---------------------------------------------------------------- attr / omap values (inline or spilled)

    /// Store `val` under `key` (an attr, omap key or omap header): inline when it fits a tree entry, otherwise
    /// spilled to fresh data blocks written in parallel with the log record like object data (same crash rules).
    /// A spilled value it replaces is freed.
    fn put_value(&mut self, ctx: &mut TxnCtx, key: Vec<u8>, val: &Bytes) -> Result<()> {
        if val.len() > keys::MAX_VALUE_LEN {
            return Err(StoreError::TooLarge("attr/omap value larger than 256 KiB"));
        }
        if key.len() > MAX_KEY {
            return Err(StoreError::TooLarge(
                "attr name or omap key longer than 512 bytes",
            ));
        }
        // The tree's old value at `key` (if any) is released at commit; only this transaction's own is here.
        self.release_overlay_value(ctx, &key)?;
        if key.len() + 1 + val.len() <= MAX_ENTRY {
            return self.kv_put(ctx, key, Value::inline_encoded(val));
        }
        let nblocks = val.len().div_ceil(BLOCK);
        let runs = self.alloc.alloc(nblocks as u64)?;
        ctx.allocated.extend(runs.iter().copied());
        if runs.len() > keys::MAX_SPILL_RUNS {
            // Free space too fragmented to describe the value in one tree entry.
            return Err(StoreError::NoSpace);
        }
        let mut padded = BytesMut::zeroed(nblocks * BLOCK);
        padded[..val.len()].copy_from_slice(val);
        let padded = padded.freeze();
        let mut at = 0usize;
        let mut desc = Vec::with_capacity(runs.len());
        for (ps, pl) in runs {
            let len = pl as usize * BLOCK;
            ctx.runs.push((
                ps,
                Run {
                    blocks: pl,
                    segs: vec![padded.slice(at..at + len)],
                    crcs: Vec::new(),
                },
            ));
            at += len;
            desc.push((ps, pl as u16));
        }
        let enc = Value::spilled_encoded(val.len() as u32, crc(val), &desc);
        self.kv_put(ctx, key, enc)
    }

    /// Copy a stored value to another key (clone): inline values as they are, spilled ones into new blocks.
    fn copy_value(&mut self, ctx: &mut TxnCtx, key: Vec<u8>, raw: Vec<u8>) -> Result<()> {
        match Value::decode(&raw)? {
            Value::Inline(_) => self.kv_put(ctx, key, raw),
            Value::Spilled { .. } => {
                let v = self.load_value(ctx, &raw)?;
                self.put_value(ctx, key, &v)
            }
        }
    }

    fn release_value(&mut self, ctx: &mut TxnCtx, raw: &[u8]) -> Result<()> {
        // Spilled blocks are never shared (clone copies them), so they are freed outright.
        ctx.freed.extend(Value::decode(raw)?.runs());
        Ok(())
    }

    /// The block runs of the value stored at `key` (`None`: no value), read in place: an attr or omap write
    /// replacing an inline value (the common case) copies nothing out of the tree.
    fn value_runs_at(&mut self, ctx: &TxnCtx, key: &[u8]) -> Result<Option<Vec<(u64, u64)>>> {
        let runs = |raw: &[u8]| Value::decode(raw).map(|v| v.runs().collect::<Vec<_>>());
        match ctx.overlay.get(key) {
            Some(Some(v)) => Ok(Some(runs(v)?)),
            Some(None) => Ok(None),
            None => self
                .tree
                .get_with(&mut self.io, key, &mut |raw| runs(raw))?
                .transpose(),
        }
    }

    /// Release the runs of a value this transaction itself put at `key` (the overlay's); the tree's value is
    /// released at commit (`TxnCtx::tree_released`).
    fn release_overlay_value(&mut self, ctx: &mut TxnCtx, key: &[u8]) -> Result<()> {
        if let Some(Some(v)) = ctx.overlay.get(key) {
            // Spilled blocks are never shared (clone copies them), so they are freed outright.
            ctx.freed.extend(Value::decode(v)?.runs());
        }
        Ok(())
    }

    /// Release a value found by a scan (the overlay applied): if it came from the tree, note that its runs are
    /// released now, not at commit.
    fn release_scanned(&mut self, ctx: &mut TxnCtx, key: &[u8], raw: &[u8]) -> Result<()> {
        if !ctx.overlay.contains_key(key) {
            ctx.tree_released.insert(key.to_vec());
        }
        self.release_value(ctx, raw)
    }

    /// Delete the value at `key`; returns whether there was one (looked up: `RmAttr` answers ENODATA).
    fn del_value(&mut self, ctx: &mut TxnCtx, key: Vec<u8>) -> Result<bool> {
        let from_tree = !ctx.overlay.contains_key(&key);
        match self.value_runs_at(ctx, &key)? {
            Some(runs) => {
                ctx.freed.extend(runs);
                if from_tree {
                    ctx.tree_released.insert(key.clone());
                }
                self.kv_del(ctx, key);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Delete the value at `key` if there is one, without looking it up (the tree's value, if any, is released
    /// at commit; deleting an absent key changes nothing).
    fn del_value_blind(&mut self, ctx: &mut TxnCtx, key: Vec<u8>) -> Result<()> {
        self.release_overlay_value(ctx, &key)?;
        self.kv_del(ctx, key);
        Ok(())
    }

    /// The bytes of a stored value; a spilled value is read (from memory while its write is in flight) and its
    /// crc verified before anything is returned.
    fn load_value(&mut self, ctx: &TxnCtx, raw: &[u8]) -> Result<Bytes> {
        let (len, want, runs) = match Value::decode(raw)? {
            Value::Inline(v) => return Ok(Bytes::copy_from_slice(v)),
            Value::Spilled { len, crc, runs } => (len as usize, crc, runs),
        };
        let mut out = BytesMut::with_capacity(runs.iter().map(|r| r.1 as usize * BLOCK).sum());
        for (pb, n) in &runs {
            if !self.block_range_ok(*pb, *n as u64) {
                return Err(StoreError::Corrupt(format!(
                    "spilled value run {pb}+{n} outside the data area"
                )));
            }
            if self.staged_block(ctx, *pb).is_some() {
                for i in 0..*n as u64 {
                    let b = self
                        .staged_block(ctx, pb + i)
                        .ok_or_else(|| StoreError::Corrupt("spilled value partly in flight".into()))?;
                    out.extend_from_slice(&b);
                }
            } else {
                out.extend_from_slice(&self.io.sync_read(pb * B, *n as usize * BLOCK)?);
            }
        }
        out.truncate(len);
        if crc(&out) != want {
            self.stats.csum_errors += 1;
            return Err(StoreError::Checksum {
                offset: runs.first().map_or(0, |r| r.0 * B),
            });
        }
        Ok(out.freeze())
    }

    /// A value found in the tree as the caller gets it: inline values are ready, a spilled one still has to be read.
    fn finish_value(&mut self, v: StoredValue) -> Result<Bytes> {
        match v {
            StoredValue::Inline(b) => Ok(b),
            StoredValue::Spilled(raw) => self.load_value(&TxnCtx::default(), &raw),
        }
    }

    fn remove_object(&mut self, ctx: &mut TxnCtx, cid: &CollectionId, name: &[u8], o: &Onode) -> Result<()> {
        self.punch(ctx, o.id, 0, o.size.div_ceil(B))?;
        for p in [keys::attr_prefix(o.id), keys::omap_prefix(o.id)] {
            for (k, v) in self.kv_scan_prefix(ctx, &p)? {
                self.release_scanned(ctx, &k, &v)?;
                self.kv_del(ctx, k);
            }
        }
        self.del_value_blind(ctx, keys::omap_header(o.id))?;
        self.kv_del(ctx, keys::onode(cid, name));
        Ok(())
    }

    fn apply_op(&mut self, ctx: &mut TxnCtx, op: &Op) -> Result<()> {
        match op {
            Op::CreateCollection { cid, bits } => {
                keys::check_cid(cid)?;
                if self.kv_get(ctx, &keys::coll(cid))?.is_some() {
                    return Err(StoreError::Exists);
                }
                self.kv_put(ctx, keys::coll(cid), bits.to_le_bytes().to_vec())
            }
            Op::RemoveCollection { cid } => {
                self.need_coll(ctx, cid)?;
                let p = keys::onode_prefix(cid);
                let end = keys::prefix_end(&p);
                if !self.kv_scan(ctx, &p, end.as_deref(), 1)?.is_empty() {
                    return Err(StoreError::NotEmpty);
                }
                self.kv_del(ctx, keys::coll(cid));
                Ok(())
            }
            Op::SplitCollection { src, dst, bits, rem } => {
                self.need_coll(ctx, src)?;
                self.need_coll(ctx, dst)?;
                if *bits > 32 {
                    return Err(StoreError::Invalid("split bits"));
                }
                let mask = if *bits == 32 { u32::MAX } else { (1u32 << bits) - 1 };
                let p = keys::onode_prefix(src);
                let plen = p.len();
                for (k, v) in self.kv_scan_prefix(ctx, &p)? {
                    let o = Onode::decode(&v)?;
                    // Ceph's hobject_t::match(bits, rem): both sides masked.
                    if o.hash & mask == rem & mask && src != dst {
                        // Ceph never splits onto an existing name; refuse rather than orphan an object.
                        let nk = keys::onode(dst, &k[plen..]);
                        if self.kv_get(ctx, &nk)?.is_some() {
                            return Err(StoreError::Exists);
                        }
                        self.kv_del(ctx, k.clone());
                        self.kv_put(ctx, nk, v)?;
                    }
                }
                self.kv_put(ctx, keys::coll(src), bits.to_le_bytes().to_vec())?;
                self.kv_put(ctx, keys::coll(dst), bits.to_le_bytes().to_vec())
            }
            Op::Touch { cid, oid } => self.get_or_create(ctx, cid, oid).map(|_| ()),
            Op::Write {
                cid,
                oid,
                offset,
                data,
            } => {
                let before = self.get_or_create(ctx, cid, oid)?;
                let mut o = before;
                self.write_data(ctx, &mut o, *offset, data)?;
                if o == before {
                    // An overwrite inside the object leaves the onode as is: no tree update, no log bytes.
                    return Ok(());
                }
                self.put_onode(ctx, cid, &oid.name, &o)
            }
            Op::Zero {
                cid,
                oid,
                offset,
                len,
            } => {
                let mut o = self.get_or_create(ctx, cid, oid)?;
                self.zero_data(ctx, &mut o, *offset, *len)?;
                self.put_onode(ctx, cid, &oid.name, &o)
            }
            Op::Truncate { cid, oid, size } => {
                let mut o = self.need_onode(ctx, cid, oid)?;
                self.truncate_data(ctx, &mut o, *size)?;
                self.put_onode(ctx, cid, &oid.name, &o)
            }
            Op::Remove { cid, oid } => {
                let o = self.need_onode(ctx, cid, oid)?;
                self.remove_object(ctx, cid, &oid.name, &o)
            }
            Op::Clone { cid, src, dst } => {
                let so = self.need_onode(ctx, cid, src)?;
                keys::check_name(dst)?;
                if src.name == dst.name {
                    return Ok(());
                }
                if let Some(old) = self.get_onode(ctx, cid, &dst.name)? {
                    self.remove_object(ctx, cid, &dst.name, &old)?;
                }
                let mut d = self.new_onode(ctx, dst.hash)?;
                d.size = so.size;
                for (k, v) in self.kv_scan_prefix(ctx, &keys::extent_prefix(so.id))? {
                    let e = Extent::decode(&v)?;
                    self.incref(ctx, e.pblock, e.blocks())?;
                    let lb = keys::be_u64(
                        k.get(9..17)
                            .ok_or_else(|| StoreError::Corrupt("extent key".into()))?,
                    )?;
                    self.kv_put(ctx, keys::extent(d.id, lb), v)?;
                }
                for (k, v) in self.kv_scan_prefix(ctx, &keys::attr_prefix(so.id))? {
                    self.copy_value(ctx, keys::attr(d.id, &k[9..]), v)?;
                }
                for (k, v) in self.kv_scan_prefix(ctx, &keys::omap_prefix(so.id))? {
                    self.copy_value(ctx, keys::omap(d.id, &k[9..]), v)?;
                }
                if let Some(h) = self.kv_get(ctx, &keys::omap_header(so.id))? {
                    self.copy_value(ctx, keys::omap_header(d.id), h)?;
                }
                self.put_onode(ctx, cid, &dst.name, &d)
            }
            Op::CloneRange {
                cid,
                src,
                dst,
                src_offset,
                len,
                dst_offset,
            } => {
                let so = self.need_onode(ctx, cid, src)?;
                if src_offset.checked_add(*len).is_none_or(|e| e > so.size) {
                    return Err(StoreError::Invalid("clone_range beyond source size"));
                }
                let mut d = self.get_or_create(ctx, cid, dst)?;
                self.clone_range(ctx, &so, &mut d, *src_offset, *len, *dst_offset)?;
                self.put_onode(ctx, cid, &dst.name, &d)
            }
            Op::Rename {
                cid,
                oid,
                new_cid,
                new_oid,
            } => {
                let o = self.need_onode(ctx, cid, oid)?;
                self.need_coll(ctx, new_cid)?;
                keys::check_name(new_oid)?;
                if self.get_onode(ctx, new_cid, &new_oid.name)?.is_some() {
                    return Err(StoreError::Exists);
                }
                self.kv_del(ctx, keys::onode(cid, &oid.name));
                self.put_onode(
                    ctx,
                    new_cid,
                    &new_oid.name,
                    &Onode {
                        hash: new_oid.hash,
                        ..o
                    },
                )
            }
            Op::SetAttrs { cid, oid, attrs } => {
                let o = self.need_onode(ctx, cid, oid)?;
                for (n, v) in attrs {
                    self.put_value(ctx, keys::attr(o.id, n), v)?;
                }
                Ok(())
            }
            Op::RmAttr { cid, oid, name } => {
                let o = self.need_onode(ctx, cid, oid)?;
                if !self.del_value(ctx, keys::attr(o.id, name))? {
                    return Err(StoreError::NoData);
                }
                Ok(())
            }
            Op::RmAttrs { cid, oid } => {
                let o = self.need_onode(ctx, cid, oid)?;
                for (k, v) in self.kv_scan_prefix(ctx, &keys::attr_prefix(o.id))? {
                    self.release_scanned(ctx, &k, &v)?;
                    self.kv_del(ctx, k);
                }
                Ok(())
            }
            Op::OmapSetKeys { cid, oid, kvs } => {
                let o = self.need_onode(ctx, cid, oid)?;
                for (k, v) in kvs {
                    self.put_value(ctx, keys::omap(o.id, k), v)?;
                }
                Ok(())
            }
            Op::OmapRmKeys { cid, oid, keys: ks } => {
                let o = self.need_onode(ctx, cid, oid)?;
                for k in ks {
                    self.del_value_blind(ctx, keys::omap(o.id, k))?;
                }
                Ok(())
            }
            Op::OmapRmKeyRange {
                cid,
                oid,
                first,
                last,
            } => {
                let o = self.need_onode(ctx, cid, oid)?;
                let (s, e) = (keys::omap(o.id, first), keys::omap(o.id, last));
                for (k, v) in self.kv_scan(ctx, &s, Some(&e), usize::MAX)? {
                    self.release_scanned(ctx, &k, &v)?;
                    self.kv_del(ctx, k);
                }
                Ok(())
            }
            Op::OmapClear { cid, oid } => {
                let o = self.need_onode(ctx, cid, oid)?;
                for (k, v) in self.kv_scan_prefix(ctx, &keys::omap_prefix(o.id))? {
                    self.release_scanned(ctx, &k, &v)?;
                    self.kv_del(ctx, k);
                }
                self.del_value_blind(ctx, keys::omap_header(o.id))?;
                Ok(())
            }
            Op::OmapSetHeader { cid, oid, header } => {
                let o = self.need_onode(ctx, cid, oid)?;
                self.put_value(ctx, keys::omap_header(o.id), header)
            }
        }
    }

    fn clone_range(
        &mut self,
        ctx: &mut TxnCtx,
        so: &Onode,
        d: &mut Onode,
        soff: u64,
        len: u64,
        doff: u64,
    ) -> Result<()> {
        let dend = doff
            .checked_add(len)
            .ok_or(StoreError::Invalid("offset overflow"))?;
        if dend > MAX_OBJECT_SIZE {
            return Err(StoreError::TooLarge("object size"));
        }
        if len == 0 {
            return Ok(());
        }
        let shared = if soff.is_multiple_of(B) && doff.is_multiple_of(B) {
            len / B * B
        } else {
            0
        };
        // Read the copied (unshared) part first: source and target may be the same object and overlap.
        let tail = if shared < len {
            Some(self.read_range_sync(ctx, so, soff + shared, len - shared)?)
        } else {
            None
        };
        if shared > 0 {
            // Share whole blocks: reference the same physical blocks, count the extra references.
            let n = len / B;
            let (sb0, db0) = (soff / B, doff / B);
            let mut pieces = Vec::new();
            for (lb, e) in self.extents_in(ctx, so.id, sb0, sb0 + n)? {
                let s = lb.max(sb0);
                let t = (lb + e.blocks()).min(sb0 + n);
                if s >= t {
                    continue;
                }
                let i = (s - lb) as usize;
                let piece = Extent {
                    pblock: e.pblock + i as u64,
                    crcs: e.crcs[i..i + (t - s) as usize].to_vec(),
                };
                self.incref(ctx, piece.pblock, piece.blocks())?;
                pieces.push((db0 + (s - sb0), piece));
            }
            self.punch(ctx, d.id, db0, db0 + n)?;
            for (lb, e) in pieces {
                self.kv_put(ctx, keys::extent(d.id, lb), e.encode())?;
            }
            d.size = d.size.max(doff + n * B);
        }
        if let Some(data) = tail {
            self.write_data(ctx, d, doff + shared, &data)?;
        }
        d.size = d.size.max(dend);
        Ok(())
    }

    // ---------------------------------------------------------------- reads

    pub fn collection_exists(&mut self, cid: &CollectionId) -> Result<bool> {
        match self.need_coll(&TxnCtx::default(), cid) {
            Ok(_) => Ok(true),
            Err(StoreError::NotFound) => Ok(false),
            Err(e) => Err(e),
        }
    }

    pub fn collection_bits(&mut self, cid: &CollectionId) -> Result<u32> {
        self.need_coll(&TxnCtx::default(), cid)
    }

    pub fn list_collections(&mut self) -> Result<Vec<CollectionId>> {
        let ctx = TxnCtx::default();
        Ok(self
            .kv_scan_prefix(&ctx, &[keys::NS_COLL])?
            .into_iter()
            .map(|(k, _)| CollectionId(Bytes::copy_from_slice(&k[1..])))
            .collect())
    }

    /// Objects of `cid` with `start <= name < end`, in order, at most `limit`.
    pub fn list_objects(
        &mut self,
        cid: &CollectionId,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<ObjectKey>> {
        let ctx = TxnCtx::default();
        self.need_coll(&ctx, cid)?;
        let p = keys::onode_prefix(cid);
        let s = keys::onode(cid, start);
        let e = match end {
            Some(e) => Some(keys::onode(cid, e)),
            None => keys::prefix_end(&p),
        };
        let mut out = Vec::new();
        for (k, v) in self.kv_scan(&ctx, &s, e.as_deref(), limit)? {
            out.push(ObjectKey {
                hash: Onode::decode(&v)?.hash,
                name: Bytes::copy_from_slice(&k[p.len()..]),
            });
        }
        Ok(out)
    }

    pub fn stat(&mut self, cid: &CollectionId, oid: &ObjectKey) -> Result<Stat> {
        let o = self.need_onode(&TxnCtx::default(), cid, oid)?;
        Ok(Stat {
            size: o.size,
            hash: o.hash,
        })
    }

    pub fn exists(&mut self, cid: &CollectionId, oid: &ObjectKey) -> Result<bool> {
        match self.need_onode(&TxnCtx::default(), cid, oid) {
            Ok(_) => Ok(true),
            Err(StoreError::NotFound) => Ok(false),
            Err(e) => Err(e),
        }
    }

    pub fn getattr(&mut self, cid: &CollectionId, oid: &ObjectKey, name: &[u8]) -> Result<Bytes> {
        let o = self.need_onode(&TxnCtx::default(), cid, oid)?;
        match self
            .tree
            .get_with(&mut self.io, &keys::attr(o.id, name), &mut stored_value)?
        {
            Some(v) => self.finish_value(v?),
            None => Err(StoreError::NoData),
        }
    }

    pub fn getattrs(&mut self, cid: &CollectionId, oid: &ObjectKey) -> Result<Vec<(Bytes, Bytes)>> {
        let ctx = TxnCtx::default();
        let o = self.need_onode(&ctx, cid, oid)?;
        let mut out = Vec::new();
        for (k, v) in self.kv_scan_prefix(&ctx, &keys::attr_prefix(o.id))? {
            out.push((Bytes::copy_from_slice(&k[9..]), self.load_value(&ctx, &v)?));
        }
        Ok(out)
    }

    pub fn omap_get_header(&mut self, cid: &CollectionId, oid: &ObjectKey) -> Result<Bytes> {
        let o = self.need_onode(&TxnCtx::default(), cid, oid)?;
        match self
            .tree
            .get_with(&mut self.io, &keys::omap_header(o.id), &mut stored_value)?
        {
            Some(v) => self.finish_value(v?),
            None => Ok(Bytes::new()),
        }
    }

    pub fn omap_get_values(
        &mut self,
        cid: &CollectionId,
        oid: &ObjectKey,
        want: &[Bytes],
    ) -> Result<Vec<(Bytes, Bytes)>> {
        let o = self.need_onode(&TxnCtx::default(), cid, oid)?;
        let mut out = Vec::with_capacity(want.len());
        let mut key = keys::omap_prefix(o.id);
        let plen = key.len();
        for k in want {
            key.truncate(plen);
            key.extend_from_slice(k);
            if let Some(v) = self.tree.get_with(&mut self.io, &key, &mut stored_value)? {
                out.push((k.clone(), self.finish_value(v?)?));
            }
        }
        Ok(out)
    }

    /// Omap entries with key >= `start`, in order, at most `limit`.
    pub fn omap_iterate(
        &mut self,
        cid: &CollectionId,
        oid: &ObjectKey,
        start: &[u8],
        limit: usize,
    ) -> Result<Vec<(Bytes, Bytes)>> {
        let o = self.need_onode(&TxnCtx::default(), cid, oid)?;
        let end = keys::prefix_end(&keys::omap_prefix(o.id));
        let from = keys::omap(o.id, start);
        // Entries are copied once, from the tree node into their own `Bytes` (a scan into owned vectors and a
        // second copy per key and value cost 4 allocations per entry).
        let mut got: Vec<(Bytes, StoredValue)> = Vec::with_capacity(limit.min(256));
        let mut bad = None;
        if limit > 0 {
            self.tree
                .visit(&mut self.io, &from, end.as_deref(), &mut |k, v| {
                    let name = Bytes::copy_from_slice(k.get(9..).unwrap_or_default());
                    match stored_value(v) {
                        Ok(v) => got.push((name, v)),
                        Err(e) => {
                            bad = Some(e);
                            return false;
                        }
                    }
                    got.len() < limit
                })?;
        }
        if let Some(e) = bad {
            return Err(e);
        }
        let mut out = Vec::with_capacity(got.len());
        for (k, v) in got {
            out.push((k, self.finish_value(v)?));
        }
        Ok(out)
    }

    /// Mapped (allocated) ranges of `[off, off + len)` (len 0: to the end), clipped to the object size.
    pub fn fiemap(
        &mut self,
        cid: &CollectionId,
        oid: &ObjectKey,
        off: u64,
        len: u64,
    ) -> Result<Vec<(u64, u64)>> {
        let ctx = TxnCtx::default();
        let o = self.need_onode(&ctx, cid, oid)?;
        let end = if len == 0 {
            o.size
        } else {
            off.saturating_add(len).min(o.size)
        };
        let mut out: Vec<(u64, u64)> = Vec::new();
        if off >= end {
            return Ok(out);
        }
        for (lb, e) in self.extents_in(&ctx, o.id, off / B, end.div_ceil(B))? {
            let s = (lb * B).max(off);
            let t = ((lb + e.blocks()) * B).min(end);
            if s >= t {
                continue;
            }
            match out.last_mut() {
                Some((ps, pl)) if *ps + *pl == s => *pl += t - s,
                _ => out.push((s, t - s)),
            }
        }
        Ok(out)
    }

    /// Sparse read: the data of each mapped range.
    pub fn sparse_read(
        &mut self,
        cid: &CollectionId,
        oid: &ObjectKey,
        off: u64,
        len: u64,
    ) -> Result<Vec<(u64, Bytes)>> {
        let map = self.fiemap(cid, oid, off, len)?;
        let mut out = Vec::with_capacity(map.len());
        for (o, l) in map {
            out.push((o, self.read(cid, oid, o, l)?));
        }
        Ok(out)
    }

    /// Start reading `[off, off + len)` (len 0: to the end; clipped to the size). The result arrives as
    /// `Event::ReadDone(id, ..)`. A checksum mismatch yields `Checksum` (EIO), never the bad bytes.
    pub fn queue_read(&mut self, cid: &CollectionId, oid: &ObjectKey, off: u64, len: u64) -> Result<u64> {
        self.check_alive()?;
        let o = self.need_onode(&TxnCtx::default(), cid, oid)?;
        let (id, now) = self.start_read(&o, off, len)?;
        if let Some(r) = now {
            self.events.push(Event::ReadDone(id, r));
        }
        Ok(id)
    }

    /// Physical block and crc of each logical block in `[b0, b1)` of object `id` (None: a hole), as committed:
    /// from the extent cache, whose missing chunks are filled by one tree visit each (src/extcache.rs).
    fn block_map(&mut self, id: u64, b0: u64, b1: u64) -> Result<Vec<Option<(u64, u32)>>> {
        let mut out = Vec::new();
        self.block_map_into(id, b0, b1, &mut out)?;
        Ok(out)
    }

    /// [`Self::block_map`] into `out` (cleared first), so a caller that keeps `out` allocates nothing.
    fn block_map_into(&mut self, id: u64, b0: u64, b1: u64, out: &mut Vec<Option<(u64, u32)>>) -> Result<()> {
        /// Enter the blocks of `[lo, hi)` that extent `e` (starting at `lb`) maps into `out` (indexed from `b0`).
        fn put(out: &mut [Option<(u64, u32)>], b0: u64, (lo, hi): (u64, u64), lb: u64, e: &Extent) {
            for b in lb.max(lo)..(lb + e.blocks()).min(hi) {
                let i = (b - lb) as usize;
                if let (Some(&c), Some(slot)) = (e.crcs.get(i), out.get_mut((b - b0) as usize)) {
                    *slot = Some((e.pblock + i as u64, c));
                }
            }
        }
        out.clear();
        out.resize((b1 - b0) as usize, None);
        if !self.extents.enabled() {
            self.stats.extent_cache_misses += 1;
            for (lb, e) in self.extents_in(&TxnCtx::default(), id, b0, b1)? {
                put(out, b0, (b0, b1), lb, &e);
            }
            return Ok(());
        }
        let mut hit = true;
        let mut walk = false;
        for c in b0 / CHUNK_BLOCKS..=(b1 - 1) / CHUNK_BLOCKS {
            let span = (b0.max(c * CHUNK_BLOCKS), b1.min((c + 1) * CHUNK_BLOCKS));
            let from = span.0.saturating_sub(MAX_EXTENT_BLOCKS - 1);
            match self.extents.get(id, c) {
                Some(Chunk::Extents(m)) => {
                    for (lb, e) in m.range(from..span.1) {
                        put(out, b0, span, *lb, e);
                    }
                    continue;
                }
                Some(Chunk::Fragmented) => {
                    walk = true;
                    continue;
                }
                None => {}
            }
            hit = false;
            match self.load_chunk(id, c)? {
                Chunk::Extents(m) => {
                    for (lb, e) in m.range(from..span.1) {
                        put(out, b0, span, *lb, e);
                    }
                    self.extents.insert(id, c, Chunk::Extents(m));
                }
                Chunk::Fragmented => {
                    walk = true;
                    self.extents.insert(id, c, Chunk::Fragmented);
                }
            }
        }
        if walk {
            // some chunk is fragmented: the whole range from the tree, as without the cache
            hit = false;
            out.iter_mut().for_each(|x| *x = None);
            for (lb, e) in self.extents_in(&TxnCtx::default(), id, b0, b1)? {
                put(out, b0, (b0, b1), lb, &e);
            }
        }
        if hit {
            self.stats.extent_cache_hits += 1;
        } else {
            self.stats.extent_cache_misses += 1;
        }
        Ok(())
    }

    /// The committed extents of object `id` that chunk `c` of the extent cache holds, or `Fragmented` once there
    /// are more than `MAX_CHUNK_EXTENTS` (the visit stops there; src/extcache.rs).
    fn load_chunk(&mut self, id: u64, c: u64) -> Result<Chunk> {
        let (s, e) = chunk_span(c);
        let (first, end) = (keys::extent(id, s), keys::extent(id, e));
        let mut m = BTreeMap::new();
        let mut err = None;
        self.tree.visit(
            &mut self.io,
            &first,
            Some(&end),
            &mut |k, v| match extent_entry(k, v) {
                Ok((lb, x)) => {
                    m.insert(lb, x);
                    m.len() <= MAX_CHUNK_EXTENTS
                }
                Err(e) => {
                    err = Some(e);
                    false
                }
            },
        )?;
        match err {
            Some(e) => Err(e),
            None if m.len() > MAX_CHUNK_EXTENTS => Ok(Chunk::Fragmented),
            None => Ok(Chunk::Extents(m)),
        }
    }

    /// Tag run `r` (`(index, blocks)`) of read `id` and queue its device read.
    fn submit_run(&mut self, id: u64, runs: &mut [(Tag, u64, Option<Bytes>)], (r, n): (usize, u64)) {
        let t = self.io.tag();
        runs[r].0 = t;
        self.tags.insert(t, Purpose::Read { id });
        self.io.dev.submit_read(t, runs[r].1 * B, (n * B) as usize);
    }

    /// Start reading `[off, off + len)` of onode `o` (len 0: to the end). Returns the read id and, when no device
    /// IO was needed (holes, data of writes still in flight, an empty range), the result at once; otherwise the
    /// result comes to `read_finished` when the last device read completes.
    fn start_read(&mut self, o: &Onode, off: u64, len: u64) -> Result<(u64, Option<Result<Bytes>>)> {
        let ctx = TxnCtx::default();
        let end = if len == 0 {
            o.size
        } else {
            off.saturating_add(len).min(o.size)
        };
        self.next_read += 1;
        let id = self.next_read;
        if off >= end {
            return Ok((id, Some(Ok(Bytes::new()))));
        }
        let (b0, b1) = (off / B, end.div_ceil(B));
        let mut blocks: Vec<Src> = (b0..b1).map(|_| Src::Hole).collect();
        let mut runs: Vec<(Tag, u64, Option<Bytes>)> = Vec::new();
        let mut map = std::mem::take(&mut self.map_scratch);
        if let Err(e) = self.block_map_into(o.id, b0, b1, &mut map) {
            self.map_scratch = map;
            return Err(e);
        }
        // The run being built, (index, blocks): it is submitted once the next block does not extend it.
        let mut open: Option<(usize, u64)> = None;
        for (slot, m) in map.iter().enumerate() {
            let Some(&(pb, crc)) = m.as_ref() else {
                if let Some(r) = open.take() {
                    self.submit_run(id, &mut runs, r);
                }
                continue;
            };
            if let Some(data) = self.staged_block(&ctx, pb) {
                blocks[slot] = Src::Mem(data);
                if let Some(r) = open.take() {
                    self.submit_run(id, &mut runs, r);
                }
                continue;
            }
            match open {
                Some((r, n)) if runs[r].1 + n == pb && n < MAX_READ_BLOCKS => {
                    blocks[slot] = Src::Dev {
                        run: r,
                        idx: n as usize,
                        crc,
                    };
                    open = Some((r, n + 1));
                }
                _ => {
                    if let Some(r) = open.take() {
                        self.submit_run(id, &mut runs, r);
                    }
                    runs.push((0, pb, None));
                    blocks[slot] = Src::Dev {
                        run: runs.len() - 1,
                        idx: 0,
                        crc,
                    };
                    open = Some((runs.len() - 1, 1));
                }
            }
        }
        if let Some(r) = open {
            self.submit_run(id, &mut runs, r);
        }
        // Kept for the next read unless a large one grew it (at most a 4 MiB read's map stays held).
        if map.capacity() <= MAX_DEFRAG_BLOCKS as usize {
            self.map_scratch = map;
        }
        let st = ReadState {
            onode: o.id,
            b0,
            off_in_first: (off - b0 * B) as usize,
            len: (end - off) as usize,
            outstanding: runs.len(),
            blocks,
            runs,
            error: None,
        };
        if st.outstanding == 0 {
            Ok((id, Some(self.finish_read(st))))
        } else {
            self.reads.insert(id, st);
            Ok((id, None))
        }
    }

    fn read_complete(&mut self, id: u64, tag: Tag, result: std::result::Result<Option<Bytes>, String>) {
        let Some(st) = self.reads.get_mut(&id) else { return };
        match result {
            Ok(Some(b)) => {
                if let Some(r) = st.runs.iter_mut().find(|r| r.0 == tag) {
                    r.2 = Some(b);
                }
            }
            Ok(None) => st.error = Some(StoreError::Io("read returned no data".into())),
            Err(e) => st.error = Some(StoreError::Io(e)),
        }
        st.outstanding -= 1;
        if st.outstanding == 0
            && let Some(st) = self.reads.remove(&id)
        {
            let r = self.finish_read(st);
            self.read_finished(id, r);
        }
    }

    /// A read's result: to its prefetch if it fills one, else out as `Event::ReadDone`.
    fn read_finished(&mut self, id: u64, r: Result<Bytes>) {
        let Some(token) = self.prefetch_reads.remove(&id) else {
            self.events.push(Event::ReadDone(id, r));
            return;
        };
        // Released or evicted meanwhile: nothing waits for it any more.
        let Some(p) = self.prefetches.get_mut(&token) else {
            return;
        };
        if !p.stale
            && let Ok(b) = r
            && let Some(rg) = p.ranges.iter_mut().find(|rg| rg.read == id)
        {
            self.prefetch_bytes += b.len();
            rg.data = Some(b);
        }
        p.outstanding = p.outstanding.saturating_sub(1);
        if p.outstanding == 0 {
            let cid = p.cid.clone();
            self.prefetch_done.push((token, cid));
            self.events.push(Event::Prefetched(token));
            self.bound_prefetches(token);
        }
    }

    fn finish_read(&mut self, st: ReadState) -> Result<Bytes> {
        if let Some(e) = st.error {
            return Err(e);
        }
        let r = self.verified_read(st);
        if let Ok((st, _)) = &r
            && self.cfg.defrag_extra_reads > 0
        {
            self.note_scattered(st);
        }
        r.map(|(_, b)| b)
    }

    /// Queue a read whose every block came from the device, verified, for rewriting as one run when it took
    /// [`StoreConfig::defrag_extra_reads`] device reads more than a contiguous range would have
    /// ([`StoreConfig::defrag_small_extra_reads`] for small ranges).
    fn note_scattered(&mut self, st: &ReadState) {
        let n = st.blocks.len() as u64;
        let needed = n.div_ceil(MAX_READ_BLOCKS) as usize;
        let extra = if n <= self.cfg.defrag_eager_blocks {
            self.cfg.defrag_small_extra_reads.max(1)
        } else {
            self.cfg.defrag_extra_reads
        };
        if n > MAX_DEFRAG_BLOCKS || st.runs.len() < needed + extra as usize {
            return;
        }
        // Holes stay holes and blocks still being written are not scattered: only a range read whole.
        if !st.blocks.iter().all(|s| matches!(s, Src::Dev { .. })) {
            return;
        }
        // Read again (another op, or a prefetch and its op) before the rewrite: once is enough.
        let end = st.b0 + n;
        if self
            .defrag
            .iter()
            .any(|c| c.onode == st.onode && c.b0 < end && st.b0 < c.b0 + c.map.len() as u64)
        {
            return;
        }
        if n > self.cfg.defrag_eager_blocks && !self.defrag_read_again(st.onode, st.b0) {
            return;
        }
        let mut map = Vec::with_capacity(st.blocks.len());
        for s in &st.blocks {
            if let Src::Dev { run, idx, crc } = s {
                map.push((st.runs[*run].1 + *idx as u64, *crc));
            }
        }
        let Some(segs) = st
            .runs
            .iter()
            .map(|r| r.2.clone())
            .collect::<Option<Vec<Bytes>>>()
        else {
            return;
        };
        let bytes = map.len() * BLOCK;
        if segs.iter().map(|s| s.len()).sum::<usize>() != bytes {
            return;
        }
        if self.defrag_bytes + bytes > MAX_DEFRAG_QUEUED_BYTES {
            self.stats.defrag_dropped += 1;
            return;
        }
        self.defrag_bytes += bytes;
        self.defrag.push_back(DefragCandidate {
            onode: st.onode,
            b0: st.b0,
            map,
            segs,
            reads: st.runs.len(),
        });
    }

    /// Count a scattered read of the range starting at block `b0` of `onode`: whether it is the
    /// [`StoreConfig::defrag_after_reads`]th, so the range is worth rewriting (it is then forgotten). Over the
    /// last [`DEFRAG_SEEN_MAX`] ranges; a range forgotten early only waits for more reads, and a stale count (the
    /// object changed or went) only lets one rewrite happen sooner, which `defrag_still_due` still checks.
    fn defrag_read_again(&mut self, onode: u64, b0: u64) -> bool {
        let after = self.cfg.defrag_after_reads.max(1);
        if after == 1 {
            return true;
        }
        let key = (onode, b0);
        if let Some(c) = self.defrag_seen.get_mut(&key) {
            *c += 1;
            if *c >= after {
                self.defrag_seen.remove(&key);
                return true;
            }
            self.stats.defrag_deferred += 1;
            return false;
        }
        // The order may still hold keys already admitted (removed from the map only): popping one is harmless.
        while self.defrag_seen_order.len() >= DEFRAG_SEEN_MAX {
            if let Some(old) = self.defrag_seen_order.pop_front() {
                self.defrag_seen.remove(&old);
            }
        }
        self.defrag_seen.insert(key, 1);
        self.defrag_seen_order.push_back(key);
        self.stats.defrag_deferred += 1;
        false
    }

    /// Rewrite the oldest queued scattered range as one fresh run, in a transaction of its own, if the object
    /// still maps the blocks that were read (see [`StoreConfig::defrag_extra_reads`]). Its `Durable` event is one
    /// the caller never asked for (callers ignore those).
    fn defrag_one(&mut self) -> Result<()> {
        let Some(c) = self.defrag.pop_front() else {
            return Ok(());
        };
        let n = c.map.len() as u64;
        self.defrag_bytes -= c.map.len() * BLOCK;
        if !self.defrag_still_due(&c)? {
            self.stats.defrag_skipped += 1;
            return Ok(());
        }
        let mut ctx = TxnCtx {
            same_content: true,
            ..TxnCtx::default()
        };
        let crcs = c.map.iter().map(|m| m.1).collect();
        let r = self
            .punch(&mut ctx, c.onode, c.b0, c.b0 + n)
            .and_then(|()| self.place(&mut ctx, c.onode, c.b0, c.segs, crcs));
        let keep = match r {
            // Worth it only if the allocator gave fewer pieces than the read took.
            Ok(()) => ctx.runs.len() < c.reads && self.record_fits(&ctx),
            Err(StoreError::NoSpace) => false,
            Err(e) => {
                self.discard(ctx);
                return Err(e);
            }
        };
        if !keep {
            self.discard(ctx);
            self.stats.defrag_skipped += 1;
            return Ok(());
        }
        self.stats.defrag_txns += 1;
        self.stats.defrag_blocks += n;
        self.commit_ctx(ctx)?;
        Ok(())
    }

    /// Whether a queued rewrite should still go ahead: the object maps exactly the blocks read, none of them
    /// shared with a clone (a rewrite would unshare them), and a tenth of the data space stays free (the old
    /// blocks are freed only at the next checkpoint).
    fn defrag_still_due(&mut self, c: &DefragCandidate) -> Result<bool> {
        let n = c.map.len() as u64;
        if self.alloc.free_blocks() < n + self.alloc.total_blocks() / 10 {
            return Ok(false);
        }
        let now = self.block_map(c.onode, c.b0, c.b0 + n)?;
        if now.iter().zip(&c.map).any(|(a, b)| *a != Some(*b)) {
            return Ok(false);
        }
        if self.refs_possible {
            let ctx = TxnCtx::default();
            let mut i = 0;
            while i < c.map.len() {
                let mut j = i + 1;
                while j < c.map.len() && c.map[j].0 == c.map[j - 1].0 + 1 {
                    j += 1;
                }
                if !self.refs_in(&ctx, c.map[i].0, (j - i) as u64)?.is_empty() {
                    return Ok(false);
                }
                i = j;
            }
        }
        Ok(true)
    }

    /// Give back what a transaction that will not commit allocated.
    fn discard(&mut self, ctx: TxnCtx) {
        for (s, l) in ctx.allocated {
            self.alloc.free(s, l);
        }
    }

    /// Check every block read from the media, then hand the data out: as a slice of the one device read when
    /// that covers the request, else assembled. The read state comes back for defragment on read.
    fn verified_read(&mut self, st: ReadState) -> Result<(ReadState, Bytes)> {
        // Verify every block read from the media before any byte is handed out. The data just came from the
        // device, so this pass is the first to pull it into the cache and is bound by memory, not by the crc
        // instruction: a run of three or more page-aligned blocks is checked three pages at a time as interleaved
        // chains (`ceph_crc::blocks::crc_by_pages`), which keeps more cache misses in flight than one block after
        // the other.
        // Runs too short for the interleaved chains are checked block by block: start all their misses first.
        for (_, _, d) in &st.runs {
            if let Some(d) = d.as_ref().filter(|d| d.len() < 3 * BLOCK) {
                ceph_crc::blocks::prefetch(d);
            }
        }
        let by_pages = |d: &&Bytes| {
            d.len() >= 3 * BLOCK
                && d.len().is_multiple_of(BLOCK)
                && (d.as_ptr() as usize).is_multiple_of(BLOCK)
        };
        // No list at all when every run is short (a 4K read): the blocks are then checked one by one below.
        let run_crcs: Vec<Option<Vec<u32>>> = if st
            .runs
            .iter()
            .any(|(_, _, d)| d.as_ref().is_some_and(|d| by_pages(&d)))
        {
            st.runs
                .iter()
                .map(|(_, _, d)| {
                    d.as_ref()
                        .filter(by_pages)
                        .map(|d| ceph_crc::blocks::crc_by_pages(d).1)
                })
                .collect()
        } else {
            Vec::new()
        };
        for s in &st.blocks {
            if let Src::Dev { run, idx, crc: want } = s {
                let (_, pb, data) = &st.runs[*run];
                let data = data
                    .as_ref()
                    .ok_or_else(|| StoreError::Io("missing read data".into()))?;
                let blk = data
                    .get(idx * BLOCK..(idx + 1) * BLOCK)
                    .ok_or_else(|| StoreError::Io("short read".into()))?;
                let got = match run_crcs
                    .get(*run)
                    .and_then(|c| c.as_ref())
                    .and_then(|c| c.get(*idx))
                {
                    Some(&c) => c,
                    None => crc(blk),
                };
                if got != *want {
                    self.stats.csum_errors += 1;
                    return Err(StoreError::Checksum {
                        offset: (pb + *idx as u64) * B,
                    });
                }
            }
        }
        // Zero-copy when one device read covers the whole request.
        if st.runs.len() == 1
            && st.blocks.iter().all(|s| matches!(s, Src::Dev { .. }))
            && let Some(d) = &st.runs[0].2
        {
            self.stats.reads_zero_copy += 1;
            let d = attach_verified(d, &st.blocks);
            let out = d.slice(st.off_in_first..st.off_in_first + st.len);
            return Ok((st, out));
        }
        self.stats.reads_assembled += 1;
        let out = self.asm_bufs.take(st.len, |out| {
            for (i, s) in st.blocks.iter().enumerate() {
                let blk_start = i * BLOCK;
                let from = blk_start.max(st.off_in_first);
                let to = (blk_start + BLOCK).min(st.off_in_first + st.len);
                if from >= to {
                    continue;
                }
                let dst = &mut out[from - st.off_in_first..to - st.off_in_first];
                let src: Option<&[u8]> = match s {
                    Src::Hole => None,
                    Src::Mem(b) => Some(b),
                    Src::Dev { run, idx, .. } => st.runs[*run]
                        .2
                        .as_ref()
                        .map(|d| &d[idx * BLOCK..(idx + 1) * BLOCK]),
                };
                // The buffer may be recycled: a hole (or a block with no data) is written as zeroes.
                match src {
                    Some(src) => dst.copy_from_slice(&src[from - blk_start..to - blk_start]),
                    None => dst.fill(0),
                }
            }
        });
        self.stats.assembled_buf_misses = self.asm_bufs.misses;
        let out = attach_assembled(out, &st);
        Ok((st, out))
    }

    /// Blocking read. Served from memory without device IO when a completed prefetch covers the range.
    pub fn read(&mut self, cid: &CollectionId, oid: &ObjectKey, off: u64, len: u64) -> Result<Bytes> {
        self.check_alive()?;
        let o = self.need_onode(&TxnCtx::default(), cid, oid)?;
        if !self.prefetches.is_empty()
            && let Some(b) = self.prefetched(&o, off, len)
        {
            self.stats.reads_prefetched += 1;
            return Ok(b);
        }
        let (id, now) = self.start_read(&o, off, len)?;
        if let Some(r) = now {
            return r;
        }
        loop {
            if let Some(i) = self
                .events
                .iter()
                .position(|e| matches!(e, Event::ReadDone(r, _) if *r == id))
                && let Event::ReadDone(_, r) = self.events.remove(i)
            {
                return r;
            }
            self.pump(true)?;
        }
    }

    // ---------------------------------------------------------------- prefetch

    /// Start the device reads of `ranges` (`(off, len)`, len 0: to the object's end) of one object, ahead of an
    /// op that will `read` them: the caller need not block its core on the device. Metadata lookups stay
    /// synchronous (they normally hit the node cache).
    ///
    /// `Ok(Some(token))`: `Event::Prefetched(token)` follows from `poll`/`wait` (and `take_prefetched` lists it);
    /// from then on a `read` of the object inside one of the ranges is served from memory (any number of times)
    /// until `release_prefetch(token)`. `Ok(None)`: nothing to wait for (no device IO needed, nothing to read, or
    /// too much to hold): read synchronously at once. A change to the object's data or size (write, zero,
    /// truncate, clone onto it, remove) invalidates the prefetch; its event still comes, and reads then go to the
    /// device as usual. Errors are the metadata lookup's (ENOENT for a missing object).
    pub fn prefetch(
        &mut self,
        cid: &CollectionId,
        oid: &ObjectKey,
        ranges: &[(u64, u64)],
    ) -> Result<Option<u64>> {
        self.check_alive()?;
        let o = self.need_onode(&TxnCtx::default(), cid, oid)?;
        let mut want = Vec::with_capacity(ranges.len());
        let mut total = 0u64;
        for &(off, len) in ranges {
            let end = if len == 0 {
                o.size
            } else {
                off.saturating_add(len).min(o.size)
            };
            if off < end {
                total += end - off;
                want.push((off, len));
            }
        }
        if want.is_empty() || total > MAX_PREFETCH_BYTES {
            return Ok(None);
        }
        if self.prefetches.len() >= MAX_PREFETCHES {
            // The oldest completed one goes (its owner did not release it); if all are in flight, read later.
            let Some(old) = self
                .prefetches
                .iter()
                .find(|(_, p)| p.outstanding == 0)
                .map(|(t, _)| *t)
            else {
                return Ok(None);
            };
            self.drop_prefetch(old);
            self.stats.prefetches_dropped += 1;
        }
        self.next_read += 1;
        let token = self.next_read;
        let mut p = Prefetch {
            cid: cid.clone(),
            onode: o.id,
            size: o.size,
            ranges: Vec::with_capacity(want.len()),
            outstanding: 0,
            stale: false,
        };
        for (off, len) in want {
            let (id, now) = self.start_read(&o, off, len)?;
            if now.is_none() {
                p.outstanding += 1;
                self.prefetch_reads.insert(id, token);
            }
            // Served without IO (holes, in-flight writes): not worth holding, a `read` computes it again cheaply.
            p.ranges.push(PfRange {
                off,
                read: id,
                data: None,
            });
        }
        if p.outstanding == 0 {
            return Ok(None);
        }
        // Ranges that needed no IO are not served from the prefetch (data None); keep only the others.
        p.ranges.retain(|r| self.prefetch_reads.contains_key(&r.read));
        self.stats.prefetches += 1;
        self.prefetches.insert(token, p);
        Ok(Some(token))
    }

    /// Tokens of prefetches that completed since the last call, with the collection each was for (so a caller
    /// can find the owner without a table of its own). Each token also came as `Event::Prefetched`.
    pub fn take_prefetched(&mut self) -> Vec<(u64, CollectionId)> {
        std::mem::take(&mut self.prefetch_done)
    }

    /// Like [`Store::take_prefetched`], appending to `out`: a caller that keeps `out` between calls, and the
    /// store's own list, allocate nothing per prefetch.
    pub fn drain_prefetched(&mut self, out: &mut Vec<(u64, CollectionId)>) {
        out.append(&mut self.prefetch_done);
    }

    /// Whether completed prefetches wait to be taken (`take_prefetched`); cheap.
    pub fn has_prefetched(&self) -> bool {
        !self.prefetch_done.is_empty()
    }

    /// Drop a prefetch (its op ran, or will not run): its memory is freed; reads still in flight for it complete
    /// into nothing. Unknown tokens are ignored.
    pub fn release_prefetch(&mut self, token: u64) {
        self.drop_prefetch(token);
    }

    /// Reads (`queue_read`, `prefetch`) waiting for device completions: a driver that shares one device among
    /// several stores must keep polling this store while it is not zero.
    pub fn reads_in_flight(&self) -> usize {
        self.reads.len()
    }

    /// Prefetches started and not released (in flight or completed).
    pub fn prefetches_held(&self) -> usize {
        self.prefetches.len()
    }

    fn drop_prefetch(&mut self, token: u64) {
        if let Some(p) = self.prefetches.remove(&token) {
            self.prefetch_bytes -= p.bytes();
        }
    }

    /// Keep the completed prefetch data under its bound: the oldest go first (never `keep`, just completed).
    fn bound_prefetches(&mut self, keep: u64) {
        while self.prefetch_bytes > MAX_PREFETCH_HELD_BYTES {
            let Some(old) = self
                .prefetches
                .iter()
                .find(|(t, p)| **t != keep && p.outstanding == 0 && p.bytes() > 0)
                .map(|(t, _)| *t)
            else {
                return;
            };
            self.drop_prefetch(old);
            self.stats.prefetches_dropped += 1;
        }
    }

    /// A transaction changes these metadata entries: prefetches of objects whose extents or onode change are stale.
    fn invalidate_prefetches(&mut self, overlay: &BTreeMap<Vec<u8>, Option<Vec<u8>>>) {
        let mut ids: Vec<u64> = Vec::new();
        for (k, v) in overlay {
            let id = match (k.first(), v) {
                (Some(&keys::NS_EXTENT), _) => k.get(1..9).and_then(|b| keys::be_u64(b).ok()),
                (Some(&keys::NS_ONODE), Some(v)) => Onode::decode(v).ok().map(|o| o.id),
                _ => None,
            };
            if let Some(id) = id
                && ids.last() != Some(&id)
            {
                ids.push(id);
            }
        }
        if ids.is_empty() {
            return;
        }
        let mut freed = 0;
        for p in self.prefetches.values_mut() {
            if !p.stale && ids.contains(&p.onode) {
                p.stale = true;
                freed += p.bytes();
                for r in &mut p.ranges {
                    r.data = None;
                }
                self.stats.prefetches_dropped += 1;
            }
        }
        self.prefetch_bytes -= freed;
    }

    /// `[off, off + len)` of onode `o` from a completed, valid prefetch covering it (a slice, no copy).
    fn prefetched(&self, o: &Onode, off: u64, len: u64) -> Option<Bytes> {
        let want_end = if len == 0 {
            o.size
        } else {
            off.saturating_add(len).min(o.size)
        };
        if off >= want_end {
            return None;
        }
        for p in self.prefetches.values() {
            if p.onode != o.id || p.stale || p.size != o.size {
                continue;
            }
            for r in &p.ranges {
                let Some(d) = &r.data else { continue };
                if r.off <= off && want_end <= r.off + d.len() as u64 {
                    return Some(d.slice((off - r.off) as usize..(want_end - r.off) as usize));
                }
            }
        }
        None
    }

    // ---------------------------------------------------------------- fsck

    /// Check every invariant: node checksums and key order, object-scoped items belong to live objects, extent
    /// checksums against the data, shared-block reference counts, and the allocator against the tree.
    pub fn fsck(&mut self) -> Result<FsckReport> {
        self.check_alive()?;
        self.finish_bg()?;
        self.write_pending_log()?;
        self.drain()?;
        // Ordered commits: records whose data completed during the drain.
        while !self.pending_log.is_empty() {
            self.write_pending_log()?;
            self.drain()?;
        }
        let mut rep = FsckReport::default();
        let mut nodes = Vec::new();
        self.tree.walk(&mut self.io, &mut |b, _| {
            if let Some(b) = b {
                nodes.push(b);
            }
        })?;
        for b in &nodes {
            rep.nodes += 1;
            match self
                .io
                .sync_read(b * B, BLOCK)
                .and_then(|d| crate::btree::Node::decode(&d, *b))
            {
                Ok(_) => {}
                Err(e) => rep.errors.push(format!("node {b}: {e}")),
            }
        }
        let all = self.tree.scan(&mut self.io, b"", None, usize::MAX)?;
        for w in all.windows(2) {
            if w[0].0 >= w[1].0 {
                rep.errors
                    .push(format!("keys out of order: {:?} >= {:?}", w[0].0, w[1].0));
            }
        }
        let mut ids: HashMap<u64, Onode> = HashMap::new();
        let mut colls = std::collections::HashSet::new();
        let mut next_id = 1;
        let mut refs: BTreeMap<u64, u32> = BTreeMap::new();
        let mut counted: BTreeMap<u64, u32> = BTreeMap::new();
        let mut extents = Vec::new();
        let mut used: Vec<(u64, u64)> = nodes.iter().map(|b| (*b, 1)).collect();
        for (k, v) in &all {
            match k.first().copied() {
                Some(keys::NS_META) => next_id = keys::be_u64(v).unwrap_or(0),
                Some(keys::NS_COLL) => {
                    colls.insert(k[1..].to_vec());
                }
                Some(keys::NS_ONODE) => match Onode::decode(v) {
                    Ok(o) => {
                        rep.objects += 1;
                        let cl = k.get(1).copied().unwrap_or(0) as usize;
                        if !colls.contains(k.get(2..2 + cl).unwrap_or(&[])) {
                            rep.errors.push(format!("object {:?} in a missing collection", k));
                        }
                        if ids.insert(o.id, o).is_some() {
                            rep.errors.push(format!("onode id {} used twice", o.id));
                        }
                    }
                    Err(e) => rep.errors.push(format!("onode {k:?}: {e}")),
                },
                Some(keys::NS_EXTENT) => extents.push((k.clone(), v.clone())),
                Some(keys::NS_ATTR) | Some(keys::NS_OMAP_HDR) | Some(keys::NS_OMAP) => match Value::decode(v)
                {
                    Ok(Value::Inline(_)) => {}
                    Ok(val) => {
                        let runs: Vec<_> = val.runs().collect();
                        if runs.iter().any(|(s, l)| !self.block_range_ok(*s, *l)) {
                            rep.errors
                                .push(format!("spilled value of {k:?} outside the data area"));
                            continue;
                        }
                        for (s, l) in &runs {
                            for b in *s..s + l {
                                *counted.entry(b).or_default() += 1;
                            }
                        }
                        used.extend(runs);
                        rep.spilled_values += 1;
                        if let Err(e) = self.load_value(&TxnCtx::default(), v) {
                            rep.errors.push(format!("spilled value of {k:?}: {e}"));
                        }
                    }
                    Err(e) => rep.errors.push(format!("value of {k:?}: {e}")),
                },
                Some(keys::NS_REF) => {
                    let b = keys::be_u64(&k[1..]).unwrap_or(0);
                    let c = v.as_slice().try_into().map(u32::from_le_bytes).unwrap_or(0);
                    if c < 2 {
                        rep.errors.push(format!("refcount of block {b} is {c}"));
                    }
                    refs.insert(b, c);
                }
                _ => rep.errors.push(format!("unknown key kind {k:?}")),
            }
        }
        for (k, _) in &all {
            if matches!(
                k.first().copied(),
                Some(keys::NS_ATTR | keys::NS_OMAP_HDR | keys::NS_OMAP)
            ) {
                let id = k.get(1..9).and_then(|b| keys::be_u64(b).ok()).unwrap_or(0);
                if !ids.contains_key(&id) {
                    rep.errors
                        .push(format!("attr/omap item of missing object id {id}"));
                }
            }
        }
        for (k, v) in extents {
            let id = k.get(1..9).and_then(|b| keys::be_u64(b).ok()).unwrap_or(0);
            let lb = k.get(9..17).and_then(|b| keys::be_u64(b).ok()).unwrap_or(0);
            let e = match Extent::decode(&v) {
                Ok(e) => e,
                Err(err) => {
                    rep.errors.push(format!("extent {k:?}: {err}"));
                    continue;
                }
            };
            match ids.get(&id) {
                None => rep.errors.push(format!("extent of missing object id {id}")),
                Some(o) if lb + e.blocks() > o.size.div_ceil(B) => rep.errors.push(format!(
                    "extent of object id {id} at block {lb} beyond its size {}",
                    o.size
                )),
                _ => {}
            }
            if !self.block_range_ok(e.pblock, e.blocks()) {
                rep.errors.push(format!(
                    "extent {}+{} outside the data area",
                    e.pblock,
                    e.blocks()
                ));
                continue;
            }
            used.push((e.pblock, e.blocks()));
            let data = self.io.sync_read(e.pblock * B, BLOCK * e.crcs.len())?;
            for (i, c) in e.crcs.iter().enumerate() {
                *counted.entry(e.pblock + i as u64).or_default() += 1;
                rep.data_blocks += 1;
                if crc(&data[i * BLOCK..(i + 1) * BLOCK]) != *c {
                    rep.errors
                        .push(format!("data block {} checksum mismatch", e.pblock + i as u64));
                }
            }
        }
        if next_id <= ids.keys().copied().max().unwrap_or(0) {
            rep.errors
                .push(format!("next onode id {next_id} not above every id in use"));
        }
        for (b, c) in &counted {
            let want = refs.get(b).copied().unwrap_or(1);
            if *c != want {
                rep.errors
                    .push(format!("block {b} referenced {c} times but refcount says {want}"));
            }
            if *c > 1 {
                rep.shared_blocks += 1;
            }
        }
        for b in refs.keys() {
            if !counted.contains_key(b) {
                rep.errors.push(format!("refcount for unreferenced block {b}"));
            }
        }
        // Allocator: free runs must be exactly the complement of what is in use.
        self.alloc.release_all();
        used.extend(self.tree.superseded.iter().map(|b| (*b, 1)));
        used.extend(self.pending_free.iter().copied());
        let used = union(used);
        match Allocator::from_used(self.sb.data_first_block, self.sb.data_blocks, used) {
            Ok(expect) => {
                let a: Vec<_> = expect.free_runs().collect();
                let b: Vec<_> = self.alloc.free_runs().collect();
                if a != b {
                    rep.errors.push(format!(
                        "allocator disagrees with tree: {} free blocks expected, allocator has {}",
                        expect.free_blocks(),
                        self.alloc.free_blocks()
                    ));
                }
            }
            Err(e) => rep.errors.push(format!("block accounting: {e}")),
        }
        Ok(rep)
    }
}

/// Longest single device read a request is split into (4 MiB: a whole RBD/RGW object chunk in one IO).
const MAX_READ_BLOCKS: u64 = 1024;

/// Largest object size accepted (as BlueStore's default limit is far above what the OSD uses).
pub const MAX_OBJECT_SIZE: u64 = 1 << 40;

/// Every region a superblock names must lie inside its shard region and the device (hostile-input rule: these
/// numbers come from the media).
fn validate_geometry(sb: &ShardSuper, dev_size: u64) -> Result<()> {
    let bad = |what: &str| Err(StoreError::Corrupt(format!("superblock geometry: {what}")));
    let region_end = match sb.region_off.checked_add(sb.region_len) {
        Some(e) if e <= dev_size => e,
        _ => return bad("region beyond device"),
    };
    let log_end = match sb.log_off.checked_add(sb.log_len) {
        Some(e) if e <= region_end && sb.log_off >= sb.region_off + 2 * B && sb.log_len >= 4096 => e,
        _ => return bad("log outside region"),
    };
    let data_end = sb
        .data_first_block
        .checked_add(sb.data_blocks)
        .and_then(|b| b.checked_mul(B));
    if sb.data_first_block.checked_mul(B).is_none_or(|s| s < log_end)
        || data_end.is_none_or(|e| e > region_end)
    {
        return bad("data area outside region");
    }
    if sb.log_tail > sb.log_len
        || sb.root_block < sb.data_first_block
        || sb.root_block >= sb.data_first_block + sb.data_blocks
    {
        return bad("log tail or root out of range");
    }
    Ok(())
}

/// `a` minus `b`, both disjoint sorted runs (as `union` returns).
fn subtract(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut j = 0;
    for &(s, l) in a {
        let mut cur = s;
        let end = s + l;
        while j < b.len() && b[j].0 + b[j].1 <= cur {
            j += 1;
        }
        let mut k = j;
        while cur < end {
            match b.get(k) {
                Some(&(bs, bl)) if bs < end => {
                    if bs > cur {
                        out.push((cur, bs - cur));
                    }
                    cur = cur.max(bs + bl);
                    k += 1;
                }
                _ => {
                    out.push((cur, end - cur));
                    cur = end;
                }
            }
        }
    }
    out
}

/// Merge overlapping or adjacent runs into disjoint runs.
fn union(mut runs: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    runs.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(runs.len());
    for (s, l) in runs {
        if l == 0 {
            continue;
        }
        match out.last_mut() {
            Some((ps, pl)) if s <= *ps + *pl => *pl = (*pl).max(s + l - *ps),
            _ => out.push((s, l)),
        }
    }
    out
}

#[cfg(test)]
mod run_tests {
    use super::*;

    #[test]
    fn subtract_runs() {
        let a = union(vec![(0, 10), (20, 5), (30, 10)]);
        let b = union(vec![(2, 3), (9, 12), (33, 1), (39, 5)]);
        assert_eq!(subtract(&a, &b), vec![(0, 2), (5, 4), (21, 4), (30, 3), (34, 5)]);
        assert_eq!(subtract(&a, &[]), a);
        assert_eq!(subtract(&[], &b), vec![]);
    }

    /// Scattered reads are counted over the last `DEFRAG_SEEN_MAX` ranges only: the oldest is forgotten (its
    /// next read counts as a first again) and the memory stays bounded.
    #[test]
    #[allow(clippy::unwrap_used)]
    fn scattered_reads_are_remembered_for_a_bounded_window() {
        let dev = crate::SimDevice::new(8 << 20, crate::SimConfig::default());
        let dev = mkfs(
            dev,
            &MkfsOptions {
                shards: 1,
                log_bytes: 1 << 20,
                ..Default::default()
            },
        )
        .unwrap();
        let mut s = Store::mount(dev, 0, StoreConfig::default()).unwrap();
        assert!(!s.defrag_read_again(1, 0), "a first read");
        assert!(s.defrag_read_again(1, 0), "the second read");
        assert!(!s.defrag_read_again(1, 0), "admitted ranges start over");
        assert!(!s.defrag_read_again(2, 0), "another object");
        for b in 1..=DEFRAG_SEEN_MAX as u64 {
            assert!(!s.defrag_read_again(3, b));
        }
        assert!(s.defrag_seen.len() <= DEFRAG_SEEN_MAX);
        assert!(s.defrag_seen_order.len() <= DEFRAG_SEEN_MAX);
        assert!(!s.defrag_read_again(1, 0), "forgotten: counts as a first read");
        assert!(
            s.defrag_read_again(3, DEFRAG_SEEN_MAX as u64),
            "recent: still counted"
        );
        assert_eq!(s.stats.defrag_deferred, 3 + DEFRAG_SEEN_MAX as u64 + 1);
    }
}
