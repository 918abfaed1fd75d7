// SPDX-License-Identifier: LGPL-3.0-or-later
//! PG splits with several OsdShards per OSD (osd-core's `PgRouter`: a split child lives on its parent's shard)
//! and restarts that jump over a split.
//!
//! CI: size 1 on 3 OSDs with 2 and 3 shards per OSD, and size 3 on 4 OSDs with 2 shards, each with splits and
//! the other supported faults (`cargo xtask sim --seeds A..B --osds 3 --shards 2 --faults
//! crash,reset,partition,slow,split` replays a range).

use sim::{Config, Faults, run, run_many};

fn with_splits(size: u8, osds: u32, shards: u32, steps: u64) -> Config {
    Config {
        steps,
        osds,
        shards,
        pool_size: size,
        faults: Faults {
            pg_split: true,
            ..Faults::supported(size)
        },
        ..Config::new(0)
    }
}

fn seeds(base: Config, range: std::ops::Range<u64>) {
    let start = std::time::Instant::now();
    match run_many(&base, range.clone()) {
        Ok(r) => eprintln!(
            "size {} x {} shards, seeds {range:?}: {} passed in {:.1}s, {} epochs, {} writes acked, {} reads checked, \
             {} crashes",
            base.pool_size,
            base.shards,
            r.len(),
            start.elapsed().as_secs_f64(),
            r.iter().map(|x| u64::from(x.epochs)).sum::<u64>(),
            r.iter().map(|x| x.writes_acked).sum::<u64>(),
            r.iter().map(|x| x.reads_checked).sum::<u64>(),
            r.iter().map(|x| x.crashes).sum::<u64>()
        ),
        Err(f) => panic!("{f}"),
    }
}

#[test]
fn ci_split_2_shards_size1() {
    seeds(with_splits(1, 3, 2, 1500), 0..25);
}

#[test]
fn ci_split_3_shards_size1() {
    seeds(with_splits(1, 3, 3, 1500), 100..120);
}

#[test]
fn ci_split_2_shards_size3() {
    seeds(with_splits(3, 4, 2, 1500), 200..215);
}

/// Regression (was `finding_split_across_restart_loses_objects_seed1`): an acknowledged object vanished after a
/// restart across a PG split (size 1). The OSD crashed with its PGs durable, pool 1 split while it was down,
/// and the restarted OSD's first map was already past the split: the loaded parent was never split, its child
/// was created empty, and the read answered ENOENT. Stored PGs now split on load when their collection's split
/// bits are older than the map's pg_num. `cargo xtask sim --seed 1 --steps 3000 --osds 3 --faults crash,split`
/// (also seeds 0, 9, 12, 13, 18, 20), with 1 and 2 shards.
#[test]
fn regression_split_across_restart_loses_objects() {
    for shards in [1, 2] {
        for seed in [0, 1, 9, 12, 13, 18, 20] {
            let cfg = Config {
                seed,
                shards,
                faults: Faults {
                    crash: true,
                    pg_split: true,
                    ..Faults::NONE
                },
                ..Config::new(seed)
            };
            if let Err(f) = run(&cfg) {
                panic!("{f}");
            }
        }
    }
}

/// Regression: `cargo xtask sim --seed 10 --steps 3000 --osds 3 --faults
/// crash,reset,partition,slow,out-in,pools,split` (size 1, 2 shards per OSD) failed with "two writes on 1/obj-6
/// acknowledged at the same version 26". osd.0 was marked out and kept its copy of pg 1.4 as a stray while osd.2
/// served it alone and acknowledged v25-v27, then crashed; two splits rebuilt osd.0's peering state and forgot
/// the interval osd.2 served (the later ones could not have gone read-write: osd.2 was dead). Marked in again
/// with osd.2 down, osd.0 activated with its old copy and reused v25-v26. A split now records the interval it
/// ends (osd-core's `split_keeps_the_interval_it_ends`).
#[test]
fn regression_split_forgets_the_interval_it_ends() {
    let cfg = Config {
        faults: Faults::ALL,
        ..Config::new(10)
    };
    if let Err(f) = run(&cfg) {
        panic!("{f}");
    }
}

/// Regression: `cargo xtask sim --seed 0 --steps 3000 --osds 3 --faults
/// crash,reset,partition,slow,out-in,pools,split` (size 1, 2 shards per OSD) failed with "read of 1/obj-5
/// returned absent; newest write acknowledged before it is v57", and seed 55 (1 shard per OSD) with a read of
/// 1/obj-8 returning v1's data after v33 was acknowledged. osd.1 served the PG and crashed without the
/// monitor noticing; marked out, the PG moved to osd.2, whose peering waited for osd.1 and never went active;
/// osd.2 marked out, the PG moved to osd.0, which never held it. osd.0 took only the PG's last placement (osd.2)
/// as history, probed osd.2 (empty) and went active empty. A shard now keeps each PG's past intervals from the
/// maps (osd-core's `a_pg_moved_twice_keeps_the_interval_before_the_last`). Seed 51 failed on the way (a split
/// child first placed on an OSD after mapping nowhere got no history; `a_split_child_first_placed_later_keeps_its_parents_history`).
#[test]
fn regression_pg_moved_twice_forgets_the_interval_before_the_last() {
    for seed in [0, 55, 51] {
        let cfg = Config {
            faults: Faults::ALL,
            ..Config::new(seed)
        };
        if let Err(f) = run(&cfg) {
            panic!("seed {seed}: {f}");
        }
    }
}
