// SPDX-License-Identifier: LGPL-3.0-or-later
//! Simulated device for tests: in-memory, seeded. Completions arrive in a random order; completed writes sit in a
//! volatile cache until a flush; a crash image drops, keeps or tears (at 512-byte sectors) every write that was not
//! yet durable. Bits can be flipped on the durable media.

use crate::device::{Completion, Device, DeviceStats, Tag};
use crate::rng::Rng;
use bytes::Bytes;

pub const SECTOR: usize = 512;

#[derive(Debug, Clone)]
enum Req {
    Read {
        len: usize,
    },
    Write {
        data: Bytes,
        /// Stays volatile on completion even with `durable_writes` (`submit_write_unsynced`).
        unsynced: bool,
        /// Ids of the volatile writes this durable write also makes durable on completion (a device whose
        /// durable writes flush: `SimDevice::set_durable_writes_flush`); empty otherwise.
        covers: Vec<u64>,
    },
    /// Ids of the writes that had completed when the flush was submitted.
    Flush {
        covers: Vec<u64>,
    },
}

#[derive(Debug, Clone)]
struct Pending {
    id: u64,
    tag: Tag,
    offset: u64,
    req: Req,
}

#[derive(Debug, Clone)]
struct VolatileWrite {
    id: u64,
    offset: u64,
    data: Bytes,
}

/// Knobs of the simulator.
#[derive(Debug, Clone, Copy)]
pub struct SimConfig {
    pub seed: u64,
    /// Complete requests in a random order rather than FIFO.
    pub reorder: bool,
    /// At most this many completions per `poll`/`wait` call (1 gives the finest crash points).
    pub max_completions_per_poll: usize,
    /// Writes are durable when they complete (models RWF_DSYNC / FUA), except `submit_write_unsynced` ones, which
    /// stay volatile until a flush as in the default mode.
    pub durable_writes: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 1,
            reorder: true,
            max_completions_per_poll: 4,
            durable_writes: false,
        }
    }
}

pub struct SimDevice {
    durable: Vec<u8>,
    volatile: Vec<VolatileWrite>,
    queue: Vec<Pending>,
    next_id: u64,
    rng: Rng,
    cfg: SimConfig,
    stats: DeviceStats,
    events: u64,
    /// Requests rejected at submission, delivered at the next poll.
    errors: Vec<Completion>,
    crash_at: Option<u64>,
    crash_rng: Rng,
    snapshot: Option<(Vec<u8>, [u64; 3])>,
    /// See `set_durable_writes_flush`.
    durable_writes_flush: bool,
}

impl SimDevice {
    pub fn new(size_bytes: usize, cfg: SimConfig) -> Self {
        Self::from_image(vec![0u8; size_bytes], cfg)
    }

    /// A device whose durable media holds `image` (e.g. a crash image).
    pub fn from_image(image: Vec<u8>, cfg: SimConfig) -> Self {
        SimDevice {
            durable: image,
            volatile: Vec::new(),
            queue: Vec::new(),
            next_id: 1,
            rng: Rng::new(cfg.seed),
            cfg,
            stats: DeviceStats::default(),
            events: 0,
            errors: Vec::new(),
            crash_at: None,
            crash_rng: Rng::new(cfg.seed ^ 0xc4a5_4c4a_5400_0000),
            snapshot: None,
            durable_writes_flush: false,
        }
    }

    /// Model a device without FUA (`SimConfig::durable_writes` must be on): a durable write is the write plus a
    /// cache flush, so on completion it also makes durable every write that had completed when it was submitted
    /// (the weakest form of that guarantee: a real flush after the write covers writes completed up to then).
    /// [`Device::durable_writes_flush`] reports it.
    pub fn set_durable_writes_flush(&mut self, on: bool) {
        self.durable_writes_flush = on;
    }

    /// Number of completions delivered so far: the clock that crash points are expressed in.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Media contents after a power loss right now: every write not yet durable is dropped, kept whole or torn at
    /// sector boundaries, each independently (decided by `rng`).
    pub fn crash_image(&self, rng: &mut Rng) -> Vec<u8> {
        self.crash_image_counted(rng).0
    }

