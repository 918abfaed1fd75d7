// SPDX-License-Identifier: LGPL-3.0-or-later
//! Log-based recovery between three OSDs over wire-encoded messages: the primary pulls what it misses
//! (multi-chunk, falling back to another source when the first has no copy), pushes what replicas miss
//! (multi-chunk through a temp object), removes objects whose newest entry is a delete (locally and with
//! MOSDPGRecoveryDelete), reports every recovered object once, and holds `osd_recovery_max_active`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod recovery_harness;

use std::collections::{BTreeMap, BTreeSet};

use ceph_msgs::osd_rep::rep_msg;
use recovery_harness::*;

/// Contents: 20 base objects everywhere, then divergence as a log would describe it.
fn scenario(net: &mut Net) -> BTreeMap<i32, osd_types::pg_missing::PgMissing> {
    for osd in [0, 1, 2] {
        let s = &mut net.node(osd).store;
        for i in 0..20u64 {
            put(s, &format!("o{i:02}"), &Spec::small(i + 1, i));
        }
        put(s, "pdel", &Spec::small(3, 99));
    }
    // o01..o05 rewritten at 5'100+i on the primary and osd.2; osd.1 still has the old copies
    for i in 1..=5u64 {
        let spec = Spec::small(100 + i, 1000 + i);
        put(&mut net.node(0).store, &format!("o{i:02}"), &spec);
        put(&mut net.node(2).store, &format!("o{i:02}"), &spec);
    }
    // created on the primary only
    put(&mut net.node(0).store, "new1", &Spec::small(110, 5));
    put(&mut net.node(0).store, "big", &Spec::big(111, 1));
    // deleted on the primary and osd.2, osd.1 still has it
    remove(&mut net.node(0).store, "o07");
    remove(&mut net.node(2).store, "o07");
    // newer on osd.1 and osd.2: the primary pulls it
    put(&mut net.node(1).store, "o08", &Spec::small(120, 77));
    put(&mut net.node(2).store, "o08", &Spec::small(120, 77));
    // only osd.2 has it, large: a multi-chunk pull, then a push to osd.1
    put(&mut net.node(2).store, "bigpull", &Spec::big(121, 9));
    // osd.1 is not listed as missing it but has no copy; osd.2 has it
    put(&mut net.node(2).store, "lying", &Spec::small(122, 3));
    // deleted on osd.1 and osd.2; the primary's copy is stale
    remove(&mut net.node(1).store, "pdel");
    remove(&mut net.node(2).store, "pdel");

    let mut sets = BTreeMap::new();
    sets.insert(
        0,
        missing(&[
            ("o08", 120, 9, false),
            ("bigpull", 121, 0, false),
            ("lying", 122, 0, false),
            ("pdel", 123, 3, true),
        ]),
    );
    sets.insert(
        1,
        missing(&[
            ("o01", 101, 2, false),
            ("o02", 102, 3, false),
            ("o03", 103, 4, false),
            ("o04", 104, 5, false),
            ("o05", 105, 6, false),
            ("new1", 110, 0, false),
            ("big", 111, 0, false),
            ("o07", 112, 8, true),
            ("bigpull", 121, 0, false),
        ]),
    );
    sets.insert(2, missing(&[("new1", 110, 0, false), ("big", 111, 0, false)]));
    for (&osd, m) in &sets {
        net.set_missing(osd, m.clone());
    }
    sets
}

