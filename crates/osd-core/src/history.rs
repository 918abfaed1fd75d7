// SPDX-License-Identifier: LGPL-3.0-or-later
//! Placement history that survives a restart.
//!
//! A PG that a map newly places on this OSD must start from its real history: the mapping it had before, so
//! that peering probes the OSDs that hold it instead of activating empty. Ceph gets that history by replaying
//! every OSDMap from the pool's creation (`OSD::build_initial_pg_history`) or from a peer's notify/log
//! (`PGCreateInfo`). The shard keeps, per PG of every replicated pool, what that replay yields ([`Placed`],
//! `OsdShard::last_placed`): the last mapping with an acting set it saw (only what the interval check needs),
//! the epoch that mapping's interval began, and the intervals before it that may have gone read-write. The last
//! mapping alone is not enough: a PG that moved A → B → C, where B never went active (A crashed unnoticed, so
//! B's peering waited for it), would reach C with the interval on B only, and C would activate without A's
//! writes. It is written to the store whenever it changes (a new interval or a new `up_thru` of an acting
//! member), in the `meta` collection's `ferro_placement_history` omap (one key per PG), and loaded when the
//! shard starts: after a restart a newly placed PG gets the history it had before the crash, not a guess.

use std::collections::BTreeMap;

use bytes::Bytes;
use denc::{Decoder, Encoder, PgId, ShardId, SpgId};
use ferrostore::{Device, Op, Store, StoreError};
use osd_types::past_intervals::PastIntervals;
use osd_types::pg_info::PgHistory;
use peering::{MapView, PoolView};

use crate::meta::MetaObject;

/// The encoding version of one record (1: the last mapping only; 2 adds its interval's start and the past
/// intervals).
const VERSION: u8 = 2;

const HISTORY: MetaObject = MetaObject(b"ferro_placement_history");

/// A PG's history as the maps this shard saw give it (Ceph's `build_initial_pg_history`: its history and past
/// intervals), for a PG that a later map places here.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Placed {
    /// The last mapping with an acting set.
    pub last: MapView,
    /// The epoch `last`'s interval began; 0 when not known (the first map seen), which makes that interval
    /// reach back to the PG's start and count as read-write if its primary ever reported `up_thru`.
    pub since: u32,
    /// The intervals before `since` that may have gone read-write.
    pub past: PastIntervals,
}

impl Placed {
    /// The first mapping seen (its interval's start unknown).
    pub fn new(last: MapView) -> Self {
        Placed {
            last,
            since: 0,
            past: PastIntervals::default(),
        }
    }

    /// The PG's mapping in the next map: a new interval closes the last one into `past`
    /// (`check_new_interval`).
    pub fn advance(&mut self, v: MapView) {
        if peering::interval::is_new_interval(&self.last, &v) {
            let mut h = PgHistory {
                same_interval_since: self.since,
                ..PgHistory::default()
            };
            peering::interval::close_interval(&self.last, v.epoch, &mut h, &mut self.past);
            self.since = v.epoch;
        }
        self.last = v;
    }

    /// Whether two records hold the same history (the epoch the last mapping was seen at does not count).
    pub fn same(&self, o: &Placed) -> bool {
        same_placement(&self.last, &o.last) && self.since == o.since && self.past == o.past
    }
}

/// Whether two records describe the same placement (the epoch they were seen at does not count).
fn same_placement(a: &MapView, b: &MapView) -> bool {
    a.pool == b.pool
        && a.up == b.up
        && a.up_primary == b.up_primary
        && a.acting == b.acting
        && a.acting_primary == b.acting_primary
        && a.up_thru == b.up_thru
        && a.up_osds == b.up_osds
}

/// The omap key of a PG: pool (u64 BE), seed (u32 BE), shard (i8), so keys sort by PG.
fn key(s: &SpgId) -> Bytes {
    let mut k = Vec::with_capacity(13);
    k.extend_from_slice(&s.pgid.pool.to_be_bytes());
    k.extend_from_slice(&s.pgid.seed.to_be_bytes());
    k.push(s.shard.0 as u8);
    Bytes::from(k)
}

fn parse_key(k: &[u8]) -> Option<SpgId> {
    let pool = u64::from_be_bytes(k.get(0..8)?.try_into().ok()?);
    let seed = u32::from_be_bytes(k.get(8..12)?.try_into().ok()?);
    let shard = *k.get(12)? as i8;
    if k.len() != 13 {
        return None;
    }
    Some(SpgId::new(PgId::new(pool, seed), ShardId(shard)))
}

/// The last mapping: all a version 1 record holds.
fn encode_view(e: &mut Encoder, v: &MapView) {
    e.u32(v.epoch);
    e.u32(v.pool.size);
    e.u32(v.pool.min_size);
    e.encode(&v.up);
    e.i32(v.up_primary);
    e.encode(&v.acting);
    e.i32(v.acting_primary);
    e.encode(&v.up_thru);
    e.encode(&v.up_osds);
}

pub(crate) fn encode(p: &Placed) -> Bytes {
    let mut e = Encoder::new(0);
    e.versioned(VERSION, 1, |e| {
        encode_view(e, &p.last);
        e.u32(p.since);
        e.encode(&p.past);
    });
    e.into_bytes()
}

