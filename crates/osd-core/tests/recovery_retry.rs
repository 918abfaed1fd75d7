// SPDX-License-Identifier: LGPL-3.0-or-later
//! Lost recovery and backfill messages within one interval: pulls, pushes, push replies, recovery deletes,
//! scans, FINISH, backfill removes and reservation messages dropped at random are sent again after a timeout
//! (with backoff; a backfill remove, which has no answer, when the scan that follows it finds the object), so
//! recovery and backfill complete and the copies end identical without waiting for a new interval; a peer
//! that never answers is asked a bounded number of times; a connection reset resends at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod recovery_harness;

use std::collections::BTreeMap;
use std::time::Duration;

use ceph_msgs::osd_rep::rep_msg;
use recovery_harness::*;

/// osd-core's resend schedule (recovery.rs): first after 5 s, doubling up to 60 s, at most 8 resends.
const RETRY_BASE: Duration = Duration::from_secs(5);
const RETRY_MAX: Duration = Duration::from_secs(60);
const RETRY_ATTEMPTS: usize = 8;

/// Message types whose loss the engines recover from by themselves (all of backfill's and recovery's).
fn droppable(t: u16) -> bool {
    matches!(
        t,
        rep_msg::PG_PUSH
            | rep_msg::PG_PUSH_REPLY
            | rep_msg::PG_PULL
            | rep_msg::PG_RECOVERY_DELETE
            | rep_msg::PG_RECOVERY_DELETE_REPLY
            | rep_msg::PG_SCAN
            | rep_msg::PG_BACKFILL
            | rep_msg::PG_BACKFILL_REMOVE
            | rep_msg::RECOVERY_RESERVE
            | rep_msg::BACKFILL_RESERVE
    )
}

struct Dropper {
    seed: u64,
    /// Drop one message in `one_in` of the droppable ones.
    one_in: u64,
    dropped: BTreeMap<u16, usize>,
}

impl Dropper {
    fn roll(&mut self) -> u64 {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        self.seed
    }
}

/// Deliver messages (dropping some) until idle, then move time to the next resend and tick every node; until
/// `done`. Returns the number of timer rounds needed.
fn drive(net: &mut Net, drop: &mut Dropper, done: impl Fn(&mut Net) -> bool) -> usize {
    for round in 0..400 {
        loop {
            if let Some((_, _, m)) = net.bus.front()
                && droppable(m.msg_type)
                && drop.roll().is_multiple_of(drop.one_in)
            {
                let t = m.msg_type;
                net.bus.pop_front();
                *drop.dropped.entry(t).or_default() += 1;
                continue;
            }
            if !net.step() {
                break;
            }
        }
        if done(net) {
            return round;
        }
        let osds: Vec<i32> = net.nodes.keys().copied().collect();
        let next = osds
            .iter()
            .filter_map(|&o| {
                let n = net.node(o);
                [n.rec.poll_timeout(), n.bf.poll_timeout()]
                    .into_iter()
                    .flatten()
                    .min()
            })
            .min();
        let Some(next) = next else {
            panic!(
                "not done and nothing scheduled (dropped {:?}): {:?}",
                drop.dropped,
                net.node(0).bf
            );
        };
        net.now = net.now.max(next);
        for o in osds {
            net.with(o, |rec, bf, ctx| {
                rec.tick(ctx);
                bf.tick(ctx);
            });
        }
    }
    panic!("not done after 400 timer rounds (dropped {:?})", drop.dropped);
}

fn assert_same(net: &mut Net, a: i32, b: i32) {
    let da = net.dump(a);
    let db = net.dump(b);
    let only_a: Vec<String> = da
        .keys()
        .filter(|k| !db.contains_key(k))
        .map(|k| k.to_string())
        .collect();
    let only_b: Vec<String> = db
        .keys()
        .filter(|k| !da.contains_key(k))
        .map(|k| k.to_string())
        .collect();
    assert!(
        only_a.is_empty() && only_b.is_empty(),
        "only on osd.{a}: {only_a:?}; only on osd.{b}: {only_b:?}"
    );
    for (k, v) in &da {
        assert_eq!(db.get(k), Some(v), "{k} differs on osd.{b}");
    }
}

