// SPDX-License-Identifier: LGPL-3.0-or-later
//! The command line of `cargo xtask bench compare` (xtask embeds [`CompareArgs`]) and what it writes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{BenchError, Result, io_err};
use crate::matrix::select_tests;
use crate::render::{markdown_table, svg_chart};
use crate::report::{GroupStatus, Report};
use crate::runner::{BlueStoreProfile, GroupSpec, OsdKind, RunOptions, run};

/// Options of `cargo xtask bench compare`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompareArgs {
    /// Smoke test: tiny data set, 1 s per test; checks that everything runs, never speed (≤ 2 min).
    #[arg(long)]
    pub quick: bool,
    /// Replicas per pool (1 to 3); each kind needs at least that many OSDs (--osds).
    #[arg(long, visible_alias = "size", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=3))]
    pub pool_size: u32,
    /// OSDs per kind (default: the pool size).
    #[arg(long)]
    pub osds: Option<u32>,
    /// Seconds per test and kind (default 15; 1 in quick mode).
    #[arg(long)]
    pub runtime: Option<u32>,
    /// Rounds of the whole matrix: every test runs this many times on each kind (alternating which goes first)
    /// and the report gives each number's median over the rounds, with every round's ratios beside them. On a
    /// shared VM one round's rows move with the host; 3 rounds give a median that does not (1 in quick mode).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=9))]
    pub rounds: u32,
    /// The classic OSDs' settings profile: `auto` (Ceph's default: by the disk's rotational flag, which a VM's
    /// virtio disk often sets whatever is behind it), `ssd` or `hdd` (`bluestore debug enforce settings`). The
    /// report says which ran and what the disk's flag is.
    #[arg(long, default_value = "auto", value_parser = ["auto", "ssd", "hdd"])]
    pub bluestore_profile: String,
    /// Only tests whose id starts with one of these, or has it after a `-` (comma-separated), e.g. `4k-rand,omap,qd1`.
    #[arg(long, value_delimiter = ',')]
    pub tests: Vec<String>,
    /// 4 MiB objects per pool (default 256 = 1 GiB; 8 in quick mode).
    #[arg(long)]
    pub objects: Option<u32>,
    /// Size of each OSD's device file in GiB (equal for both kinds).
    #[arg(long, default_value_t = 4)]
    pub device_size_gib: u64,
    /// Leave the device files sparse (default: every OSD's file, of both kinds, is zero-filled before its mkfs,
    /// so no write pays for block allocation in the file system; quick mode always leaves them sparse).
    #[arg(long)]
    pub sparse_devices: bool,
    /// The kinds to run: one or two OSD kinds, baseline first (`bluestore`, `ferro`; e.g. `bluestore,bluestore`
    /// checks the pipeline with two classic groups), and `raw`: the same fio tests straight on files of the
    /// device size, the device's ceiling for each row (docs/benchmarks.md).
    #[arg(long, value_delimiter = ',', default_value = "bluestore,ferro,raw")]
    pub kinds: Vec<String>,
    /// The ferro-osd binary (default: `cargo build --release -p ferro-osd`).
    #[arg(long)]
    pub ferro_osd_bin: Option<PathBuf>,
    /// Do not build ferro-osd; use --ferro-osd-bin or target/release/ferro-osd.
    #[arg(long)]
    pub no_build: bool,
    /// ferrostore shards (reactor cores, one thread each) per ferro-osd. Default: the CPUs this process may use
    /// divided by the OSDs per kind plus one (the fio/python client runs on the same host), at least 1 — as an
    /// operator sizes a host: no more reactor threads than CPUs left for them (1 on the 2-vCPU machine at pool
    /// size 1 and 3; docs/benchmarks.md, "What we tried — wakeups and syscalls").
    #[arg(long)]
    pub ferro_shards: Option<u32>,
    /// A ferro-osd configuration option for this run, `KEY=VALUE` (repeatable; each ferro-osd gets
    /// `--KEY=VALUE`), e.g. `--ferro-conf ferro_reactor_sched_slice_us=300`: A/B runs of an option. Listed in the
    /// report's header.
    #[arg(long = "ferro-conf", value_name = "KEY=VALUE")]
    pub ferro_conf: Vec<String>,
    /// Set the VM guest's halt polling (the `haltpoll` cpuidle driver's `guest_halt_poll_ns`, root only) to
    /// this many ns for the run, and back after it: how long an idle vCPU polls before it halts, so a wake-up
    /// within it skips a trip through the hypervisor. It moves both kinds' QD1 rows; the report records the
    /// machine's setting either way (docs/benchmarks.md, "What the VM's idle vCPUs cost").
    #[arg(long, value_name = "NS")]
    pub guest_halt_poll_ns: Option<u64>,
    /// Output directory (default target/bench-compare/<date>-<time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

