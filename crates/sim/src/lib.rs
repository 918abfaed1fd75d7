// SPDX-License-Identifier: LGPL-3.0-or-later
//! Deterministic multi-OSD simulation (issue 8). See docs/simulation.md.
//!
//! One thread, one seed, no real time or IO: K OSDs, each one or more `osd_core::OsdShard`s on one simulated
//! ferrostore device ([`disk`]), a model monitor publishing OSDMap epochs ([`mon`], built on
//! `osdmap::build`), a simulated network that carries every message as a msgr2 frame ([`wire`]), clients
//! issuing random RADOS ops ([`client`]) and an oracle checking what they see ([`oracle`]). [`run`] plays one
//! seed; a failure carries the command that replays it and the last events.

pub mod client;
pub mod disk;
pub mod mon;
pub mod oracle;
pub mod wire;
mod world;

use std::fmt;
use std::time::Duration;

/// Which faults the simulator injects while faults are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Faults {
    /// OSD process crash (power loss of its device: unflushed writes dropped, kept or torn), restart, remount.
    pub crash: bool,
    /// Connection resets (frames in flight lost, both ends told).
    pub net_reset: bool,
    /// Network partitions between two OSDs or a client and an OSD (with failure reports to the monitor).
    pub partition: bool,
    /// Slow OSDs (network and device).
    pub slow: bool,
    /// Mark OSDs out and in (data moves).
    pub out_in: bool,
    /// Create and delete a scratch pool.
    pub pool_changes: bool,
    /// Grow pool 1's pg_num (PG split) by one up to double, below 64 (pgp_num stays: children split in place).
    pub pg_split: bool,
}

impl Faults {
    /// Everything.
    pub const ALL: Faults = Faults {
        crash: true,
        net_reset: true,
        partition: true,
        slow: true,
        out_in: true,
        pool_changes: true,
        pg_split: true,
    };
    pub const NONE: Faults = Faults {
        crash: false,
        net_reset: false,
        partition: false,
        slow: false,
        out_in: false,
        pool_changes: false,
        pg_split: false,
    };

    /// What the OSD core survives today for a pool of `size` (see docs/simulation.md, "Fault menu"): data
    /// movement (out/in) needs a second copy, so it stays off for size-1 pools; pools created while their
    /// primary is down are an open finding, so `pools` is off by default. `split` is off by default too (its
    /// CI seeds are in tests/split.rs, with several shards per OSD).
    pub fn supported(size: u8) -> Faults {
        Faults {
            out_in: size > 1,
            pg_split: false,
            pool_changes: false,
            ..Faults::ALL
        }
    }

    fn flags(&self) -> String {
        let all = [
            (self.crash, "crash"),
            (self.net_reset, "reset"),
            (self.partition, "partition"),
            (self.slow, "slow"),
            (self.out_in, "out-in"),
            (self.pool_changes, "pools"),
            (self.pg_split, "split"),
        ];
        let on: Vec<&str> = all.iter().filter(|(b, _)| *b).map(|(_, n)| *n).collect();
        if on.is_empty() {
            "none".into()
        } else {
            on.join(",")
        }
    }

    /// Parse a `--faults` list (`all`, `none`, or names joined by commas).
    pub fn parse(s: &str) -> Result<Faults, String> {
        match s {
            "all" => return Ok(Faults::ALL),
            "none" => return Ok(Faults::NONE),
            _ => {}
        }
        let mut f = Faults::NONE;
        for n in s.split(',') {
            match n {
                "crash" => f.crash = true,
                "reset" => f.net_reset = true,
                "partition" => f.partition = true,
                "slow" => f.slow = true,
                "out-in" => f.out_in = true,
                "pools" => f.pool_changes = true,
                "split" => f.pg_split = true,
                _ => return Err(format!("unknown fault {n:?}")),
            }
        }
        Ok(f)
    }
}