/// Three OSDs: the primary misses 5 objects (one large, pulled in chunks from osd.2), osd.1 misses 25 (two
/// large, pushed in chunks) and one deleted object; osd.2 misses 3.
fn log_scenario(net: &mut Net) {
    for osd in [0, 1, 2] {
        for i in 0..40u64 {
            put(
                &mut net.node(osd).store,
                &format!("o{i:02}"),
                &Spec::small(i + 1, i),
            );
        }
    }
    let mut m0 = Vec::new();
    let mut m1 = Vec::new();
    let mut m2 = Vec::new();
    for i in 0..5u64 {
        let name = format!("p{i}");
        let spec = if i == 0 {
            Spec::big(200 + i, 7)
        } else {
            Spec::small(200 + i, 70 + i)
        };
        put(&mut net.node(1).store, &name, &spec);
        put(&mut net.node(2).store, &name, &spec);
        m0.push((name, 200 + i));
    }
    for i in 0..25u64 {
        let name = format!("r{i:02}");
        let spec = if i < 2 {
            Spec::big(300 + i, i)
        } else {
            Spec::small(300 + i, 30 + i)
        };
        put(&mut net.node(0).store, &name, &spec);
        put(&mut net.node(2).store, &name, &spec);
        m1.push((name, 300 + i));
    }
    for i in 0..3u64 {
        let name = format!("s{i}");
        let spec = Spec::small(400 + i, 40 + i);
        put(&mut net.node(0).store, &name, &spec);
        put(&mut net.node(1).store, &name, &spec);
        m2.push((name, 400 + i));
    }
    // o07 deleted on the primary and osd.2; osd.1 still has it
    remove(&mut net.node(0).store, "o07");
    remove(&mut net.node(2).store, "o07");
    let items = |v: &[(String, u64)]| -> Vec<(String, u64)> { v.to_vec() };
    let to_missing = |v: Vec<(String, u64)>, extra: &[(&str, u64, u64, bool)]| {
        let mut all: Vec<(&str, u64, u64, bool)> =
            v.iter().map(|(n, ver)| (n.as_str(), *ver, 0, false)).collect();
        all.extend_from_slice(extra);
        missing(&all)
    };
    let sets = [
        (0, to_missing(items(&m0), &[])),
        (1, to_missing(items(&m1), &[("o07", 500, 8, true)])),
        (2, to_missing(items(&m2), &[])),
    ];
    let mut all = BTreeMap::new();
    for (osd, m) in sets {
        net.set_missing(osd, m.clone());
        all.insert(osd, m);
    }
    net.with(0, move |rec, _, ctx| rec.start(ctx, all));
}

/// Six lossy runs of a scenario (one in eight droppable messages lost): `setup` builds and starts it, `done`
/// says when it is finished, `check` asserts the outcome; the runs together must have lost a fair number of
/// messages.
fn lossy_runs(
    setup: impl Fn() -> Net,
    done: impl Fn(&mut Net) -> bool + Copy,
    check: impl Fn(&mut Net, u64),
) {
    let mut total = 0;
    for seed in 1..=6u64 {
        let mut net = setup();
        let mut drop = Dropper {
            seed: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            one_in: 8,
            dropped: BTreeMap::new(),
        };
        let rounds = drive(&mut net, &mut drop, done);
        check(&mut net, seed);
        eprintln!(
            "seed {seed}: dropped {:?}, done after {rounds} timer rounds",
            drop.dropped
        );
        total += drop.dropped.values().sum::<usize>();
    }
    assert!(total > 20, "the runs dropped too little: {total}");
}

#[test]
fn log_recovery_completes_with_lost_messages() {
    lossy_runs(
        || {
            let mut net = Net::new(&[0, 1, 2], 3, 64 << 10);
            log_scenario(&mut net);
            net
        },
        |n| !n.node(0).rec.is_active(),
        |net, seed| {
            assert_same(net, 0, 1);
            assert_same(net, 0, 2);
            assert!(!net.dump(1).contains_key(&hobj("o07")));
            for osd in [0, 1, 2] {
                assert!(
                    net.node(osd).peering.missing().is_empty(),
                    "seed {seed}: osd.{osd} misses objects"
                );
            }
        },
    );
}

#[test]
fn backfill_completes_with_lost_messages() {
    lossy_runs(
        || {
            let mut net = Net::new(&[0, 1], 2, 64 << 10);
            // more than one scan digest, two large objects, stale objects on the target to remove
            fill(&mut net.node(0).store, 600);
            for i in 0..40u64 {
                put(&mut net.node(1).store, &format!("stale{i}"), &Spec::small(3, i));
            }
            put(&mut net.node(1).store, "obj0005", &Spec::small(6, 5));
            net.with(0, |_, bf, ctx| bf.start(ctx, vec![1]));
            net
        },
        |n| n.node(0).backfill_done == vec![1],
        |net, seed| {
            assert_same(net, 0, 1);
            assert!(net.node(1).peering.info().last_backfill.is_max(), "seed {seed}");
            assert!(!net.node(0).bf.is_active());
        },
    );
}