    /// `crash_image` plus how many unflushed writes were (dropped, kept, torn).
    pub fn crash_image_counted(&self, rng: &mut Rng) -> (Vec<u8>, [u64; 3]) {
        let mut counts = [0u64; 3];
        let mut img = self.durable.clone();
        let inflight = self.queue.iter().filter_map(|p| match &p.req {
            Req::Write { data, .. } => Some((p.offset, data)),
            _ => None,
        });
        let candidates: Vec<(u64, &Bytes)> = self
            .volatile
            .iter()
            .map(|v| (v.offset, &v.data))
            .chain(inflight)
            .collect();
        for (offset, data) in candidates {
            match rng.below(10) {
                0..=3 => counts[0] += 1,
                4..=7 => {
                    counts[1] += 1;
                    apply(&mut img, offset, data)
                }
                _ => {
                    counts[2] += 1;
                    for (i, sector) in data.chunks(SECTOR).enumerate() {
                        if rng.chance(50) {
                            apply(&mut img, offset + (i * SECTOR) as u64, sector);
                        }
                    }
                }
            }
        }
        (img, counts)
    }

    /// Take a crash image (see `crash_image`) right after completion number `event` is delivered; fetch it with
    /// `take_crash_snapshot`. The device itself keeps running: one workload yields many crash points.
    pub fn set_crash_point(&mut self, event: u64) {
        self.crash_at = Some(event);
    }

    pub fn take_crash_snapshot(&mut self) -> Option<(Vec<u8>, [u64; 3])> {
        self.snapshot.take()
    }

    /// Media contents as they are durably (no unflushed writes).
    pub fn durable_image(&self) -> &[u8] {
        &self.durable
    }

    /// Flip one bit on the durable media (simulated bit rot).
    pub fn flip_bit(&mut self, offset: u64, bit: u8) {
        if let Some(b) = self.durable.get_mut(offset as usize) {
            *b ^= 1 << (bit % 8);
        }
        for v in &mut self.volatile {
            if offset >= v.offset && offset < v.offset + v.data.len() as u64 {
                let mut d = v.data.to_vec();
                d[(offset - v.offset) as usize] ^= 1 << (bit % 8);
                v.data = Bytes::from(d);
            }
        }
    }

    fn read_now(&self, offset: u64, len: usize) -> Vec<u8> {
        let mut out = self.durable[offset as usize..offset as usize + len].to_vec();
        for v in &self.volatile {
            let (s, e) = (v.offset, v.offset + v.data.len() as u64);
            let (rs, re) = (offset, offset + len as u64);
            if s < re && rs < e {
                let from = s.max(rs);
                let to = e.min(re);
                out[(from - rs) as usize..(to - rs) as usize]
                    .copy_from_slice(&v.data[(from - s) as usize..(to - s) as usize]);
            }
        }
        out
    }

    fn check_range(&self, offset: u64, len: usize) -> Result<(), String> {
        if !offset.is_multiple_of(SECTOR as u64) || !len.is_multiple_of(SECTOR) {
            return Err(format!("unaligned io at {offset} len {len}"));
        }
        if offset
            .checked_add(len as u64)
            .is_none_or(|e| e > self.durable.len() as u64)
        {
            return Err(format!("io beyond device end at {offset} len {len}"));
        }
        Ok(())
    }

    fn complete_one(&mut self, out: &mut Vec<Completion>) {
        if self.queue.is_empty() {
            return;
        }
        let idx = if self.cfg.reorder {
            self.rng.below(self.queue.len() as u64) as usize
        } else {
            0
        };
        let p = self.queue.remove(idx);
        self.events += 1;
        let result = match p.req {
            Req::Read { len } => Ok(Some(Bytes::from(self.read_now(p.offset, len)))),
            Req::Write {
                data,
                unsynced,
                covers,
            } => {
                if self.cfg.durable_writes && !unsynced {
                    if !covers.is_empty() {
                        self.make_durable(&covers);
                    }
                    apply(&mut self.durable, p.offset, &data);
                } else {
                    self.volatile.push(VolatileWrite {
                        id: p.id,
                        offset: p.offset,
                        data,
                    });
                }
                Ok(None)
            }
            Req::Flush { covers } => {
                self.make_durable(&covers);
                Ok(None)
            }
        };
        out.push(Completion { tag: p.tag, result });
        if self.crash_at == Some(self.events) {
            let mut rng = self.crash_rng.clone();
            self.snapshot = Some(self.crash_image_counted(&mut rng));
            self.crash_rng.next_u64();
        }
    }