fn run_scenario(max_active: u32) -> Net {
    let mut net = Net::new(&[0, 1, 2], max_active, 64 << 10);
    let sets = scenario(&mut net);
    let want = pairs(&sets);
    let s2 = sets.clone();
    net.with(0, move |rec, _, ctx| rec.start(ctx, s2));
    assert!(net.node(0).rec.is_active());
    assert!(net.node(0).rec.is_missing_on_primary(&hobj("o08")));
    let p = net.node(0).rec.progress();
    assert_eq!(p.objects_degraded, want.len() as u64);
    net.run();

    // all three hold exactly the same objects, byte for byte (data, xattrs, omap header and entries), except
    // "lying", which peering believed osd.1 had (recovery trusts the missing sets it is given)
    let d0 = net.dump(0);
    for osd in [1, 2] {
        let mut d = net.dump(osd);
        if osd == 1 {
            assert!(!d.contains_key(&hobj("lying")));
            d.insert(hobj("lying"), d0[&hobj("lying")].clone());
        }
        assert_eq!(
            d.keys().collect::<Vec<_>>(),
            d0.keys().collect::<Vec<_>>(),
            "osd.{osd} object set"
        );
        for (k, v) in &d0 {
            assert_eq!(&d[k], v, "osd.{osd} {k}");
        }
    }
    assert!(
        !d0.contains_key(&hobj("o07")),
        "delete recovered on the primary's replicas"
    );
    assert!(
        !d0.contains_key(&hobj("pdel")),
        "the primary's stale copy removed"
    );
    assert_eq!(d0[&hobj("bigpull")].omap.len(), 300);
    assert_eq!(d0[&hobj("big")].size, 262_144 + 70_000);

    // every (osd, object) reported recovered exactly once by the primary, at the needed version
    let rec0 = &net.node(0).recovered;
    let got: Vec<(i32, denc::HObject)> = rec0.iter().map(|(o, h, _)| (*o, h.clone())).collect();
    assert_eq!(got.len(), want.len(), "{got:?}");
    assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), want);
    for (osd, h, v) in rec0 {
        assert_eq!(sets[osd].missing[h].need, *v);
    }
    // replicas reported their own objects; peering's missing sets are empty everywhere
    for osd in [1, 2] {
        let own: BTreeSet<_> = net
            .node(osd)
            .recovered
            .iter()
            .map(|(o, h, _)| (*o, h.clone()))
            .collect();
        let expect: BTreeSet<_> = sets[&osd].missing.keys().map(|h| (osd, h.clone())).collect();
        assert_eq!(own, expect, "osd.{osd}");
    }
    for osd in [0, 1, 2] {
        assert!(
            net.node(osd).peering.missing().is_empty(),
            "osd.{osd} still misses objects"
        );
    }
    let n0 = net.node(0);
    assert!(!n0.rec.is_active());
    let p = n0.rec.progress();
    assert_eq!(p.objects_degraded, 0);
    assert_eq!(p.objects_unfound, 0);
    assert_eq!(p.ops_in_flight, 0);
    assert_eq!(p.objects_recovered, want.len() as u64);
    assert!(p.bytes_recovered > 2 * 220_000, "{p:?}");
    assert!(p.max_ops_in_flight <= u64::from(max_active), "{p:?}");
    net
}

#[test]
fn pull_push_delete_three_osds() {
    let net = run_scenario(3);
    // the throttle was reached, never exceeded
    assert_eq!(net.max_in_flight, 3);
    // big objects went in several chunks: 64 KiB chunks of 220 KB of data and 30 KB of omap
    let pushes = net.sent[&rep_msg::PG_PUSH];
    let pulls = net.sent[&rep_msg::PG_PULL];
    assert!(pulls >= 4 + 2, "pulls {pulls}"); // o08, lying x2 (blank first), bigpull in >= 4 chunks
    assert!(pushes >= 10 + 3 * 4, "pushes {pushes}");
    assert_eq!(net.sent[&rep_msg::PG_RECOVERY_DELETE], 1);
    assert_eq!(net.sent[&rep_msg::PG_RECOVERY_DELETE_REPLY], 1);
    // one reply per push chunk received by a replica or the primary (pull answers are not acknowledged)
    assert_eq!(net.sent[&rep_msg::PG_PUSH_REPLY] + pulls, pushes);
}

#[test]
fn one_object_at_a_time() {
    let net = run_scenario(1);
    assert_eq!(net.max_in_flight, 1);
}

#[test]
fn prioritized_object_goes_first() {
    let mut net = Net::new(&[0, 1], 1, 1 << 20);
    for i in 0..10u64 {
        put(&mut net.node(0).store, &format!("x{i}"), &Spec::small(10 + i, i));
    }
    let m = missing(
        &(0..10u64)
            .map(|i| {
                (
                    Box::leak(format!("x{i}").into_boxed_str()) as &str,
                    10 + i,
                    0,
                    false,
                )
            })
            .collect::<Vec<_>>(),
    );
    net.set_missing(1, m.clone());
    let mut sets = BTreeMap::new();
    sets.insert(1, m);
    net.node(0).rec.prioritize(&hobj("x7")); // not known yet: ignored
    net.with(0, |rec, _, ctx| {
        rec.prioritize(&hobj("x9"));
        rec.start(ctx, sets);
        // nothing starts before osd.1 grants its recovery slot; x9 jumps the queue meanwhile
        assert_eq!(rec.progress().ops_in_flight, 0);
        rec.prioritize(&hobj("x9"));
    });
    net.run();
    let order: Vec<String> = net
        .node(0)
        .recovered
        .iter()
        .map(|(_, h, _)| String::from_utf8_lossy(&h.oid.0).into_owned())
        .collect();
    assert_eq!(order[0], "x9");
    assert_eq!(order[1], "x0");
    // MRecoveryReserve REQUEST, GRANT, and RELEASE once done
    assert_eq!(net.sent[&rep_msg::RECOVERY_RESERVE], 3);
    assert_eq!(order.len(), 10);
    assert_eq!(net.dump(0), net.dump(1));
}