/// A deliberately broken component, to show the oracle catches it (issue 8's seeded bugs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Bug {
    #[default]
    None,
    /// The device acknowledges flushes without making writes durable: acknowledged writes are lost at a crash
    /// (a stand-in for storage bugs from outside the store; see also [`Bug::ReplayOrder`]).
    LyingFlush,
    /// Replica ONDISK answers are forged and the replica never gets the write: the primary acknowledges
    /// writes it alone holds (a stand-in from outside the OSD; see also [`Bug::AckBeforeReplicas`]).
    AckWithoutReplica,
    /// ferrostore replays the WAL newest record first (`StoreConfig::fault_replay_order`): after a crash an
    /// older record's changes overwrite a newer one's.
    ReplayOrder,
    /// The primary releases a write's client reply once it is durable locally, without waiting for the
    /// replicas' commits (`pg::PgConfig::fault_ack_before_replicas`).
    AckBeforeReplicas,
    /// Peering takes the stalest complete shard's log as authoritative (`peering::Config::fault_pick_worst_log`).
    WorstLog,
    /// A restarted OSD starts from the monitor's current map instead of replaying every epoch after the newest
    /// it stored (how ferro-osd worked before map history): intervals that began and ended while it was down
    /// are unknown to it.
    NoMapReplay,
    /// An OSD seeing a new session from a peer whose last one broke does not resend what that peer has not
    /// answered (ferro-osd before it did): the peer's answers sent on the dead session before it noticed are
    /// lost, and the writes wait for the primary's overdue-resend timer (`repops_resent_overdue`).
    NoReconnectReset,
}

impl Bug {
    pub fn parse(s: &str) -> Result<Bug, String> {
        match s {
            "none" => Ok(Bug::None),
            "lying-flush" => Ok(Bug::LyingFlush),
            "ack-without-replica" => Ok(Bug::AckWithoutReplica),
            "replay-order" => Ok(Bug::ReplayOrder),
            "ack-before-replicas" => Ok(Bug::AckBeforeReplicas),
            "worst-log" => Ok(Bug::WorstLog),
            "no-map-replay" => Ok(Bug::NoMapReplay),
            "no-reconnect-reset" => Ok(Bug::NoReconnectReset),
            _ => Err(format!(
                "unknown bug {s:?} (none, lying-flush, ack-without-replica, replay-order, ack-before-replicas, \
                 worst-log, no-map-replay, no-reconnect-reset)"
            )),
        }
    }
    fn name(&self) -> &'static str {
        match self {
            Bug::None => "none",
            Bug::LyingFlush => "lying-flush",
            Bug::AckWithoutReplica => "ack-without-replica",
            Bug::ReplayOrder => "replay-order",
            Bug::AckBeforeReplicas => "ack-before-replicas",
            Bug::WorstLog => "worst-log",
            Bug::NoMapReplay => "no-map-replay",
            Bug::NoReconnectReset => "no-reconnect-reset",
        }
    }
}

/// One run.
#[derive(Debug, Clone)]
pub struct Config {
    pub seed: u64,
    /// Events processed with faults on; then faults stop and the cluster must converge.
    pub steps: u64,
    pub osds: u32,
    /// ferrostore shards (OsdShards) per OSD; 0 = 1 or 2, from the seed.
    pub shards: u32,
    /// Pool 1's size (min_size = ceil(size/2)).
    pub pool_size: u8,
    pub pg_num: u32,
    pub objects: u32,
    pub clients: u32,
    /// Ops in flight per client.
    pub max_inflight: u32,
    pub faults: Faults,
    /// Spacing of fault actions (milliseconds of simulated time, uniform in 10..10+this).
    pub chaos_interval_ms: u64,
    pub bug: Bug,
    /// Events allowed after faults stop before "no convergence" is a failure.
    pub quiet_events: u64,
    /// Lines of trace kept for a failure report.
    pub trace_len: usize,
    /// Include the OSDs' own log lines in the trace.
    pub verbose: bool,
    /// Size of each OSD's simulated device in MiB (its layout changes the IO pattern, hence the run).
    pub device_mib: u32,
    /// Every OSD–OSD partition is followed, 50–250 ms later, by a crash of one side (a fault schedule that
    /// leaves writes only one side holds on a down OSD; `--partition-crash`).
    pub partition_crash: bool,
    /// One OSD–OSD reset in two is noticed by its second end 1–50 ms late, and what that end sends meanwhile is
    /// lost (`--late-notice`; off by default, which keeps the recorded seeds' paths).
    pub late_notice: bool,
}

