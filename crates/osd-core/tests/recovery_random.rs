// SPDX-License-Identifier: LGPL-3.0-or-later
//! Seeded random divergence: 2–3 OSDs hold random subsets of an authoritative object set (current, stale,
//! absent, or still present after a delete), with missing sets as a log would give them, random
//! `osd_recovery_max_active` and chunk sizes. After recovery every OSD holds exactly the authoritative objects
//! at their versions, identical byte for byte, and the throttle held. `RECOVERY_SEEDS=a..b` runs other seeds;
//! a failing seed prints the command that replays it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod recovery_harness;

use std::collections::BTreeMap;

use osd_types::pg_missing::PgMissing;
use recovery_harness::*;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn random_spec(r: &mut Rng, version: u64) -> Spec {
    let mut extents = Vec::new();
    for _ in 0..r.below(3) {
        let off = r.below(200_000);
        let len = 1 + r.below(40_000) as usize;
        let b = r.next() as u8;
        extents.push((off, (0..len).map(|i| b.wrapping_add(i as u8)).collect()));
    }
    Spec {
        version,
        epoch: 0,
        extents,
        xattrs: if r.below(2) == 0 {
            vec![("_user.a", vec![r.next() as u8; 1 + r.below(200) as usize])]
        } else {
            vec![]
        },
        omap_header: if r.below(3) == 0 { vec![7; 10] } else { vec![] },
        omap: (0..r.below(60))
            .map(|k| {
                (
                    format!("k{k:03}").into_bytes(),
                    vec![r.next() as u8; 1 + r.below(300) as usize],
                )
            })
            .collect(),
    }
}

fn run_seed(seed: u64) {
    let mut r = Rng(seed);
    let n = 2 + r.below(2) as i32;
    let osds: Vec<i32> = (0..n).collect();
    let max_active = 1 + r.below(4) as u32;
    let chunk = [4 << 10, 16 << 10, 64 << 10, 1 << 20][r.below(4) as usize];
    let mut net = Net::new(&osds, max_active, chunk);
    let objects = 5 + r.below(25);
    // authoritative contents: name -> Some(spec) or None (deleted at version v)
    let mut auth: BTreeMap<String, (u64, Option<Spec>)> = BTreeMap::new();
    let mut sets: BTreeMap<i32, PgMissing> = BTreeMap::new();
    for i in 0..objects {
        let name = format!("r{i}");
        let v = 100 + i;
        let deleted = r.below(5) == 0;
        let spec = (!deleted).then(|| random_spec(&mut r, v));
        // who is up to date; at least one OSD has it unless deleted
        let mut current: Vec<bool> = osds.iter().map(|_| r.below(3) != 0).collect();
        if !deleted && !current.iter().any(|c| *c) {
            let k = r.below(n as u64) as usize;
            current[k] = true;
        }
        for (k, &osd) in osds.iter().enumerate() {
            let store = &mut net.node(osd).store;
            let m = sets.entry(osd).or_default();
            if current[k] {
                if let Some(s) = &spec {
                    put(store, &name, s);
                }
                continue;
            }
            // behind: an older copy or none
            let old = r.below(2) == 0;
            if old {
                put(store, &name, &random_spec(&mut r, i + 1));
            }
            if deleted && !old {
                continue; // never had it: nothing to do
            }
            let have = if old { ev(i + 1) } else { denc::Eversion::default() };
            m.add(hobj(&name), ev(v), have, deleted);
        }
        auth.insert(name, (v, spec));
    }
    sets.retain(|_, m| !m.is_empty());
    for (&osd, m) in &sets {
        net.set_missing(osd, m.clone());
    }
    let s2 = sets.clone();
    net.with(0, move |rec, _, ctx| rec.start(ctx, s2));
    net.run();

    let d0 = net.dump(0);
    let want: Vec<denc::HObject> = {
        let mut v: Vec<_> = auth
            .iter()
            .filter(|(_, (_, s))| s.is_some())
            .map(|(k, _)| hobj(k))
            .collect();
        v.sort();
        v
    };
    assert_eq!(d0.keys().cloned().collect::<Vec<_>>(), want, "primary object set");
    for &osd in &osds[1..] {
        assert_eq!(net.dump(osd), d0, "osd.{osd} differs from the primary");
    }
    for (name, (v, spec)) in &auth {
        if spec.is_some() {
            let store = &mut net.node(0).store;
            let cid = pg::keys::collection_id(&spgid());
            let oi = store
                .getattr(&cid, &pg::keys::object_key(&hobj(name), &spgid()), b"_")
                .unwrap();
            let oi: osd_types::ObjectInfo = denc::Decode::decode_all(oi).unwrap();
            assert_eq!(oi.version, ev(*v), "{name}");
        }
    }
    assert!(net.max_in_flight <= u64::from(max_active));
    let p = net.node(0).rec.progress();
    assert_eq!(p.objects_degraded, 0);
    assert!(!net.node(0).rec.is_active());
    for &osd in &osds {
        assert!(net.node(osd).peering.missing().is_empty(), "osd.{osd}");
    }
}

