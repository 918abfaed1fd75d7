// SPDX-License-Identifier: LGPL-3.0-or-later
//! A PG's history across placements and restarts. A PG of an existing pool that a map newly places on an OSD
//! must not go active empty: its first primary there takes the PG's earlier placement as history, probes the
//! OSDs that held it and serves their writes. A restarted OSD replays every epoch it missed, so an interval
//! that began and ended while it was down (another OSD serving alone) keeps its PGs from serving stale copies.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::Cluster;

/// Size 2 / min_size 1 on 3 OSDs: every OSD is marked out (the PGs map nowhere), then one is marked in and
/// becomes the only OSD of every PG, including PGs it never held. Every acknowledged write stays readable.
#[test]
fn pg_newly_placed_here_keeps_acknowledged_writes() {
    let mut c = Cluster::new(3, 2, 1, 4);
    let mut tids = Vec::new();
    for i in 0..24 {
        tids.push(c.write_full(&format!("p{i}"), format!("placed {i}").as_bytes()));
    }
    c.run();
    for t in &tids {
        assert_eq!(c.reply(*t).unwrap().result, 0);
    }
    c.publish(|b| {
        for o in 0..3 {
            b.mark_out(o).unwrap();
        }
    });
    c.run();
    c.advance_time(Duration::from_secs(1));
    c.publish(|b| {
        b.mark_in(0).unwrap();
    });
    c.run();
    c.settle(20);
    read_all(&mut c, 24, |i| format!("p{i}"), "placed");
}

/// Size 2 / min_size 1 on 2 OSDs. osd.1 stops; osd.0 serves alone (and has its up_thru recorded), taking newer
/// writes; then osd.0 stops too. osd.1 restarts while osd.0 is still down: it replays the epochs it missed, so
/// its PGs know the interval in which osd.0 went read-write alone and wait for it (down) instead of serving the
/// old copies (with only the current map osd.1 would see one long interval in which it acted itself, and serve
/// `v1`). When osd.0 returns, every object reads back as last acknowledged.
#[test]
fn restart_replays_an_interval_it_missed() {
    let mut c = Cluster::new(2, 2, 1, 4);
    let n = 16;
    let mut tids = Vec::new();
    for i in 0..n {
        tids.push(c.write_full(&format!("m{i}"), format!("v1 {i}").as_bytes()));
    }
    c.run();
    c.stop(1);
    c.settle(2);
    for i in 0..n {
        tids.push(c.write_full(&format!("m{i}"), format!("v2 {i}").as_bytes()));
    }
    c.run();
    for t in &tids {
        assert_eq!(c.reply(*t).map(|r| r.result), Some(0), "write {t}");
    }
    c.stop(0);
    let epoch_down = c.map.epoch;
    c.restart(1);
    c.settle(3);
    for i in 0..n {
        let got = c.read_eventually(&format!("m{i}"), 2);
        assert!(
            got.is_none() || got.as_deref() == Some(format!("v2 {i}").as_bytes()),
            "m{i}: osd.1 served a stale copy {got:?} while osd.0 was down (restarted after epoch {epoch_down})"
        );
    }
    for r in c.osds[&1].pg_stats() {
        assert!(
            !r.primary || r.state & peering::pg_state::ACTIVE == 0,
            "osd.1 went active without osd.0: {r:?}"
        );
    }
    c.restart(0);
    c.settle(10);
    for i in 0..n {
        let got = c.read_eventually(&format!("m{i}"), 5);
        assert_eq!(
            got.expect("acknowledged object lost or unreadable"),
            format!("v2 {i}").as_bytes()
        );
    }
}