impl Config {
    /// Defaults for a seed: 3 OSDs, size-1 pool (osd-core's first milestone), every supported fault.
    pub fn new(seed: u64) -> Self {
        Config {
            seed,
            steps: 3000,
            osds: 3,
            shards: 0,
            pool_size: 1,
            pg_num: 8,
            objects: 12,
            clients: 2,
            max_inflight: 4,
            faults: Faults::supported(1),
            chaos_interval_ms: 150,
            bug: Bug::None,
            quiet_events: 400_000,
            trace_len: 40,
            verbose: false,
            device_mib: 6,
            partition_crash: false,
            late_notice: false,
        }
    }

    /// The command that replays this run exactly.
    pub fn repro(&self) -> String {
        let d = Config::new(self.seed);
        let mut s = format!(
            "cargo xtask sim --seed {} --steps {} --osds {}",
            self.seed, self.steps, self.osds
        );
        if self.pool_size != d.pool_size {
            s.push_str(&format!(" --size {}", self.pool_size));
        }
        if self.shards != d.shards {
            s.push_str(&format!(" --shards {}", self.shards));
        }
        if self.pg_num != d.pg_num {
            s.push_str(&format!(" --pg-num {}", self.pg_num));
        }
        if self.objects != d.objects {
            s.push_str(&format!(" --objects {}", self.objects));
        }
        if self.clients != d.clients {
            s.push_str(&format!(" --clients {}", self.clients));
        }
        if self.faults != Faults::supported(self.pool_size) {
            s.push_str(&format!(" --faults {}", self.faults.flags()));
        }
        if self.device_mib != d.device_mib {
            s.push_str(&format!(" --device-mib {}", self.device_mib));
        }
        if self.late_notice {
            s.push_str(" --late-notice");
        }
        if self.partition_crash {
            s.push_str(" --partition-crash");
        }
        if self.bug != Bug::None {
            s.push_str(&format!(" --bug {}", self.bug.name()));
        }
        s
    }
}

/// What a run did.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub seed: u64,
    pub osds: u32,
    pub shards: u32,
    pub pool_size: u8,
    pub events: u64,
    pub sim_time: Duration,
    pub epochs: u32,
    pub messages: u64,
    pub ops: u64,
    pub writes_acked: u64,
    pub reads: u64,
    pub reads_checked: u64,
    pub resends: u64,
    pub crashes: u64,
    pub resets: u64,
    pub partitions: u64,
    pub misdirected: u64,
    pub unroutable: u64,
    pub objects_compared: u64,
    /// Messages sent on a session whose end had not noticed it broke (lost).
    pub messages_lost: u64,
    /// Replicated writes the primaries sent again on their overdue timer (running shards at the end).
    pub repops_resent_overdue: u64,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "seed {}: {} osds x {} shards, size {}; {} events, {:.3}s simulated, {} epochs, {} messages; \
             {} ops ({} writes acked, {} reads checked, {} resends); {} crashes, {} resets ({} messages lost on \
             dead sessions), {} partitions; {} rep ops resent when overdue; {} object copies compared",
            self.seed,
            self.osds,
            self.shards,
            self.pool_size,
            self.events,
            self.sim_time.as_secs_f64(),
            self.epochs,
            self.messages,
            self.ops,
            self.writes_acked,
            self.reads_checked,
            self.resends,
            self.crashes,
            self.resets,
            self.messages_lost,
            self.partitions,
            self.repops_resent_overdue,
            self.objects_compared
        )
    }
}

/// A failed run: why, how to replay it, what happened last.
#[derive(Debug, Clone)]
pub struct Failure {
    pub reason: String,
    pub repro: String,
    pub trace: Vec<String>,
    pub report: Report,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "SIMULATION FAILED: {}", self.reason)?;
        writeln!(f, "reproduce: {}", self.repro)?;
        writeln!(f, "last events:")?;
        for l in &self.trace {
            writeln!(f, "  {l}")?;
        }
        write!(f, "{}", self.report)
    }
}

/// Play one seed.
pub fn run(cfg: &Config) -> Result<Report, Box<Failure>> {
    match world::World::new(cfg.clone()) {
        Ok(w) => w.run(),
        Err(e) => Err(Box::new(Failure {
            reason: format!("setting up the cluster: {e}"),
            repro: cfg.repro(),
            trace: Vec::new(),
            report: Report::default(),
        })),
    }
}

