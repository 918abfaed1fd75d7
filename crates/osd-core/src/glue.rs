// SPDX-License-Identifier: LGPL-3.0-or-later
//! The seam to the `pg` crate's storage side of replication (Ceph-transaction output of writes, the reply gate
//! that waits for replicas, replica apply, peering persistence and load). Every call the core makes into those
//! APIs goes through this file, so it adapts in one place as the pg crate grows.

use ceph_msgs::osd_rep::MOSDRepOp;
use denc::{Coll, Eversion, PgId, PgShard, ShardId, SpgId};
use ferrostore::{CollectionId, Device, Store};
use osdmap::{OsdMap, PgPool};

/// One replicated write as the op engine made it.
pub(crate) type RepOp = pg::RepOp;

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
    SpgId::new(PgId::new(pool as u64, seed), ShardId::NO_SHARD)
}

/// Take the replicated writes out of an op's outputs.
pub(crate) fn take_repops(out: &mut pg::Outputs) -> Vec<RepOp> {
    std::mem::take(&mut out.repops)
}

/// The MOSDRepOp for one replica. The data segment is the transaction encoded once by the engine
/// (`txn_bytes`), shared by every replica's message: no per-replica copy or re-encode of the payload. Without
/// `with_data` the transaction is empty (log entries only): a backfill target the cursor has not passed yet
/// gets the object later from backfill (Ceph's `should_send_op`).
#[allow(clippy::too_many_arguments)] // the MOSDRepOp fields that vary per send
pub(crate) fn repop_message(
    pg: &pg::Pg,
    r: &RepOp,
    whoami: i32,
    epoch: u32,
    min_epoch: u32,
    min_last_complete_ondisk: Eversion,
    features: u64,
    with_data: bool,
) -> ceph_msgs::Message {
    // the front is encoded once per rep op (every replica gets the same one), without the transaction
    r.message(
        pg,
        epoch,
        min_epoch,
        PgShard::new(whoami, ShardId::NO_SHARD),
        min_last_complete_ondisk,
        features,
        with_data,
    )
}

/// The version and reqid a rep op is known by.
pub(crate) fn repop_version(r: &RepOp) -> Eversion {
    r.at_version
}

/// Replica: apply a MOSDRepOp (transaction + log entries + trim), its log entries decoded by the caller.
/// Returns the store sequence number to wait for before answering ONDISK.
pub(crate) fn apply_repop<D: Device>(
    store: &mut Store<D>,
    pg: &mut pg::Pg,
    msg: &MOSDRepOp,
    entries: &[osd_types::PgLogEntry],
) -> Result<u64, String> {
    pg.apply_rep_op_entries(store, msg, entries)
        .map_err(|e| e.to_string())
}

/// Primary or replica role of the op engine, and the replicas its writes go to.
pub(crate) fn set_role(pg: &mut pg::Pg, primary: bool) {
    pg.set_primary(primary);
}

pub(crate) fn set_replicas(pg: &mut pg::Pg, replicas: Vec<i32>) -> pg::Outputs {
    pg.set_replicas(replicas)
}

/// A replica committed the write at `version`.
pub(crate) fn rep_commit(pg: &mut pg::Pg, from: i32, version: Eversion) -> pg::Outputs {
    pg.on_rep_commit(from, version)
}

/// Persisted peering state of a PG (what `peering::Pg::new` takes).
pub(crate) struct PeeringDisk {
    pub info: osd_types::pg_info::PgInfo,
    pub log: osd_types::pg_log_t::PgLog,
    pub missing: osd_types::pg_missing::PgMissing,
    pub past_intervals: osd_types::past_intervals::PastIntervals,
}

/// Peering's state as the op engine holds it (after `load`, or kept current by writes).
pub(crate) fn peering_state(pg: &pg::Pg) -> PeeringDisk {
    let m = pg.meta();
    PeeringDisk {
        info: m.info,
        log: m.log,
        missing: m.missing,
        past_intervals: m.past_intervals,
    }
}

/// The op engine's `last_update` (to see whether peering's copy fell behind, e.g. writes without replicas).
pub(crate) fn last_update(pg: &pg::Pg) -> Eversion {
    pg.info().last_update
}

/// Apply peering's persistence requests as one store transaction. Returns its sequence number.
pub(crate) fn persist<D: Device>(
    store: &mut Store<D>,
    pg: &mut pg::Pg,
    ps: &[peering::Persist],
    epoch: u32,
) -> Result<u64, String> {
    pg.persist(store, ps, epoch).map_err(|e| e.to_string())
}
