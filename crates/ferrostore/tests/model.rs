// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)]
//! The engine against the in-memory model: after every transaction, after remounts, with fsck.

mod common;

use common::*;
use ferrostore::rng::Rng;
use ferrostore::{Store, StoreConfig};

#[test]
fn random_streams_match_model_across_remounts() {
    // FERRO_SEED=n: one seed; FERRO_SEED_FROM=a FERRO_SEED_COUNT=n: a range.
    let from = env_u64("FERRO_SEED_FROM").unwrap_or(0);
    let seeds = match (env_u64("FERRO_SEED"), env_u64("FERRO_SEED_COUNT")) {
        (Some(s), _) => s..s + 1,
        (None, Some(n)) => from..from + n,
        _ => 0..12,
    };
    for seed in seeds {
        let cfg = StoreConfig {
            node_cache_nodes: 16,
            max_dirty_nodes: 64,
            // a tiny onode/collection cache: entries come and go all the time
            meta_cache_entries: 3,
            // and a tiny extent cache (src/extcache.rs): chunks filled and evicted on almost every read
            extent_cache_entries: 5,
            ..Default::default()
        };
        let mut s = sim_store(seed, 8 << 20, 64 << 10, cfg.clone());
        let mut rng = Rng::new(seed);
        let mut model = Model::default();
        let t = setup_txn(3);
        model.apply(&t).unwrap();
        s.commit(&t).unwrap();
        for step in 0..300 {
            let t = random_txn(&mut rng, 3, 10);
            let want = model.apply(&t);
            if std::env::var("FERRO_DEBUG").is_ok() {
                eprintln!(
                    "step {step}: {:?} -> {want:?}",
                    t.ops
                        .iter()
                        .map(|o| format!("{o:?}").chars().take(400).collect::<String>())
                        .collect::<Vec<_>>()
                );
            }
            let got = if rng.chance(50) {
                s.commit(&t).map(|_| ())
            } else {
                s.queue_transaction(&t).map(|_| ())
            };
            assert_eq!(got.map_err(|e| e.errno()), want, "seed {seed} step {step}: {t:?}");
            if std::env::var("FERRO_DEBUG").is_ok() {
                let rep = s.fsck().unwrap();
                assert!(
                    rep.errors.is_empty(),
                    "seed {seed} step {step} fsck: {:?}",
                    rep.errors
                );
                let got = dump(&mut s).unwrap();
                assert!(got == model, "seed {seed} step {step}: {}", diff(&got, &model));
            }
            if let Err(e) = check_exists(&mut s, &model, 3, 10) {
                panic!("seed {seed} step {step}: {e} (FERRO_SEED={seed})");
            }
            if step % 7 == 0 {
                let mut ev = Vec::new();
                s.poll(&mut ev).unwrap();
            }
            if step % 25 == 0 {
                if let Err(e) = check_point_reads(&mut s, &model) {
                    panic!("seed {seed} step {step}: {e} (FERRO_SEED={seed})");
                }
                let got = dump(&mut s).unwrap();
                assert!(
                    got == model,
                    "seed {seed} step {step}: {} (FERRO_SEED={seed})",
                    diff(&got, &model)
                );
            }
            if step % 60 == 59 {
                let rep = s.fsck().unwrap();
                assert!(rep.errors.is_empty(), "seed {seed} fsck: {:?}", rep.errors);
                let dev = s.umount().unwrap();
                s = Store::mount(dev, 0, cfg.clone()).unwrap();
                let got = dump(&mut s).unwrap();
                assert!(
                    got == model,
                    "seed {seed} after remount at {step}: {}",
                    diff(&got, &model)
                );
            }
        }
        let rep = s.fsck().unwrap();
        assert!(rep.errors.is_empty(), "seed {seed} fsck: {:?}", rep.errors);
    }
}
