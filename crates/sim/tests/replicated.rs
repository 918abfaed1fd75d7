// SPDX-License-Identifier: LGPL-3.0-or-later
//! Replicated pools (osd-core's replication, peering, recovery) under every fault the core supports for them
//! (crash, reset, partition, slow, out/in, pool changes).
//!
//! CI: size 3 on 4 OSDs, seeds 0..50 at 1500 fault steps; size 2 on 3 OSDs, seeds 0..40 at 3000. Seeds marked
//! `#[ignore]` (none today) fail: each is a finding about the code under test, kept with the command that replays
//! it (`cargo test -p sim --test replicated -- --ignored` runs them all).

use sim::{Bug, Config, Faults, run, run_many};

fn replicated(size: u8, osds: u32, steps: u64) -> Config {
    Config {
        steps,
        osds,
        pool_size: size,
        faults: Faults::supported(size),
        ..Config::new(0)
    }
}

fn seeds(base: Config, range: std::ops::Range<u64>) {
    let start = std::time::Instant::now();
    match run_many(&base, range.clone()) {
        Ok(r) => eprintln!(
            "size {} seeds {range:?}: {} passed in {:.1}s, {} writes acked, {} reads checked, {} crashes",
            base.pool_size,
            r.len(),
            start.elapsed().as_secs_f64(),
            r.iter().map(|x| x.writes_acked).sum::<u64>(),
            r.iter().map(|x| x.reads_checked).sum::<u64>(),
            r.iter().map(|x| x.crashes).sum::<u64>()
        ),
        Err(f) => panic!("{f}"),
    }
}

#[test]
fn ci_size3_seeds_00_25() {
    seeds(replicated(3, 4, 1500), 0..25);
}

#[test]
fn ci_size3_seeds_25_50() {
    seeds(replicated(3, 4, 1500), 25..50);
}

/// Size 2 on 3 OSDs (min_size 1): crashes and partitions leave one OSD serving alone while the other is down, so
/// restarts must replay the epochs they missed (map history). Seeds 0..40 of the 0..500 sweep.
#[test]
fn ci_size2_seeds_00_40() {
    seeds(replicated(2, 3, 3000), 0..40);
}

fn one(cfg: Config) {
    if let Err(f) = run(&cfg) {
        panic!("{f}");
    }
}

/// Regression: a restarted OSD loaded its PGs without the interval they were in when it stopped (the first map
/// started a fresh interval), so an OSD that had been a stray or an old replica took its stale copy as the newest:
/// a deleted object read back, or two writes were acknowledged at one version (size 2, 3 OSDs). A loaded PG now
/// starts from its persisted placement (`with_last_map`), as Ceph replays the maps.
/// `cargo xtask sim --seed 0 --steps 3000 --osds 3 --size 2` (and 260, 355, 442)
#[test]
fn regression_restart_loses_the_open_interval_size2() {
    for seed in [0, 260, 355, 442] {
        one(Config {
            seed,
            ..replicated(2, 3, 3000)
        });
    }
}

/// Regression (map history): a restarted OSD got only the monitor's current map, so an interval that began and
/// ended while it was down (the other OSD serving alone, up_thru recorded) was unknown to it; its PGs saw one
/// long interval in which they acted themselves, went active without that OSD and served their old copies
/// (two writes acknowledged at one version: seed 498 at aedd051; a read returning an overwritten version: seed
/// 551 with `--bug no-map-replay`). A restarted OSD now replays every epoch after the newest it stored
/// (osd-core's map store, `Input::MapsPending`). Seeds 118, 281 and 51 are the session-3 findings of the same
/// class (their paths had moved before the fix and passed already at aedd051).
/// `cargo xtask sim --seed 498 --steps 3000 --osds 3 --size 2` (and 551, 118, 281, 51, 536)
#[test]
fn regression_restart_replays_missed_maps_size2() {
    for seed in [498, 551, 118, 281, 51, 536] {
        one(Config {
            seed,
            ..replicated(2, 3, 3000)
        });
    }
}

