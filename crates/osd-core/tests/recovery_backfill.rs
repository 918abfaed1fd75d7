// SPDX-License-Identifier: LGPL-3.0-or-later
//! Backfill over wire-encoded messages: an empty target ends identical to the primary (several scan digests,
//! multi-chunk pushes, throttled); a stale target gets only what differs, loses what the primary deleted,
//! and its `last_backfill` only ever moves forward, ending at max with BackfillDone.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod recovery_harness;

use ceph_msgs::osd_rep::rep_msg;
use recovery_harness::*;

fn assert_same(net: &mut Net, a: i32, b: i32) {
    let da = net.dump(a);
    let db = net.dump(b);
    assert_eq!(da.len(), db.len(), "object count osd.{a} vs osd.{b}");
    for (k, v) in &da {
        assert_eq!(db.get(k), Some(v), "{k} differs on osd.{b}");
    }
}

fn assert_monotonic(lbs: &[denc::HObject]) {
    for w in lbs.windows(2) {
        assert!(w[0] < w[1], "last_backfill went from {} to {}", w[0], w[1]);
    }
    assert!(lbs.last().is_some_and(|l| l.is_max()), "ends at max");
}

#[test]
fn empty_target_ends_identical() {
    let mut net = Net::new(&[0, 1], 3, 64 << 10);
    // more objects than one scan digest holds (osd_backfill_scan_max = 512), two of them large
    fill(&mut net.node(0).store, 700);
    net.with(0, |_, bf, ctx| bf.start(ctx, vec![1]));
    assert!(net.node(0).bf.is_active());
    assert_eq!(net.node(0).bf.progress().objects_misplaced, 702);
    net.run();

    assert_same(&mut net, 0, 1);
    assert_eq!(net.dump(1).len(), 702);
    assert_eq!(net.node(0).backfill_done, vec![1]);
    assert!(!net.node(0).bf.is_active());
    let p = net.node(0).bf.progress();
    assert_eq!(p.objects_misplaced, 0);
    assert_eq!(p.objects_recovered, 702);
    assert!(p.max_ops_in_flight <= 3 && p.max_ops_in_flight >= 2, "{p:?}");
    assert!(net.max_in_flight <= 3);
    // one scan of the empty target, big objects in several chunks, progress reported along the way
    assert_eq!(net.sent[&rep_msg::PG_SCAN], 2, "{:?}", net.sent);
    assert!(net.sent[&rep_msg::PG_PUSH] >= 702 + 2 * 3);
    let lbs = net.node(1).last_backfill.clone();
    assert!(lbs.len() > 10, "progress reported {} times", lbs.len());
    assert_monotonic(&lbs);
    assert!(net.node(1).peering.info().last_backfill.is_max());
    assert!(!net.sent.contains_key(&rep_msg::PG_BACKFILL_REMOVE));
}

#[test]
fn large_target_compared_over_several_digests() {
    let mut net = Net::new(&[0, 1], 3, 1 << 20);
    for i in 0..1100u64 {
        let spec = Spec::small(1 + i, i);
        if i < 1050 {
            put(&mut net.node(0).store, &format!("obj{i:04}"), &spec);
        }
        if i % 20 != 0 {
            put(&mut net.node(1).store, &format!("obj{i:04}"), &spec);
        }
    }
    net.with(0, |_, bf, ctx| bf.start(ctx, vec![1]));
    net.run();
    assert_same(&mut net, 0, 1);
    // 1045 objects on the target: three digests of at most 512 (and their requests), and a few scans that
    // confirm the removes (at most one per forward scan, and at the end)
    let scans = net.sent[&rep_msg::PG_SCAN];
    assert!((8..=16).contains(&scans), "{:?}", net.sent);
    // only the 53 objects it lacked were pushed; the 50 the primary does not have were removed
    assert_eq!(net.node(0).bf.progress().objects_recovered, 53);
    assert_eq!(net.sent[&rep_msg::PG_PUSH], 53);
    assert_eq!(net.node(0).backfill_done, vec![1]);
    assert_monotonic(&net.node(1).last_backfill.clone());
}

