// SPDX-License-Identifier: LGPL-3.0-or-later
//! One simulated NVMe device per OSD, shared by the OSD's ferrostore shards (one `Store` per core, as in
//! ferro-osd), with the device faults the simulator injects.
//!
//! ferrostore's [`SimDevice`] is one in-memory device; a `Store` owns its `Device` by value and numbers its
//! requests from 0. [`ShardDev`] gives each shard its own handle: tags carry the shard in their top byte and
//! completions are sorted into per-shard inboxes, so every shard sees only its own completions while the device
//! completes everyone's requests in one (seeded, reordered) stream. A crash takes one image of the whole device:
//! every shard of the OSD loses or tears its unflushed writes together, as a power loss would.

use std::cell::RefCell;
use std::rc::Rc;

use ferrostore::rng::Rng;
use ferrostore::{Completion, Device, DeviceStats, SimConfig, SimDevice, Tag};

const SHARD_SHIFT: u32 = 56;

/// A deliberately broken device, for showing that the oracle catches storage bugs (see [`crate::Bug`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DiskBug {
    #[default]
    None,
    /// Flushes complete at once without making anything durable (a device that lies about its cache): after a
    /// crash, writes the store believed durable are lost or torn.
    LyingFlush,
}

struct Inner {
    dev: SimDevice,
    inbox: Vec<Vec<Completion>>,
    in_flight: Vec<usize>,
    bug: DiskBug,
    /// Flush tags answered early by [`DiskBug::LyingFlush`], delivered at the next poll.
    fake: Vec<Completion>,
}

impl Inner {
    fn route(&mut self, got: Vec<Completion>) {
        for c in got {
            let shard = (c.tag >> SHARD_SHIFT) as usize;
            if let (Some(inbox), Some(n)) = (self.inbox.get_mut(shard), self.in_flight.get_mut(shard)) {
                *n = n.saturating_sub(1);
                inbox.push(Completion {
                    tag: c.tag & ((1 << SHARD_SHIFT) - 1),
                    result: c.result,
                });
            }
        }
    }
    fn pump(&mut self, block: bool) {
        let mut got = std::mem::take(&mut self.fake);
        if block && got.is_empty() {
            self.dev.wait(&mut got);
        } else {
            self.dev.poll(&mut got);
        }
        self.route(got);
    }
}

/// The device of one OSD.
#[derive(Clone)]
pub struct Disk {
    inner: Rc<RefCell<Inner>>,
}

impl Disk {
    pub fn new(size_bytes: usize, shards: u32, seed: u64, bug: DiskBug) -> Self {
        Self::from_device(SimDevice::new(size_bytes, dev_cfg(seed)), shards, bug)
    }

    fn from_device(dev: SimDevice, shards: u32, bug: DiskBug) -> Self {
        let n = shards.max(1) as usize;
        Disk {
            inner: Rc::new(RefCell::new(Inner {
                dev,
                inbox: (0..n).map(|_| Vec::new()).collect(),
                in_flight: vec![0; n],
                bug,
                fake: Vec::new(),
            })),
        }
    }

    /// The handle shard `shard` mounts its store on.
    pub fn shard(&self, shard: u32) -> ShardDev {
        ShardDev {
            inner: self.inner.clone(),
            shard: shard as usize,
        }
    }

    /// Power loss now: a new device (new handles; the old ones must be dropped) whose media is a crash image of
    /// this one: writes not yet durable are dropped, kept or torn at 512-byte sectors. Returns the device and
    /// how many unflushed writes were (dropped, kept, torn).
    pub fn crash(&self, rng: &mut Rng, seed: u64) -> (Disk, [u64; 3]) {
        let inner = self.inner.borrow();
        let (img, counts) = inner.dev.crash_image_counted(rng);
        let shards = inner.inbox.len() as u32;
        (
            Self::from_device(SimDevice::from_image(img, dev_cfg(seed)), shards, inner.bug),
            counts,
        )
    }

