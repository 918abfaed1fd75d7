// SPDX-License-Identifier: LGPL-3.0-or-later
//! Interval rules, the prior set, leases and stale-message handling, each on its own.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use ceph_msgs::osd_rep::{MOSDPGLease, MOSDPGNotify2};
use denc::{PgId, ShardId, SpgId, Timespan};
use osd_types::past_intervals::PastIntervals;
use osd_types::pg_info::{PgHistory, PgInfo};
use osd_types::pg_log_t::PgLog;
use osd_types::pg_missing::PgMissing;
use osd_types::pg_peering::{PgLease, PgNotify};
use peering::interval::{check_new_interval, is_new_interval, prior_set};
use peering::{Config, Event, MapView, Output, PeerMsg, Pg, PoolView};

fn map(epoch: u32, acting: &[i32], up_osds: &[i32], up_thru: &[(i32, u32)]) -> MapView {
    MapView {
        epoch,
        pool: PoolView { size: 3, min_size: 2 },
        up: acting.to_vec(),
        up_primary: acting.first().copied().unwrap_or(-1),
        acting: acting.to_vec(),
        acting_primary: acting.first().copied().unwrap_or(-1),
        up_thru: up_thru.iter().copied().collect(),
        up_osds: up_osds.iter().copied().collect(),
    }
}

#[test]
fn intervals_change_on_membership_not_on_up_thru() {
    let a = map(5, &[0, 1, 2], &[0, 1, 2], &[]);
    let mut b = map(6, &[0, 1, 2], &[0, 1, 2], &[(0, 5)]);
    assert!(
        !is_new_interval(&a, &b),
        "up_thru alone is not an interval change"
    );
    b.acting = vec![1, 2];
    b.acting_primary = 1;
    assert!(is_new_interval(&a, &b));
    let mut c = a.clone();
    c.pool.min_size = 1;
    assert!(is_new_interval(&a, &c));
}

#[test]
fn past_interval_goes_rw_only_with_up_thru_and_min_size() {
    let mut h = PgHistory {
        same_interval_since: 5,
        ..Default::default()
    };
    let mut pi = PastIntervals::new_compact();
    // primary 0 had up_thru 5 in [5, 9]: the interval may have served writes
    let old = map(9, &[0, 1, 2], &[0, 1, 2], &[(0, 5)]);
    let new = map(10, &[1, 2], &[1, 2], &[(0, 5)]);
    assert!(check_new_interval(&old, &new, &mut h, &mut pi));
    assert_eq!((h.same_interval_since, h.same_primary_since), (10, 10));
    assert_eq!(pi.intervals().len(), 1);
    assert_eq!((pi.intervals()[0].first, pi.intervals()[0].last), (5, 9));
    // [10, 11] with primary 1 that never got up_thru: participants recorded, not a rw interval
    let newer = map(12, &[1], &[1], &[(0, 5)]);
    assert!(check_new_interval(&new, &newer, &mut h, &mut pi));
    assert_eq!(pi.intervals().len(), 1);
    assert_eq!(pi.bounds(), (5, 11));
    assert!(pi.all_participants().iter().any(|s| s.osd == 2));
    // [12, 12] with one OSD is below min_size
    let last = map(13, &[1, 2], &[1, 2], &[(1, 12)]);
    assert!(check_new_interval(&newer, &last, &mut h, &mut pi));
    assert_eq!(pi.intervals().len(), 1);
}

#[test]
fn prior_set_probes_survivors_and_detects_down() {
    let mut pi = PastIntervals::new_compact();
    pi.add_interval(
        5,
        9,
        [0, 3]
            .iter()
            .map(|&o| denc::PgShard::new(o, ShardId::NO_SHARD))
            .collect(),
        true,
    );
    let now = map(10, &[1, 2], &[1, 2, 3], &[]);
    let ps = prior_set(&now, &pi, 0);
    assert_eq!(ps.probe.iter().map(|s| s.osd).collect::<Vec<_>>(), vec![1, 2, 3]);
    assert_eq!(ps.down, BTreeSet::from([0]));
    assert!(!ps.pg_down);
    // with osd.3 also down, nobody from [5, 9] survives: the PG is down
    let now = map(10, &[1, 2], &[1, 2], &[]);
    assert!(prior_set(&now, &pi, 0).pg_down);
    // intervals before the last activation do not matter
    assert!(!prior_set(&now, &pi, 10).pg_down);
}