fn workspace() -> PathBuf {
    let ws = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    ws.canonicalize().unwrap_or(ws)
}

fn build_ferro_osd(ws: &Path) -> std::result::Result<PathBuf, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    eprintln!("bench compare: cargo build --release -p ferro-osd");
    crate::util::run(
        Command::new(cargo)
            .args(["build", "--release", "-p", "ferro-osd"])
            .current_dir(ws),
        Duration::from_secs(1800),
    )
    .map_err(|e| format!("building ferro-osd failed: {e}"))?;
    let target = std::env::var("CARGO_TARGET_DIR").map_or_else(|_| ws.join("target"), PathBuf::from);
    Ok(target.join("release/ferro-osd"))
}

/// `--ferro-shards`, or CPUs / (OSDs per kind + the client), at least 1.
pub fn ferro_shards(a: &CompareArgs) -> u32 {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    a.ferro_shards
        .unwrap_or_else(|| auto_shards(cpus, a.osds.unwrap_or(a.pool_size)))
}

/// Reactor cores per ferro-osd when `osds` of them and the benchmark client share `cpus` CPUs. Cores beyond
/// that only add cross-core hand-offs, each a wake-up of a thread that then competes for the same CPUs.
pub fn auto_shards(cpus: u32, osds: u32) -> u32 {
    (cpus / (osds.max(1) + 1)).max(1)
}

/// The OSD kinds of `--kinds` (in order) and whether `raw` is among them (at most once).
fn split_kinds(kinds: &[String]) -> Result<(Vec<String>, bool)> {
    let raws = kinds.iter().filter(|k| *k == "raw").count();
    let osd: Vec<String> = kinds.iter().filter(|k| *k != "raw").cloned().collect();
    if osd.is_empty() || osd.len() > 2 || raws > 1 {
        return Err(BenchError::Usage(
            "--kinds takes one or two of bluestore, ferro, and optionally raw".into(),
        ));
    }
    Ok((osd, raws == 1))
}

/// Turns the kinds list into groups (labels get a numeric suffix when a kind repeats).
fn groups(a: &CompareArgs, ws: &Path) -> Result<Vec<GroupSpec>> {
    let (kinds, _) = split_kinds(&a.kinds)?;
    let mut out: Vec<GroupSpec> = Vec::new();
    let shards = ferro_shards(a);
    let conf = ferro_conf(&a.ferro_conf)?;
    let mut ferro_bin: Option<std::result::Result<PathBuf, String>> = None;
    for (i, k) in kinds.iter().enumerate() {
        let label = if kinds[..i].contains(k) {
            format!("{k}{}", i + 1)
        } else {
            k.clone()
        };
        let (kind, unavailable) = match k.as_str() {
            "bluestore" => (OsdKind::Classic, None),
            "ferro" => {
                let bin = ferro_bin
                    .get_or_insert_with(|| match (&a.ferro_osd_bin, a.no_build) {
                        (Some(b), _) => Ok(b.clone()),
                        (None, true) => Ok(ws.join("target/release/ferro-osd")),
                        (None, false) => build_ferro_osd(ws),
                    })
                    .clone();
                match bin {
                    Ok(b) => (
                        OsdKind::Ferro {
                            binary: b,
                            shards,
                            conf: conf.clone(),
                        },
                        None,
                    ),
                    Err(why) => (
                        OsdKind::Ferro {
                            binary: PathBuf::new(),
                            shards,
                            conf: conf.clone(),
                        },
                        Some(why),
                    ),
                }
            }
            other => {
                return Err(BenchError::Usage(format!(
                    "unknown kind {other:?} (bluestore, ferro, raw)"
                )));
            }
        };
        out.push(GroupSpec {
            label,
            kind,
            unavailable,
        });
    }
    Ok(out)
}