#[test]
fn stale_target_gets_differences_and_removals() {
    let mut net = Net::new(&[0, 1, 2], 2, 32 << 10);
    for i in 0..60u64 {
        let spec = Spec::small(1 + i, i);
        put(&mut net.node(0).store, &format!("obj{i:03}"), &spec);
        // targets hold most objects already at the same version
        if i % 5 != 0 {
            put(&mut net.node(1).store, &format!("obj{i:03}"), &spec);
        }
        if i % 7 != 0 {
            put(&mut net.node(2).store, &format!("obj{i:03}"), &spec);
        }
    }
    // stale versions on the targets
    for i in [3u64, 11, 29] {
        put(
            &mut net.node(1).store,
            &format!("obj{i:03}"),
            &Spec::small(i, 5000 + i),
        );
        put(&mut net.node(2).store, &format!("obj{i:03}"), &Spec::big(i, i));
    }
    // objects the primary deleted (interleaved in hash order with the others), and a big one on osd.1 only
    for i in 0..15u64 {
        put(&mut net.node(1).store, &format!("gone{i}"), &Spec::small(2, i));
        if i % 2 == 0 {
            put(&mut net.node(2).store, &format!("gone{i}"), &Spec::small(2, i));
        }
    }
    put(&mut net.node(1).store, "gone-big", &Spec::big(3, 3));
    net.with(0, |_, bf, ctx| bf.start(ctx, vec![1, 2]));
    net.run();

    assert_same(&mut net, 0, 1);
    assert_same(&mut net, 0, 2);
    assert_eq!(net.dump(1).len(), 60);
    let mut done = net.node(0).backfill_done.clone();
    done.sort();
    assert_eq!(done, vec![1, 2]);
    for osd in [1, 2] {
        let lbs = net.node(osd).last_backfill.clone();
        assert_monotonic(&lbs);
    }
    // only what differed was copied: osd.1 lacked 12 and had 3 stale, osd.2 lacked 9 and had 3 stale
    let p = net.node(0).bf.progress();
    assert_eq!(p.objects_recovered, 12 + 3 + 9 + 3);
    assert!(net.sent[&rep_msg::PG_BACKFILL_REMOVE] >= 2);
    assert!(net.max_in_flight <= 2);
}

#[test]
fn write_between_scans_is_seen() {
    // the primary's side is read fresh at every step: an object created after backfill started but before
    // the cursor reached it is copied; one deleted before the cursor reached it is not
    let mut net = Net::new(&[0, 1], 1, 1 << 20);
    for i in 0..40u64 {
        put(
            &mut net.node(0).store,
            &format!("obj{i:03}"),
            &Spec::small(1 + i, i),
        );
    }
    net.with(0, |_, bf, ctx| bf.start(ctx, vec![1]));
    // let a few objects go
    for _ in 0..6 {
        net.step();
    }
    let cursor_ok = |net: &mut Net, name: &str| !net.node(0).bf.should_send_op(&[1].into(), 1, &hobj(name));
    // pick objects still ahead of the cursor
    let ahead: Vec<String> = (0..40u64)
        .map(|i| format!("obj{i:03}"))
        .filter(|n| cursor_ok(&mut net, n))
        .collect();
    assert!(ahead.len() > 10, "{}", ahead.len());
    // a new object ahead of the cursor (behind it, the core would replicate the write itself)
    let late = (0..100)
        .map(|i| format!("late{i}"))
        .find(|n| cursor_ok(&mut net, n))
        .unwrap();
    put(&mut net.node(0).store, &late, &Spec::small(500, 1));
    let victim = ahead[ahead.len() - 1].clone();
    remove(&mut net.node(0).store, &victim);
    net.run();
    assert_same(&mut net, 0, 1);
    assert!(net.dump(1).contains_key(&hobj(&late)));
    assert!(!net.dump(1).contains_key(&hobj(&victim)));
    // after backfill every write goes to the target again
    assert!(net.node(0).bf.should_send_op(&[1].into(), 1, &hobj("anything")));
}