#[test]
fn unfound_object_is_reported_not_hung() {
    let mut net = Net::new(&[0, 1], 3, 1 << 20);
    put(&mut net.node(0).store, "have", &Spec::small(2, 1));
    let mut sets = BTreeMap::new();
    sets.insert(0, missing(&[("ghost", 9, 0, false)]));
    sets.insert(1, missing(&[("have", 2, 0, false)]));
    net.set_missing(1, sets[&1].clone());
    net.with(0, |rec, _, ctx| rec.start(ctx, sets));
    net.run();
    let p = net.node(0).rec.progress();
    assert_eq!(p.objects_unfound, 1);
    assert!(
        net.node(0).rec.is_active(),
        "an unfound object keeps recovery open"
    );
    assert!(net.dump(1).contains_key(&hobj("have")));
    // a new interval drops it
    net.node(0).rec.reset();
    assert!(!net.node(0).rec.is_active());
}

#[test]
fn stale_interval_messages_are_ignored() {
    let mut net = Net::new(&[0, 1], 3, 1 << 20);
    put(&mut net.node(0).store, "a", &Spec::small(2, 1));
    let mut sets = BTreeMap::new();
    sets.insert(1, missing(&[("a", 2, 0, false)]));
    net.set_missing(1, sets[&1].clone());
    net.with(0, |rec, _, ctx| rec.start(ctx, sets));
    // the reservation first; then rewrite the push as if sent in an older interval: the replica must drop it
    while net
        .bus
        .front()
        .is_some_and(|(_, _, m)| m.msg_type != rep_msg::PG_PUSH)
    {
        net.step();
    }
    let (from, to, msg) = net.bus.pop_front().unwrap();
    let mut push = <ceph_msgs::osd_rep::MOSDPGPush as ceph_msgs::CephMessage>::from_message(&msg).unwrap();
    push.min_epoch = INTERVAL - 1;
    let old = ceph_msgs::CephMessage::to_message(&push, denc::CEPH_FEATURES_ALL);
    net.bus.push_back((from, to, old));
    net.run();
    assert!(!net.dump(1).contains_key(&hobj("a")));
    assert!(net.node(0).rec.is_active());
}

#[test]
fn leftover_temp_objects_go_and_a_repeated_last_chunk_is_answered() {
    let mut net = Net::new(&[0, 1], 3, 64 << 10);
    put(&mut net.node(0).store, "big", &Spec::big(50, 4));
    // a half-assembled push of an earlier interval on the replica
    let sp = spgid();
    let temp = hobj("big").make_temp_hobject(format!("temp_recovering_{sp}_5'40_{}_head", INTERVAL - 2));
    {
        let store = &mut net.node(1).store;
        let cid = pg::keys::collection_id(&sp);
        let mut t = ferrostore::Transaction::new();
        t.push(ferrostore::Op::Write {
            cid,
            oid: pg::keys::object_key(&temp, &sp),
            offset: 0,
            data: bytes::Bytes::from_static(b"stale half object"),
        });
        store.commit(&t).unwrap();
    }
    let mut sets = BTreeMap::new();
    sets.insert(1, missing(&[("big", 50, 0, false)]));
    net.set_missing(1, sets[&1].clone());
    net.with(0, |rec, _, ctx| rec.start(ctx, sets));
    // deliver everything, sending the last chunk of the push twice
    let mut duplicated = false;
    while let Some((from, to, msg)) = net.bus.pop_front() {
        if !duplicated && msg.msg_type == rep_msg::PG_PUSH {
            let p = <ceph_msgs::osd_rep::MOSDPGPush as ceph_msgs::CephMessage>::from_message(&msg).unwrap();
            if p.pushes[0].after_progress.data_complete && !p.pushes[0].before_progress.first {
                duplicated = true;
                net.bus.push_front((from, to, msg.clone()));
            }
        }
        net.bus.push_front((from, to, msg));
        net.step();
        while net.bus.is_empty() && net.step() {}
    }
    net.run();
    assert!(duplicated, "the push was not chunked");
    // dump() fails on temp objects
    assert_eq!(net.dump(0), net.dump(1));
    assert!(!net.node(0).rec.is_active());
    assert_eq!(
        net.node(1)
            .recovered
            .iter()
            .filter(|(o, h, _)| *o == 1 && *h == hobj("big"))
            .count(),
        1
    );
}