fn pg(whoami: i32) -> Pg {
    let pgid = SpgId::new(PgId { pool: 1, seed: 0 }, ShardId::NO_SHARD);
    Pg::new(
        whoami,
        pgid,
        PgInfo {
            pgid: pgid.pgid,
            ..Default::default()
        },
        PgLog::default(),
        PgMissing::default(),
        PastIntervals::new_compact(),
        Config::default(),
    )
}

#[test]
fn replica_acks_leases_and_ignores_stale_ones() {
    let mut r = pg(1);
    r.handle(Duration::ZERO, Event::AdvanceMap(map(7, &[0, 1], &[0, 1], &[])));
    // its notify to the primary
    let first = r.poll_output();
    assert!(first.is_some());
    while r.poll_output().is_some() {}
    let lease = |epoch| {
        PeerMsg::Lease(MOSDPGLease {
            epoch,
            spgid: SpgId::new(PgId { pool: 1, seed: 0 }, ShardId::NO_SHARD),
            lease: PgLease {
                readable_until: Timespan { sec: 30, nsec: 0 },
                readable_until_ub: Timespan { sec: 31, nsec: 0 },
                interval: Timespan { sec: 16, nsec: 0 },
            },
        })
    };
    r.handle(
        Duration::ZERO,
        Event::Peer {
            from: 0,
            msg: lease(3),
        },
    );
    assert_eq!(r.poll_output(), None, "a lease from an older interval is ignored");
    r.handle(
        Duration::ZERO,
        Event::Peer {
            from: 0,
            msg: lease(7),
        },
    );
    match r.poll_output() {
        Some(Output::Send {
            to: 0,
            msg: PeerMsg::LeaseAck(a),
        }) => assert_eq!(a.lease_ack.readable_until_ub, Timespan { sec: 31, nsec: 0 }),
        o => panic!("{o:?}"),
    }
}

#[test]
fn primary_ignores_notifies_from_older_intervals() {
    let mut p = pg(0);
    p.handle(Duration::ZERO, Event::AdvanceMap(map(7, &[0, 1], &[0, 1], &[])));
    let outs: Vec<Output> = std::iter::from_fn(|| p.poll_output()).collect();
    assert!(
        outs.iter().any(|o| matches!(
            o,
            Output::Send {
                to: 1,
                msg: PeerMsg::Query(_)
            }
        )),
        "{outs:?}"
    );
    assert_eq!(p.state_name(), "Started/Primary/Peering/GetInfo");
    let notify = |epoch_sent| {
        PeerMsg::Notify(Box::new(MOSDPGNotify2 {
            spgid: SpgId::new(PgId { pool: 1, seed: 0 }, ShardId::NO_SHARD),
            notify: PgNotify {
                query_epoch: epoch_sent,
                epoch_sent,
                info: PgInfo::default(),
                ..Default::default()
            },
        }))
    };
    p.handle(
        Duration::ZERO,
        Event::Peer {
            from: 1,
            msg: notify(6),
        },
    );
    assert_eq!(
        p.state_name(),
        "Started/Primary/Peering/GetInfo",
        "stale notify ignored"
    );
    p.handle(
        Duration::ZERO,
        Event::Peer {
            from: 1,
            msg: notify(7),
        },
    );
    assert_eq!(p.state_name(), "Started/Primary/Peering/WaitUpThru");
    let outs: Vec<Output> = std::iter::from_fn(|| p.poll_output()).collect();
    assert!(outs.contains(&Output::NeedUpThru { epoch: 7 }), "{outs:?}");
    // the monitor records up_thru: same interval, activation proceeds
    p.handle(
        Duration::ZERO,
        Event::AdvanceMap(map(8, &[0, 1], &[0, 1], &[(0, 7)])),
    );
    assert_eq!(p.state_name(), "Started/Primary/Active/Activating");
}

