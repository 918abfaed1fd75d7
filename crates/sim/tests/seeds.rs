// SPDX-License-Identifier: LGPL-3.0-or-later
//! The CI seed budget: 200 seeds of the default configuration (3 OSDs, every fault the OSD core supports),
//! split over eight tests so the harness runs them in parallel and each stays well under a minute in the debug
//! profile. `SIM_SEEDS=A..B cargo test -p sim --test seeds -- --ignored range` runs any other range.

use sim::{Config, run_many};

/// Events with faults on, per seed, in the CI budget.
const CI_STEPS: u64 = 1500;

fn seeds(range: std::ops::Range<u64>) {
    let base = Config {
        steps: CI_STEPS,
        ..Config::new(0)
    };
    let start = std::time::Instant::now();
    match run_many(&base, range.clone()) {
        Ok(reports) => {
            let events: u64 = reports.iter().map(|r| r.events).sum();
            let acked: u64 = reports.iter().map(|r| r.writes_acked).sum();
            let checked: u64 = reports.iter().map(|r| r.reads_checked).sum();
            let crashes: u64 = reports.iter().map(|r| r.crashes).sum();
            let secs = start.elapsed().as_secs_f64();
            eprintln!(
                "seeds {range:?}: {} passed in {secs:.1}s ({:.1} seeds/s): {events} events, {acked} writes acked, \
                 {checked} reads checked, {crashes} crashes",
                reports.len(),
                reports.len() as f64 / secs
            );
        }
        Err(f) => panic!("{f}"),
    }
}

#[test]
fn ci_seeds_000_025() {
    seeds(0..25);
}

#[test]
fn ci_seeds_025_050() {
    seeds(25..50);
}

#[test]
fn ci_seeds_050_075() {
    seeds(50..75);
}

#[test]
fn ci_seeds_075_100() {
    seeds(75..100);
}

#[test]
fn ci_seeds_100_125() {
    seeds(100..125);
}

#[test]
fn ci_seeds_125_150() {
    seeds(125..150);
}

#[test]
fn ci_seeds_150_175() {
    seeds(150..175);
}

#[test]
fn ci_seeds_175_200() {
    seeds(175..200);
}

/// Any range: `SIM_SEEDS=1000..2000 cargo test --release -p sim --test seeds -- --ignored range`.
#[test]
#[ignore]
fn range() {
    let r = std::env::var("SIM_SEEDS").unwrap_or_else(|_| "0..1000".into());
    let (a, b) = r.split_once("..").expect("SIM_SEEDS=A..B");
    seeds(a.parse().expect("A")..b.parse().expect("B"));
}