/// Every MOSDPGBackfillRemove is lost the first time: the scan that follows each batch finds the objects
/// still there, they are removed again, and backfill ends only once the target is identical. Writes to an
/// object whose removal is not confirmed wait (its `last_backfill` does not pass it either).
#[test]
fn lost_backfill_removes_are_sent_again() {
    let mut net = Net::new(&[0, 1], 2, 64 << 10);
    fill(&mut net.node(0).store, 100);
    for i in 0..30u64 {
        put(&mut net.node(1).store, &format!("stale{i}"), &Spec::small(3, i));
    }
    net.with(0, |_, bf, ctx| bf.start(ctx, vec![1]));
    let mut lost = 0;
    let mut first = std::collections::BTreeSet::new();
    let mut blocked = false;
    loop {
        if let Some((_, _, m)) = net.bus.front()
            && m.msg_type == rep_msg::PG_BACKFILL_REMOVE
        {
            let r = <ceph_msgs::osd_rep::MOSDPGBackfillRemove as ceph_msgs::CephMessage>::from_message(m)
                .unwrap();
            let fresh: Vec<_> = r.ls.iter().filter(|(o, _)| first.insert(o.clone())).collect();
            if !fresh.is_empty() {
                assert_eq!(fresh.len(), r.ls.len(), "a batch mixes new and resent removes");
                // while unconfirmed, a write to the object waits
                blocked |= net.node(0).bf.is_backfilling(&r.ls[0].0);
                net.bus.pop_front();
                lost += 1;
                continue;
            }
        }
        if !net.step() {
            break;
        }
    }
    assert!(lost >= 2, "{lost} batches");
    assert!(blocked);
    assert_eq!(first.len(), 30);
    assert_eq!(net.node(0).backfill_done, vec![1]);
    assert_same(&mut net, 0, 1);
    assert_monotonic_max(&net.node(1).last_backfill.clone());
    // every lost batch went again (resends found by one confirming scan go together)
    let sent = net.sent[&rep_msg::PG_BACKFILL_REMOVE];
    assert!(sent > lost && sent <= 2 * lost, "{sent} sent, {lost} lost");
}

fn assert_monotonic_max(lbs: &[denc::HObject]) {
    for w in lbs.windows(2) {
        assert!(w[0] < w[1], "last_backfill went from {} to {}", w[0], w[1]);
    }
    assert!(lbs.last().is_some_and(|l| l.is_max()));
}

/// A target that never answers: the reservation request is sent again with growing intervals, at most
/// RETRY_ATTEMPTS times, then nothing more is scheduled (the next interval starts over); nothing is copied.
#[test]
fn unanswered_requests_back_off_and_stop() {
    let mut net = Net::new(&[0, 1], 3, 1 << 20);
    for i in 0..10u64 {
        put(&mut net.node(0).store, &format!("obj{i}"), &Spec::small(1 + i, i));
    }
    net.with(0, |_, bf, ctx| bf.start(ctx, vec![1]));
    let mut sent_at = Vec::new();
    for _ in 0..20 {
        // osd.1 is unreachable: everything sent to it is lost
        while let Some((_, to, m)) = net.bus.pop_front() {
            assert_eq!(to, 1);
            assert_eq!(
                m.msg_type,
                rep_msg::BACKFILL_RESERVE,
                "only reservation requests go out"
            );
            sent_at.push(net.now);
        }
        let Some(next) = net.node(0).bf.poll_timeout() else {
            break;
        };
        net.now = next;
        net.with(0, |_, bf, ctx| bf.tick(ctx));
    }
    assert!(net.node(0).bf.poll_timeout().is_none(), "still retrying");
    assert_eq!(sent_at.len(), 1 + RETRY_ATTEMPTS, "{sent_at:?}");
    let gaps: Vec<Duration> = sent_at.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(gaps[0], RETRY_BASE);
    for w in gaps.windows(2) {
        assert!(w[1] >= w[0], "backoff shrank: {gaps:?}");
    }
    assert!(gaps.iter().all(|g| *g <= RETRY_MAX), "{gaps:?}");
    assert_eq!(*gaps.last().unwrap(), RETRY_MAX);
    assert!(net.node(0).bf.is_active());
}

/// A connection reset resends what the peer has not answered at once (no timeout wait): here a push whose
/// reply was lost with the connection.
#[test]
fn peer_reset_resends_at_once() {
    let mut net = Net::new(&[0, 1], 1, 1 << 20);
    put(&mut net.node(0).store, "one", &Spec::small(5, 1));
    let m = missing(&[("one", 5, 0, false)]);
    net.set_missing(1, m.clone());
    let mut sets = BTreeMap::new();
    sets.insert(1, m);
    net.with(0, move |rec, _, ctx| rec.start(ctx, sets));
    // deliver until the replica's push reply is on the bus, then lose it
    loop {
        if net
            .bus
            .front()
            .is_some_and(|(_, _, m)| m.msg_type == rep_msg::PG_PUSH_REPLY)
        {
            net.bus.pop_front();
            break;
        }
        assert!(net.step(), "no push reply");
    }
    net.run();
    assert!(net.node(0).rec.is_active(), "recovered without the reply");
    let pushes = net.sent[&rep_msg::PG_PUSH];
    net.with(0, |rec, _, ctx| rec.peer_reset(ctx, 1));
    net.run();
    assert_eq!(net.sent[&rep_msg::PG_PUSH], pushes + 1);
    assert!(!net.node(0).rec.is_active());
    assert_same(&mut net, 0, 1);
    assert!(net.node(1).peering.missing().is_empty());
}