#[test]
fn hostile_pushes_and_deletes_are_refused() {
    use ceph_msgs::CephMessage;
    use ceph_msgs::osd_rep::{MOSDPGPush, MOSDPGRecoveryDelete};
    use denc::{PgShard, ShardId};
    use osd_types::recovery::{ObjectRecoveryInfo, ObjectRecoveryProgress, PushOp};

    let mut net = Net::new(&[0, 1], 3, 1 << 20);
    let sp = spgid();
    let complete = ObjectRecoveryProgress {
        first: false,
        data_complete: true,
        omap_complete: true,
        ..Default::default()
    };
    let push = |soid: denc::HObject, extents: Vec<(u64, u64)>, data: &'static [u8], size: u64| {
        let op = PushOp {
            soid: soid.clone(),
            version: ev(7),
            data: bytes::Bytes::from_static(data),
            data_included: extents.into_iter().collect(),
            recovery_info: ObjectRecoveryInfo {
                soid,
                version: ev(7),
                size,
                ..Default::default()
            },
            before_progress: ObjectRecoveryProgress::default(),
            after_progress: complete.clone(),
            ..Default::default()
        };
        MOSDPGPush {
            from: PgShard::new(0, ShardId::NO_SHARD),
            pgid: sp,
            map_epoch: EPOCH,
            min_epoch: INTERVAL,
            pushes: vec![op],
            cost: 0,
            is_repair: false,
        }
        .to_message(denc::CEPH_FEATURES_ALL)
    };
    let pgmeta = sp.make_pgmeta_oid().hobj;
    let cases = [
        // extents whose lengths overflow when added
        push(hobj("a"), vec![(0, u64::MAX), (1 << 40, 2)], b"xy", 10),
        // an extent past the object size limit
        push(hobj("a"), vec![(u64::MAX - 1, 2)], b"xy", 10),
        // a size past the object size limit
        push(hobj("a"), vec![(0, 2)], b"xy", 1 << 62),
        // data and extents disagree
        push(hobj("a"), vec![(0, 5)], b"xy", 10),
        // the PG's own metadata object, a temp object, another pool
        push(pgmeta.clone(), vec![(0, 2)], b"xy", 2),
        push(hobj("a").make_temp_hobject("t"), vec![(0, 2)], b"xy", 2),
        push(
            denc::HObject::new("b", "", denc::SnapId::NOSNAP, 1, 2, ""),
            vec![(0, 2)],
            b"xy",
            2,
        ),
    ];
    let before = net.dump(1);
    for m in cases {
        let r = net.with(1, |rec, _, ctx| rec.handle_message(ctx, 0, &m));
        assert!(r.is_err(), "accepted");
    }
    // a recovery delete of the pgmeta object leaves it alone
    let del = MOSDPGRecoveryDelete {
        from: PgShard::new(0, ShardId::NO_SHARD),
        pgid: sp,
        map_epoch: EPOCH,
        min_epoch: INTERVAL,
        cost: 0,
        objects: vec![(pgmeta.clone(), ev(3))],
    }
    .to_message(denc::CEPH_FEATURES_ALL);
    net.with(1, |rec, _, ctx| rec.handle_message(ctx, 0, &del))
        .unwrap();
    net.run();
    assert_eq!(net.dump(1), before);
    let n1 = net.node(1);
    let cid = pg::keys::collection_id(&sp);
    assert!(n1.store.exists(&cid, &pg::keys::pgmeta_key(&sp)).unwrap());
    // truncated and garbage messages are errors too
    let mut m = push(hobj("a"), vec![(0, 2)], b"xy", 2);
    m.front = m.front.slice(..m.front.len() / 2);
    assert!(net.with(1, |rec, _, ctx| rec.handle_message(ctx, 0, &m)).is_err());
}

#[test]
fn revoked_reservation_pauses_until_granted_again() {
    use ceph_msgs::CephMessage;
    use ceph_msgs::osd_rep::{MRecoveryReserve, recovery_reserve};
    let mut net = Net::new(&[0, 1], 1, 1 << 20);
    let names: Vec<String> = (0..8).map(|i| format!("x{i}")).collect();
    let mut items = Vec::new();
    for (i, n) in names.iter().enumerate() {
        put(&mut net.node(0).store, n, &Spec::small(10 + i as u64, i as u64));
        items.push((n.as_str(), 10 + i as u64, 0, false));
    }
    let m = missing(&items);
    net.set_missing(1, m.clone());
    let mut sets = BTreeMap::new();
    sets.insert(1, m);
    net.with(0, |rec, _, ctx| rec.start(ctx, sets));
    while net.node(0).recovered.len() < 3 {
        assert!(net.step());
    }
    // osd.1 takes its slot back: the primary asks again and carries on once granted
    let revoke = MRecoveryReserve {
        pgid: spgid(),
        query_epoch: EPOCH,
        reserve_type: recovery_reserve::REVOKE,
        priority: 180,
    }
    .to_message(denc::CEPH_FEATURES_ALL);
    net.with(0, |rec, _, ctx| rec.handle_message(ctx, 1, &revoke))
        .unwrap();
    net.run();
    assert_eq!(net.node(0).recovered.len(), 8);
    assert_eq!(net.dump(0), net.dump(1));
    // REQUEST, GRANT, REQUEST again, GRANT, RELEASE
    assert_eq!(net.sent[&rep_msg::RECOVERY_RESERVE], 5);
}