/// Size 2 / min_size 1 on 5 OSDs. osd.0 stops; while it is down osd.3 stops too and is marked out, so PGs move
/// and take writes on the OSDs left. osd.0 restarts into a map that makes it the primary of PGs it never held.
/// Their history comes from the placement osd.0 persisted before it stopped (not "every up OSD"): it probes only
/// the OSDs of that placement and of the current mapping, and every acknowledged write stays readable.
#[test]
fn restart_takes_newly_placed_pgs_history_from_the_persisted_placement() {
    use std::collections::BTreeSet;

    use ceph_msgs::osd_rep::rep_msg;
    use ferrostore::{Store, StoreConfig};
    use osd_core::{OsdShard, PgReport};

    let mut c = Cluster::new(5, 2, 1, 64);
    let mut tids = Vec::new();
    for i in 0..40 {
        tids.push(c.write_full(&format!("r{i}"), format!("before {i}").as_bytes()));
    }
    c.run();
    let held_before: BTreeSet<_> = c.osds[&0].pgs().into_iter().collect();
    let map_before = c.map.clone();
    c.stop(0);
    c.stop(3);
    c.publish(|b| {
        b.mark_out(3).unwrap();
    });
    c.run();
    c.advance_time(Duration::from_secs(1));
    // PGs whose two OSDs are both down wait for osd.0; the others take these writes now
    for i in 0..40 {
        tids.push(c.write_full(&format!("r{i}"), format!("after {i}").as_bytes()));
    }
    c.run();
    // restart osd.0 by hand so the first map's peering messages can be looked at before they are delivered
    let store = c.stopped.remove(&0).unwrap();
    let dev = store.umount().unwrap();
    let store = Store::mount(dev, 0, StoreConfig::default()).unwrap();
    // osd.0 is marked up; a pg_temp then makes it the primary of every PG now mapped to it that it never held
    // (as a primary's pg_temp request would), and the restarted shard starts with that map
    c.publish(|b| {
        b.mark_up(0, 100).unwrap();
    });
    let temps: Vec<(denc::PgId, Vec<i32>)> = (0..64)
        .map(|seed| denc::PgId::new(1, seed))
        .filter(|pg| !held_before.iter().any(|s| s.pgid == *pg))
        .filter_map(|pg| {
            let ua = c.map.pg_to_up_acting_osds(pg).ok()?;
            let other = ua.up.iter().copied().find(|&o| o != 0)?;
            ua.up.contains(&0).then(|| (pg, vec![0, other]))
        })
        .collect();
    c.osds.insert(0, OsdShard::new(c.config(0), store));
    c.publish(|b| {
        for (pg, acting) in temps {
            b.set_pg_temp(pg, acting);
        }
    });
    // peering messages wait for the persisted PG state to be durable: let the stores catch up (nothing is
    // delivered yet)
    for _ in 0..10 {
        c.drain_outputs();
        c.pump_stores();
    }
    c.drain_outputs();
    let reports: Vec<PgReport> = c.osds[&0].pg_stats();
    let new_primary: Vec<&PgReport> = reports
        .iter()
        .filter(|r| r.primary && !held_before.contains(&r.spgid))
        .collect();
    assert!(
        !new_primary.is_empty(),
        "the scenario must make osd.0 the primary of a PG it never held"
    );
    let up_others = (1..5).filter(|&o| c.map.is_up(o)).count();
    let mut narrower = 0;
    for r in &new_primary {
        let probed: BTreeSet<i32> = c
            .bus
            .iter()
            .filter(|(f, _, m)| *f == 0 && m.msg_type == rep_msg::PG_QUERY2)
            .filter(|(_, _, m)| osd_core::route_peer_message(m) == Some(r.spgid))
            .map(|(_, t, _)| *t)
            .collect();
        let before = map_before.pg_to_up_acting_osds(r.spgid.pgid).unwrap();
        let history: BTreeSet<i32> = before
            .acting
            .iter()
            .chain(&before.up)
            .chain(&r.acting)
            .chain(&r.up)
            .copied()
            .filter(|&o| o != 0)
            .collect();
        assert!(!probed.is_empty(), "pg {} probes nobody", r.spgid);
        assert!(
            probed.is_subset(&history),
            "pg {} probes {probed:?}, not only the OSDs of its history {history:?}",
            r.spgid
        );
        if probed.len() < up_others {
            narrower += 1;
        }
    }
    assert!(narrower > 0, "every newly placed PG probed every up OSD");
    c.run();
    c.settle(20);
    // writes sent to a primary that lost the PG since are resent, as the client does on a new map
    for _ in 0..3 {
        for t in tids.clone() {
            if c.reply(t).is_none() {
                c.resend(t);
            }
        }
        c.run();
        for _ in 0..5 {
            c.advance_time(Duration::from_secs(1));
        }
    }
    for t in &tids {
        assert_eq!(
            c.reply(*t).map(|r| r.result),
            Some(0),
            "write {t} not acknowledged"
        );
    }
    for i in 0..40 {
        let got = c.read_eventually(&format!("r{i}"), 5);
        assert_eq!(
            got.expect("acknowledged object lost or unreadable"),
            format!("after {i}").as_bytes()
        );
    }
}

