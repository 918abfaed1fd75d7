// SPDX-License-Identifier: LGPL-3.0-or-later
//! Setup shared by the CPU examples: an in-order, always-durable simulated device (a read completes at the next
//! poll), so what they measure is the engine's CPU, not device time.

use bytes::Bytes;
use ferrostore::{
    CollectionId, MkfsOptions, Op, SimConfig, SimDevice, Store, StoreConfig, Transaction, mkfs,
};

/// The one collection the examples use.
pub fn coll() -> CollectionId {
    CollectionId::new(Bytes::from_static(b"1.7_head"))
}

/// CPU time of the calling thread in nanoseconds (wall time on a loaded shared machine measures the load).
#[allow(dead_code)] // not every example times itself
pub fn thread_cpu_ns() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through the pointer we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

/// A mounted one-shard store of `device_bytes` with a 16 MiB log and `coll()` created.
pub fn sim_store(device_bytes: usize) -> Result<Store<SimDevice>, String> {
    let dev = SimDevice::new(
        device_bytes,
        SimConfig {
            seed: 1,
            reorder: false,
            max_completions_per_poll: 1024,
            durable_writes: true,
        },
    );
    let dev = mkfs(
        dev,
        &MkfsOptions {
            shards: 1,
            log_bytes: 16 << 20,
            uuid: 1,
            ..Default::default()
        },
    )
    .map_err(|e| e.to_string())?;
    // FERRO_EXTENT_CACHE=n: the extent cache's size (0: off), to compare read costs with and without it
    let mut cfg = StoreConfig::default();
    if let Some(n) = std::env::var("FERRO_EXTENT_CACHE")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        cfg.extent_cache_entries = n;
    }
    let mut s = Store::mount(dev, 0, cfg).map_err(|e| e.to_string())?;
    let mut t = Transaction::new();
    t.push(Op::CreateCollection { cid: coll(), bits: 0 });
    s.commit(&t).map_err(|e| e.to_string())?;
    Ok(s)
}
