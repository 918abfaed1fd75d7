// SPDX-License-Identifier: LGPL-3.0-or-later
//! Ceph OSD data types with their exact byte images (src/osd/osd_types.h, 16.2).
//! Each type lives in its own module; corpus tests in tests/corpus.rs.

pub mod bufferlist;
pub mod object_info;
pub mod object_stat;
pub mod osd_stat;
pub mod owned;
pub mod past_intervals;
pub mod pg_info;
pub mod pg_log;
pub mod pg_log_t;
pub mod pg_missing;
pub mod pg_peering;
pub mod pg_stat;
pub mod pgmeta;
pub mod recovery;
pub mod snapset;
pub mod statfs;
pub mod superblock;
pub mod transaction;
pub mod watch_info;

pub use object_info::{ObjectInfo, oi_flag};

/// `v` encoded into a buffer of `cap` bytes to start with. `Encode::to_bytes` starts from an empty buffer and
/// grows it 8, 16, 32, … bytes at a time: for the records every write encodes (object_info_t, log entries,
/// `_fastinfo`, transaction indexes) that is six reallocations each.
pub fn encode_sized<T: denc::Encode + ?Sized>(v: &T, features: u64, cap: usize) -> bytes::Bytes {
    let mut e = denc::Encoder::with_capacity(features, cap);
    v.encode(&mut e);
    e.into_bytes()
}
pub use object_stat::ObjectStatSum;
pub use pg_info::{PgHistory, PgInfo};
pub use pg_log::{ObjectCleanRegions, ObjectModDesc, OpReturnItem, PgLogDup, PgLogEntry, log_op};
pub use snapset::SnapSet;
pub use watch_info::{ListObject, ObjListWatchResponse, PgNlsResponse, WatchInfo, WatchItem};