/// Size 1 on 2 OSDs (the simulator's seed 10 with `--faults all`). osd.0 is marked out: its PGs move to osd.1,
/// which takes newer writes. osd.1 then stops without the monitor noticing, and the pool splits while osd.0
/// holds its old copies as a stray (the split rebuilds osd.0's peering state). osd.1 is marked down and osd.0 in
/// again: osd.0's past intervals must still hold the interval in which osd.1 went read-write, so its PGs wait
/// for osd.1 (down) instead of serving the old copies and reusing the versions of writes osd.1 acknowledged.
/// The intervals after the split cannot have gone read-write (osd.1 never had an up_thru in them), so only the
/// split's record of the interval it ended keeps osd.1 in the prior set.
#[test]
fn split_keeps_the_interval_it_ends() {
    let mut c = Cluster::new(2, 1, 1, 4);
    let n = 48;
    let name = |i: u32| format!("s{i}");
    for i in 0..n {
        c.write_full(&name(i), format!("v1 {i}").as_bytes());
    }
    c.run();
    let on_osd0: Vec<u32> = (0..n).filter(|&i| c.locate(&name(i)).2 == 0).collect();
    assert!(!on_osd0.is_empty(), "no object has its PG on osd.0");
    c.publish(|b| {
        b.mark_out(0).unwrap();
    });
    c.run();
    c.settle(2);
    let mut tids = Vec::new();
    for i in 0..n {
        tids.push(c.write_full(&name(i), format!("v2 {i}").as_bytes()));
    }
    c.run();
    for t in &tids {
        assert_eq!(c.reply(*t).map(|r| r.result), Some(0), "write {t}");
    }
    c.stop_unnoticed(1);
    c.publish(|b| {
        b.split_pg_num(1, 8).unwrap();
    });
    c.run();
    // both sides of the split are checked: objects that stayed in a parent and objects that moved to a child
    let seeds: Vec<u32> = on_osd0.iter().map(|&i| c.locate(&name(i)).0.pgid.seed).collect();
    assert!(
        seeds.iter().any(|&s| s < 4) && seeds.iter().any(|&s| s >= 4),
        "{seeds:?}"
    );
    c.publish(|b| {
        b.mark_down(1).unwrap();
        b.mark_in(0).unwrap();
    });
    c.run();
    c.settle(3);
    for &i in &on_osd0 {
        assert_eq!(c.locate(&name(i)).2, 0, "{} moved off osd.0", name(i));
        let got = c.read_eventually(&name(i), 2);
        assert!(
            got.is_none() || got.as_deref() == Some(format!("v2 {i}").as_bytes()),
            "{}: osd.0 served a stale copy {got:?} while osd.1 was down: {:?}",
            name(i),
            &c.logs[c.logs.len().saturating_sub(20)..]
        );
    }
    c.restart(1);
    c.settle(10);
    for i in 0..n {
        let got = c.read_eventually(&name(i), 5);
        assert_eq!(
            got.expect("acknowledged object lost or unreadable"),
            format!("v2 {i}").as_bytes(),
            "{}",
            name(i)
        );
    }
}

/// Write `"{ver} {i}"` to each of `n` objects and check that every write is acknowledged.
fn write_all(c: &mut Cluster, n: u32, name: impl Fn(u32) -> String, ver: &str) {
    let tids: Vec<u64> = (0..n)
        .map(|i| c.write_full(&name(i), format!("{ver} {i}").as_bytes()))
        .collect();
    c.run();
    c.settle(1);
    for t in &tids {
        assert_eq!(c.reply(*t).map(|r| r.result), Some(0), "write {t}");
    }
}

