// SPDX-License-Identifier: LGPL-3.0-or-later
//! Interval bookkeeping (`PastIntervals::is_new_interval` / `check_new_interval` semantics): a PG's interval
//! changes whenever its up or acting set, their primaries, or the pool's size or min_size change. A finished
//! interval is remembered as "may have gone read-write" when enough OSDs were acting and the primary had
//! reported `up_thru` to the monitors within it (or the PG was seen clean in it).

use std::collections::BTreeSet;

use denc::{PgShard, ShardId};
use osd_types::past_intervals::PastIntervals;
use osd_types::pg_info::PgHistory;

use crate::MapView;

/// Whether moving from `old` to `new` starts a new interval.
pub fn is_new_interval(old: &MapView, new: &MapView) -> bool {
    old.acting_primary != new.acting_primary
        || old.acting != new.acting
        || old.up_primary != new.up_primary
        || old.up != new.up
        || old.pool.size != new.pool.size
        || old.pool.min_size != new.pool.min_size
}

/// The shards of a replicated acting set.
pub fn shards(osds: &[i32]) -> BTreeSet<PgShard> {
    osds.iter()
        .filter(|&&o| o >= 0 && o != PgShard::NO_OSD)
        .map(|&o| PgShard::new(o, ShardId::NO_SHARD))
        .collect()
}

/// `check_new_interval`: if `new` starts a new interval, close the old one `[history.same_interval_since,
/// new.epoch - 1]` into `past`, update `history`'s since-epochs and return true.
pub fn check_new_interval(
    old: &MapView,
    new: &MapView,
    history: &mut PgHistory,
    past: &mut PastIntervals,
) -> bool {
    if !is_new_interval(old, new) {
        return false;
    }
    close_interval(old, new.epoch, history, past);
    if old.up != new.up || old.up_primary != new.up_primary {
        history.same_up_since = new.epoch;
    }
    if old.acting_primary != new.acting_primary {
        history.same_primary_since = new.epoch;
    }
    true
}

/// End the interval `[history.same_interval_since, epoch - 1]`, mapped as in `old`, into `past` and start the
/// next one at `epoch` (the part of [`check_new_interval`] that does not depend on the new map).
pub fn close_interval(old: &MapView, epoch: u32, history: &mut PgHistory, past: &mut PastIntervals) {
    let first = history.same_interval_since;
    let last = epoch.saturating_sub(1);
    if first <= last && !old.acting.is_empty() {
        let acting = shards(&old.acting);
        let primary = old.acting_primary;
        let enough = primary >= 0 && acting.len() as u32 >= old.pool.min_size;
        let maybe_went_rw = enough
            && (old.up_thru.get(&primary).is_some_and(|&t| t >= first)
                || (history.last_epoch_clean >= first && history.last_epoch_clean <= last));
        past.add_interval(first, last, acting, maybe_went_rw);
    }
    history.same_interval_since = epoch;
}

/// Peering's prior set: whom to probe, and whether some interval that may have gone read-write has no surviving
/// member (then the PG is down: its newest writes may be on an OSD we cannot reach).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PriorSet {
    pub probe: BTreeSet<PgShard>,
    pub down: BTreeSet<i32>,
    pub pg_down: bool,
}

/// Build the prior set from the current map and the intervals since the PG last started.
pub fn prior_set(map: &MapView, past: &PastIntervals, last_epoch_started: u32) -> PriorSet {
    let mut ps = PriorSet::default();
    for s in shards(&map.up).union(&shards(&map.acting)) {
        if map.is_up(s.osd) {
            ps.probe.insert(*s);
        }
    }
    for i in past.intervals() {
        if i.last < last_epoch_started {
            continue;
        }
        let mut any_up = false;
        for s in &i.acting {
            if map.is_up(s.osd) {
                ps.probe.insert(*s);
                any_up = true;
            } else {
                ps.down.insert(s.osd);
            }
        }
        if !any_up && !i.acting.is_empty() {
            ps.pg_down = true;
        }
    }
    ps
}
