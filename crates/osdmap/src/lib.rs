// SPDX-License-Identifier: LGPL-3.0-or-later
//! Ceph's OSDMap family, byte-exact with Ceph 16.2 (Pacific):
//!
//! * [`PgPool`] (`pg_pool_t`) with its feature-dependent encodings;
//! * [`OsdMap`] (full map) and [`Incremental`], decode/encode with Ceph's CRC convention, keeping the raw bytes of
//!   each decoded epoch for forwarding;
//! * [`OsdMap::apply_incremental`];
//! * placement: object → PG → up/acting OSDs, exactly as `OSDMap::pg_to_up_acting_osds`.
//!
//! Everything here is sans-IO: bytes in, values out.

pub mod apply;
pub mod build;
pub mod features;
pub mod inc;
pub mod map;
pub mod placement;
pub mod pool;
pub mod types;

pub use apply::{ApplyError, CrcCheck};
pub use inc::Incremental;
pub use map::OsdMap;
pub use placement::{PlacementError, UpActing};
pub use pool::PgPool;
pub use types::{EntityAddr, EntityAddrvec, Eversion, IntervalSet, PgId, Utime, Uuid};

/// An empty slot in an OSD vector (EC pools keep positions).
pub const CRUSH_ITEM_NONE: i32 = 0x7fff_ffff;
