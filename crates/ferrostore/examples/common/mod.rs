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
        },
    )
    .map_err(|e| e.to_string())?;
    let mut s = Store::mount(dev, 0, StoreConfig::default()).map_err(|e| e.to_string())?;
    let mut t = Transaction::new();
    t.push(Op::CreateCollection { cid: coll(), bits: 0 });
    s.commit(&t).map_err(|e| e.to_string())?;
    Ok(s)
}
