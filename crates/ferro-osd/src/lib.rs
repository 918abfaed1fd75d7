// SPDX-License-Identifier: LGPL-3.0-or-later
//! ferro-osd: a Ceph OSD daemon built on ferrostore and the sans-IO `pg` engine, thread per core on
//! crates/reactor.
//!
//! * [`args`]: ceph-osd's command line and the ceph.conf options the daemon reads.
//! * [`mkfs`]: the data directory files ceph-osd writes, plus a ferrostore on the block device.
//! * [`daemon`]: one reactor core per ferrostore shard; each owns its connections (io_uring), its shard and its
//!   PGs; core 0 also runs control: mon session (boot, maps, beacons, mark-me-down), mgr session (open, reports,
//!   PG stats), admin commands.
//! * [`heartbeat`]: heartbeat peers, pings on the hb networks, failure reports (sans-IO).
//! * [`worker`]: a core's storage side (its ferrostore shard and PGs).
//! * [`admin`]: the admin socket (`ceph daemon osd.N ...`), a thread that posts commands to core 0.
//! * [`perf`]: perf counters (`perf dump`, `perf schema`, the MMgrReport schema).
//! * [`memory`]: the large receive-buffer pool, malloc settings and the idle trimmer.
//! * [`sched`]: the reactor threads' scheduling (EEVDF slice, nice, real-time policy), operator options.
//! * [`turns`]: loop turn times and the long turns' breakdown (`perf dump`, `ferro long-turns`).
//!
//! Cores exchange work only over the reactor's SPSC mesh: an op for a PG of another core crosses to it and its
//! reply comes back to the connection's core.

pub mod admin;
pub mod args;
pub mod daemon;
pub mod heartbeat;
pub mod memory;
pub mod mkfs;
pub mod perf;
pub mod placement;
pub mod sched;
pub mod stats;
pub mod turns;
pub mod worker;
