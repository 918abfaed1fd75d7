// SPDX-License-Identifier: LGPL-3.0-or-later
//! `cargo xtask ...`: FerroCeph's developer tasks.
//!
//! - `cluster up|down|status`: a throwaway real Ceph 16.2 cluster (crate `testcluster`) for manual work,
//!   demos and benchmarks.
//! - `bench store`: ferrostore against raw fio on the same file (binary `ferrostore-bench`).
//! - `bench compare`: BlueStore against ferro-osd in one throwaway cluster, with raw fio on an equal-size file as
//!   the device ceiling (crate `bench-compare`).
//! - `sim`: the deterministic multi-OSD simulator (crate `sim`, docs/simulation.md).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use testcluster::{Cluster, ClusterSpec};

mod sim;

#[derive(Parser)]
#[command(name = "cargo xtask", about = "FerroCeph developer tasks")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// A throwaway real Ceph cluster (mon, mgr, classic BlueStore OSDs) on 127.0.0.1.
    Cluster {
        #[command(subcommand)]
        action: ClusterCmd,
    },
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        action: BenchCmd,
    },
    /// Deterministic multi-OSD simulation: `--seed S [--steps N] [--osds K]`, `--seeds A..B`, `--release`
    /// (docs/simulation.md).
    Sim {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

#[derive(Subcommand)]
enum BenchCmd {
    /// BlueStore vs ferro-osd in one throwaway cluster: the same fio/OMAP matrix on a pool per OSD kind
    /// (crate bench-compare; docs/benchmarks.md).
    Compare(bench_compare::CompareArgs),
    /// ferrostore vs raw fio (io_uring, O_DIRECT, same file, same queue depth); arguments go to
    /// `ferrostore-bench` (`--path FILE|/dev/X`, `--size 2G`, `--runtime 5`, `--loop`, `--only NAME`, ...).
    Store {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

#[derive(Subcommand)]
enum ClusterCmd {
    /// Start a cluster in DIR; its daemons keep running after this command exits. Prints CEPH_CONF=...
    Up {
        /// Cluster directory (created; a stopped cluster directory is wiped and reused).
        #[arg(long)]
        dir: PathBuf,
        /// Number of classic ceph-osd (BlueStore on a sparse file) OSDs.
        #[arg(long, default_value_t = 0)]
        classic_osds: u32,
        /// Size of each OSD's sparse block file, in GiB.
        #[arg(long, default_value_t = 2)]
        osd_size_gib: u64,
        /// Extra ceph.conf line as SECTION:KEY=VALUE, e.g. "osd:debug osd=20" (repeatable).
        #[arg(long = "conf", value_name = "SECTION:KEY=VALUE", value_parser = parse_conf)]
        conf: Vec<(String, String, String)>,
        /// Start no mgr (faster; `ceph -s` then warns, `pg stat` and `rados bench` reports are unavailable).
        #[arg(long)]
        no_mgr: bool,
        /// Number of ferro-osd OSDs (ferrostore on a sparse file; device class `ferro`).
        #[arg(long, default_value_t = 0)]
        ferro_osds: u32,
        /// The ferro-osd binary (default: build it with `cargo build --release -p ferro-osd`).
        #[arg(long)]
        ferro_osd_bin: Option<PathBuf>,
        /// ferrostore shards (worker threads) per ferro-osd.
        #[arg(long, default_value_t = 2)]
        ferro_shards: u32,
    },
    /// Kill every process of the cluster in DIR and verify none remains.
    Down {
        #[arg(long)]
        dir: PathBuf,
        /// Also remove DIR (logs, stores).
        #[arg(long)]
        purge: bool,
    },
    /// Show the cluster's processes and `ceph -s`.
    Status {
        #[arg(long)]
        dir: PathBuf,
    },
}

/// `cargo build --release -p ferro-osd`; returns the binary's path.
fn build_ferro_osd() -> Result<PathBuf, Box<dyn std::error::Error>> {
    let ws = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let st = std::process::Command::new(cargo)
        .args(["build", "--release", "-p", "ferro-osd"])
        .current_dir(&ws)
        .status()?;
    if !st.success() {
        return Err("building ferro-osd failed".into());
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| ws.join("target"));
    Ok(target.join("release/ferro-osd"))
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), Box<dyn std::error::Error>> {
    match cli.cmd {
        Cmd::Cluster { action } => cluster(action),
        Cmd::Bench {
            action: BenchCmd::Compare(args),
        } => Ok(bench_compare::main_with_args(args)?),
        Cmd::Bench {
            action: BenchCmd::Store { args },
        } => bench_store(args),
        Cmd::Sim { args } => sim::run(args),
    }
}

/// Runs the engine benchmark as a release binary: a debug build would measure the compiler, not the engine.
fn bench_store(mut args: Vec<String>) -> Result<(), Box<dyn std::error::Error>> {
    for (flag, default) in [("--size", "2G"), ("--runtime", "5")] {
        if !args.iter().any(|a| a == flag) {
            args.extend([flag.to_string(), default.to_string()]);
        }
    }
    let status = std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "run",
            "--quiet",
            "--release",
            "-p",
            "ferrostore",
            "--bin",
            "ferrostore-bench",
            "--",
        ])
        .args(&args)
        .status()?;
    if !status.success() {
        return Err(format!("ferrostore-bench failed: {status}").into());
    }
    Ok(())
}

fn cluster(action: ClusterCmd) -> Result<(), Box<dyn std::error::Error>> {
    match action {
        ClusterCmd::Up {
            dir,
            classic_osds,
            osd_size_gib,
            conf,
            no_mgr,
            ferro_osds,
            ferro_osd_bin,
            ferro_shards,
        } => {
            let t0 = Instant::now();
            let ferro = if ferro_osds > 0 {
                let bin = match ferro_osd_bin {
                    Some(b) => b,
                    None => build_ferro_osd()?,
                };
                let mut f = testcluster::FerroOsd::new(bin);
                f.device_size_bytes = osd_size_gib << 30;
                f.shards = ferro_shards;
                Some(f)
            } else {
                None
            };
            let spec = ClusterSpec {
                classic_osds,
                mgr: !no_mgr,
                osd_block_size_bytes: osd_size_gib << 30,
                extra_conf: conf,
                ..Default::default()
            };
            let c = Cluster::start_detached(&dir, &spec)?;
            if let Some(f) = &ferro {
                if classic_osds > 0 {
                    // ferro-osd cannot backfill, so it serves only pools whose rule stays within its device class;
                    // keep the classic OSDs' pools (e.g. the mgr's) on a class rule before ferro OSDs join.
                    c.ceph(&[
                        "osd",
                        "crush",
                        "rule",
                        "create-replicated",
                        "on-hdd",
                        "default",
                        "osd",
                        "hdd",
                    ])?;
                    for pool in c.ceph(&["osd", "pool", "ls"])?.lines().filter(|l| !l.is_empty()) {
                        c.ceph(&["osd", "pool", "set", pool, "crush_rule", "on-hdd"])?;
                    }
                }
                for _ in 0..ferro_osds {
                    let id = c.add_osd(f)?;
                    eprintln!("ferro-osd osd.{id} up");
                }
                if classic_osds > 0 {
                    c.ceph(&[
                        "osd",
                        "crush",
                        "rule",
                        "create-replicated",
                        "on-ferro",
                        "default",
                        "osd",
                        "ferro",
                    ])?;
                    eprintln!(
                        "CRUSH rules: on-hdd (classic OSDs, existing pools), on-ferro (ferro-osd OSDs)"
                    );
                }
            }
            eprintln!(
                "cluster {} up in {:.1} s: mon {} , daemons {:?}",
                c.fsid(),
                t0.elapsed().as_secs_f64(),
                c.mon_host(),
                c.daemons()
            );
            // The one line on stdout, so `eval "$(cargo xtask cluster up ...)"` or `export $(...)` works.
            println!("CEPH_CONF={}", c.conf_path().display());
        }
        ClusterCmd::Down { dir, purge } => {
            let n = Cluster::stop_dir(&dir)?;
            eprintln!("stopped {n} process(es); none of the cluster's processes remains");
            if purge {
                std::fs::remove_dir_all(&dir)?;
            }
        }
        ClusterCmd::Status { dir } => {
            let c = Cluster::open(&dir)?;
            // Write errors (e.g. `| head` closing the pipe) are not failures of the command.
            let mut out = std::io::stdout().lock();
            let _ = writeln!(
                out,
                "fsid {}  mon {}  conf {}",
                c.fsid(),
                c.mon_host(),
                c.conf_path().display()
            );
            let mut all_alive = true;
            for (name, pid, alive) in c.daemon_status() {
                all_alive &= alive;
                let _ = writeln!(
                    out,
                    "{name:8} pid {pid:7} {}",
                    if alive { "running" } else { "gone" }
                );
            }
            if all_alive {
                let _ = write!(out, "{}", c.ceph(&["-s"])?);
            }
        }
    }
    Ok(())
}

fn parse_conf(s: &str) -> Result<(String, String, String), String> {
    let (section, kv) = s.split_once(':').ok_or("expected SECTION:KEY=VALUE")?;
    let (key, value) = kv.split_once('=').ok_or("expected SECTION:KEY=VALUE")?;
    let (section, key) = (section.trim(), key.trim());
    if section.is_empty() || key.is_empty() {
        return Err("SECTION and KEY must not be empty".into());
    }
    Ok((section.to_owned(), key.to_owned(), value.trim().to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conf_lines_parse() {
        assert_eq!(
            parse_conf("osd:debug osd = 20").unwrap(),
            ("osd".into(), "debug osd".into(), "20".into())
        );
        assert_eq!(parse_conf("client.admin:k=a=b").unwrap().2, "a=b");
        assert!(parse_conf("debug osd=20").is_err());
        assert!(parse_conf("osd:debug osd").is_err());
        assert!(parse_conf(":k=v").is_err());
    }

    #[test]
    fn cli_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