/// `--ferro-conf KEY=VALUE` values as (key, value); keys are option names (letters, digits, `_`, `-`, spaces).
pub fn ferro_conf(items: &[String]) -> Result<Vec<(String, String)>> {
    items
        .iter()
        .map(|kv| {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| BenchError::Usage(format!("--ferro-conf {kv:?}: expected KEY=VALUE")))?;
            let k = k.trim().trim_start_matches("--");
            if k.is_empty()
                || !k
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ' '))
            {
                return Err(BenchError::Usage(format!("--ferro-conf {kv:?}: bad option name")));
            }
            Ok((k.replace([' ', '-'], "_"), v.trim().to_string()))
        })
        .collect()
}

/// Options for `args` (quick-mode defaults applied).
pub fn options(a: &CompareArgs) -> Result<RunOptions> {
    let ws = workspace();
    Ok(RunOptions {
        groups: groups(a, &ws)?,
        osds_per_group: a.osds.unwrap_or(a.pool_size).max(1),
        pool_size: a.pool_size,
        device_size_bytes: a.device_size_gib << 30,
        zero_fill_devices: !a.sparse_devices && !a.quick,
        pg_num: if a.quick { 8 } else { 32 },
        objects: a.objects.unwrap_or(if a.quick { 8 } else { 256 }),
        omap_keys: if a.quick { 64 } else { 1024 },
        runtime_s: a.runtime.unwrap_or(if a.quick { 1 } else { 15 }),
        rounds: if a.quick { 1 } else { a.rounds },
        bluestore_profile: match a.bluestore_profile.as_str() {
            "ssd" => BlueStoreProfile::Ssd,
            "hdd" => BlueStoreProfile::Hdd,
            _ => BlueStoreProfile::Auto,
        },
        tests: select_tests(&a.tests)?,
        quick: a.quick,
        workspace: ws,
        raw: split_kinds(&a.kinds)?.1,
    })
}

/// Writes `result.json`, `chart.svg` and `table.md` into `dir`.
pub fn write_outputs(r: &Report, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(io_err(format!("creating {}", dir.display())))?;
    let json = serde_json::to_string_pretty(&r.to_json()).map_err(|e| BenchError::BadOutput {
        tool: "serde_json".into(),
        detail: e.to_string(),
    })?;
    for (name, text) in [
        ("result.json", json + "\n"),
        ("chart.svg", svg_chart(r)),
        ("table.md", markdown_table(r)),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(io_err(format!("writing {}", p.display())))?;
    }
    Ok(())
}