pub(crate) fn decode(b: Bytes) -> Result<Placed, denc::DecodeError> {
    let mut d = Decoder::new(b);
    let (h, mut d) = d.start_struct("placement_history", VERSION)?;
    let last = MapView {
        epoch: d.u32()?,
        pool: PoolView {
            size: d.u32()?,
            min_size: d.u32()?,
        },
        up: d.decode()?,
        up_primary: d.i32()?,
        acting: d.decode()?,
        acting_primary: d.i32()?,
        up_thru: d.decode()?,
        up_osds: d.decode()?,
    };
    let mut p = Placed::new(last);
    if h.version >= 2 {
        p.since = d.u32()?;
        p.past = d.decode()?;
    }
    Ok(p)
}

/// Every record on the store (none on a new store). Records that do not decode are skipped and counted.
pub(crate) fn load<D: Device>(store: &mut Store<D>) -> Result<(BTreeMap<SpgId, Placed>, usize), StoreError> {
    let mut out = BTreeMap::new();
    let mut bad = 0;
    if !HISTORY.exists(store)? {
        return Ok((out, 0));
    }
    let mut start: Vec<u8> = Vec::new();
    loop {
        let page = store.omap_iterate(&HISTORY.coll(), &HISTORY.oid(), &start, 1024)?;
        let Some(last) = page.last().map(|(k, _)| k.clone()) else {
            break;
        };
        let n = page.len();
        for (k, v) in page {
            match (parse_key(&k), decode(v)) {
                (Some(s), Ok(v)) => {
                    out.insert(s, v);
                }
                _ => bad += 1,
            }
        }
        if n < 1024 {
            break;
        }
        start = last.to_vec();
        start.push(0);
    }
    Ok((out, bad))
}

/// Queue one transaction with the changed records and the removed ones (pools deleted). Creates the collection
/// and object the first time. Returns the transaction's sequence number, if anything was written.
pub(crate) fn save<D: Device>(
    store: &mut Store<D>,
    created: &mut bool,
    set: &[(SpgId, Placed)],
    remove: &[SpgId],
) -> Result<Option<u64>, StoreError> {
    if set.is_empty() && remove.is_empty() {
        return Ok(None);
    }
    let mut t = HISTORY.transaction(store, *created)?;
    if !remove.is_empty() {
        t.push(Op::OmapRmKeys {
            cid: HISTORY.coll(),
            oid: HISTORY.oid(),
            keys: remove.iter().map(key).collect(),
        });
    }
    if !set.is_empty() {
        t.push(Op::OmapSetKeys {
            cid: HISTORY.coll(),
            oid: HISTORY.oid(),
            kvs: set.iter().map(|(s, v)| (key(s), encode(v))).collect(),
        });
    }
    let seq = store.queue_transaction(&t)?;
    *created = true;
    Ok(Some(seq))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_interval_keeps_the_one_it_ends() {
        let at = |epoch: u32, osd: i32, up_thru: u32| MapView {
            epoch,
            pool: PoolView { size: 1, min_size: 1 },
            up: vec![osd],
            up_primary: osd,
            acting: vec![osd],
            acting_primary: osd,
            up_thru: [(osd, up_thru)].into_iter().collect(),
            up_osds: [osd].into_iter().collect(),
        };
        // osd.1 went read-write from the start; osd.2 never reported up_thru in [2, 2]; osd.0 is the newest
        let mut p = Placed::new(at(1, 1, 1));
        p.advance(at(2, 2, 1));
        p.advance(at(3, 0, 1));
        assert_eq!(p.since, 3);
        let rw: Vec<_> = p.past.intervals().iter().map(|i| (i.first, i.last)).collect();
        assert_eq!(rw, vec![(0, 1)], "{:?}", p.past);
        assert_eq!(p.past.intervals()[0].acting, peering::interval::shards(&[1]));
        // the same mapping again is not a new interval
        p.advance(at(4, 0, 3));
        assert_eq!((p.since, p.past.intervals().len(), p.last.epoch), (3, 1, 4));
    }

    #[test]
    fn record_round_trips() {
        let v = MapView {
            epoch: 42,
            pool: PoolView { size: 3, min_size: 2 },
            up: vec![2, 0, 1],
            up_primary: 2,
            acting: vec![2, 0],
            acting_primary: 2,
            up_thru: [(0, 40), (2, 41)].into_iter().collect(),
            up_osds: [0, 2].into_iter().collect(),
        };
        let mut p = Placed::new(v.clone());
        assert_eq!(decode(encode(&p)).unwrap(), p);
        p.past.add_interval(3, 9, peering::interval::shards(&[1]), true);
        p.since = 10;
        assert_eq!(decode(encode(&p)).unwrap(), p);
        // a version 1 record (the last mapping only): its interval's start and what came before are unknown
        let mut e = Encoder::new(0);
        e.versioned(1, 1, |e| encode_view(e, &v));
        assert_eq!(decode(e.into_bytes()).unwrap(), Placed::new(v));
        let s = SpgId::new(PgId::new(7, 0x1f), ShardId::NO_SHARD);
        assert_eq!(parse_key(&key(&s)), Some(s));
        assert!(decode(Bytes::from_static(b"\x01\x01\xff\xff\xff\xff")).is_err());
        assert_eq!(parse_key(b"short"), None);
    }
}