    /// Apply the volatile writes with these (sorted) ids to the durable media.
    fn make_durable(&mut self, covers: &[u64]) {
        let mut keep = Vec::new();
        for v in std::mem::take(&mut self.volatile) {
            if covers.binary_search(&v.id).is_ok() {
                apply(&mut self.durable, v.offset, &v.data);
            } else {
                keep.push(v);
            }
        }
        self.volatile = keep;
    }

    /// Ids of the writes completed so far and not yet durable, sorted.
    fn volatile_ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.volatile.iter().map(|v| v.id).collect();
        ids.sort_unstable();
        ids
    }

    fn volatile_err(&mut self, tag: Tag, e: String) {
        self.errors.push(Completion { tag, result: Err(e) });
    }

    fn push(&mut self, tag: Tag, offset: u64, req: Req) {
        let id = self.next_id;
        self.next_id += 1;
        self.queue.push(Pending { id, tag, offset, req });
    }
}

impl SimDevice {
    fn write(&mut self, tag: Tag, offset: u64, bufs: Vec<Bytes>, unsynced: bool) {
        let data = if bufs.len() == 1 {
            bufs.into_iter().next().unwrap_or_default()
        } else {
            let mut v = Vec::with_capacity(bufs.iter().map(|b| b.len()).sum());
            for b in &bufs {
                v.extend_from_slice(b);
            }
            Bytes::from(v)
        };
        self.stats.writes += 1;
        self.stats.bytes_written += data.len() as u64;
        if let Err(e) = self.check_range(offset, data.len()) {
            self.volatile_err(tag, e);
            return;
        }
        // The engine must never have two overlapping writes in flight: the outcome would be undefined on a real
        // device. Catch it here, where it is cheap to see.
        let end = offset + data.len() as u64;
        for p in &self.queue {
            if let Req::Write { data: d, .. } = &p.req {
                assert!(
                    end <= p.offset || p.offset + d.len() as u64 <= offset,
                    "overlapping in-flight writes at {offset}"
                );
            }
        }
        if self.cfg.durable_writes && !unsynced {
            self.stats.synced_writes += 1;
        }
        let covers = if self.cfg.durable_writes && self.durable_writes_flush && !unsynced {
            self.volatile_ids()
        } else {
            Vec::new()
        };
        self.push(
            tag,
            offset,
            Req::Write {
                data,
                unsynced,
                covers,
            },
        );
    }
}

fn apply(img: &mut [u8], offset: u64, data: &[u8]) {
    let s = offset as usize;
    img[s..s + data.len()].copy_from_slice(data);
}

impl Device for SimDevice {
    fn size_bytes(&self) -> u64 {
        self.durable.len() as u64
    }

    fn submit_read(&mut self, tag: Tag, offset: u64, len: usize) {
        self.stats.reads += 1;
        self.stats.bytes_read += len as u64;
        if let Err(e) = self.check_range(offset, len) {
            self.volatile_err(tag, e);
            return;
        }
        self.push(tag, offset, Req::Read { len });
    }

    fn submit_write(&mut self, tag: Tag, offset: u64, bufs: Vec<Bytes>) {
        self.write(tag, offset, bufs, false);
    }

    fn submit_write_unsynced(&mut self, tag: Tag, offset: u64, bufs: Vec<Bytes>) {
        self.write(tag, offset, bufs, true);
    }

    fn submit_flush(&mut self, tag: Tag) {
        self.stats.flushes += 1;
        let covers = self.volatile_ids();
        self.push(tag, 0, Req::Flush { covers });
    }

    fn poll(&mut self, out: &mut Vec<Completion>) {
        let n = if self.queue.is_empty() {
            0
        } else {
            1 + self.rng.below(self.cfg.max_completions_per_poll.max(1) as u64) as usize
        };
        for _ in 0..n {
            self.complete_one(out);
        }
        out.append(&mut self.errors);
    }

    fn wait(&mut self, out: &mut Vec<Completion>) {
        let before = out.len();
        self.poll(out);
        if out.len() == before {
            self.complete_one(out);
        }
    }

    fn in_flight(&self) -> usize {
        self.queue.len() + self.errors.len()
    }

    fn stats(&self) -> DeviceStats {
        self.stats
    }

    fn writes_are_durable(&self) -> bool {
        self.cfg.durable_writes
    }

    fn durable_writes_flush(&self) -> bool {
        self.cfg.durable_writes && self.durable_writes_flush
    }
}