/// Every one of `n` objects reads back as `"{ver} {i}"`.
fn read_all(c: &mut Cluster, n: u32, name: impl Fn(u32) -> String, ver: &str) {
    for i in 0..n {
        let got = c.read_eventually(&name(i), 5);
        assert_eq!(
            got.expect("acknowledged object lost or unreadable"),
            format!("{ver} {i}").as_bytes(),
            "{} (pg {})",
            name(i),
            c.locate(&name(i)).0
        );
    }
}

/// A read of `name` that the cluster either does not answer yet (the PG waits for an OSD) or answers with
/// `want`: never with ENOENT or older data.
fn read_not_stale(c: &mut Cluster, name: &str, want: &str) {
    let r = c.read(name);
    c.run();
    c.settle(2);
    if let Some(rep) = c.reply(r) {
        assert_eq!(
            (rep.result, c.read_data(r).as_deref()),
            (0, Some(want.as_bytes())),
            "{name}: served without its acknowledged write: {:?}",
            &c.logs[c.logs.len().saturating_sub(20)..]
        );
    }
}

/// Size 1 on 3 OSDs (`ferro-sim --seed 0 --faults all`). osd.1 serves its PGs, then stops without the monitor
/// noticing. Marked out, its PGs move to osd.0 or osd.2, which cannot peer (osd.1 holds the writes and does not
/// answer) and never go active; osd.2 is marked out too, so the PGs that went to it move on to osd.0, which
/// never held them. osd.0 must still probe osd.1 (the interval in which it went read-write is two placements
/// back) and wait for it — down once osd.1 is marked down — instead of activating empty; when osd.1 returns,
/// every write reads back.
#[test]
fn a_pg_moved_twice_keeps_the_interval_before_the_last() {
    let mut c = Cluster::new(3, 1, 1, 16);
    let n = 64;
    let name = |i: u32| format!("t{i}");
    write_all(&mut c, n, name, "v1");
    let on_osd1: Vec<u32> = (0..n).filter(|&i| c.locate(&name(i)).2 == 1).collect();
    c.stop_unnoticed(1);
    c.publish(|b| {
        b.mark_out(1).unwrap();
    });
    c.run();
    // the objects whose PG goes osd.1 → osd.2 → osd.0
    let twice: Vec<u32> = on_osd1
        .iter()
        .copied()
        .filter(|&i| c.locate(&name(i)).2 == 2)
        .collect();
    assert!(!twice.is_empty(), "no PG of osd.1 moved to osd.2");
    c.publish(|b| {
        b.mark_out(2).unwrap();
    });
    c.run();
    for &i in &twice {
        assert_eq!(c.locate(&name(i)).2, 0);
        read_not_stale(&mut c, &name(i), &format!("v1 {i}"));
    }
    c.publish(|b| {
        b.mark_down(1).unwrap();
    });
    c.run();
    for &i in &twice {
        read_not_stale(&mut c, &name(i), &format!("v1 {i}"));
    }
    c.restart(1);
    c.settle(10);
    read_all(&mut c, n, name, "v1");
}

/// Size 1 on 2 OSDs (`ferro-sim --seed 51 --faults all`, with the fix above). osd.0 is out, so osd.1 holds
/// every PG; then osd.1 is marked out in the epoch pool 1 splits: the children map nowhere, and osd.0, marked
/// in, is the first OSD a child is ever placed on. The child's history is its parent's (osd.1 acting), so
/// osd.0 must take the child's objects from osd.1 rather than activate it empty.
#[test]
fn a_split_child_first_placed_later_keeps_its_parents_history() {
    let mut c = Cluster::new(2, 1, 1, 4);
    let n = 48;
    let name = |i: u32| format!("c{i}");
    c.publish(|b| {
        b.mark_out(0).unwrap();
    });
    c.run();
    c.settle(2);
    write_all(&mut c, n, name, "v1");
    c.publish(|b| {
        b.mark_out(1).unwrap();
        b.split_pg_num(1, 8).unwrap();
    });
    c.run();
    let children: Vec<u32> = (0..n).filter(|&i| c.locate(&name(i)).0.pgid.seed >= 4).collect();
    assert!(!children.is_empty(), "no object moved to a child");
    c.publish(|b| {
        b.mark_in(0).unwrap();
    });
    c.run();
    c.settle(10);
    read_all(&mut c, n, name, "v1");
}
