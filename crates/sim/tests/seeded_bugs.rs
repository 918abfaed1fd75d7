// SPDX-License-Identifier: LGPL-3.0-or-later
//! Issue 8's acceptance: deliberately broken components make the simulator fail within its CI seed budget.
//! Each seeded bug is a fault-injection switch in the crate that owns the code (default off), set by `--bug`:
//!
//! * (a) acknowledging before every replica has the write: `pg::PgConfig::fault_ack_before_replicas`
//!   ([`Bug::AckBeforeReplicas`]); a cheap stand-in forges each replica's ONDISK answer in the network
//!   ([`Bug::AckWithoutReplica`]).
//! * (b) authoritative-log selection: `peering::Config::fault_pick_worst_log` ([`Bug::WorstLog`]).
//! * (c) WAL replay ordering: `ferrostore::StoreConfig::fault_replay_order` ([`Bug::ReplayOrder`]); a stand-in
//!   device acknowledges flushes without making anything durable ([`Bug::LyingFlush`]).
//!
//! Each test also runs the failing seed without the bug, so a failure is the bug's, not the configuration's.

use sim::{Bug, Config, Faults, run};

/// The first failing seed in `seeds`, with its report.
fn first_failure(base: &Config, seeds: std::ops::Range<u64>) -> Option<(u64, Box<sim::Failure>)> {
    for s in seeds {
        let cfg = Config {
            seed: s,
            ..base.clone()
        };
        if let Err(f) = run(&cfg) {
            return Some((s, f));
        }
    }
    None
}

fn caught(base: Config, budget: std::ops::Range<u64>) {
    let (seed, f) = first_failure(&base, budget.clone())
        .unwrap_or_else(|| panic!("{:?} not caught in seeds {budget:?}", base.bug));
    eprintln!("{:?} caught at seed {seed}:\n{f}", base.bug);
    assert!(f.repro.contains(&format!("--seed {seed} ")), "{}", f.repro);
    // The same seed without the bug passes: the failure is the bug's.
    let clean = Config {
        seed,
        bug: Bug::None,
        ..base
    };
    if let Err(f) = run(&clean) {
        panic!("seed {seed} fails without the bug too:\n{f}");
    }
}

#[test]
fn lying_flush_is_caught() {
    caught(
        Config {
            steps: 1500,
            bug: Bug::LyingFlush,
            faults: Faults {
                crash: true,
                ..Faults::supported(1)
            },
            ..Config::new(0)
        },
        0..50,
    );
}

#[test]
fn ack_without_replica_is_caught() {
    caught(
        Config {
            steps: 1500,
            osds: 4,
            pool_size: 3,
            bug: Bug::AckWithoutReplica,
            faults: Faults::supported(3),
            ..Config::new(0)
        },
        0..50,
    );
}

/// Size 1 with crashes: every restart replays the WAL.
fn crashes_size1(bug: Bug) -> Config {
    Config {
        steps: 1500,
        bug,
        faults: Faults {
            crash: true,
            ..Faults::supported(1)
        },
        ..Config::new(0)
    }
}

/// Size 3 on 4 OSDs with the default fault menu for size 3.
fn replicated(bug: Bug) -> Config {
    Config {
        steps: 1500,
        osds: 4,
        pool_size: 3,
        bug,
        faults: Faults::supported(3),
        ..Config::new(0)
    }
}

#[test]
fn replay_order_is_caught() {
    caught(crashes_size1(Bug::ReplayOrder), 0..50);
}

/// Size 2 (min_size 1) on 3 OSDs, with the fault schedule that exposes an early ack (`Config::partition_crash`):
/// every partition between two OSDs is followed within 50-250 ms by a crash of one side. A PG's primary cut off
/// from its replica acknowledges writes only it holds (the bug), then it or the replica goes down, and the OSD
/// left serves without the acknowledged write (or a restarted replica that lost an unflushed rep op takes over);
/// without the bug those writes are not acknowledged until the replica has them or is out of the acting set.
/// Random chaos alone caught the bug in ~1-2 % of seeds (and, with restarted OSDs replaying missed maps, only in
/// seed 551 of 0..560); this schedule catches it in about one seed in eight (seeds 1, 7, 13, 20 of 0..30), and every
/// seed of 0..10 passes without the bug.
#[test]
fn ack_before_replicas_is_caught() {
    caught(
        Config {
            steps: 3000,
            osds: 3,
            pool_size: 2,
            bug: Bug::AckBeforeReplicas,
            faults: Faults {
                crash: true,
                partition: true,
                net_reset: true,
                ..Faults::NONE
            },
            partition_crash: true,
            ..Config::new(0)
        },
        0..20,
    );
}

#[test]
fn worst_log_is_caught() {
    caught(replicated(Bug::WorstLog), 0..50);
}

#[test]
fn a_seed_replays_exactly() {
    let cfg = Config {
        steps: 1500,
        ..Config::new(7)
    };
    let a = run(&cfg).map_err(|f| f.to_string()).expect("seed 7");
    let b = run(&cfg).map_err(|f| f.to_string()).expect("seed 7 again");
    assert_eq!(
        (
            a.events,
            a.messages,
            a.writes_acked,
            a.reads_checked,
            a.crashes,
            a.sim_time
        ),
        (
            b.events,
            b.messages,
            b.writes_acked,
            b.reads_checked,
            b.crashes,
            b.sim_time
        )
    );
}
