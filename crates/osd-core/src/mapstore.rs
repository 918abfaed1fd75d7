// SPDX-License-Identifier: LGPL-3.0-or-later
//! The newest OSDMap a shard handled, kept on its store (Ceph's superblock `newest_map` and the full map of that
//! epoch in the meta collection).
//!
//! A restarted ceph-osd does not start from the monitor's current map: it reads its superblock, asks the
//! monitor for every epoch after `newest_map` (MMonSubscribe `osdmap` start = newest + 1) and advances each PG
//! through each of them, so an interval that began and ended while it was down is in the PG's past intervals.
//! The shard does the same with the driver's help: after every map it handles it writes that epoch's full map
//! (`meta` collection, object `ferro_osd_superblock`, omap keys `newest_map` = epoch and `full_map` = the
//! encoded map) in a transaction queued after the PGs' own writes for that epoch, so a crash leaves either both
//! or the PGs ahead of the stored map — then the driver replays an epoch a PG already recorded, which adds no
//! interval (its `same_interval_since` is already that epoch). [`load_newest_map`] gives a driver the map to
//! start from; it feeds it, then every later epoch in order ([`crate::Input::MapsPending`] first, so PGs record
//! the old epochs without peering on them).
//!
//! Only the newest full map is kept (Ceph keeps a range for PGs that lag behind the OSD's epoch; ours advance
//! in the same call that handles the map, so none lags).

use bytes::Bytes;
use denc::{Decode, Decoder};
use ferrostore::{Device, Op, Store, StoreError};
use osdmap::OsdMap;

use crate::meta::MetaObject;

const SUPERBLOCK: MetaObject = MetaObject(b"ferro_osd_superblock");

const KEY_NEWEST: &[u8] = b"newest_map";
const KEY_FULL: &[u8] = b"full_map";

/// Why a stored map could not be used (the driver then starts from the monitor's current map).
#[derive(Debug, thiserror::Error)]
pub enum MapStoreError {
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("stored map: {0}")]
    Decode(String),
    #[error("stored map is epoch {map}, superblock says {newest}")]
    Mismatch { map: u32, newest: u32 },
}

/// The newest map a shard handled before it stopped (`None` on a new store).
pub fn load_newest_map<D: Device>(store: &mut Store<D>) -> Result<Option<OsdMap>, MapStoreError> {
    if !SUPERBLOCK.exists(store)? {
        return Ok(None);
    }
    let kv = store.omap_get_values(
        &SUPERBLOCK.coll(),
        &SUPERBLOCK.oid(),
        &[Bytes::from_static(KEY_NEWEST), Bytes::from_static(KEY_FULL)],
    )?;
    let get = |k: &[u8]| {
        kv.iter()
            .find(|(key, _)| key.as_ref() == k)
            .map(|(_, v)| v.clone())
    };
    let (Some(newest), Some(full)) = (get(KEY_NEWEST), get(KEY_FULL)) else {
        return Ok(None);
    };
    let newest = u32::from_le_bytes(
        newest
            .as_ref()
            .try_into()
            .map_err(|_| MapStoreError::Decode(format!("newest_map is {} bytes", newest.len())))?,
    );
    let mut d = Decoder::new(full);
    let map = OsdMap::decode(&mut d).map_err(|e| MapStoreError::Decode(e.to_string()))?;
    if map.epoch != newest {
        return Err(MapStoreError::Mismatch {
            map: map.epoch,
            newest,
        });
    }
    Ok(Some(map))
}

/// Queue the transaction that records `m` as the newest map handled. `created`: the object exists already.
pub(crate) fn save<D: Device>(
    store: &mut Store<D>,
    created: &mut bool,
    m: &OsdMap,
) -> Result<u64, StoreError> {
    let mut t = SUPERBLOCK.transaction(store, *created)?;
    let (full, _) = m.encode_with_crc(osdmap::features::PACIFIC);
    t.push(Op::OmapSetKeys {
        cid: SUPERBLOCK.coll(),
        oid: SUPERBLOCK.oid(),
        kvs: vec![
            (
                Bytes::from_static(KEY_NEWEST),
                Bytes::copy_from_slice(&m.epoch.to_le_bytes()),
            ),
            (Bytes::from_static(KEY_FULL), full),
        ],
    });
    let seq = store.queue_transaction(&t)?;
    *created = true;
    Ok(seq)
}