/// Play seeds `seeds` with `base` as the template; stops at the first failure.
pub fn run_many(base: &Config, seeds: std::ops::Range<u64>) -> Result<Vec<Report>, Box<Failure>> {
    let mut out = Vec::new();
    for s in seeds {
        let cfg = Config {
            seed: s,
            ..base.clone()
        };
        out.push(run(&cfg)?);
    }
    Ok(out)
}

/// The command-line front end shared by `ferro-sim` and `cargo xtask sim`.
pub mod cli {
    use super::*;

    pub const USAGE: &str = "usage: sim [--seed S | --seeds A..B] [--steps N] [--osds K] [--size N] [--shards N] \
[--pg-num N] [--objects N] [--clients N] [--faults all|none|crash,reset,partition,slow,out-in,pools,split] \
[--bug none|lying-flush|ack-without-replica|replay-order|ack-before-replicas|worst-log|no-map-replay|no-reconnect-reset] [--partition-crash] [--late-notice] [--verbose] [--trace LINES] [--device-mib N]";

    /// Parse arguments (without the program name) into a template config and a seed range.
    pub fn parse(args: &[String]) -> Result<(Config, std::ops::Range<u64>), String> {
        let mut cfg = Config::new(0);
        let mut seeds = 0..1;
        let mut faults: Option<Faults> = None;
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut val = || it.next().cloned().ok_or(format!("{a} needs a value"));
            let num = |v: String| v.parse::<u64>().map_err(|e| format!("{a}: {e}"));
            match a.as_str() {
                "--seed" => {
                    let s = num(val()?)?;
                    seeds = s..s + 1;
                }
                "--seeds" => {
                    let v = val()?;
                    let (x, y) = v.split_once("..").ok_or("--seeds A..B")?;
                    seeds = num(x.into())?..num(y.into())?;
                }
                "--steps" => cfg.steps = num(val()?)?,
                "--osds" => cfg.osds = num(val()?)? as u32,
                "--size" => cfg.pool_size = num(val()?)? as u8,
                "--shards" => cfg.shards = num(val()?)? as u32,
                "--pg-num" => cfg.pg_num = num(val()?)? as u32,
                "--objects" => cfg.objects = num(val()?)? as u32,
                "--clients" => cfg.clients = num(val()?)? as u32,
                "--faults" => faults = Some(Faults::parse(&val()?)?),
                "--bug" => cfg.bug = Bug::parse(&val()?)?,
                "--verbose" => cfg.verbose = true,
                "--partition-crash" => cfg.partition_crash = true,
                "--late-notice" => cfg.late_notice = true,
                "--trace" => cfg.trace_len = num(val()?)? as usize,
                "--device-mib" => cfg.device_mib = (num(val()?)? as u32).max(2),
                "-h" | "--help" => return Err(USAGE.into()),
                _ => return Err(format!("unknown argument {a:?}\n{USAGE}")),
            }
        }
        cfg.faults = faults.unwrap_or(Faults::supported(cfg.pool_size));
        Ok((cfg, seeds))
    }

    /// Run and print; returns the process exit code (0 = every seed passed).
    pub fn main_with_args(args: &[String]) -> i32 {
        let (cfg, seeds) = match parse(args) {
            Ok(x) => x,
            Err(e) => {
                eprintln!("{e}");
                return 2;
            }
        };
        let n = seeds.end.saturating_sub(seeds.start);
        let start = std::time::Instant::now();
        let mut events = 0;
        for s in seeds {
            let c = Config {
                seed: s,
                ..cfg.clone()
            };
            match run(&c) {
                Ok(r) => {
                    events += r.events;
                    if n <= 20 || cfg.verbose {
                        println!("ok {r}");
                    }
                }
                Err(f) => {
                    println!("{f}");
                    return 1;
                }
            }
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{n} seed(s) passed in {secs:.2}s ({:.1} seeds/s, {:.0} events/s)",
            n as f64 / secs.max(1e-9),
            events as f64 / secs.max(1e-9)
        );
        0
    }
}