    /// The device as formatted by `ferrostore::mkfs` (which takes a device by value): run it on a plain
    /// device, then wrap the result.
    pub fn mkfs(size_bytes: usize, shards: u32, seed: u64, bug: DiskBug) -> Result<Disk, String> {
        let dev = SimDevice::new(size_bytes, dev_cfg(seed));
        let opts = ferrostore::MkfsOptions {
            shards: shards.max(1),
            log_bytes: 0,
            uuid: seed | 1,
            ..Default::default()
        };
        let dev = ferrostore::mkfs(dev, &opts).map_err(|e| format!("mkfs: {e}"))?;
        Ok(Self::from_device(dev, shards, bug))
    }

    /// Requests in flight on the whole device.
    pub fn in_flight(&self) -> usize {
        let i = self.inner.borrow();
        i.dev.in_flight() + i.fake.len()
    }
}

fn dev_cfg(seed: u64) -> SimConfig {
    SimConfig {
        seed,
        reorder: true,
        max_completions_per_poll: 3,
        durable_writes: false,
    }
}

/// One shard's view of its OSD's device.
pub struct ShardDev {
    inner: Rc<RefCell<Inner>>,
    shard: usize,
}

impl ShardDev {
    fn tag(&self, tag: Tag) -> Tag {
        debug_assert!(tag >> SHARD_SHIFT == 0, "store tag {tag} uses the shard bits");
        tag | ((self.shard as u64) << SHARD_SHIFT)
    }
    fn submitted(&self, i: &mut Inner) {
        if let Some(n) = i.in_flight.get_mut(self.shard) {
            *n += 1;
        }
    }
    fn take_inbox(&self, i: &mut Inner, out: &mut Vec<Completion>) {
        if let Some(b) = i.inbox.get_mut(self.shard) {
            out.append(b);
        }
    }
}

impl Device for ShardDev {
    fn size_bytes(&self) -> u64 {
        self.inner.borrow().dev.size_bytes()
    }
    fn submit_read(&mut self, tag: Tag, offset: u64, len: usize) {
        let t = self.tag(tag);
        let mut i = self.inner.borrow_mut();
        self.submitted(&mut i);
        i.dev.submit_read(t, offset, len);
    }
    fn submit_write(&mut self, tag: Tag, offset: u64, bufs: Vec<bytes::Bytes>) {
        let t = self.tag(tag);
        let mut i = self.inner.borrow_mut();
        self.submitted(&mut i);
        i.dev.submit_write(t, offset, bufs);
    }
    fn submit_flush(&mut self, tag: Tag) {
        let t = self.tag(tag);
        let mut i = self.inner.borrow_mut();
        self.submitted(&mut i);
        if i.bug == DiskBug::LyingFlush {
            i.fake.push(Completion {
                tag: t,
                result: Ok(None),
            });
        } else {
            i.dev.submit_flush(t);
        }
    }
    fn poll(&mut self, out: &mut Vec<Completion>) {
        let mut i = self.inner.borrow_mut();
        i.pump(false);
        self.take_inbox(&mut i, out);
    }
    fn wait(&mut self, out: &mut Vec<Completion>) {
        let mut i = self.inner.borrow_mut();
        let before = out.len();
        loop {
            self.take_inbox(&mut i, out);
            if out.len() > before
                || i.in_flight.get(self.shard).copied().unwrap_or(0) == 0
                || (i.dev.in_flight() == 0 && i.fake.is_empty())
            {
                return;
            }
            i.pump(true);
        }
    }
    fn in_flight(&self) -> usize {
        let i = self.inner.borrow();
        i.in_flight.get(self.shard).copied().unwrap_or(0) + i.inbox.get(self.shard).map_or(0, Vec::len)
    }
    fn stats(&self) -> DeviceStats {
        self.inner.borrow().dev.stats()
    }
}