/// A seed of that list without map replay (the OSD restarts from the current map only) fails: the test above
/// guards the replay, not a lucky path. (Seed 551 was this check until ferrostore's checkpoints started writing
/// their nodes as runs, session 21: the store's IO changed the simulated timing and 551 no longer reaches the bug
/// without replay; 536 was the first seed of 16–1499 that does.)
#[test]
fn without_map_replay_a_stale_copy_is_served_seed536() {
    let cfg = Config {
        seed: 536,
        bug: sim::Bug::NoMapReplay,
        ..replicated(2, 3, 3000)
    };
    let f = run(&cfg).expect_err("seed 536 passes without map replay: pick another seed for this check");
    eprintln!(
        "caught as expected: {}",
        f.to_string().lines().next().unwrap_or("")
    );
}

// ---- findings (fail today; a seed's path changes when the code under test changes) ----

/// Regression (fixed in osd-core bed8216): an acknowledged write was lost after out/in (size 2, 3 OSDs). With two
/// OSDs marked out (still up) a PG mapped to the remaining OSD alone, which created it empty and served it
/// without the newer log/objects the out OSDs held. A newly placed PG now takes its last placement as history,
/// so peering probes the OSDs that hold it. `cargo xtask sim --seed 12 --steps 3000 --osds 3 --size 2` (and 19-22).
#[test]
fn regression_acked_write_lost_after_out_size2() {
    for seed in [12, 19, 20, 21, 22] {
        one(Config {
            seed,
            ..replicated(2, 3, 3000)
        });
    }
}

/// Regression: a primary stayed active+recovering forever (size 2, 3 OSDs) with an object "unfound": the only
/// copy was on an OSD outside the acting set that peering never asked (seed 5: a stray whose notify came after
/// GetInfo; seed 57: a stray that was down at activation and came back within the interval), and a stray whose
/// interval started later than the primary's dropped the pull. Peering now keeps Ceph's `might_have_unfound`
/// and asks those OSDs for their missing sets (`discover_all_missing`), recovery retries unfound objects on a
/// new source, and a pull is judged by its map epoch.
/// `cargo xtask sim --seed 5 --steps 3000 --osds 3 --size 2` (and 57)
#[test]
fn regression_recovery_never_converges_size2_seed5() {
    for seed in [5, 57] {
        one(Config {
            seed,
            ..replicated(2, 3, 3000)
        });
    }
}

/// Connection resets alone (no crash, partition or slow OSD) never leave a write waiting for the primaries'
/// overdue-resend timer (5 s). Half of the OSD↔OSD resets are noticed late by one end, which meanwhile sends
/// its commit replies on the dead session: the new session it opens on noticing makes the primary resend, and
/// the replica answers there. Run with that resend left out (`--bug no-reconnect-reset`, how ferro-osd worked
/// until session 18), seeds 3 and 6 need the timer. `cargo xtask sim --seed 3 --steps 20000 --osds 4 --size 3
/// --clients 4 --faults reset --late-notice` (here also 16 ops in flight per client, chaos every 10–110 ms).
#[test]
fn resets_alone_never_need_the_overdue_timer() {
    let cfg = |seed, bug| Config {
        seed,
        chaos_interval_ms: 100,
        late_notice: true,
        // many writes in flight, so that a reset often finds replies to lose
        clients: 4,
        max_inflight: 16,
        faults: Faults {
            net_reset: true,
            ..Faults::NONE
        },
        bug,
        ..replicated(3, 4, 20_000)
    };
    let overdue = |bug| -> Vec<u64> {
        (0..10)
            .map(|seed| match run(&cfg(seed, bug)) {
                Ok(r) => r.repops_resent_overdue,
                Err(f) => panic!("{f}"),
            })
            .collect()
    };
    let fixed = overdue(Bug::None);
    assert!(
        fixed.iter().all(|&n| n == 0),
        "rep ops resent when overdue, per seed: {fixed:?}"
    );
    let old = overdue(Bug::NoReconnectReset);
    eprintln!(
        "rep ops resent when overdue per seed: {fixed:?}; without the resend on a new session: {old:?}"
    );
    assert!(
        old.iter().sum::<u64>() > 0,
        "the late-noticed resets never lost a reply: the test exercises nothing"
    );
}
