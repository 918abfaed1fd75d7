// SPDX-License-Identifier: LGPL-3.0-or-later
//! Store and PG setup shared by the tests: a mounted ferrostore on the simulated device, a created PG, the
//! `OpContext` of a client op.

use std::collections::BTreeMap;

use bytes::Bytes;
use denc::{EntityAddr, EntityNameT, PgId, ShardId, SpgId, Utime};
use ferrostore::{CollectionId, MkfsOptions, SimConfig, SimDevice, Store, StoreConfig, mkfs};
use pg::{ConnId, OpContext, OsdCap, Pg, PgConfig, PoolInfo};

/// The simulated device's behaviour: `reorder` and `per_poll` (completions per poll) shake the order in which
/// writes complete; `durable` makes every write durable at once (no lost writes at a power cut).
pub fn sim(seed: u64, reorder: bool, per_poll: usize, durable: bool) -> SimConfig {
    SimConfig {
        seed,
        reorder,
        max_completions_per_poll: per_poll,
        durable_writes: durable,
    }
}

/// A freshly made and mounted one-shard ferrostore of `device_bytes` with a WAL of `log_bytes`.
pub fn sim_store(device_bytes: usize, log_bytes: u64, uuid: u64, cfg: SimConfig) -> Store<SimDevice> {
    let dev = mkfs(
        SimDevice::new(device_bytes, cfg),
        &MkfsOptions {
            shards: 1,
            log_bytes,
            uuid,
            ..Default::default()
        },
    )
    .unwrap();
    Store::mount(dev, 0, StoreConfig::default()).unwrap()
}

/// A replicated pool.
pub fn pool(id: i64, name: &str, pg_num: u32) -> PoolInfo {
    PoolInfo {
        id,
        name: name.into(),
        pg_num,
        erasure: false,
        applications: vec![],
    }
}

/// PG `<pool>.0`.
pub fn spgid(pool: i64) -> SpgId {
    SpgId::new(PgId::new(pool as u64, 0), ShardId::NO_SHARD)
}

/// A PG created on `store` (durable), primary unless told otherwise.
pub fn created_pg(store: &mut Store<SimDevice>, pool: PoolInfo, cfg: PgConfig, epoch: u32) -> Pg {
    let mut pg = Pg::new(spgid(pool.id), pool, cfg);
    let seq = pg.create(store, epoch).unwrap();
    store.wait_durable(seq).unwrap();
    pg.on_commit(seq);
    pg
}

/// A client op from `client.<client>` on connection `conn` (address none, every feature).
pub fn op_ctx(
    msg: ceph_msgs::osd_op::MOSDOp,
    conn: u64,
    client: i64,
    caps: &OsdCap,
    epoch: u32,
    now: Utime,
) -> OpContext<'_> {
    OpContext {
        msg,
        conn: ConnId(conn),
        client: EntityNameT::client(client),
        client_addr: EntityAddr::default(),
        caps,
        conn_features: u64::MAX,
        epoch,
        now,
    }
}

/// Unmount and mount `store` again (what a restart leaves: only what was durable).
pub fn remount(store: &mut Store<SimDevice>) {
    let placeholder = sim_store(4 << 20, 256 << 10, 0, SimConfig::default());
    let dev = std::mem::replace(store, placeholder).umount().unwrap();
    *store = Store::mount(dev, 0, StoreConfig::default()).unwrap();
}

/// The PG of `pool` as stored on `store` (after a restart).
pub fn loaded_pg(store: &mut Store<SimDevice>, pool: PoolInfo, cfg: PgConfig) -> Pg {
    let mut pg = Pg::new(spgid(pool.id), pool, cfg);
    pg.load(store).unwrap();
    pg
}

/// Every object of a collection as stored: sort key → (size, data, xattrs, omap header, omap); for the pgmeta
/// object only its log and dup keys.
pub type Dump = BTreeMap<Bytes, (u64, Bytes, Vec<(Bytes, Bytes)>, Bytes, Vec<(Bytes, Bytes)>)>;

pub fn dump(store: &mut Store<SimDevice>, cid: &CollectionId) -> Dump {
    let mut out = Dump::new();
    for k in store.list_objects(cid, &[], None, 100_000).unwrap() {
        let g = denc::GHObject::from_sort_key(&k.name).unwrap();
        let omap: Vec<(Bytes, Bytes)> = store.omap_iterate(cid, &k, &[], 1_000_000).unwrap();
        if g.is_pgmeta() {
            let log: Vec<(Bytes, Bytes)> = omap
                .into_iter()
                .filter(|(k, _)| k[0].is_ascii_digit() || k.starts_with(b"dup_"))
                .collect();
            out.insert(k.name.clone(), (0, Bytes::new(), vec![], Bytes::new(), log));
            continue;
        }
        let size = store.stat(cid, &k).unwrap().size;
        let data = store.read(cid, &k, 0, size).unwrap();
        let attrs = store.getattrs(cid, &k).unwrap();
        let hdr = store.omap_get_header(cid, &k).unwrap();
        out.insert(k.name.clone(), (size, data, attrs, hdr, omap));
    }
    out
}