#[test]
fn random_divergence_recovers() {
    let range = std::env::var("RECOVERY_SEEDS").ok().and_then(|s| {
        let (a, b) = s.split_once("..")?;
        Some(a.parse::<u64>().ok()?..b.parse::<u64>().ok()?)
    });
    for seed in range.unwrap_or(0..25) {
        let ok = std::panic::catch_unwind(|| run_seed(seed));
        if ok.is_err() {
            panic!(
                "seed {seed} failed; replay: RECOVERY_SEEDS={seed}..{} cargo test -p osd-core --test recovery_random",
                seed + 1
            );
        }
    }
}

fn run_backfill_seed(seed: u64) {
    let mut r = Rng(seed ^ 0x0bac_f111);
    let n = 2 + r.below(2) as i32;
    let osds: Vec<i32> = (0..n).collect();
    let max_active = 1 + r.below(4) as u32;
    let chunk = [4 << 10, 16 << 10, 64 << 10, 1 << 20][r.below(4) as usize];
    let mut net = Net::new(&osds, max_active, chunk);
    let objects = r.below(40);
    for i in 0..objects {
        let name = format!("b{i}");
        let spec = random_spec(&mut r, 100 + i);
        put(&mut net.node(0).store, &name, &spec);
        for &t in &osds[1..] {
            match r.below(4) {
                0 => {}
                1 => put(&mut net.node(t).store, &name, &random_spec(&mut r, 1 + i)),
                _ => put(&mut net.node(t).store, &name, &spec),
            }
        }
    }
    // objects the primary no longer has
    for i in 0..r.below(20) {
        for &t in &osds[1..] {
            if r.below(2) == 0 {
                put(
                    &mut net.node(t).store,
                    &format!("gone{i}"),
                    &random_spec(&mut r, 1),
                );
            }
        }
    }
    let targets = osds[1..].to_vec();
    net.with(0, move |_, bf, ctx| bf.start(ctx, targets));
    net.run();
    let d0 = net.dump(0);
    assert_eq!(d0.len() as u64, objects);
    for &t in &osds[1..] {
        assert_eq!(net.dump(t), d0, "osd.{t} differs from the primary");
        let lbs = net.node(t).last_backfill.clone();
        assert!(lbs.windows(2).all(|w| w[0] < w[1]), "last_backfill went back");
        assert!(lbs.last().is_some_and(|l| l.is_max()));
    }
    let mut done = net.node(0).backfill_done.clone();
    done.sort();
    assert_eq!(done, osds[1..].to_vec());
    assert!(net.max_in_flight <= u64::from(max_active));
}

#[test]
fn random_backfill_converges() {
    let range = std::env::var("RECOVERY_SEEDS").ok().and_then(|s| {
        let (a, b) = s.split_once("..")?;
        Some(a.parse::<u64>().ok()?..b.parse::<u64>().ok()?)
    });
    for seed in range.unwrap_or(0..25) {
        let ok = std::panic::catch_unwind(|| run_backfill_seed(seed));
        if ok.is_err() {
            panic!(
                "seed {seed} failed; replay: RECOVERY_SEEDS={seed}..{} cargo test -p osd-core --test recovery_random random_backfill",
                seed + 1
            );
        }
    }
}