/// Throughput of the engines on the simulated device (not a device benchmark: the simulator copies memory).
/// `cargo test --release -p osd-core --test recovery_backfill -- --ignored --nocapture`
#[test]
#[ignore]
fn backfill_throughput() {
    let big: u64 = std::env::var("RECOVERY_BENCH_BIG")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(128);
    let small: u64 = std::env::var("RECOVERY_BENCH_SMALL")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4000);
    let bytes = (big as usize) * (1 << 20) * 2 + (small as usize) * 16384 + (64 << 20);
    let mut net = Net::with_store_size(&[0, 1], 3, 8 << 20, bytes);
    let mb: Vec<u8> = (0..(1u32 << 20))
        .map(|i| i.wrapping_mul(2_654_435_761) as u8)
        .collect();
    for i in 0..big {
        let spec = Spec {
            version: 1 + i,
            extents: vec![(0, mb.clone())],
            ..Default::default()
        };
        put(&mut net.node(0).store, &format!("big{i}"), &spec);
    }
    for i in 0..small {
        put(
            &mut net.node(0).store,
            &format!("small{i}"),
            &Spec::small(1 + i, i),
        );
    }
    let t = std::time::Instant::now();
    net.with(0, |_, bf, ctx| bf.start(ctx, vec![1]));
    net.run();
    let secs = t.elapsed().as_secs_f64();
    let p = net.node(0).bf.progress();
    assert_eq!(net.node(0).backfill_done, vec![1]);
    println!(
        "backfill: {} objects, {:.1} MiB in {secs:.2} s: {:.0} objects/s, {:.1} MiB/s (max {} in flight)",
        p.objects_recovered,
        p.bytes_recovered as f64 / 1048576.0,
        p.objects_recovered as f64 / secs,
        p.bytes_recovered as f64 / 1048576.0 / secs,
        p.max_ops_in_flight
    );
}

#[test]
fn rejected_reservation_is_retried() {
    use ceph_msgs::CephMessage;
    use ceph_msgs::osd_rep::{MBackfillReserve, backfill_reserve};
    let mut net = Net::new(&[0, 1], 3, 1 << 20);
    for i in 0..20u64 {
        put(&mut net.node(0).store, &format!("obj{i}"), &Spec::small(1 + i, i));
    }
    net.with(0, |_, bf, ctx| bf.start(ctx, vec![1]));
    // the target answers too full
    while !net
        .bus
        .front()
        .is_some_and(|(f, _, m)| *f == 1 && m.msg_type == rep_msg::BACKFILL_RESERVE)
    {
        assert!(net.step());
    }
    let (from, to, msg) = net.bus.pop_front().unwrap();
    let mut grant = MBackfillReserve::from_message(&msg).unwrap();
    assert_eq!(grant.reserve_type, backfill_reserve::GRANT);
    grant.reserve_type = backfill_reserve::REJECT_TOOFULL;
    net.bus
        .push_front((from, to, grant.to_message(denc::CEPH_FEATURES_ALL)));
    net.run();
    assert!(
        !net.sent.contains_key(&rep_msg::PG_SCAN),
        "scanned without a reservation"
    );
    assert!(net.node(0).bf.is_active());
    let retry = net.node(0).bf.poll_timeout().unwrap();
    assert_eq!(retry, net.now + osd_core_backfill_retry());
    // too early: nothing; at the retry time the request goes again and backfill completes
    net.with(0, |_, bf, ctx| bf.tick(ctx));
    assert!(net.bus.is_empty());
    net.now = retry;
    net.with(0, |_, bf, ctx| bf.tick(ctx));
    net.run();
    assert_same(&mut net, 0, 1);
    assert_eq!(net.node(0).backfill_done, vec![1]);
    // REQUEST, (GRANT turned) REJECT, REQUEST, GRANT, RELEASE
    assert_eq!(net.sent[&rep_msg::BACKFILL_RESERVE], 5);
}

fn osd_core_backfill_retry() -> std::time::Duration {
    std::time::Duration::from_secs(30)
}

#[test]
fn same_version_written_this_interval_is_copied_anyway() {
    // while a PG waits for a backfill slot, a write may reach the target whole (or as a partial object) with
    // the new version; such copies are not trusted
    let mut net = Net::new(&[0, 1], 3, 1 << 20);
    let mut fresh = Spec::small(50, 1);
    fresh.epoch = INTERVAL + 1;
    put(&mut net.node(0).store, "fresh", &fresh);
    let mut partial = fresh.clone();
    partial.extents = vec![(40, b"only the tail".to_vec())];
    put(&mut net.node(1).store, "fresh", &partial);
    // an old object at the same version is trusted and not copied
    let old = Spec::small(7, 2);
    put(&mut net.node(0).store, "old", &old);
    put(&mut net.node(1).store, "old", &old);
    net.with(0, |_, bf, ctx| bf.start(ctx, vec![1]));
    net.run();
    assert_same(&mut net, 0, 1);
    assert_eq!(net.node(0).bf.progress().objects_recovered, 1);
}