/// A restarted OSD replaying the epochs it missed (`set_catching_up`): the intervals are recorded (and persisted)
/// but nothing is sent until the newest epoch; there the PG peers, and an interval in which another OSD went
/// read-write alone while this one was down makes it `down` when that OSD is down now.
#[test]
fn catch_up_records_intervals_and_peers_on_the_newest_epoch() {
    // size 2 / min_size 1: one OSD alone may go read-write
    let map = |epoch, acting: &[i32], up: &[i32], up_thru: &[(i32, u32)]| MapView {
        pool: PoolView { size: 2, min_size: 1 },
        ..map(epoch, acting, up, up_thru)
    };
    let mut p = pg(1).with_last_map(map(5, &[0, 1], &[0, 1], &[(0, 4)]));
    p.set_catching_up(true);
    // osd.1 (us) was down: osd.0 served alone in 6..8 with its up_thru recorded, then it went down too
    p.handle(Duration::ZERO, Event::AdvanceMap(map(6, &[0], &[0], &[(0, 6)])));
    p.handle(Duration::ZERO, Event::AdvanceMap(map(9, &[], &[], &[(0, 6)])));
    let outs: Vec<Output> = std::iter::from_fn(|| p.poll_output()).collect();
    assert!(
        outs.iter().all(|o| matches!(o, Output::Persist(_))),
        "catching up only persists: {outs:?}"
    );
    assert!(!outs.is_empty(), "the closed intervals are persisted");
    // compact past intervals keep the intervals that may have gone read-write
    let rw = interval_list(&p);
    assert!(
        rw.contains(&(6, 8, vec![0])),
        "the interval osd.0 served alone: {rw:?}"
    );
    // the newest epoch: we are up again and alone; osd.0 (the only member of 6..8) is down
    p.set_catching_up(false);
    p.handle(Duration::ZERO, Event::AdvanceMap(map(10, &[1], &[1], &[(0, 6)])));
    let _: Vec<Output> = std::iter::from_fn(|| p.poll_output()).collect();
    assert!(!p.is_active(), "went active without osd.0's writes");
    assert_eq!(p.state_name(), "Started/Primary/Peering/Down");
}

/// The past intervals kept: (first, last, acting OSDs).
fn interval_list(p: &Pg) -> Vec<(u32, u32, Vec<i32>)> {
    p.past_intervals()
        .intervals()
        .iter()
        .map(|i| (i.first, i.last, i.acting.iter().map(|s| s.osd).collect()))
        .collect()
}

#[test]
fn split_closes_the_interval_of_the_last_map() {
    // size 1: osd.0 is a stray of a PG that osd.2 served alone since epoch 2 (up_thru 2: it may have gone rw)
    let map = |epoch, acting: &[i32], up: &[i32], up_thru: &[(i32, u32)]| MapView {
        pool: PoolView { size: 1, min_size: 1 },
        ..map(epoch, acting, up, up_thru)
    };
    let last = map(4, &[2], &[0, 2], &[(2, 2)]);
    // the split at epoch 5 rebuilds peering from the store: no last map, the interval since 2 still open
    let pgid = SpgId::new(PgId { pool: 1, seed: 0 }, ShardId::NO_SHARD);
    let mut info = PgInfo {
        pgid: pgid.pgid,
        ..Default::default()
    };
    info.history.same_interval_since = 2;
    let mut p = Pg::new(
        0,
        pgid,
        info,
        PgLog::default(),
        PgMissing::default(),
        PastIntervals::new_compact(),
        Config::default(),
    );
    p.close_interval_for_split(&last, 5);
    assert_eq!(p.info().history.same_interval_since, 5);
    let rw = interval_list(&p);
    assert_eq!(rw, vec![(2, 4, vec![2])]);
    // osd.2 (silently dead: no up_thru after the split) is marked down and osd.0 becomes the primary: the
    // interval [2, 4] keeps osd.2 in the prior set, so the PG is down instead of active with the old copy
    p.handle(
        Duration::ZERO,
        Event::AdvanceMap(map(5, &[2], &[0, 2], &[(2, 2)])),
    );
    p.handle(Duration::ZERO, Event::AdvanceMap(map(9, &[0], &[0], &[(2, 2)])));
    let _: Vec<Output> = std::iter::from_fn(|| p.poll_output()).collect();
    assert!(!p.is_active(), "went active without osd.2's writes");
    assert_eq!(p.state_name(), "Started/Primary/Peering/Down");
}
