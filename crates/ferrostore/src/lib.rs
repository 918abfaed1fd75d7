// SPDX-License-Identifier: LGPL-3.0-or-later
//! ferrostore: the per-core object store of FerroCeph. See docs/ferrostore.md and docs/on-disk-format.md.

pub mod alloc;
pub mod btree;
pub mod device;
pub mod error;
mod extcache;
pub mod format;
pub mod hash;
pub mod iobuf;
pub mod keys;
pub mod rng;
pub mod sim;
pub mod store;
pub mod txn;
#[cfg(target_os = "linux")]
pub mod uring;
pub mod wal;

pub use device::{Completion, Device, DeviceStats, Tag};
pub use error::{Result, StoreError};
pub use keys::{CollectionId, ObjectKey};
pub use sim::{SimConfig, SimDevice};
pub use store::{Event, FsckReport, MkfsOptions, Stat, Store, StoreConfig, mkfs};
pub use txn::{Op, Transaction};