/// `cargo xtask bench compare`: runs, writes the outputs, prints the table. Fails (after writing) if a test
/// failed on a group that ran, so CI notices.
pub fn main_with_args(a: CompareArgs) -> Result<()> {
    let opts = options(&a)?;
    // Held until the outputs are written; dropping it restores the machine's value.
    let _halt_poll = match a.guest_halt_poll_ns {
        Some(ns) => {
            let g = crate::idle::set_halt_poll(ns)?;
            eprintln!(
                "bench compare: guest_halt_poll_ns {} -> {ns} for this run (restored at its end; if the run is \
                 killed: echo {} > {})",
                g.old(),
                g.old(),
                crate::idle::HALT_POLL_NS
            );
            Some(g)
        }
        None => None,
    };
    let report = run(&opts)?;
    let dir = a.out.clone().unwrap_or_else(|| {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        // "2026-11-30 10:54 UTC" -> "20261130-1054"
        let stamp: String = crate::util::utc_string(now)
            .trim_end_matches(" UTC")
            .chars()
            .filter_map(|c| match c {
                '-' | ':' => None,
                ' ' => Some('-'),
                c => Some(c),
            })
            .collect();
        opts.workspace
            .join("target/bench-compare")
            .join(format!("{stamp}{}", if a.quick { "-quick" } else { "" }))
    });
    write_outputs(&report, &dir)?;
    println!("{}", markdown_table(&report));
    println!(
        "written: {0}/result.json {0}/chart.svg {0}/table.md",
        dir.display()
    );
    for g in &report.groups {
        if let GroupStatus::Skipped(why) = &g.status {
            println!(
                "NOTE: the {} side was skipped: {}",
                g.label,
                why.lines().next().unwrap_or("")
            );
        }
    }
    let failed: Vec<String> = report
        .tests
        .iter()
        .flat_map(|t| {
            report
                .groups
                .iter()
                .zip(&t.results)
                .filter_map(move |(g, r)| match (&g.status, r) {
                    (GroupStatus::Ran, Err(e)) => Some(format!(
                        "{} on {}: {}",
                        t.id,
                        g.label,
                        e.lines().next().unwrap_or("")
                    )),
                    _ => None,
                })
        })
        .collect();
    if !failed.is_empty() {
        return Err(BenchError::Tool {
            command: "bench compare".into(),
            detail: format!("{} test(s) failed:\n{}", failed.len(), failed.join("\n")),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: CompareArgs,
    }

    #[test]
    fn quick_defaults_and_kinds() {
        let t = T::parse_from([
            "x",
            "--quick",
            "--kinds",
            "bluestore,bluestore",
            "--tests",
            "omap",
        ]);
        let o = options(&t.a).unwrap();
        assert_eq!((o.runtime_s, o.rounds), (1, 1));
        assert_eq!(o.objects, 8);
        assert_eq!(o.tests.len(), 3);
        let labels: Vec<&str> = o.groups.iter().map(|g| g.label.as_str()).collect();
        assert_eq!(labels, ["bluestore", "bluestore2"]);
        let t = T::parse_from([
            "x",
            "--pool-size",
            "3",
            "--no-build",
            "--ferro-osd-bin",
            "/nonexistent/ferro-osd",
        ]);
        let o = options(&t.a).unwrap();
        assert_eq!(
            (o.pool_size, o.osds_per_group, o.runtime_s, o.rounds),
            (3, 3, 15, 1)
        );
        let t = T::parse_from(["x", "--no-build", "--rounds", "3"]);
        assert_eq!(options(&t.a).unwrap().rounds, 3);
        assert_eq!(options(&t.a).unwrap().bluestore_profile, BlueStoreProfile::Auto);
        let t = T::parse_from(["x", "--no-build", "--bluestore-profile", "ssd"]);
        assert_eq!(options(&t.a).unwrap().bluestore_profile, BlueStoreProfile::Ssd);
        assert!(T::try_parse_from(["x", "--bluestore-profile", "nvme"]).is_err());
        // Quick mode is a smoke test: one round whatever was asked.
        let t = T::parse_from(["x", "--quick", "--rounds", "3"]);
        assert_eq!(options(&t.a).unwrap().rounds, 1);
        assert!(T::try_parse_from(["x", "--rounds", "0"]).is_err());
        assert!(matches!(&o.groups[1].kind, OsdKind::Ferro { binary, .. } if binary.ends_with("ferro-osd")));
        assert!(matches!(&o.groups[1].kind, OsdKind::Ferro { conf, .. } if conf.is_empty()));
        // --ferro-conf: repeatable KEY=VALUE, normalised option names.
        let t = T::parse_from([
            "x",
            "--no-build",
            "--ferro-conf",
            "ferro_reactor_sched_slice_us=300",
            "--ferro-conf",
            "ferro-reactor-nice = -5",
        ]);
        let o = options(&t.a).unwrap();
        let want = vec![
            ("ferro_reactor_sched_slice_us".to_string(), "300".to_string()),
            ("ferro_reactor_nice".to_string(), "-5".to_string()),
        ];
        assert!(matches!(&o.groups[1].kind, OsdKind::Ferro { conf, .. } if *conf == want));
        for bad in ["novalue", "=3", "a;b=1"] {
            let t = T::parse_from(["x", "--no-build", "--ferro-conf", bad]);
            assert!(options(&t.a).is_err(), "{bad}");
        }
        let t = T::parse_from(["x", "--no-build", "--guest-halt-poll-ns", "200000"]);
        assert_eq!(t.a.guest_halt_poll_ns, Some(200_000));
        assert!(T::try_parse_from(["x", "--guest-halt-poll-ns", "-1"]).is_err());
        assert!(T::try_parse_from(["x", "--pool-size", "4"]).is_err());
        // `--size 3` is the short spelling of `--pool-size 3`.
        let t = T::parse_from(["x", "--size", "3", "--no-build"]);
        let o = options(&t.a).unwrap();
        assert_eq!((o.pool_size, o.osds_per_group), (3, 3));
        let t = T::parse_from(["x", "--kinds", "zfs"]);
        assert!(options(&t.a).is_err());
        // An explicit shard count wins; without one, CPUs per OSD of a kind.
        let t = T::parse_from(["x", "--size", "3", "--no-build", "--ferro-shards", "4"]);
        let o = options(&t.a).unwrap();
        assert!(matches!(&o.groups[1].kind, OsdKind::Ferro { shards: 4, .. }));
        let t = T::parse_from(["x", "--size", "3", "--no-build"]);
        assert_eq!(ferro_shards(&t.a), auto_shards(cpus(), 3));
    }

    #[test]
    fn raw_is_a_kind_beside_the_osd_kinds() {
        // Default: BlueStore, ferro-osd and the raw reference.
        let t = T::parse_from(["x", "--no-build"]);
        let o = options(&t.a).unwrap();
        assert!(o.raw);
        let labels: Vec<&str> = o.groups.iter().map(|g| g.label.as_str()).collect();
        assert_eq!(labels, ["bluestore", "ferro"]);
        // Anywhere in the list; never a group.
        let t = T::parse_from(["x", "--kinds", "raw,bluestore"]);
        let o = options(&t.a).unwrap();
        assert!(o.raw);
        assert_eq!(o.groups.len(), 1);
        assert_eq!(o.groups[0].label, "bluestore");
        let t = T::parse_from(["x", "--no-build", "--kinds", "bluestore,ferro"]);
        assert!(!options(&t.a).unwrap().raw);
        for bad in [
            "raw",
            "raw,raw,bluestore",
            "bluestore,ferro,bluestore,raw",
            "bluestore,disk",
        ] {
            let t = T::parse_from(["x", "--no-build", "--kinds", bad]);
            assert!(options(&t.a).is_err(), "{bad}");
        }
    }

    fn cpus() -> u32 {
        std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
    }

    #[test]
    fn auto_shards_never_oversubscribe_and_never_drop_to_zero() {
        assert_eq!(auto_shards(2, 1), 1);
        assert_eq!(auto_shards(2, 3), 1);
        assert_eq!(auto_shards(8, 3), 2);
        assert_eq!(auto_shards(16, 1), 8);
        assert_eq!(auto_shards(1, 0), 1);
        assert_eq!(auto_shards(0, 3), 1);
    }
}
